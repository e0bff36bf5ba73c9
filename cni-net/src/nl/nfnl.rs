//! Hand-built netlink messages, for tests: crafted answers for the
//! parsers, and the bytes the crates' requests are compared with. The
//! product's requests are the crates' types ([`super::rtm`], and
//! `cni-fw`'s `nfm`, whose tests use this through the `test-support`
//! feature), with nf_tables rules' expressions written by [`Attrs`].

pub use super::attrs::{Attrs, Malformed};

/// One request being built: netlink header, family header, attributes
/// (an [`Attrs`] it dereferences to: [`Attrs::attr`], [`Attrs::nest`] and
/// [`Attrs::end`], …).
#[derive(Debug, Clone)]
pub struct Request(Attrs);

impl std::ops::Deref for Request {
    type Target = Attrs;
    fn deref(&self) -> &Attrs {
        &self.0
    }
}

impl std::ops::DerefMut for Request {
    fn deref_mut(&mut self) -> &mut Attrs {
        &mut self.0
    }
}

impl Request {
    /// A request of `kind` with `flags` and the family-specific `header`.
    pub fn new(kind: u16, flags: u16, header: &[u8]) -> Request {
        let mut attrs = Attrs::with_capacity(128);
        attrs
            .raw(&[0u8; 4])
            .raw(&[kind.to_ne_bytes(), flags.to_ne_bytes()].concat())
            .raw(&[0u8; 8])
            .raw(header);
        Request(attrs)
    }

    /// The finished message with sequence number `seq`.
    pub fn finish(self, seq: u32) -> Result<Vec<u8>, Malformed> {
        let mut buf = self.0.finish()?;
        let len = u32::try_from(buf.len()).map_err(|_| Malformed("request too long"))?;
        if let Some(slot) = buf.get_mut(0..4) {
            slot.copy_from_slice(&len.to_ne_bytes());
        }
        if let Some(slot) = buf.get_mut(8..12) {
            slot.copy_from_slice(&seq.to_ne_bytes());
        }
        Ok(buf)
    }
}
