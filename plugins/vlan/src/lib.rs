//! The CNI vlan plugin: an 802.1Q sub-interface (`vlanId`) of `master`,
//! created straight into the container. Everything but the config and the
//! link kind is `cni_plugin::link_plugin`.

pub mod config;

use cni_plugin::NetResult;
use cni_plugin::link_plugin::{self, Ctx, Expect, L3Opts};
use cni_skel::{CmdArgs, CmdResult, CniError, Output, Plugin};
use config::load;

/// The plugin.
pub struct Vlan;

impl Plugin for Vlan {
    fn about(&self) -> String {
        cni_skel::about("vlan")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        let conf = load(args)?;
        // IPAM first: its process starts while the namespace is opened
        // and the parent looked up (it undoes itself on an error return).
        // Without IPAM: L2 (the reference requires IPAM; PR #1302).
        let addressing = conf.child.addressing(args, None)?;
        let cx = Ctx::open(args)?;
        let master = conf.child.parent(&cx)?;
        let new = conf.child.new_link(conf.kind(), &master, None)?;
        let opts = L3Opts {
            dns: Some(conf.child.dns.clone()),
            ..L3Opts::default()
        };
        let result = link_plugin::add(args, &cx, &new, addressing, &opts)?;
        Ok(Output::Result(result))
    }

    /// The config checked, but not the parent: DEL works once the parent
    /// is gone (it took the vlan with it; the reference fails there, so
    /// the address is never released).
    fn del(&self, args: &CmdArgs) -> CmdResult {
        let conf = load(args)?;
        link_plugin::del(args, conf.child.ipam)?;
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = load(args)?;
        let cx = Ctx::open(args)?;
        conf.child.parent(&cx)?;
        link_plugin::check(args, &cx, conf.child.ipam, &Expect::child(conf.kind()))?;
        // A configured MTU is compared too, as the reference does.
        if let Some(mtu) = u32::try_from(conf.child.mtu).ok().filter(|m| *m > 0)
            && let Some(l) = cx.ns_nl.link_by_name(&args.ifname).cni()?
            && l.mtu != mtu
        {
            return Err(CniError::internal(format!(
                "Error: Container interface {} has MTU {}, configured {mtu}",
                l.name, l.mtu
            )));
        }
        Ok(Output::Nothing)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        load(args)?;
        link_plugin::gc(args)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        load(args)?.child.status(args)?;
        Ok(Output::Nothing)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    cni_skel::run(&Vlan)
}
