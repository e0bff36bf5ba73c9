//! A `NETLINK_NETFILTER` socket, the one way the netfilter codecs of
//! `cni-fw` (nf_tables rules and chains, conntrack) reach the kernel.
//!
//! This crate knows nothing of netfilter's messages: the caller encodes
//! them (any `netlink_packet_core::NetlinkSerializable`) and reads the
//! answers' payloads itself. What is here is the socket: sequence numbers,
//! framing, multipart dumps, errors with the kernel's extended-ACK text,
//! and nfnetlink batches, as [`Netlink`](crate::Netlink) has for
//! rtnetlink.

use crate::error::NetError;
use crate::nl::Socket;
use netlink_packet_core::{NetlinkHeader, NetlinkSerializable};

/// A `NETLINK_NETFILTER` socket in the namespace of the thread that opened
/// it (or one that sends nothing, for the fuzz targets and tests).
#[derive(Debug)]
pub struct NfSocket(Socket);

impl NfSocket {
    /// Opens a socket in the calling thread's namespace; `what` names it
    /// in error texts (`nf_tables`, `conntrack`).
    pub fn open(what: &'static str) -> Result<NfSocket, NetError> {
        Socket::open(netlink_sys::protocols::NETLINK_NETFILTER, what).map(NfSocket)
    }

    /// A socket that sends nothing and reads `answers` as the kernel's
    /// datagrams (see `Netlink::replay`): for the fuzz targets.
    #[doc(hidden)]
    pub fn replay(what: &'static str, answers: Vec<Vec<u8>>) -> NfSocket {
        NfSocket(Socket::replay(what, answers))
    }

    /// A socket that sends nothing and records every request, answered
    /// with an empty ACK or dump: for byte-level tests without root.
    #[cfg(any(test, feature = "test-support"))]
    pub fn capture(what: &'static str) -> NfSocket {
        NfSocket(Socket::capture(what))
    }

    /// The requests a [`NfSocket::capture`] socket recorded, each a whole
    /// netlink message.
    #[cfg(any(test, feature = "test-support"))]
    pub fn captured(&mut self) -> Vec<Vec<u8>> {
        self.0.captured()
    }

    /// Sends `msg` with `flags` (plus `NLM_F_REQUEST`) and hands every
    /// answer's header and payload (after the netlink header) to `each`,
    /// undecoded, until the ACK or the end of the dump. `op` is the error's
    /// text ("delete conntrack entry").
    pub fn request<M: NetlinkSerializable>(
        &mut self,
        msg: &M,
        flags: u16,
        op: &str,
        each: impl FnMut(&NetlinkHeader, &[u8]) -> Result<(), String>,
    ) -> Result<(), NetError> {
        self.0.request(msg, flags, op, each).map(|_| ())
    }

    /// Sends `msgs` in one datagram between `begin` and `end` (an
    /// nfnetlink batch, which nf_tables applies whole or not at all); only
    /// the last message asks for an ACK, so the answer is the first
    /// failure or that ACK. `flags` go on every message. No messages:
    /// nothing is sent.
    pub fn batch<E: NetlinkSerializable, M: NetlinkSerializable>(
        &mut self,
        begin: &E,
        msgs: &[M],
        flags: u16,
        end: &E,
        op: &str,
    ) -> Result<(), NetError> {
        self.0.batch(begin, msgs, flags, end, op)
    }
}
