//! The `host-local` IPAM plugin binary.

// dlmalloc rather than musl's allocator (see cni-alloc).
use cni_alloc as _;

fn main() -> std::process::ExitCode {
    host_local::main(std::env::args_os().skip(1).collect())
}
