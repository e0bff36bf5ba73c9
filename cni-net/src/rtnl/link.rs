//! Links: `ifinfomsg` requests (get, create bridge/veth, set, delete) and
//! the parser of `RTM_NEWLINK` answers.

use super::{MAX_IFNAME_LEN, Mac, Netlink, format_hw, ok_if_missing};
use crate::error::{NetError, libc_errno};
use crate::netns::NetNs;
use crate::nl::gaps;
use crate::nl::rtm::{RTM_DELLINK, RTM_GETLINK, RTM_NEWLINK, RTM_SETLINK, Rtm};
use netlink_packet_core::{
    DecodeError, Emitable, NLM_F_CREATE, NLM_F_EXCL, NlasIterator, Parseable,
};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::link::{
    InfoBridge, InfoBridgePort, InfoData, InfoKind, InfoPortData, InfoVeth, InfoVrf, LinkAttribute,
    LinkFlags, LinkInfo, LinkMessage,
};
use std::os::fd::AsRawFd;

/// A network interface as the kernel reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// Hardware address, `aa:bb:cc:dd:ee:ff` (empty if the link has none).
    pub mac: String,
    /// MTU.
    pub mtu: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Promiscuous mode (`IFF_PROMISC`).
    pub promisc: bool,
    /// All-multicast mode (`IFF_ALLMULTI`).
    pub allmulti: bool,
    /// Up with a carrier (`IFF_LOWER_UP`): set by the driver at once, while
    /// `operstate` follows it through the kernel's delayed link watch.
    pub carrier: bool,
    /// Transmit queue length (`IFLA_TXQLEN`).
    pub txqlen: u32,
    /// Link kind from `IFLA_INFO_KIND`: `"veth"`, `"bridge"`, `"vlan"` …;
    /// empty for devices without one (`lo`, physical NICs).
    pub kind: String,
    /// The controller (bridge) this link is enslaved to.
    pub master: Option<u32>,
    /// `IFLA_LINK`: for a veth, the peer's index (in the namespace named by
    /// `link_netnsid` when that is set); for a vlan, the parent's.
    pub peer_index: Option<u32>,
    /// `IFLA_LINK_NETNSID`: the peer lives in another namespace.
    pub link_netnsid: Option<i32>,
    /// Bridge port hairpin mode, when the link is a bridge port.
    pub hairpin: Option<bool>,
    /// Bridge port isolation, when the link is a bridge port.
    pub isolated: Option<bool>,
    /// Operational state as Go's netlink prints it: `up`, `down`,
    /// `lower-layer-down`, `unknown`, …
    pub operstate: String,
    /// For a VRF, its routing table (`IFLA_VRF_TABLE`).
    pub vrf_table: Option<u32>,
}

/// The `IFLA_*` attributes [`Link::from_message`] reads: ADDRESS,
/// IFNAME, MTU, LINK, MASTER, TXQLEN, OPERSTATE, LINKINFO, LINK_NETNSID.
const LINK_ATTRS: [u16; 9] = [1, 3, 4, 5, 10, 13, 16, 18, 37];

/// A `LinkMessage` as [`Link`] needs it: sent as is, and an answer parsed
/// with only the attributes of [`LINK_ATTRS`]. A link's answer is about
/// 1.5-2 KB, most of it statistics and per-family settings (`IFLA_STATS64`,
/// `IFLA_AF_SPEC`'s IPv6 configuration...) that netlink-packet-route would
/// decode attribute by attribute and `Link` drops (measured: 70k
/// instructions per link, most of a bridge ADD's own). An answer whose
/// attributes do not walk cleanly is parsed whole, as before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinkView(pub(crate) LinkMessage);

impl Emitable for LinkView {
    fn buffer_len(&self) -> usize {
        self.0.buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        self.0.emit(buffer)
    }
}

