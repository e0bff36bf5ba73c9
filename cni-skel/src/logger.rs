//! Logging to stderr only (stdout is the protocol). Level from `RCNI_LOG`
//! (`error`, `warn`, `info`, `debug`, `trace`; default `warn`).

use log::{LevelFilter, Log, Metadata, Record};
use std::io::Write;

struct Stderr;

impl Log for Stderr {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record) {
        if self.enabled(r.metadata()) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{} {}: {}",
                r.level(),
                r.target(),
                r.args()
            );
        }
    }

    fn flush(&self) {}
}

/// Installs the stderr logger once.
pub fn init() {
    let level = match std::env::var("RCNI_LOG")
        .unwrap_or_default()
        .to_ascii_lowercase()
        .as_str()
    {
        "off" => LevelFilter::Off,
        "error" => LevelFilter::Error,
        "info" => LevelFilter::Info,
        "debug" => LevelFilter::Debug,
        "trace" => LevelFilter::Trace,
        _ => LevelFilter::Warn,
    };
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(level);
    }
}
