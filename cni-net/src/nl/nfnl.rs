//! What stays hand-written of nfnetlink: a bounds-checked attribute walker
//! for nf_tables rule answers, and (tests only) a builder of hand-made
//! messages. The requests are netlink-packet-netfilter's types
//! ([`super::nfm`]); conntrack answers are read with its types.
//!
//! Why rules are not read with the crate's `RuleMessage` parser (0.4):
//! it was used twice, and an A/B of the release builds (scripts/bench
//! with RCNI_REF_DIR, 200 runs per side) measured portmap ADD 1.25x (50
//! mappings 1.14x), firewall ADD 1.17x and with same-bridge isolation
//! 1.72x of this walker: it builds an owned value for every expression
//! attribute and formats the bytes with `{:?}` for an error context on
//! every attribute it reads, whether or not the parse fails
//! (`nftables/attributes/expression.rs`, `list.rs`).

#[cfg(test)]
use std::fmt;

/// Attribute type bits; the top two are the nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3fff;

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

/// A message that could not be built.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

#[cfg(test)]
impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed netlink message: {}", self.0)
    }
}

#[cfg(test)]
const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One request being built: netlink header, family header, attributes.
/// Nested attributes are opened with [`Request::nest`] and closed with
/// [`Request::end`], which patches the container's length.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct Request {
    buf: Vec<u8>,
    /// An attribute grew beyond 64 KiB; reported by [`Request::finish`].
    too_long: bool,
}

#[cfg(test)]
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
