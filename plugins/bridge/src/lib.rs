//! The CNI bridge plugin: a Linux bridge on the host, one veth pair per
//! container with the host end on the bridge, addresses from IPAM.
//!
//! Behaviour follows the Go reference (plugins/main/bridge), with these
//! deliberate improvements: every key is validated before anything is
//! touched; a failed ADD undoes everything it did ([`rollback::Rollback`]);
//! DEL removes the masquerade and spoof-check rules even when the netns is
//! gone; CHECK works in L2 mode and with gateway-less routes; GC is
//! implemented; route MTU/advmss are applied.

pub mod add;
pub mod check;
pub mod config;
pub mod del;
pub mod gc;

use cni_skel::{CmdArgs, CmdResult, Plugin};

/// The plugin.
pub struct Bridge;

impl Plugin for Bridge {
    fn about(&self) -> String {
        cni_skel::about("bridge")
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
        gc::status(args)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
///
/// Before it returns, [`cni_fw::settle`] (after the masquerade's nf_tables
/// commit: the grace period waited with no lock held, issue 30).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    let code = cni_skel::run(&Bridge);
    cni_fw::settle(false);
    code
}
