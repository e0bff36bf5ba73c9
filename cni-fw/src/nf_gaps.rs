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
//!   `counter` (`NFTA_COUNTER_*`), written by hand into the rule's list of
//!   expressions; and the
//!   rule's `NFTA_RULE_COMPAT` contents (`NFTA_RULE_COMPAT_PROTO`/`_FLAGS`;
//!   the crate types the attribute as `Vec<DefaultNla>`). See [`xt_expression`],
//!   [`zero_counter`], [`rule_compat`]. Read back from a dump,
//!   `match` and `target` (`NFTA_TARGET_*`) parse as `Expressions::Other`
//!   of `DefaultNla`s: [`xt_name_info`].
//! - netlink-packet-netfilter's (and netlink-packet-core's) emit of a
//!   nested attribute measures it again at every level above it (and a
//!   list's twice per element), so a leaf of a rule's expression was
//!   measured about 20 times, and each level of the crate's types is its
//!   own allocations: portmap's ADD of 154 rules (50 mappings) took 20.6 M
//!   instructions, 14.4 M with the crate encoding each expression's
//!   attributes once, 2.9 M (the whole ADD, static release build, under
//!   callgrind) with the rule written by `cni_net::Attrs` in one pass into
//!   one buffer, each typed attribute (`Payload`, `Cmp`, … values) with
//!   the kind and value the crate gives it ([`typed_expression`],
//!   `Attrs::nla`), the nesting, the rule's table and chain and this
//!   module's untyped parts written around them, and an expression
//!   already written in the batch copied (`iptables_nft`'s `Written`).
//! - `NlaBuffer<&'a [u8]>::value()` (netlink-packet-core 0.9) returns a
//!   slice that borrows the `NlaBuffer`, not the `'a` bytes, so a value
//!   found while iterating cannot outlive that step: [`attr_value`].

use crate::nf_tables::{NFTA_EXPR_DATA, NFTA_EXPR_NAME, NFTA_LIST_ELEM};
use cni_net::Attrs;
use netlink_packet_core::{NLA_F_NESTED, Nla, NlaBuffer, NlasIterator, parse_string};

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

/// Appends to `out` (a rule's `NFTA_RULE_EXPRESSIONS`) one element of
/// the list: the expression `name` (`NFTA_EXPR_NAME`) whose attributes
/// (`NFTA_EXPR_DATA`) `data` writes.
fn expression(out: &mut Attrs, name: &str, data: impl FnOnce(&mut Attrs)) {
    let elem = out.nest(NFTA_LIST_ELEM | NLA_F_NESTED);
    out.cstr(NFTA_EXPR_NAME, name);
    let attrs = out.nest(NFTA_EXPR_DATA | NLA_F_NESTED);
    data(out);
    out.end(attrs);
    out.end(elem);
}

/// Appends to `out` (a rule's `NFTA_RULE_EXPRESSIONS`) the expression
/// `name` of the crate's typed attributes `attrs` (e.g. `"cmp"` and `Cmp`
/// values), each emitted by the crate, the nesting written around them in
/// one pass (see `cni_net::Attrs`): the same bytes as the crate's
/// `ListAttribute::from(Expressions::Cmp(attrs))` and the like.
pub(crate) fn typed_expression<T: Nla>(out: &mut Attrs, name: &str, attrs: &[T]) {
    expression(out, name, |out| {
        for a in attrs {
            out.nla(a);
        }
    });
}

// ---- nf_tables expressions without a crate type ----

/// Appends to `out` an x_tables compat expression (nft_compat): `kind`
/// `match` (`-m`) or `target` (`-j`), with `NFTA_MATCH_NAME`/`NFTA_TARGET_NAME`
/// (NUL-terminated), `…_REV` (u32, big endian) and `…_INFO` (the
/// extension's own struct, native endianness), numbered alike.
pub(crate) fn xt_expression(out: &mut Attrs, kind: &str, name: &str, revision: u32, info: &[u8]) {
    const NFTA_XT_NAME: u16 = 1;
    const NFTA_XT_REV: u16 = 2;
    const NFTA_XT_INFO: u16 = 3;
    expression(out, kind, |out| {
        out.cstr(NFTA_XT_NAME, name)
            .attr(NFTA_XT_REV, &revision.to_be_bytes())
            .attr(NFTA_XT_INFO, info);
    });
}

/// Appends to `out` a `counter` expression starting at zero:
/// `NFTA_COUNTER_BYTES` and `NFTA_COUNTER_PACKETS` (u64, big endian), as
/// iptables-nft sends it.
pub(crate) fn zero_counter(out: &mut Attrs) {
    const NFTA_COUNTER_BYTES: u16 = 1;
    const NFTA_COUNTER_PACKETS: u16 = 2;
    expression(out, "counter", |out| {
        out.attr(NFTA_COUNTER_BYTES, &[0; 8])
            .attr(NFTA_COUNTER_PACKETS, &[0; 8]);
    });
}

/// Appends to `out` (a rule's attributes) the `NFTA_RULE_COMPAT` of an
/// iptables rule: its `-p` protocol number (0: none), no invert flag (u32,
/// big endian each).
pub(crate) fn rule_compat(out: &mut Attrs, protocol: u8) {
    const NFTA_RULE_COMPAT: u16 = 5;
    const NFTA_RULE_COMPAT_PROTO: u16 = 1;
    const NFTA_RULE_COMPAT_FLAGS: u16 = 2;
    let compat = out.nest(NFTA_RULE_COMPAT | NLA_F_NESTED);
    out.attr(NFTA_RULE_COMPAT_PROTO, &u32::from(protocol).to_be_bytes())
        .attr(NFTA_RULE_COMPAT_FLAGS, &[0; 4]);
    out.end(compat);
}
