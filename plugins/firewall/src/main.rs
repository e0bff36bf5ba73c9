//! The `firewall` plugin binary: the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    firewall::main(cni_skel::ProgramArgs::Process)
}
