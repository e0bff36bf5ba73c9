//! Addresses: `ifaddrmsg` requests and the parser of `RTM_NEWADDR` answers.

use super::msg::{
    self, AF_INET, AF_INET6, AF_UNSPEC, Malformed, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL,
    NLM_F_REQUEST, RTM_DELADDR, RTM_GETADDR, RTM_NEWADDR, Request, attrs, cstr, ip_of,
};
use super::{IpFamily, Link, Netlink, ok_if_missing};
use crate::error::{NetError, libc_errno};
use ipnetwork::IpNetwork;
use std::net::{IpAddr, Ipv4Addr};

pub(crate) const IFA_ADDRESS: u16 = 1;
pub(crate) const IFA_LOCAL: u16 = 2;
pub(crate) const IFA_LABEL: u16 = 3;
pub(crate) const IFA_BROADCAST: u16 = 4;
pub(crate) const IFA_MULTICAST: u16 = 7;
pub(crate) const IFA_FLAGS: u16 = 8;

pub(crate) const IFA_F_NODAD: u32 = 0x02;
pub(crate) const IFA_F_DADFAILED: u32 = 0x08;
pub(crate) const IFA_F_TENTATIVE: u32 = 0x40;
pub(crate) const IFA_F_PERMANENT: u32 = 0x80;
pub(crate) const IFA_F_NOPREFIXROUTE: u32 = 0x200;

/// Size of `struct ifaddrmsg`.
const IFADDRMSG_LEN: usize = 8;

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
    /// Parses the payload of an `RTM_NEWADDR` message. `None` for a family
    /// other than IPv4/IPv6 or an address without `IFA_LOCAL`/`IFA_ADDRESS`.
    pub(crate) fn from_msg(m: &[u8]) -> Result<Option<Addr>, Malformed> {
        if m.len() < IFADDRMSG_LEN {
            return Err(Malformed("short ifaddrmsg"));
        }
        let family = msg::u8_at(m, 0)?;
        if family != AF_INET && family != AF_INET6 {
            return Ok(None);
        }
        let prefix = msg::u8_at(m, 1)?;
        let header_flags = msg::u8_at(m, 2)?;
        let mut local = None;
        let mut address = None;
        let mut label = String::new();
        let mut broadcast = None;
        let mut flags = None;
        for a in attrs(m.get(IFADDRMSG_LEN..).unwrap_or_default()) {
            let (kind, p) = a?;
            match kind {
                IFA_LOCAL => local = Some(ip_of(family, p)?),
                IFA_ADDRESS => address = Some(ip_of(family, p)?),
                IFA_LABEL => label = cstr(p),
                IFA_BROADCAST => {
                    if let IpAddr::V4(b) = ip_of(AF_INET, p)? {
                        broadcast = Some(b);
                    }
                }
                IFA_FLAGS => flags = Some(msg::u32_at(p, 0)?),
                _ => {}
            }
        }
        // On point-to-point links IFA_ADDRESS is the peer; IFA_LOCAL is ours.
        let Some(ip) = local.or(address) else {
            return Ok(None);
        };
        let Ok(address) = IpNetwork::new(ip, prefix) else {
            return Ok(None);
        };
        let f = flags.unwrap_or(u32::from(header_flags));
        Ok(Some(Addr {
            index: msg::u32_at(m, 4)?,
            address,
            scope: msg::u8_at(m, 3)?,
            label,
            broadcast,
            tentative: f & IFA_F_TENTATIVE != 0,
            dad_failed: f & IFA_F_DADFAILED != 0,
            permanent: f & IFA_F_PERMANENT != 0,
        }))
    }
}

/// `struct ifaddrmsg`: family, prefixlen, flags, scope, index.
fn ifaddrmsg(family: u8, prefix: u8, index: u32) -> [u8; IFADDRMSG_LEN] {
    let mut h = [0u8; IFADDRMSG_LEN];
    h[0] = family;
    h[1] = prefix;
    h[4..8].copy_from_slice(&index.to_ne_bytes());
    h
}

/// An `ip addr add|del` request: `IFA_ADDRESS` and `IFA_LOCAL`, for IPv4
/// with the broadcast (`brd +`) below /31, and `IFA_FLAGS` when not zero.
/// A multicast IPv6 address goes in `IFA_MULTICAST`.
pub(crate) fn addr_request(
    kind: u16,
    flags: u16,
    index: u32,
    addr: &IpNetwork,
    ifa_flags: u32,
) -> Request {
    let (family, bytes) = msg::ip_bytes(&addr.ip());
    let mut r = Request::new(kind, flags, &ifaddrmsg(family, addr.prefix(), index));
    match addr.ip() {
        IpAddr::V4(ip) => {
            if !ip.is_multicast() {
                r.attr(IFA_ADDRESS, &bytes);
                r.attr(IFA_LOCAL, &bytes);
                if addr.prefix() < 31 {
                    let host_bits = u32::MAX.checked_shr(u32::from(addr.prefix())).unwrap_or(0);
                    let brd = Ipv4Addr::from(u32::from(ip) | host_bits);
                    r.attr(IFA_BROADCAST, &brd.octets());
                }
            }
        }
        IpAddr::V6(ip) => {
            if ip.is_multicast() {
                r.attr(IFA_MULTICAST, &bytes);
            } else {
                r.attr(IFA_ADDRESS, &bytes);
                r.attr(IFA_LOCAL, &bytes);
            }
        }
    }
    if ifa_flags != 0 {
        r.attr_u32(IFA_FLAGS, ifa_flags);
    }
    r
}

/// `ip addr add`: fails with EEXIST when present.
pub(crate) fn add_request(index: u32, addr: &IpNetwork, ifa_flags: u32) -> Request {
    addr_request(
        RTM_NEWADDR,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        index,
        addr,
        ifa_flags,
    )
}

/// Dump of the addresses of one family (or all).
pub(crate) fn dump_request(family: Option<IpFamily>) -> Request {
    let af = family.map_or(AF_UNSPEC, IpFamily::af);
    Request::new(
        RTM_GETADDR,
        NLM_F_REQUEST | NLM_F_DUMP,
        &ifaddrmsg(af, 0, 0),
    )
}

impl Netlink {
    // ---- addresses ----

    /// Adds an address (an IPv4 one with its broadcast, as `ip addr add …
    /// brd +` does). An address already present is an EEXIST error.
    pub fn add_addr(&self, link: &Link, addr: IpNetwork) -> Result<(), NetError> {
        log::debug!("add address {addr} to {}", link.name);
        self.exec(
            add_request(link.index, &addr, 0),
            &format!("add address {addr} to {}", link.name),
        )
    }

    /// Removes an address; one that is not there is not an error.
    pub fn del_addr(&self, link: &Link, addr: IpNetwork) -> Result<(), NetError> {
        let req = addr_request(RTM_DELADDR, NLM_F_REQUEST | NLM_F_ACK, link.index, &addr, 0);
        let r = self.exec(req, &format!("delete address {addr} from {}", link.name));
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
        let addrs = self.collect(
            || dump_request(family),
            RTM_NEWADDR,
            "list addresses",
            Addr::from_msg,
        )?;
        Ok(addrs
            .into_iter()
            .filter(|a| family.is_none_or(|f| f == IpFamily::of(&a.address.ip())))
            .collect())
    }
}
