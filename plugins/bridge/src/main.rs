//! The CNI bridge plugin (see README.md).

fn main() -> std::process::ExitCode {
    bridge::main(cni_skel::ProgramArgs::Process)
}
