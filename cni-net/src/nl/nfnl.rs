//! Hand-built nfnetlink requests and a bounds-checked attribute walker,
//! for the two netfilter queries (`crate::nf_tables`: chain lookup and rule
//! listing; `crate::conntrack`: dump and delete), sent through the same
//! [`Socket`] as everything else.
//!
//! Why not netlink-packet-netfilter 0.4: it covers them, and was used twice.
//! Through its `NetfilterMessage` it added 123 KB to portmap (0.535x the Go
//! reference's size, past the 0.5x ceiling). Typed per body (`RuleMessage`,
//! `ConntrackMessage` directly, as `rtm::Rtm` does for rtnetlink) it cost
//! only 69,632 bytes (portmap 0.464x), but an A/B of the release builds
//! (scripts/bench with RCNI_REF_DIR, 200 runs per side) measured portmap ADD
//! 1.25x (50 mappings 1.14x), firewall ADD 1.17x and with same-bridge
//! isolation 1.72x of this code: its rule parser builds an owned value for
//! every expression attribute and formats the expression's bytes with
//! `{:?}` for an error context on every attribute it reads, whether or not
//! the parse fails (`nftables/attributes/expression.rs`). These queries
//! read a handful of attributes, are tested against iptables-nft's real
//! chains and the kernel's conntrack entries, and so stay here.

use crate::error::NetError;
use crate::nl::Socket;

pub(crate) use netlink_packet_core::{NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST};
use std::fmt;

/// Attribute type bits; the top two are the nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A blocking netlink socket bound to the calling thread's namespace.
pub(crate) struct Conn(Socket);

impl Conn {
    /// Opens a socket of netlink `protocol` (`netlink_sys::protocols::*`).
    pub(crate) fn open(protocol: isize, what: &'static str) -> Result<Conn, NetError> {
        Socket::open(protocol, what).map(Conn)
    }

    /// Sends `req` and hands every answer message (type, payload after the
    /// netlink header) to `each`, until the dump's DONE or the ACK.
    pub(crate) fn request(
        &mut self,
        req: Request,
        op: &str,
        mut each: impl FnMut(u16, &[u8]),
    ) -> Result<(), NetError> {
        let bytes = req
            .finish(0)
            .map_err(|e| NetError::other(op, e.to_string()))?;
        self.0
            .raw(&bytes, op, |k, p| {
                each(k, p);
                Ok(())
            })
            .map(|_| ())
    }
}

impl Conn {
    /// Sends `msgs` as one nfnetlink batch (BEGIN, the messages, END) for
    /// subsystem `subsys`: the kernel applies all of them or none. Only the
    /// last message asks for an ACK; the kernel reports answers in message
    /// order, so the first answer read is either the error of the first
    /// message that failed (the batch was then aborted) or that ACK.
    pub(crate) fn batch(
        &mut self,
        subsys: u16,
        msgs: Vec<Request>,
        op: &str,
    ) -> Result<(), NetError> {
        const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
        const NFNL_MSG_BATCH_END: u16 = 0x11;
        if msgs.is_empty() {
            // Nothing would be answered.
            return Ok(());
        }
        // struct nfgenmsg: AF_UNSPEC, version 0, res_id = the subsystem
        // (big endian).
        let [hi, lo] = subsys.to_be_bytes();
        let framing = [0u8, 0, hi, lo];
        let last = msgs.len().saturating_sub(1);
        let mut bytes = Request::new(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, &framing)
            .finish(0)
            .map_err(|e| NetError::other(op, e.to_string()))?;
        for (i, mut msg) in msgs.into_iter().enumerate() {
            if i == last {
                msg.add_flags(NLM_F_ACK);
            }
            let m = msg
                .finish(0)
                .map_err(|e| NetError::other(op, e.to_string()))?;
            bytes.extend_from_slice(&m);
        }
        let end = Request::new(NFNL_MSG_BATCH_END, NLM_F_REQUEST, &framing)
            .finish(0)
            .map_err(|e| NetError::other(op, e.to_string()))?;
        bytes.extend_from_slice(&end);
        self.0.raw(&bytes, op, |_, _| Ok(())).map(|_| ())
    }
}

