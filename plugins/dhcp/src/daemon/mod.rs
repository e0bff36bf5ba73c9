//! `dhcp daemon`: flags, listener, one DHCP client per attachment.
//! (Placeholder of the shared base commit; the daemon half replaces it.)

use std::ffi::OsString;
use std::process::ExitCode;

pub fn main(_args: Vec<OsString>) -> ExitCode {
    eprintln!("dhcp daemon: not built yet");
    ExitCode::FAILURE
}
