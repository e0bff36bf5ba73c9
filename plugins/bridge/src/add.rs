//! ADD: bridge, IPAM, veth pair, addresses and routes, gateway, rules.
//!
//! The IPAM plugin runs on a thread while the veth pair is created (a
//! child process and kernel work overlap); everything after that pushes
//! its undo onto a [`Rollback`], so a failed ADD leaves no veth, no rules
//! and no reservation behind. (The bridge and its gateway address are
//! shared by every container and stay, as on DEL.)

use crate::config::{self, Conf};
use cni_fw::masq::{self, Attachment};
use cni_net::bridge_vlan::PortVlan;
use cni_net::{BridgeOpts, IpFamily, Link, Mac, NetNs, Netlink, sysctl};
use cni_plugin::NetResult;
use cni_plugin::iface::{self, VethPair, VethSetup};
use cni_plugin::ipam::IpamJob;
use cni_plugin::rollback::Rollback;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Interface, Route};
use ipnetwork::IpNetwork;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long to wait for the host port to forward (the reference's retries
/// sum to 2.55 s); we poll more often within the same budget.
const PORT_UP_BUDGET: Duration = Duration::from_millis(2550);

/// The interface index of the container veth in the result.
const CONTAINER_IDX: usize = 2;

/// A random locally administered unicast MAC.
fn random_mac() -> Mac {
    let mut b: [u8; 6] = cni_plugin::iface::random_bytes();
    b[0] = (b[0] & 0xfe) | 0x02;
    Mac(b)
}

/// Creates or finds the bridge, up, with `accept_ra=0`.
pub fn setup_bridge(nl: &Netlink, conf: &Conf) -> Result<Link, CniError> {
    let br = nl
        .ensure_bridge(&BridgeOpts {
            name: &conf.bridge,
            mtu: conf.mtu,
            // A MAC given at creation is "set", so the kernel never swaps it
            // for a port's as ports come and go (cni#285): stable also in L2
            // mode, where no gateway address pins it.
            mac: Some(random_mac()),
            promisc: conf.promisc,
            vlan_filtering: conf.vlan_filtering().then_some(true),
            up: true,
        })
        .map_err(|e| {
            CniError::internal(format!("failed to create bridge {:?}: {e}", conf.bridge))
        })?;
    // We want to own the routes of this interface; failures are ignored, as
    // in the reference (IPv6 may be disabled).
    let _ = sysctl::write(&format!("net/ipv6/conf/{}/accept_ra", br.name), "0");
    Ok(br)
}

/// The VLAN settings of a new host port, as the reference applies them.
pub fn setup_port_vlans(
    nl: &Netlink,
    port: &Link,
    vlan: u16,
    trunk: &[u16],
    trunk_given: bool,
    preserve_default_vlan: bool,
) -> Result<(), CniError> {
    let verr = |e: cni_net::NetError| {
        CniError::internal(format!(
            "failed to setup vlan tag on interface {:?}: {e}",
            port.name
        ))
    };
    if (vlan != 0 || !trunk.is_empty()) && !preserve_default_vlan {
        nl.bridge_vlan_clear(port).map_err(|e| {
            CniError::internal(format!(
                "failed to remove default vlan on interface {:?}: {e}",
                port.name
            ))
        })?;
    }
    if vlan != 0 {
        let access = PortVlan {
            vid: vlan,
            pvid: true,
            untagged: true,
        };
        nl.bridge_vlan_add(port, access).map_err(verr)?;
    }
    for &vid in trunk {
        let tagged = PortVlan {
            vid,
            pvid: false,
            untagged: false,
        };
        nl.bridge_vlan_add(port, tagged).map_err(verr)?;
    }
    if vlan == 0 && trunk_given && !trunk.is_empty() {
        // A trunk without an access VLAN keeps native VLAN 1.
        let native = PortVlan {
            vid: 1,
            pvid: true,
            untagged: true,
        };
        nl.bridge_vlan_add(port, native).map_err(verr)?;
    }
    Ok(())
}

/// Gateways per family: the addresses to put on the bridge.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Gateways {
    /// IPv4 gateway addresses with the container's prefix.
    pub v4: Vec<IpNetwork>,
    /// IPv6 gateway addresses with the container's prefix.
    pub v6: Vec<IpNetwork>,
}

