//! The `dhcp` plugin binary: the plugin and its daemon are the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    dhcp::main(cni_skel::ProgramArgs::Process)
}
