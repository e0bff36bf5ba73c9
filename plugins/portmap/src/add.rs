//! ADD: the mappings' rules for the container's addresses (from prevResult),
//! then the UDP conntrack flush and route_localnet; a failure removes the
//! rules this ADD wrote.

use crate::config::{self, Backend, Conf};
use crate::{addrs_of, flush_conntrack, ipt, lock, nft, parse_wrapped, resolve};
use cni_skel::{CmdArgs, CmdResult, CniError, Output};
use ipnetwork::IpNetwork;

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

/// The rules of ADD, family by family with iptables (pushing each family
/// written onto `written`), both in one transaction with nftables. The
/// portmap lock is taken into `held` when a step needs it: iptables' fast
/// transaction does not (see [`crate::ipt_fast_add`]), so that in the common
/// case no ADD waits for another one's `iptables-restore`.
fn add_rules(
    conf: &Conf,
    backend: Backend,
    args: &CmdArgs,
    addrs: &[IpNetwork],
    written: &mut Vec<bool>,
    held: &mut Option<Option<cni_lock::Lock>>,
) -> Result<(), CniError> {
    match backend {
        Backend::Iptables => {
            for addr in addrs {
                if !crate::ipt_fast_add::add(conf, &args.container_id, *addr) {
                    if held.is_none() {
                        *held = Some(lock()?);
                    }
                    ipt::add(conf, &args.container_id, *addr)?;
                }
                written.push(addr.is_ipv6());
            }
        }
        Backend::Nftables => {
            if held.is_none() {
                *held = Some(lock()?);
            }
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

pub fn add(args: &CmdArgs) -> CmdResult {
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
    // The lock, once a step has taken it (kept to the end of ADD).
    let mut held = None;
    // The families whose rules this ADD wrote (`true`: IPv6): undone
    // when a later step fails, so that a failed ADD leaves nothing.
    let mut written: Vec<bool> = Vec::new();
    if let Err(e) = add_rules(&conf, backend, args, &addrs, &mut written, &mut held)
        .and_then(|()| after_rules(&conf, v4, v6))
    {
        if !written.is_empty() {
            // Undone under the lock, whether or not the ADD took it.
            let _undo = match &held {
                Some(_) => None,
                None => lock().ok(),
            };
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
