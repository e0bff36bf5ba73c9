//! What the rust-netlink crates do not type for netfilter, written by hand
//! here and only here (the rest is `cni-net`'s `nl/gaps.rs`). Each item
//! names the crate type that is missing; when upstream adds it, the item
//! goes.
//!
//! - nf_tables expressions netlink-packet-netfilter 0.4 has no type for
//!   (its `Expressions` types bitwise, cmp, immediate, lookup, meta and
//!   payload): the x_tables compat `match` (`NFTA_MATCH_*`, for
//!   iptables-nft's `-m conntrack`, `-m comment`, `-m sctp`, `-m
//!   multiport`) and `target` (`NFTA_TARGET_*`, for `-j DNAT`, `-j MASQUERADE`), and
//!   `counter` (`NFTA_COUNTER_*`), sent as `Expressions::Other`; and the
//!   rule's `NFTA_RULE_COMPAT` contents (`NFTA_RULE_COMPAT_PROTO`/`_FLAGS`;
//!   the crate types the attribute as `Vec<DefaultNla>`). See [`xt_expr`],
//!   [`zero_counter`], [`rule_compat`]. Read back from a dump,
//!   `match` and `target` (`NFTA_TARGET_*`) parse as `Expressions::Other`
//!   of `DefaultNla`s: [`xt_name_info`].
//! - netlink-packet-netfilter's (and netlink-packet-core's) emit of a
//!   nested attribute measures it again at every level above it (and a
//!   list's twice per element), so a leaf of a rule's expression was
//!   measured about 20 times: portmap's ADD of 154 rules (50 mappings)
//!   took 20.6 M instructions, 15.4 M with these two. [`encoded_once`] has the crate encode each attribute of
//!   an expression (its typed `Payload`, `Cmp`, … values) once and carries
//!   the bytes in `Expressions::Other`; [`nested_once`] encodes a rule's
//!   list of expressions once, carried as `RuleAttribute::Other`.
//! - `NlaBuffer<&'a [u8]>::value()` (netlink-packet-core 0.9) returns a
//!   slice that borrows the `NlaBuffer`, not the `'a` bytes, so a value
//!   found while iterating cannot outlive that step: [`attr_value`].

use netlink_packet_core::{DefaultNla, Emitable, Nla, NlaBuffer, NlasIterator, parse_string};
use netlink_packet_netfilter::nftables::{ExpressionAttribute, Expressions, ListAttribute};

/// The value of `nla`, borrowed for as long as the bytes it was read from.
pub(crate) fn attr_value(nla: NlaBuffer<&[u8]>) -> &[u8] {
    let end = usize::from(nla.length());
    nla.into_inner().get(4..end).unwrap_or_default()
}

/// (name, info blob) of an nf_tables `match` or `target` expression's data
/// (`NFTA_MATCH_NAME`/`NFTA_TARGET_NAME` = 1, `…_INFO` = 3).
pub(crate) fn xt_name_info(data: &[u8]) -> (String, Vec<u8>) {
    const NFTA_XT_NAME: u16 = 1;
    const NFTA_XT_INFO: u16 = 3;
    let mut out = (String::new(), Vec::new());
    for nla in NlasIterator::new(data).map_while(Result::ok) {
        match nla.kind() {
            NFTA_XT_NAME => out.0 = parse_string(attr_value(nla)).unwrap_or_default(),
            NFTA_XT_INFO => out.1 = attr_value(nla).to_vec(),
            _ => {}
        }
    }
    out
}

/// The expression `name` of the crate's typed attributes `attrs` (e.g.
/// `"cmp"` and `Cmp` values), each encoded by the crate once and carried
/// as its bytes (header flags included), so that the rule's emit does not
/// measure them again at every level: the same bytes as
/// `Expressions::Cmp(attrs)` and the like.
pub(crate) fn encoded_once<T: Nla>(name: &str, attrs: &[T]) -> ListAttribute<ExpressionAttribute> {
    let attributes = attrs
        .iter()
        .map(|a| {
            let mut buf = vec![0u8; a.buffer_len()];
            a.emit(&mut buf);
            let kind = buf
                .get(2..4)
                .map_or(0, |k| u16::from_ne_bytes([k[0], k[1]]));
            // The value in place: no second allocation.
            buf.truncate(4 + a.value_len());
            buf.drain(..4.min(buf.len()));
            DefaultNla::new(kind, buf)
        })
        .collect();
    Expressions::Other {
        expression_type: name.to_string(),
        attributes,
    }
    .into()
}

/// The nested attribute `kind` holding `items`, encoded by the crate once
/// (see [`encoded_once`]).
pub(crate) fn nested_once<T: Nla>(kind: u16, items: &[T]) -> DefaultNla {
    let mut buf = vec![0u8; items.buffer_len()];
    items.emit(&mut buf);
    DefaultNla::new(kind | netlink_packet_core::NLA_F_NESTED, buf)
}

// ---- nf_tables expressions without a crate type ----

/// An x_tables compat expression (nft_compat): `kind` `match` (`-m`) or
/// `target` (`-j`), with `NFTA_MATCH_NAME`/`NFTA_TARGET_NAME`
/// (NUL-terminated), `…_REV` (u32, big endian) and `…_INFO` (the
/// extension's own struct, native endianness), numbered alike.
pub(crate) fn xt_expr(kind: &str, name: &str, revision: u32, info: Vec<u8>) -> Expressions {
    const NFTA_XT_NAME: u16 = 1;
    const NFTA_XT_REV: u16 = 2;
    const NFTA_XT_INFO: u16 = 3;
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    Expressions::Other {
        expression_type: kind.to_string(),
        attributes: vec![
            DefaultNla::new(NFTA_XT_NAME, cname),
            DefaultNla::new(NFTA_XT_REV, revision.to_be_bytes().to_vec()),
            DefaultNla::new(NFTA_XT_INFO, info),
        ],
    }
}

/// A `counter` expression starting at zero: `NFTA_COUNTER_BYTES` and
/// `NFTA_COUNTER_PACKETS` (u64, big endian), as iptables-nft sends it.
pub(crate) fn zero_counter() -> Expressions {
    const NFTA_COUNTER_BYTES: u16 = 1;
    const NFTA_COUNTER_PACKETS: u16 = 2;
    Expressions::Other {
        expression_type: "counter".to_string(),
        attributes: vec![
            DefaultNla::new(NFTA_COUNTER_BYTES, vec![0; 8]),
            DefaultNla::new(NFTA_COUNTER_PACKETS, vec![0; 8]),
        ],
    }
}

/// `NFTA_RULE_COMPAT` of an iptables rule: its `-p` protocol number (0:
/// none), no invert flag (u32, big endian each).
pub(crate) fn rule_compat(protocol: u8) -> Vec<DefaultNla> {
    const NFTA_RULE_COMPAT_PROTO: u16 = 1;
    const NFTA_RULE_COMPAT_FLAGS: u16 = 2;
    vec![
        DefaultNla::new(
            NFTA_RULE_COMPAT_PROTO,
            u32::from(protocol).to_be_bytes().to_vec(),
        ),
        DefaultNla::new(NFTA_RULE_COMPAT_FLAGS, vec![0; 4]),
    ]
}
