//! The CNI ipvlan plugin: an ipvlan child of `master` (by default the
//! single interface of a previous result, else the interface of the
//! default route), created straight into the container; usable as a
//! chained plugin on a previous result's addresses. Everything but the
//! config and the link kind is `cni_plugin::link_plugin`.

pub mod config;

use cni_plugin::link_plugin::{self, Ctx, Expect, L3Opts};
use cni_skel::{CmdArgs, CmdResult, CniError, Output, Plugin};
use config::{Raw, load};

/// The plugin.
pub struct Ipvlan;

impl Plugin for Ipvlan {
    fn about(&self) -> String {
        cni_skel::about("ipvlan")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        let conf = load(args)?;
        let master_name = conf.master_name()?;
        // IPAM when configured, started first: its process starts while
        // the namespace is opened and the parent looked up (it undoes
        // itself on an error return); else a previous result's addresses
        // (chained); else L2 (the reference refuses: #572).
        let addressing = conf.child.addressing(args, conf.prev.as_ref())?;
        let l3 = addressing.l3();
        let cx = Ctx::open(args)?;
        let master = conf.child.parent_named(&cx, master_name.as_deref())?;
        let new = conf.child.new_link(conf.kind(), &master, None)?;
        let opts = L3Opts {
            arp_notify: l3,
            ndisc_notify: l3,
            dns: Some(conf.child.dns.clone()),
        };
        let result = link_plugin::add(args, &cx, &new, addressing, &opts)?;
        Ok(Output::Result(result))
    }

    /// The JSON only: DEL needs neither the parent nor a default route
    /// (the reference fails without them).
    fn del(&self, args: &CmdArgs) -> CmdResult {
        let raw: Result<Raw, _> = cni_skel::gojson::from_value(&args.config);
        raw.map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
        link_plugin::del(args, args.conf.ipam_type().is_some())?;
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = load(args)?;
        let cx = Ctx::open(args)?;
        conf.master(&cx)?;
        link_plugin::check(args, &cx, conf.child.ipam, &Expect::child(conf.kind()))?;
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
    cni_skel::run(&Ipvlan)
}
