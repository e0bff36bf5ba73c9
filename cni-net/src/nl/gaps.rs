//! What the rust-netlink crates do not type, written by hand here and only
//! here. Each item names the crate type that is missing; when upstream adds
//! it, the item goes.
//!
//! - Extended ACK: netlink-packet-core 0.9 keeps the TLVs after an error
//!   code as bytes (`ErrorMessage::header`, `DoneMessage::extended_ack`); no
//!   typed `NLMSGERR_ATTR_MSG` / `NLMSGERR_ATTR_OFFS`. [`ExtAck`] parses them.
//! - Bridge port flags in an `AF_BRIDGE` `IFLA_PROTINFO`: netlink-packet-route
//!   0.34's `LinkProtoInfoBridge` types only `IFLA_BRPORT_PROXYARP_WIFI`'s
//!   neighbour (`NeighForwardGrat`); hairpin (`IFLA_BRPORT_MODE`) and
//!   isolation (`IFLA_BRPORT_ISOLATED`) go through `Other(DefaultNla)`
//!   ([`bridge_port_flag`]). The typed `InfoBridgePort` exists only inside
//!   `IFLA_LINKINFO`, which the kernel applies on RTM_NEWLINK, not on the
//!   RTM_SETLINK that iproute2 and Go's netlink send.
//! - A parsed `DefaultNla` has no getter for its payload (netlink-packet-core
//!   0.9): [`nla_value`] emits it into a buffer (the tbf options below).
//! - tbf: netlink-packet-route 0.34 has no `TcQdiscTbf` (no
//!   `TcOption::Tbf`): [`TbfQopt`] is `struct tc_tbf_qopt`, sent and read
//!   through `TcOption::Other`.
//! - The netfilter ones (nf_tables expressions, x_tables compat data):
//!   `cni-fw`'s `nf_gaps`, beside the netfilter code that uses them.

use netlink_packet_core::{DefaultNla, NLM_F_ACK_TLVS, NLM_F_CAPPED, Nla, NlaBuffer, NlasIterator};
use netlink_packet_route::link::LinkProtoInfoBridge;

/// `IFLA_BRPORT_MODE`: hairpin mode of a bridge port (u8).
pub(crate) const IFLA_BRPORT_MODE: u16 = 4;
/// `IFLA_BRPORT_ISOLATED`: port isolation (u8).
pub(crate) const IFLA_BRPORT_ISOLATED: u16 = 33;

/// One u8 bridge port flag for `LinkAttribute::ProtoInfoBridge` (which the
/// crate emits as `IFLA_PROTINFO | NLA_F_NESTED`, as the kernel wants).
pub(crate) fn bridge_port_flag(kind: u16, on: bool) -> LinkProtoInfoBridge {
    LinkProtoInfoBridge::Other(DefaultNla::new(kind, vec![u8::from(on)]))
}

/// `NLMSGERR_ATTR_MSG`: a NUL-terminated text from the kernel.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// `NLMSGERR_ATTR_OFFS`: byte offset of the offending attribute in the request.
const NLMSGERR_ATTR_OFFS: u16 = 2;

/// Netlink header length (`struct nlmsghdr`).
pub(crate) const NLMSG_HDRLEN: usize = 16;

/// The kernel's explanation that came with an error (extended ACK).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ExtAck {
    /// `NLMSGERR_ATTR_MSG`, e.g. "Unknown device type".
    pub(crate) msg: Option<String>,
    /// `NLMSGERR_ATTR_OFFS`: where in our request the kernel stopped.
    pub(crate) offset: Option<u32>,
}