impl Parseable<[u8]> for LinkView {
    fn parse(buf: &[u8]) -> Result<LinkView, DecodeError> {
        match link_attrs_only(buf) {
            Some(kept) => LinkMessage::parse(&kept),
            None => LinkMessage::parse(buf),
        }
        .map(LinkView)
    }
}

/// `buf` (an `ifinfomsg` and its attributes) with only the attributes of
/// [`LINK_ATTRS`]; `None` when an attribute's length does not fit.
fn link_attrs_only(buf: &[u8]) -> Option<Vec<u8>> {
    const IFINFOMSG_LEN: usize = 16;
    let mut kept = buf.get(..IFINFOMSG_LEN)?.to_vec();
    for nla in NlasIterator::new(buf.get(IFINFOMSG_LEN..)?) {
        let nla = nla.ok()?;
        if LINK_ATTRS.contains(&nla.kind()) {
            let len = usize::from(nla.length());
            kept.extend_from_slice(nla.into_inner().get(..len)?);
            kept.resize(kept.len().next_multiple_of(4), 0);
        }
    }
    Some(kept)
}

impl Link {
    /// The facade's view of a decoded `RTM_NEWLINK`.
    pub(crate) fn from_message(m: LinkMessage) -> Link {
        let mut l = Link {
            index: m.header.index,
            up: m.header.flags.contains(LinkFlags::Up),
            promisc: m.header.flags.contains(LinkFlags::Promisc),
            allmulti: m.header.flags.contains(LinkFlags::Allmulti),
            carrier: m.header.flags.contains(LinkFlags::LowerUp),
            ..Link::default()
        };
        for a in m.attributes {
            match a {
                LinkAttribute::IfName(n) => l.name = n,
                LinkAttribute::Address(a) => l.mac = format_hw(&a),
                LinkAttribute::Mtu(v) => l.mtu = v,
                LinkAttribute::TxQueueLen(v) => l.txqlen = v,
                LinkAttribute::Controller(i) => l.master = Some(i).filter(|i| *i != 0),
                LinkAttribute::Link(i) => l.peer_index = Some(i).filter(|i| *i != 0),
                LinkAttribute::LinkNetNsId(i) => l.link_netnsid = Some(i),
                LinkAttribute::OperState(st) => l.operstate = operstate_name(u8::from(st)),
                LinkAttribute::LinkInfo(infos) => l.link_info(infos),
                _ => {}
            }
        }
        l
    }

