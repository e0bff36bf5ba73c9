//! The CNI tap plugin: a persistent TAP device in the container (for a VM
//! or a DPDK process to attach to), optionally a port of a bridge there,
//! with IPAM addresses or none (L2).
//!
//! The device is made by ioctl on `/dev/net/tun` inside the container's
//! namespace, under its final name and refusing a taken one: there is no
//! temporary name to leak and no foreign link to adopt. MTU, MAC, bridge
//! and state go through netlink. Any failure undoes everything.

pub mod add;
pub mod config;
pub mod selinux;

use cni_plugin::link_plugin::{self, Ctx, Expect};
use cni_skel::{CmdArgs, CmdResult, Output, ParseFor, Plugin};

/// The plugin.
pub struct Tap;

/// The kind the kernel reports for tun and tap devices.
const TUN_KIND: &str = "tun";

impl Plugin for Tap {
    fn about(&self) -> String {
        cni_skel::about("tap")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        add::add(args)
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(args)?;
        link_plugin::del_of_kind(args, conf.ipam.is_some(), Some(TUN_KIND))?;
        Ok(Output::Nothing)
    }

    /// The reference checks only the addresses and routes; we also check
    /// that the interface exists, is a tun/tap device and has its MAC.
    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(args)?;
        let cx = Ctx::open(args)?;
        let expect = Expect {
            kind: Some(TUN_KIND),
            data: None,
            up: false,
            routes: true,
        };
        link_plugin::check(args, &cx, conf.ipam.is_some(), &expect)?;
        Ok(Output::Nothing)
    }

    /// Forwarded to the IPAM plugin (the reference forwards nothing).
    fn gc(&self, args: &CmdArgs) -> CmdResult {
        config::load_for(args, ParseFor::Del)?;
        link_plugin::gc(args)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        config::load_for(args, ParseFor::Del)?;
        link_plugin::status(args, None)?;
        Ok(Output::Nothing)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    cni_skel::run(&Tap)
}
