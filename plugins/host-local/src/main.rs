//! The `host-local` IPAM plugin binary.

// dlmalloc rather than musl's allocator (see cni-alloc).
use cni_alloc as _;

fn main() -> std::process::ExitCode {
    host_local::main(cni_skel::ProgramArgs::Process)
}