    /// `IFLA_LINKINFO`: the kind, and the bridge port settings when the
    /// link is a bridge port (the crate decodes port data by port kind).
    fn link_info(&mut self, infos: Vec<LinkInfo>) {
        for info in infos {
            match info {
                LinkInfo::Kind(k) => self.kind = k.to_string(),
                LinkInfo::Data(InfoData::Vrf(vrf)) => {
                    for v in vrf {
                        if let InfoVrf::TableId(t) = v {
                            self.vrf_table = Some(t);
                        }
                    }
                }
                LinkInfo::PortData(InfoPortData::BridgePort(opts)) => {
                    for o in opts {
                        match o {
                            InfoBridgePort::HairpinMode(b) => self.hairpin = Some(b),
                            InfoBridgePort::Isolated(b) => self.isolated = Some(b),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// Go's `netlink.LinkOperState` names (`IF_OPER_*`).
fn operstate_name(st: u8) -> String {
    match st {
        0 => "unknown".into(),
        1 => "not-present".into(),
        2 => "down".into(),
        3 => "lower-layer-down".into(),
        4 => "testing".into(),
        5 => "dormant".into(),
        6 => "up".into(),
        other => format!("{other}"),
    }
}

/// How to create (or find) a bridge.
#[derive(Debug, Clone, Default)]
pub struct BridgeOpts<'a> {
    /// Bridge name.
    pub name: &'a str,
    /// MTU at creation; `None` = kernel default. An existing bridge keeps its MTU.
    pub mtu: Option<u32>,
    /// MAC at creation.
    pub mac: Option<Mac>,
    /// Put the bridge in promiscuous mode (also when it already exists).
    pub promisc: bool,
    /// `vlan_filtering` at creation.
    pub vlan_filtering: Option<bool>,
    /// Set the bridge up (also when it already exists).
    pub up: bool,
}

/// Smallest MTU the kernel takes on a veth or a bridge (ETH_MIN_MTU).
pub const VETH_MIN_MTU: u32 = 68;
/// Largest MTU the kernel takes on a veth or a bridge (ETH_MAX_MTU).
pub const VETH_MAX_MTU: u32 = 65535;

/// A configured `mtu` for a veth or a bridge as the reference reads it:
/// zero or negative = the kernel's default (`None`; Go's netlink sends no
/// MTU then), 68-65535 as given. Anything else is the error text: the
/// kernel refuses 1-67 and 65536 up to 2^32-1 (EINVAL), and 2^32 or more
/// is refused where the reference would truncate it to 32 bits.
pub fn veth_mtu(mtu: i64) -> Result<Option<u32>, String> {
    match u32::try_from(mtu) {
        _ if mtu <= 0 => Ok(None),
        Ok(m) if (VETH_MIN_MTU..=VETH_MAX_MTU).contains(&m) => Ok(Some(m)),
        _ => Err(format!(
            "invalid MTU {mtu}: must be 0 or less for the kernel default, or between {VETH_MIN_MTU} and {VETH_MAX_MTU}"
        )),
    }
}

#[cfg(test)]
mod link_view_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn emitted(m: &LinkMessage) -> Vec<u8> {
        let mut buf = vec![0; m.buffer_len()];
        m.emit(&mut buf);
        buf
    }

    #[test]
    fn keeps_what_link_reads_and_drops_the_rest() {
        let mut m = link_message(7, LinkFlags::Up, LinkFlags::empty());
        m.attributes = vec![
            LinkAttribute::IfName("eth0".into()),
            LinkAttribute::Group(3),
            LinkAttribute::Mtu(1400),
            LinkAttribute::Promiscuity(1),
            LinkAttribute::TxQueueLen(1000),
            LinkAttribute::Address(vec![2, 0, 0, 0, 0, 9]),
            LinkAttribute::Controller(4),
            LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Veth)]),
            LinkAttribute::NumTxQueues(2),
        ];
        let view = LinkView::parse(&emitted(&m)).unwrap().0;
        assert_eq!(view.attributes.len(), 6, "{view:?}");
        assert_eq!(Link::from_message(view), Link::from_message(m));
    }

    #[test]
    fn an_answer_that_does_not_walk_is_parsed_whole() {
        let mut m = link_message(7, LinkFlags::Up, LinkFlags::empty());
        m.attributes = vec![LinkAttribute::IfName("eth0".into())];
        let mut buf = emitted(&m);
        // The attribute claims more bytes than there are.
        buf[16] = 200;
        assert!(link_attrs_only(&buf).is_none());
        assert_eq!(
            LinkView::parse(&buf).is_err(),
            LinkMessage::parse(&buf).is_err()
        );
        assert!(link_attrs_only(&buf[..10]).is_none());
    }
}

#[cfg(test)]
mod veth_mtu_tests {
    #[test]
    fn as_the_reference_reads_it() {
        for (m, want) in [
            (0, None),
            (-1, None),
            (i64::MIN, None),
            (68, Some(68)),
            (65535, Some(65535)),
        ] {
            assert_eq!(super::veth_mtu(m), Ok(want), "{m}");
        }
        for m in [1, 67, 65536, 70000, 4294968796, i64::MAX] {
            assert!(super::veth_mtu(m).is_err(), "{m}");
        }
    }
}

/// Link attributes changed together in one `RTM_SETLINK` (`ip link set DEV
/// address A mtu M promisc on allmulticast off txqueuelen Q`): what
/// tuning changes on an interface. `None` leaves an attribute as it is.
/// The kernel applies them in its own order (address, MTU, flags, queue
/// length) and stops at the first failure, keeping what it changed before
/// it: a caller that must name the failing attribute retries them one by
/// one (each set is idempotent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkSet {
    /// The MAC address.
    pub mac: Option<Mac>,
    /// The MTU.
    pub mtu: Option<u32>,
    /// Promiscuous mode.
    pub promisc: Option<bool>,
    /// All-multicast mode.
    pub allmulti: Option<bool>,
    /// The transmit queue length.
    pub txqlen: Option<u32>,
}

impl LinkSet {
    /// The changes as `ip link set` words (" address A mtu M ...").
    fn describe(&self) -> String {
        let onoff = |b: bool| if b { "on" } else { "off" };
        let mut d = String::new();
        if let Some(mac) = self.mac {
            d += &format!(" address {mac}");
        }
        if let Some(mtu) = self.mtu {
            d += &format!(" mtu {mtu}");
        }
        if let Some(on) = self.promisc {
            d += &format!(" promisc {}", onoff(on));
        }
        if let Some(on) = self.allmulti {
            d += &format!(" allmulticast {}", onoff(on));
        }
        if let Some(q) = self.txqlen {
            d += &format!(" txqueuelen {q}");
        }
        d
    }

