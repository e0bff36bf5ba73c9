//! VLANs on bridge ports (`bridge vlan add|del dev <port> vid N [pvid]
//! [untagged] master`), as the Go reference's netlink library sends them:
//!
//! * add: `RTM_SETLINK`, flags `NLM_F_REQUEST|NLM_F_ACK`;
//! * delete: `RTM_DELLINK`, same flags;
//!
//! both with an `ifinfomsg` of family `AF_BRIDGE` and the port's index, and
//! one nested `IFLA_AF_SPEC` holding `IFLA_BRIDGE_FLAGS = BRIDGE_FLAGS_MASTER`
//! and `IFLA_BRIDGE_VLAN_INFO {flags, vid}`.
//!
//! Listing is an `RTM_GETLINK` dump of family `AF_BRIDGE` with
//! `IFLA_EXT_MASK = RTEXT_FILTER_BRIDGE_VLAN`.
//!
//! The request builders are pure so their bytes can be unit-tested on a
//! kernel without VLAN-filtering bridges.

use super::link::{IFINFOMSG_LEN, IFLA_AF_SPEC, IFLA_EXT_MASK, ifinfomsg};
use super::msg::{
    self, AF_BRIDGE, Malformed, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, RTM_DELLINK, RTM_GETLINK,
    RTM_NEWLINK, RTM_SETLINK, Request, attrs,
};
use super::{Link, Netlink};
use crate::error::NetError;

const IFLA_BRIDGE_FLAGS: u16 = 0;
const IFLA_BRIDGE_VLAN_INFO: u16 = 2;
const BRIDGE_FLAGS_MASTER: u16 = 1;
const BRIDGE_VLAN_INFO_PVID: u16 = 2;
const BRIDGE_VLAN_INFO_UNTAGGED: u16 = 4;
const RTEXT_FILTER_BRIDGE_VLAN: u32 = 2;

/// One VLAN of a bridge port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortVlan {
    /// VLAN ID (1..=4094).
    pub vid: u16,
    /// Untagged frames entering the port are assigned to this VLAN.
    pub pvid: bool,
    /// Frames of this VLAN leave the port untagged.
    pub untagged: bool,
}

/// The request shared by add (`RTM_SETLINK`) and delete (`RTM_DELLINK`).
fn vlan_request(kind: u16, port_index: u32, vlan: PortVlan) -> Request {
    let mut flags = 0u16;
    if vlan.pvid {
        flags |= BRIDGE_VLAN_INFO_PVID;
    }
    if vlan.untagged {
        flags |= BRIDGE_VLAN_INFO_UNTAGGED;
    }
    let mut r = Request::new(
        kind,
        NLM_F_REQUEST | NLM_F_ACK,
        &ifinfomsg(AF_BRIDGE, port_index, 0, 0),
    );
    let spec = r.nest(IFLA_AF_SPEC);
    r.attr(IFLA_BRIDGE_FLAGS, &BRIDGE_FLAGS_MASTER.to_ne_bytes());
    let mut info = flags.to_ne_bytes().to_vec();
    info.extend_from_slice(&vlan.vid.to_ne_bytes());
    r.attr(IFLA_BRIDGE_VLAN_INFO, &info);
    r.end(spec);
    r
}

fn del_vlan_request(port_index: u32, vid: u16) -> Request {
    let vlan = PortVlan {
        vid,
        pvid: false,
        untagged: false,
    };
    vlan_request(RTM_DELLINK, port_index, vlan)
}

/// The full `bridge vlan add … master` request, with sequence number 0.
pub fn add_request(port_index: u32, vlan: PortVlan) -> Vec<u8> {
    vlan_request(RTM_SETLINK, port_index, vlan)
        .finish(0)
        .unwrap_or_default()
}

/// The full `bridge vlan del … master` request, with sequence number 0.
pub fn del_request(port_index: u32, vid: u16) -> Vec<u8> {
    del_vlan_request(port_index, vid)
        .finish(0)
        .unwrap_or_default()
}

/// The dump behind [`Netlink::bridge_vlans`].
fn list_request() -> Request {
    let mut r = Request::new(
        RTM_GETLINK,
        NLM_F_REQUEST | NLM_F_DUMP,
        &ifinfomsg(AF_BRIDGE, 0, 0, 0),
    );
    r.attr_u32(IFLA_EXT_MASK, RTEXT_FILTER_BRIDGE_VLAN);
    r
}

