//! The CNI loopback plugin binary; the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    loopback::main(cni_skel::ProgramArgs::Process)
}
