//! portmap: forwards host ports to a container, as a chained plugin after
//! the one that gave the container its addresses (bridge, ptp).
//!
//! See README.md for every key. The rules are the Go reference's, in either
//! backend, so the two implementations can take over from each other.

mod config;
mod ipt;
mod nft;

use cni_skel::error::code;
use cni_skel::{CmdArgs, CmdResult, CniError, Output, Plugin};
use config::{Backend, Conf, Proto};
use ipnetwork::IpNetwork;
use std::process::ExitCode;

struct Portmap;

fn main() -> ExitCode {
    cni_skel::run(&Portmap)
}

/// Serialises the read-modify-write of the iptables `nat` table among
/// concurrent invocations (the chains shared by all containers are created
/// by declaring them, which must not race).
/// `/run/cni-rcni/locks/portmap.lock`, waited for at most
/// `RCNI_LOCK_TIMEOUT` (cni-lock).
fn lock() -> Result<Option<cni_lock::Lock>, CniError> {
    cni_lock::named("portmap")
}

fn nft_usable() -> bool {
    cni_fw::nft::check(&format!("add table ip {}\n", nft::TABLE)).is_ok()
}

/// The backend to use. Unset, the reference's rule applies: iptables,
/// unless iptables cannot be used and nftables can. "Cannot be used" is
/// judged here by the tools being installed, which costs no process (STATUS
/// probes the kernel for real).
fn resolve(conf: &Conf) -> Result<Backend, CniError> {
    use cni_fw::iptables::{Family, usable};
    let backend = match conf.backend {
        Some(b) => b,
        None if !usable(Family::V4) && cni_fw::nft::usable() => Backend::Nftables,
        None => Backend::Iptables,
    };
    conf.check_backend(backend)?;
    Ok(backend)
}

