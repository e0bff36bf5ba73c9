//! The `host-local` IPAM plugin binary.

// dlmalloc rather than musl's allocator (see cni-alloc).
use cni_alloc as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    cni_skel::run(&host_local::HostLocal)
}
