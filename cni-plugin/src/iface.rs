//! What the veth plugins (bridge, ptp) share: the veth pair into the
//! container, applying an IPAM result inside it (the reference's
//! `ConfigureIface`), forwarding sysctls, and CHECK's comparison of a
//! `prevResult` with the kernel.

use crate::NetResult;
use cni_net::{IpFamily, Link, Mac, NetError, NetNs, Netlink, Route, sysctl};
use cni_skel::{CniError, CniResult};
use ipnetwork::IpNetwork;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The kernel's local table (addresses of this host).
const TABLE_LOCAL: u32 = 255;

/// How many random host-side names to try before giving up, as the reference.
const VETH_NAME_TRIES: usize = 10;

/// `veth` + 8 random hex digits, the reference's host-side name.
pub fn random_veth_name() -> String {
    format!("veth{:08x}", u32::from_be_bytes(random_bytes()))
}

/// `N` random bytes, without a file to open: std seeds each thread's
/// hash keys with getrandom(2) once (what /dev/urandom gives, in one
/// system call instead of an open, an `fcntl`, a read and a close), and
/// each `RandomState` hashes under the next key, so SipHash of a counter
/// under each gives unpredictable bytes that differ from call to call.
/// For names and addresses that must not collide, not for secrets.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; N];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        let bytes = h.finish().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    out
}

/// The two ends of a container's veth pair.
#[derive(Debug, Clone)]
pub struct VethPair {
    /// The end in the host namespace (`veth<8 hex>`).
    pub host: Link,
    /// The end in the container (`CNI_IFNAME`).
    pub container: Link,
}

/// Options for [`setup_veth`].
#[derive(Debug, Clone, Copy, Default)]
pub struct VethSetup<'a> {
    /// Container interface name.
    pub ifname: &'a str,
    /// MTU of both ends; `None` = kernel default.
    pub mtu: Option<u32>,
    /// MAC of the container end.
    pub container_mac: Option<Mac>,
    /// Bridge to enslave the host end to at creation.
    pub controller: Option<u32>,
}

/// Creates the veth pair in one request from the host side: the container
/// end placed straight into `ns` (left down until configured), the host end
/// up, with `accept_ra=0`. A taken container name is an error; a taken
/// random host name is retried.
pub fn setup_veth(
    host_nl: &Netlink,
    ns: &NetNs,
    ns_nl: &Netlink,
    opts: VethSetup<'_>,
) -> Result<VethPair, CniError> {
    setup_veth_host_up(host_nl, ns, ns_nl, opts, true)
}

/// [`setup_veth`], with the host end left down when `host_up` is false
/// (the caller sets it up once the container end is up). A host end that
/// is up while its peer is down has a carrier-off event pending, and the
/// next netlink lookup of it makes the kernel handle that event with an
/// RCU grace period (`dev_deactivate`) in the caller's context: bringing
/// the host end up last avoids that wait altogether.
pub fn setup_veth_host_up(
    host_nl: &Netlink,
    ns: &NetNs,
    ns_nl: &Netlink,
    opts: VethSetup<'_>,
    host_up: bool,
) -> Result<VethPair, CniError> {
    if ns_nl.link_by_name(opts.ifname).cni()?.is_some() {
        return Err(CniError::internal(format!(
            "container veth name provided ({}) already exists",
            opts.ifname
        )));
    }
    let mut last_err = None;
    for _ in 0..VETH_NAME_TRIES {
        let host_name = random_veth_name();
        let created = host_nl.create_veth(&cni_net::VethOpts {
            name: &host_name,
            peer_name: opts.ifname,
            peer_ns: Some(ns),
            mtu: opts.mtu,
            mac: None,
            peer_mac: opts.container_mac,
            controller: opts.controller,
            up: host_up,
        });
        match created {
            Ok(host) => {
                // Router advertisements on the host end would configure the
                // host from a container; the reference ignores failures here.
                let _ = sysctl::write(&format!("net/ipv6/conf/{host_name}/accept_ra"), "0");
                let container = ns_nl.must_link(opts.ifname).cni()?;
                return Ok(VethPair { host, container });
            }
            Err(e) if e.is_exists() => {
                if ns_nl.link_by_name(opts.ifname).cni()?.is_some() {
                    return Err(CniError::internal(format!(
                        "container veth name provided ({}) already exists",
                        opts.ifname
                    )));
                }
                last_err = Some(e);
            }
            Err(e) => return Err(crate::net_error(e)),
        }
    }
    Err(match last_err {
        Some(e) => CniError::internal(format!("failed to find a free host veth name: {e}")),
        None => CniError::internal("failed to find a free host veth name"),
    })
}

