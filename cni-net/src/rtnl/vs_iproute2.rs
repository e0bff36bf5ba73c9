//! Our requests against iproute2's, for the operations the newer plugins
//! use: the link kinds of macvlan, ipvlan, vlan, dummy and bandwidth's ifb
//! (RTM_NEWLINK), bandwidth's qdiscs and filter (RTM_NEWQDISC,
//! RTM_NEWTFILTER) and sbr's rules (RTM_NEWRULE, RTM_DELRULE).
//!
//! Each case runs `ip`/`tc` under `strace -e write=all` in a throwaway
//! namespace, takes the request it sent from strace's hex dump, and makes
//! the same request through a capturing [`Netlink`]. Sequence number and
//! port id are zeroed on both sides. The request is taken whether or not
//! the kernel accepted it: a kind this kernel lacks (ipvlan, vlan on 6.18)
//! still shows what iproute2 sends. What the cases found (iproute2 6.1):
//! - byte for byte: the ingress qdisc; a rule whose table is above 255;
//! - the same once parsed by netlink-packet-route, differing only in
//!   - attribute order (link: iproute2 puts IFLA_IFNAME last and macvlan's
//!     broadcast queue length before its mode; u32: the action before the
//!     selector),
//!   - the NUL the crate writes after IFLA_INFO_KIND (iproute2 does not;
//!     the kernel takes both): every link kind,
//!   - a redundant FRA_TABLE for a table that fits the header's byte, and
//!     the action of a delete (ours FR_ACT_TO_TBL, theirs unspecified):
//!     rules, as the Go reference's netlink library sends them;
//! - tbf: the same header, kind and parameters from the rate on; tc also
//!   fills the rate's cell_log/linklayer/cell_align and sends TCA_TBF_BURST
//!   and a 1 KiB rate table, which describe its rate table only (the
//!   kernel takes the burst from the buffer); we send what Go does.

use super::*;
use crate::testutil::skip_unless_root;
use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;

/// `RTM_*` message types.
const RTM_NEWLINK: u16 = 16;
const RTM_NEWRULE: u16 = 32;
const RTM_DELRULE: u16 = 33;
const RTM_NEWQDISC: u16 = 36;
const RTM_NEWTFILTER: u16 = 44;

/// Whether strace is there; prints one SKIP line when it is not.
fn skip_without_strace(test: &str) -> bool {
    if std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return false;
    }
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("SKIP {test}: needs strace (scripts/test-deps installs it)\n").as_bytes(),
    );
    true
}

