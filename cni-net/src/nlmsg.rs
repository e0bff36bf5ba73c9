//! Hand-built netlink requests on a blocking socket, for the few kernel
//! queries the rtnetlink facade does not cover (route lookup, conntrack).
//! No async runtime is started: a request is one `send` and a few `recv`s.

use crate::error::NetError;
use rtnetlink::sys::{Socket, SocketAddr};

pub(crate) const NLMSG_HDRLEN: usize = 16;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
pub(crate) const NLM_F_REQUEST: u16 = 0x1;
pub(crate) const NLM_F_ACK: u16 = 0x4;
pub(crate) const NLM_F_DUMP: u16 = 0x300;
/// Attribute type bits; the top two are the nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3fff;

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One request being built: header, family header, attributes.
pub(crate) struct Request {
    buf: Vec<u8>,
}

impl Request {
    /// A request of `kind` with `flags` and the family-specific `header`.
    pub(crate) fn new(kind: u16, flags: u16, header: &[u8]) -> Request {
        let mut buf = vec![0u8; NLMSG_HDRLEN];
        buf[4..6].copy_from_slice(&kind.to_ne_bytes());
        buf[6..8].copy_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(header);
        buf.resize(align4(buf.len()), 0);
        Request { buf }
    }

    /// Appends one attribute.
    pub(crate) fn attr(&mut self, kind: u16, data: &[u8]) {
        let len = 4 + data.len();
        // Attribute payloads here are addresses and small structs.
        let len16 = u16::try_from(len).unwrap_or(u16::MAX);
        self.buf.extend_from_slice(&len16.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
    }

    /// Appends attributes that are already encoded (and aligned).
    pub(crate) fn raw(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
    }

    fn finish(mut self, seq: u32) -> Vec<u8> {
        let len = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf[8..12].copy_from_slice(&seq.to_ne_bytes());
        self.buf
    }
}

/// A blocking netlink socket bound to the calling thread's namespace.
pub(crate) struct Conn {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
    what: &'static str,
}

impl Conn {
    /// Opens a socket of netlink `protocol` (`NETLINK_ROUTE`, `NETLINK_NETFILTER`).
    pub(crate) fn open(protocol: isize, what: &'static str) -> Result<Conn, NetError> {
        let mut sock = Socket::new(protocol).map_err(|e| NetError::io(format!("open {what} netlink socket"), e))?;
        sock.bind_auto()
            .map_err(|e| NetError::io(format!("bind {what} netlink socket"), e))?;
        Ok(Conn {
            sock,
            seq: 0,
            buf: Vec::with_capacity(256 * 1024),
            what,
        })
    }

    /// Sends `req` and hands every answer message (type, payload after the
    /// netlink header) to `each`, until the dump's DONE or the ACK. A kernel
    /// error becomes [`NetError`] with its errno.
    pub(crate) fn request(
        &mut self,
        req: Request,
        op: &str,
        mut each: impl FnMut(u16, &[u8]),
    ) -> Result<(), NetError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let msg = req.finish(seq);
        self.sock
            .send_to(&msg, &SocketAddr::new(0, 0), 0)
            .map_err(|e| NetError::io(format!("{op}: send to {}", self.what), e))?;
        loop {
            self.buf.clear();
            let n = self
                .sock
                .recv(&mut self.buf, 0)
                .map_err(|e| NetError::io(format!("{op}: receive from {}", self.what), e))?;
            if n > self.buf.len() {
                return Err(NetError::other(op, "netlink answer truncated"));
            }
            let mut rest: &[u8] = &self.buf;
            while rest.len() >= NLMSG_HDRLEN {
                let len = u32_at(rest, 0) as usize;
                if len < NLMSG_HDRLEN || len > rest.len() {
                    return Err(NetError::other(op, "malformed netlink message"));
                }
                let kind = u16::from_ne_bytes([rest[4], rest[5]]);
                let mseq = u32_at(rest, 8);
                let payload = &rest[NLMSG_HDRLEN..len];
                rest = rest.get(align4(len)..).unwrap_or_default();
                if mseq != seq || kind == NLMSG_NOOP {
                    continue;
                }
                match kind {
                    NLMSG_ERROR | NLMSG_DONE => {
                        let code = payload.get(0..4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        return match code {
                            Some(c) if c < 0 => Err(NetError::errno(op, -c)),
                            _ => Ok(()),
                        };
                    }
                    _ => each(kind, payload),
                }
            }
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_ne_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

/// Iterates the attributes in `data`: (type without flag bits, payload, the
/// whole encoded attribute).
pub(crate) fn attrs(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8], &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([data[0], data[1]]));
        if len < 4 || len > data.len() {
            return None;
        }
        let kind = u16::from_ne_bytes([data[2], data[3]]) & NLA_TYPE_MASK;
        let whole = &data[..len];
        let payload = &data[4..len];
        data = data.get(align4(len)..).unwrap_or_default();
        Some((kind, payload, whole))
    })
}

/// The payload of the first attribute of type `kind`.
pub(crate) fn find_attr(data: &[u8], kind: u16) -> Option<&[u8]> {
    attrs(data).find(|(k, _, _)| *k == kind).map(|(_, p, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_walks_attributes() {
        let mut r = Request::new(26, NLM_F_REQUEST, &[2, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        r.attr(1, &[10, 0, 0, 1]);
        r.attr(7, &[1, 2, 3]);
        let msg = r.finish(9);
        assert_eq!(msg.len(), 16 + 12 + 8 + 8);
        assert_eq!(u32_at(&msg, 0) as usize, msg.len());
        assert_eq!(u32_at(&msg, 8), 9);
        let body = &msg[28..];
        let got: Vec<(u16, Vec<u8>)> = attrs(body).map(|(k, p, _)| (k, p.to_vec())).collect();
        assert_eq!(got, vec![(1, vec![10, 0, 0, 1]), (7, vec![1, 2, 3])]);
        assert_eq!(find_attr(body, 7), Some(&[1u8, 2, 3][..]));
        assert_eq!(find_attr(body, 3), None);
        // Truncated input stops the walk instead of reading past the end.
        assert_eq!(attrs(&body[..6]).count(), 0);
    }
}
