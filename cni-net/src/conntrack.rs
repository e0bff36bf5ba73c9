//! Connection tracking entries over ctnetlink (`NETLINK_NETFILTER`), in the
//! calling thread's network namespace: the `conntrack -D -p udp
//! --orig-port-dst N` that portmap needs, without the conntrack tool.
//!
//! The table of one family is dumped once; every entry whose original tuple
//! matches is then deleted by its tuple, zone and ID (so an entry created
//! again in between is left alone).

use crate::IpFamily;
use crate::error::NetError;
use crate::nl::nfnl::{Conn, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, attrs, find_attr};

/// IANA protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IANA protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IANA protocol number of SCTP.
pub const PROTO_SCTP: u8 = 132;

const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_GET: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_ID: u16 = 12;
const CTA_ZONE: u16 = 18;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_DST_PORT: u16 = 3;

fn nfgenmsg(family: Option<IpFamily>) -> [u8; 4] {
    let af = match family {
        None => 0,
        Some(IpFamily::V4) => 2,
        Some(IpFamily::V6) => 10,
    };
    // family, version NFNETLINK_V0, res_id 0
    [af, 0, 0, 0]
}

/// The attributes that identify one entry for a delete request.
fn identity(entry: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (kind, _, whole) in attrs(entry) {
        if matches!(kind, CTA_TUPLE_ORIG | CTA_ID | CTA_ZONE) {
            out.extend_from_slice(whole);
            out.resize((out.len() + 3) & !3, 0);
        }
    }
    out
}

/// (protocol, original destination port) of an entry's attributes.
fn orig_proto_port(entry: &[u8]) -> Option<(u8, u16)> {
    let tuple = find_attr(entry, CTA_TUPLE_ORIG)?;
    let proto = find_attr(tuple, CTA_TUPLE_PROTO)?;
    let num = *find_attr(proto, CTA_PROTO_NUM)?.first()?;
    let port = find_attr(proto, CTA_PROTO_DST_PORT)
        .and_then(|p| p.get(0..2))
        .map(|p| u16::from_be_bytes([p[0], p[1]]))?;
    Some((num, port))
}

/// The number of entries in this namespace's table, when the kernel says.
fn count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/net/netfilter/nf_conntrack_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Deletes every entry of `family` (`None`: both) and `protocol` whose
/// original destination port is one of `ports`. Returns how many were
/// deleted. Entries that vanish before their delete are not an error.
///
/// A dump walks the kernel's whole conntrack hash (shared by all
/// namespaces), so both families are done in one dump, and none is made
/// when this namespace's table is empty.
pub fn delete_by_orig_dst_port(
    family: Option<IpFamily>,
    protocol: u8,
    ports: &[u16],
) -> Result<usize, NetError> {
    if ports.is_empty() || count() == Some(0) {
        return Ok(0);
    }
    let mut conn = Conn::open(netlink_sys::protocols::NETLINK_NETFILTER, "conntrack")?;
    let dump_header = nfgenmsg(family);
    let dump = crate::nl::nfnl::Request::new(
        (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET,
        NLM_F_REQUEST | NLM_F_DUMP,
        &dump_header,
    );
    // (the entry's own family header, its identity)
    let mut doomed: Vec<([u8; 4], Vec<u8>)> = Vec::new();
    conn.request(dump, "dump conntrack table", |_, payload| {
        let (Some(header), Some(entry)) = (payload.get(0..4), payload.get(4..)) else {
            return;
        };
        if let Some((p, port)) = orig_proto_port(entry)
            && p == protocol
            && ports.contains(&port)
        {
            doomed.push(([header[0], 0, 0, 0], identity(entry)));
        }
    })?;
    let mut deleted = 0;
    for (header, id) in doomed {
        let mut req = crate::nl::nfnl::Request::new(
            (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE,
            NLM_F_REQUEST | NLM_F_ACK,
            &header,
        );
        req.raw(&id);
        match conn.request(req, "delete conntrack entry", |_, _| {}) {
            Ok(()) => deleted += 1,
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&u16::try_from(4 + data.len()).unwrap().to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(data);
        v.resize((v.len() + 3) & !3, 0);
        v
    }

    #[test]
    fn reads_protocol_and_port_and_keeps_identity() {
        let mut proto = attr(CTA_PROTO_NUM, &[17]);
        proto.extend(attr(CTA_PROTO_DST_PORT, &8080u16.to_be_bytes()));
        let mut tuple = attr(1, &[0; 12]);
        tuple.extend(attr(CTA_TUPLE_PROTO | 0x8000, &proto));
        let mut entry = attr(CTA_TUPLE_ORIG | 0x8000, &tuple);
        entry.extend(attr(3, &[0, 0, 0, 1])); // CTA_STATUS: not copied
        entry.extend(attr(CTA_ID, &[0, 0, 0, 7]));
        assert_eq!(orig_proto_port(&entry), Some((17, 8080)));
        let id = identity(&entry);
        let kinds: Vec<u16> = attrs(&id).map(|(k, _, _)| k).collect();
        assert_eq!(kinds, vec![CTA_TUPLE_ORIG, CTA_ID]);
    }

    #[test]
    fn deletes_in_a_fresh_namespace() {
        if !crate::testutil::is_root() {
            return;
        }
        let ns = crate::NetNs::new_anonymous().unwrap();
        let n = ns
            .run(|| delete_by_orig_dst_port(Some(IpFamily::V4), PROTO_UDP, &[9]))
            .unwrap()
            .unwrap();
        assert_eq!(n, 0);
    }
}
