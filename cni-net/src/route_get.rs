//! Which interface the kernel would use to reach an address (`ip route get`),
//! in the calling thread's network namespace.

use crate::error::NetError;
use crate::rtnl::Netlink;
use std::net::IpAddr;

/// The interface (index, name) that routes to `dst`, or `None` when there
/// is no route (or it has no output interface).
pub fn route_get_interface(dst: IpAddr) -> Result<Option<(u32, String)>, NetError> {
    let nl = Netlink::host()?;
    let Some(index) = nl.route_to(dst)?.and_then(|r| r.oif) else {
        return Ok(None);
    };
    Ok(nl.link_by_index(index)?.map(|l| (index, l.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_routes_via_lo() {
        // Every namespace routes 127.0.0.1 through lo (local table), up or not.
        match route_get_interface("127.0.0.1".parse().unwrap()) {
            Ok(Some((_, name))) => assert_eq!(name, "lo"),
            Ok(None) => {}
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn own_namespace_when_root() {
        if !crate::testutil::is_root() {
            return;
        }
        let ns = crate::NetNs::new_anonymous().unwrap();
        let got = ns
            .run(|| route_get_interface("192.0.2.1".parse().unwrap()))
            .unwrap();
        // A fresh namespace has no route there.
        assert_eq!(got.unwrap(), None);
    }
}
