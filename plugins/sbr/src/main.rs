//! The CNI sbr plugin binary; the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    sbr::main(cni_skel::ProgramArgs::Process)
}
