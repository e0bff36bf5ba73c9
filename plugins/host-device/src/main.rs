//! The `host-device` plugin binary: the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    host_device::main(cni_skel::ProgramArgs::Process)
}
