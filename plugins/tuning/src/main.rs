//! The `tuning` plugin binary: the plugin is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    tuning::main(std::env::args_os().skip(1).collect())
}
