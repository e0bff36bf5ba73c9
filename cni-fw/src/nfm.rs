//! nfnetlink requests one body type at a time, as `cni-net`'s `nl::rtm` does
//! for rtnetlink: an [`Nfm<T>`] is a message type (`(subsystem << 8) |
//! message`), the `nfgenmsg` header ([`NetfilterHeader`]) and one of
//! netlink-packet-netfilter's bodies: nf_tables' `ChainMessage` and
//! `RuleMessage`, a `ConntrackMessage`, or the `ControlMessage` that opens
//! and closes a batch.
//!
//! Why not the crate's `NetfilterMessage`: its encoder and parser match on
//! the subsystem at run time, so every binary would link nflog's and every
//! nf_tables object kind's code (portmap +123 KB; typed per body +69 KB).
//!
//! Requests only. Answers are read lazily by the callers
//! ([`NfSocket::request`] hands them over undecoded), attribute by attribute
//! with the crate's leaf types: its `RuleMessage` parser formats every
//! expression's bytes with `{:?}` whether or not anything fails, which
//! made portmap ADD 1.25x and firewall ADD up to 1.72x slower (see
//! [`crate::nf_tables`]).

use cni_net::NetError;
use cni_net::NfSocket;
use netlink_packet_core::{Emitable, NetlinkSerializable};
use netlink_packet_netfilter::conntrack::ConntrackMessage;
use netlink_packet_netfilter::nftables::{ChainMessage, NfTablesMessageType, RuleMessage};
use netlink_packet_netfilter::none::ControlMessage;
use netlink_packet_netfilter::{NetfilterHeader, NetfilterProtoFamily, NetfilterSubsystem};

/// The body of an nfnetlink message, after its `nfgenmsg`.
pub(crate) trait NfBody {
    fn body_len(&self) -> usize;
    fn emit_body(&self, buf: &mut [u8]);
}

impl NfBody for ChainMessage {
    fn body_len(&self) -> usize {
        self.attributes.as_slice().buffer_len()
    }
    fn emit_body(&self, buf: &mut [u8]) {
        self.attributes.as_slice().emit(buf)
    }
}

impl NfBody for RuleMessage {
    fn body_len(&self) -> usize {
        self.attributes.as_slice().buffer_len()
    }
    fn emit_body(&self, buf: &mut [u8]) {
        self.attributes.as_slice().emit(buf)
    }
}

impl NfBody for ConntrackMessage {
    fn body_len(&self) -> usize {
        self.buffer_len()
    }
    fn emit_body(&self, buf: &mut [u8]) {
        self.emit(buf)
    }
}

impl NfBody for ControlMessage {
    fn body_len(&self) -> usize {
        self.buffer_len()
    }
    fn emit_body(&self, buf: &mut [u8]) {
        self.emit(buf)
    }
}

/// A body already encoded: its attributes' bytes (an nf_tables rule
/// written by `iptables_nft` with `cni_net::Attrs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Encoded(pub(crate) Vec<u8>);

impl NfBody for Encoded {
    fn body_len(&self) -> usize {
        self.0.len()
    }
    fn emit_body(&self, buf: &mut [u8]) {
        if let Some(to) = buf.get_mut(..self.0.len()) {
            to.copy_from_slice(&self.0);
        }
    }
}

/// A rule or a chain message, for a batch that changes both (a chain
/// deleted with the rules that jump to it, a chain created with its rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RuleOrChain {
    Rule(RuleMessage),
    /// A rule encoded already (`NFT_MSG_NEWRULE`'s body).
    Encoded(Encoded),
    Chain(ChainMessage),
}

impl NfBody for RuleOrChain {
    fn body_len(&self) -> usize {
        match self {
            RuleOrChain::Rule(r) => r.body_len(),
            RuleOrChain::Encoded(r) => r.body_len(),
            RuleOrChain::Chain(c) => c.body_len(),
        }
    }
    fn emit_body(&self, buf: &mut [u8]) {
        match self {
            RuleOrChain::Rule(r) => r.emit_body(buf),
            RuleOrChain::Encoded(r) => r.emit_body(buf),
            RuleOrChain::Chain(c) => c.emit_body(buf),
        }
    }
}

/// One nfnetlink request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Nfm<T> {
    /// `(subsystem << 8) | message type`.
    pub(crate) kind: u16,
    pub(crate) header: NetfilterHeader,
    pub(crate) body: T,
}

