//! The CNI vlan plugin binary; the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    vlan::main(cni_skel::ProgramArgs::Process)
}
