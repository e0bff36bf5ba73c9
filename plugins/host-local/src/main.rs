//! The `host-local` IPAM plugin binary.

use std::process::ExitCode;

fn main() -> ExitCode {
    cni_skel::run(&host_local::HostLocal)
}
