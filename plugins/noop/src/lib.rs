//! The CNI project's `noop` test plugin (cni:plugins/test/noop), rewritten.
//!
//! A test double: it records what it was called with in a "debug file" and
//! answers whatever that file tells it to. See [`debug`] for the protocol.
//!
//! Like the Go original, `main` reads stdin before the skel does, because the
//! versions the plugin claims (VERSION, and the version check of every
//! command) can come from the debug file named in the config. Where the Go
//! plugin panics (no or unreadable debug file while discovering versions)
//! this one answers with a CNI error (code 999) instead.

pub mod debug;

use cni_skel::{CmdArgs, CmdResult, Plugin, version};
use std::io::{Read, Write};
use std::process::ExitCode;

/// The about text, as the Go plugin prints it.
const ABOUT: &str = "CNI noop plugin v0.7.0";

struct Noop {
    versions: Vec<String>,
}

impl Plugin for Noop {
    fn about(&self) -> String {
        ABOUT.to_string()
    }

    fn supported_versions(&self) -> Vec<String> {
        self.versions.clone()
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        debug::behave(args, "ADD")
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        debug::behave(args, "DEL")
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        debug::behave(args, "CHECK")
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        debug::behave(args, "GC")
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        debug::behave(args, "STATUS")
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> ExitCode {
    let mut stdin = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut stdin) {
        let e = cni_skel::CniError::new(
            cni_skel::error::code::IO_FAILURE,
            format!("error reading from stdin: {e}"),
            "",
        );
        return fail(&e);
    }
    let cni_args = std::env::var("CNI_ARGS").unwrap_or_default();
    let versions = match debug::supported_versions(&stdin, &cni_args) {
        Ok(v) => v,
        Err(e) => return fail(&e),
    };
    cni_skel::run_with_stdin(&Noop { versions }, Box::new(std::io::Cursor::new(stdin)))
}

/// Prints an error as the skel would and exits 1.
fn fail(e: &cni_skel::CniError) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(e.to_json(version::CURRENT).as_bytes());
    let _ = out.flush();
    ExitCode::from(1)
}
