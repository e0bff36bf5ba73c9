//! Ranges and range sets: canonicalisation (defaults and validation exactly
//! as the reference's `allocator/range.go` and `range_set.go`), membership
//! and overlap tests.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use cni_skel::cidr::{Cidr, canonical, family_bits, from_u128, to_u128};

/// The next address, wrapping at the end of the family (as Go's `ip.NextIP`).
pub fn next_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a).wrapping_add(1))),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a).wrapping_add(1))),
    }
}

/// One range as written in a config, before canonicalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRange {
    /// `subnet`; `None` when missing.
    pub subnet: Option<Cidr>,
    /// `rangeStart`.
    pub range_start: Option<IpAddr>,
    /// `rangeEnd`.
    pub range_end: Option<IpAddr>,
    /// `gateway`.
    pub gateway: Option<IpAddr>,
    /// Where it came from, e.g. `ipam.ranges[1][0]`, for error details.
    pub origin: String,
}

/// A canonical range: every field filled in and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// The subnet (network address, no host bits).
    pub subnet: Cidr,
    /// First allocatable address, inclusive.
    pub range_start: IpAddr,
    /// Last allocatable address, inclusive.
    pub range_end: IpAddr,
    /// The gateway handed out with addresses of this range (never allocated).
    pub gateway: IpAddr,
    /// Where it came from, for error details.
    pub origin: String,
}

/// A range-validation error: the reference's message, and the key and value
/// that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeError {
    /// The message, worded as the reference words it.
    pub msg: String,
    /// `key: value` of the offending setting.
    pub details: String,
}

impl RangeError {
    fn new(msg: impl Into<String>, key: impl fmt::Display, value: impl fmt::Display) -> Self {
        RangeError {
            msg: msg.into(),
            details: format!("{key}: \"{value}\""),
        }
    }
}

/// Go's `Range.Contains` on a range whose fields may still be unset.
fn contains_partial(subnet: &Cidr, start: Option<IpAddr>, end: Option<IpAddr>, ip: IpAddr) -> bool {
    let ip = canonical(ip);
    if ip.is_ipv4() != subnet.addr.is_ipv4() || !subnet.contains(ip) {
        return false;
    }
    let n = to_u128(ip);
    // Go's ip.Cmp compares the numeric values, whatever the families.
    if start.is_some_and(|s| n < to_u128(canonical(s))) {
        return false;
    }
    if end.is_some_and(|e| n > to_u128(canonical(e))) {
        return false;
    }
    true
}

impl RawRange {
    /// The reference's `Range.Canonicalize`: defaults and validation, with
    /// the same checks in the same order and the same messages.
    pub fn canonicalize(&self) -> Result<Range, RangeError> {
        let key = |k: &str| format!("{}.{k}", self.origin);
        let Some(subnet) = self.subnet else {
            return Err(RangeError {
                msg: "IP <nil> not v4 nor v6".into(),
                details: format!("{}: missing", key("subnet")),
            });
        };
        let bits = subnet.mask_bits;
        if subnet.prefix > bits - 2 {
            return Err(RangeError::new(
                format!("Network {subnet} too small to allocate from"),
                key("subnet"),
                subnet,
            ));
        }
        if family_bits(subnet.addr) != bits {
            return Err(RangeError::new(
                "IPNet IP and Mask version mismatch",
                key("subnet"),
                subnet,
            ));
        }
        let network = subnet.network();
        if network != subnet.addr {
            return Err(RangeError::new(
                format!(
                    "Network has host bits set. For a subnet mask of length {} the network address is {network}",
                    subnet.prefix
                ),
                key("subnet"),
                subnet,
            ));
        }
        let gateway = match self.gateway {
            None => next_ip(network),
            Some(g) => canonical(g),
        };
        let range_start = match self.range_start {
            Some(s) => {
                let s = canonical(s);
                if !contains_partial(&subnet, Some(s), self.range_end, s) {
                    return Err(RangeError::new(
                        format!("RangeStart {s} not in network {subnet}"),
                        key("rangeStart"),
                        s,
                    ));
                }
                s
            }
            None => next_ip(network),
        };
        let range_end = match self.range_end {
            Some(e) => {
                let e = canonical(e);
                if !contains_partial(&subnet, Some(range_start), Some(e), e) {
                    return Err(RangeError::new(
                        format!("RangeEnd {e} not in network {subnet}"),
                        key("rangeEnd"),
                        e,
                    ));
                }
                e
            }
            None => {
                let last = subnet.last();
                if last.is_ipv4() {
                    from_u128(to_u128(last) - 1, last)
                } else {
                    last
                }
            }
        };
        Ok(Range {
            subnet,
            range_start,
            range_end,
            gateway,
            origin: self.origin.clone(),
        })
    }
}

