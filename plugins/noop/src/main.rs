//! The `noop` test plugin binary; the plugin is the library (src/lib.rs).

// dlmalloc rather than musl's allocator (see cni-alloc).
use cni_alloc as _;

fn main() -> std::process::ExitCode {
    noop::main(cni_skel::ProgramArgs::Process)
}
