//! Netlink message encoding and decoding: the `nlmsghdr` framing, request
//! building with (nested) attributes, and bounds-checked attribute walking.
//!
//! Everything here is pure (no sockets), so the exact bytes are unit-tested.
//! Decoding never panics: a short header or an attribute running past its
//! container is a [`Malformed`] error.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[cfg(test)]
pub(crate) const NLMSG_HDRLEN: usize = 16;

pub(crate) const NLM_F_REQUEST: u16 = 0x1;
pub(crate) const NLM_F_ACK: u16 = 0x4;
pub(crate) const NLM_F_DUMP: u16 = 0x300;
pub(crate) const NLM_F_EXCL: u16 = 0x200;
pub(crate) const NLM_F_CREATE: u16 = 0x400;

/// Set on the type of an attribute whose payload is attributes.
pub(crate) const NLA_F_NESTED: u16 = 0x8000;
/// Attribute type bits; the top two are the nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3fff;

pub(crate) const AF_UNSPEC: u8 = 0;
pub(crate) const AF_INET: u8 = 2;
pub(crate) const AF_BRIDGE: u8 = 7;
pub(crate) const AF_INET6: u8 = 10;

pub(crate) const RTM_NEWLINK: u16 = 16;
pub(crate) const RTM_DELLINK: u16 = 17;
pub(crate) const RTM_GETLINK: u16 = 18;
pub(crate) const RTM_SETLINK: u16 = 19;
pub(crate) const RTM_NEWADDR: u16 = 20;
pub(crate) const RTM_DELADDR: u16 = 21;
pub(crate) const RTM_GETADDR: u16 = 22;
pub(crate) const RTM_NEWROUTE: u16 = 24;
pub(crate) const RTM_DELROUTE: u16 = 25;
pub(crate) const RTM_GETROUTE: u16 = 26;

/// A reply the kernel should never send: too short, or an attribute that
/// runs past its container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed netlink message: {}", self.0)
    }
}

pub(crate) const fn align4(n: usize) -> usize {
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

    pub(crate) fn attr_u8(&mut self, kind: u16, v: u8) -> &mut Request {
        self.attr(kind, &[v])
    }

    pub(crate) fn attr_u32(&mut self, kind: u16, v: u32) -> &mut Request {
        self.attr(kind, &v.to_ne_bytes())
    }

    /// A NUL-terminated string attribute (`IFLA_IFNAME`, `IFLA_INFO_KIND`).
    pub(crate) fn attr_str(&mut self, kind: u16, s: &str) -> &mut Request {
        let start = self.nest(kind);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
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

    /// The family header and attributes, without the netlink header.
    #[cfg(test)]
    pub(crate) fn payload(&self) -> &[u8] {
        self.buf.get(NLMSG_HDRLEN..).unwrap_or_default()
    }

    /// The message type.
    #[cfg(test)]
    pub(crate) fn kind(&self) -> u16 {
        u16_at(&self.buf, 4).unwrap_or(0)
    }

    /// The netlink header flags.
    #[cfg(test)]
    pub(crate) fn flags(&self) -> u16 {
        u16_at(&self.buf, 6).unwrap_or(0)
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

/// Walks the attributes in `data`: (type without flag bits, payload). An
/// attribute running past the end yields one error and ends the walk.
pub(crate) fn attrs(mut data: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), Malformed>> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            // Trailing padding shorter than a header is ignored.
            return None;
        }
        let len = usize::from(u16_at(data, 0).unwrap_or(0));
        let kind = u16_at(data, 2).unwrap_or(0) & NLA_TYPE_MASK;
        match data.get(4..len) {
            Some(payload) if len >= 4 => {
                data = data.get(align4(len)..).unwrap_or_default();
                Some(Ok((kind, payload)))
            }
            _ => {
                data = &[];
                Some(Err(Malformed("attribute length out of bounds")))
            }
        }
    })
}