    /// How many attributes it changes.
    pub fn count(&self) -> usize {
        usize::from(self.mac.is_some())
            + usize::from(self.mtu.is_some())
            + usize::from(self.promisc.is_some())
            + usize::from(self.allmulti.is_some())
            + usize::from(self.txqlen.is_some())
    }
}

/// The one `RTM_SETLINK` of link `index` that makes every change of `s`.
pub(crate) fn link_set_message(index: u32, s: &LinkSet) -> Rtm<LinkMessage> {
    let mut flags = LinkFlags::empty();
    let mut change = LinkFlags::empty();
    for (on, flag) in [
        (s.promisc, LinkFlags::Promisc),
        (s.allmulti, LinkFlags::Allmulti),
    ] {
        if let Some(on) = on {
            change |= flag;
            if on {
                flags |= flag;
            }
        }
    }
    let mut m = link_message(index, flags, change);
    if let Some(mac) = s.mac {
        m.attributes.push(LinkAttribute::Address(mac.0.to_vec()));
    }
    if let Some(mtu) = s.mtu {
        m.attributes.push(LinkAttribute::Mtu(mtu));
    }
    if let Some(q) = s.txqlen {
        m.attributes.push(LinkAttribute::TxQueueLen(q));
    }
    Rtm(RTM_SETLINK, m)
}

#[cfg(test)]
mod link_set_tests {
    use super::*;

    #[test]
    fn one_message_holds_every_change() {
        let s = LinkSet {
            mac: Some(Mac([2, 0x11, 0x22, 0x33, 0x44, 0x55])),
            mtu: Some(1400),
            promisc: Some(true),
            allmulti: Some(false),
            txqlen: Some(500),
        };
        assert_eq!(s.count(), 5);
        assert_eq!(
            s.describe(),
            " address 02:11:22:33:44:55 mtu 1400 promisc on allmulticast off txqueuelen 500"
        );
        let Rtm(kind, m) = link_set_message(7, &s);
        assert_eq!(kind, RTM_SETLINK);
        assert_eq!(m.header.index, 7);
        assert_eq!(m.header.flags, LinkFlags::Promisc);
        assert_eq!(
            m.header.change_mask,
            LinkFlags::Promisc | LinkFlags::Allmulti
        );
        assert_eq!(
            m.attributes,
            vec![
                LinkAttribute::Address(vec![2, 0x11, 0x22, 0x33, 0x44, 0x55]),
                LinkAttribute::Mtu(1400),
                LinkAttribute::TxQueueLen(500),
            ]
        );
        // Nothing asked, nothing changed: no flag in the change mask.
        let Rtm(_, m) = link_set_message(7, &LinkSet::default());
        assert_eq!(LinkSet::default().count(), 0);
        assert!(m.header.change_mask.is_empty() && m.attributes.is_empty());
    }
}

/// How to create a veth pair with one request. The local end is created in
/// this handle's namespace; the peer directly in `peer_ns`.
#[derive(Debug, Clone, Default)]
pub struct VethOpts<'a> {
    /// Name of the local end.
    pub name: &'a str,
    /// Name of the peer.
    pub peer_name: &'a str,
    /// Namespace for the peer; `None` = this handle's.
    pub peer_ns: Option<&'a NetNs>,
    /// MTU of both ends; `None` = kernel default.
    pub mtu: Option<u32>,
    /// MAC of the local end.
    pub mac: Option<Mac>,
    /// MAC of the peer.
    pub peer_mac: Option<Mac>,
    /// Enslave the local end to this controller (bridge index) at creation.
    pub controller: Option<u32>,
    /// Set the local end up. (The peer cannot be set up in the same
    /// request: the kernel refuses with ENOTCONN. Set it up afterwards
    /// through a handle in its namespace.)
    pub up: bool,
}

