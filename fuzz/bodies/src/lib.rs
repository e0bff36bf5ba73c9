//! The fuzz targets, one `fn(&[u8])` each: what every input must satisfy
//! (no panic, no endless loop, and the properties asserted here). Two
//! callers run them:
//!
//! - the cargo-fuzz binaries in `fuzz/fuzz_targets/` (libFuzzer, nightly),
//!   one line each: `scripts/fuzz` runs them for a while;
//! - the smoke test `tests/smoke.rs` (stable, in every `cargo test`): the
//!   seed corpus and a few thousand seeded mutations of it per target, so
//!   CI fails when a target crashes on its seeds or near them.
//!
//! A new target: a `pub fn` here, a line in [`TARGETS`], a binary in
//! `fuzz/fuzz_targets/<name>.rs` and its `[[bin]]` in `fuzz/Cargo.toml`
//! (the smoke test fails when the three lists differ), and seeds in
//! `tests/fuzz-corpus/<name>/`.

// A target reports a finding by panicking: that is what the fuzzer and the
// smoke test catch.
#![allow(clippy::expect_used, clippy::panic)]

use cni_skel::version::ALL;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Output, Plugin};
use std::io::{Read, Write};

/// A target's body.
pub type Body = fn(&[u8]);

/// Every target: its name (the binary in `fuzz/fuzz_targets/`, the seed
/// directory in `tests/fuzz-corpus/`) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("skel_dispatch", skel_dispatch),
    ("bridge_config", bridge_config),
    ("host_local_config", host_local_config),
    ("result_convert", result_convert),
    ("cni_args", cni_args),
    ("dbus_reply", dbus_reply),
    ("netlink_route", netlink_route),
    ("netlink_netfilter", netlink_netfilter),
    ("dhcp4_packet", dhcp4_packet),
    ("netrpc_request", netrpc_request),
];

/// A plugin for [`skel_dispatch`]: reads what a plugin reads.
struct Echo;

impl Plugin for Echo {
    fn about(&self) -> String {
        "echo".into()
    }
    fn add(&self, args: &CmdArgs) -> CmdResult {
        args.cni_args(&["IP", "MAC"])?;
        Ok(Output::Result(args.prev_result()?.unwrap_or_else(|| {
            CniResult {
                cni_version: args.cni_version().to_string(),
                ..Default::default()
            }
        })))
    }
    fn del(&self, _: &CmdArgs) -> CmdResult {
        Ok(Output::Nothing)
    }
    fn check(&self, args: &CmdArgs) -> CmdResult {
        args.prev_result()?
            .ok_or_else(|| CniError::internal("no prevResult"))
            .map(|_| Output::Nothing)
    }
}

/// The skel's whole input path: the first line holds `|`-separated values
/// of the variables the skel reads (`cni_skel::env::VARS`, in order:
/// CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH);
/// the rest is stdin. The outcome must be exit 0 or 1, with a CNI error on 1.
pub fn skel_dispatch(data: &[u8]) {
    let (head, stdin) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let mut parts = head.split('|');
    let mut env = std::collections::HashMap::new();
    for &k in cni_skel::env::VARS {
        if let Some(v) = parts.next() {
            env.insert(k, v.to_string());
        }
    }
    let o = cni_skel::dispatch(
        &Echo,
        &move |k| env.get(k).cloned(),
        Box::new(std::io::Cursor::new(stdin.to_vec())),
    );
    assert!(o.exit <= 1, "exit {}", o.exit);
    if o.exit == 1 {
        let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("error is JSON");
        assert!(v["code"].is_u64() && v["msg"].is_string(), "{}", o.stdout);
    }
}

/// bridge's config validation: never a panic, and what it accepts is sane.
pub fn bridge_config(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for layer3 in [false, true] {
        if let Ok(c) = bridge::config::load_value(v.clone(), "", layer3) {
            assert!(!c.bridge.is_empty() && c.bridge.len() <= 15);
            assert!(c.vlan <= 4094);
            assert!(c.mtu.is_none_or(|m| (68..=65535).contains(&m)));
        }
    }
}

