//! nfnetlink messages one body type at a time, as [`super::rtm`] does for
//! rtnetlink: [`Nfm<T>`] is a message type (`(subsystem << 8) | message`),
//! the `nfgenmsg` family and one of netlink-packet-netfilter's bodies
//! (nf_tables `ChainMessage`/`RuleMessage`, a `ConntrackMessage`), instead
//! of the crate's `NetfilterMessage`, whose parser links every subsystem's
//! (nflog, every nf_tables object kind).

use netlink_packet_core::{
    DecodeError, Emitable, NetlinkDeserializable, NetlinkHeader, NetlinkSerializable, Parseable,
    ParseableParametrized,
};
use netlink_packet_netfilter::conntrack::ConntrackMessage;
use netlink_packet_netfilter::nftables::{ChainMessage, RuleMessage};
use netlink_packet_netfilter::{NetfilterHeader, NetfilterProtoFamily};

/// `NFNL_MSG_BATCH_BEGIN`, `NFNL_MSG_BATCH_END`.
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;

/// `NFNL_SUBSYS_CTNETLINK`.
pub(crate) const SUBSYS_CTNETLINK: u16 = 1;
/// `NFNL_SUBSYS_NFTABLES`.
pub(crate) const SUBSYS_NFTABLES: u16 = 10;

/// Length of `struct nfgenmsg` (family, version, resource id).
const NFGENMSG_LEN: usize = 4;

/// A message body: encoded after the `nfgenmsg`, parsed by message type.
pub(crate) trait Body: Sized {
    fn len(&self) -> usize;
    fn emit(&self, buf: &mut [u8]);
    fn parse(message: u8, payload: &[u8]) -> Result<Self, DecodeError>;
}

impl Body for ChainMessage {
    fn len(&self) -> usize {
        self.attributes.as_slice().buffer_len()
    }
    fn emit(&self, buf: &mut [u8]) {
        self.attributes.as_slice().emit(buf)
    }
    fn parse(_: u8, payload: &[u8]) -> Result<Self, DecodeError> {
        <ChainMessage as Parseable<[u8]>>::parse(payload)
    }
}

impl Body for RuleMessage {
    fn len(&self) -> usize {
        self.attributes.as_slice().buffer_len()
    }
    fn emit(&self, buf: &mut [u8]) {
        self.attributes.as_slice().emit(buf)
    }
    fn parse(_: u8, payload: &[u8]) -> Result<Self, DecodeError> {
        <RuleMessage as Parseable<[u8]>>::parse(payload)
    }
}

impl Body for ConntrackMessage {
    fn len(&self) -> usize {
        Emitable::buffer_len(self)
    }
    fn emit(&self, buf: &mut [u8]) {
        Emitable::emit(self, buf)
    }
    fn parse(message: u8, payload: &[u8]) -> Result<Self, DecodeError> {
        ConntrackMessage::parse_with_param(payload, message)
    }
}

/// One nfnetlink message: type, `nfgenmsg` family (`NFPROTO_*`), body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Nfm<T>(pub(crate) u16, pub(crate) u8, pub(crate) T);

impl<T: Body> NetlinkSerializable for Nfm<T> {
    fn message_type(&self) -> u16 {
        self.0
    }

    fn buffer_len(&self) -> usize {
        NFGENMSG_LEN + self.2.len()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        // family, version NFNETLINK_V0, resource id 0.
        if let Some(family) = buffer.first_mut() {
            *family = self.1;
        }
        if let Some(body) = buffer.get_mut(NFGENMSG_LEN..) {
            self.2.emit(body)
        }
    }
}

impl<T: Body> NetlinkDeserializable for Nfm<T> {
    type Error = DecodeError;

    fn deserialize(header: &NetlinkHeader, payload: &[u8]) -> Result<Nfm<T>, DecodeError> {
        let (Some(&family), Some(body)) = (payload.first(), payload.get(NFGENMSG_LEN..)) else {
            return Err(DecodeError::buffer_too_small(payload.len(), NFGENMSG_LEN));
        };
        let kind = header.message_type;
        Ok(Nfm(kind, family, T::parse(kind as u8, body)?))
    }
}

/// One end of an nfnetlink batch (transaction) of `subsys`'s messages:
/// `NFNL_MSG_BATCH_BEGIN` or `_END`, an `nfgenmsg` whose resource id names
/// the subsystem, no body. (netlink-packet-netfilter has the bodies,
/// `ControlMessage::BatchBegin`/`BatchEnd`, which are empty, but sends
/// them only inside its `NetfilterMessage`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchEdge {
    pub(crate) end: bool,
    pub(crate) subsys: u16,
}

impl NetlinkSerializable for BatchEdge {
    fn message_type(&self) -> u16 {
        if self.end {
            NFNL_MSG_BATCH_END
        } else {
            NFNL_MSG_BATCH_BEGIN
        }
    }

    fn buffer_len(&self) -> usize {
        NFGENMSG_LEN
    }

    fn serialize(&self, buffer: &mut [u8]) {
        NetfilterHeader::new(NetfilterProtoFamily::Unspec, 0, self.subsys).emit(buffer)
    }
}