impl ExtAck {
    /// Parses the TLVs of an `NLMSG_ERROR` (`is_error`) or `NLMSG_DONE`
    /// message. `flags` are the message's netlink header flags, `payload`
    /// everything after its netlink header (the `i32` code first). Absent,
    /// short or malformed TLVs give an empty [`ExtAck`]: the errno alone is
    /// still the answer.
    pub(crate) fn parse(flags: u16, payload: &[u8], is_error: bool) -> ExtAck {
        let mut out = ExtAck::default();
        if flags & NLM_F_ACK_TLVS == 0 {
            return out;
        }
        let mut at = 4;
        if is_error {
            // The echoed request: its header only when capped, else whole.
            let echoed = if flags & NLM_F_CAPPED != 0 {
                NLMSG_HDRLEN
            } else {
                match payload.get(4..8) {
                    Some(&[a, b, c, d]) => u32::from_ne_bytes([a, b, c, d]) as usize,
                    _ => return out,
                }
            };
            at += align4(echoed);
        }
        let Some(tlvs) = payload.get(at..) else {
            return out;
        };
        for nla in NlasIterator::new(tlvs) {
            let Ok(nla): Result<NlaBuffer<&[u8]>, _> = nla else {
                break;
            };
            match nla.kind() {
                NLMSGERR_ATTR_MSG => {
                    let v = nla.value();
                    let text = v.split(|&b| b == 0).next().unwrap_or_default();
                    let text = String::from_utf8_lossy(text).trim().to_string();
                    if !text.is_empty() {
                        out.msg = Some(text);
                    }
                }
                NLMSGERR_ATTR_OFFS => {
                    if let Some(&[a, b, c, d]) = nla.value().get(..4) {
                        out.offset = Some(u32::from_ne_bytes([a, b, c, d]));
                    }
                }
                _ => {}
            }
        }
        out
    }
}

pub(crate) const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The payload of an untyped attribute.
pub(crate) fn nla_value(nla: &DefaultNla) -> Vec<u8> {
    let mut v = vec![0u8; nla.value_len()];
    nla.emit_value(&mut v);
    v
}

// ---- tbf (the crate has no `TcQdiscTbf` / `TcQdiscTbfOption`) ----
//
// Its options travel as `TcOption::Other(DefaultNla)`: TCA_TBF_PARMS with
// `struct tc_tbf_qopt` below, and TCA_TBF_RATE64 for rates of 2^32
// bytes/s and more. Dumped back, the crate returns the whole TCA_OPTIONS
// of an unknown kind as one `TcOption::Other`.

/// `TCA_TBF_PARMS`: `struct tc_tbf_qopt`.
pub(crate) const TCA_TBF_PARMS: u16 = 1;
/// `TCA_TBF_RATE64`: the rate in bytes/s when it does not fit 32 bits.
pub(crate) const TCA_TBF_RATE64: u16 = 4;

/// `struct tc_tbf_qopt` (36 bytes, native endianness): `rate` and
/// `peakrate` as `struct tc_ratespec` (cell_log u8, linklayer u8, overhead
/// u16, cell_align i16, mpu u16, rate u32), then limit, buffer and mtu
/// (u32). Only the fields the reference sets are kept: the rate's rate,
/// limit and buffer; the rest is zero as the Go library leaves it
/// (linklayer unspecified, no peak rate, no rate table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TbfQopt {
    /// Bytes per second, saturated to u32 (then TCA_TBF_RATE64 has it).
    pub(crate) rate: u32,
    /// Queue limit, bytes.
    pub(crate) limit: u32,
    /// Bucket, psched ticks.
    pub(crate) buffer: u32,
}

impl TbfQopt {
    pub(crate) const LEN: usize = 36;
    const RATE_AT: usize = 8;
    const LIMIT_AT: usize = 24;
    const BUFFER_AT: usize = 28;

    pub(crate) fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[Self::RATE_AT..Self::RATE_AT + 4].copy_from_slice(&self.rate.to_ne_bytes());
        b[Self::LIMIT_AT..Self::LIMIT_AT + 4].copy_from_slice(&self.limit.to_ne_bytes());
        b[Self::BUFFER_AT..Self::BUFFER_AT + 4].copy_from_slice(&self.buffer.to_ne_bytes());
        b
    }

    /// Reads the three fields back; `None` if `b` is short.
    pub(crate) fn parse(b: &[u8]) -> Option<TbfQopt> {
        let u32_at = |at: usize| -> Option<u32> {
            b.get(at..at + 4)
                .and_then(|s| <[u8; 4]>::try_from(s).ok())
                .map(u32::from_ne_bytes)
        };
        if b.len() < Self::LEN {
            return None;
        }
        Some(TbfQopt {
            rate: u32_at(Self::RATE_AT)?,
            limit: u32_at(Self::LIMIT_AT)?,
            buffer: u32_at(Self::BUFFER_AT)?,
        })
    }
}
