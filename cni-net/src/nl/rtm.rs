//! rtnetlink messages one family at a time: [`Rtm<T>`] is a message type
//! (`RTM_*`) and one of netlink-packet-route's message structs
//! (`LinkMessage`, `AddressMessage`, `RouteMessage`, `RuleMessage`,
//! `TcMessage`).
//!
//! Why not the crate's `RouteNetlinkMessage` enum: its encoder and parser
//! match on the message type at run time, so every binary that sent or
//! read any rtnetlink message linked the encoder and parser of every
//! family (neighbours, nsid, stats, tc actions and classes, routes with
//! their tunnel encapsulations, …), about 100 KB per plugin, although
//! tuning, say, only reads and sets links. Generic over the struct, a
//! request or answer of one family compiles to that family's code only.

use netlink_packet_core::{
    DecodeError, Emitable, NetlinkDeserializable, NetlinkHeader, NetlinkSerializable, Parseable,
};

// Message types (`include/uapi/linux/rtnetlink.h`). netlink-packet-route
// keeps its copies private.
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
pub(crate) const RTM_NEWRULE: u16 = 32;
pub(crate) const RTM_DELRULE: u16 = 33;
pub(crate) const RTM_GETRULE: u16 = 34;
pub(crate) const RTM_NEWQDISC: u16 = 36;
pub(crate) const RTM_DELQDISC: u16 = 37;
pub(crate) const RTM_GETQDISC: u16 = 38;
pub(crate) const RTM_NEWTFILTER: u16 = 44;
pub(crate) const RTM_GETTFILTER: u16 = 46;

/// One rtnetlink message: its type (`RTM_*`) and its body (`ifinfomsg`,
/// `ifaddrmsg`, … with the attributes), e.g. `Rtm(RTM_SETLINK, link_msg)`;
/// answers are matched the same way: `Rtm(RTM_NEWLINK, m)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rtm<T>(pub(crate) u16, pub(crate) T);

impl<T: Emitable> NetlinkSerializable for Rtm<T> {
    fn message_type(&self) -> u16 {
        self.0
    }

    fn buffer_len(&self) -> usize {
        self.1.buffer_len()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        self.1.emit(buffer)
    }
}

impl<T: Parseable<[u8]>> NetlinkDeserializable for Rtm<T> {
    type Error = DecodeError;

    fn deserialize(header: &NetlinkHeader, payload: &[u8]) -> Result<Rtm<T>, DecodeError> {
        Ok(Rtm(header.message_type, T::parse(payload)?))
    }
}
