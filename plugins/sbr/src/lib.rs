//! The CNI sbr plugin: source-based routing inside the container. For
//! every address of the interface, a rule "from <address> lookup <table>"
//! and a table holding the interface's routes, so replies leave through
//! the interface their request came in on.

pub mod add;
pub mod check;
pub mod config;
pub mod del;

use cni_net::{IpFamily, Netlink};
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Output, Plugin};
use config::Conf;
use ipnetwork::IpNetwork;
use std::path::Path;

/// The first table the reference considers.
const FIRST_TABLE: u32 = 100;

/// The plugin.
pub struct Sbr;

impl Plugin for Sbr {
    fn about(&self) -> String {
        cni_skel::about("sbr")
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

    /// Everything sbr makes lives in the container's netns and goes with
    /// it: there is nothing on the host to collect.
    fn gc(&self, args: &CmdArgs) -> CmdResult {
        Conf::parse(args)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        Conf::parse(args)?;
        Ok(Output::Nothing)
    }
}

// What ADD, DEL and CHECK share.

/// Why sbr, which works on the prevResult's addresses, cannot run first.
const NO_PREV_RESULT: &str = "This plugin must be called as chained plugin";

/// The addresses of CNI_IFNAME in the result, as the reference picks them:
/// an IP belongs to the interface when its index is unset, out of range,
/// or names CNI_IFNAME.
fn ips_of(result: &CniResult, ifname: &str) -> Vec<IpNetwork> {
    result
        .ips
        .iter()
        .filter(|ip| match ip.interface {
            Some(i) => result
                .interfaces
                .get(i)
                .is_none_or(|itf| itf.name == ifname),
            None => true,
        })
        .map(|ip| ip.address)
        .collect()
}

/// The rule's source: the address alone (/32 or /128).
fn host_net(ip: &IpNetwork) -> IpNetwork {
    IpNetwork::from(ip.ip())
}

fn ns_path(args: &CmdArgs) -> Result<&Path, CniError> {
    args.netns
        .as_deref()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| CniError::internal("CNI_NETNS is required"))
}

fn family_of(ip: &IpNetwork) -> IpFamily {
    IpFamily::of(&ip.ip())
}

fn flush_table(nl: &Netlink, family: IpFamily, table: u32) -> Result<(), CniError> {
    for r in nl.routes(family, Some(table)).cni()? {
        nl.del_route(&r).cni()?;
    }
    Ok(())
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    cni_skel::run(&Sbr)
}