// ---- request builders (pure) ----

/// `ip link show <name>` / `<index>`.
pub(crate) fn get_message(index: u32, name: Option<&str>) -> Rtm<LinkMessage> {
    let mut m = LinkMessage::default();
    m.header.index = index;
    if let Some(n) = name {
        m.attributes.push(LinkAttribute::IfName(n.to_string()));
    }
    Rtm(RTM_GETLINK, m)
}

/// A link message for `index` with header `flags` selected by `change`.
pub(crate) fn link_message(index: u32, flags: LinkFlags, change: LinkFlags) -> LinkMessage {
    let mut m = LinkMessage::default();
    m.header.index = index;
    m.header.flags = flags;
    m.header.change_mask = change;
    m
}

/// `RTM_SETLINK` of link `index` with `attrs` (flags untouched).
pub(crate) fn set_message(index: u32, attrs: Vec<LinkAttribute>) -> Rtm<LinkMessage> {
    let mut m = link_message(index, LinkFlags::empty(), LinkFlags::empty());
    m.attributes = attrs;
    Rtm(RTM_SETLINK, m)
}

/// The name of a new link and, when given, its MTU and MAC: what a
/// bridge and each end of a veth pair are created with.
fn push_name_mtu_mac(m: &mut LinkMessage, name: &str, mtu: Option<u32>, mac: Option<Mac>) {
    m.attributes.push(LinkAttribute::IfName(name.to_string()));
    if let Some(mtu) = mtu {
        m.attributes.push(LinkAttribute::Mtu(mtu));
    }
    if let Some(mac) = mac {
        m.attributes.push(LinkAttribute::Address(mac.0.to_vec()));
    }
}

fn up_flags(up: bool, promisc: bool) -> LinkFlags {
    let mut f = LinkFlags::empty();
    if up {
        f |= LinkFlags::Up;
    }
    if promisc {
        f |= LinkFlags::Promisc;
    }
    f
}

/// `ip link add <name> type bridge [mtu] [address] [vlan_filtering] [promisc] [up]`.
pub(crate) fn bridge_message(opts: &BridgeOpts<'_>) -> Rtm<LinkMessage> {
    let flags = up_flags(opts.up, opts.promisc);
    let mut m = link_message(0, flags, flags);
    push_name_mtu_mac(&mut m, opts.name, opts.mtu, opts.mac);
    let mut info = vec![LinkInfo::Kind(InfoKind::Bridge)];
    if let Some(v) = opts.vlan_filtering {
        info.push(LinkInfo::Data(InfoData::Bridge(vec![
            InfoBridge::VlanFiltering(v),
        ])));
    }
    m.attributes.push(LinkAttribute::LinkInfo(info));
    Rtm(RTM_NEWLINK, m)
}