/// Every netlink message that `argv` (ip, tc) sent when run inside `ns`,
/// seq and port id zeroed. Its exit status does not matter.
fn iproute2_sends(ns: &NetNs, argv: &[&str]) -> Vec<Vec<u8>> {
    let trace = std::env::temp_dir().join(format!(
        "rcni-vs-iproute2-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let out = ns
        .run(|| {
            std::process::Command::new("strace")
                .args(["-qq", "-e", "trace=sendmsg,sendto", "-e", "write=all", "-o"])
                .arg(&trace)
                .args(argv)
                .output()
        })
        .unwrap()
        .unwrap();
    let text = std::fs::read_to_string(&trace).unwrap();
    let _ = std::fs::remove_file(&trace);
    assert!(
        text.contains(" | 00000 "),
        "no request seen from {argv:?}: {out:?}\n{text}"
    );
    let mut messages = Vec::new();
    for call in syscall_buffers(&text) {
        let mut rest = &call[..];
        while rest.len() >= 16 {
            let len = u32::from_ne_bytes(rest[..4].try_into().unwrap()) as usize;
            let len = len.clamp(16, rest.len());
            messages.push(zero_seq_and_pid(rest[..len].to_vec()));
            // Messages in one datagram start 4-byte aligned.
            rest = &rest[len.next_multiple_of(4).min(rest.len())..];
        }
    }
    messages
}

/// The bytes each traced syscall wrote: strace's hex dump lines
/// (` | 00000  34 00 00 00 10 00 05 06  15 d9 ...  4....... |`), one
/// buffer per syscall line.
fn syscall_buffers(text: &str) -> Vec<Vec<u8>> {
    let mut calls: Vec<Vec<u8>> = Vec::new();
    for line in text.lines() {
        if let Some(dump) = line.strip_prefix(" | ") {
            // "00000  " then 16 bytes in two groups of 8: 48 columns.
            let hex = dump.get(7..55).unwrap_or(dump.get(7..).unwrap_or(""));
            let bytes = hex
                .split_whitespace()
                .map(|b| u8::from_str_radix(b, 16).unwrap());
            calls.last_mut().unwrap().extend(bytes);
        } else if !line.starts_with(" * ") {
            calls.push(Vec::new());
        }
    }
    calls.retain(|c| !c.is_empty());
    calls
}

fn zero_seq_and_pid(mut m: Vec<u8>) -> Vec<u8> {
    m[8..16].fill(0);
    m
}

fn msg_type(m: &[u8]) -> u16 {
    u16::from_ne_bytes([m[4], m[5]])
}

/// The last message of `kind` among `messages`: `ip link` first sends an
/// empty RTM_NEWLINK to learn whether the kernel has it (iproute2's
/// `iplink_have_newlink`), then the request.
fn last(messages: &[Vec<u8>], kind: u16, whose: &str) -> Vec<u8> {
    messages
        .iter()
        .rfind(|m| msg_type(m) == kind)
        .unwrap_or_else(|| panic!("{whose}: no message of type {kind}: {messages:02x?}"))
        .clone()
}

/// What our `op` sends, of `kind`.
fn ours(kind: u16, op: impl FnOnce(&Netlink)) -> Vec<u8> {
    let nl = Netlink::capture();
    op(&nl);
    let sent: Vec<_> = nl.captured().into_iter().map(zero_seq_and_pid).collect();
    let of_kind = sent.iter().filter(|m| msg_type(m) == kind).count();
    assert_eq!(of_kind, 1, "ours: {sent:02x?}");
    last(&sent, kind, "ours")
}

fn parse(m: &[u8]) -> NetlinkMessage<RouteNetlinkMessage> {
    NetlinkMessage::<RouteNetlinkMessage>::deserialize(m)
        .unwrap_or_else(|e| panic!("unparsable {m:02x?}: {e}"))
}

fn inner(m: NetlinkMessage<RouteNetlinkMessage>) -> RouteNetlinkMessage {
    match m.payload {
        NetlinkPayload::InnerMessage(i) => i,
        other => panic!("not a request: {other:?}"),
    }
}

/// Same netlink header (type, flags) and, once parsed and passed through
/// `normalize`, the same message.
fn assert_same_parsed(
    what: &str,
    ours: &[u8],
    theirs: &[u8],
    normalize: impl Fn(&mut RouteNetlinkMessage),
) {
    let (o, t) = (parse(ours), parse(theirs));
    assert_eq!(
        (o.header.message_type, o.header.flags),
        (t.header.message_type, t.header.flags),
        "{what}: header"
    );
    let (mut o, mut t) = (inner(o), inner(t));
    normalize(&mut o);
    normalize(&mut t);
    assert_eq!(o, t, "{what}\nours   {ours:02x?}\ntheirs {theirs:02x?}");
}

fn assert_same_bytes(what: &str, ours: &[u8], theirs: &[u8]) {
    assert_eq!(
        ours,
        theirs,
        "{what}: ours and iproute2's differ\n{:#?}\n{:#?}",
        parse(ours),
        parse(theirs)
    );
}

/// A namespace with a veth pair `p0`/`p1` (up) to hang children on.
fn lab(test: &str) -> Option<(NetNs, Link)> {
    if skip_unless_root(test) || skip_without_strace(test) {
        return None;
    }
    let ns = NetNs::new_anonymous().unwrap();
    let nl = Netlink::for_ns(&ns).unwrap();
    nl.create_veth(&VethOpts {
        name: "p0",
        peer_name: "p1",
        up: true,
        ..Default::default()
    })
    .unwrap();
    let p0 = nl.must_link("p0").unwrap();
    Some((ns, p0))
}

#[test]
fn child_links_are_created_as_ip_link_add_does() {
    let Some((ns, p0)) = lab("vs_iproute2::child_links") else {
        return;
    };
    let mac: Mac = "0a:58:0a:89:00:05".parse().unwrap();
    let cases: [(ChildKind, &[&str]); 6] = [
        (
            ChildKind::Macvlan {
                mode: MacvlanMode::Bridge,
                bc_queue_len: 0,
            },
            &["type", "macvlan", "mode", "bridge"],
        ),
        (
            ChildKind::Macvlan {
                mode: MacvlanMode::Vepa,
                bc_queue_len: 100,
            },
            &["type", "macvlan", "mode", "vepa", "bcqueuelen", "100"],
        ),
        (
            ChildKind::Ipvlan {
                mode: IpvlanMode::L2,
            },
            &["type", "ipvlan", "mode", "l2", "bridge"],
        ),
        (
            ChildKind::Ipvlan {
                mode: IpvlanMode::L3s,
            },
            &["type", "ipvlan", "mode", "l3s", "bridge"],
        ),
        (ChildKind::Vlan { id: 100 }, &["type", "vlan", "id", "100"]),
        (ChildKind::Dummy, &["type", "dummy"]),
    ];
    for (kind, ip_type) in cases {
        let master = (kind != ChildKind::Dummy).then_some(p0.index);
        let mut argv = vec!["ip", "link", "add"];
        if master.is_some() {
            argv.extend(["link", "p0"]);
        }
        argv.extend(["name", "c0", "mtu", "1400", "address", "0a:58:0a:89:00:05"]);
        argv.extend(ip_type);
        let theirs = last(&iproute2_sends(&ns, &argv), RTM_NEWLINK, "ip");
        let ours = ours(RTM_NEWLINK, |nl| {
            let _ = nl.create_child(&ChildOpts {
                name: "c0",
                kind,
                master,
                mtu: Some(1400),
                mac: Some(mac),
                ns: None,
            });
        });
        let what = format!("{kind:?} vs {argv:?}");
        // iproute2 writes the kind without its NUL; the parse drops it.
        // It orders IFLA_IFNAME after the other attributes, we first.
        assert_same_parsed(&what, &ours, &theirs, sort_link_attributes);
    }
}

/// Sorts a link message's attributes, and those of its kind data, by their
/// Debug text: iproute2 puts IFLA_IFNAME last and macvlan's
/// IFLA_MACVLAN_BC_QUEUE_LEN before the mode, we the other way round.
fn sort_link_attributes(m: &mut RouteNetlinkMessage) {
    use netlink_packet_route::link::{InfoData, LinkAttribute, LinkInfo};
    let RouteNetlinkMessage::NewLink(l) = m else {
        return;
    };
    for a in &mut l.attributes {
        let LinkAttribute::LinkInfo(infos) = a else {
            continue;
        };
        for i in infos {
            match i {
                LinkInfo::Data(InfoData::MacVlan(v)) => sort_by_debug(v),
                LinkInfo::Data(InfoData::IpVlan(v)) => sort_by_debug(v),
                LinkInfo::Data(InfoData::Vlan(v)) => sort_by_debug(v),
                _ => {}
            }
        }
    }
    sort_by_debug(&mut l.attributes);
}

fn sort_by_debug<T: std::fmt::Debug>(v: &mut [T]) {
    v.sort_by_cached_key(|a| format!("{a:?}"));
}

/// Sorts a filter's options: tc puts the action before the selector.
fn sort_filter_options(m: &mut RouteNetlinkMessage) {
    use netlink_packet_route::tc::TcAttribute;
    let RouteNetlinkMessage::NewTrafficFilter(f) = m else {
        return;
    };
    for a in &mut f.attributes {
        if let TcAttribute::Options(o) = a {
            sort_by_debug(o);
        }
    }
}

#[test]
fn ifb_is_created_as_ip_link_add_does() {
    let Some((ns, _)) = lab("vs_iproute2::ifb") else {
        return;
    };
    let argv = [
        "ip",
        "link",
        "add",
        "name",
        "ifb0",
        "mtu",
        "1400",
        "txqueuelen",
        "0",
        "up",
        "type",
        "ifb",
    ];
    let theirs = last(&iproute2_sends(&ns, &argv), RTM_NEWLINK, "ip");
    let ours = ours(RTM_NEWLINK, |nl| {
        let _ = nl.create_ifb("ifb0", 1400, None);
    });
    assert_same_parsed("ifb", &ours, &theirs, sort_link_attributes);
}

#[test]
fn bandwidth_qdiscs_and_filter_as_tc_sends_them() {
    let Some((ns, p0)) = lab("vs_iproute2::tc") else {
        return;
    };
    // ingress qdisc
    let theirs = last(
        &iproute2_sends(&ns, &["tc", "qdisc", "add", "dev", "p0", "ingress"]),
        RTM_NEWQDISC,
        "tc",
    );
    let ours_ingress = ours(RTM_NEWQDISC, |nl| {
        let _ = nl.add_ingress_qdisc(&p0);
    });
    assert_same_bytes("ingress qdisc", &ours_ingress, &theirs);

    // u32 filter redirecting to an ifb
    let nl = Netlink::for_ns(&ns).unwrap();
    let ifb = nl.create_ifb("ifb0", 1500, None).unwrap();
    let argv = [
        "tc", "filter", "add", "dev", "p0", "parent", "ffff:", "protocol", "all", "prio", "1",
        "u32", "match", "u32", "0", "0", "flowid", "1:1", "action", "mirred", "egress", "redirect",
        "dev", "ifb0",
    ];
    let theirs = last(&iproute2_sends(&ns, &argv), RTM_NEWTFILTER, "tc");
    let ours_filter = ours(RTM_NEWTFILTER, |nl| {
        let _ = nl.add_redirect_filter(&p0, &ifb);
    });
    assert_same_parsed("u32 filter", &ours_filter, &theirs, sort_filter_options);

    // tbf
    let argv = [
        "tc", "qdisc", "add", "dev", "p0", "root", "handle", "1:", "tbf", "rate", "1mbit", "burst",
        "10kb", "limit", "20kb",
    ];
    let theirs = last(&iproute2_sends(&ns, &argv), RTM_NEWQDISC, "tc");
    let tbf = parsed_tbf(&theirs);
    let ours_tbf = ours(RTM_NEWQDISC, |nl| {
        let _ = nl.add_tbf(&p0, &tbf);
    });
    // Up to TCA_OPTIONS the two are the same bytes.
    let (ours_opts, theirs_opts) = (tbf_options_of(&ours_tbf), tbf_options_of(&theirs));
    let head = ours_tbf.len() - 4 - ours_opts.iter().map(|(_, v)| 4 + v.len()).sum::<usize>();
    assert_eq!(ours_tbf[4..head], theirs[4..head], "tbf: header, kind");
    // Inside: tc also sends TCA_TBF_BURST and the 1 KiB rate table
    // (TCA_TBF_RTAB); we send neither, as the Go reference. The kernel
    // takes the burst from the buffer and ignores the table.
    let kinds = |o: &[(u16, Vec<u8>)]| o.iter().map(|(k, _)| *k).collect::<Vec<_>>();
    assert_eq!(kinds(&ours_opts), [TCA_TBF_PARMS]);
    assert_eq!(
        kinds(&theirs_opts),
        [TCA_TBF_PARMS, TCA_TBF_BURST, TCA_TBF_RTAB]
    );
    // The parameters: from the rate on (rate, peak rate, limit, buffer,
    // mtu) byte for byte. Before it, the rate's cell_log, linklayer
    // (ethernet) and cell_align, which only describe tc's rate table: 0
    // in ours.
    let (o, t) = (&ours_opts[0].1, &theirs_opts[0].1);
    assert_eq!(o.len(), 36);
    assert_eq!(o[8..], t[8..], "tbf parameters from the rate on");
    assert_eq!(o[..8], [0; 8]);
}

const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RTAB: u16 = 2;
const TCA_TBF_BURST: u16 = 6;

/// The attributes inside a tbf request's TCA_OPTIONS, in order.
fn tbf_options_of(m: &[u8]) -> Vec<(u16, Vec<u8>)> {
    use netlink_packet_route::tc::{TcAttribute, TcOption};
    let RouteNetlinkMessage::NewQueueDiscipline(q) = inner(parse(m)) else {
        panic!("not a qdisc");
    };
    let Some(TcAttribute::Options(opts)) = q.attributes.last() else {
        panic!("no options last: {q:?}");
    };
    let mut out = Vec::new();
    for o in opts {
        let TcOption::Other(nla) = o else {
            panic!("unexpected tbf option {o:?}");
        };
        // The crate hands a tbf's options over whole, as one attribute.
        let value = crate::nl::gaps::nla_value(nla);
        for inner in netlink_packet_core::NlasIterator::new(&value[..]) {
            let inner = inner.unwrap();
            out.push((inner.kind(), inner.value().to_vec()));
        }
    }
    out
}

/// The rate, buffer and limit in a tbf request.
fn parsed_tbf(m: &[u8]) -> tc::Tbf {
    use netlink_packet_route::tc::TcAttribute;
    let RouteNetlinkMessage::NewQueueDiscipline(q) = inner(parse(m)) else {
        panic!("not a qdisc");
    };
    q.attributes
        .iter()
        .find_map(|a| match a {
            TcAttribute::Options(o) => tc::parse_tbf(o),
            _ => None,
        })
        .unwrap()
}

/// Drops `FRA_TABLE` when it repeats the header's table byte, and the
/// action of a delete: `ip rule del` leaves it unspecified (any action),
/// we name ours (FR_ACT_TO_TBL), which the kernel then also matches.
fn rule_differences(m: &mut RouteNetlinkMessage) {
    use netlink_packet_route::rule::{RuleAction, RuleAttribute};
    if let RouteNetlinkMessage::NewRule(r) | RouteNetlinkMessage::DelRule(r) = m {
        let header_table = u32::from(r.header.table);
        r.attributes
            .retain(|a| !matches!(a, RuleAttribute::Table(t) if *t == header_table));
    }
    if let RouteNetlinkMessage::DelRule(r) = m {
        r.header.action = RuleAction::Unspec;
    }
}

#[test]
fn sbr_rules_as_ip_rule_sends_them() {
    let Some((ns, _)) = lab("vs_iproute2::rules") else {
        return;
    };
    let cases = [
        ("10.137.0.5/32", 100, None),
        ("10.137.0.0/24", 1000, Some(32765)),
        ("fd00:137::5/128", 101, None),
        ("fd00:137::/64", 300, Some(100)),
    ];
    for (src, table, prio) in cases {
        let src_net: ipnetwork::IpNetwork = src.parse().unwrap();
        let mut rule = Rule::from_source(src_net, table);
        rule.priority = prio;
        let family = if src_net.is_ipv4() { "-4" } else { "-6" };
        let table_s = table.to_string();
        let prio_s = prio.map(|p| p.to_string());
        for (verb, kind) in [("add", RTM_NEWRULE), ("del", RTM_DELRULE)] {
            let mut argv = vec!["ip", family, "rule", verb, "from", src, "table", &table_s];
            if let Some(p) = &prio_s {
                argv.extend(["priority", p]);
            }
            let theirs = last(&iproute2_sends(&ns, &argv), kind, "ip");
            let ours = ours(kind, |nl| {
                let _ = if verb == "add" {
                    nl.add_rule(&rule)
                } else {
                    nl.del_rule(&rule)
                };
            });
            let what = format!("{argv:?}");
            if table > 255 && verb == "add" {
                // The table only in FRA_TABLE on both sides.
                assert_same_bytes(&what, &ours, &theirs);
            } else {
                assert_same_parsed(&what, &ours, &theirs, rule_differences);
            }
        }
    }
}
