//! Routes: `rtmsg` requests and the parser of `RTM_NEWROUTE` answers.

use super::msg::{
    self, AF_INET, AF_INET6, Malformed, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL,
    NLM_F_REQUEST, RTM_DELROUTE, RTM_GETROUTE, RTM_NEWROUTE, Request, attrs, ip_bytes, ip_of,
};
use super::{IpFamily, Netlink, TABLE_MAIN, ok_if_missing, scope};
use crate::error::{NetError, libc_errno};
use ipnetwork::IpNetwork;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub(crate) const RTA_DST: u16 = 1;
pub(crate) const RTA_OIF: u16 = 4;
pub(crate) const RTA_GATEWAY: u16 = 5;
pub(crate) const RTA_PRIORITY: u16 = 6;
pub(crate) const RTA_PREFSRC: u16 = 7;
pub(crate) const RTA_METRICS: u16 = 8;
pub(crate) const RTA_TABLE: u16 = 15;
pub(crate) const RTA_VIA: u16 = 18;

pub(crate) const RTAX_MTU: u16 = 2;
pub(crate) const RTAX_ADVMSS: u16 = 8;

pub(crate) const RTNH_F_ONLINK: u32 = 4;
pub(crate) const RTPROT_UNSPEC: u8 = 0;
pub(crate) const RTPROT_BOOT: u8 = 3;
pub(crate) const RTN_UNSPEC: u8 = 0;
pub(crate) const RTN_UNICAST: u8 = 1;

/// `RT_TABLE_MAIN` as the `rtmsg` header carries it.
const RT_TABLE_MAIN: u8 = 254;

/// Size of `struct rtmsg`.
pub(crate) const RTMSG_LEN: usize = 12;

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

/// `struct rtmsg`: family, dst_len, src_len, tos, table, protocol, scope,
/// type, flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RtMsg {
    pub(crate) family: u8,
    pub(crate) dst_len: u8,
    pub(crate) table: u8,
    pub(crate) protocol: u8,
    pub(crate) scope: u8,
    pub(crate) kind: u8,
    pub(crate) flags: u32,
}

impl RtMsg {
    pub(crate) fn bytes(&self) -> [u8; RTMSG_LEN] {
        let mut h = [0u8; RTMSG_LEN];
        h[0] = self.family;
        h[1] = self.dst_len;
        h[4] = self.table;
        h[5] = self.protocol;
        h[6] = self.scope;
        h[7] = self.kind;
        h[8..12].copy_from_slice(&self.flags.to_ne_bytes());
        h
    }

    pub(crate) fn parse(m: &[u8]) -> Result<RtMsg, Malformed> {
        if m.len() < RTMSG_LEN {
            return Err(Malformed("short rtmsg"));
        }
        Ok(RtMsg {
            family: msg::u8_at(m, 0)?,
            dst_len: msg::u8_at(m, 1)?,
            table: msg::u8_at(m, 4)?,
            protocol: msg::u8_at(m, 5)?,
            scope: msg::u8_at(m, 6)?,
            kind: msg::u8_at(m, 7)?,
            flags: msg::u32_at(m, 8)?,
        })
    }
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

