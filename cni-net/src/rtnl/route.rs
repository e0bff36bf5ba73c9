//! Routes: `rtmsg` requests and the parser of `RTM_NEWROUTE` answers.

use super::{IpFamily, Netlink, TABLE_MAIN, ok_if_missing, scope};
use crate::error::{NetError, libc_errno};
use crate::nl::rtm::{RTM_DELROUTE, RTM_GETROUTE, RTM_NEWROUTE, Rtm};
use ipnetwork::IpNetwork;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric,
    RouteProtocol, RouteScope, RouteType, RouteVia,
};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `RTPROT_BOOT`: how the Go reference's netlink library adds routes.
const RTPROT_BOOT: u8 = 3;

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
    /// Routing protocol (`RTPROT_*`): as read back; on add, 0 means
    /// `boot` (as the Go reference adds routes); ignored on delete.
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
        let ip = match family {
            IpFamily::V4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpFamily::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let dst = match IpNetwork::new(ip, 0) {
            Ok(n) => n,
            // Prefix 0 is valid for both families.
            Err(_) => IpNetwork::from(ip),
        };
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

    /// The facade's view of a decoded `RTM_NEWROUTE`; `None` for a family
    /// other than IPv4/IPv6. Multipath next hops are not reported.
    pub(crate) fn from_message(m: RouteMessage) -> Option<Route> {
        let family = match m.header.address_family {
            AddressFamily::Inet => IpFamily::V4,
            AddressFamily::Inet6 => IpFamily::V6,
            _ => return None,
        };
        let mut r = Route::default_route(family);
        let mut dst_ip = None;
        let mut table = None;
        for a in m.attributes {
            match a {
                RouteAttribute::Destination(d) => dst_ip = ip_of(d),
                RouteAttribute::Gateway(g) => r.gateway = ip_of(g),
                RouteAttribute::Via(RouteVia::Inet(g)) => r.gateway = Some(IpAddr::V4(g)),
                RouteAttribute::Via(RouteVia::Inet6(g)) => r.gateway = Some(IpAddr::V6(g)),
                RouteAttribute::PrefSource(a) => r.src = ip_of(a),
                RouteAttribute::Oif(i) => r.oif = Some(i),
                RouteAttribute::Priority(p) => r.priority = Some(p),
                RouteAttribute::Table(t) => table = Some(t),
                RouteAttribute::Metrics(ms) => {
                    for metric in ms {
                        match metric {
                            RouteMetric::Mtu(v) => r.mtu = Some(v),
                            RouteMetric::Advmss(v) => r.advmss = Some(v),
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

    /// The message of an add (`delete == false`) or delete request. Add:
    /// protocol `boot` unless given (as the Go reference's netlink library),
    /// type unicast, scope universe unless given. Delete leaves protocol and
    /// type unset and the scope at "nowhere" unless given, so the kernel
    /// matches any. Table ids above 255 go in `RTA_TABLE` only (the header's
    /// field is a byte), as iproute2 sends them.
    pub(crate) fn to_message(&self, delete: bool) -> Result<RouteMessage, NetError> {
        let bad = |what: String| NetError::other(format!("build route {self}"), what);
        let dst = self.dst_network();
        let mut m = RouteMessage::default();
        let h = &mut m.header;
        h.address_family = match dst {
            IpNetwork::V4(_) => AddressFamily::Inet,
            IpNetwork::V6(_) => AddressFamily::Inet6,
        };
        h.destination_prefix_length = dst.prefix();
        h.table = RouteHeader::RT_TABLE_MAIN;
        if let Some(t) = self.table {
            h.table = u8::try_from(t).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
        }
        h.protocol = RouteProtocol::from(if self.protocol == 0 {
            RTPROT_BOOT
        } else {
            self.protocol
        });
        h.scope = RouteScope::Universe;
        h.kind = RouteType::Unicast;
        match (self.scope, delete) {
            (Some(s), _) => h.scope = RouteScope::from(s),
            (None, true) => h.scope = RouteScope::from(scope::NOWHERE),
            (None, false) => {}
        }
        if self.onlink {
            h.flags |= RouteFlags::Onlink;
        }
        if delete {
            h.protocol = RouteProtocol::Unspec;
            h.kind = RouteType::Unspec;
        }
        let v4 = dst.is_ipv4();
        m.attributes
            .push(RouteAttribute::Destination(route_address(dst.ip())));
        if let Some(gw) = self.gateway {
            match (v4, gw) {
                (true, IpAddr::V4(_)) | (false, IpAddr::V6(_)) => {
                    m.attributes
                        .push(RouteAttribute::Gateway(route_address(gw)));
                }
                // An IPv4 route via an IPv6 next hop.
                (true, IpAddr::V6(g)) => m.attributes.push(RouteAttribute::Via(RouteVia::Inet6(g))),
                (false, IpAddr::V4(_)) => return Err(bad(format!("invalid gateway {gw}"))),
            }
        }
        if let Some(src) = self.src {
            if src.is_ipv4() != v4 {
                return Err(bad(format!("invalid preferred source {src}")));
            }
            m.attributes
                .push(RouteAttribute::PrefSource(route_address(src)));
        }
        if let Some(oif) = self.oif {
            m.attributes.push(RouteAttribute::Oif(oif));
        }
        if let Some(p) = self.priority {
            m.attributes.push(RouteAttribute::Priority(p));
        }
        if let Some(t) = self.table
            && t > 255
        {
            m.attributes.push(RouteAttribute::Table(t));
        }
        if self.mtu.is_some() || self.advmss.is_some() {
            let mut metrics = Vec::new();
            if let Some(v) = self.mtu {
                metrics.push(RouteMetric::Mtu(v));
            }
            if let Some(v) = self.advmss {
                metrics.push(RouteMetric::Advmss(v));
            }
            m.attributes.push(RouteAttribute::Metrics(metrics));
        }
        Ok(m)
    }
}

fn route_address(ip: IpAddr) -> RouteAddress {
    match ip {
        IpAddr::V4(a) => RouteAddress::Inet(a),
        IpAddr::V6(a) => RouteAddress::Inet6(a),
    }
}

fn ip_of(a: RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(a) => Some(IpAddr::V4(a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(a)),
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

/// Dump of the routes of one family in `table`: with strict checking the
/// kernel sends only that table's routes (`RTA_TABLE` is the filter).
pub(crate) fn dump_message(family: IpFamily, table: u32) -> Rtm<RouteMessage> {
    let mut m = RouteMessage::default();
    m.header.address_family = match family {
        IpFamily::V4 => AddressFamily::Inet,
        IpFamily::V6 => AddressFamily::Inet6,
    };
    m.attributes.push(RouteAttribute::Table(table));
    Rtm(RTM_GETROUTE, m)
}

impl Netlink {
    // ---- routes ----

    /// Adds a route; an identical one already present is an EEXIST error.
    pub fn add_route(&self, route: &Route) -> Result<(), NetError> {
        let m = Rtm(RTM_NEWROUTE, route.to_message(false)?);
        log::debug!("add route {route}");
        self.route()
            .ack(&m, NLM_F_CREATE | NLM_F_EXCL, &format!("add route {route}"))
    }

    /// Adds a route or replaces the one with the same destination, table,
    /// metric (and, for IPv6, next hop): `ip route replace`.
    pub fn replace_route(&self, route: &Route) -> Result<(), NetError> {
        let m = Rtm(RTM_NEWROUTE, route.to_message(false)?);
        log::debug!("replace route {route}");
        self.route().ack(
            &m,
            NLM_F_CREATE | NLM_F_REPLACE,
            &format!("replace route {route}"),
        )
    }

    /// The routes of one family in every table (main, local and the
    /// others), in the kernel's order.
    pub fn routes_all_tables(&self, family: IpFamily) -> Result<Vec<Route>, NetError> {
        self.route().dump(
            || {
                let mut m = RouteMessage::default();
                m.header.address_family = match family {
                    IpFamily::V4 => AddressFamily::Inet,
                    IpFamily::V6 => AddressFamily::Inet6,
                };
                Rtm(RTM_GETROUTE, m)
            },
            "list routes",
            |m| match m {
                Rtm(RTM_NEWROUTE, m) => Route::from_message(m),
                _ => None,
            },
        )
    }

    /// The routes of one family through link `index`, in every table: the
    /// kernel filters the dump by `RTA_OIF` (strict checking); the check
    /// stays for kernels that ignore the filter. Multipath routes are not
    /// reported.
    pub fn routes_of_link(&self, family: IpFamily, index: u32) -> Result<Vec<Route>, NetError> {
        self.route().dump(
            || {
                let mut m = RouteMessage::default();
                m.header.address_family = match family {
                    IpFamily::V4 => AddressFamily::Inet,
                    IpFamily::V6 => AddressFamily::Inet6,
                };
                m.attributes.push(RouteAttribute::Oif(index));
                Rtm(RTM_GETROUTE, m)
            },
            "list routes",
            |m| match m {
                Rtm(RTM_NEWROUTE, m) => Route::from_message(m).filter(|r| r.oif == Some(index)),
                _ => None,
            },
        )
    }

    /// The routes of both families in one dump (`AF_UNSPEC`): those of
    /// `table`, or of every table (local included) when `None`.
    pub fn all_routes(&self, table: Option<u32>) -> Result<Vec<Route>, NetError> {
        self.route().dump(
            || {
                let mut m = RouteMessage::default();
                if let Some(t) = table {
                    m.attributes.push(RouteAttribute::Table(t));
                }
                Rtm(RTM_GETROUTE, m)
            },
            "list routes",
            |m| match m {
                // Multicast routing tables' entries are left out; the table
                // check stays for kernels that ignore the filter.
                Rtm(RTM_NEWROUTE, m) => {
                    Route::from_message(m).filter(|r| table.is_none() || r.table == table)
                }
                _ => None,
            },
        )
    }

    /// Deletes the first route matching `route` (unset fields match any);
    /// no match is not an error.
    pub fn del_route(&self, route: &Route) -> Result<(), NetError> {
        let m = Rtm(RTM_DELROUTE, route.to_message(true)?);
        let r = self.route().ack(&m, 0, &format!("delete route {route}"));
        ok_if_missing(r, &[libc_errno::ESRCH, libc_errno::ENOENT])
    }

    /// The routes of one family in one table (`None` = main), in the kernel's
    /// order. Multipath next hops are not reported.
    pub fn routes(&self, family: IpFamily, table: Option<u32>) -> Result<Vec<Route>, NetError> {
        let table = table.unwrap_or(TABLE_MAIN);
        let r = self.route().dump(
            || dump_message(family, table),
            "list routes",
            |m| match m {
                // The table check stays for kernels that ignore the filter.
                Rtm(RTM_NEWROUTE, m) => Route::from_message(m).filter(|r| r.table == Some(table)),
                _ => None,
            },
        );
        match r {
            // A table that does not exist (yet) has no routes.
            Err(e) if e.raw_errno() == Some(libc_errno::ENOENT) => Ok(Vec::new()),
            other => other,
        }
    }

    /// The route the kernel would use to reach `dst` (`ip route get`);
    /// `None` when there is none.
    pub fn route_to(&self, dst: IpAddr) -> Result<Option<Route>, NetError> {
        let mut m = RouteMessage::default();
        m.header.address_family = match dst {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        m.header.destination_prefix_length = if dst.is_ipv4() { 32 } else { 128 };
        m.attributes
            .push(RouteAttribute::Destination(route_address(dst)));
        let op = format!("route get {dst}");
        match self.route().get(&Rtm(RTM_GETROUTE, m), &op) {
            Ok(Some(Rtm(RTM_NEWROUTE, m))) => Ok(Route::from_message(m)),
            Ok(_) => Ok(None),
            // No route at all (ENETUNREACH, EHOSTUNREACH ...) is an answer.
            Err(e) if e.raw_errno().is_some() => {
                log::debug!("{e}");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
