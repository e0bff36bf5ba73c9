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

use super::{Link, Netlink};
use crate::error::NetError;
use crate::nl::rtm::{RTM_DELLINK, RTM_GETLINK, RTM_NEWLINK, RTM_SETLINK, Rtm};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::link::{
    AfSpecBridge, BridgeFlag, BridgeVlanInfo, BridgeVlanInfoFlags, LinkAttribute, LinkExtentMask,
    LinkMessage,
};

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

/// The message shared by add (`RTM_SETLINK`) and delete (`RTM_DELLINK`):
/// `AF_BRIDGE` (in `AF_UNSPEC` the kernel ACKs and does nothing) with
/// `IFLA_AF_SPEC { IFLA_BRIDGE_FLAGS = MASTER, IFLA_BRIDGE_VLAN_INFO }`.
fn vlan_message(port_index: u32, vlan: PortVlan) -> LinkMessage {
    let mut flags = BridgeVlanInfoFlags::empty();
    if vlan.pvid {
        flags |= BridgeVlanInfoFlags::Pvid;
    }
    if vlan.untagged {
        flags |= BridgeVlanInfoFlags::Untagged;
    }
    let mut m = LinkMessage::default();
    m.header.interface_family = AddressFamily::Bridge;
    m.header.index = port_index;
    m.attributes.push(LinkAttribute::AfSpecBridge(vec![
        AfSpecBridge::Flags(BridgeFlag::Controller),
        AfSpecBridge::VlanInfo(BridgeVlanInfo {
            flags,
            vid: vlan.vid,
        }),
    ]));
    m
}

/// The dump behind [`Netlink::bridge_vlans`]: `AF_BRIDGE` links with
/// `IFLA_EXT_MASK = RTEXT_FILTER_BRVLAN`.
fn list_message() -> Rtm<LinkMessage> {
    let mut m = LinkMessage::default();
    m.header.interface_family = AddressFamily::Bridge;
    m.attributes
        .push(LinkAttribute::ExtMask(vec![LinkExtentMask::Brvlan]));
    Rtm(RTM_GETLINK, m)
}

/// The port index and VLANs listed in one `AF_BRIDGE` link message.
fn vlans_of(m: &LinkMessage) -> (u32, Vec<PortVlan>) {
    let mut out = Vec::new();
    for a in &m.attributes {
        let LinkAttribute::AfSpecBridge(spec) = a else {
            continue;
        };
        for s in spec {
            if let AfSpecBridge::VlanInfo(v) = s {
                out.push(PortVlan {
                    vid: v.vid,
                    pvid: v.flags.contains(BridgeVlanInfoFlags::Pvid),
                    untagged: v.flags.contains(BridgeVlanInfoFlags::Untagged),
                });
            }
        }
    }
    (m.header.index, out)
}

impl Netlink {
    /// `bridge vlan add dev <port> vid N [pvid] [untagged] master`.
    pub fn bridge_vlan_add(&self, port: &Link, vlan: PortVlan) -> Result<(), NetError> {
        log::debug!("bridge vlan add dev {} {vlan:?}", port.name);
        self.route().ack(
            &Rtm(RTM_SETLINK, vlan_message(port.index, vlan)),
            0,
            &format!("add vlan {} to {}", vlan.vid, port.name),
        )
    }

    /// `bridge vlan del dev <port> vid N master`.
    pub fn bridge_vlan_del(&self, port: &Link, vid: u16) -> Result<(), NetError> {
        log::debug!("bridge vlan del dev {} vid {vid}", port.name);
        let vlan = PortVlan {
            vid,
            pvid: false,
            untagged: false,
        };
        self.route().ack(
            &Rtm(RTM_DELLINK, vlan_message(port.index, vlan)),
            0,
            &format!("delete vlan {vid} from {}", port.name),
        )
    }

    /// The VLANs of a bridge port (`bridge vlan show dev <port>`).
    pub fn bridge_vlans(&self, port: &Link) -> Result<Vec<PortVlan>, NetError> {
        let lists = self
            .route()
            .dump(list_message, "list bridge vlans", |m| match m {
                Rtm(RTM_NEWLINK, m) => {
                    let (index, vlans) = vlans_of(&m);
                    (index == port.index).then_some(vlans)
                }
                _ => None,
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

    /// The one request `f` sends, recorded by a capturing handle.
    fn sent(f: impl FnOnce(&Netlink) -> Result<(), NetError>) -> Vec<u8> {
        let nl = Netlink::capture();
        f(&nl).unwrap();
        let mut c = nl.captured();
        assert_eq!(c.len(), 1);
        let mut b = c.remove(0);
        b[8..12].copy_from_slice(&7u32.to_ne_bytes());
        b
    }

    fn port(index: u32) -> Link {
        Link {
            index,
            name: format!("p{index}"),
            ..Link::default()
        }
    }

    const RTM_NEWLINK: u16 = 16;
    const RTM_DELLINK: u16 = 17;
    const RTM_SETLINK: u16 = 19;

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
            sent(|nl| nl.bridge_vlan_add(&port(42), vlan)),
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
            sent(|nl| nl.bridge_vlan_add(&port(3), vlan)),
            expected(RTM_SETLINK, 3, 4094, 0)
        );
    }

    #[test]
    fn delete_is_dellink() {
        assert_eq!(
            sent(|nl| nl.bridge_vlan_del(&port(9), 1)),
            expected(RTM_DELLINK, 9, 1, 0)
        );
    }

    #[test]
    fn parses_listed_vlans() {
        // An answer as the kernel sends it: RTM_NEWLINK, VLAN 1 (pvid,
        // untagged) in one IFLA_AF_SPEC, a tagged VLAN 7 in a second one.
        let mut b = expected(RTM_NEWLINK, 5, 1, 6);
        b.extend_from_slice(&[12, 0, 26, 0, 8, 0, 2, 0, 0, 0, 7, 0]);
        let len = b.len() as u32;
        b[0..4].copy_from_slice(&len.to_ne_bytes());
        let msg =
            netlink_packet_core::NetlinkMessage::<netlink_packet_route::RouteNetlinkMessage>::deserialize(&b).unwrap();
        let netlink_packet_core::NetlinkPayload::InnerMessage(
            netlink_packet_route::RouteNetlinkMessage::NewLink(m),
        ) = msg.payload
        else {
            panic!("not a link message");
        };
        let (index, vlans) = vlans_of(&m);
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
                    vid: 7,
                    pvid: false,
                    untagged: false
                }
            ]
        );
    }

    #[test]
    fn listing_request_asks_for_bridge_vlans() {
        // The dump is AF_BRIDGE with IFLA_EXT_MASK (29) = RTEXT_FILTER_BRVLAN (2).
        let nl = Netlink::capture();
        assert!(nl.bridge_vlans(&port(3)).unwrap().is_empty());
        let r = nl.captured().remove(0);
        assert_eq!(&r[4..8], &[18, 0, 0x01, 0x03]);
        let buf = &r[16..];
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
            Ok(br) => {
                crate::testutil::kernel_feature_present(
                    "rtnl::bridge_vlan::vlans_on_a_filtering_bridge",
                    "VLAN filtering on bridges",
                );
                br
            }
            // A kernel without CONFIG_BRIDGE_VLAN_FILTERING.
            Err(e) if e.raw_errno() == Some(nix::errno::Errno::EOPNOTSUPP as i32) => {
                crate::testutil::skip_without_kernel_feature(
                    "rtnl::bridge_vlan::vlans_on_a_filtering_bridge",
                    "VLAN filtering on bridges",
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
