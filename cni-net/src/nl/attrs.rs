//! Netlink attributes written into one buffer in one pass: a nested
//! attribute is opened with [`Attrs::nest`] and closed with [`Attrs::end`],
//! which writes its length then, once its contents are written.
//!
//! Why not netlink-packet-core's `Emitable` for the nesting: it writes a
//! nested attribute's header before its contents, so it measures the
//! contents first (`buffer_len`, then again for each element of a list),
//! at every level, and a leaf deep inside is measured many times: a leaf
//! of an nf_tables rule's expression about 20 times (`NFTA_DATA_VALUE` in
//! `NFTA_CMP_DATA` in `NFTA_EXPR_DATA` in `NFTA_LIST_ELEM` in
//! `NFTA_RULE_EXPRESSIONS`).
//! The leaves can still be the crates' typed attributes ([`Attrs::nla`]).

use netlink_packet_core::{NLA_F_NESTED, NLA_F_NET_BYTEORDER, NLA_TYPE_MASK, Nla};
use std::fmt;

/// A message or attribute list that could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(
    /// What was wrong.
    pub &'static str,
);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed netlink message: {}", self.0)
    }
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Appends `n` zero bytes to `buf`, copied from zeros: `Vec::resize` writes
/// them one at a time in the release build (opt-level "z" keeps the loop,
/// 6 instructions a byte: 0.44 M for the 70 KB of portmap's batch of 50
/// mappings).
pub(crate) fn extend_zeroed(buf: &mut Vec<u8>, n: usize) {
    const ZEROS: [u8; 256] = [0; 256];
    let mut left = n;
    while left > 0 {
        let k = left.min(ZEROS.len());
        buf.extend_from_slice(&ZEROS[..k]);
        left -= k;
    }
}

/// Attributes being written, each padded to 4 bytes.
#[derive(Debug, Clone, Default)]
pub struct Attrs {
    buf: Vec<u8>,
    /// An attribute grew beyond 64 KiB; reported by [`Attrs::finish`].
    too_long: bool,
}

impl Attrs {
    /// An empty list with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Attrs {
        Attrs {
            buf: Vec::with_capacity(capacity),
            too_long: false,
        }
    }

    /// Appends one attribute.
    pub fn attr(&mut self, kind: u16, data: &[u8]) -> &mut Attrs {
        let start = self.nest(kind);
        self.buf.extend_from_slice(data);
        self.end(start);
        self
    }

    /// Appends one attribute holding `text` and a NUL (`NLA_NUL_STRING`).
    pub fn cstr(&mut self, kind: u16, text: &str) -> &mut Attrs {
        let start = self.nest(kind);
        self.buf.extend_from_slice(text.as_bytes());
        self.buf.push(0);
        self.end(start);
        self
    }

    /// Appends `item`, an attribute a crate types, with the header its
    /// `Emitable` writes (the kind, with `NLA_F_NESTED` and
    /// `NLA_F_NET_BYTEORDER` as the item says) and the value it emits:
    /// the same bytes, its length measured once.
    pub fn nla<T: Nla>(&mut self, item: &T) -> &mut Attrs {
        let mut kind = item.kind() & NLA_TYPE_MASK;
        if item.is_network_byteorder() {
            kind |= NLA_F_NET_BYTEORDER;
        }
        if item.is_nested() {
            kind |= NLA_F_NESTED;
        }
        let start = self.nest(kind);
        let at = self.buf.len();
        extend_zeroed(&mut self.buf, item.value_len());
        if let Some(room) = self.buf.get_mut(at..) {
            item.emit_value(room);
        }
        self.end(start);
        self
    }

    /// Opens an attribute whose payload follows (`kind` with its flags,
    /// e.g. `NLA_F_NESTED`); returns its start for [`Attrs::end`].
    pub fn nest(&mut self, kind: u16) -> usize {
        let start = self.buf.len();
        let [k0, k1] = kind.to_ne_bytes();
        self.buf.extend_from_slice(&[0, 0, k0, k1]);
        start
    }

    /// Closes the attribute opened at `start`: writes its length and pads.
    pub fn end(&mut self, start: usize) {
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
    pub fn raw(&mut self, data: &[u8]) -> &mut Attrs {
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    /// How many bytes are written: where the next attribute starts.
    pub fn position(&self) -> usize {
        self.buf.len()
    }

    /// The bytes written from `start` (a [`Attrs::position`]) on.
    pub fn written_since(&self, start: usize) -> &[u8] {
        self.buf.get(start..).unwrap_or_default()
    }

    /// The bytes written; an error when an attribute outgrew its 16-bit
    /// length.
    pub fn finish(self) -> Result<Vec<u8>, Malformed> {
        if self.too_long {
            return Err(Malformed("attribute too long"));
        }
        Ok(self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::{DefaultNla, Emitable};

    /// The same bytes as netlink-packet-core's emit of the same nesting.
    #[test]
    fn nests_as_the_crate_emits() {
        let leaves = vec![
            DefaultNla::new(1, b"abc\0".to_vec()),
            DefaultNla::new(2, vec![7; 5]),
        ];
        let inner = DefaultNla::new(3 | NLA_F_NESTED, {
            let mut v = vec![0; leaves.as_slice().buffer_len()];
            leaves.as_slice().emit(&mut v);
            v
        });
        let outer = [DefaultNla::new(9, vec![1]), inner];
        let mut want = vec![0; outer.as_slice().buffer_len()];
        outer.as_slice().emit(&mut want);

        let mut a = Attrs::default();
        a.attr(9, &[1]);
        let n = a.nest(3 | NLA_F_NESTED);
        a.cstr(1, "abc").nla(&leaves[1]);
        a.end(n);
        assert_eq!(a.finish().unwrap(), want);
        // A typed attribute whose kind says nested, emitted whole.
        let mut a = Attrs::default();
        a.nla(&outer[1]);
        let mut want = vec![0; outer[1].buffer_len()];
        outer[1].emit(&mut want);
        assert_eq!(a.finish().unwrap(), want);
    }

    #[test]
    fn an_attribute_over_64_kib_is_an_error() {
        let mut a = Attrs::default();
        a.attr(1, &vec![0; 70_000]);
        assert!(a.finish().is_err());
    }
}
