//! The `tuning` plugin binary: the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    tuning::main(cni_skel::ProgramArgs::Process)
}