/// The port index and VLANs listed in one `AF_BRIDGE` link message.
fn vlans_of(m: &[u8]) -> Result<(u32, Vec<PortVlan>), Malformed> {
    if m.len() < IFINFOMSG_LEN {
        return Err(Malformed("short ifinfomsg"));
    }
    let index = msg::u32_at(m, 4)?;
    let mut out = Vec::new();
    for a in attrs(m.get(IFINFOMSG_LEN..).unwrap_or_default()) {
        let (kind, p) = a?;
        if kind != IFLA_AF_SPEC {
            continue;
        }
        for s in attrs(p) {
            let (sk, sp) = s?;
            if sk == IFLA_BRIDGE_VLAN_INFO {
                let flags = msg::u16_at(sp, 0)?;
                out.push(PortVlan {
                    vid: msg::u16_at(sp, 2)?,
                    pvid: flags & BRIDGE_VLAN_INFO_PVID != 0,
                    untagged: flags & BRIDGE_VLAN_INFO_UNTAGGED != 0,
                });
            }
        }
    }
    Ok((index, out))
}

impl Netlink {
    /// `bridge vlan add dev <port> vid N [pvid] [untagged] master`.
    pub fn bridge_vlan_add(&self, port: &Link, vlan: PortVlan) -> Result<(), NetError> {
        log::debug!("bridge vlan add dev {} {vlan:?}", port.name);
        self.exec(
            vlan_request(RTM_SETLINK, port.index, vlan),
            &format!("add vlan {} to {}", vlan.vid, port.name),
        )
    }

    /// `bridge vlan del dev <port> vid N master`.
    pub fn bridge_vlan_del(&self, port: &Link, vid: u16) -> Result<(), NetError> {
        log::debug!("bridge vlan del dev {} vid {vid}", port.name);
        self.exec(
            del_vlan_request(port.index, vid),
            &format!("delete vlan {vid} from {}", port.name),
        )
    }

    /// The VLANs of a bridge port (`bridge vlan show dev <port>`).
    pub fn bridge_vlans(&self, port: &Link) -> Result<Vec<PortVlan>, NetError> {
        let lists = self.collect(list_request, RTM_NEWLINK, "list bridge vlans", |p| {
            let (index, vlans) = vlans_of(p)?;
            Ok((index == port.index).then_some(vlans))
        })?;
        Ok(lists.into_iter().flatten().collect())
    }

