//! CHECK: IPAM CHECK, then the container side as the reference checks it,
//! then the host side (which the reference skips): the host veth, the
//! gateway on it and the host routes to the container; with `ipMasq`,
//! the masquerade rules.

use crate::add::{host_net, subnet};
use crate::config;
use cni_fw::masq::{self, Attachment, Backend};
use cni_net::{IpFamily, Netlink, scope};
use cni_plugin::NetResult;
use cni_plugin::iface;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Command, Interface, Output, delegate};
use ipnetwork::IpNetwork;

pub fn check(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let path = args
        .netns
        .as_deref()
        .ok_or_else(|| CniError::internal("CNI_NETNS is required for CHECK"))?;
    let ns = cni_plugin::netns::open(path)?;
    delegate::ipam_run(Command::Check, args)?;
    let result = args.required_prev_result("ptp: Required prevResult missing")?;
    let netns = path.display().to_string();
    let cont = result
        .interfaces
        .iter()
        .find(|i| i.name == args.ifname && i.sandbox == netns)
        .ok_or_else(|| {
            CniError::internal(format!(
                "Sandbox in prevResult  doesn't match configured netns: {netns}"
            ))
        })?;
    let ns_nl = Netlink::for_ns(&ns).cni()?;
    let cont_link = check_container(&ns_nl, cont)?;
    iface::check_addresses(&ns_nl, &args.ifname, &result)?;
    iface::check_routes(&ns_nl, &result)?;
    check_ptp_routes(&ns_nl, &result, &args.ifname, cont_link.index)?;
    check_host(&result, &args.ifname, &cont_link)?;
    if conf.ip_masq {
        let addrs: Vec<IpNetwork> = container_ips(&result, &args.ifname)?
            .iter()
            .map(|ip| ip.address)
            .collect();
        let att = Attachment {
            network: &conf.name,
            ifname: &args.ifname,
            container_id: &args.container_id,
        };
        masq::check(Backend::resolve(conf.backend), &addrs, att)?;
    }
    Ok(Output::Nothing)
}

/// The container interface: present, a veth, with the recorded MAC.
fn check_container(nl: &Netlink, intf: &Interface) -> Result<cni_net::Link, CniError> {
    if intf.name.is_empty() {
        return Err(CniError::internal(
            "Container interface name missing in prevResult: ",
        ));
    }
    let link = nl.link_by_name(&intf.name).cni()?.ok_or_else(|| {
        CniError::internal(format!(
            "ptp: Container Interface name in prevResult: {} not found",
            intf.name
        ))
    })?;
    if link.kind != "veth" {
        return Err(CniError::internal(format!(
            "Error: Container interface {} not of type veth/p2p",
            link.name
        )));
    }
    if !intf.mac.is_empty() && !intf.mac.eq_ignore_ascii_case(&link.mac) {
        return Err(CniError::internal(format!(
            "ptp: Interface {} Mac {} doesn't match container Mac: {}",
            intf.name, intf.mac, link.mac
        )));
    }
    Ok(link)
}

/// The container addresses of `prevResult` with their gateways.
fn container_ips<'a>(
    result: &'a CniResult,
    ifname: &'a str,
) -> Result<Vec<&'a cni_skel::IpConfig>, CniError> {
    iface::addresses_for(result, ifname)
}

/// ptp's own container routes: the gateway on-link and the subnet via it.
fn check_ptp_routes(
    nl: &Netlink,
    result: &CniResult,
    ifname: &str,
    oif: u32,
) -> Result<(), CniError> {
    for ip in container_ips(result, ifname)? {
        let Some(gw) = ip.gateway else { continue };
        let family = IpFamily::of(&gw);
        let routes = nl.routes(family, None).cni()?;
        let net = subnet(&ip.address);
        let has_gw = routes
            .iter()
            .any(|r| r.oif == Some(oif) && r.dst_network() == host_net(gw) && r.gateway.is_none());
        let has_net = routes
            .iter()
            .any(|r| r.oif == Some(oif) && r.dst_network() == net && r.gateway == Some(gw));
        if !has_gw || !has_net {
            return Err(CniError::internal(format!(
                "ptp: route {} or {net} via {gw} missing on {ifname}",
                host_net(gw)
            )));
        }
    }
    Ok(())
}

/// The host side: the veth named in `prevResult`, the peer of the
/// container's link, holding each gateway, with a host route to each
/// container address.
fn check_host(result: &CniResult, ifname: &str, cont: &cni_net::Link) -> Result<(), CniError> {
    let host_intf = result
        .interfaces
        .iter()
        .find(|i| i.sandbox.is_empty())
        .ok_or_else(|| CniError::internal("ptp: host interface missing in prevResult"))?;
    let nl = Netlink::host().cni()?;
    let host = nl.link_by_name(&host_intf.name).cni()?.ok_or_else(|| {
        CniError::internal(format!("ptp: host veth {} not found", host_intf.name))
    })?;
    if host.kind != "veth" || cont.peer_index != Some(host.index) {
        return Err(CniError::internal(format!(
            "ptp: host interface {} is not the peer of container interface {ifname}",
            host.name
        )));
    }
    if !host_intf.mac.is_empty() && !host_intf.mac.eq_ignore_ascii_case(&host.mac) {
        return Err(CniError::internal(format!(
            "ptp: Interface {} Mac {} doesn't match host Mac: {}",
            host.name, host_intf.mac, host.mac
        )));
    }
    let addrs = nl.addrs(&host, None).cni()?;
    let mut routes: Vec<(IpFamily, Vec<cni_net::Route>)> = Vec::new();
    for ip in container_ips(result, ifname)? {
        let Some(gw) = ip.gateway else { continue };
        let want: IpNetwork = host_net(gw);
        if !addrs.iter().any(|a| a.address == want) {
            return Err(CniError::internal(format!(
                "ptp: gateway {want} missing on host veth {}",
                host.name
            )));
        }
        let family = IpFamily::of(&gw);
        if !routes.iter().any(|(f, _)| *f == family) {
            routes.push((family, nl.routes(family, None).cni()?));
        }
        let dst = host_net(ip.address.ip());
        let found = routes
            .iter()
            .filter(|(f, _)| *f == family)
            .flat_map(|(_, rs)| rs)
            .any(|r| {
                r.oif == Some(host.index)
                    && r.dst_network() == dst
                    && r.gateway.is_none()
                    && (family == IpFamily::V6 || r.scope == Some(scope::HOST))
            });
        if !found {
            return Err(CniError::internal(format!(
                "ptp: host route {dst} dev {} missing",
                host.name
            )));
        }
    }
    Ok(())
}
