//! The CNI bridge plugin (see README.md).

fn main() -> std::process::ExitCode {
    bridge::main(std::env::args_os().skip(1).collect())
}