/// The first address of the subnet (`calcGatewayIP`).
fn subnet_gateway(a: &IpNetwork) -> Option<IpAddr> {
    match a.network() {
        IpAddr::V4(n) => u32::from(n)
            .checked_add(1)
            .map(|v| IpAddr::V4(std::net::Ipv4Addr::from(v))),
        IpAddr::V6(n) => u128::from(n)
            .checked_add(1)
            .map(|v| IpAddr::V6(std::net::Ipv6Addr::from(v))),
    }
}

fn default_dst(v4: bool) -> IpNetwork {
    let ip: IpAddr = if v4 {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    IpNetwork::new(ip, 0).unwrap_or_else(|_| IpNetwork::from(ip))
}

/// The reference's `calcGateways`: points every IP at the container
/// interface, fills in missing gateways (isGateway), adds default routes
/// (isDefaultGateway) and collects the bridge addresses.
pub fn calc_gateways(result: &mut CniResult, conf: &Conf) -> Gateways {
    let mut gws = Gateways::default();
    let mut default_found = [false, false];
    for ip in result.ips.iter_mut() {
        let v4 = ip.address.is_ipv4();
        let fam = usize::from(!v4);
        ip.interface = Some(CONTAINER_IDX);
        if ip.gateway.is_none() && conf.is_gw {
            ip.gateway = subnet_gateway(&ip.address);
        }
        if conf.is_default_gw {
            let dst = default_dst(v4);
            if !default_found[fam] {
                default_found[fam] = result.routes.iter().any(|r| r.gw.is_some() && r.dst == dst);
            }
            if !default_found[fam] {
                result.routes.push(Route::new(dst, ip.gateway));
                default_found[fam] = true;
            }
        }
        if conf.is_gw
            && let Some(gw) = ip.gateway
            && let Ok(net) = IpNetwork::new(gw, ip.address.prefix())
        {
            if v4 { &mut gws.v4 } else { &mut gws.v6 }.push(net);
        }
    }
    gws
}

/// The reference's `ensureAddr`: the gateway address on the bridge (or the
/// VLAN gateway interface), replacing a conflicting one with
/// `forceAddress`, then the link's MAC set to itself to pin it. Returns
/// whether the address was added.
pub fn ensure_addr(
    nl: &Netlink,
    link: &Link,
    gw: IpNetwork,
    force: bool,
) -> Result<bool, CniError> {
    let family = IpFamily::of(&gw.ip());
    let addrs = nl
        .addrs(link, Some(family))
        .map_err(|e| CniError::internal(format!("could not get list of IP addresses: {e}")))?;
    for a in &addrs {
        if a.address.ip() == gw.ip() && a.address.prefix() == gw.prefix() {
            return Ok(false);
        }
        let conflicts =
            family == IpFamily::V4 || a.address.contains(gw.ip()) || gw.contains(a.address.ip());
        if conflicts {
            if force {
                nl.del_addr(link, a.address).map_err(|e| {
                    CniError::internal(format!(
                        "could not remove IP address from {:?}: {e}",
                        link.name
                    ))
                })?;
            } else {
                return Err(CniError::internal(format!(
                    "{:?} already has an IP address different from {gw}",
                    link.name
                )));
            }
        }
    }
    match nl.add_addr(link, gw) {
        Ok(()) => {}
        Err(e) if e.is_exists() => {}
        Err(e) => {
            return Err(CniError::internal(format!(
                "could not add IP address {gw} to {:?}: {e}",
                link.name
            )));
        }
    }
    // Pin the MAC: otherwise a bridge takes the lowest MAC of its ports and
    // changes it as they come and go. A bridge created without ports may
    // still have no MAC (all zeros): it has taken a port's by now.
    let mut mac: Option<Mac> = link.mac.parse().ok();
    if mac.is_none_or(|m| m.0 == [0; 6]) {
        mac = nl
            .link_by_index(link.index)
            .cni()?
            .and_then(|l| l.mac.parse().ok())
            .filter(|m: &Mac| m.0 != [0; 6]);
    }
    if let Some(mac) = mac {
        nl.set_mac(link, mac)
            .map_err(|e| CniError::internal(format!("could not set bridge's mac: {e}")))?;
    }
    Ok(true)
}

/// The reference's `ensureVlanInterface`: a veth `<bridge>.<vlan>` in the
/// host whose peer is an access port of the VLAN; it holds the gateway.
fn ensure_vlan_interface(host: &Netlink, br: &Link, conf: &Conf) -> Result<Link, CniError> {
    let name = format!("{}.{}", br.name, conf.vlan);
    if let Some(l) = host.link_by_name(&name).cni()? {
        return Ok(l);
    }
    let host_ns = NetNs::current().cni()?;
    let pair = iface::setup_veth(
        host,
        &host_ns,
        host,
        VethSetup {
            ifname: &name,
            mtu: Some(br.mtu),
            container_mac: None,
            controller: Some(br.index),
        },
    )
    .map_err(|e| e.context(format!("failed to create vlan gateway {name:?}")))?;
    setup_port_vlans(
        host,
        &pair.host,
        conf.vlan,
        &[],
        false,
        conf.preserve_default_vlan,
    )?;
    host.set_up(&pair.container)
        .map_err(|e| CniError::internal(format!("failed to up {name:?}: {e}")))?;
    Ok(host.link_by_name(&name).cni()?.unwrap_or(pair.container))
}

/// Sets the container end, then the host end of the port up (in this
/// order: see `setup_veth_host_up`).
fn port_up(host: &Netlink, ns_nl: &Netlink, pair: &VethPair, ifname: &str) -> Result<(), CniError> {
    ns_nl
        .set_up(&pair.container)
        .map_err(|e| CniError::internal(format!("failed to set {ifname:?} up: {e}")))?;
    host.set_up(&pair.host)
        .map_err(|e| CniError::internal(format!("failed to set {:?} up: {e}", pair.host.name)))
}

/// Waits until the host port is operationally up; returns its MAC then.
///
/// The state is read from sysfs when it shows this very device (no RTNL
/// lock, so no waiting behind the kernel's work for the new port on a big
/// bridge), else by netlink.
fn wait_port_up(host: &Netlink, port: &Link) -> Result<String, CniError> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(50);
    loop {
        let (state, mac) = match cni_net::sysfs::link_operstate_mac(&port.name, port.index) {
            Some(s) => s,
            None => {
                let l = host.link_by_index(port.index).cni()?.ok_or_else(|| {
                    CniError::internal(format!("host veth {} disappeared", port.name))
                })?;
                (l.operstate, l.mac)
            }
        };
        if state == "up" {
            return Ok(mac);
        }
        if start.elapsed() >= PORT_UP_BUDGET {
            return Err(CniError::internal(format!(
                "bridge port in error state: {state}"
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

fn interface(link: &Link, sandbox: &str) -> Interface {
    Interface {
        name: link.name.clone(),
        mac: link.mac.clone(),
        sandbox: sandbox.to_string(),
        ..Interface::default()
    }
}

/// Logs the time since the start of ADD at debug level (`RCNI_LOG=debug`).
fn lap(start: Instant, stage: &str) {
    log::debug!("add: {stage} done at {:?}", start.elapsed());
}

/// ADD.
pub fn add(args: &CmdArgs) -> CmdResult {
    let start = Instant::now();
    let conf = config::load(args)?;
    // IPAM (a child process) runs from here on, while the bridge and the
    // veth pair are set up, when it needs no link (host-local, static; an
    // IPAM that may use the link, dhcp, runs once the port is up: `attach`).
    // Started from this thread, not a helper thread: with a second thread
    // every munmap and mprotect of the process needs a TLB shootdown on
    // the other CPU, and the thread's own start and end cost more than the
    // spawn it would take off this one (measured: ADD 3.2 -> 2.5 ms).
    // Dropped before it finished (an error return), the job undoes itself.
    let ipam = if conf.layer3 {
        Some(IpamJob::early(args)?)
    } else {
        None
    };
    let prepared = prepare(args, &conf);
    lap(start, "bridge and netns");
    let (host, br, ns, ns_nl) = prepared?;
    let mut rb = Rollback::default();
    match attach(args, &conf, &host, &br, &ns, &ns_nl, ipam, &mut rb, start) {
        Ok(result) => {
            lap(start, "ADD");
            rb.disarm();
            Ok(result.into())
        }
        Err(e) => {
            rb.run();
            Err(e)
        }
    }
}

/// The host handle, the bridge, the netns and its handle.
fn prepare(args: &CmdArgs, conf: &Conf) -> Result<(Netlink, Link, NetNs, Netlink), CniError> {
    // The netns first, entered (setns refuses other namespace types): an
    // ADD whose CNI_NETNS is not a network namespace must not create the
    // bridge.
    let netns = args.netns.as_deref().unwrap_or(std::path::Path::new(""));
    let ns = cni_plugin::netns::open(netns)?;
    let ns_nl = Netlink::for_ns(&ns).cni()?;
    let host = Netlink::host().cni()?;
    let br = setup_bridge(&host, conf)?;
    Ok((host, br, ns, ns_nl))
}

/// Container sysctls (before addresses and link up, as the reference).
fn container_sysctls(ns: &NetNs, ifname: &str, dad: bool) -> Result<(), CniError> {
    ns.run(move || {
        // Failures are ignored, as in the reference (IPv6 may be off).
        if dad {
            let _ = sysctl::write(&format!("net/ipv6/conf/{ifname}/enhanced_dad"), "1");
            let _ = sysctl::write(&format!("net/ipv6/conf/{ifname}/accept_dad"), "1");
        } else {
            let _ = sysctl::write(&format!("net/ipv6/conf/{ifname}/accept_dad"), "0");
        }
        let _ = sysctl::write(&format!("net/ipv4/conf/{ifname}/arp_notify"), "1");
    })
    .cni()?;
    Ok(())
}

/// The veth pair on the bridge, with the port's flags and VLANs.
fn create_port<'a>(
    args: &'a CmdArgs,
    conf: &'a Conf,
    host: &'a Netlink,
    br: &Link,
    ns: &NetNs,
    ns_nl: &Netlink,
    rb: &mut Rollback<'a>,
) -> Result<VethPair, CniError> {
    // The host end comes up after the container end (see
    // `setup_veth_host_up`), in `attach`.
    let pair = iface::setup_veth_host_up(
        host,
        ns,
        ns_nl,
        VethSetup {
            ifname: &args.ifname,
            mtu: conf.mtu,
            container_mac: conf.mac,
            controller: Some(br.index),
        },
        false,
    )?;
    let host_veth = pair.host.clone();
    rb.push("delete veth", move || {
        host.del_link(&host_veth).map_err(cni_plugin::net_error)
    });
    if conf.hairpin {
        host.set_hairpin(&pair.host, true).map_err(|e| {
            CniError::internal(format!(
                "failed to setup hairpin mode for {}: {e}",
                pair.host.name
            ))
        })?;
    }
    if conf.port_isolation {
        host.set_isolated(&pair.host, true).map_err(|e| {
            CniError::internal(format!(
                "failed to set isolated on for {}: {e}",
                pair.host.name
            ))
        })?;
    }
    setup_port_vlans(
        host,
        &pair.host,
        conf.vlan,
        &conf.trunk,
        conf.trunk_given,
        conf.preserve_default_vlan,
    )?;
    Ok(pair)
}

/// Everything after the bridge and the netns, each step registering its undo.
#[allow(clippy::too_many_arguments)]
fn attach<'a>(
    args: &'a CmdArgs,
    conf: &'a Conf,
    host: &'a Netlink,
    br: &Link,
    ns: &NetNs,
    ns_nl: &Netlink,
    ipam: Option<IpamJob<'a>>,
    rb: &mut Rollback<'a>,
    start: Instant,
) -> Result<CniResult, CniError> {
    let sandbox = ns.path().display().to_string();
    let port = create_port(args, conf, host, br, ns, ns_nl, rb);
    lap(start, "veth");
    // While IPAM may still be running: the container sysctls.
    let mut sysctls = match &port {
        Ok(_) if conf.layer3 => container_sysctls(ns, &args.ifname, conf.enable_dad),
        _ => Ok(()),
    };
    let mut result = CniResult::default();
    lap(start, "container sysctls");
    // An IPAM that may use the link (dhcp talks to its server through it)
    // runs only now, with the port up at both ends, as in the reference.
    let port = match port {
        Ok(pair) if ipam.as_ref().is_some_and(IpamJob::deferred) => {
            std::mem::replace(&mut sysctls, Ok(()))?;
            port_up(host, ns_nl, &pair, &args.ifname)?;
            Ok(pair)
        }
        Err(e) if ipam.as_ref().is_some_and(IpamJob::deferred) => return Err(e),
        other => other,
    };
    if let Some(job) = ipam {
        // Its undo runs before the veth's: dhcp releases from the port.
        let ipam = job.finish_onto(rb)?;
        lap(start, "IPAM");
        if ipam.ips.is_empty() {
            return Err(CniError::internal("IPAM plugin returned missing IP config"));
        }
        result.ips = ipam.ips;
        result.routes = ipam.routes;
        result.dns = ipam.dns;
    }
    let pair = port?;
    sysctls?;
    result.interfaces = vec![
        interface(br, ""),
        interface(&pair.host, ""),
        interface(&pair.container, &sandbox),
    ];

    if conf.mac_spoof_chk {
        cni_fw::spoofcheck::setup(
            &pair.host.name,
            &pair.container.mac,
            &args.container_id,
            &args.ifname,
        )?;
        rb.push("spoof-check teardown", move || {
            cni_fw::spoofcheck::teardown(&args.container_id, &args.ifname)
        });
    }

    if conf.layer3 {
        configure_l3(args, conf, host, br, ns, ns_nl, &mut result, rb)?;
    } else if !conf.disable_container_interface {
        ns_nl
            .set_up(&pair.container)
            .map_err(|e| CniError::internal(format!("failed to set {:?} up: {e}", args.ifname)))?;
    }
    host.set_up(&pair.host)
        .map_err(|e| CniError::internal(format!("failed to set {:?} up: {e}", pair.host.name)))?;

    lap(start, "configure");
    let host_mac = if conf.disable_container_interface {
        match cni_net::sysfs::link_mac(&pair.host.name, pair.host.index) {
            Some(mac) => mac,
            None => {
                host.link_by_index(pair.host.index)
                    .cni()?
                    .unwrap_or(pair.host)
                    .mac
            }
        }
    } else {
        wait_port_up(host, &pair.host)?
    };
    // The host end's MAC may change; so may the bridge's (when a bridge not
    // created by us takes a port's MAC).
    if let Some(i) = result.interfaces.get_mut(1) {
        i.mac = host_mac;
    }
    lap(start, "port up");
    // sysfs first: a netlink lookup of the bridge waits for the RTNL lock,
    // which the kernel holds for a while after a port joins a big bridge.
    let br_mac = match cni_net::sysfs::link_mac(&br.name, br.index) {
        Some(mac) => mac,
        None => {
            host.link_by_index(br.index)
                .cni()?
                .ok_or_else(|| {
                    CniError::internal(format!("could not lookup {:?}: Link not found", br.name))
                })?
                .mac
        }
    };
    if let Some(i) = result.interfaces.get_mut(0) {
        i.mac = br_mac;
    }

    if let Some(dns) = args.conf.dns.as_ref().filter(|d| !d.is_empty()) {
        result.dns = dns.clone();
    }
    result.cni_version = args.cni_version().to_string();
    Ok(result)
}

/// Container sysctls, addresses and routes; the gateway on the bridge and
/// forwarding (isGateway); masquerade (ipMasq).
#[allow(clippy::too_many_arguments)]
fn configure_l3<'a>(
    args: &'a CmdArgs,
    conf: &'a Conf,
    host: &'a Netlink,
    br: &Link,
    ns: &NetNs,
    ns_nl: &Netlink,
    result: &mut CniResult,
    rb: &mut Rollback<'a>,
) -> Result<(), CniError> {
    let gws = calc_gateways(result, conf);
    iface::configure_iface(ns, ns_nl, &args.ifname, result)?;

    if conf.is_gw {
        let mut gw_link = br.clone();
        if conf.vlan != 0 && !(gws.v4.is_empty() && gws.v6.is_empty()) {
            gw_link = ensure_vlan_interface(host, br, conf)
                .map_err(|e| e.context("failed to create vlan interface"))?;
            result.interfaces.push(interface(&gw_link, ""));
        }
        for gw in gws.v4.iter().chain(gws.v6.iter()) {
            ensure_addr(host, &gw_link, *gw, conf.force_address).map_err(|e| {
                if conf.vlan != 0 {
                    e.context("failed to set vlan interface for bridge with addr")
                } else {
                    e.context("failed to set bridge addr")
                }
            })?;
        }
        let forward = |key: &str| {
            sysctl::write(key, "1")
                .map_err(|e| CniError::internal(format!("failed to enable forwarding: {e}")))
        };
        if !gws.v4.is_empty() {
            forward("net/ipv4/ip_forward")?;
        }
        if !gws.v6.is_empty() {
            forward("net/ipv6/conf/all/forwarding")?;
        }
    }

    if conf.ip_masq {
        let addrs: Vec<IpNetwork> = result.ips.iter().map(|i| i.address).collect();
        let att = Attachment {
            network: &conf.network,
            ifname: &args.ifname,
            container_id: &args.container_id,
        };
        let backend = cni_fw::Backend::resolve(conf.ip_masq_backend);
        rb.push("masquerade teardown", move || masq::teardown(att));
        masq::setup(backend, &addrs, att)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cni_skel::IpConfig;

    fn net(s: &str) -> IpNetwork {
        s.parse().unwrap()
    }

    fn result(ips: &[(&str, Option<&str>)]) -> CniResult {
        CniResult {
            ips: ips
                .iter()
                .map(|(a, g)| IpConfig {
                    interface: None,
                    address: net(a),
                    gateway: g.map(|g| g.parse().unwrap()),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn gateways_default_to_the_first_address() {
        let conf = Conf {
            is_gw: true,
            ..Conf::default()
        };
        let mut r = result(&[("10.1.2.7/24", None), ("fd00:1::9/64", Some("fd00:1::fe"))]);
        let g = calc_gateways(&mut r, &conf);
        assert_eq!(g.v4, vec![net("10.1.2.1/24")]);
        assert_eq!(g.v6, vec![net("fd00:1::fe/64")]);
        assert!(r.ips.iter().all(|i| i.interface == Some(2)));
        assert_eq!(r.ips[0].gateway, Some("10.1.2.1".parse().unwrap()));
        assert!(r.routes.is_empty());
    }

    #[test]
    fn no_gateway_without_is_gateway() {
        let mut r = result(&[("10.1.2.7/24", None)]);
        let g = calc_gateways(&mut r, &Conf::default());
        assert_eq!(g, Gateways::default());
        assert_eq!(r.ips[0].gateway, None);
        assert_eq!(r.ips[0].interface, Some(2));
    }

    #[test]
    fn default_routes_once_per_family_unless_present() {
        let conf = Conf {
            is_gw: true,
            is_default_gw: true,
            ..Conf::default()
        };
        let mut r = result(&[
            ("10.1.2.7/24", None),
            ("10.9.0.3/16", None),
            ("fd00:1::9/64", None),
        ]);
        calc_gateways(&mut r, &conf);
        assert_eq!(
            r.routes,
            vec![
                Route::new(net("0.0.0.0/0"), Some("10.1.2.1".parse().unwrap())),
                Route::new(net("::/0"), Some("fd00:1::1".parse().unwrap())),
            ]
        );
        // An IPAM default route with a gateway suppresses ours; one without
        // a gateway does not.
        let mut r = result(&[("10.1.2.7/24", None), ("fd00:1::9/64", None)]);
        r.routes = vec![
            Route::new(net("0.0.0.0/0"), Some("10.1.2.254".parse().unwrap())),
            Route::new(net("::/0"), None),
        ];
        calc_gateways(&mut r, &conf);
        assert_eq!(r.routes.len(), 3);
        assert_eq!(r.routes[2].dst, net("::/0"));
        assert!(r.routes[2].gw.is_some());
    }

    #[test]
    fn random_macs_are_local_unicast_and_differ() {
        let macs: Vec<Mac> = (0..20).map(|_| random_mac()).collect();
        for m in &macs {
            assert_eq!(m.0[0] & 0x03, 0x02);
        }
        let mut distinct = macs.clone();
        distinct.sort_by_key(|m| m.0);
        distinct.dedup();
        assert_eq!(distinct.len(), macs.len(), "{macs:?}");
    }
}