/// host-local's config loading (ranges, routes, requested IPs, GC list).
pub fn host_local_config(data: &[u8]) {
    if let Ok(c) = host_local::config::load(data, "") {
        assert!(!c.ranges.is_empty());
        for set in &c.ranges {
            assert!(set.capacity() > 0);
        }
    }
    let _ = cni_skel::conf::valid_attachments(data);
}

/// Results and prevResults in every version, converted to every version:
/// whatever is accepted prints, and what is printed parses again.
pub fn result_convert(data: &[u8]) {
    let value: Option<serde_json::Value> = serde_json::from_slice(data).ok();
    for from in ALL {
        let parsed = CniResult::parse(data, from).ok().into_iter().chain(
            value
                .as_ref()
                .and_then(|v| CniResult::parse_prev(v, from).ok()),
        );
        for r in parsed {
            for to in ALL {
                if let Ok(text) = r.to_json(to) {
                    assert!(
                        CniResult::parse(text.as_bytes(), to).is_ok(),
                        "{to}: {text}"
                    );
                }
            }
        }
    }
}

/// CNI_ARGS: what parses is exactly its pairs.
pub fn cni_args(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(a) = cni_skel::args::CniArgs::parse(raw) {
        let back: Vec<String> = a.pairs().iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(back.join(";"), raw);
    }
    let _ = cni_skel::args::CniArgs::load(raw, &["IP", "MAC"]);
}

/// A byte stream whose reads are the fuzz input (the peer's side of the
/// conversation) and whose writes go nowhere.
struct Replay<'a>(&'a [u8]);

impl Read for Replay<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Replay<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The D-Bus client (wire/dbus) reading everything a bus sends it: the
/// input is the bus's side of a whole conversation (the SASL lines, the
/// `Hello` reply, then replies, errors and signals in any byte order), as
/// the firewall plugin holds it with firewalld: `Hello`, then calls until
/// one fails.
pub fn dbus_reply(data: &[u8]) {
    let Ok(mut conn) = dbus::Connection::over(Replay(data)) else {
        return;
    };
    for method in ["getZoneOfSource", "addSource", "removeSource"] {
        let r = conn.call(
            "org.fedoraproject.FirewallD1",
            "/org/fedoraproject/FirewallD1",
            "org.fedoraproject.FirewallD1.zone",
            method,
            &["trusted", "10.155.0.2/32"],
        );
        if r.is_err() {
            return;
        }
    }
}

/// The fuzz input after its first byte as the kernel's datagrams: each is
/// a 16-bit little-endian length and that many bytes (the last one takes
/// what is left when the length says more).
pub fn datagrams(mut data: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let [lo, hi, rest @ ..] = data {
        let n = usize::from(u16::from_le_bytes([*lo, *hi])).min(rest.len());
        out.push(rest[..n].to_vec());
        data = &rest[n..];
    }
    out
}

/// The inverse of [`datagrams`] (for writing seeds): byte `op`, then each
/// datagram with its length.
pub fn frame(op: u8, datagrams: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![op];
    for d in datagrams {
        let n = u16::try_from(d.len()).expect("a datagram under 64 KiB");
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(d);
    }
    out
}

/// The index of the link that the link-scoped operations ask about.
pub const LINK_INDEX: u32 = 2;

/// How many operations [`route_op`] and [`netfilter_op`] choose from.
pub const ROUTE_OPS: u8 = 20;
/// See [`ROUTE_OPS`].
pub const NETFILTER_OPS: u8 = 12;

/// rtnetlink answers (links, addresses, routes, rules, qdiscs, filters,
/// bridge VLANs, ifbs, VRFs; ACKs and errors with extended ACKs) through
/// the `cni_net::Netlink` method the plugins call, on a handle that reads
/// the input as the kernel's datagrams (`Netlink::replay`): the first byte
/// chooses the method ([`route_op`]), the rest is [`datagrams`]. Each
/// method's exchange starts at sequence number 1 (a fresh handle's first
/// request).
pub fn netlink_route(data: &[u8]) {
    let Some((&op, rest)) = data.split_first() else {
        return;
    };
    // The result is thrown away: what is checked is that reading the
    // answer never panics and always ends.
    let _ = route_op(&cni_net::Netlink::replay(datagrams(rest)), op);
}