/// `ip link add <name> … type veth peer name <peer> [netns <fd>] …`, in one
/// request: the peer is a whole link message inside `VETH_INFO_PEER`, and
/// its namespace fd belongs there (on the outer message it would move the
/// local end instead).
pub(crate) fn veth_message(opts: &VethOpts<'_>) -> Rtm<LinkMessage> {
    let flags = up_flags(opts.up, false);
    let mut m = link_message(0, flags, flags);
    push_name_mtu_mac(&mut m, opts.name, opts.mtu, opts.mac);
    if let Some(c) = opts.controller {
        m.attributes.push(LinkAttribute::Controller(c));
    }
    let mut peer = LinkMessage::default();
    push_name_mtu_mac(&mut peer, opts.peer_name, opts.mtu, opts.peer_mac);
    if let Some(ns) = opts.peer_ns {
        peer.attributes.push(LinkAttribute::NetNsFd(ns.as_raw_fd()));
    }
    m.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Veth),
        LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
    ]));
    Rtm(RTM_NEWLINK, m)
}

/// `bridge link set dev <port> hairpin|isolated on|off`, as Go's netlink
/// and iproute2 send it: `AF_BRIDGE` and a nested `IFLA_PROTINFO`.
pub(crate) fn bridge_port_message(index: u32, flag: u16, on: bool) -> Rtm<LinkMessage> {
    let mut m = LinkMessage::default();
    m.header.index = index;
    m.header.interface_family = AddressFamily::Bridge;
    m.attributes.push(LinkAttribute::ProtoInfoBridge(vec![
        gaps::bridge_port_flag(flag, on),
    ]));
    Rtm(RTM_SETLINK, m)
}

/// `ip link del`.
pub(crate) fn del_message(index: u32) -> Rtm<LinkMessage> {
    let mut m = LinkMessage::default();
    m.header.index = index;
    Rtm(RTM_DELLINK, m)
}

/// `RTM_DELLINK` of the link called `name` (index 0: the kernel looks the
/// name up, as for `RTM_GETLINK`).
pub(crate) fn del_named_message(name: &str) -> Rtm<LinkMessage> {
    let Rtm(_, m) = get_message(0, Some(name));
    Rtm(RTM_DELLINK, m)
}

impl Netlink {
    // ---- links ----

    /// The link called `name`; `Ok(None)` if there is none.
    pub fn link_by_name(&self, name: &str) -> Result<Option<Link>, NetError> {
        if name.is_empty() || name.len() > MAX_IFNAME_LEN {
            return Ok(None);
        }
        self.one_link(get_message(0, Some(name)), &format!("get link {name}"))
    }

    /// The link with index `index`; `Ok(None)` if there is none.
    pub fn link_by_index(&self, index: u32) -> Result<Option<Link>, NetError> {
        self.one_link(get_message(index, None), &format!("get link {index}"))
    }

