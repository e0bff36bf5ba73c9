//! The CNI bandwidth plugin: limits a container's traffic with token
//! bucket filters, chained after a plugin that made a veth pair (ptp,
//! bridge). Traffic into the container is shaped by a tbf on the host end
//! of the veth; traffic out of it is redirected from the host end's
//! ingress to an ifb device and shaped by a tbf there.
//!
//! See README.md for the keys and where this differs from the reference.

pub mod add;
pub mod check;
pub mod config;
pub mod del;
pub mod gc;
pub mod host;
pub mod ifb;
pub mod shaping;
pub mod status;

use cni_skel::{CmdArgs, CmdResult, Plugin};
use std::process::ExitCode;

/// The plugin.
pub struct Bandwidth;

impl Plugin for Bandwidth {
    fn about(&self) -> String {
        cni_skel::about("bandwidth")
    }

    /// From 0.3.0, as the reference (chaining needs prevResult).
    fn supported_versions(&self) -> Vec<String> {
        cni_skel::version::since("0.3.0")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        add::add(args)
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        del::del(args)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        check::check(args)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        gc::gc(args)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        config::load(args)?;
        status::status()
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> ExitCode {
    cni_skel::run(&Bandwidth)
}
