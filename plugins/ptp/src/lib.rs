//! The CNI ptp plugin: one veth pair per container, the container end
//! routed point-to-point to the host end, which holds the subnet's gateway.

pub mod add;
pub mod check;
pub mod config;
pub mod del;
pub mod gc;

use cni_skel::{CmdArgs, CmdResult, Plugin};
use std::process::ExitCode;

/// The plugin.
pub struct Ptp;

impl Plugin for Ptp {
    fn about(&self) -> String {
        cni_skel::about("ptp")
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
        cni_skel::delegate::ipam_run(cni_skel::Command::Status, args)?;
        Ok(cni_skel::Output::Nothing)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> ExitCode {
    cni_skel::run(&Ptp)
}
