//! Connection tracking entries over ctnetlink (`NETLINK_NETFILTER`), in the
//! calling thread's network namespace: the `conntrack -D -p udp
//! --orig-port-dst N` that portmap needs, without the conntrack tool.
//!
//! The table of one family is dumped once; every entry whose original tuple
//! matches is then deleted by its tuple, zone and ID (so an entry created
//! again in between is left alone).

use crate::IpFamily;
use crate::error::NetError;
use crate::nl::{NETLINK_NETFILTER, Socket, gaps};
use netlink_packet_netfilter::conntrack::{
    ConntrackAttribute, ConntrackMessage, ProtoTuple, Tuple,
};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
};

/// IANA protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IANA protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IANA protocol number of SCTP.
pub const PROTO_SCTP: u8 = 132;

/// `CTA_ID` and `CTA_ZONE`: untyped in netlink-packet-netfilter 0.4, passed
/// back unchanged through `ConntrackAttribute::Other` (see `nl::gaps`).
const CTA_ID: u16 = 12;
const CTA_ZONE: u16 = 18;

fn header(family: NetfilterProtoFamily) -> NetfilterHeader {
    NetfilterHeader::new(family, 0, 0)
}

/// The attributes that identify one entry for a delete request: its
/// original tuple, ID and zone (so an entry created again in between, with
/// a new ID, is left alone).
fn identity(entry: Vec<ConntrackAttribute>) -> Vec<ConntrackAttribute> {
    entry
        .into_iter()
        .filter(|a| match a {
            ConntrackAttribute::CtaTupleOrig(_) => true,
            ConntrackAttribute::Other(nla) => matches!(gaps::nla_kind(nla), CTA_ID | CTA_ZONE),
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
    let mut num = None;
    let mut port = None;
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
    let mut sock: Socket<NetfilterMessage> = Socket::open(NETLINK_NETFILTER, "conntrack")?;
    let family = match family {
        None => NetfilterProtoFamily::Unspec,
        Some(IpFamily::V4) => NetfilterProtoFamily::IPv4,
        Some(IpFamily::V6) => NetfilterProtoFamily::IPv6,
    };
    // (the entry's own family, its identity). Entries the crate cannot
    // decode are left alone rather than failing the whole cleanup.
    let doomed = sock.dump_decoded(
        || NetfilterMessage::new(header(family), ConntrackMessage::Get(Vec::new())),
        "dump conntrack table",
        |m| {
            let m = match m {
                Ok(m) => m,
                Err(e) => {
                    log::debug!("conntrack entry skipped: {e}");
                    return Ok(None);
                }
            };
            let NetfilterMessageInner::Conntrack(ConntrackMessage::New(entry)) = m.inner else {
                return Ok(None);
            };
            Ok(orig_proto_port(&entry)
                .filter(|(p, port)| *p == protocol && ports.contains(port))
                .map(|_| (m.header.family, identity(entry))))
        },
    )?;
    let mut deleted = 0;
    for (family, id) in doomed {
        let req = NetfilterMessage::new(header(family), ConntrackMessage::Delete(id));
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
        use netlink_packet_core::{NetlinkDeserializable, NetlinkHeader, NetlinkSerializable};
        // An entry as the kernel sends it (IPCTNL_MSG_CT_NEW, AF_INET).
        let mut ip = attr(1, &[10, 0, 0, 1]); // CTA_IP_V4_SRC
        ip.extend(attr(2, &[10, 0, 0, 2])); // CTA_IP_V4_DST
        let mut proto = attr(1, &[17]); // CTA_PROTO_NUM
        proto.extend(attr(2, &5353u16.to_be_bytes())); // CTA_PROTO_SRC_PORT
        proto.extend(attr(3, &8080u16.to_be_bytes())); // CTA_PROTO_DST_PORT
        let mut tuple = attr(1 | 0x8000, &ip);
        tuple.extend(attr(2 | 0x8000, &proto));
        let mut body = vec![2, 0, 0, 0];
        body.extend(attr(1 | 0x8000, &tuple)); // CTA_TUPLE_ORIG
        body.extend(attr(3, &[0, 0, 0, 1])); // CTA_STATUS: not copied
        body.extend(attr(CTA_ID, &[0, 0, 0, 7]));
        body.extend(attr(CTA_ZONE, &[0, 3]));
        let mut h = NetlinkHeader::default();
        h.message_type = 1 << 8; // NFNL_SUBSYS_CTNETLINK, IPCTNL_MSG_CT_NEW
        let m = NetfilterMessage::deserialize(&h, &body).unwrap();
        let NetfilterMessageInner::Conntrack(ConntrackMessage::New(entry)) = m.inner else {
            panic!("{m:?}");
        };
        assert_eq!(orig_proto_port(&entry), Some((17, 8080)));
        // The delete request carries the tuple, ID and zone as received.
        let del = NetfilterMessage::new(
            header(m.header.family),
            ConntrackMessage::Delete(identity(entry)),
        );
        assert_eq!(del.message_type(), (1 << 8) | 2);
        let mut out = vec![0u8; del.buffer_len()];
        del.serialize(&mut out);
        let mut want = vec![2, 0, 0, 0];
        want.extend(attr(1 | 0x8000, &tuple));
        want.extend(attr(CTA_ID, &[0, 0, 0, 7]));
        want.extend(attr(CTA_ZONE, &[0, 3]));
        assert_eq!(out, want);
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
