//! The CNI ipvlan plugin binary; the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    ipvlan::main(cni_skel::ProgramArgs::Process)
}
