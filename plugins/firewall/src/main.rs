//! firewall: lets a container's addresses through the host's `FORWARD`
//! chain (iptables) or into a firewalld zone, as a chained plugin after the
//! one that gave the container its addresses (bridge, ptp). Optionally
//! isolates the bridge from other bridges (`ingressPolicy`).
//!
//! See README.md for every key. The rules are the Go reference's, so the two
//! implementations can take over from each other on one node.

mod config;
mod ipt;

use cni_skel::error::code;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Output, Plugin};
use config::{BackendChoice, Conf, IngressPolicy};
use std::net::IpAddr;
use std::process::ExitCode;

struct Firewall;

fn main() -> ExitCode {
    cni_skel::run(&Firewall)
}

/// Serialises the read-modify-write of the `filter` table among concurrent
/// invocations (shared chains and jumps are created when absent).
fn lock() -> Option<std::fs::File> {
    cni_fw::lock::hold("/run/cni-firewall.lock")
}

/// The backend that serves this invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Iptables,
}

fn resolve(conf: &Conf) -> Result<Backend, CniError> {
    match conf.backend {
        BackendChoice::Iptables | BackendChoice::Auto => Ok(Backend::Iptables),
        BackendChoice::Firewalld => Err(CniError::internal(format!(
            "the firewalld backend (zone {:?}) is not available in this build",
            conf.zone
        ))),
    }
}

fn parse(args: &CmdArgs) -> Result<Conf, CniError> {
    config::parse(&args.stdin)
}

fn prev_result(args: &CmdArgs) -> Result<CniResult, CniError> {
    args.prev_result()?
        .ok_or_else(|| CniError::internal("missing prevResult from earlier plugin"))
}

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

impl Plugin for Firewall {
    fn about(&self) -> String {
        format!("CNI firewall plugin v{}", env!("CARGO_PKG_VERSION"))
    }

    fn supported_versions(&self) -> Vec<String> {
        ["0.4.0", "1.0.0", "1.1.0"].map(String::from).to_vec()
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        // Everything is validated before anything is written.
        let conf = parse(args)?;
        let policy = conf.ingress_policy()?;
        let prev = prev_result(args)?;
        let ips = config::container_ips(&prev);
        let iso = isolation(&prev, policy)?;
        let iso = iso.as_ref().map(|(b, p)| (b.as_str(), *p));
        let backend = resolve(&conf)?;
        ipt::require_tools(&ips)?;
        let _lock = lock();
        match backend {
            Backend::Iptables => ipt::add(&conf, &attachment(args), &ips, iso)?,
        }
        Ok(Output::Result(prev))
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        let conf = parse(args)?;
        // DEL works without prevResult: the records name the addresses.
        let ips: Vec<IpAddr> = args
            .prev_result()?
            .map(|p| config::container_ips(&p))
            .unwrap_or_default();
        let backend = resolve(&conf)?;
        let _lock = lock();
        match backend {
            Backend::Iptables => ipt::del(&attachment(args), &ips)?,
        }
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = parse(args)?;
        let policy = conf.ingress_policy()?;
        let prev = prev_result(args)?;
        let ips = config::container_ips(&prev);
        let iso = isolation(&prev, policy)?;
        let iso = iso.as_ref().map(|(b, p)| (b.as_str(), *p));
        match resolve(&conf)? {
            Backend::Iptables => {
                ipt::require_tools(&ips)?;
                ipt::check(&conf, &ips, iso)?;
            }
        }
        Ok(Output::Nothing)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        let conf = parse(args)?;
        let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
        let _lock = lock();
        // Records exist only in iptables, whatever the backend.
        ipt::gc(&conf.network, &valid)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        let conf = parse(args)?;
        let usable = match resolve(&conf) {
            Ok(Backend::Iptables) => {
                ipt::works(cni_fw::iptables::Family::V4) || ipt::works(cni_fw::iptables::Family::V6)
            }
            Err(_) => false,
        };
        if usable {
            return Ok(Output::Nothing);
        }
        Err(CniError::new(
            code::PLUGIN_NOT_AVAILABLE,
            "firewall: no usable backend (iptables tools not working, firewalld not reachable)",
            "",
        ))
    }
}
