//! The CNI dummy plugin binary; the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    dummy::main(cni_skel::ProgramArgs::Process)
}
