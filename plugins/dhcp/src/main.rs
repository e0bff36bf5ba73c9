//! The `dhcp` plugin binary: the plugin and its daemon are the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    dhcp::main(std::env::args_os().skip(1).collect())
}
