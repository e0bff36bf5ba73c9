//! firewall: lets a container's addresses through the host's `FORWARD`
//! chain (iptables) or into a firewalld zone, as a chained plugin after the
//! one that gave the container its addresses (bridge, ptp). Optionally
//! isolates the bridge from other bridges (`ingressPolicy`).
//!
//! See README.md for every key. The rules are the Go reference's, so the two
//! implementations can take over from each other on one node.

pub mod add;
pub mod backend;
pub mod check;
pub mod config;
pub mod del;
pub mod firewalld;
pub mod gc;
pub mod ipt;
pub mod sources;
pub mod status;

use backend::Request;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Plugin};
use config::{Conf, IngressPolicy};
use std::net::IpAddr;
use std::process::ExitCode;

/// The plugin.
pub struct Firewall;

/// Serialises the read-modify-write of the `filter` table among concurrent
/// invocations (shared chains and jumps are created when absent).
/// `/run/cni-rcni/locks/firewall.lock`, waited for at most
/// `RCNI_LOCK_TIMEOUT` (cni-lock).
fn lock() -> Result<Option<cni_lock::Lock>, CniError> {
    cni_lock::named("firewall")
}

/// [`lock`] held shared, for the DEL work that commutes with every other
/// DEL's (`backend::FirewallBackend::del_shared`).
fn lock_shared() -> Result<Option<cni_lock::Lock>, CniError> {
    cni_lock::named_shared("firewall")
}

fn parse(args: &CmdArgs) -> Result<Conf, CniError> {
    config::parse(&args.config, cni_skel::ParseFor::of(args))
}

/// Why firewall, which passes the prevResult on, cannot run first.
const NO_PREV_RESULT: &str = "missing prevResult from earlier plugin";

/// The bridge to isolate, when the policy asks for it.
fn isolation(
    prev: &CniResult,
    policy: IngressPolicy,
) -> Result<Option<(String, IngressPolicy)>, CniError> {
    if policy == IngressPolicy::Open {
        return Ok(None);
    }
    Ok(Some((config::bridge_name(prev, policy)?, policy)))
}

fn attachment(args: &CmdArgs) -> ipt::Attachment<'_> {
    ipt::Attachment {
        network: args.conf.name(),
        container_id: &args.container_id,
        ifname: &args.ifname,
    }
}

/// The backend's request for this invocation.
fn request<'a>(
    args: &'a CmdArgs,
    conf: &'a Conf,
    ips: &'a [IpAddr],
    isolation: &'a Option<(String, IngressPolicy)>,
) -> Request<'a> {
    Request {
        conf,
        att: attachment(args),
        ips,
        isolation: isolation.as_ref().map(|(b, p)| (b.as_str(), *p)),
    }
}

impl Plugin for Firewall {
    fn about(&self) -> String {
        cni_skel::about("firewall")
    }

    fn supported_versions(&self) -> Vec<String> {
        ["0.4.0", "1.0.0", "1.1.0"].map(String::from).to_vec()
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
        status::status(args)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
///
/// Before it returns, [`cni_fw::settle`]: the wait for the kernel's grace
/// period after an nf_tables commit, made here, with no lock held, rather
/// than in the exit under the kernel's commit mutex (issue 30).
pub fn main(_args: cni_skel::ProgramArgs) -> ExitCode {
    let code = cni_skel::run(&Firewall);
    cni_fw::settle(true);
    code
}
