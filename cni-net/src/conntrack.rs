//! Connection tracking entries over ctnetlink (`NETLINK_NETFILTER`), in the
//! calling thread's network namespace: the `conntrack -D -p udp
//! --orig-port-dst N` that portmap needs, without the conntrack tool.
//!
//! The table of one family is dumped once; every entry whose original tuple
//! matches is then deleted by its tuple, zone and ID (so an entry created
//! again in between is left alone).

use crate::IpFamily;
use crate::error::NetError;
use crate::nl::Socket;
use crate::nl::nfm::{Nfm, SUBSYS_CTNETLINK};
use netlink_packet_core::Nla;
use netlink_packet_netfilter::conntrack::{
    ConntrackAttribute, ConntrackMessage, ProtoTuple, Tuple,
};

/// IANA protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IANA protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IANA protocol number of SCTP.
pub const PROTO_SCTP: u8 = 132;

const IPCTNL_MSG_CT_GET: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;
/// `CTA_ID` and `CTA_ZONE`: netlink-packet-netfilter 0.4 has no variants
/// for them; they come as `ConntrackAttribute::Other` and are passed back
/// unchanged in the delete request.
const CTA_ID: u16 = 12;
const CTA_ZONE: u16 = 18;

fn nfproto(family: Option<IpFamily>) -> u8 {
    match family {
        None => 0,
        Some(IpFamily::V4) => 2,
        Some(IpFamily::V6) => 10,
    }
}

/// The attributes that identify one entry for a delete request: its
/// original tuple, ID and zone.
fn identity(entry: Vec<ConntrackAttribute>) -> Vec<ConntrackAttribute> {
    entry
        .into_iter()
        .filter(|a| match a {
            ConntrackAttribute::CtaTupleOrig(_) => true,
            ConntrackAttribute::Other(o) => matches!(o.kind() & 0x3fff, CTA_ID | CTA_ZONE),
            _ => false,
        })
        .collect()
}

/// (protocol, original destination port) of an entry.
fn orig_proto_port(entry: &[ConntrackAttribute]) -> Option<(u8, u16)> {
    let tuple = entry.iter().find_map(|a| match a {
        ConntrackAttribute::CtaTupleOrig(t) => Some(t),
        _ => None,
    })?;
    let proto = tuple.iter().find_map(|t| match t {
        Tuple::Proto(p) => Some(p),
        _ => None,
    })?;
    let (mut num, mut port) = (None, None);
    for p in proto {
        match p {
            ProtoTuple::Protocol(n) => num = Some(u8::from(*n)),
            ProtoTuple::DestinationPort(d) => port = Some(*d),
            _ => {}
        }
    }
    Some((num?, port?))
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
    let mut sock = Socket::open(netlink_sys::protocols::NETLINK_NETFILTER, "conntrack")?;
    let get = (SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
    // (the entry's own family, its identity)
    let doomed = sock.dump(
        || Nfm(get, nfproto(family), ConntrackMessage::Get(Vec::new())),
        "dump conntrack table",
        |Nfm(_, af, entry)| {
            let ConntrackMessage::New(attrs) = entry else {
                return None;
            };
            let (p, port) = orig_proto_port(&attrs)?;
            (p == protocol && ports.contains(&port)).then(|| (af, identity(attrs)))
        },
    )?;
    let delete = (SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
    let mut deleted = 0;
    for (af, id) in doomed {
        let req = Nfm(delete, af, ConntrackMessage::Delete(id));
        match sock.ack(&req, 0, "delete conntrack entry") {
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

    #[test]
    fn reads_protocol_and_port_and_keeps_identity() {
        use netlink_packet_core::DefaultNla;
        use netlink_packet_netfilter::conntrack::{Protocol, Status};
        let tuple = vec![Tuple::Proto(vec![
            ProtoTuple::Protocol(Protocol::Udp),
            ProtoTuple::DestinationPort(8080),
        ])];
        let entry = vec![
            ConntrackAttribute::CtaTupleOrig(tuple.clone()),
            ConntrackAttribute::CtaStatus(Status::empty()),
            ConntrackAttribute::Other(DefaultNla::new(CTA_ID, vec![0, 0, 0, 7])),
        ];
        assert_eq!(orig_proto_port(&entry), Some((17, 8080)));
        let id = identity(entry);
        assert_eq!(
            id,
            vec![
                ConntrackAttribute::CtaTupleOrig(tuple),
                ConntrackAttribute::Other(DefaultNla::new(CTA_ID, vec![0, 0, 0, 7])),
            ]
        );
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
