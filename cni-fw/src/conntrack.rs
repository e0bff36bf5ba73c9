//! Connection tracking entries over ctnetlink (`NETLINK_NETFILTER`), in the
//! calling thread's network namespace: the `conntrack -D -p udp
//! --orig-port-dst N` that portmap needs, without the conntrack tool.
//!
//! The table of one family is dumped once; every entry whose original tuple
//! matches is then deleted by its tuple, zone and ID (so an entry created
//! again in between is left alone).

use crate::nfm::Nfm;
use cni_net::IpFamily;
use cni_net::NetError;
use cni_net::NfSocket;
use netlink_packet_core::{DefaultNla, NLM_F_ACK, NLM_F_DUMP, NlasIterator, Parseable};
use netlink_packet_netfilter::NetfilterProtoFamily;
use netlink_packet_netfilter::conntrack::{
    ConntrackAttribute, ConntrackMessage, ProtoTuple, Tuple,
};

/// IANA protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IANA protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IANA protocol number of SCTP.
pub const PROTO_SCTP: u8 = 132;

// Entry attributes (`include/uapi/linux/netfilter/nfnetlink_conntrack.h`);
// netlink-packet-netfilter keeps its copies private.
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_ID: u16 = 12;
const CTA_ZONE: u16 = 18;

fn nfproto(family: Option<IpFamily>) -> NetfilterProtoFamily {
    match family {
        None => NetfilterProtoFamily::Unspec,
        Some(IpFamily::V4) => NetfilterProtoFamily::IPv4,
        Some(IpFamily::V6) => NetfilterProtoFamily::IPv6,
    }
}

/// One entry of the dump, as far as a delete by port needs it.
#[derive(Debug, Default)]
struct Entry {
    /// Protocol number and destination port of the original direction.
    proto_port: Option<(u8, u16)>,
    /// What identifies the entry to a delete request: the original tuple
    /// (typed), its ID and zone (passed back as `DefaultNla`: the crate has
    /// no typed CTA_ID or CTA_ZONE).
    identity: Vec<ConntrackAttribute>,
}

/// Reads the entry's attributes that [`Entry`] needs, and only those
/// (status, counters, timeouts, the reply tuple … are skipped unparsed).
fn read_entry(attributes: &[u8]) -> Entry {
    let mut entry = Entry::default();
    for nla in NlasIterator::new(attributes) {
        let Ok(nla) = nla else {
            break;
        };
        let attribute = match nla.kind() {
            CTA_TUPLE_ORIG => ConntrackAttribute::parse(&nla).ok(),
            CTA_ID | CTA_ZONE => DefaultNla::parse(&nla).ok().map(ConntrackAttribute::Other),
            _ => None,
        };
        if let Some(attribute) = attribute {
            if let ConntrackAttribute::CtaTupleOrig(tuple) = &attribute {
                entry.proto_port = proto_port(tuple);
            }
            entry.identity.push(attribute);
        }
    }
    entry
}

/// (protocol, destination port) of a tuple.
fn proto_port(tuple: &[Tuple]) -> Option<(u8, u16)> {
    let proto = tuple.iter().find_map(|t| match t {
        Tuple::Proto(p) => Some(p),
        _ => None,
    })?;
    let num = proto.iter().find_map(|p| match p {
        ProtoTuple::Protocol(n) => Some(u8::from(*n)),
        _ => None,
    })?;
    let port = proto.iter().find_map(|p| match p {
        ProtoTuple::DestinationPort(port) => Some(*port),
        _ => None,
    })?;
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
    let mut socket = NfSocket::open("conntrack")?;
    delete_with(&mut socket, family, protocol, ports)
}

/// [`delete_by_orig_dst_port`] on a socket that sends nothing and reads
/// `answers` as the kernel's datagrams (see `Netlink::replay`): for the
/// fuzz targets.
#[doc(hidden)]
pub fn replay_delete_by_orig_dst_port(
    answers: Vec<Vec<u8>>,
    family: Option<IpFamily>,
    protocol: u8,
    ports: &[u16],
) -> Result<usize, NetError> {
    delete_with(
        &mut NfSocket::replay("conntrack", answers),
        family,
        protocol,
        ports,
    )
}

