//! The CNI dummy plugin: a dummy interface created inside the container,
//! carrying the IPAM plugin's addresses (a stable address that needs no
//! link partner). Everything but the config is `cni_plugin::link_plugin`.

use cni_net::ChildKind;
use cni_plugin::link_plugin::{self, Addressing, Ctx, Expect, L3Opts, NewLink};
use cni_skel::{CmdArgs, CmdResult, CniError, Output, Plugin};

/// dummy reads no key of its own; `ipam` is required.
fn load(args: &CmdArgs) -> Result<(), CniError> {
    if args.conf.ipam_type().is_none() {
        return Err(CniError::invalid_config(
            "dummy interface requires an IPAM configuration",
        ));
    }
    Ok(())
}

/// The plugin.
pub struct Dummy;

impl Plugin for Dummy {
    fn about(&self) -> String {
        cni_skel::about("dummy")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        load(args)?;
        let cx = Ctx::open(args)?;
        // Made inside the container under its final name: no temporary
        // name, and a host link of the same name cannot get in the way.
        let new = NewLink {
            kind: ChildKind::Dummy,
            master: None,
            in_container: true,
            mtu: None,
            mac: None,
        };
        // The result keeps the IPAM plugin's DNS, as the reference.
        let opts = L3Opts::default();
        let result = link_plugin::add(args, &cx, &new, Addressing::Ipam, &opts)?;
        Ok(Output::Result(result))
    }

    /// IPAM DEL when configured (the reference fails without IPAM), then
    /// the link; a netns or link already gone is success.
    fn del(&self, args: &CmdArgs) -> CmdResult {
        link_plugin::del(args, args.conf.ipam_type().is_some())?;
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        load(args)?;
        let cx = Ctx::open(args)?;
        let expect = Expect {
            kind: Some("dummy"),
            up: true,
            ..Expect::default()
        };
        link_plugin::check(args, &cx, true, &expect)?;
        Ok(Output::Nothing)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        link_plugin::gc(args)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        load(args)?;
        link_plugin::status(args, None)?;
        Ok(Output::Nothing)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    cni_skel::run(&Dummy)
}
