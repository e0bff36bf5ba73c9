//! The `portmap` plugin binary: the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    portmap::main(std::env::args_os().skip(1).collect())
}
