//! firewall: lets a container's addresses through the host's `FORWARD`
//! chain (iptables) or into a firewalld zone, as a chained plugin after the
//! one that gave the container its addresses (bridge, ptp). Optionally
//! isolates the bridge from other bridges (`ingressPolicy`).
//!
//! See README.md for every key. The rules are the Go reference's, so the two
//! implementations can take over from each other on one node.

mod config;
mod firewalld;
mod ipt;
mod sources;

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
/// `/run/cni-rcni/locks/firewall.lock`, waited for at most
/// `RCNI_LOCK_TIMEOUT` (cni-lock).
fn lock() -> Result<Option<cni_lock::Lock>, CniError> {
    cni_lock::named("firewall")
}

/// The backend that serves this invocation.
enum Backend {
    Iptables,
    Firewalld(firewalld::Firewalld),
}

/// The configured backend, or the reference's choice: firewalld when it is
/// running, else iptables, with one difference: firewalld is chosen only
/// when it runs in the plugin's own network namespace. The system bus can
/// be reached from any namespace, but firewalld filters only its own, so a
/// plugin run in another one (rootless Podman's, a nested host) programs
/// iptables there instead of giving the host's firewalld the container's
/// addresses. `backend: firewalld` with a firewalld elsewhere is an error.
fn resolve(conf: &Conf) -> Result<Backend, CniError> {
    match conf.backend {
        BackendChoice::Iptables => Ok(Backend::Iptables),
        BackendChoice::Auto => match firewalld::find() {
            firewalld::Found::Here(f) => Ok(Backend::Firewalld(f)),
            firewalld::Found::Elsewhere(why) | firewalld::Found::Absent(why) => {
                log::debug!("firewalld not used: {why}");
                Ok(Backend::Iptables)
            }
        },
        BackendChoice::Firewalld => match firewalld::find() {
            firewalld::Found::Here(f) => Ok(Backend::Firewalld(f)),
            firewalld::Found::Elsewhere(why) | firewalld::Found::Absent(why) => Err(
                CniError::internal(format!("firewalld backend unavailable: {why}")),
            ),
        },
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

/// The record of `att` after an ADD of `ips` to `zone`: what `before` held
/// plus the new sources.
fn record_with(
    before: Option<sources::Record>,
    att: &ipt::Attachment<'_>,
    zone: &str,
    ips: &[IpAddr],
) -> sources::Record {
    let mut rec = before.unwrap_or_default();
    rec.network = att.network.to_string();
    rec.container_id = att.container_id.to_string();
    rec.ifname = att.ifname.to_string();
    for ip in ips {
        let s = sources::ZoneSource {
            zone: zone.to_string(),
            source: firewalld::source(*ip),
        };
        if !rec.sources.contains(&s) {
            rec.sources.push(s);
        }
    }
    rec
}

/// GC of the firewalld sources of `network`'s attachments that are not in
/// `valid`: with a firewalld of this namespace their sources (unless a
/// kept record claims them) and records go; with none running only the
/// records (its runtime sources went with it); with a firewalld elsewhere
/// nothing.
fn gc_firewalld_sources(network: &str, valid: &[(String, String)]) -> Result<(), CniError> {
    let records = sources::Records::default();
    let is_valid = |r: &sources::Record| {
        valid
            .iter()
            .any(|(cid, ifname)| *cid == r.container_id && *ifname == r.ifname)
    };
    let stale: Vec<sources::Record> = records
        .all(Some(network))
        .into_iter()
        .filter(|r| r.network == network && !is_valid(r))
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    let mut fw = match firewalld::find() {
        firewalld::Found::Here(fw) => Some(fw),
        firewalld::Found::Absent(_) => None,
        firewalld::Found::Elsewhere(why) => {
            log::debug!("firewalld sources not collected: {why}");
            return Ok(());
        }
    };
    // Every record that stays, of any network.
    let others: Vec<sources::Record> = records
        .all(None)
        .into_iter()
        .filter(|r| !stale.contains(r))
        .collect();
    for rec in &stale {
        if let Some(fw) = fw.as_mut() {
            for s in &rec.sources {
                if !others.iter().any(|o| o.sources.contains(s)) {
                    fw.remove_source(&s.zone, &s.source);
                }
            }
        }
        records.remove(&ipt::Attachment {
            network: &rec.network,
            container_id: &rec.container_id,
            ifname: &rec.ifname,
        })?;
    }
    Ok(())
}

impl Plugin for Firewall {
    fn about(&self) -> String {
        cni_skel::about("firewall")
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
        let _lock = lock()?;
        match backend {
            Backend::Iptables => {
                ipt::require_tools(&ips)?;
                ipt::add(&conf, &attachment(args), &ips, iso)?;
            }
            Backend::Firewalld(mut fw) => {
                // The isolation rules are iptables rules whatever the
                // backend, as in the reference.
                if iso.is_some() {
                    ipt::require_tools(&ips)?;
                }
                // The record first: a source is never without one.
                let att = attachment(args);
                let records = sources::Records::default();
                let before = records.read(&att);
                records.write(&att, &record_with(before.clone(), &att, &conf.zone, &ips))?;
                let undo_record = || {
                    let _ = match &before {
                        Some(r) => records.write(&att, r),
                        None => records.remove(&att),
                    };
                };
                if let Err(e) = fw.add(&conf.zone, &ips) {
                    undo_record();
                    return Err(e);
                }
                if let Some((bridge, policy)) = iso
                    && let Err(e) = ipt::isolate_only(&ips, bridge, policy)
                {
                    fw.del(&conf.zone, &ips);
                    undo_record();
                    return Err(e);
                }
            }
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
        let _lock = lock()?;
        let att = attachment(args);
        let records = sources::Records::default();
        match backend {
            Backend::Firewalld(mut fw) => {
                let mut doomed: Vec<sources::ZoneSource> = ips
                    .iter()
                    .map(|ip| sources::ZoneSource {
                        zone: conf.zone.clone(),
                        source: firewalld::source(*ip),
                    })
                    .collect();
                for s in records.read(&att).map(|r| r.sources).unwrap_or_default() {
                    if !doomed.contains(&s) {
                        doomed.push(s);
                    }
                }
                // A source another attachment's record claims stays.
                let others = records.all(None);
                doomed.retain(|d| {
                    !others
                        .iter()
                        .any(|r| !r.is_of(&att) && r.sources.contains(d))
                });
                for d in &doomed {
                    fw.remove_source(&d.zone, &d.source);
                }
                records.remove(&att)?;
            }
            Backend::Iptables => {
                // A record from a firewalld that is no longer running:
                // its runtime sources went with it.
                if records.read(&att).is_some()
                    && matches!(firewalld::find(), firewalld::Found::Absent(_))
                {
                    records.remove(&att)?;
                }
            }
        }
        // Whatever the backend: iptables rules of this attachment may exist
        // (added before firewalld was started, or by the iptables backend).
        ipt::del(&attachment(args), &ips)?;
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
            Backend::Firewalld(mut fw) => {
                fw.check(&conf.zone, &ips)?;
                if let Some((bridge, policy)) = iso {
                    ipt::require_tools(&ips)?;
                    ipt::check_isolation(&ips, bridge, policy)?;
                }
            }
        }
        Ok(Output::Nothing)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        let conf = parse(args)?;
        let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
        let _lock = lock()?;
        gc_firewalld_sources(&conf.network, &valid)?;
        ipt::gc(&conf.network, &valid)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        let conf = parse(args)?;
        let iptables_works =
            || ipt::works(cni_fw::iptables::Family::V4) || ipt::works(cni_fw::iptables::Family::V6);
        let usable = match resolve(&conf) {
            Ok(Backend::Iptables) => iptables_works(),
            Ok(Backend::Firewalld(_)) => true,
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
