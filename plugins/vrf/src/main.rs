//! The CNI vrf plugin binary; the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    vrf::main(cni_skel::ProgramArgs::Process)
}
