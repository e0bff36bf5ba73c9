//! A synchronous facade over rtnetlink: links, addresses and routes in one
//! network namespace.
//!
//! A netlink socket talks to the namespace it was created in. [`Netlink::host`]
//! creates its socket on the calling thread; [`Netlink::for_ns`] creates it on
//! a short-lived thread inside the target namespace and then drives it from
//! the caller's thread, so no thread ever switches namespace back and forth.
//! Each `Netlink` owns a tokio current-thread runtime; every method is a
//! blocking call.

use crate::error::{NetError, from_rtnl, libc_errno};
use crate::netns::NetNs;
use futures::TryStreamExt;
use ipnetwork::IpNetwork;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::address::{
    AddressAttribute, AddressFlags, AddressHeaderFlags, AddressMessage,
};
use rtnetlink::packet_route::link::{
    InfoBridgePort, InfoData, InfoKind, InfoPortData, InfoVeth, LinkAttribute, LinkFlags, LinkInfo,
    LinkMessage,
};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteMetric, RouteProtocol, RouteScope,
    RouteType, RouteVia,
};
use rtnetlink::{
    AddressMessageBuilder, LinkBridge, LinkBridgePort, LinkMessageBuilder, LinkUnspec, LinkVeth,
    RouteMessageBuilder,
};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::str::FromStr;

/// Longest interface name the kernel accepts (IFNAMSIZ - 1).
pub const MAX_IFNAME_LEN: usize = 15;

/// The main routing table.
pub const TABLE_MAIN: u32 = 254;

/// Route scopes (`RT_SCOPE_*`).
pub mod scope {
    /// Global.
    pub const UNIVERSE: u8 = 0;
    /// Site-local.
    pub const SITE: u8 = 200;
    /// Directly attached.
    pub const LINK: u8 = 253;
    /// Local to this host.
    pub const HOST: u8 = 254;
    /// No destination.
    pub const NOWHERE: u8 = 255;
}

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// IPv4 (`AF_INET`).
    V4,
    /// IPv6 (`AF_INET6`).
    V6,
}

impl IpFamily {
    /// The family of an address.
    pub fn of(ip: &IpAddr) -> IpFamily {
        if ip.is_ipv4() {
            IpFamily::V4
        } else {
            IpFamily::V6
        }
    }

    fn af(self) -> AddressFamily {
        match self {
            IpFamily::V4 => AddressFamily::Inet,
            IpFamily::V6 => AddressFamily::Inet6,
        }
    }
}

/// A 48-bit MAC address. Parses `aa:bb:cc:dd:ee:ff` (or `-` separated) and
/// prints lower-case with colons, as Go's `net.HardwareAddr` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl FromStr for Mac {
    type Err = NetError;

    fn from_str(s: &str) -> Result<Mac, NetError> {
        let bad = || NetError::other(format!("parse MAC {s:?}"), "invalid MAC address");
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for byte in out.iter_mut() {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Mac(out))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_hw(&self.0))
    }
}

/// Hardware address bytes as `aa:bb:..`, any length.
fn format_hw(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
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
}

