//! The CNI side of dhcp: ADD/CHECK call `DHCP.Allocate`, DEL `DHCP.Release`.
//! (Placeholder of the shared base commit; the rpc half replaces it.)

use std::process::ExitCode;

pub fn main() -> ExitCode {
    ExitCode::FAILURE
}
