//! Hand-built netlink requests for the queries outside rtnetlink's links,
//! addresses and routes (route lookup, conntrack, nf_tables): a thin layer
//! over [`crate::rtnl`]'s blocking socket and message builder.

use crate::error::NetError;
use crate::nl::Socket;

pub(crate) use crate::rtnl::msg::{NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, Request};

/// Attribute type bits; the top two are the nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A blocking netlink socket bound to the calling thread's namespace.
pub(crate) struct Conn(Socket<()>);

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