    /// Removes every VLAN of a port (the reference's `removeDefaultVlan`).
    pub fn bridge_vlan_clear(&self, port: &Link) -> Result<(), NetError> {
        for v in self.bridge_vlans(port)? {
            self.bridge_vlan_del(port, v.vid)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NetNs;
    use crate::rtnl::{BridgeOpts, VethOpts};
    use crate::testutil::skip_unless_root;

    fn with_seq(mut b: Vec<u8>, seq: u32) -> Vec<u8> {
        b[8..12].copy_from_slice(&seq.to_ne_bytes());
        b
    }

    /// What the Go netlink library sends for `BridgeVlanAdd(link, vid, pvid,
    /// untagged, self=false, master=true)`, byte by byte (little endian).
    fn expected(kind: u16, index: u32, vid: u16, vlan_flags: u16) -> Vec<u8> {
        let mut b = Vec::new();
        // nlmsghdr: length, type, flags, seq, pid
        b.extend_from_slice(&52u32.to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&(0x1u16 | 0x4).to_ne_bytes());
        b.extend_from_slice(&7u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        // ifinfomsg: family AF_BRIDGE (7), pad, type, index, flags, change
        b.extend_from_slice(&[7, 0, 0, 0]);
        b.extend_from_slice(&index.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        // IFLA_AF_SPEC (26), nested: 4 + 8 + 8 = 20 bytes
        b.extend_from_slice(&20u16.to_ne_bytes());
        b.extend_from_slice(&26u16.to_ne_bytes());
        // IFLA_BRIDGE_FLAGS (0) = BRIDGE_FLAGS_MASTER (1), padded to 8
        b.extend_from_slice(&6u16.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&1u16.to_ne_bytes());
        b.extend_from_slice(&[0, 0]);
        // IFLA_BRIDGE_VLAN_INFO (2) = {flags u16, vid u16}
        b.extend_from_slice(&8u16.to_ne_bytes());
        b.extend_from_slice(&2u16.to_ne_bytes());
        b.extend_from_slice(&vlan_flags.to_ne_bytes());
        b.extend_from_slice(&vid.to_ne_bytes());
        b
    }

    #[test]
    fn access_port_add_is_pvid_untagged_master() {
        let vlan = PortVlan {
            vid: 100,
            pvid: true,
            untagged: true,
        };
        // BRIDGE_VLAN_INFO_PVID (2) | BRIDGE_VLAN_INFO_UNTAGGED (4)
        assert_eq!(
            with_seq(add_request(42, vlan), 7),
            expected(RTM_SETLINK, 42, 100, 6)
        );
    }

    #[test]
    fn trunk_add_is_tagged() {
        let vlan = PortVlan {
            vid: 4094,
            pvid: false,
            untagged: false,
        };
        assert_eq!(
            with_seq(add_request(3, vlan), 7),
            expected(RTM_SETLINK, 3, 4094, 0)
        );
    }

    #[test]
    fn delete_is_dellink() {
        assert_eq!(
            with_seq(del_request(9, 1), 7),
            expected(RTM_DELLINK, 9, 1, 0)
        );
    }

    #[test]
    fn parses_listed_vlans() {
        let mut r = vlan_request(
            RTM_NEWLINK,
            5,
            PortVlan {
                vid: 1,
                pvid: true,
                untagged: true,
            },
        );
        // A second IFLA_AF_SPEC with a tagged VLAN 7.
        let spec = r.nest(IFLA_AF_SPEC);
        r.attr(IFLA_BRIDGE_VLAN_INFO, &[0, 0, 7, 0]);
        r.end(spec);
        let (index, vlans) = vlans_of(r.payload()).unwrap();
        assert_eq!(index, 5);
        assert_eq!(
            vlans,
            vec![
                PortVlan {
                    vid: 1,
                    pvid: true,
                    untagged: true
                },
                PortVlan {
                    vid: u16::from_ne_bytes([7, 0]),
                    pvid: false,
                    untagged: false
                }
            ]
        );
        assert!(vlans_of(&r.payload()[..10]).is_err());
    }

    #[test]
    fn listing_request_asks_for_bridge_vlans() {
        // The dump is AF_BRIDGE with IFLA_EXT_MASK (29) = RTEXT_FILTER_BRIDGE_VLAN (2).
        let r = list_request();
        assert_eq!(r.flags(), 0x301);
        let buf = r.payload();
        assert_eq!(buf[0], 7);
        assert_eq!(&buf[16..20], &[8, 0, 29, 0]);
        assert_eq!(&buf[20..24], &2u32.to_ne_bytes());
    }

    #[test]
    fn vlans_on_a_filtering_bridge() {
        if skip_unless_root("rtnl::bridge_vlan::vlans_on_a_filtering_bridge") {
            return;
        }
        let ns = NetNs::new_anonymous().unwrap();
        let nl = Netlink::for_ns(&ns).unwrap();
        let br = match nl.create_bridge(&BridgeOpts {
            name: "vbr0",
            vlan_filtering: Some(true),
            up: true,
            ..Default::default()
        }) {
            Ok(br) => br,
            // A kernel without CONFIG_BRIDGE_VLAN_FILTERING.
            Err(e) if e.raw_errno() == Some(nix::errno::Errno::EOPNOTSUPP as i32) => {
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    b"SKIP rtnl::bridge_vlan::vlans_on_a_filtering_bridge: no VLAN filtering\n",
                );
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let port = nl
            .create_veth(&VethOpts {
                name: "vp0",
                peer_name: "vp1",
                controller: Some(br.index),
                ..Default::default()
            })
            .unwrap();
        // A new port of a filtering bridge gets the default PVID 1.
        let def = PortVlan {
            vid: 1,
            pvid: true,
            untagged: true,
        };
        assert_eq!(nl.bridge_vlans(&port).unwrap(), vec![def]);
        nl.bridge_vlan_clear(&port).unwrap();
        assert!(nl.bridge_vlans(&port).unwrap().is_empty());
        let access = PortVlan {
            vid: 100,
            pvid: true,
            untagged: true,
        };
        let trunk = PortVlan {
            vid: 200,
            pvid: false,
            untagged: false,
        };
        nl.bridge_vlan_add(&port, access).unwrap();
        nl.bridge_vlan_add(&port, trunk).unwrap();
        assert_eq!(nl.bridge_vlans(&port).unwrap(), vec![access, trunk]);
        nl.bridge_vlan_del(&port, 100).unwrap();
        assert_eq!(nl.bridge_vlans(&port).unwrap(), vec![trunk]);
        let e = nl.bridge_vlan_add(
            &br,
            PortVlan {
                vid: 5000,
                pvid: false,
                untagged: false,
            },
        );
        assert!(e.is_err());
    }
}
