//! The CNI macvlan plugin binary; the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    macvlan::main(cni_skel::ProgramArgs::Process)
}