impl Link {
    fn from_msg(m: &LinkMessage) -> Link {
        let mut l = Link {
            index: m.header.index,
            up: m.header.flags.contains(LinkFlags::Up),
            promisc: m.header.flags.contains(LinkFlags::Promisc),
            ..Link::default()
        };
        for a in &m.attributes {
            match a {
                LinkAttribute::IfName(n) => l.name = n.clone(),
                LinkAttribute::Address(b) => l.mac = format_hw(b),
                LinkAttribute::Mtu(v) => l.mtu = *v,
                LinkAttribute::Controller(i) if *i != 0 => l.master = Some(*i),
                LinkAttribute::Link(i) if *i != 0 => l.peer_index = Some(*i),
                LinkAttribute::LinkNetNsId(id) => l.link_netnsid = Some(*id),
                LinkAttribute::LinkInfo(infos) => {
                    for i in infos {
                        match i {
                            LinkInfo::Kind(k) => l.kind = k.to_string(),
                            LinkInfo::PortData(InfoPortData::BridgePort(port)) => {
                                for p in port {
                                    match p {
                                        InfoBridgePort::HairpinMode(v) => l.hairpin = Some(*v),
                                        InfoBridgePort::Isolated(v) => l.isolated = Some(*v),
                                        _ => {}
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        l
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

/// An address on a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr {
    /// Link index.
    pub index: u32,
    /// Address with prefix length (`10.1.2.3/24`, host bits kept).
    pub address: IpNetwork,
    /// Address scope (`RT_SCOPE_*`).
    pub scope: u8,
    /// Label (IPv4 only; empty otherwise).
    pub label: String,
    /// Broadcast address (IPv4 only).
    pub broadcast: Option<Ipv4Addr>,
    /// IPv6 DAD has not finished.
    pub tentative: bool,
    /// IPv6 DAD failed.
    pub dad_failed: bool,
    /// Not subject to lifetimes.
    pub permanent: bool,
}

impl Addr {
    fn from_msg(m: &AddressMessage) -> Option<Addr> {
        let mut local = None;
        let mut address = None;
        let mut label = String::new();
        let mut broadcast = None;
        let mut flags = None;
        for a in &m.attributes {
            match a {
                AddressAttribute::Local(ip) => local = Some(*ip),
                AddressAttribute::Address(ip) => address = Some(*ip),
                AddressAttribute::Label(l) => label = l.clone(),
                AddressAttribute::Broadcast(b) => broadcast = Some(*b),
                AddressAttribute::Flags(f) => flags = Some(*f),
                _ => {}
            }
        }
        // On point-to-point links IFA_ADDRESS is the peer; IFA_LOCAL is ours.
        let ip = local.or(address)?;
        let address = IpNetwork::new(ip, m.header.prefix_len).ok()?;
        let (tentative, dad_failed, permanent) = match flags {
            Some(f) => (
                f.contains(AddressFlags::Tentative),
                f.contains(AddressFlags::Dadfailed),
                f.contains(AddressFlags::Permanent),
            ),
            None => (
                m.header.flags.contains(AddressHeaderFlags::Tentative),
                m.header.flags.contains(AddressHeaderFlags::Dadfailed),
                m.header.flags.contains(AddressHeaderFlags::Permanent),
            ),
        };
        Some(Addr {
            index: m.header.index,
            address,
            scope: u8::from(m.header.scope),
            label,
            broadcast,
            tentative,
            dad_failed,
            permanent,
        })
    }
}

/// A route. For adding, unset fields take the kernel's defaults (main
/// table, universe scope, protocol static); for deleting, unset fields match
/// anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination (host bits are ignored).
    pub dst: IpNetwork,
    /// Next hop.
    pub gateway: Option<IpAddr>,
    /// Output interface index.
    pub oif: Option<u32>,
    /// Preferred source address (`RTA_PREFSRC`).
    pub src: Option<IpAddr>,
    /// Metric (`RTA_PRIORITY`).
    pub priority: Option<u32>,
    /// Routing table; `None` = main.
    pub table: Option<u32>,
    /// Scope (see [`scope`]); `None` = universe on add, any on delete.
    pub scope: Option<u8>,
    /// Route MTU metric.
    pub mtu: Option<u32>,
    /// Route advertised MSS metric.
    pub advmss: Option<u32>,
    /// Next hop is on-link even if no address says so.
    pub onlink: bool,
    /// Routing protocol (`RTPROT_*`) as read back; ignored on add/delete.
    pub protocol: u8,
}

impl Route {
    /// A route to `dst` with nothing else set.
    pub fn new(dst: IpNetwork) -> Route {
        Route {
            dst,
            gateway: None,
            oif: None,
            src: None,
            priority: None,
            table: None,
            scope: None,
            mtu: None,
            advmss: None,
            onlink: false,
            protocol: 0,
        }
    }

    /// The default route of a family.
    pub fn default_route(family: IpFamily) -> Route {
        let dst = match family {
            IpFamily::V4 => IpNetwork::V4(ipnetwork::Ipv4Network::from(Ipv4Addr::UNSPECIFIED)),
            IpFamily::V6 => IpNetwork::V6(ipnetwork::Ipv6Network::from(Ipv6Addr::UNSPECIFIED)),
        };
        // `From<addr>` gives a host route; the default route has prefix 0.
        let dst = IpNetwork::new(dst.ip(), 0).unwrap_or(dst);
        Route::new(dst)
    }

    /// Sets the gateway.
    pub fn via(mut self, gw: IpAddr) -> Route {
        self.gateway = Some(gw);
        self
    }

    /// Sets the output interface.
    pub fn dev(mut self, index: u32) -> Route {
        self.oif = Some(index);
        self
    }

    /// The destination with its host bits cleared.
    pub fn dst_network(&self) -> IpNetwork {
        IpNetwork::new(self.dst.network(), self.dst.prefix()).unwrap_or(self.dst)
    }

    fn from_msg(m: &RouteMessage) -> Option<Route> {
        let family = match m.header.address_family {
            AddressFamily::Inet => IpFamily::V4,
            AddressFamily::Inet6 => IpFamily::V6,
            _ => return None,
        };
        let mut r = Route::default_route(family);
        let mut dst_ip = None;
        let mut table = None;
        for a in &m.attributes {
            match a {
                RouteAttribute::Destination(addr) => dst_ip = route_ip(addr),
                RouteAttribute::Gateway(addr) => r.gateway = route_ip(addr),
                RouteAttribute::Via(RouteVia::Inet6(v6)) => r.gateway = Some(IpAddr::V6(*v6)),
                RouteAttribute::Via(RouteVia::Inet(v4)) => r.gateway = Some(IpAddr::V4(*v4)),
                RouteAttribute::PrefSource(addr) => r.src = route_ip(addr),
                RouteAttribute::Oif(i) => r.oif = Some(*i),
                RouteAttribute::Priority(p) => r.priority = Some(*p),
                RouteAttribute::Table(t) => table = Some(*t),
                RouteAttribute::Metrics(ms) => {
                    for metric in ms {
                        match metric {
                            RouteMetric::Mtu(v) => r.mtu = Some(*v),
                            RouteMetric::Advmss(v) => r.advmss = Some(*v),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(ip) = dst_ip {
            r.dst = IpNetwork::new(ip, m.header.destination_prefix_length).ok()?;
        }
        r.table = Some(table.unwrap_or(u32::from(m.header.table)));
        r.scope = Some(u8::from(m.header.scope));
        r.onlink = m.header.flags.contains(RouteFlags::Onlink);
        r.protocol = u8::from(m.header.protocol);
        Some(r)
    }

    /// The request message. `delete` leaves protocol/type unset and the scope
    /// at "nowhere" unless given, so the kernel matches any.
    fn to_msg(&self, delete: bool) -> Result<RouteMessage, NetError> {
        let op = || format!("build route {self}");
        let dst = self.dst_network();
        let mut b = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(dst.ip(), dst.prefix())
            .map_err(|e| NetError::other(op(), e.to_string()))?;
        if let Some(gw) = self.gateway {
            b = b
                .gateway(gw)
                .map_err(|e| NetError::other(op(), e.to_string()))?;
        }
        if let Some(src) = self.src {
            b = b
                .pref_source(src)
                .map_err(|e| NetError::other(op(), e.to_string()))?;
        }
        if let Some(oif) = self.oif {
            b = b.output_interface(oif);
        }
        if let Some(p) = self.priority {
            b = b.priority(p);
        }
        if let Some(t) = self.table {
            b = b.table_id(t);
        }
        match (self.scope, delete) {
            (Some(s), _) => b = b.scope(RouteScope::from(s)),
            (None, true) => b = b.scope(RouteScope::NoWhere),
            (None, false) => {}
        }
        if self.onlink {
            b = b.onlink();
        }
        let mut msg = b.build();
        let mut metrics = Vec::new();
        if let Some(v) = self.mtu {
            metrics.push(RouteMetric::Mtu(v));
        }
        if let Some(v) = self.advmss {
            metrics.push(RouteMetric::Advmss(v));
        }
        if !metrics.is_empty() {
            msg.attributes.push(RouteAttribute::Metrics(metrics));
        }
        if delete {
            msg.header.protocol = RouteProtocol::Unspec;
            msg.header.kind = RouteType::Unspec;
        }
        Ok(msg)
    }
}

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

impl fmt::Display for Route {
    /// `ip route`-like: `10.0.0.0/24 via 10.0.0.1 dev 3 metric 100 table 254 scope 0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dst)?;
        if let Some(gw) = self.gateway {
            write!(f, " via {gw}")?;
        }
        if let Some(i) = self.oif {
            write!(f, " dev {i}")?;
        }
        if let Some(s) = self.src {
            write!(f, " src {s}")?;
        }
        if let Some(p) = self.priority {
            write!(f, " metric {p}")?;
        }
        if let Some(t) = self.table {
            write!(f, " table {t}")?;
        }
        if let Some(s) = self.scope {
            write!(f, " scope {s}")?;
        }
        if let Some(m) = self.mtu {
            write!(f, " mtu {m}")?;
        }
        if let Some(m) = self.advmss {
            write!(f, " advmss {m}")?;
        }
        if self.onlink {
            write!(f, " onlink")?;
        }
        Ok(())
    }
}

/// A blocking rtnetlink connection bound to one network namespace.
pub struct Netlink {
    rt: tokio::runtime::Runtime,
    handle: rtnetlink::Handle,
}

impl fmt::Debug for Netlink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Netlink").finish_non_exhaustive()
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, NetError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| NetError::io("start netlink runtime", e))
}

fn ok_if_missing(r: Result<(), NetError>, errnos: &[i32]) -> Result<(), NetError> {
    match r {
        Err(e) if e.raw_errno().is_some_and(|n| errnos.contains(&n)) => Ok(()),
        other => other,
    }
}

impl Netlink {
    /// A connection to the calling thread's namespace (the "host" for a
    /// plugin's main thread).
    pub fn host() -> Result<Netlink, NetError> {
        let rt = runtime()?;
        let (conn, handle, _) = {
            // The socket registers with this runtime's reactor on creation.
            let _entered = rt.enter();
            rtnetlink::new_connection().map_err(|e| NetError::io("open netlink socket", e))?
        };
        rt.spawn(conn);
        Ok(Netlink { rt, handle })
    }

    /// A connection to `ns`: the socket is created on a thread inside `ns`
    /// (a netlink socket belongs to the namespace it was created in), then
    /// driven from the caller's thread.
    pub fn for_ns(ns: &NetNs) -> Result<Netlink, NetError> {
        let rt = runtime()?;
        let rt_handle = rt.handle().clone();
        let (conn, handle, _) = ns
            .run(move || {
                let _entered = rt_handle.enter();
                rtnetlink::new_connection()
            })?
            .map_err(|e| {
                NetError::io(format!("open netlink socket in {}", ns.path().display()), e)
            })?;
        rt.spawn(conn);
        Ok(Netlink { rt, handle })
    }

    // ---- links ----

    /// The link called `name`; `Ok(None)` if there is none.
    pub fn link_by_name(&self, name: &str) -> Result<Option<Link>, NetError> {
        if name.is_empty() || name.len() > MAX_IFNAME_LEN {
            return Ok(None);
        }
        let res = self.rt.block_on(async {
            self.handle
                .link()
                .get()
                .match_name(name.to_string())
                .execute()
                .try_next()
                .await
        });
        self.one_link(res, || format!("get link {name}"))
    }

    /// The link with index `index`; `Ok(None)` if there is none.
    pub fn link_by_index(&self, index: u32) -> Result<Option<Link>, NetError> {
        let res = self.rt.block_on(async {
            self.handle
                .link()
                .get()
                .match_index(index)
                .execute()
                .try_next()
                .await
        });
        self.one_link(res, || format!("get link {index}"))
    }

    fn one_link(
        &self,
        res: Result<Option<LinkMessage>, rtnetlink::Error>,
        op: impl FnOnce() -> String,
    ) -> Result<Option<Link>, NetError> {
        match res {
            Ok(m) => Ok(m.as_ref().map(Link::from_msg)),
            Err(e) => {
                let e = from_rtnl(op(), e);
                if e.raw_errno() == Some(libc_errno::ENODEV) {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Every link in the namespace.
    pub fn links(&self) -> Result<Vec<Link>, NetError> {
        let msgs: Vec<LinkMessage> = self
            .rt
            .block_on(async { self.handle.link().get().execute().try_collect().await })
            .map_err(|e| from_rtnl("list links", e))?;
        Ok(msgs.iter().map(Link::from_msg).collect())
    }

    /// The link called `name`, or an error naming it if there is none.
    pub fn must_link(&self, name: &str) -> Result<Link, NetError> {
        self.link_by_name(name)?
            .ok_or_else(|| NetError::errno(format!("get link {name}"), libc_errno::ENODEV))
    }

    fn add_link(&self, msg: LinkMessage, op: impl FnOnce() -> String) -> Result<(), NetError> {
        self.rt
            .block_on(async { self.handle.link().add(msg).execute().await })
            .map_err(|e| from_rtnl(op(), e))
    }

    fn set_link(&self, msg: LinkMessage, op: impl FnOnce() -> String) -> Result<(), NetError> {
        self.rt
            .block_on(async { self.handle.link().set(msg).execute().await })
            .map_err(|e| from_rtnl(op(), e))
    }

    /// Creates a bridge; an existing link of that name is an EEXIST error.
    pub fn create_bridge(&self, opts: &BridgeOpts<'_>) -> Result<Link, NetError> {
        let mut b = LinkMessageBuilder::<LinkBridge>::new(opts.name);
        if let Some(mtu) = opts.mtu {
            b = b.mtu(mtu);
        }
        if let Some(mac) = opts.mac {
            b = b.address(mac.0.to_vec());
        }
        if let Some(v) = opts.vlan_filtering {
            b = b.vlan_filtering(v);
        }
        if opts.promisc {
            b = b.promiscuous(true);
        }
        if opts.up {
            b = b.up();
        }
        log::debug!("create bridge {}", opts.name);
        self.add_link(b.build(), || format!("create bridge {}", opts.name))?;
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
        if opts.promisc && !br.promisc {
            self.set_promisc(&br, true)?;
        }
        if opts.up && !br.up {
            self.set_up(&br)?;
        }
        self.must_link(opts.name)
    }

    /// Creates a veth pair in one request: the local end here, the peer
    /// directly in `opts.peer_ns`. Returns the local end.
    pub fn create_veth(&self, opts: &VethOpts<'_>) -> Result<Link, NetError> {
        let op = || format!("create veth {} <-> {}", opts.name, opts.peer_name);
        let mut peer = LinkMessageBuilder::<LinkUnspec>::new().name(opts.peer_name.to_string());
        if let Some(mtu) = opts.mtu {
            peer = peer.mtu(mtu);
        }
        if let Some(mac) = opts.peer_mac {
            peer = peer.address(mac.0.to_vec());
        }
        if let Some(ns) = opts.peer_ns {
            peer = peer.setns_by_fd(ns.as_raw_fd());
        }
        let mut b = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
            .name(opts.name.to_string())
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())));
        if let Some(mtu) = opts.mtu {
            b = b.mtu(mtu);
        }
        if let Some(mac) = opts.mac {
            b = b.address(mac.0.to_vec());
        }
        if let Some(c) = opts.controller {
            b = b.controller(c);
        }
        if opts.up {
            b = b.up();
        }
        log::debug!("{}", op());
        self.add_link(b.build(), op)?;
        self.must_link(opts.name)
    }

    /// Sets a link up.
    pub fn set_up(&self, link: &Link) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(link.index).up().build();
        self.set_link(msg, || format!("set {} up", link.name))
    }

    /// Sets a link down.
    pub fn set_down(&self, link: &Link) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(link.index).down().build();
        self.set_link(msg, || format!("set {} down", link.name))
    }

    /// Sets a link's MTU.
    pub fn set_mtu(&self, link: &Link, mtu: u32) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(link.index).mtu(mtu).build();
        self.set_link(msg, || format!("set mtu {mtu} on {}", link.name))
    }

    /// Enslaves a link to a controller (bridge), or frees it with `None`.
    pub fn set_master(&self, link: &Link, master: Option<u32>) -> Result<(), NetError> {
        let b = LinkUnspec::new_with_index(link.index);
        let msg = match master {
            Some(m) => b.controller(m),
            None => b.nocontroller(),
        }
        .build();
        self.set_link(msg, || match master {
            Some(m) => format!("set master of {} to {m}", link.name),
            None => format!("clear master of {}", link.name),
        })
    }

    /// Sets a link's MAC address.
    pub fn set_mac(&self, link: &Link, mac: Mac) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(link.index)
            .address(mac.0.to_vec())
            .build();
        self.set_link(msg, || format!("set MAC {mac} on {}", link.name))
    }

    /// Turns promiscuous mode on or off.
    pub fn set_promisc(&self, link: &Link, on: bool) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(link.index)
            .promiscuous(on)
            .build();
        self.set_link(msg, || {
            format!(
                "set promisc {} on {}",
                if on { "on" } else { "off" },
                link.name
            )
        })
    }

    /// Moves a link into another namespace.
    pub fn set_ns(&self, link: &Link, ns: &NetNs) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(link.index)
            .setns_by_fd(ns.as_raw_fd())
            .build();
        self.set_link(msg, || {
            format!("move {} to netns {}", link.name, ns.path().display())
        })
    }

    fn set_bridge_port(
        &self,
        link: &Link,
        port: LinkMessageBuilder<LinkBridgePort>,
        what: &str,
    ) -> Result<(), NetError> {
        let msg = port.build();
        self.rt
            .block_on(async { self.handle.link().set_port(msg).execute().await })
            .map_err(|e| from_rtnl(format!("set {what} on {}", link.name), e))
    }

    /// Sets hairpin mode on a bridge port.
    pub fn set_hairpin(&self, link: &Link, on: bool) -> Result<(), NetError> {
        self.set_bridge_port(link, LinkBridgePort::new(link.index).hairpin(on), "hairpin")
    }

    /// Sets port isolation on a bridge port.
    pub fn set_isolated(&self, link: &Link, on: bool) -> Result<(), NetError> {
        self.set_bridge_port(
            link,
            LinkBridgePort::new(link.index).isolated(on),
            "isolated",
        )
    }

    /// Deletes a link; one that is already gone is not an error. Deleting
    /// one end of a veth removes the other, in whatever namespace.
    pub fn del_link(&self, link: &Link) -> Result<(), NetError> {
        let r = self
            .rt
            .block_on(async { self.handle.link().del(link.index).execute().await })
            .map_err(|e| from_rtnl(format!("delete link {}", link.name), e));
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

    // ---- addresses ----

    fn addr_msg(link: &Link, addr: &IpNetwork) -> AddressMessage {
        match addr.ip() {
            IpAddr::V4(ip) => AddressMessageBuilder::<Ipv4Addr>::new()
                .index(link.index)
                .address(ip, addr.prefix())
                .build(),
            IpAddr::V6(ip) => AddressMessageBuilder::<Ipv6Addr>::new()
                .index(link.index)
                .address(ip, addr.prefix())
                .build(),
        }
    }

    /// Adds an address (an IPv4 one with its broadcast, as `ip addr add …
    /// brd +` does). An address already present is an EEXIST error.
    pub fn add_addr(&self, link: &Link, addr: IpNetwork) -> Result<(), NetError> {
        log::debug!("add address {addr} to {}", link.name);
        self.rt
            .block_on(async {
                self.handle
                    .address()
                    .add(link.index, addr.ip(), addr.prefix())
                    .execute()
                    .await
            })
            .map_err(|e| from_rtnl(format!("add address {addr} to {}", link.name), e))
    }

    /// Removes an address; one that is not there is not an error.
    pub fn del_addr(&self, link: &Link, addr: IpNetwork) -> Result<(), NetError> {
        let msg = Self::addr_msg(link, &addr);
        let r = self
            .rt
            .block_on(async { self.handle.address().del(msg).execute().await })
            .map_err(|e| from_rtnl(format!("delete address {addr} from {}", link.name), e));
        ok_if_missing(r, &[libc_errno::EADDRNOTAVAIL, libc_errno::ENODEV])
    }

    /// The addresses of a link, in the kernel's order, optionally of one family.
    pub fn addrs(&self, link: &Link, family: Option<IpFamily>) -> Result<Vec<Addr>, NetError> {
        let mut all = self.all_addrs(family)?;
        all.retain(|a| a.index == link.index);
        Ok(all)
    }

    /// Every address in the namespace, optionally of one family.
    pub fn all_addrs(&self, family: Option<IpFamily>) -> Result<Vec<Addr>, NetError> {
        let msgs: Vec<AddressMessage> = self
            .rt
            .block_on(async {
                let mut req = self.handle.address().get();
                if let Some(f) = family {
                    req.message_mut().header.family = f.af();
                }
                req.execute().try_collect().await
            })
            .map_err(|e| from_rtnl("list addresses", e))?;
        Ok(msgs
            .iter()
            .filter_map(Addr::from_msg)
            .filter(|a| family.is_none_or(|f| f == IpFamily::of(&a.address.ip())))
            .collect())
    }

    // ---- routes ----

    fn send_route(&self, route: &Route, replace: bool) -> Result<(), NetError> {
        let msg = route.to_msg(false)?;
        log::debug!("add route {route}");
        self.rt
            .block_on(async {
                let req = self.handle.route().add(msg);
                if replace { req.replace() } else { req }.execute().await
            })
            .map_err(|e| from_rtnl(format!("add route {route}"), e))
    }

    /// Adds a route; an identical one already present is an EEXIST error.
    pub fn add_route(&self, route: &Route) -> Result<(), NetError> {
        self.send_route(route, false)
    }

    /// Adds a route or replaces the one with the same key.
    pub fn replace_route(&self, route: &Route) -> Result<(), NetError> {
        self.send_route(route, true)
    }

    /// Deletes the first route matching `route` (unset fields match any);
    /// no match is not an error.
    pub fn del_route(&self, route: &Route) -> Result<(), NetError> {
        let msg = route.to_msg(true)?;
        let r = self
            .rt
            .block_on(async { self.handle.route().del(msg).execute().await })
            .map_err(|e| from_rtnl(format!("delete route {route}"), e));
        ok_if_missing(r, &[libc_errno::ESRCH, libc_errno::ENOENT])
    }

    /// The routes of one family in one table (`None` = main), in the kernel's
    /// order. Multipath next hops are not reported.
    pub fn routes(&self, family: IpFamily, table: Option<u32>) -> Result<Vec<Route>, NetError> {
        let mut query = RouteMessage::default();
        query.header.address_family = family.af();
        let msgs: Vec<RouteMessage> = self
            .rt
            .block_on(async { self.handle.route().get(query).execute().try_collect().await })
            .map_err(|e| from_rtnl("list routes", e))?;
        let table = table.unwrap_or(TABLE_MAIN);
        Ok(msgs
            .iter()
            .filter_map(Route::from_msg)
            .filter(|r| r.table == Some(table))
            .collect())
    }
}

#[cfg(test)]
mod tests;
