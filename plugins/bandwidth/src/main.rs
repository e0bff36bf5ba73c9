//! The CNI bandwidth plugin: limits a container's traffic with token
//! bucket filters, chained after a plugin that made a veth pair (ptp,
//! bridge). Traffic into the container is shaped by a tbf on the host end
//! of the veth; traffic out of it is redirected from the host end's
//! ingress to an ifb device and shaped by a tbf there.
//!
//! See README.md for the keys and where this differs from the reference.

mod add;
mod check;
mod config;
mod del;
mod host;
mod ifb;
mod shaping;
mod status;

use cni_skel::{CmdArgs, CmdResult, Plugin};
use std::process::ExitCode;

struct Bandwidth;

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
        del::gc(args)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        config::load(args)?;
        status::status()
    }
}

fn main() -> ExitCode {
    cni_skel::run(&Bandwidth)
}