/// The payload of the first attribute of type `kind`.
#[cfg(test)]
pub(crate) fn find_attr(data: &[u8], kind: u16) -> Result<Option<&[u8]>, Malformed> {
    for a in attrs(data) {
        let (k, p) = a?;
        if k == kind {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Result<u16, Malformed> {
    match b.get(at..at + 2) {
        Some(&[x, y]) => Ok(u16::from_ne_bytes([x, y])),
        _ => Err(Malformed("short u16")),
    }
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Result<u32, Malformed> {
    match b.get(at..at + 4) {
        Some(&[a, c, d, e]) => Ok(u32::from_ne_bytes([a, c, d, e])),
        _ => Err(Malformed("short u32")),
    }
}

pub(crate) fn u8_at(b: &[u8], at: usize) -> Result<u8, Malformed> {
    b.get(at).copied().ok_or(Malformed("short u8"))
}

/// A string attribute up to its first NUL.
pub(crate) fn cstr(p: &[u8]) -> String {
    let s = p.split(|b| *b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(s).into_owned()
}

/// An address attribute of `family`; the length must match.
pub(crate) fn ip_of(family: u8, p: &[u8]) -> Result<IpAddr, Malformed> {
    match (family, p.len()) {
        (AF_INET, 4) => {
            let mut o = [0u8; 4];
            o.copy_from_slice(p);
            Ok(IpAddr::V4(Ipv4Addr::from(o)))
        }
        (AF_INET6, 16) => {
            let mut o = [0u8; 16];
            o.copy_from_slice(p);
            Ok(IpAddr::V6(Ipv6Addr::from(o)))
        }
        _ => Err(Malformed("address length does not match family")),
    }
}

/// The family and bytes of an address.
pub(crate) fn ip_bytes(ip: &IpAddr) -> (u8, Vec<u8>) {
    match ip {
        IpAddr::V4(a) => (AF_INET, a.octets().to_vec()),
        IpAddr::V6(a) => (AF_INET6, a.octets().to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_nested_attributes_and_walks_them() {
        let mut r = Request::new(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, &[0u8; 16]);
        r.attr_str(3, "br0");
        let outer = r.nest(18);
        r.attr_str(1, "bridge");
        let inner = r.nest(2);
        r.attr_u8(7, 1);
        r.end(inner);
        r.end(outer);
        assert_eq!(r.kind(), RTM_NEWLINK);
        assert_eq!(r.flags(), 5);
        let msg = r.clone().finish(9).unwrap();
        // 16 header + 16 ifinfomsg + 8 ("br0\0") + (4 + 12 + (4 + 8)) linkinfo
        assert_eq!(msg.len(), 16 + 16 + 8 + 28);
        assert_eq!(u32_at(&msg, 0).unwrap() as usize, msg.len());
        assert_eq!(u32_at(&msg, 8).unwrap(), 9);
        let body = &msg[32..];
        let got: Vec<(u16, Vec<u8>)> = attrs(body)
            .map(|a| a.unwrap())
            .map(|(k, p)| (k, p.to_vec()))
            .collect();
        assert_eq!(got[0], (3, b"br0\0".to_vec()));
        assert_eq!(got[1].0, 18);
        let info = &got[1].1;
        assert_eq!(cstr(find_attr(info, 1).unwrap().unwrap()), "bridge");
        let data = find_attr(info, 2).unwrap().unwrap();
        assert_eq!(find_attr(data, 7).unwrap(), Some(&[1u8][..]));
        assert_eq!(find_attr(data, 8).unwrap(), None);
        assert_eq!(r.payload().len(), msg.len() - 16);
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        let mut r = Request::new(RTM_NEWADDR, NLM_F_REQUEST, &[0u8; 8]);
        r.attr(1, &[10, 0, 0, 1]);
        let msg = r.finish(1).unwrap();
        let body = &msg[24..];
        assert!(attrs(&body[..6]).next().unwrap().is_err());
        assert!(find_attr(&body[..6], 9).is_err());
        // A declared length below the header size.
        assert!(attrs(&[2, 0, 1, 0, 0, 0]).next().unwrap().is_err());
        assert!(ip_of(AF_INET, &[1, 2, 3]).is_err());
        assert_eq!(
            ip_of(AF_INET6, &[0; 16]).unwrap(),
            "::".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn oversized_attribute_is_refused() {
        let mut r = Request::new(RTM_NEWLINK, NLM_F_REQUEST, &[0u8; 16]);
        r.attr(1, &vec![0u8; 70_000]);
        assert!(r.finish(1).is_err());
    }
}
