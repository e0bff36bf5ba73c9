//! The `ptp` plugin binary: the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    ptp::main(cni_skel::ProgramArgs::Process)
}
