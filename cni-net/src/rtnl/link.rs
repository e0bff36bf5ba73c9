//! Links: `ifinfomsg` requests (get, create bridge/veth, set, delete) and
//! the parser of `RTM_NEWLINK` answers.

use super::msg::{
    AF_BRIDGE, AF_UNSPEC, NLA_F_NESTED, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST,
    RTM_DELLINK, RTM_NEWLINK, RTM_SETLINK, Request,
};
use super::{MAX_IFNAME_LEN, Mac, Netlink, format_hw, ok_if_missing};
use crate::error::{NetError, libc_errno};
use crate::netns::NetNs;
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{
    InfoBridgePort, InfoPortData, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use std::os::fd::AsRawFd;

pub(crate) const IFLA_ADDRESS: u16 = 1;
pub(crate) const IFLA_IFNAME: u16 = 3;
pub(crate) const IFLA_MTU: u16 = 4;
pub(crate) const IFLA_MASTER: u16 = 10;
pub(crate) const IFLA_PROTINFO: u16 = 12;
pub(crate) const IFLA_LINKINFO: u16 = 18;
pub(crate) const IFLA_AF_SPEC: u16 = 26;
pub(crate) const IFLA_NET_NS_FD: u16 = 28;
pub(crate) const IFLA_EXT_MASK: u16 = 29;

pub(crate) const IFLA_INFO_KIND: u16 = 1;
pub(crate) const IFLA_INFO_DATA: u16 = 2;

pub(crate) const IFLA_BR_VLAN_FILTERING: u16 = 7;
pub(crate) const IFLA_BRPORT_MODE: u16 = 4;
pub(crate) const IFLA_BRPORT_ISOLATED: u16 = 33;
pub(crate) const VETH_INFO_PEER: u16 = 1;

pub(crate) const IFF_UP: u32 = 0x1;
pub(crate) const IFF_PROMISC: u32 = 0x100;

/// Size of `struct ifinfomsg`.
pub(crate) const IFINFOMSG_LEN: usize = 16;

/// `struct ifinfomsg`: family, pad, type, index, flags, change.
pub(crate) fn ifinfomsg(family: u8, index: u32, flags: u32, change: u32) -> [u8; IFINFOMSG_LEN] {
    let mut h = [0u8; IFINFOMSG_LEN];
    h[0] = family;
    h[4..8].copy_from_slice(&index.to_ne_bytes());
    h[8..12].copy_from_slice(&flags.to_ne_bytes());
    h[12..16].copy_from_slice(&change.to_ne_bytes());
    h
}

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
}

impl Link {
    /// Parses the payload of an `RTM_NEWLINK` message (ifinfomsg + attributes).
    #[cfg(test)]
    pub(crate) fn from_msg(m: &[u8]) -> Result<Link, super::msg::Malformed> {
        use netlink_packet_core::Parseable;
        let msg = LinkMessage::parse(m).map_err(|_| super::msg::Malformed("link message"))?;
        Ok(Link::from_message(msg))
    }

