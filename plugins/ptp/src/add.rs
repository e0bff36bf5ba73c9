//! ADD: IPAM, a veth pair whose container end is routed point-to-point to
//! the host end (which holds the gateway), host routes, masquerade.
//!
//! Any failure after IPAM ADD undoes everything, newest first, down to the
//! IPAM reservation.

use crate::config::{self, MIN_MTU_V6, PtpConf};
use cni_fw::masq::{self, Attachment, Backend};
use cni_net::{AddrFlags, Link, NetNs, Netlink, Route, scope};
use cni_plugin::NetResult;
use cni_plugin::iface::{self, VethPair, VethSetup};
use cni_plugin::ipam::IpamJob;
use cni_plugin::rollback::Rollback;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Interface, Output};
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// The full-length prefix of an address's family (32 or 128).
pub fn host_prefix(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// `ip/32` or `ip/128`.
pub fn host_net(ip: IpAddr) -> IpNetwork {
    // A full-length prefix is always valid.
    IpNetwork::new(ip, host_prefix(ip)).unwrap_or_else(|_| IpNetwork::from(ip))
}

/// `10.1.2.7/24` → `10.1.2.0/24`.
pub fn subnet(a: &IpNetwork) -> IpNetwork {
    IpNetwork::new(a.network(), a.prefix()).unwrap_or(*a)
}

/// Each address with its gateway; ptp cannot work without one.
pub fn gateways(result: &CniResult) -> Result<Vec<(IpNetwork, IpAddr)>, CniError> {
    if result.ips.is_empty() {
        return Err(CniError::internal("IPAM plugin returned missing IP config"));
    }
    result
        .ips
        .iter()
        .map(|ip| match ip.gateway {
            Some(gw) if gw.is_ipv4() == ip.address.is_ipv4() && gw != ip.address.ip() => {
                Ok((ip.address, gw))
            }
            Some(gw) => Err(CniError::internal(format!(
                "IPAM returned gateway {gw} for {}: ptp needs a gateway of the same family other than the address",
                ip.address
            ))),
            None => Err(CniError::internal(format!(
                "IPAM returned no gateway for {}: ptp routes through the gateway",
                ip.address
            ))),
        })
        .collect()
}

/// As the reference: every packet to the subnet goes through the gateway.
/// Per address, the kernel's prefix route `<subnet> dev <if>` is deleted,
/// then `<gw>/32|128 dev <if> scope link src <ip>` and
/// `<subnet> via <gw> dev <if> src <ip>` are added. (The result's own
/// routes were added before, while the prefix route still made any gateway
/// in the subnet reachable.)
///
/// A route that already exists is an error, as in the reference: another
/// interface of the container on the same subnet holds it, and taking it
/// over (a replace) would cut that interface off.
fn replace_prefix_routes(
    nl: &Netlink,
    pairs: &[(IpNetwork, IpAddr)],
    link: &Link,
) -> Result<(), CniError> {
    for (addr, gw) in pairs {
        let prefix = Route::new(subnet(addr)).dev(link.index);
        nl.del_route(&prefix).map_err(|e| {
            CniError::internal(format!("failed to delete route {}: {e}", prefix.dst))
        })?;
        for route in ptp_routes(*addr, *gw, link.index) {
            nl.add_route(&route).map_err(|e| {
                CniError::internal(format!("failed to add route {route} on {}: {e}", link.name))
            })?;
        }
    }
    Ok(())
}

/// The container's two ptp routes for one address, in order.
fn ptp_routes(addr: IpNetwork, gw: IpAddr, oif: u32) -> [Route; 2] {
    let mut to_gw = Route::new(host_net(gw)).dev(oif);
    to_gw.scope = Some(scope::LINK);
    to_gw.src = Some(addr.ip());
    let mut via = Route::new(subnet(&addr)).via(gw).dev(oif);
    via.src = Some(addr.ip());
    [to_gw, via]
}

/// The host side: the gateway on the host veth, a host route to each
/// container address through it.
fn setup_host_veth(
    nl: &Netlink,
    host: &Link,
    pairs: &[(IpNetwork, IpAddr)],
) -> Result<(), CniError> {
    for (addr, gw) in pairs {
        // Every host veth of the network holds the same gateway address:
        // duplicate address detection would only delay the container's
        // first packets.
        let flags = AddrFlags {
            no_prefix_route: false,
            no_dad: gw.is_ipv6(),
        };
        match nl.add_addr_flags(host, host_net(*gw), flags) {
            Ok(()) => {}
            Err(e) if e.is_exists() => {}
            Err(e) => {
                return Err(CniError::internal(format!(
                    "failed to add IP addr {} to veth: {e}",
                    host_net(*gw)
                )));
            }
        }
        let mut r = Route::new(host_net(addr.ip())).dev(host.index);
        r.scope = Some(scope::HOST);
        match nl.add_route(&r) {
            Ok(()) => {}
            Err(e) if e.is_exists() => {}
            Err(e) => {
                return Err(CniError::internal(format!(
                    "failed to add route on host: {e}"
                )));
            }
        }
    }
    Ok(())
}

/// The links half of ADD, which needs no IPAM result: both netlink
/// handles and the veth pair (the container end still unconfigured).
struct Links {
    host_nl: Netlink,
    ns_nl: Netlink,
    pair: VethPair,
}

fn create_links(args: &CmdArgs, conf: &PtpConf, ns: &NetNs) -> Result<Links, CniError> {
    let host_nl = Netlink::host().cni()?;
    let ns_nl = Netlink::for_ns(ns).cni()?;
    let pair = iface::setup_veth(
        &host_nl,
        ns,
        &ns_nl,
        VethSetup {
            ifname: &args.ifname,
            mtu: conf.mtu,
            container_mac: None,
            controller: None,
        },
    )?;
    Ok(Links {
        host_nl,
        ns_nl,
        pair,
    })
}

fn del_veth(links: &Links) -> Result<(), CniError> {
    // Deleting one end removes the pair with its addresses and routes.
    links.host_nl.del_link(&links.pair.host).cni()
}

pub fn add(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let path = args
        .netns
        .as_deref()
        .ok_or_else(|| CniError::internal("CNI_NETNS is required for ADD"))?;
    let ns = cni_plugin::netns::open(path)?;
    // The IPAM delegate is a separate process that mostly waits on exec
    // and files: create the veth pair meanwhile. Dropped on an error
    // return (after the veth's deletion), the job undoes itself.
    let mut ipam = IpamJob::start(args)?;
    let links = create_links(args, &conf, &ns);
    let result = ipam.finish();
    // When both failed, IPAM's error is the one reported.
    let links = links.map_err(|e| result.as_ref().err().cloned().unwrap_or(e))?;
    let mut rb = Rollback::default();
    rb.push("delete veth", || del_veth(&links));
    match result.and_then(|r| configure(args, &conf, &ns, &links, r, &mut rb)) {
        Ok(result) => {
            rb.disarm();
            ipam.disarm();
            Ok(Output::Result(result))
        }
        Err(e) => {
            rb.run();
            Err(e)
        }
    }
}

/// Everything after IPAM and the veth pair: addresses and routes on both
/// ends, masquerade, DNS.
fn configure<'a>(
    args: &'a CmdArgs,
    conf: &'a PtpConf,
    ns: &NetNs,
    links: &Links,
    mut result: CniResult,
    rb: &mut Rollback<'a>,
) -> Result<CniResult, CniError> {
    let pairs = gateways(&result)?;
    if let Some(mtu) = conf.mtu
        && mtu < MIN_MTU_V6
        && pairs.iter().any(|(a, _)| a.is_ipv6())
    {
        return Err(CniError::invalid_config(format!(
            "mtu {mtu} is too small for IPv6 (at least {MIN_MTU_V6})"
        )));
    }
    iface::enable_forwarding(&result).map_err(|e| e.context("Could not enable IP forwarding"))?;

    let pair = &links.pair;
    for ip in &mut result.ips {
        ip.interface = Some(1);
    }
    result.interfaces = vec![
        Interface {
            name: pair.host.name.clone(),
            mac: pair.host.mac.clone(),
            ..Interface::default()
        },
        Interface {
            name: pair.container.name.clone(),
            mac: pair.container.mac.clone(),
            sandbox: ns.path().display().to_string(),
            ..Interface::default()
        },
    ];

    iface::configure_iface_with(ns, &links.ns_nl, &pair.container, &result)?;
    replace_prefix_routes(&links.ns_nl, &pairs, &pair.container)?;
    setup_host_veth(&links.host_nl, &pair.host, &pairs)?;

    if conf.ip_masq {
        let att = Attachment {
            network: &conf.name,
            ifname: &args.ifname,
            container_id: &args.container_id,
        };
        let addrs: Vec<IpNetwork> = pairs.iter().map(|(a, _)| *a).collect();
        rb.push("masquerade teardown", move || masq::teardown(att));
        masq::setup(Backend::resolve(conf.backend), &addrs, att)?;
    }

    if let Some(dns) = &conf.dns {
        result.dns = dns.clone();
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cni_skel::IpConfig;

    fn ipc(a: &str, gw: Option<&str>) -> IpConfig {
        IpConfig {
            interface: None,
            address: a.parse().unwrap(),
            gateway: gw.map(|g| g.parse().unwrap()),
        }
    }

    #[test]
    fn gateways_are_required() {
        let mut r = CniResult::default();
        assert!(gateways(&r).unwrap_err().msg.contains("missing IP config"));
        r.ips = vec![
            ipc("10.0.0.5/24", Some("10.0.0.1")),
            ipc("fd00::5/64", Some("fd00::1")),
        ];
        assert_eq!(gateways(&r).unwrap().len(), 2);
        r.ips = vec![ipc("10.0.0.5/24", None)];
        assert!(gateways(&r).unwrap_err().msg.contains("no gateway"));
        r.ips = vec![ipc("10.0.0.5/24", Some("fd00::1"))];
        assert!(gateways(&r).is_err());
        r.ips = vec![ipc("10.0.0.5/24", Some("10.0.0.5"))];
        assert!(gateways(&r).is_err());
    }

    #[test]
    fn routes_replace_the_prefix_route() {
        let pairs: Vec<(IpNetwork, IpAddr)> = vec![
            ("10.0.0.5/24".parse().unwrap(), "10.0.0.1".parse().unwrap()),
            ("fd00::5/64".parse().unwrap(), "fd00::1".parse().unwrap()),
        ];
        let r: Vec<String> = pairs
            .iter()
            .flat_map(|(a, g)| ptp_routes(*a, *g, 7))
            .map(|r| r.to_string())
            .collect();
        assert_eq!(
            r,
            [
                "10.0.0.1/32 dev 7 src 10.0.0.5 scope 253",
                "10.0.0.0/24 via 10.0.0.1 dev 7 src 10.0.0.5",
                "fd00::1/128 dev 7 src fd00::5 scope 253",
                "fd00::/64 via fd00::1 dev 7 src fd00::5",
            ]
        );
        assert_eq!(
            host_net("10.0.0.5".parse().unwrap()).to_string(),
            "10.0.0.5/32"
        );
        assert_eq!(
            subnet(&"10.0.0.5/24".parse().unwrap()).to_string(),
            "10.0.0.0/24"
        );
    }
}