/// Iterates the attributes in `data`: (type without flag bits, payload, the
/// whole encoded attribute).
pub(crate) fn attrs(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8], &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes([*data.first()?, *data.get(1)?]));
        let kind = u16::from_ne_bytes([*data.get(2)?, *data.get(3)?]) & NLA_TYPE_MASK;
        if len < 4 {
            return None;
        }
        let whole = data.get(..len)?;
        let payload = whole.get(4..)?;
        data = data.get((len + 3) & !3..).unwrap_or_default();
        Some((kind, payload, whole))
    })
}

/// The payload of the first attribute of type `kind`.
pub(crate) fn find_attr(data: &[u8], kind: u16) -> Option<&[u8]> {
    attrs(data).find(|(k, _, _)| *k == kind).map(|(_, p, _)| p)
}

/// A request the crates have no type for (see [`crate::nl`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed netlink message: {}", self.0)
    }
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One request being built: netlink header, family header, attributes.
/// Nested attributes are opened with [`Request::nest`] and closed with
/// [`Request::end`], which patches the container's length.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    buf: Vec<u8>,
    /// An attribute grew beyond 64 KiB; reported by [`Request::finish`].
    too_long: bool,
}

impl Request {
    /// A request of `kind` with `flags` and the family-specific `header`.
    pub(crate) fn new(kind: u16, flags: u16, header: &[u8]) -> Request {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(&[0u8; 4]);
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&[0u8; 8]);
        buf.extend_from_slice(header);
        buf.resize(align4(buf.len()), 0);
        Request {
            buf,
            too_long: false,
        }
    }

    /// Appends one attribute.
    pub(crate) fn attr(&mut self, kind: u16, data: &[u8]) -> &mut Request {
        let start = self.nest(kind);
        self.buf.extend_from_slice(data);
        self.end(start);
        self
    }

    /// Opens an attribute whose payload follows; returns its start for
    /// [`Request::end`].
    pub(crate) fn nest(&mut self, kind: u16) -> usize {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0u8; 2]);
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        start
    }

    /// Closes the attribute opened at `start`: writes its length and pads.
    pub(crate) fn end(&mut self, start: usize) {
        let len = self.buf.len().saturating_sub(start);
        let len16 = match u16::try_from(len) {
            Ok(l) => l,
            Err(_) => {
                self.too_long = true;
                u16::MAX
            }
        };
        if let Some(slot) = self.buf.get_mut(start..start + 2) {
            slot.copy_from_slice(&len16.to_ne_bytes());
        }
        self.buf.resize(align4(self.buf.len()), 0);
    }

    /// Appends raw bytes (a struct inside an attribute, or attributes that
    /// are already encoded), then pads.
    pub(crate) fn raw(&mut self, data: &[u8]) -> &mut Request {
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    /// Adds `flags` to the header's flags.
    pub(crate) fn add_flags(&mut self, flags: u16) {
        if let Some(slot) = self.buf.get_mut(6..8) {
            let now = u16::from_ne_bytes([slot[0], slot[1]]);
            slot.copy_from_slice(&(now | flags).to_ne_bytes());
        }
    }

    /// The finished message with sequence number `seq`.
    pub(crate) fn finish(mut self, seq: u32) -> Result<Vec<u8>, Malformed> {
        let len = u32::try_from(self.buf.len()).map_err(|_| Malformed("request too long"))?;
        if self.too_long {
            return Err(Malformed("attribute too long"));
        }
        if let Some(slot) = self.buf.get_mut(0..4) {
            slot.copy_from_slice(&len.to_ne_bytes());
        }
        if let Some(slot) = self.buf.get_mut(8..12) {
            slot.copy_from_slice(&seq.to_ne_bytes());
        }
        Ok(self.buf)
    }
}
