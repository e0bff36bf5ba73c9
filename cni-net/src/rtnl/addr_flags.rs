//! Adding addresses with `IFA_F_*` flags: no kernel prefix route (ptp
//! routes its subnet through the gateway itself) and no duplicate address
//! detection (a gateway address that every host-side veth shares).

use super::{Link, Netlink};
use crate::error::NetError;
use ipnetwork::IpNetwork;
use netlink_packet_route::address::AddressFlags;

/// Flags for [`Netlink::add_addr_flags`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddrFlags {
    /// `IFA_F_NOPREFIXROUTE`: the kernel adds no route for the address's subnet.
    pub no_prefix_route: bool,
    /// `IFA_F_NODAD`: an IPv6 address is usable at once, without DAD.
    pub no_dad: bool,
}

impl AddrFlags {
    /// The `IFA_FLAGS` bits.
    fn bits(self) -> AddressFlags {
        let mut f = AddressFlags::empty();
        if self.no_prefix_route {
            f |= AddressFlags::Noprefixroute;
        }
        if self.no_dad {
            f |= AddressFlags::Nodad;
        }
        f
    }
}

impl Netlink {
    /// As [`Netlink::add_addr`], with `flags`. An address already present
    /// is an EEXIST error.
    pub fn add_addr_flags(
        &self,
        link: &Link,
        addr: IpNetwork,
        flags: AddrFlags,
    ) -> Result<(), NetError> {
        log::debug!("add address {addr} ({flags:?}) to {}", link.name);
        self.add_addr_with(link, addr, flags.bits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NetNs;
    use crate::rtnl::Link;
    use crate::rtnl::{IpFamily, VethOpts};
    use crate::testutil::skip_unless_root;

    #[test]
    fn flags_bits() {
        assert_eq!(AddrFlags::default().bits().bits(), 0);
        let b = AddrFlags {
            no_prefix_route: true,
            no_dad: true,
        }
        .bits();
        assert_eq!(b.bits(), 0x200 | 0x02);
    }

    #[test]
    fn flags_go_in_ifa_flags_only_when_set() {
        let a: IpNetwork = "fd77::2/64".parse().unwrap();
        let link = Link {
            index: 4,
            name: "x".into(),
            ..Link::default()
        };
        let nl = Netlink::capture();
        nl.add_addr(&link, a).unwrap();
        let flags = AddrFlags {
            no_prefix_route: true,
            no_dad: true,
        };
        nl.add_addr_flags(&link, a, flags).unwrap();
        let c = nl.captured();
        // ifaddrmsg (8) + IFA_ADDRESS (20) + IFA_LOCAL (20); then IFA_FLAGS (8).
        assert_eq!(c[0].len(), 16 + 8 + 20 + 20);
        assert_eq!(c[1].len(), c[0].len() + 8);
        assert_eq!(&c[1][c[0].len()..], &[8, 0, 8, 0, 0x02, 0x02, 0, 0]);
    }

    #[test]
    fn no_prefix_route_and_no_dad() {
        if skip_unless_root("rtnl::addr_flags::no_prefix_route_and_no_dad") {
            return;
        }
        let ns = NetNs::new_anonymous().unwrap();
        let nl = Netlink::for_ns(&ns).unwrap();
        let a = nl
            .create_veth(&VethOpts {
                name: "afa0",
                peer_name: "afb0",
                up: true,
                ..VethOpts::default()
            })
            .unwrap();
        let b = nl.must_link("afb0").unwrap();
        nl.set_up(&b).unwrap();
        let flags = AddrFlags {
            no_prefix_route: true,
            no_dad: true,
        };
        nl.add_addr_flags(&a, "10.77.0.2/24".parse().unwrap(), flags)
            .unwrap();
        nl.add_addr_flags(&a, "fd77::2/64".parse().unwrap(), flags)
            .unwrap();
        let e = nl
            .add_addr_flags(&a, "10.77.0.2/24".parse().unwrap(), flags)
            .unwrap_err();
        assert!(e.is_exists(), "{e}");
        let v6 = nl.addrs(&a, Some(IpFamily::V6)).unwrap();
        assert!(
            v6.iter()
                .any(|x| x.address.to_string() == "fd77::2/64" && !x.tentative)
        );
        for fam in [IpFamily::V4, IpFamily::V6] {
            let routes = nl.routes(fam, None).unwrap();
            // (The kernel's fe80::/64 route is also /64: match the subnet.)
            let subnet: IpNetwork = if fam == IpFamily::V4 {
                "10.77.0.0/24".parse().unwrap()
            } else {
                "fd77::/64".parse().unwrap()
            };
            assert!(
                !routes
                    .iter()
                    .any(|r| r.oif == Some(a.index) && r.dst == subnet),
                "{routes:?}"
            );
        }
    }
}
