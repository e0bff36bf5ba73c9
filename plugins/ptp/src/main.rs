//! The CNI ptp plugin: one veth pair per container, the container end
//! routed point-to-point to the host end, which holds the subnet's gateway.

mod add;
mod check;
mod config;
mod del;

use cni_skel::{CmdArgs, CmdResult, Plugin};
use std::process::ExitCode;

struct Ptp;

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
        del::gc(args)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        config::load(args)?;
        cni_skel::delegate::ipam_run(cni_skel::Command::Status, args)?;
        Ok(cni_skel::Output::Nothing)
    }
}

fn main() -> ExitCode {
    cni_skel::run(&Ptp)
}