/// The addresses of `result` that belong to `ifname` (their interface index
/// points at an entry of that name).
pub fn addresses_for<'a>(
    result: &'a CniResult,
    ifname: &'a str,
) -> Result<Vec<&'a cni_skel::IpConfig>, CniError> {
    let mut out = Vec::new();
    for ip in &result.ips {
        let Some(idx) = ip.interface else { continue };
        match result.interfaces.get(idx) {
            None => {
                return Err(CniError::internal(format!(
                    "failed to add IP addr {} to {ifname:?}: invalid interface index",
                    ip.address
                )));
            }
            Some(i) if i.name == ifname => out.push(ip),
            Some(_) => {}
        }
    }
    Ok(out)
}

/// The reference's `ConfigureIface`, inside the container: addresses on
/// `ifname`, the link up, then the result's routes (gateway defaulting to
/// the family's gateway; metric, table, scope, MTU and advmss applied).
pub fn configure_iface(
    ns: &NetNs,
    nl: &Netlink,
    ifname: &str,
    result: &CniResult,
) -> Result<(), CniError> {
    let link = nl.must_link(ifname).cni()?;
    configure_iface_with(ns, nl, &link, result)
}

/// [`configure_iface`] on a link the caller already looked up (one netlink
/// round trip fewer).
pub fn configure_iface_with(
    ns: &NetNs,
    nl: &Netlink,
    link: &Link,
    result: &CniResult,
) -> Result<(), CniError> {
    let ifname = link.name.as_str();
    let addrs = addresses_for(result, ifname)?;
    if addrs.iter().any(|a| a.address.is_ipv6()) {
        let ifname = ifname.to_string();
        ns.run(move || -> Result<(), NetError> {
            for key in [
                "net/ipv6/conf/lo/disable_ipv6".to_string(),
                format!("net/ipv6/conf/{ifname}/disable_ipv6"),
            ] {
                sysctl::write(&key, "0")?;
            }
            // Keep the v6 addresses when the link goes down (as the reference).
            let _ = sysctl::write(&format!("net/ipv6/conf/{ifname}/keep_addr_on_down"), "1");
            Ok(())
        })
        .cni()?
        .cni()?;
    }
    let mut v4gw = None;
    let mut v6gw = None;
    for a in &addrs {
        nl.add_addr(link, a.address).map_err(|e| {
            CniError::internal(format!(
                "failed to add IP addr {} to {ifname:?}: {e}",
                a.address
            ))
        })?;
        match (a.address, a.gateway) {
            (IpNetwork::V4(_), Some(gw)) if v4gw.is_none() => v4gw = Some(gw),
            (IpNetwork::V6(_), Some(gw)) if v6gw.is_none() => v6gw = Some(gw),
            _ => {}
        }
    }
    nl.set_up(link)
        .map_err(|e| CniError::internal(format!("failed to set {ifname:?} UP: {e}")))?;
    if v6gw.is_some() {
        settle_dad(nl, link, Duration::from_secs(5))?;
    }
    for r in &result.routes {
        let gw = r.gw.or(if r.dst.is_ipv4() { v4gw } else { v6gw });
        let route = kernel_route(r, gw, link.index);
        match nl.add_route(&route) {
            Ok(()) => {}
            Err(e) if e.is_exists() => {}
            Err(e) => {
                let via = gw.map(|g| g.to_string()).unwrap_or_else(|| "<nil>".into());
                return Err(CniError::internal(format!(
                    "failed to add route '{} via {via} dev {ifname}': {e}",
                    r.dst
                )));
            }
        }
    }
    Ok(())
}

/// A result route as a kernel route on interface `oif`.
pub fn kernel_route(r: &cni_skel::Route, gw: Option<IpAddr>, oif: u32) -> Route {
    let mut route = Route::new(r.dst);
    route.gateway = gw;
    route.oif = Some(oif);
    route.priority = (r.priority != 0).then_some(r.priority);
    route.table = r.table;
    route.scope = r.scope;
    route.mtu = (r.mtu != 0).then_some(r.mtu);
    route.advmss = (r.adv_mss != 0).then_some(r.adv_mss);
    route
}