fn message_type(subsys: NetfilterSubsystem, message: u8) -> u16 {
    (u16::from(u8::from(subsys)) << 8) | u16::from(message)
}

impl<T> Nfm<T> {
    /// An nf_tables message of `family`'s tables.
    pub(crate) fn nftables(
        kind: NfTablesMessageType,
        family: NetfilterProtoFamily,
        body: T,
    ) -> Self {
        Nfm {
            kind: message_type(NetfilterSubsystem::NfTables, kind.into()),
            header: NetfilterHeader::new(family, 0, 0),
            body,
        }
    }
}

impl Nfm<ConntrackMessage> {
    /// A ctnetlink message about `family`'s entries (`Unspec`: all).
    pub(crate) fn conntrack(family: NetfilterProtoFamily, body: ConntrackMessage) -> Self {
        Nfm {
            kind: message_type(NetfilterSubsystem::Conntrack, body.message_type().into()),
            header: NetfilterHeader::new(family, 0, 0),
            body,
        }
    }
}

impl Nfm<ControlMessage> {
    /// `NFNL_MSG_BATCH_BEGIN` (`end` false) or `_END` of a batch of
    /// `subsys`'s messages: the `nfgenmsg`'s resource id names the
    /// subsystem.
    fn batch_edge(subsys: NetfilterSubsystem, end: bool) -> Self {
        let body = if end {
            ControlMessage::BatchEnd
        } else {
            ControlMessage::BatchBegin
        };
        Nfm {
            kind: message_type(NetfilterSubsystem::None, body.message_type().into()),
            header: NetfilterHeader::new(
                NetfilterProtoFamily::Unspec,
                0,
                u16::from(u8::from(subsys)),
            ),
            body,
        }
    }
}

impl<T: NfBody> NetlinkSerializable for Nfm<T> {
    fn message_type(&self) -> u16 {
        self.kind
    }

    fn buffer_len(&self) -> usize {
        self.header.buffer_len() + self.body.body_len()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        let at = self.header.buffer_len();
        if let Some((head, body)) = buffer.split_at_mut_checked(at) {
            self.header.emit(head);
            self.body.emit_body(body);
        }
    }
}

/// Sends `msgs` (requests of nf_tables, which applies all of them or
/// none) as one batch on `socket`. `M` is any nfnetlink message, e.g.
/// `Nfm<RuleMessage>`, or an enum of several when a batch mixes bodies.
/// `flags` gives each message's flags (see [`NfSocket::batch`]).
pub(crate) fn nftables_batch<M: NetlinkSerializable>(
    socket: &mut NfSocket,
    msgs: &[M],
    flags: impl Fn(&M) -> u16,
    op: &str,
) -> Result<(), NetError> {
    let subsys = NetfilterSubsystem::NfTables;
    socket.batch(
        &Nfm::batch_edge(subsys, false),
        msgs,
        flags,
        &Nfm::batch_edge(subsys, true),
        op,
    )
}

/// [`nftables_batch`] of a batch that deletes (rules, chains): the kernel
/// frees what it deleted after an RCU grace period, which the exit of
/// this process then waits for (see [`crate::settle`]). Notes whether the
/// commit waited for the kernel's commit mutex (it took longer than
/// [`CONTENDED_AFTER`]): other processes are committing and exiting at
/// the same time, a storm.
pub(crate) fn nftables_delete_batch<M: NetlinkSerializable>(
    socket: &mut NfSocket,
    msgs: &[M],
    op: &str,
) -> Result<(), NetError> {
    let start = std::time::Instant::now();
    let done = nftables_batch(socket, msgs, |_| 0, op);
    DELETED.store(true, std::sync::atomic::Ordering::Relaxed);
    if start.elapsed() > CONTENDED_AFTER {
        CONTENDED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    done
}

/// A deleting commit alone takes 0.1-0.3 ms here; in a storm of 50 DELs
/// 8-22 ms, waiting for the commit mutex.
const CONTENDED_AFTER: std::time::Duration = std::time::Duration::from_millis(2);

/// Whether a deleting commit of this process waited (see
/// [`nftables_delete_batch`]).
static CONTENDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process sent a deleting batch.
static DELETED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// True once this process has sent a deleting batch.
pub(crate) fn deleted() -> bool {
    DELETED.load(std::sync::atomic::Ordering::Relaxed)
}

/// True once a deleting commit of this process waited for the mutex.
pub(crate) fn deleted_in_a_crowd() -> bool {
    CONTENDED.load(std::sync::atomic::Ordering::Relaxed)
}
