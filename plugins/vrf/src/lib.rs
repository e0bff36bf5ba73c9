//! The CNI vrf plugin: puts the container's interface into a VRF (layer 3
//! master device) inside the container namespace, creating the VRF when it
//! does not exist yet. The interface keeps its addresses, and its routes
//! move into the VRF's table, as the reference (v1.9.1) moves them.
//!
//! See README.md for the keys and where this differs from the reference.

pub mod add;
pub mod check;
pub mod config;
pub mod del;

use cni_net::{Link, Netlink};
use cni_plugin::NetResult;
use cni_plugin::netns::LockedNetNs;
use cni_skel::{CmdArgs, CmdResult, CniError, Output, Plugin};
use config::Conf;
use std::path::Path;

/// The plugin.
pub struct Vrf;

impl Plugin for Vrf {
    fn about(&self) -> String {
        cni_skel::about("vrf")
    }

    /// From 0.3.1, as the reference.
    fn supported_versions(&self) -> Vec<String> {
        cni_skel::version::since("0.3.1")
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

    /// The VRF lives in the container's namespace and goes with it: there
    /// is nothing on the host to collect.
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

/// Why vrf, which works on the prevResult's interface, cannot run first.
const NO_PREV_RESULT: &str = "missing prevResult from earlier plugin";

/// The container namespace, locked for the rest of the command (its
/// `cni_lock::netns` lock): a concurrent DEL must not delete a VRF that an
/// ADD is about to use.
/// `None` when CNI_NETNS is empty or gone.
fn open_netns(args: &CmdArgs) -> Result<Option<LockedNetNs>, CniError> {
    let Some(path) = args.netns.as_deref().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(None);
    };
    cni_plugin::netns::open_locked_if_present(path)
}

fn must_open_netns(args: &CmdArgs) -> Result<LockedNetNs, CniError> {
    cni_plugin::netns::open_locked(args.netns.as_deref().unwrap_or(Path::new("")))
}

/// The link called `name` if it is a VRF; another kind is an error.
fn find_vrf(nl: &Netlink, name: &str) -> Result<Option<Link>, CniError> {
    match nl.link_by_name(name).cni()? {
        Some(l) if l.kind != "vrf" => {
            Err(CniError::internal(format!("Netlink {name} is not a VRF")))
        }
        other => Ok(other),
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    cni_skel::run(&Vrf)
}