fn udp_ports(conf: &Conf) -> Vec<u16> {
    let mut ports: Vec<u16> = conf
        .mappings
        .iter()
        .filter(|m| m.proto == Proto::Udp)
        .map(|m| m.host_port)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Deletes the UDP conntrack entries of the mapped host ports in `family`
/// (`None`: both), so that a client that kept sending is not stuck on a
/// stale mapping. Failures are only logged, as in the reference.
fn flush_conntrack(conf: &Conf, family: Option<cni_net::IpFamily>) {
    use cni_net::conntrack::{PROTO_UDP, delete_by_orig_dst_port};
    let ports = udp_ports(conf);
    if ports.is_empty() {
        return;
    }
    match delete_by_orig_dst_port(family, PROTO_UDP, &ports) {
        Ok(n) => log::debug!("deleted {n} UDP conntrack entries for ports {ports:?}"),
        Err(e) => {
            log::warn!("failed to delete stale UDP conntrack entries for ports {ports:?}: {e}")
        }
    }
}

/// Lets 127.0.0.0/8 sources cross to the interface that routes to the
/// container, so that connections to 127.0.0.1:hostPort can be forwarded.
fn enable_localnet_routing(ip: std::net::IpAddr) -> Result<(), CniError> {
    let iface = cni_net::route_get::route_get_interface(ip)
        .map_err(|e| CniError::internal(format!("unable to enable route_localnet: {e}")))?;
    if let Some((_, name)) = iface {
        cni_net::sysctl::write(&format!("net/ipv4/conf/{name}/route_localnet"), "1")
            .map_err(|e| CniError::internal(format!("unable to enable route_localnet: {e}")))?;
    }
    Ok(())
}

fn parse_wrapped(args: &CmdArgs) -> Result<Conf, CniError> {
    config::parse(&args.stdin).map_err(|e| e.context("failed to parse config"))
}

fn addrs_of(v4: Option<IpNetwork>, v6: Option<IpNetwork>) -> Vec<IpNetwork> {
    [v4, v6].into_iter().flatten().collect()
}

/// The rules of ADD, family by family with iptables (pushing each family
/// written onto `written`), both in one transaction with nftables.
fn add_rules(
    conf: &Conf,
    backend: Backend,
    args: &CmdArgs,
    addrs: &[IpNetwork],
    written: &mut Vec<bool>,
) -> Result<(), CniError> {
    match backend {
        Backend::Iptables => {
            for addr in addrs {
                ipt::add(conf, &args.container_id, *addr)?;
                written.push(addr.is_ipv6());
            }
        }
        Backend::Nftables => {
            nft::add(conf, &args.container_id, addrs)?;
            written.extend(addrs.iter().map(|a| a.is_ipv6()));
        }
    }
    Ok(())
}

/// What ADD does once the rules are there (so that new traffic takes them).
fn after_rules(conf: &Conf, v4: Option<IpNetwork>, v6: Option<IpNetwork>) -> Result<(), CniError> {
    match (v4, v6) {
        (Some(_), Some(_)) => flush_conntrack(conf, None),
        (Some(_), None) => flush_conntrack(conf, Some(cni_net::IpFamily::V4)),
        (None, Some(_)) => flush_conntrack(conf, Some(cni_net::IpFamily::V6)),
        (None, None) => {}
    }
    if let Some(v4) = v4
        && conf.snat
    {
        enable_localnet_routing(v4.ip())?;
    }
    Ok(())
}

impl Plugin for Portmap {
    fn about(&self) -> String {
        cni_skel::about("portmap")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        let conf = parse_wrapped(args)?;
        let prev = args
            .prev_result()
            .map_err(|e| e.context("failed to parse config"))?
            .ok_or_else(|| CniError::internal("must be called as chained plugin"))?;
        if conf.mappings.is_empty() {
            return Ok(Output::Result(prev));
        }
        let (v4, v6) = config::container_addrs(&prev, &args.ifname);
        let addrs = addrs_of(v4, v6);
        let backend = resolve(&conf).map_err(|e| e.context("failed to parse config"))?;
        let _lock = lock()?;
        // The families whose rules this ADD wrote (`true`: IPv6): undone
        // when a later step fails, so that a failed ADD leaves nothing.
        let mut written: Vec<bool> = Vec::new();
        if let Err(e) = add_rules(&conf, backend, args, &addrs, &mut written)
            .and_then(|()| after_rules(&conf, v4, v6))
        {
            if !written.is_empty() {
                let undone = match backend {
                    Backend::Iptables => ipt::del_in(&conf, &args.container_id, &written),
                    Backend::Nftables => nft::del(&conf.network, &args.container_id),
                };
                if let Err(u) = undone {
                    log::warn!("undoing the failed ADD: {}", u.msg);
                }
            }
            return Err(e);
        }
        Ok(Output::Result(prev))
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        let conf = parse_wrapped(args)?;
        if conf.mappings.is_empty() {
            return Ok(Output::Nothing);
        }
        let backend = resolve(&conf).map_err(|e| e.context("failed to parse config"))?;
        let _lock = lock()?;
        match backend {
            Backend::Iptables => ipt::del(&conf, &args.container_id)?,
            Backend::Nftables => nft::del(&conf.network, &args.container_id)?,
        }
        flush_conntrack(&conf, None);
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::parse(&args.stdin)?;
        let prev = args
            .prev_result()?
            .ok_or_else(|| CniError::internal("Required prevResult missing"))?;
        if conf.mappings.is_empty() {
            return Ok(Output::Nothing);
        }
        let (v4, v6) = config::container_addrs(&prev, &args.ifname);
        let backend = resolve(&conf)?;
        for addr in addrs_of(v4, v6) {
            match backend {
                Backend::Iptables => {
                    let table = ipt::save(addr.is_ipv6())?;
                    ipt::check_table(&conf, &args.container_id, addr, &table)?;
                }
                Backend::Nftables => nft::check(&conf, &args.container_id, addr)?,
            }
        }
        Ok(Output::Nothing)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::parse(&args.stdin)?;
        // Portmap's rules are per container, whatever the interface.
        let valid: Vec<String> = cni_skel::conf::valid_attachments(&args.stdin)?
            .into_iter()
            .map(|(cid, _)| cid)
            .collect();
        let _lock = lock()?;
        let mut errors = Vec::new();
        // Both backends: rules may have been written by either.
        if let Err(e) = ipt::gc(&conf.network, &valid) {
            errors.push(e.msg);
        }
        if cni_fw::nft::usable()
            && let Err(e) = nft::gc(&conf.network, &valid)
        {
            errors.push(e.msg);
        }
        if errors.is_empty() {
            Ok(Output::Nothing)
        } else {
            Err(CniError::internal(errors.join("; ")))
        }
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::parse(&args.stdin)?;
        let iptables = || ipt::save(false).is_ok() || ipt::save(true).is_ok();
        let usable = match conf.backend {
            Some(Backend::Iptables) => iptables(),
            Some(Backend::Nftables) => nft_usable(),
            None => iptables() || nft_usable(),
        };
        if usable {
            return Ok(Output::Nothing);
        }
        let which = conf
            .backend
            .map(Backend::name)
            .unwrap_or("iptables or nftables");
        Err(CniError::new(
            code::PLUGIN_NOT_AVAILABLE,
            format!("portmap: {which} is not usable"),
            "",
        ))
    }
}