/// Method `op` (modulo [`ROUTE_OPS`]) of `nl`, on [`LINK_INDEX`] or all
/// objects (the seeds' recorder, examples/seed_ops.rs, runs the same on
/// the kernel).
pub fn route_op(nl: &cni_net::Netlink, op: u8) -> Result<(), cni_net::NetError> {
    use cni_net::{IpFamily, Link, tc};
    let link = Link {
        index: LINK_INDEX,
        name: "eth0".into(),
        ..Link::default()
    };
    let ip = std::net::IpAddr::from([10, 155, 0, 1]);
    match op % ROUTE_OPS {
        0 => nl.links().map(drop),
        1 => nl.link_by_name("eth0").map(drop),
        2 => nl.link_by_index(LINK_INDEX).map(drop),
        3 => nl.all_addrs(None).map(drop),
        4 => nl.addrs(&link, Some(IpFamily::V6)).map(drop),
        5 => nl.all_routes(None).map(drop),
        6 => nl.routes(IpFamily::V4, None).map(drop),
        7 => nl.routes_of_link(IpFamily::V6, LINK_INDEX).map(drop),
        8 => nl.routes_all_tables(IpFamily::V4).map(drop),
        9 => nl.route_to(ip).map(drop),
        10 => nl.all_rules().map(drop),
        11 => nl.rules(IpFamily::V6).map(drop),
        12 => nl.qdiscs(&link).map(drop),
        13 => nl.filters(&link, tc::HANDLE_INGRESS_QDISC).map(drop),
        14 => nl.ifbs().map(drop),
        15 => nl.bridge_vlans(&link).map(drop),
        16 => nl.link_extras(LINK_INDEX).map(drop),
        17 => nl.vrfs().map(drop),
        18 => nl.links_with_master(LINK_INDEX).map(drop),
        _ => nl.set_up(&link),
    }
}

/// nfnetlink answers: nf_tables rule dumps (what portmap and firewall read
/// back of iptables-nft's chains), chain lookups, the ACK of a rule
/// deletion batch, and the conntrack dump that portmap deletes entries
/// from, each through the `cni_net` function the plugins call on a socket
/// that reads the input as the kernel's datagrams. The first byte chooses
/// the function and family ([`netfilter_op`]); the rest is [`datagrams`].
pub fn netlink_netfilter(data: &[u8]) {
    let Some((&op, rest)) = data.split_first() else {
        return;
    };
    let _ = netfilter_op(op, Some(datagrams(rest)));
}

/// Function `op` (modulo [`NETFILTER_OPS`]: the low 2 bits choose it, the
/// next the family) on a socket replaying `answers`, or on the kernel's
/// when `None`.
pub fn netfilter_op(op: u8, answers: Option<Vec<Vec<u8>>>) -> Result<(), cni_net::NetError> {
    use cni_fw::nf_tables::{NfFamily, NfTables};
    use cni_net::IpFamily;
    let op = op % NETFILTER_OPS;
    let family = [NfFamily::Ip, NfFamily::Ip6, NfFamily::Inet][usize::from(op >> 2)];
    let nf = |answers: Option<Vec<Vec<u8>>>| match answers {
        Some(a) => Ok(NfTables::replay(family, a)),
        None => NfTables::open(family),
    };
    match op % 4 {
        0 => nf(answers)?
            .chain_rules("nat", "CNI-HOSTPORT-DNAT")
            .map(drop),
        1 => nf(answers)?.chain_exists("filter", "CNI-FORWARD").map(drop),
        2 => nf(answers)?.delete_rules(
            "filter",
            &[
                (NfFamily::Ip, "CNI-FORWARD", 7),
                (NfFamily::Ip6, "CNI-FORWARD", 9),
            ],
        ),
        _ => {
            let family = [None, Some(IpFamily::V4), Some(IpFamily::V6)][usize::from(op >> 2)];
            let ports = [8080, 443];
            match answers {
                Some(a) => cni_fw::conntrack::replay_delete_by_orig_dst_port(a, family, 6, &ports),
                None => cni_fw::conntrack::delete_by_orig_dst_port(family, 6, &ports),
            }
            .map(drop)
        }
    }
}