    fn one_link(&self, req: Rtm<LinkMessage>, op: &str) -> Result<Option<Link>, NetError> {
        match self.route().get(&Rtm(req.0, LinkView(req.1)), op) {
            Ok(Some(Rtm(RTM_NEWLINK, LinkView(m)))) => Ok(Some(Link::from_message(m))),
            Ok(_) => Ok(None),
            Err(e) if e.raw_errno() == Some(libc_errno::ENODEV) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every link in the namespace.
    pub fn links(&self) -> Result<Vec<Link>, NetError> {
        self.route().dump(
            || Rtm(RTM_GETLINK, LinkView(LinkMessage::default())),
            "list links",
            |m| match m {
                Rtm(RTM_NEWLINK, LinkView(m)) => Some(Link::from_message(m)),
                _ => None,
            },
        )
    }

    /// The link called `name`, or an error naming it if there is none.
    pub fn must_link(&self, name: &str) -> Result<Link, NetError> {
        self.link_by_name(name)?
            .ok_or_else(|| NetError::errno(format!("get link {name}"), libc_errno::ENODEV))
    }

    /// Creates a bridge; an existing link of that name is an EEXIST error.
    pub fn create_bridge(&self, opts: &BridgeOpts<'_>) -> Result<Link, NetError> {
        log::debug!("create bridge {}", opts.name);
        self.route().ack(
            &bridge_message(opts),
            NLM_F_CREATE | NLM_F_EXCL,
            &format!("create bridge {}", opts.name),
        )?;
        self.must_link(opts.name)
    }

    /// Returns the bridge `opts.name`, creating it if needed (as the Go
    /// reference's `ensureBridge`): an existing link of another kind is an
    /// error; `promisc` and `up` are applied to an existing bridge too.
    pub fn ensure_bridge(&self, opts: &BridgeOpts<'_>) -> Result<Link, NetError> {
        let br = match self.link_by_name(opts.name)? {
            Some(l) => l,
            None => match self.create_bridge(opts) {
                Ok(l) => l,
                // Someone else created it between our lookup and our request.
                Err(e) if e.is_exists() => self.must_link(opts.name)?,
                Err(e) => return Err(e),
            },
        };
        if br.kind != "bridge" {
            return Err(NetError::other(
                format!("ensure bridge {}", opts.name),
                format!("{:?} already exists but is not a bridge", opts.name),
            ));
        }
        let mut changed = false;
        if opts.promisc && !br.promisc {
            self.set_promisc(&br, true)?;
            changed = true;
        }
        if opts.up && !br.up {
            self.set_up(&br)?;
            changed = true;
        }
        // Only re-read when we changed something: one round trip per ADD
        // for the common case of an existing, configured bridge.
        if changed {
            self.must_link(opts.name)
        } else {
            Ok(br)
        }
    }

    /// Creates a veth pair in one request: the local end here, the peer
    /// directly in `opts.peer_ns`. Returns the local end.
    pub fn create_veth(&self, opts: &VethOpts<'_>) -> Result<Link, NetError> {
        let op = format!("create veth {} <-> {}", opts.name, opts.peer_name);
        log::debug!("{op}");
        self.route()
            .ack(&veth_message(opts), NLM_F_CREATE | NLM_F_EXCL, &op)?;
        self.must_link(opts.name)
    }

    /// Sets a link up.
    pub fn set_up(&self, link: &Link) -> Result<(), NetError> {
        let m = link_message(link.index, LinkFlags::Up, LinkFlags::Up);
        let op = format!("set {} up", link.name);
        self.route().ack(&Rtm(RTM_SETLINK, m), 0, &op)
    }

    /// Sets a link down.
    pub fn set_down(&self, link: &Link) -> Result<(), NetError> {
        let m = link_message(link.index, LinkFlags::empty(), LinkFlags::Up);
        let op = format!("set {} down", link.name);
        self.route().ack(&Rtm(RTM_SETLINK, m), 0, &op)
    }

    /// Sets a link's MTU.
    pub fn set_mtu(&self, link: &Link, mtu: u32) -> Result<(), NetError> {
        let m = set_message(link.index, vec![LinkAttribute::Mtu(mtu)]);
        self.route()
            .ack(&m, 0, &format!("set mtu {mtu} on {}", link.name))
    }

    /// Enslaves a link to a controller (bridge), or frees it with `None`.
    pub fn set_master(&self, link: &Link, master: Option<u32>) -> Result<(), NetError> {
        let m = set_message(
            link.index,
            vec![LinkAttribute::Controller(master.unwrap_or(0))],
        );
        let op = match master {
            Some(m) => format!("set master of {} to {m}", link.name),
            None => format!("clear master of {}", link.name),
        };
        self.route().ack(&m, 0, &op)
    }

    /// Sets a link's MAC address.
    pub fn set_mac(&self, link: &Link, mac: Mac) -> Result<(), NetError> {
        let m = set_message(link.index, vec![LinkAttribute::Address(mac.0.to_vec())]);
        self.route()
            .ack(&m, 0, &format!("set MAC {mac} on {}", link.name))
    }

    /// Turns promiscuous mode on or off.
    pub fn set_promisc(&self, link: &Link, on: bool) -> Result<(), NetError> {
        let flags = up_flags(false, on);
        let m = link_message(link.index, flags, LinkFlags::Promisc);
        self.route().ack(
            &Rtm(RTM_SETLINK, m),
            0,
            &format!(
                "set promisc {} on {}",
                if on { "on" } else { "off" },
                link.name
            ),
        )
    }

    /// Turns all-multicast mode on or off.
    pub fn set_allmulti(&self, link: &Link, on: bool) -> Result<(), NetError> {
        let flags = if on {
            LinkFlags::Allmulti
        } else {
            LinkFlags::empty()
        };
        let m = link_message(link.index, flags, LinkFlags::Allmulti);
        let state = if on { "on" } else { "off" };
        self.route().ack(
            &Rtm(RTM_SETLINK, m),
            0,
            &format!("set allmulticast {state} on {}", link.name),
        )
    }

    /// Sets a link's transmit queue length.
    pub fn set_txqlen(&self, link: &Link, qlen: u32) -> Result<(), NetError> {
        let m = set_message(link.index, vec![LinkAttribute::TxQueueLen(qlen)]);
        let op = format!("set txqueuelen {qlen} on {}", link.name);
        self.route().ack(&m, 0, &op)
    }

    /// Makes every change of `s` in one request (see [`LinkSet`]).
    pub fn set_link(&self, link: &Link, s: &LinkSet) -> Result<(), NetError> {
        let op = format!("set{} on {}", s.describe(), link.name);
        self.route().ack(&link_set_message(link.index, s), 0, &op)
    }

    /// Moves a link into another namespace.
    pub fn set_ns(&self, link: &Link, ns: &NetNs) -> Result<(), NetError> {
        // The fd stays open (borrowed from `ns`) until the kernel's ACK.
        let m = set_message(link.index, vec![LinkAttribute::NetNsFd(ns.as_raw_fd())]);
        self.route().ack(
            &m,
            0,
            &format!("move {} to netns {}", link.name, ns.path().display()),
        )
    }

    /// Sets hairpin mode on a bridge port.
    pub fn set_hairpin(&self, link: &Link, on: bool) -> Result<(), NetError> {
        self.route().ack(
            &bridge_port_message(link.index, gaps::IFLA_BRPORT_MODE, on),
            0,
            &format!("set hairpin on {}", link.name),
        )
    }

    /// Sets port isolation on a bridge port.
    pub fn set_isolated(&self, link: &Link, on: bool) -> Result<(), NetError> {
        self.route().ack(
            &bridge_port_message(link.index, gaps::IFLA_BRPORT_ISOLATED, on),
            0,
            &format!("set isolated on {}", link.name),
        )
    }

    /// Deletes a link; one that is already gone is not an error. Deleting
    /// one end of a veth removes the other, in whatever namespace.
    pub fn del_link(&self, link: &Link) -> Result<(), NetError> {
        let r = self.route().ack(
            &del_message(link.index),
            0,
            &format!("delete link {}", link.name),
        );
        ok_if_missing(r, &[libc_errno::ENODEV])
    }

    /// Deletes the link called `name` if it exists: true when it did.
    /// One request, the kernel looking the name up: no `RTM_GETLINK`
    /// first, whose round trip in a DEL storm waited its turn among 50
    /// pods' link deletions (issue 30).
    pub fn del_link_by_name(&self, name: &str) -> Result<bool, NetError> {
        if name.is_empty() || name.len() > MAX_IFNAME_LEN {
            return Ok(false);
        }
        let r = self
            .route()
            .ack(&del_named_message(name), 0, &format!("delete link {name}"));
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.raw_errno() == Some(libc_errno::ENODEV) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