/// The dump and the deletes of [`delete_by_orig_dst_port`] on `socket`.
fn delete_with(
    socket: &mut NfSocket,
    family: Option<IpFamily>,
    protocol: u8,
    ports: &[u16],
) -> Result<usize, NetError> {
    let dump = Nfm::conntrack(nfproto(family), ConntrackMessage::Get(Vec::new()));
    // (the entry's own family, its identity)
    let mut doomed: Vec<(NetfilterProtoFamily, Vec<ConntrackAttribute>)> = Vec::new();
    socket.request(&dump, NLM_F_DUMP, "dump conntrack table", |_, payload| {
        let (Some(&af), Some(attributes)) = (payload.first(), payload.get(4..)) else {
            return Ok(());
        };
        let entry = read_entry(attributes);
        if let Some((p, port)) = entry.proto_port
            && p == protocol
            && ports.contains(&port)
        {
            doomed.push((af.into(), entry.identity));
        }
        Ok(())
    })?;
    let mut deleted = 0;
    for (af, id) in doomed {
        let delete = Nfm::conntrack(af, ConntrackMessage::Delete(id));
        match socket.request(&delete, NLM_F_ACK, "delete conntrack entry", |_, _| Ok(())) {
            Ok(_) => deleted += 1,
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

    const CTA_TUPLE_PROTO: u16 = 2;
    const CTA_PROTO_NUM: u16 = 1;
    const CTA_PROTO_DST_PORT: u16 = 3;

    #[test]
    fn reads_protocol_and_port_and_keeps_identity() {
        use netlink_packet_core::Nla;
        let mut proto = attr(CTA_PROTO_NUM, &[17]);
        proto.extend(attr(CTA_PROTO_DST_PORT, &8080u16.to_be_bytes()));
        let mut tuple = attr(1 | 0x8000, &attr(1, &[10, 139, 0, 2]));
        tuple.extend(attr(CTA_TUPLE_PROTO | 0x8000, &proto));
        let mut entry = attr(CTA_TUPLE_ORIG | 0x8000, &tuple);
        entry.extend(attr(3, &[0, 0, 0, 1])); // CTA_STATUS: not copied
        entry.extend(attr(CTA_ID, &[0, 0, 0, 7]));
        let got = read_entry(&entry);
        assert_eq!(got.proto_port, Some((17, 8080)));
        let kinds: Vec<u16> = got.identity.iter().map(|a| a.kind()).collect();
        assert_eq!(kinds, vec![CTA_TUPLE_ORIG, CTA_ID]);
        // Malformed or cut short: no port, no panic.
        assert_eq!(read_entry(&entry[..7]).proto_port, None);
        assert_eq!(
            read_entry(&attr(CTA_TUPLE_ORIG, &[1, 2, 3])).proto_port,
            None
        );
    }

    /// The crate-typed requests are, byte for byte, the ones this module
    /// hand-built before.
    #[test]
    fn requests_are_the_hand_built_bytes() {
        use cni_net::nfnl::Request;
        use netlink_packet_core::NLM_F_REQUEST;
        let mut proto = attr(CTA_PROTO_NUM, &[6]);
        proto.extend(attr(CTA_PROTO_DST_PORT, &443u16.to_be_bytes()));
        let tuple = attr(CTA_TUPLE_PROTO | 0x8000, &proto);
        let mut entry = attr(CTA_TUPLE_ORIG | 0x8000, &tuple);
        entry.extend(attr(CTA_ID, &[0, 0, 0, 7]));
        entry.extend(attr(CTA_ZONE, &[0, 1]));

        let mut socket = NfSocket::capture("conntrack");
        let dump = Nfm::conntrack(nfproto(None), ConntrackMessage::Get(Vec::new()));
        socket
            .request(&dump, NLM_F_DUMP, "dump", |_, _| Ok(()))
            .unwrap();
        let delete = ConntrackMessage::Delete(read_entry(&entry).identity);
        let delete = Nfm::conntrack(nfproto(Some(IpFamily::V6)), delete);
        socket
            .request(&delete, NLM_F_ACK, "delete", |_, _| Ok(()))
            .unwrap();

        let want_dump = Request::new(0x0101, NLM_F_REQUEST | NLM_F_DUMP, &[0, 0, 0, 0]);
        let mut want_delete = Request::new(0x0102, NLM_F_REQUEST | NLM_F_ACK, &[10, 0, 0, 0]);
        want_delete.raw(&entry);
        let want = vec![want_dump.finish(1).unwrap(), want_delete.finish(2).unwrap()];
        assert_eq!(socket.captured(), want);
    }

    #[test]
    fn deletes_in_a_fresh_namespace() {
        if !rcni_tests::is_root() {
            return;
        }
        let ns = cni_net::NetNs::new_anonymous().unwrap();
        let n = ns
            .run(|| delete_by_orig_dst_port(Some(IpFamily::V4), PROTO_UDP, &[9]))
            .unwrap()
            .unwrap();
        assert_eq!(n, 0);
    }
}
