//! Addresses: `ifaddrmsg` requests and the parser of `RTM_NEWADDR` answers.

use super::{IpFamily, Link, Netlink, ok_if_missing};
use crate::error::{NetError, libc_errno};
use crate::nl::rtm::{RTM_DELADDR, RTM_GETADDR, RTM_NEWADDR, Rtm};
use ipnetwork::IpNetwork;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use std::net::{IpAddr, Ipv4Addr};

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
    /// The facade's view of a decoded `RTM_NEWADDR`; `None` for families
    /// other than IPv4/IPv6 or an answer without an address.
    pub(crate) fn from_message(m: AddressMessage) -> Option<Addr> {
        let family = match m.header.family {
            AddressFamily::Inet => IpFamily::V4,
            AddressFamily::Inet6 => IpFamily::V6,
            _ => return None,
        };
        let mut local = None;
        let mut address = None;
        let mut label = String::new();
        let mut broadcast = None;
        let mut flags = None;
        for a in m.attributes {
            match a {
                AddressAttribute::Local(ip) => local = Some(ip),
                AddressAttribute::Address(ip) => address = Some(ip),
                AddressAttribute::Label(l) => label = l,
                AddressAttribute::Broadcast(b) => broadcast = Some(b),
                AddressAttribute::Flags(f) => flags = Some(f),
                _ => {}
            }
        }
        let ip = local.or(address).filter(|ip| IpFamily::of(ip) == family)?;
        let address = IpNetwork::new(ip, m.header.prefix_len).ok()?;
        // IFA_FLAGS (32 bits) when the kernel sends it, else the header's 8.
        let f = flags
            .unwrap_or_else(|| AddressFlags::from_bits_retain(u32::from(m.header.flags.bits())));
        Some(Addr {
            index: m.header.index,
            address,
            scope: u8::from(m.header.scope),
            label,
            broadcast,
            tentative: f.contains(AddressFlags::Tentative),
            dad_failed: f.contains(AddressFlags::Dadfailed),
            permanent: f.contains(AddressFlags::Permanent),
        })
    }
}

/// `ip addr add|del <addr> dev <index>` as the Go reference sends it:
/// `IFA_ADDRESS` and `IFA_LOCAL` (a v6 multicast address goes in
/// `IFA_MULTICAST`), the broadcast below /31, and `IFA_FLAGS` when set.
pub(crate) fn addr_message(index: u32, addr: &IpNetwork, flags: AddressFlags) -> AddressMessage {
    let mut m = AddressMessage::default();
    m.header.family = match addr {
        IpNetwork::V4(_) => AddressFamily::Inet,
        IpNetwork::V6(_) => AddressFamily::Inet6,
    };
    m.header.prefix_len = addr.prefix();
    m.header.index = index;
    let ip = addr.ip();
    match ip {
        IpAddr::V4(v4) => {
            if !v4.is_multicast() {
                m.attributes.push(AddressAttribute::Address(ip));
                m.attributes.push(AddressAttribute::Local(ip));
                if addr.prefix() < 31 {
                    let host_bits = u32::MAX.checked_shr(u32::from(addr.prefix())).unwrap_or(0);
                    let brd = Ipv4Addr::from(u32::from(v4) | host_bits);
                    m.attributes.push(AddressAttribute::Broadcast(brd));
                }
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_multicast() {
                m.attributes.push(AddressAttribute::Multicast(v6));
            } else {
                m.attributes.push(AddressAttribute::Address(ip));
                m.attributes.push(AddressAttribute::Local(ip));
            }
        }
    }
    if !flags.is_empty() {
        m.attributes.push(AddressAttribute::Flags(flags));
    }
    m
}

/// An address dump of `family` (all when `None`), of link `index` only
/// when it is not 0: the socket checks requests strictly, so the kernel
/// filters by index and sends only that link's addresses.
pub(crate) fn dump_message(family: Option<IpFamily>, index: u32) -> Rtm<AddressMessage> {
    let mut m = AddressMessage::default();
    m.header.family = match family {
        None => AddressFamily::Unspec,
        Some(IpFamily::V4) => AddressFamily::Inet,
        Some(IpFamily::V6) => AddressFamily::Inet6,
    };
    m.header.index = index;
    Rtm(RTM_GETADDR, m)
}

impl Netlink {
    // ---- addresses ----

    /// Adds an address (an IPv4 one with its broadcast, as `ip addr add …
    /// brd +` does). An address already present is an EEXIST error.
    pub fn add_addr(&self, link: &Link, addr: IpNetwork) -> Result<(), NetError> {
        log::debug!("add address {addr} to {}", link.name);
        self.add_addr_with(link, addr, AddressFlags::empty())
    }

    /// Removes an address; one that is not there is not an error.
    pub fn del_addr(&self, link: &Link, addr: IpNetwork) -> Result<(), NetError> {
        let m = addr_message(link.index, &addr, AddressFlags::empty());
        let r = self.route().ack(
            &Rtm(RTM_DELADDR, m),
            0,
            &format!("delete address {addr} from {}", link.name),
        );
        ok_if_missing(r, &[libc_errno::EADDRNOTAVAIL, libc_errno::ENODEV])
    }

    /// Adds an address with `IFA_FLAGS` (empty: none sent).
    pub(crate) fn add_addr_with(
        &self,
        link: &Link,
        addr: IpNetwork,
        flags: AddressFlags,
    ) -> Result<(), NetError> {
        self.route().ack(
            &Rtm(RTM_NEWADDR, addr_message(link.index, &addr, flags)),
            NLM_F_CREATE | NLM_F_EXCL,
            &format!("add address {addr} to {}", link.name),
        )
    }

    /// The addresses of a link, in the kernel's order, optionally of one family.
    pub fn addrs(&self, link: &Link, family: Option<IpFamily>) -> Result<Vec<Addr>, NetError> {
        // The kernel filters by index; the check stays for kernels that
        // ignore the filter.
        self.dump_addrs(family, link.index)
    }

    /// Every address in the namespace, optionally of one family.
    pub fn all_addrs(&self, family: Option<IpFamily>) -> Result<Vec<Addr>, NetError> {
        self.dump_addrs(family, 0)
    }

    fn dump_addrs(&self, family: Option<IpFamily>, index: u32) -> Result<Vec<Addr>, NetError> {
        self.route().dump(
            || dump_message(family, index),
            "list addresses",
            |m| match m {
                Rtm(RTM_NEWADDR, m) => Addr::from_message(m).filter(|a| {
                    (index == 0 || a.index == index)
                        && family.is_none_or(|f| f == IpFamily::of(&a.address.ip()))
                }),
                _ => None,
            },
        )
    }
}
