//! The `bandwidth` plugin binary: the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    bandwidth::main(cni_skel::ProgramArgs::Process)
}