    /// The facade's view of a decoded `RTM_NEWLINK`.
    pub(crate) fn from_message(m: LinkMessage) -> Link {
        let mut l = Link {
            index: m.header.index,
            up: m.header.flags.contains(LinkFlags::Up),
            promisc: m.header.flags.contains(LinkFlags::Promisc),
            ..Link::default()
        };
        for a in m.attributes {
            match a {
                LinkAttribute::IfName(n) => l.name = n,
                LinkAttribute::Address(a) => l.mac = format_hw(&a),
                LinkAttribute::Mtu(v) => l.mtu = v,
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
pub(crate) fn get_message(index: u32, name: Option<&str>) -> RouteNetlinkMessage {
    let mut m = LinkMessage::default();
    m.header.index = index;
    if let Some(n) = name {
        m.attributes.push(LinkAttribute::IfName(n.to_string()));
    }
    RouteNetlinkMessage::GetLink(m)
}

/// `RTM_SETLINK` of the header flags selected by `change`.
fn set_flags_message(index: u32, flags: LinkFlags, change: LinkFlags) -> RouteNetlinkMessage {
    let mut m = LinkMessage::default();
    m.header.index = index;
    m.header.flags = flags;
    m.header.change_mask = change;
    RouteNetlinkMessage::SetLink(m)
}

fn up_flags(up: bool, promisc: bool) -> (u32, u32) {
    let mut flags = 0;
    let mut change = 0;
    if up {
        flags |= IFF_UP;
        change |= IFF_UP;
    }
    if promisc {
        flags |= IFF_PROMISC;
        change |= IFF_PROMISC;
    }
    (flags, change)
}

fn create_request(ifinfo: &[u8]) -> Request {
    Request::new(
        RTM_NEWLINK,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        ifinfo,
    )
}

/// `ip link add <name> type bridge [mtu] [address] [vlan_filtering] [promisc] [up]`.
pub(crate) fn bridge_request(opts: &BridgeOpts<'_>) -> Request {
    let (flags, change) = up_flags(opts.up, opts.promisc);
    let mut r = create_request(&ifinfomsg(AF_UNSPEC, 0, flags, change));
    r.attr_str(IFLA_IFNAME, opts.name);
    if let Some(mtu) = opts.mtu {
        r.attr_u32(IFLA_MTU, mtu);
    }
    if let Some(mac) = opts.mac {
        r.attr(IFLA_ADDRESS, &mac.0);
    }
    let info = r.nest(IFLA_LINKINFO);
    r.attr_str(IFLA_INFO_KIND, "bridge");
    if let Some(v) = opts.vlan_filtering {
        let data = r.nest(IFLA_INFO_DATA);
        r.attr_u8(IFLA_BR_VLAN_FILTERING, u8::from(v));
        r.end(data);
    }
    r.end(info);
    r
}

/// `ip link add <name> … type veth peer name <peer> [netns <fd>] …`, in one
/// request: the peer's `ifinfomsg` and attributes go inside
/// `IFLA_INFO_DATA`/`VETH_INFO_PEER`.
pub(crate) fn veth_request(opts: &VethOpts<'_>) -> Request {
    let (flags, change) = up_flags(opts.up, false);
    let mut r = create_request(&ifinfomsg(AF_UNSPEC, 0, flags, change));
    r.attr_str(IFLA_IFNAME, opts.name);
    if let Some(mtu) = opts.mtu {
        r.attr_u32(IFLA_MTU, mtu);
    }
    if let Some(mac) = opts.mac {
        r.attr(IFLA_ADDRESS, &mac.0);
    }
    if let Some(c) = opts.controller {
        r.attr_u32(IFLA_MASTER, c);
    }
    let info = r.nest(IFLA_LINKINFO);
    r.attr_str(IFLA_INFO_KIND, "veth");
    let data = r.nest(IFLA_INFO_DATA);
    let peer = r.nest(VETH_INFO_PEER);
    r.raw(&ifinfomsg(AF_UNSPEC, 0, 0, 0));
    r.attr_str(IFLA_IFNAME, opts.peer_name);
    if let Some(mtu) = opts.mtu {
        r.attr_u32(IFLA_MTU, mtu);
    }
    if let Some(mac) = opts.peer_mac {
        r.attr(IFLA_ADDRESS, &mac.0);
    }
    if let Some(ns) = opts.peer_ns {
        r.attr_u32(IFLA_NET_NS_FD, fd_u32(ns));
    }
    r.end(peer);
    r.end(data);
    r.end(info);
    r
}

/// A file descriptor as the u32 that `IFLA_NET_NS_FD` carries.
fn fd_u32(ns: &NetNs) -> u32 {
    // Open descriptors are never negative.
    u32::try_from(ns.as_raw_fd()).unwrap_or(u32::MAX)
}

/// `RTM_SETLINK` on one link: flags/change in the header, then `attrs`.
pub(crate) fn set_request(index: u32, flags: u32, change: u32) -> Request {
    Request::new(
        RTM_SETLINK,
        NLM_F_REQUEST | NLM_F_ACK,
        &ifinfomsg(AF_UNSPEC, index, flags, change),
    )
}

/// `bridge link set dev <port> hairpin|isolated on|off`, as Go's netlink
/// sends it: `AF_BRIDGE` and a nested `IFLA_PROTINFO`.
pub(crate) fn bridge_port_request(index: u32, attr: u16, on: bool) -> Request {
    let mut r = Request::new(
        RTM_SETLINK,
        NLM_F_REQUEST | NLM_F_ACK,
        &ifinfomsg(AF_BRIDGE, index, 0, 0),
    );
    let p = r.nest(IFLA_PROTINFO | NLA_F_NESTED);
    r.attr_u8(attr, u8::from(on));
    r.end(p);
    r
}

/// `ip link del`.
pub(crate) fn del_request(index: u32) -> Request {
    Request::new(
        RTM_DELLINK,
        NLM_F_REQUEST | NLM_F_ACK,
        &ifinfomsg(AF_UNSPEC, index, 0, 0),
    )
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

    fn one_link(&self, req: RouteNetlinkMessage, op: &str) -> Result<Option<Link>, NetError> {
        match self.route().get(&req, op) {
            Ok(Some(RouteNetlinkMessage::NewLink(m))) => Ok(Some(Link::from_message(m))),
            Ok(_) => Ok(None),
            Err(e) if e.raw_errno() == Some(libc_errno::ENODEV) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every link in the namespace.
    pub fn links(&self) -> Result<Vec<Link>, NetError> {
        self.route().dump(
            || RouteNetlinkMessage::GetLink(LinkMessage::default()),
            "list links",
            |m| match m {
                RouteNetlinkMessage::NewLink(m) => Some(Link::from_message(m)),
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
        self.exec(
            bridge_request(opts),
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
        self.exec(veth_request(opts), &op)?;
        self.must_link(opts.name)
    }

    /// Sets a link up.
    pub fn set_up(&self, link: &Link) -> Result<(), NetError> {
        let m = set_flags_message(link.index, LinkFlags::Up, LinkFlags::Up);
        self.route().ack(&m, 0, &format!("set {} up", link.name))
    }

    /// Sets a link down.
    pub fn set_down(&self, link: &Link) -> Result<(), NetError> {
        let m = set_flags_message(link.index, LinkFlags::empty(), LinkFlags::Up);
        self.route().ack(&m, 0, &format!("set {} down", link.name))
    }

    /// Sets a link's MTU.
    pub fn set_mtu(&self, link: &Link, mtu: u32) -> Result<(), NetError> {
        let mut r = set_request(link.index, 0, 0);
        r.attr_u32(IFLA_MTU, mtu);
        self.exec(r, &format!("set mtu {mtu} on {}", link.name))
    }

    /// Enslaves a link to a controller (bridge), or frees it with `None`.
    pub fn set_master(&self, link: &Link, master: Option<u32>) -> Result<(), NetError> {
        let mut r = set_request(link.index, 0, 0);
        r.attr_u32(IFLA_MASTER, master.unwrap_or(0));
        let op = match master {
            Some(m) => format!("set master of {} to {m}", link.name),
            None => format!("clear master of {}", link.name),
        };
        self.exec(r, &op)
    }

    /// Sets a link's MAC address.
    pub fn set_mac(&self, link: &Link, mac: Mac) -> Result<(), NetError> {
        let mut r = set_request(link.index, 0, 0);
        r.attr(IFLA_ADDRESS, &mac.0);
        self.exec(r, &format!("set MAC {mac} on {}", link.name))
    }

    /// Turns promiscuous mode on or off.
    pub fn set_promisc(&self, link: &Link, on: bool) -> Result<(), NetError> {
        let flags = if on { IFF_PROMISC } else { 0 };
        self.exec(
            set_request(link.index, flags, IFF_PROMISC),
            &format!(
                "set promisc {} on {}",
                if on { "on" } else { "off" },
                link.name
            ),
        )
    }

    /// Moves a link into another namespace.
    pub fn set_ns(&self, link: &Link, ns: &NetNs) -> Result<(), NetError> {
        let mut r = set_request(link.index, 0, 0);
        r.attr_u32(IFLA_NET_NS_FD, fd_u32(ns));
        self.exec(
            r,
            &format!("move {} to netns {}", link.name, ns.path().display()),
        )
    }

    /// Sets hairpin mode on a bridge port.
    pub fn set_hairpin(&self, link: &Link, on: bool) -> Result<(), NetError> {
        self.exec(
            bridge_port_request(link.index, IFLA_BRPORT_MODE, on),
            &format!("set hairpin on {}", link.name),
        )
    }

    /// Sets port isolation on a bridge port.
    pub fn set_isolated(&self, link: &Link, on: bool) -> Result<(), NetError> {
        self.exec(
            bridge_port_request(link.index, IFLA_BRPORT_ISOLATED, on),
            &format!("set isolated on {}", link.name),
        )
    }

    /// Deletes a link; one that is already gone is not an error. Deleting
    /// one end of a veth removes the other, in whatever namespace.
    pub fn del_link(&self, link: &Link) -> Result<(), NetError> {
        let r = self.exec(
            del_request(link.index),
            &format!("delete link {}", link.name),
        );
        ok_if_missing(r, &[libc_errno::ENODEV])
    }

    /// Deletes the link called `name` if it exists; returns what it was.
    pub fn del_link_by_name(&self, name: &str) -> Result<Option<Link>, NetError> {
        let Some(link) = self.link_by_name(name)? else {
            return Ok(None);
        };
        self.del_link(&link)?;
        Ok(Some(link))
    }
}
