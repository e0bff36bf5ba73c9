//! Address allocation over range sets, independent of where reservations
//! are kept: round-robin from the last reserved address, as the reference's
//! `allocator.go`.

use crate::range::{Range, RangeSet, canonical, next_ip};
use cni_skel::{CniError, IpConfig};
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// What the allocator needs from a reservation store. Every call happens
/// with the store's lock held.
pub trait Store {
    /// Claims `ip` for `(id, ifname)`; `Ok(false)` when it is already taken.
    /// On success the store also remembers `ip` as set `set`'s last reserved
    /// address.
    fn reserve(&mut self, id: &str, ifname: &str, ip: IpAddr, set: usize)
    -> Result<bool, CniError>;
    /// The last address reserved in set `set`, if known.
    fn last_reserved_ip(&mut self, set: usize) -> Option<IpAddr>;
    /// The addresses held by `(id, ifname)`, or by `id` alone in files
    /// written before interface names were recorded.
    fn owned(&mut self, id: &str, ifname: &str) -> Result<Vec<IpAddr>, CniError>;
    /// Releases addresses this invocation reserved (undo of [`Store::reserve`]).
    fn unreserve(&mut self, ips: &[IpAddr]) -> Result<(), CniError>;
}

/// The reference's `RangeIter`: walks every address of a set once, starting
/// after `last` when the set holds it (else at the first pool's start),
/// moving to the next pool (and wrapping) at each pool's end, skipping each
/// pool's gateway.
pub struct RangeIter<'a> {
    set: &'a RangeSet,
    idx: usize,
    cur: Option<IpAddr>,
    start: Option<IpAddr>,
}

impl<'a> RangeIter<'a> {
    /// An iterator that resumes after `last`.
    pub fn new(set: &'a RangeSet, last: Option<IpAddr>) -> Self {
        let resume = last.map(canonical).and_then(|l| {
            set.ranges
                .iter()
                .position(|r| r.contains(l))
                .map(|idx| (idx, l))
        });
        match resume {
            Some((idx, l)) => RangeIter {
                set,
                idx,
                cur: Some(l),
                start: None,
            },
            None => RangeIter {
                set,
                idx: 0,
                cur: None,
                start: set.ranges.first().map(|r| r.range_start),
            },
        }
    }
}

impl<'a> Iterator for RangeIter<'a> {
    type Item = (IpAddr, &'a Range);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let mut r = self.set.ranges.get(self.idx)?;
            match self.cur {
                None => {
                    self.cur = Some(r.range_start);
                    self.start = self.cur;
                    if r.range_start == r.gateway {
                        continue;
                    }
                    return Some((r.range_start, r));
                }
                Some(c) => {
                    let next = if c == r.range_end {
                        self.idx = (self.idx + 1) % self.set.ranges.len();
                        r = self.set.ranges.get(self.idx)?;
                        r.range_start
                    } else {
                        next_ip(c)
                    };
                    self.cur = Some(next);
                    match self.start {
                        None => self.start = Some(next),
                        Some(s) if s == next => return None,
                        Some(_) => {}
                    }
                    if next == r.gateway {
                        continue;
                    }
                    return Some((next, r));
                }
            }
        }
    }
}

fn ip_config(ip: IpAddr, r: &Range) -> Result<IpConfig, CniError> {
    let address = IpNetwork::new(ip, r.subnet.prefix)
        .map_err(|e| CniError::internal(format!("bad address {ip}/{}: {e}", r.subnet.prefix)))?;
    Ok(IpConfig {
        interface: None,
        address,
        gateway: Some(r.gateway),
    })
}

/// Allocates one address of set `idx` for `(id, ifname)`: `requested` if
/// given, else the next free one. Errors are worded as the reference's.
///
/// Unlike the reference, the duplicate check (the interface already holds
/// an address of this set) also applies to requested addresses: a second
/// ADD for the same attachment is an error either way.
pub fn get(
    set: &RangeSet,
    idx: usize,
    store: &mut dyn Store,
    id: &str,
    ifname: &str,
    requested: Option<IpAddr>,
) -> Result<IpConfig, CniError> {
    for ip in store.owned(id, ifname)? {
        if set.contains(ip) {
            return Err(CniError::internal(format!(
                "{ip} has been allocated to {id}, duplicate allocation is not allowed"
            )));
        }
    }
    if let Some(ip) = requested {
        let ip = canonical(ip);
        let r = set
            .range_for(ip)
            .ok_or_else(|| CniError::internal(format!("{ip} not in range set {set}")))?;
        if ip == r.gateway {
            return Err(CniError::internal(format!(
                "requested ip {ip} is subnet's gateway"
            )));
        }
        if !store.reserve(id, ifname, ip, idx)? {
            return Err(CniError::internal(format!(
                "requested IP address {ip} is not available in range set {set}"
            )));
        }
        return ip_config(ip, r);
    }
    let last = store.last_reserved_ip(idx);
    for (ip, r) in RangeIter::new(set, last) {
        if store.reserve(id, ifname, ip, idx)? {
            return ip_config(ip, r);
        }
    }
    Err(CniError::internal(format!(
        "no IP addresses available in range set: {set}"
    )))
}

