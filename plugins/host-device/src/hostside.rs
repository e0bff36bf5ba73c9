//! What the device had on the host before ADD took it (MTU, up/down, its
//! permanent addresses, the routes through it), saved in a state file so
//! that DEL can put it back. The reference restores none of it: a device
//! comes back down and bare, because every netns move flushes its
//! addresses and routes.
//!
//! The file, `/run/cni-rcni/host-device/<containerID>_<ifname>.json`,
//! lives on the host's file system, so it survives the container's netns;
//! `/run` because the host-side configuration does not outlive a reboot
//! either. It is written once the device is in the container (a killed ADD
//! before that leaves none: DEL then does what the reference does) and
//! removed by DEL (also when the netns or the device is gone) and by GC.
//! It also holds the device's [`Identity`], by which DEL finds it in the
//! container, and is applied only to that device, from the namespace it
//! was saved in.

use crate::identity::Identity;
use cni_net::{IpFamily, Link, NetNs, Netlink, Route};
use cni_plugin::NetResult;
use cni_skel::state::StateFile;
use cni_skel::{CmdArgs, CniError};
use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::Path;

/// Where the state files live.
pub const STATE_DIR: &str = "/run/cni-rcni/host-device";

/// `RTPROT_KERNEL`: routes the kernel makes from addresses.
const RTPROT_KERNEL: u8 = 2;
/// `RTPROT_RA`: routes from router advertisements.
const RTPROT_RA: u8 = 9;
/// The local table: the kernel's, from addresses.
const TABLE_LOCAL: u32 = 255;

/// A route through the device, as saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedRoute {
    dst: IpNetwork,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    src: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    metric: Option<u32>,
    table: u32,
    scope: u8,
    protocol: u8,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    onlink: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    advmss: Option<u32>,
}

impl SavedRoute {
    fn of(r: &Route) -> SavedRoute {
        SavedRoute {
            dst: r.dst_network(),
            gateway: r.gateway,
            src: r.src,
            metric: r.priority,
            table: r.table.unwrap_or(cni_net::TABLE_MAIN),
            scope: r.scope.unwrap_or(cni_net::scope::UNIVERSE),
            protocol: r.protocol,
            onlink: r.onlink,
            mtu: r.mtu,
            advmss: r.advmss,
        }
    }

    fn route(&self, index: u32) -> Route {
        let mut r = Route::new(self.dst).dev(index);
        r.gateway = self.gateway;
        r.src = self.src;
        r.priority = self.metric;
        r.table = Some(self.table);
        r.scope = Some(self.scope);
        r.protocol = self.protocol;
        r.onlink = self.onlink;
        r.mtu = self.mtu;
        r.advmss = self.advmss;
        r
    }
}

/// The device's host-side configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSide {
    /// The network the attachment belongs to (GC stays within it).
    pub network: String,
    /// The namespace it was taken from, as `dev:inode` of its nsfs file.
    pub netns: String,
    /// Its host name (also its alias in the container).
    pub name: String,
    /// Its MAC on the host.
    pub mac: String,
    /// What the container cannot change about it, read in the container
    /// once it is there. Files of earlier versions have none: DEL then
    /// neither trusts nor configures the link it finds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
    /// MTU.
    pub mtu: u32,
    /// Administratively up.
    pub up: bool,
    /// Permanent addresses, IPv6 link-local ones aside (the kernel makes
    /// those again). Addresses with a lifetime (DHCP, SLAAC) belong to the
    /// daemon that made them.
    #[serde(default)]
    pub addresses: Vec<IpNetwork>,
    /// Routes through it in any table, those the kernel makes from
    /// addresses and router advertisements aside.
    #[serde(default)]
    pub routes: Vec<SavedRoute>,
}

/// `dev:inode` of the calling thread's network namespace.
fn netns_id() -> Result<String, CniError> {
    let ns = NetNs::current().cni()?;
    Ok(ns
        .id()
        .map(|(dev, ino)| format!("{dev}:{ino}"))
        .unwrap_or_default())
}

/// The attachment's state file.
pub fn file(args: &CmdArgs) -> StateFile {
    StateFile::new(Path::new(STATE_DIR), &args.container_id, &args.ifname)
}

fn is_link_local_v6(a: &IpNetwork) -> bool {
    matches!(a.ip(), IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)
}

impl HostSide {
    /// Reads `dev`'s configuration through `nl` (the host's handle).
    pub fn record(nl: &Netlink, dev: &Link, network: &str) -> Result<HostSide, CniError> {
        let addresses = nl
            .addrs(dev, None)
            .cni()?
            .into_iter()
            .filter(|a| a.permanent && !is_link_local_v6(&a.address))
            .map(|a| a.address)
            .collect();
        let mut routes = Vec::new();
        for family in [IpFamily::V4, IpFamily::V6] {
            routes.extend(
                nl.routes_of_link(family, dev.index)
                    .cni()?
                    .iter()
                    .filter(|r| {
                        r.table != Some(TABLE_LOCAL)
                            && r.protocol != RTPROT_KERNEL
                            && r.protocol != RTPROT_RA
                            && !r.dst.ip().is_multicast()
                    })
                    .map(SavedRoute::of),
            );
        }
        Ok(HostSide {
            network: network.to_string(),
            netns: netns_id()?,
            name: dev.name.clone(),
            mac: dev.mac.clone(),
            identity: None,
            mtu: dev.mtu,
            up: dev.up,
            addresses,
            routes,
        })
    }

