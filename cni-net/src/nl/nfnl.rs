//! Hand-built netlink messages, for tests: crafted answers for the
//! parsers, and the bytes the crates' requests are compared with. The
//! product's requests are all the crates' types ([`super::rtm`], and
//! `cni-fw`'s `nfm`, whose tests use this through the `test-support`
//! feature).

use std::fmt;

/// A message that could not be built.
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

/// One request being built: netlink header, family header, attributes.
/// Nested attributes are opened with [`Request::nest`] and closed with
/// [`Request::end`], which patches the container's length.
#[derive(Debug, Clone)]
pub struct Request {
    buf: Vec<u8>,
    /// An attribute grew beyond 64 KiB; reported by [`Request::finish`].
    too_long: bool,
}

impl Request {
    /// A request of `kind` with `flags` and the family-specific `header`.
    pub fn new(kind: u16, flags: u16, header: &[u8]) -> Request {
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
    pub fn attr(&mut self, kind: u16, data: &[u8]) -> &mut Request {
        let start = self.nest(kind);
        self.buf.extend_from_slice(data);
        self.end(start);
        self
    }

    /// Opens an attribute whose payload follows; returns its start for
    /// [`Request::end`].
    pub fn nest(&mut self, kind: u16) -> usize {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0u8; 2]);
        self.buf.extend_from_slice(&kind.to_ne_bytes());
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
    pub fn raw(&mut self, data: &[u8]) -> &mut Request {
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    /// The finished message with sequence number `seq`.
    pub fn finish(mut self, seq: u32) -> Result<Vec<u8>, Malformed> {
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