/// Allocates one address per set, using each requested address in the
/// first set that holds it. Any failure releases what this call reserved.
pub fn allocate(
    sets: &[RangeSet],
    store: &mut dyn Store,
    id: &str,
    ifname: &str,
    requested: &[IpAddr],
) -> Result<Vec<IpConfig>, CniError> {
    let mut wanted: Vec<IpAddr> = Vec::new();
    for ip in requested.iter().copied().map(canonical) {
        if !wanted.contains(&ip) {
            wanted.push(ip);
        }
    }
    let mut got: Vec<IpConfig> = Vec::with_capacity(sets.len());
    let undo = |store: &mut dyn Store, got: &[IpConfig]| {
        let ips: Vec<IpAddr> = got.iter().map(|c| c.address.ip()).collect();
        if let Err(e) = store.unreserve(&ips) {
            log::warn!("releasing {ips:?} after a failed ADD: {e}");
        }
    };
    for (idx, set) in sets.iter().enumerate() {
        let req = wanted
            .iter()
            .position(|ip| set.contains(*ip))
            .map(|p| wanted.remove(p));
        match get(set, idx, store, id, ifname, req) {
            Ok(c) => got.push(c),
            Err(e) => {
                undo(store, &got);
                return Err(e.context(format!("failed to allocate for range {idx}")));
            }
        }
    }
    if !wanted.is_empty() {
        undo(store, &got);
        let list: Vec<String> = wanted.iter().map(IpAddr::to_string).collect();
        return Err(CniError::internal(format!(
            "failed to allocate all requested IPs: {}",
            list.join(" ")
        )));
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range::{Cidr, RawRange};
    use std::collections::HashMap;

    /// An in-memory store.
    #[derive(Default)]
    struct Fake {
        taken: HashMap<IpAddr, String>,
        last: HashMap<usize, IpAddr>,
    }

    impl Store for Fake {
        fn reserve(
            &mut self,
            id: &str,
            ifname: &str,
            ip: IpAddr,
            set: usize,
        ) -> Result<bool, CniError> {
            if self.taken.contains_key(&ip) {
                return Ok(false);
            }
            self.taken.insert(ip, format!("{id}\r\n{ifname}"));
            self.last.insert(set, ip);
            Ok(true)
        }
        fn last_reserved_ip(&mut self, set: usize) -> Option<IpAddr> {
            self.last.get(&set).copied()
        }
        fn owned(&mut self, id: &str, ifname: &str) -> Result<Vec<IpAddr>, CniError> {
            let key = format!("{id}\r\n{ifname}");
            Ok(self
                .taken
                .iter()
                .filter(|(_, v)| **v == key || *v == id)
                .map(|(k, _)| *k)
                .collect())
        }
        fn unreserve(&mut self, ips: &[IpAddr]) -> Result<(), CniError> {
            for ip in ips {
                self.taken.remove(ip);
            }
            Ok(())
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn range(subnet: &str, start: Option<&str>, end: Option<&str>, gw: Option<&str>) -> RawRange {
        RawRange {
            subnet: Some(Cidr::parse(subnet).unwrap()),
            range_start: start.map(ip),
            range_end: end.map(ip),
            gateway: gw.map(ip),
            origin: "t".into(),
        }
    }

    fn set(ranges: &[RawRange]) -> RangeSet {
        RangeSet::canonicalize(ranges, "t").unwrap()
    }

    fn next(s: &RangeSet, store: &mut Fake, id: &str) -> Result<String, String> {
        get(s, 0, store, id, "eth0", None)
            .map(|c| c.address.to_string())
            .map_err(|e| e.msg)
    }

    #[test]
    fn fresh_24_starts_at_dot_2_and_skips_gateway() {
        let s = set(&[range("10.1.2.0/24", None, None, None)]);
        let mut st = Fake::default();
        let c = get(&s, 0, &mut st, "c1", "eth0", None).unwrap();
        assert_eq!(c.address.to_string(), "10.1.2.2/24");
        assert_eq!(c.gateway, Some(ip("10.1.2.1")));
        assert_eq!(next(&s, &mut st, "c2").unwrap(), "10.1.2.3/24");
        assert_eq!(st.last[&0], ip("10.1.2.3"));
    }

    #[test]
    fn start_middle_end_and_wrap() {
        let s = set(&[range("10.0.0.0/29", None, None, None)]); // .1 gw, .2-.6
        let mut st = Fake::default();
        // from the middle
        st.last.insert(0, ip("10.0.0.4"));
        assert_eq!(next(&s, &mut st, "a").unwrap(), "10.0.0.5/29");
        assert_eq!(next(&s, &mut st, "b").unwrap(), "10.0.0.6/29");
        // at the end: wraps to the start, skipping the gateway
        assert_eq!(next(&s, &mut st, "c").unwrap(), "10.0.0.2/29");
        assert_eq!(next(&s, &mut st, "d").unwrap(), "10.0.0.3/29");
        assert_eq!(next(&s, &mut st, "e").unwrap(), "10.0.0.4/29");
        assert_eq!(
            next(&s, &mut st, "f").unwrap_err(),
            "no IP addresses available in range set: 10.0.0.1-10.0.0.6"
        );
        // released address is found again, after last
        st.taken.remove(&ip("10.0.0.3"));
        assert_eq!(next(&s, &mut st, "g").unwrap(), "10.0.0.3/29");
    }

    #[test]
    fn last_reserved_outside_the_set_restarts() {
        let s = set(&[range(
            "10.0.0.0/24",
            Some("10.0.0.10"),
            Some("10.0.0.20"),
            None,
        )]);
        let mut st = Fake::default();
        st.last.insert(0, ip("10.0.0.50"));
        assert_eq!(next(&s, &mut st, "a").unwrap(), "10.0.0.10/24");
        st.last.insert(0, ip("10.0.0.20"));
        assert_eq!(next(&s, &mut st, "b").unwrap(), "10.0.0.11/24");
    }

    #[test]
    fn gateway_is_skipped_mid_range_and_at_start() {
        let s = set(&[range(
            "10.0.0.0/24",
            Some("10.0.0.5"),
            Some("10.0.0.7"),
            Some("10.0.0.6"),
        )]);
        let mut st = Fake::default();
        assert_eq!(next(&s, &mut st, "a").unwrap(), "10.0.0.5/24");
        assert_eq!(next(&s, &mut st, "b").unwrap(), "10.0.0.7/24");
        assert!(next(&s, &mut st, "c").is_err());
        let s = set(&[range(
            "10.0.0.0/24",
            Some("10.0.0.5"),
            Some("10.0.0.7"),
            Some("10.0.0.5"),
        )]);
        let mut st = Fake::default();
        assert_eq!(next(&s, &mut st, "a").unwrap(), "10.0.0.6/24");
    }

    #[test]
    fn round_robin_across_pools() {
        let s = set(&[
            range("10.0.0.0/24", Some("10.0.0.10"), Some("10.0.0.11"), None),
            range("10.0.1.0/24", Some("10.0.1.10"), Some("10.0.1.11"), None),
        ]);
        let mut st = Fake::default();
        let got: Vec<String> = ["a", "b", "c", "d"]
            .iter()
            .map(|id| next(&s, &mut st, id).unwrap())
            .collect();
        assert_eq!(
            got,
            [
                "10.0.0.10/24",
                "10.0.0.11/24",
                "10.0.1.10/24",
                "10.0.1.11/24"
            ]
        );
        assert_eq!(
            next(&s, &mut st, "e").unwrap_err(),
            "no IP addresses available in range set: 10.0.0.10-10.0.0.11,10.0.1.10-10.0.1.11"
        );
        // last at the end of the last pool wraps to the first pool
        st.taken.remove(&ip("10.0.0.10"));
        st.taken.remove(&ip("10.0.1.10"));
        assert_eq!(st.last[&0], ip("10.0.1.11"));
        assert_eq!(next(&s, &mut st, "f").unwrap(), "10.0.0.10/24");
        assert_eq!(next(&s, &mut st, "g").unwrap(), "10.0.1.10/24");
    }

    #[test]
    fn iterator_visits_every_address_once() {
        let s = set(&[
            range("10.0.0.0/29", None, None, None),
            range("10.0.1.0/30", None, None, None),
        ]);
        for last in [
            None,
            Some(ip("10.0.0.4")),
            Some(ip("10.0.1.2")),
            Some(ip("10.0.0.1")),
        ] {
            let mut seen: Vec<IpAddr> = RangeIter::new(&s, last).map(|(ip, _)| ip).collect();
            assert_eq!(seen.len(), 6, "{last:?}: {seen:?}");
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), 6);
            assert!(!seen.contains(&ip("10.0.0.1")) && !seen.contains(&ip("10.0.1.1")));
        }
        let v6 = set(&[range("2001:db8::/126", None, None, None)]);
        let all: Vec<String> = RangeIter::new(&v6, None)
            .map(|(ip, _)| ip.to_string())
            .collect();
        assert_eq!(all, ["2001:db8::2", "2001:db8::3"]);
    }

    #[test]
    fn requested_addresses() {
        let s = set(&[range(
            "10.1.2.0/24",
            Some("10.1.2.10"),
            Some("10.1.2.20"),
            None,
        )]);
        let mut st = Fake::default();
        let c = get(&s, 0, &mut st, "a", "eth0", Some(ip("10.1.2.15"))).unwrap();
        assert_eq!(c.address.to_string(), "10.1.2.15/24");
        assert_eq!(st.last[&0], ip("10.1.2.15"));
        let e = get(&s, 0, &mut st, "b", "eth0", Some(ip("10.1.2.15"))).unwrap_err();
        assert_eq!(
            e.msg,
            "requested IP address 10.1.2.15 is not available in range set 10.1.2.10-10.1.2.20"
        );
        let e = get(&s, 0, &mut st, "b", "eth0", Some(ip("10.1.2.21"))).unwrap_err();
        assert_eq!(e.msg, "10.1.2.21 not in range set 10.1.2.10-10.1.2.20");
        let g = set(&[range("10.1.2.0/24", None, None, None)]);
        let e = get(&g, 0, &mut st, "b", "eth0", Some(ip("10.1.2.1"))).unwrap_err();
        assert_eq!(e.msg, "requested ip 10.1.2.1 is subnet's gateway");
    }

    #[test]
    fn duplicates_are_refused() {
        let s = set(&[range("10.1.2.0/24", None, None, None)]);
        let mut st = Fake::default();
        next(&s, &mut st, "a").unwrap();
        assert_eq!(
            next(&s, &mut st, "a").unwrap_err(),
            "10.1.2.2 has been allocated to a, duplicate allocation is not allowed"
        );
        // another interface of the same container is fine
        assert!(get(&s, 0, &mut st, "a", "eth1", None).is_ok());
        // a legacy file holding only the id counts
        st.taken.insert(ip("10.1.2.100"), "old".into());
        assert!(
            next(&s, &mut st, "old")
                .unwrap_err()
                .contains("duplicate allocation")
        );
        // an address of another set does not count
        let other = set(&[range("10.9.0.0/24", None, None, None)]);
        assert!(get(&other, 1, &mut st, "a", "eth0", None).is_ok());
    }

    #[test]
    fn allocate_many_sets_and_requests() {
        let sets = vec![
            set(&[range("10.1.2.0/24", None, None, None)]),
            set(&[range("2001:db8:1::/64", None, None, None)]),
            set(&[
                range("10.2.0.0/24", None, None, None),
                range("10.3.0.0/24", None, None, None),
            ]),
        ];
        let mut st = Fake::default();
        let got = allocate(
            &sets,
            &mut st,
            "a",
            "eth0",
            &[ip("10.3.0.9"), ip("::ffff:10.3.0.9")],
        )
        .unwrap();
        let got: Vec<String> = got.iter().map(|c| c.address.to_string()).collect();
        assert_eq!(got, ["10.1.2.2/24", "2001:db8:1::2/64", "10.3.0.9/24"]);
        assert_eq!(st.last[&2], ip("10.3.0.9"));

        // a request no set holds: everything reserved is released
        let before = st.taken.len();
        let e = allocate(&sets, &mut st, "b", "eth0", &[ip("192.168.0.1")]).unwrap_err();
        assert_eq!(e.msg, "failed to allocate all requested IPs: 192.168.0.1");
        assert_eq!(st.taken.len(), before);

        // two requests for one set: the second is left over
        let e = allocate(
            &sets,
            &mut st,
            "c",
            "eth0",
            &[ip("10.1.2.50"), ip("10.1.2.51")],
        )
        .unwrap_err();
        assert_eq!(e.msg, "failed to allocate all requested IPs: 10.1.2.51");
        assert_eq!(st.taken.len(), before);

        // failure in a later set releases the earlier ones
        let e = allocate(&sets, &mut st, "d", "eth0", &[ip("10.3.0.9")]).unwrap_err();
        assert_eq!(
            e.msg,
            "failed to allocate for range 2: requested IP address 10.3.0.9 is not available in range set 10.2.0.1-10.2.0.254,10.3.0.1-10.3.0.254"
        );
        assert_eq!(st.taken.len(), before);
    }
}
