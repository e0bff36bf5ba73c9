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

    /// Waits for one RCU grace period while holding nothing:
    /// `membarrier(MEMBARRIER_CMD_GLOBAL)`, which is the kernel's
    /// `synchronize_rcu()`. False where the kernel refuses it (CPUs in
    /// `nohz_full` mode, a kernel before 4.3): nothing waited.
    ///
    /// For a process that committed an nf_tables transaction, just before
    /// it exits (issue 30). Every commit leaves its transaction on the
    /// kernel's destroy list, freed by a work item after a grace period;
    /// and the release of any `NETLINK_NETFILTER` socket (at exit) waits
    /// for that work while holding the namespace's nf_tables commit mutex
    /// (`nft_rcv_nl_event`). In a storm the exits thus took a grace period
    /// each, one after another, with every commit waiting behind them.
    /// Waited here, outside the mutex, the grace periods of concurrent
    /// processes overlap, and the release finds the work done.
    #[allow(unsafe_code)]
    pub fn await_grace_period() -> bool {
        /// `MEMBARRIER_CMD_GLOBAL` (`linux/membarrier.h`).
        const MEMBARRIER_CMD_GLOBAL: nix::libc::c_long = 1;
        // SAFETY: membarrier(2) takes two integers and reads or writes no
        // memory of this process.
        let r =
            unsafe { nix::libc::syscall(nix::libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
        r == 0
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

    /// A dump (`msg` with `NLM_F_DUMP`) whose answers must be one
    /// consistent view, as [`NfSocket::request`] hands them to `each`:
    /// false when the kernel flags it as interrupted (`NLM_F_DUMP_INTR`: the
    /// table changed between two parts of the dump, and entries may be
    /// missing or repeated), and the caller must forget what `each` saw.
    pub fn dump_consistent<M: NetlinkSerializable>(
        &mut self,
        msg: &M,
        op: &str,
        each: impl FnMut(&NetlinkHeader, &[u8]) -> Result<(), String>,
    ) -> Result<bool, NetError> {
        let outcome = self
            .0
            .request(msg, netlink_packet_core::NLM_F_DUMP, op, each)?;
        Ok(outcome == crate::nl::socket::Outcome::Done)
    }

    /// Sends `msgs` in one datagram between `begin` and `end` (an
    /// nfnetlink batch, which nf_tables applies whole or not at all); only
    /// the last message asks for an ACK, so the answer is the first
    /// failure or that ACK. `flags` gives each message's flags (besides
    /// `NLM_F_REQUEST` and the last one's `NLM_F_ACK`). No messages:
    /// nothing is sent.
    pub fn batch<E: NetlinkSerializable, M: NetlinkSerializable>(
        &mut self,
        begin: &E,
        msgs: &[M],
        flags: impl Fn(&M) -> u16,
        end: &E,
        op: &str,
    ) -> Result<(), NetError> {
        self.0.batch(begin, msgs, flags, end, op)
    }
}