impl Range {
    /// True when `ip` is inside the subnet and between start and end.
    pub fn contains(&self, ip: IpAddr) -> bool {
        contains_partial(
            &self.subnet,
            Some(self.range_start),
            Some(self.range_end),
            ip,
        )
    }

    /// The reference's `Range.Overlaps`.
    pub fn overlaps(&self, other: &Range) -> bool {
        if self.range_start.is_ipv4() != other.range_start.is_ipv4() {
            return false;
        }
        self.contains(other.range_start)
            || self.contains(other.range_end)
            || other.contains(self.range_start)
            || other.contains(self.range_end)
    }

    /// How many addresses the iterator can hand out: the range minus its
    /// gateway when the gateway lies inside it.
    pub fn capacity(&self) -> u128 {
        let size = to_u128(self.range_end) - to_u128(self.range_start) + 1;
        if self.contains(self.gateway) {
            size - 1
        } else {
            size
        }
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.range_start, self.range_end)
    }
}

/// A canonical range set: the pools one address is taken from, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeSet {
    /// The pools, in the order they are tried.
    pub ranges: Vec<Range>,
    /// Where the set came from, e.g. `ipam.ranges[1]`.
    pub origin: String,
}

impl RangeSet {
    /// The reference's `RangeSet.Canonicalize`.
    pub fn canonicalize(raw: &[RawRange], origin: &str) -> Result<RangeSet, RangeError> {
        let mut ranges: Vec<Range> = Vec::with_capacity(raw.len());
        for r in raw {
            let c = r.canonicalize()?;
            if let Some(first) = ranges.first()
                && first.range_start.is_ipv4() != c.range_start.is_ipv4()
            {
                return Err(RangeError::new(
                    "mixed address families",
                    format!("{}.subnet", c.origin),
                    c.subnet,
                ));
            }
            ranges.push(c);
        }
        if ranges.is_empty() {
            return Err(RangeError {
                msg: "empty range set".into(),
                details: format!("{origin}: []"),
            });
        }
        for (i, a) in ranges.iter().enumerate() {
            for b in ranges.iter().skip(i + 1) {
                if a.overlaps(b) {
                    return Err(RangeError {
                        msg: format!("subnets {a} and {b} overlap"),
                        details: format!(
                            "{}.subnet: \"{}\", {}.subnet: \"{}\"",
                            a.origin, a.subnet, b.origin, b.subnet
                        ),
                    });
                }
            }
        }
        Ok(RangeSet {
            ranges,
            origin: origin.to_string(),
        })
    }

    /// True for an IPv4 set.
    pub fn is_ipv4(&self) -> bool {
        self.ranges.first().is_some_and(|r| r.range_start.is_ipv4())
    }

    /// The range holding `ip`, if any.
    pub fn range_for(&self, ip: IpAddr) -> Option<&Range> {
        self.ranges.iter().find(|r| r.contains(ip))
    }

    /// True when some range of the set holds `ip`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.range_for(ip).is_some()
    }

    /// The reference's `RangeSet.Overlaps`.
    pub fn overlaps(&self, other: &RangeSet) -> bool {
        self.ranges
            .iter()
            .any(|a| other.ranges.iter().any(|b| a.overlaps(b)))
    }

    /// How many addresses the set can hand out in all.
    pub fn capacity(&self) -> u128 {
        self.ranges
            .iter()
            .map(Range::capacity)
            .fold(0u128, u128::saturating_add)
    }

    /// True when `ip` is the gateway of the range holding it (never handed out).
    pub fn is_gateway(&self, ip: IpAddr) -> bool {
        self.range_for(ip)
            .is_some_and(|r| r.gateway == canonical(ip))
    }
}