/// Waits until no IPv6 address of `link` is tentative; DAD failure is an error.
///
/// DAD runs only on a link that is operationally up: a link without a
/// carrier (a tap no VM has attached yet, a parent with its cable out)
/// keeps its addresses tentative until it gets one, so waiting is pointless
/// and ADD succeeds at once. As the reference since v1.9.0 (372953df),
/// addresses still tentative at the deadline fail ADD only when the link is
/// operationally up then.
pub fn settle_dad(nl: &Netlink, link: &Link, timeout: Duration) -> Result<(), CniError> {
    let start = Instant::now();
    loop {
        let addrs = nl.addrs(link, Some(IpFamily::V6)).cni()?;
        if let Some(a) = addrs.iter().find(|a| a.dad_failed) {
            return Err(CniError::internal(format!(
                "failed to settle address {} on {}: DAD failed",
                a.address, link.name
            )));
        }
        if !addrs.iter().any(|a| a.tentative) {
            return Ok(());
        }
        let now = nl.link_by_index(link.index).cni()?.ok_or_else(|| {
            CniError::internal(format!(
                "failed to settle addresses on {}: link gone",
                link.name
            ))
        })?;
        // `carrier` is set by the driver synchronously; `operstate` lags it
        // by up to a second (link watch), so a link that just got its
        // carrier is still waited for.
        if !now.carrier {
            return Ok(());
        }
        if start.elapsed() > timeout {
            if now.operstate != "up" {
                return Ok(());
            }
            return Err(CniError::internal(format!(
                "failed to settle addresses on {}: still tentative after {timeout:?}",
                link.name
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Turns on forwarding for the families present in `result`, in the calling
/// thread's namespace (written only when not already on).
pub fn enable_forwarding(result: &CniResult) -> Result<(), CniError> {
    let v4 = result.ips.iter().any(|i| i.address.is_ipv4());
    let v6 = result.ips.iter().any(|i| i.address.is_ipv6());
    if v4 {
        sysctl::write("net/ipv4/ip_forward", "1").cni()?;
    }
    if v6 {
        sysctl::write("net/ipv6/conf/all/forwarding", "1").cni()?;
    }
    Ok(())
}

/// CHECK: every address `prevResult` gives `ifname` is on the link.
pub fn check_addresses(nl: &Netlink, ifname: &str, result: &CniResult) -> Result<(), CniError> {
    let link = nl.link_by_name(ifname).cni()?.ok_or_else(|| {
        CniError::internal(format!(
            "CNI created interface in container {ifname} not found"
        ))
    })?;
    let present = nl.addrs(&link, None).cni()?;
    for want in addresses_for(result, ifname)? {
        if !present.iter().any(|a| a.address == want.address) {
            return Err(CniError::internal(format!(
                "Failed to match addr {} on interface {ifname}",
                want.address
            )));
        }
    }
    Ok(())
}

/// CHECK: every route of `prevResult` exists in the namespace (destination,
/// and the gateway when one is given; routes without a gateway match any).
pub fn check_routes(nl: &Netlink, result: &CniResult) -> Result<(), CniError> {
    for want in &result.routes {
        let family = if want.dst.is_ipv4() {
            IpFamily::V4
        } else {
            IpFamily::V6
        };
        let dst = IpNetwork::new(want.dst.network(), want.dst.prefix()).unwrap_or(want.dst);
        let matches =
            |r: &Route| r.dst_network() == dst && (want.gw.is_none() || r.gateway == want.gw);
        let mut found = nl.routes(family, want.table).cni()?.iter().any(matches);
        // A route of the main table may have moved with a later plugin of
        // the chain: sbr copies it into a per-address table, a VRF into its
        // own. Any table but local counts then.
        if !found && want.table.is_none() {
            found = nl
                .routes_all_tables(family)
                .cni()?
                .iter()
                .any(|r| r.table != Some(TABLE_LOCAL) && matches(r));
        }
        if !found {
            let via = want.gw.map(|g| format!(" via {g}")).unwrap_or_default();
            return Err(CniError::internal(format!(
                "Failed to match route {dst}{via}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_bytes_differ_and_look_random() {
        let draws: Vec<[u8; 16]> = (0..64).map(|_| random_bytes()).collect();
        let mut distinct = draws.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), draws.len());
        // 8,192 bits: a fair source lands within 0.5 +- 0.05 (9 standard
        // deviations); a counter or a constant does not.
        let ones: u32 = draws.iter().flatten().map(|b| b.count_ones()).sum();
        assert!((3686..=4506).contains(&ones), "{ones} of 8192 bits set");
        // Every byte of a draw is filled, also past the first 8.
        assert!(draws.iter().any(|d| d[8..] != [0; 8]));
        let odd: [u8; 3] = random_bytes();
        assert_eq!(odd.len(), 3);
    }

    #[test]
    fn veth_names_are_the_references() {
        let a = random_veth_name();
        assert_eq!(a.len(), 12, "{a}");
        assert!(a.starts_with("veth"));
        assert!(
            a[4..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(a, random_veth_name());
    }
}
