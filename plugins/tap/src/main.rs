//! The CNI tap plugin binary; the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    tap::main(cni_skel::ProgramArgs::Process)
}