impl fmt::Display for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(subnet: &str) -> RawRange {
        RawRange {
            subnet: Some(Cidr::parse(subnet).unwrap()),
            range_start: None,
            range_end: None,
            gateway: None,
            origin: "ipam.ranges[0][0]".into(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_parsing_matches_go() {
        let c = Cidr::parse("10.1.2.5/24").unwrap();
        assert_eq!((c.addr, c.prefix, c.mask_bits), (ip("10.1.2.5"), 24, 32));
        assert_eq!(c.network(), ip("10.1.2.0"));
        assert_eq!(c.last(), ip("10.1.2.255"));
        assert_eq!(Cidr::parse("::ffff:10.0.0.0/104").unwrap().mask_bits, 128);
        for bad in [
            "10.0.0.0",
            "10.0.0.0/",
            "10.0.0.0/33",
            "10.0.0.0/-1",
            "x/8",
            "2001:db8::/129",
            "10.0.0.0/+8",
            "",
        ] {
            assert_eq!(
                Cidr::parse(bad).unwrap_err(),
                format!("invalid CIDR address: {bad}")
            );
        }
        assert_eq!(
            Cidr::parse("0.0.0.0/0").unwrap().last(),
            ip("255.255.255.255")
        );
        assert_eq!(
            Cidr::parse("::/0").unwrap().last(),
            ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
        );
    }

    #[test]
    fn defaults_v4_and_v6() {
        let r = raw("192.0.2.0/24").canonicalize().unwrap();
        assert_eq!(r.range_start, ip("192.0.2.1"));
        assert_eq!(r.range_end, ip("192.0.2.254"));
        assert_eq!(r.gateway, ip("192.0.2.1"));
        assert_eq!(r.to_string(), "192.0.2.1-192.0.2.254");
        assert_eq!(r.capacity(), 253);
        let r = raw("2001:db8:1::/64").canonicalize().unwrap();
        assert_eq!(r.range_start, ip("2001:db8:1::1"));
        assert_eq!(r.range_end, ip("2001:db8:1::ffff:ffff:ffff:ffff"));
        assert_eq!(r.gateway, ip("2001:db8:1::1"));
        let r = raw("10.0.0.0/30").canonicalize().unwrap();
        assert_eq!(
            (r.range_start, r.range_end),
            (ip("10.0.0.1"), ip("10.0.0.2"))
        );
        assert_eq!(r.capacity(), 1);
    }

    #[test]
    fn too_small_host_bits_and_bounds() {
        for (s, small) in [
            ("10.0.0.0/31", true),
            ("10.0.0.0/32", true),
            ("2001:db8::/127", true),
            ("2001:db8::/128", true),
            ("10.0.0.0/30", false),
            ("2001:db8::/126", false),
        ] {
            let e = raw(s).canonicalize();
            if small {
                let e = e.unwrap_err();
                assert_eq!(e.msg, format!("Network {s} too small to allocate from"));
                assert_eq!(e.details, format!("ipam.ranges[0][0].subnet: \"{s}\""));
            } else {
                e.unwrap();
            }
        }
        let e = raw("10.1.2.3/24").canonicalize().unwrap_err();
        assert_eq!(
            e.msg,
            "Network has host bits set. For a subnet mask of length 24 the network address is 10.1.2.0"
        );
        let e = raw("::ffff:10.0.0.0/104").canonicalize().unwrap_err();
        assert_eq!(e.msg, "IPNet IP and Mask version mismatch");

        let mut r = raw("10.1.2.0/24");
        r.range_start = Some(ip("10.1.3.1"));
        let e = r.canonicalize().unwrap_err();
        assert_eq!(e.msg, "RangeStart 10.1.3.1 not in network 10.1.2.0/24");
        assert_eq!(e.details, "ipam.ranges[0][0].rangeStart: \"10.1.3.1\"");
        let mut r = raw("10.1.2.0/24");
        r.range_end = Some(ip("10.1.3.1"));
        assert_eq!(
            r.canonicalize().unwrap_err().msg,
            "RangeEnd 10.1.3.1 not in network 10.1.2.0/24"
        );
        // start after end: the reference blames the start.
        let mut r = raw("10.1.2.0/24");
        r.range_start = Some(ip("10.1.2.100"));
        r.range_end = Some(ip("10.1.2.50"));
        assert_eq!(
            r.canonicalize().unwrap_err().msg,
            "RangeStart 10.1.2.100 not in network 10.1.2.0/24"
        );
        // wrong family
        let mut r = raw("10.1.2.0/24");
        r.range_start = Some(ip("2001:db8::1"));
        assert!(
            r.canonicalize()
                .unwrap_err()
                .msg
                .starts_with("RangeStart 2001:db8::1 not in network")
        );
        // v4-mapped start is v4
        let mut r = raw("10.1.2.0/24");
        r.range_start = Some(ip("::ffff:10.1.2.9"));
        assert_eq!(r.canonicalize().unwrap().range_start, ip("10.1.2.9"));
        // missing subnet
        let mut r = raw("10.1.2.0/24");
        r.subnet = None;
        assert_eq!(r.canonicalize().unwrap_err().msg, "IP <nil> not v4 nor v6");
    }

    #[test]
    fn explicit_fields_are_kept() {
        let mut r = raw("10.1.2.0/24");
        r.range_start = Some(ip("10.1.2.10"));
        r.range_end = Some(ip("10.1.2.20"));
        r.gateway = Some(ip("10.1.2.254"));
        let c = r.canonicalize().unwrap();
        assert_eq!(
            (c.range_start, c.range_end, c.gateway),
            (ip("10.1.2.10"), ip("10.1.2.20"), ip("10.1.2.254"))
        );
        assert!(
            c.contains(ip("10.1.2.10"))
                && c.contains(ip("10.1.2.20"))
                && !c.contains(ip("10.1.2.21"))
        );
        assert!(!c.contains(ip("10.1.2.9")) && !c.contains(ip("2001:db8::1")));
        assert_eq!(c.capacity(), 11);
    }

    #[test]
    fn sets_mixed_and_overlapping() {
        let e = RangeSet::canonicalize(
            &[raw("10.1.2.0/24"), raw("2001:db8::/64")],
            "ipam.ranges[0]",
        )
        .unwrap_err();
        assert_eq!(e.msg, "mixed address families");
        let e = RangeSet::canonicalize(&[raw("10.1.0.0/22"), raw("10.1.2.0/24")], "ipam.ranges[0]")
            .unwrap_err();
        assert_eq!(
            e.msg,
            "subnets 10.1.0.1-10.1.3.254 and 10.1.2.1-10.1.2.254 overlap"
        );
        let e = RangeSet::canonicalize(&[], "ipam.ranges[0]").unwrap_err();
        assert_eq!(
            (e.msg.as_str(), e.details.as_str()),
            ("empty range set", "ipam.ranges[0]: []")
        );
        let s = RangeSet::canonicalize(&[raw("10.1.2.0/24"), raw("10.1.4.0/24")], "ipam.ranges[0]")
            .unwrap();
        assert_eq!(s.to_string(), "10.1.2.1-10.1.2.254,10.1.4.1-10.1.4.254");
        assert!(s.is_ipv4());
        assert!(s.contains(ip("10.1.4.7")) && !s.contains(ip("10.1.3.7")));
        assert!(s.is_gateway(ip("10.1.4.1")) && !s.is_gateway(ip("10.1.4.2")));
        assert_eq!(s.capacity(), 506);
        let t = RangeSet::canonicalize(&[raw("10.1.4.0/24")], "ipam.ranges[1]").unwrap();
        assert!(s.overlaps(&t));
        let u = RangeSet::canonicalize(&[raw("2001:db8::/64")], "ipam.ranges[2]").unwrap();
        assert!(!s.overlaps(&u));
    }
}
