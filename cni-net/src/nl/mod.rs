//! The netlink client under every kernel operation of this crate: the
//! message types of the rust-netlink crates (`netlink-packet-route`,
//! `netlink-packet-core`) over a blocking `netlink-sys` socket. No async
//! runtime: a plugin makes a handful of requests and exits.
//!
//! - [`Socket`] ([`socket`]): bound socket, sequence numbers,
//!   [`Socket::ack`] (create/set/delete), [`Socket::get`] (one object),
//!   [`Socket::dump`] (multipart until `NLMSG_DONE`, asked again on
//!   `NLM_F_DUMP_INTR`), errno plus the kernel's extended-ACK text in the
//!   [`NetError`](crate::NetError), a capture mode for byte-level tests,
//!   and a replay mode that reads canned datagrams as the kernel's answers
//!   (`Netlink::replay`, `NfTables::replay`: the fuzz targets in
//!   fuzz/bodies reach every answer parser through it).
//! - [`rtm`]: [`Rtm<T>`](rtm::Rtm), an rtnetlink message type with one of
//!   netlink-packet-route's message structs, instead of the crate's
//!   `RouteNetlinkMessage` enum (whose encoder and parser link every
//!   family's code into every binary).
//! - [`gaps`]: the few things the crates do not type, hand-written in one
//!   place, each naming the missing crate type.
//! - nfnetlink ([`crate::NfSocket`]): the same socket for `cni-fw`'s
//!   netfilter codecs, which encode their requests and read the answers
//!   themselves.
//!
//! # Adding an operation
//!
//! Operations are `impl Netlink` methods (the facade in [`crate::rtnl`]);
//! plugins never see netlink-packet-route types. In a new file of this
//! crate (e.g. `src/rtnl/tc.rs`, declared in `rtnl/mod.rs`):
//!
//! ```ignore
//! use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
//! use crate::nl::rtm::{Rtm, RTM_SETLINK};
//! use netlink_packet_route::link::{LinkMessage, LinkAttribute};
//!
//! impl Netlink {
//!     /// Sets the link's transmit queue length.
//!     pub fn set_txqlen(&self, link: &Link, len: u32) -> Result<(), NetError> {
//!         let mut msg = LinkMessage::default();      // structs are #[non_exhaustive]:
//!         msg.header.index = link.index;             // Default, then assign
//!         msg.attributes.push(LinkAttribute::TxQueueLen(len));
//!         self.route()                               // the locked Socket
//!             .ack(&Rtm(RTM_SETLINK, msg), 0, &format!("set {} txqlen", link.name))
//!     }
//! }
//! ```
//!
//! - create: `ack(&msg, NLM_F_CREATE | NLM_F_EXCL, op)` (without EXCL the
//!   kernel silently modifies an existing object of that name);
//! - get one object: `get(&msg, op)` → `Option<Rtm<T>>` (match the answer's
//!   type: `Some(Rtm(RTM_NEWLINK, m))`);
//! - list: `dump(|| request, op, |answer| Some(..))` keeps what the closure
//!   returns (parse into the facade's own small types there);
//! - `op` is the error's text ("create ifb ifb0"); treat "already gone"
//!   with `crate::rtnl::ok_if_missing` on DEL paths.
//!
//! A `Netlink` made by `Netlink::capture()` (tests only) records requests
//! instead of sending them: compare the bytes with what iproute2 sends.

pub mod attrs;
pub(crate) mod gaps;
#[cfg(any(test, feature = "test-support"))]
pub mod nfnl;
pub(crate) mod rtm;
pub(crate) mod socket;

pub(crate) use socket::Socket;

/// The socket of the facade (rtnetlink).
pub(crate) type RouteSocket = Socket;

/// The `netlink-sys` protocol numbers used here.
pub(crate) use netlink_sys::protocols::NETLINK_ROUTE;
