//! The `portmap` plugin binary: the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    portmap::main(cni_skel::ProgramArgs::Process)
}
