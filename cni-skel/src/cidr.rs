//! Addresses and prefixes written the way Go's `net` package reads them:
//! `net.ParseCIDR` (host bits kept), `canonicalizeIP` (IPv4-mapped IPv6 is
//! IPv4), and the arithmetic the IPAM plugins (host-local, static) share.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address as a number, for arithmetic and ordering within a family.
pub fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The address `v` of the family of `like`.
pub fn from_u128(v: u128, like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
    }
}

/// The reference's `canonicalizeIP`: an IPv4-mapped IPv6 address is IPv4.
pub fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// Number of bits of an address of this family.
pub fn family_bits(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// `ip/prefix` as written in a config: the address keeps any host bits.
/// `mask_bits` is the size of the mask Go's `net.ParseCIDR` builds: 128
/// when the address was written in IPv6 syntax (even an IPv4-mapped one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address as written (canonicalised: IPv4-mapped becomes IPv4).
    pub addr: IpAddr,
    /// Prefix length.
    pub prefix: u8,
    /// 32 or 128: the family the text was written in.
    pub mask_bits: u8,
}

impl Cidr {
    /// Go's `net.ParseCIDR` (keeping the host bits, as `types.ParseCIDR`
    /// does). The error text is Go's.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let bad = || format!("invalid CIDR address: {s}");
        let (addr, len) = s.split_once('/').ok_or_else(bad)?;
        let ip: IpAddr = addr.parse().map_err(|_| bad())?;
        let mask_bits = if ip.is_ipv4() { 32 } else { 128 };
        if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let prefix: u8 = len.parse().map_err(|_| bad())?;
        if prefix > mask_bits {
            return Err(bad());
        }
        Ok(Cidr {
            addr: canonical(ip),
            prefix,
            mask_bits,
        })
    }

    /// The network mask as a number in the address's family.
    pub fn mask(&self) -> u128 {
        mask(self.prefix, family_bits(self.addr))
    }

    /// The network address.
    pub fn network(&self) -> IpAddr {
        from_u128(to_u128(self.addr) & self.mask(), self.addr)
    }

    /// The last address of the network (the broadcast address for IPv4).
    pub fn last(&self) -> IpAddr {
        let bits = family_bits(self.addr);
        let all = if bits == 32 {
            u128::from(u32::MAX)
        } else {
            u128::MAX
        };
        from_u128(to_u128(self.addr) | (all & !self.mask()), self.addr)
    }

    /// True when `ip` (canonicalised) is inside this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        ip.is_ipv4() == self.addr.is_ipv4()
            && (to_u128(ip) & self.mask()) == (to_u128(self.addr) & self.mask())
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// An address with its prefix as the Go library reads one from a result
/// (`types.IPNet`, through `net.ParseCIDR`): the prefix is required, so
/// "10.1.2.3" is an error rather than a /32. The error text is Go's.
pub fn parse_ipnet(s: &str) -> Result<ipnetwork::IpNetwork, String> {
    Cidr::parse(s)?;
    s.parse().map_err(|_| format!("invalid CIDR address: {s}"))
}

/// serde's `deserialize_with` for [`parse_ipnet`].
pub fn deserialize_ipnet<'de, D>(d: D) -> Result<ipnetwork::IpNetwork, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let s = <String as serde::Deserialize>::deserialize(d)?;
    parse_ipnet(&s).map_err(serde::de::Error::custom)
}

fn mask(prefix: u8, bits: u8) -> u128 {
    let host = u32::from(bits.saturating_sub(prefix));
    let all = if bits == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    let host_mask = if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    };
    all & !host_mask
}
