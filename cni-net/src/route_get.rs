//! Which interface the kernel would use to reach an address (`ip route get`),
//! in the calling thread's network namespace.

use crate::error::NetError;
use crate::nlmsg::{Conn, NLM_F_ACK, NLM_F_REQUEST, find_attr};
use std::net::IpAddr;

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const IFLA_IFNAME: u16 = 3;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// The interface (index, name) that routes to `dst`, or `None` when there
/// is no route (or it has no output interface).
pub fn route_get_interface(dst: IpAddr) -> Result<Option<(u32, String)>, NetError> {
    let mut conn = Conn::open(netlink_sys::protocols::NETLINK_ROUTE, "route")?;
    let (family, bits, bytes) = match dst {
        IpAddr::V4(a) => (AF_INET, 32u8, a.octets().to_vec()),
        IpAddr::V6(a) => (AF_INET6, 128u8, a.octets().to_vec()),
    };
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
    let rtmsg = [family, bits, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut req = crate::nlmsg::Request::new(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_ACK, &rtmsg);
    req.attr(RTA_DST, &bytes);
    let op = format!("route get {dst}");
    let mut oif = None;
    let looked_up = conn.request(req, &op, |kind, payload| {
        if kind == RTM_NEWROUTE && oif.is_none() {
            oif = payload
                .get(12..)
                .and_then(|a| find_attr(a, RTA_OIF))
                .and_then(|v| v.get(0..4))
                .map(|v| u32::from_ne_bytes([v[0], v[1], v[2], v[3]]));
        }
    });
    match looked_up {
        Ok(()) => {}
        // No route at all (ENETUNREACH, EHOSTUNREACH ...) is an answer, not a failure.
        Err(e) if e.raw_errno().is_some() => {
            log::debug!("{e}");
            return Ok(None);
        }
        Err(e) => return Err(e),
    }
    let Some(index) = oif else {
        return Ok(None);
    };
    Ok(link_name(&mut conn, index)?.map(|name| (index, name)))
}

/// The name of the link with `index`, `None` when it does not exist.
fn link_name(conn: &mut Conn, index: u32) -> Result<Option<String>, NetError> {
    // struct ifinfomsg: family, pad, type, index, flags, change.
    let mut ifinfo = [0u8; 16];
    ifinfo[4..8].copy_from_slice(&index.to_ne_bytes());
    let req = crate::nlmsg::Request::new(RTM_GETLINK, NLM_F_REQUEST | NLM_F_ACK, &ifinfo);
    let mut name = None;
    let got = conn.request(req, &format!("get link {index}"), |kind, payload| {
        if kind == RTM_NEWLINK && name.is_none() {
            name = payload
                .get(16..)
                .and_then(|a| find_attr(a, IFLA_IFNAME))
                .map(|v| {
                    String::from_utf8_lossy(v.split(|b| *b == 0).next().unwrap_or_default())
                        .into_owned()
                });
        }
    });
    match got {
        Ok(()) => Ok(name),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
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
