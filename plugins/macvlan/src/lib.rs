//! The CNI macvlan plugin: a macvlan child of `master` (by default the
//! interface of the default route), created straight into the container.
//! Everything but the config and the link kind is `cni_plugin::link_plugin`.

pub mod config;

use cni_plugin::link_plugin::{self, Ctx, Expect, L3Opts};
use cni_skel::{CmdArgs, CmdResult, Output, Plugin};

/// The plugin.
pub struct Macvlan;

impl Plugin for Macvlan {
    fn about(&self) -> String {
        cni_skel::about("macvlan")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(args)?;
        let cni_args = args.cni_args(&["MAC"])?;
        let mac = link_plugin::requested_mac(
            conf.mac.as_deref(),
            cni_args.get("MAC"),
            conf.runtime_mac.as_deref(),
        )?;
        // IPAM first: its process starts while the namespace is opened
        // and the parent looked up (it undoes itself on an error return).
        let addressing = conf.child.addressing(args, None)?;
        let l3 = addressing.l3();
        let cx = Ctx::open(args)?;
        let master = conf.child.parent(&cx)?;
        let new = conf.child.new_link(conf.kind(), &master, mac)?;
        let opts = L3Opts {
            arp_notify: l3,
            ndisc_notify: l3,
            dns: Some(conf.child.dns.clone()),
        };
        Ok(Output::Result(link_plugin::add(
            args, &cx, &new, addressing, &opts,
        )?))
    }

    /// As the reference since v1.4.0: the config's JSON only, so DEL works
    /// with the parent gone (it took the macvlan with it).
    fn del(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(args)?;
        link_plugin::del(args, conf.child.ipam)?;
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(args)?;
        args.cni_args(&["MAC"])?;
        let cx = Ctx::open(args)?;
        let master = conf.child.parent(&cx)?;
        link_plugin::check_mtu(conf.child.mtu, &master)?;
        link_plugin::check(args, &cx, conf.child.ipam, &Expect::child(conf.kind()))?;
        Ok(Output::Nothing)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        config::load(args)?;
        link_plugin::gc(args)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        config::load(args)?.child.status(args)?;
        Ok(Output::Nothing)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    cni_skel::run(&Macvlan)
}