    /// Parses the payload of an `RTM_NEWROUTE` message; `None` for a family
    /// other than IPv4/IPv6. Multipath next hops are not reported.
    pub(crate) fn from_msg(m: &[u8]) -> Result<Option<Route>, Malformed> {
        let h = RtMsg::parse(m)?;
        let family = match h.family {
            AF_INET => IpFamily::V4,
            AF_INET6 => IpFamily::V6,
            _ => return Ok(None),
        };
        let mut r = Route::default_route(family);
        let mut dst_ip = None;
        let mut table = None;
        for a in attrs(m.get(RTMSG_LEN..).unwrap_or_default()) {
            let (kind, p) = a?;
            match kind {
                RTA_DST => dst_ip = Some(ip_of(h.family, p)?),
                RTA_GATEWAY => r.gateway = Some(ip_of(h.family, p)?),
                RTA_VIA => {
                    // struct rtvia: family (u16), then the address.
                    let via_family = u8::try_from(msg::u16_at(p, 0)?)
                        .map_err(|_| Malformed("RTA_VIA family"))?;
                    r.gateway = Some(ip_of(via_family, p.get(2..).unwrap_or_default())?);
                }
                RTA_PREFSRC => r.src = Some(ip_of(h.family, p)?),
                RTA_OIF => r.oif = Some(msg::u32_at(p, 0)?),
                RTA_PRIORITY => r.priority = Some(msg::u32_at(p, 0)?),
                RTA_TABLE => table = Some(msg::u32_at(p, 0)?),
                RTA_METRICS => {
                    for metric in attrs(p) {
                        let (mk, mp) = metric?;
                        match mk {
                            RTAX_MTU => r.mtu = Some(msg::u32_at(mp, 0)?),
                            RTAX_ADVMSS => r.advmss = Some(msg::u32_at(mp, 0)?),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(ip) = dst_ip {
            r.dst = IpNetwork::new(ip, h.dst_len).map_err(|_| Malformed("route prefix length"))?;
        }
        r.table = Some(table.unwrap_or(u32::from(h.table)));
        r.scope = Some(h.scope);
        r.onlink = h.flags & RTNH_F_ONLINK != 0;
        r.protocol = h.protocol;
        Ok(Some(r))
    }

    /// The `rtmsg` and attributes of an add (`delete == false`) or delete
    /// request. Add: protocol `boot` unless given (as the Go reference's
    /// netlink library), type unicast, scope universe unless given. Delete leaves protocol/type unset and the scope at "nowhere"
    /// unless given, so the kernel matches any.
    pub(crate) fn to_request(
        &self,
        kind: u16,
        flags: u16,
        delete: bool,
    ) -> Result<Request, NetError> {
        let bad = |what: String| NetError::other(format!("build route {self}"), what);
        let dst = self.dst_network();
        let (family, dst_bytes) = ip_bytes(&dst.ip());
        let mut h = RtMsg {
            family,
            dst_len: dst.prefix(),
            table: RT_TABLE_MAIN,
            protocol: if self.protocol == 0 {
                RTPROT_BOOT
            } else {
                self.protocol
            },
            scope: scope::UNIVERSE,
            kind: RTN_UNICAST,
            flags: 0,
        };
        if let Some(t) = self.table
            && let Ok(small) = u8::try_from(t)
        {
            h.table = small;
        }
        match (self.scope, delete) {
            (Some(s), _) => h.scope = s,
            (None, true) => h.scope = scope::NOWHERE,
            (None, false) => {}
        }
        if self.onlink {
            h.flags |= RTNH_F_ONLINK;
        }
        if delete {
            h.protocol = RTPROT_UNSPEC;
            h.kind = RTN_UNSPEC;
        }
        let mut r = Request::new(kind, flags, &h.bytes());
        r.attr(RTA_DST, &dst_bytes);
        if let Some(gw) = self.gateway {
            match (family, gw) {
                (AF_INET, IpAddr::V4(g)) => {
                    r.attr(RTA_GATEWAY, &g.octets());
                }
                (AF_INET6, IpAddr::V6(g)) => {
                    r.attr(RTA_GATEWAY, &g.octets());
                }
                // An IPv4 route via an IPv6 next hop.
                (AF_INET, IpAddr::V6(g)) => {
                    let mut via = u16::from(AF_INET6).to_ne_bytes().to_vec();
                    via.extend_from_slice(&g.octets());
                    r.attr(RTA_VIA, &via);
                }
                _ => return Err(bad(format!("invalid gateway {gw}"))),
            }
        }
        if let Some(src) = self.src {
            let (src_family, src_bytes) = ip_bytes(&src);
            if src_family != family {
                return Err(bad(format!("invalid preferred source {src}")));
            }
            r.attr(RTA_PREFSRC, &src_bytes);
        }
        if let Some(oif) = self.oif {
            r.attr_u32(RTA_OIF, oif);
        }
        if let Some(p) = self.priority {
            r.attr_u32(RTA_PRIORITY, p);
        }
        if let Some(t) = self.table
            && t > 255
        {
            r.attr_u32(RTA_TABLE, t);
        }
        if self.mtu.is_some() || self.advmss.is_some() {
            let m = r.nest(RTA_METRICS);
            if let Some(v) = self.mtu {
                r.attr_u32(RTAX_MTU, v);
            }
            if let Some(v) = self.advmss {
                r.attr_u32(RTAX_ADVMSS, v);
            }
            r.end(m);
        }
        Ok(r)
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

/// Dump of the routes of one family (every table).
pub(crate) fn dump_request(family: IpFamily) -> Request {
    let h = RtMsg {
        family: family.af(),
        ..RtMsg::default()
    };
    Request::new(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, &h.bytes())
}

impl Netlink {
    // ---- routes ----

    /// Adds a route; an identical one already present is an EEXIST error.
    pub fn add_route(&self, route: &Route) -> Result<(), NetError> {
        let req = route.to_request(
            RTM_NEWROUTE,
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
            false,
        )?;
        log::debug!("add route {route}");
        self.exec(req, &format!("add route {route}"))
    }

    /// Deletes the first route matching `route` (unset fields match any);
    /// no match is not an error.
    pub fn del_route(&self, route: &Route) -> Result<(), NetError> {
        let req = route.to_request(RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK, true)?;
        let r = self.exec(req, &format!("delete route {route}"));
        ok_if_missing(r, &[libc_errno::ESRCH, libc_errno::ENOENT])
    }

    /// The routes of one family in one table (`None` = main), in the kernel's
    /// order. Multipath next hops are not reported.
    pub fn routes(&self, family: IpFamily, table: Option<u32>) -> Result<Vec<Route>, NetError> {
        let table = table.unwrap_or(TABLE_MAIN);
        let routes = self.collect(
            || dump_request(family),
            RTM_NEWROUTE,
            "list routes",
            Route::from_msg,
        )?;
        Ok(routes
            .into_iter()
            .filter(|r| r.table == Some(table))
            .collect())
    }
}