/// DHCPv4 messages from the wire (the dhcp daemon's input from any host on
/// the LAN): `Message::decode` with overload (52) and long options, then
/// the route options 121 and 33 of what decoded. Whatever parses must
/// encode and decode back to itself, and a parsed option 121 must encode
/// back to its exact bytes.
pub fn dhcp4_packet(data: &[u8]) {
    use dhcp4::{Message, opt, static_routes};
    // The raw bytes as an option 121 / 33 value too: the daemon reads
    // them from a decoded message, whose option values are any bytes.
    check_classless_routes(data);
    let _ = static_routes(data);
    let Some(m) = Message::decode(data) else {
        return;
    };
    let _ = m.message_type();
    for code in [opt::SUBNET_MASK, opt::ROUTER, opt::SERVER_ID] {
        let _ = m.ip_option(code);
    }
    for code in [opt::LEASE_TIME, opt::RENEWAL_TIME, opt::REBINDING_TIME] {
        let _ = m.u32_option(code);
    }
    if let Some(v) = m.option(opt::CLASSLESS_ROUTES) {
        check_classless_routes(v);
    }
    if let Some(v) = m.option(opt::STATIC_ROUTES) {
        let _ = static_routes(v);
    }
    let again = Message::decode(&m.encode());
    assert_eq!(again.as_ref(), Some(&m), "decode(encode(m)) != m");
}

/// A parsed option 121 encodes back to its exact bytes.
fn check_classless_routes(v: &[u8]) {
    let Some(routes) = dhcp4::classless_routes(v) else {
        return;
    };
    let mut back = Vec::new();
    for (dst, width, gw) in routes {
        back.push(width);
        back.extend_from_slice(&dst.octets()[..usize::from(width).div_ceil(8)]);
        back.extend_from_slice(&gw.octets());
    }
    assert_eq!(back, v, "option 121 does not encode back to its bytes");
}

/// A stream as the dhcp daemon's RPC server reads it after the HTTP
/// handshake, from any process that can connect to its socket: requests
/// (header and body, each with the type definitions before it, on one gob
/// stream) through `netrpc::read_request`, until the stream ends or is
/// refused. Every value read stays within the decoder's bounds: nested at
/// most `MAX_DEPTH` below the top, and at most `MAX_DECODED` bytes.
pub fn netrpc_request(data: &[u8]) {
    use netrpc::gob::{Decoder, MAX_DECODED, MAX_DEPTH, Value};
    let mut r = data;
    let mut decoder = Decoder::new();
    while let Ok(Some((header, body))) = netrpc::read_request(&mut decoder, &mut r) {
        let _ = (header.service_method.rsplit_once('.'), header.seq);
        // Walked without recursion: depth and a lower bound of the size.
        let mut size = 0usize;
        let mut todo: Vec<(&Value, usize)> = vec![(&body, 0)];
        while let Some((v, depth)) = todo.pop() {
            assert!(depth <= MAX_DEPTH, "a value nested {depth} deep");
            size += std::mem::size_of::<Value>();
            match v {
                Value::Bytes(b) | Value::Opaque(b) => size += b.len(),
                Value::String(s) => size += s.len(),
                Value::Struct(fields) => todo.extend(fields.iter().map(|(_, f)| (f, depth + 1))),
                Value::Slice(items) => todo.extend(items.iter().map(|i| (i, depth + 1))),
                Value::Map(entries) => todo.extend(
                    entries
                        .iter()
                        .flat_map(|(k, e)| [(k, depth + 1), (e, depth + 1)]),
                ),
                _ => {}
            }
        }
        assert!(
            size <= MAX_DECODED + std::mem::size_of::<Value>(),
            "{size} bytes decoded"
        );
    }
}
