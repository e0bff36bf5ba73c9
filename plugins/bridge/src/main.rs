//! The CNI bridge plugin (see README.md).

use std::process::ExitCode;

fn main() -> ExitCode {
    cni_skel::run(&bridge::Bridge)
}