    /// The saved state, if the file has it; a file that cannot be read or
    /// parsed gives `None` (and a warning).
    pub fn load(file: &StateFile) -> Option<HostSide> {
        let bytes = match file.read() {
            Ok(b) => b?,
            Err(e) => {
                log::warn!("{}", e.msg);
                return None;
            }
        };
        match serde_json::from_slice(&bytes) {
            Ok(s) => Some(s),
            Err(e) => {
                log::warn!("{}: cannot be parsed: {e}", file.path().display());
                None
            }
        }
    }

    /// True when it was saved from the calling thread's namespace, the
    /// only one where it may be applied (else a warning).
    pub fn saved_here(&self, file: &StateFile) -> bool {
        let here = netns_id().unwrap_or_default();
        if self.netns != here {
            log::warn!(
                "{}: saved in netns {}, not {here}: not applied",
                file.path().display(),
                self.netns
            );
        }
        self.netns == here
    }

    /// Saves it in `file`.
    pub fn save(&self, file: &StateFile) -> Result<(), CniError> {
        let text = serde_json::to_vec(self).map_err(|e| CniError::internal(e.to_string()))?;
        file.write(&text)
    }

    /// Puts the configuration back on the device, back on the host under
    /// its name (down, bare, as a netns move leaves it): MTU, addresses,
    /// up, routes (a down link has none). Best effort: what fails is
    /// logged and returned, the rest still done. Something already there
    /// (EEXIST) is fine.
    pub fn restore(&self, nl: &Netlink) -> Vec<String> {
        let mut problems = Vec::new();
        let mut note = |what: String, r: Result<(), cni_net::NetError>| {
            if let Err(e) = r
                && !e.is_exists()
            {
                problems.push(format!("{what}: {e}"));
            }
        };
        let link = match nl.link_by_name(&self.name) {
            Ok(Some(l)) => l,
            Ok(None) => return vec![format!("{} is not on the host", self.name)],
            Err(e) => return vec![e.to_string()],
        };
        if self.mtu != 0 && link.mtu != self.mtu {
            note(format!("MTU {}", self.mtu), nl.set_mtu(&link, self.mtu));
        }
        for a in &self.addresses {
            note(format!("address {a}"), nl.add_addr(&link, *a));
        }
        if self.up {
            note("up".into(), nl.set_up(&link));
            for r in &self.routes {
                note(
                    format!("route {}", r.dst),
                    nl.add_route(&r.route(link.index)),
                );
            }
        }
        for p in &problems {
            log::warn!("restoring {}: {p}", self.name);
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_shape() {
        let s = HostSide {
            network: "n".into(),
            netns: "4:4026531840".into(),
            name: "ens1".into(),
            mac: "02:00:00:00:00:01".into(),
            identity: Some(Identity {
                index: 3,
                kind: "veth".into(),
                link: Some(2),
                link_netnsid: Some(0),
                ..Identity::default()
            }),
            mtu: 9000,
            up: true,
            addresses: vec![
                "10.1.2.3/24".parse().unwrap(),
                "fd00::3/64".parse().unwrap(),
            ],
            routes: vec![SavedRoute {
                dst: "10.9.0.0/16".parse().unwrap(),
                gateway: Some("10.1.2.1".parse().unwrap()),
                src: None,
                metric: Some(100),
                table: 254,
                scope: 0,
                protocol: 4,
                onlink: false,
                mtu: None,
                advmss: None,
            }],
        };
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            text.contains(r#""addresses":["10.1.2.3/24","fd00::3/64"]"#),
            "{text}"
        );
        assert!(
            text.contains(r#""dst":"10.9.0.0/16","gateway":"10.1.2.1","metric":100"#),
            "{text}"
        );
        assert!(
            text.contains(r#""identity":{"index":3,"kind":"veth","link":2,"link_netnsid":0}"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<HostSide>(&text).unwrap(), s);
        // A file of an earlier version: no identity.
        let mut old = s.clone();
        old.identity = None;
        let text = serde_json::to_string(&old).unwrap();
        assert!(!text.contains("identity"), "{text}");
        assert_eq!(serde_json::from_str::<HostSide>(&text).unwrap(), old);
        let r = s.routes[0].route(7);
        assert_eq!(r.oif, Some(7));
        assert_eq!(r.table, Some(254));
        assert_eq!(r.priority, Some(100));
    }

    #[test]
    fn link_local_v6_is_left_to_the_kernel() {
        assert!(is_link_local_v6(&"fe80::1/64".parse().unwrap()));
        assert!(is_link_local_v6(&"febf::1/64".parse().unwrap()));
        assert!(!is_link_local_v6(&"fec0::1/64".parse().unwrap()));
        assert!(!is_link_local_v6(&"10.0.0.1/8".parse().unwrap()));
    }
}
