//! The blocking netlink client: one request out, its answers in.
//!
//! A [`Socket`] speaks one netlink family; each request names its message
//! type (for `NETLINK_ROUTE`, an [`Rtm`](super::rtm::Rtm) of one family, so
//! that a binary links only the encoders and parsers it uses). It belongs
//! to the network
//! namespace of the thread that created it, for its whole life. Every
//! request carries a fresh sequence number; answers with another sequence
//! number, or not sent by the kernel (port 0), are skipped. The exchange
//! ends with the ACK (`NLMSG_ERROR` with code 0), a kernel error (errno plus
//! the extended-ACK text, as [`NetError::Os`]), or the `NLMSG_DONE` of a
//! dump. The two terminators are read here, before the crate sees them, so
//! that a negative code in `NLMSG_DONE` (a dump failing midway) is not lost.

use super::gaps::{ExtAck, NLMSG_HDRLEN, align4};
use crate::error::NetError;
use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP,
    NetlinkDeserializable, NetlinkHeader, NetlinkSerializable,
};
use netlink_sys::{Socket as SysSocket, SocketAddr};
use std::collections::VecDeque;
use std::io;

/// How often a dump is repeated when the kernel flags it inconsistent.
const DUMP_RETRIES: usize = 5;

/// A blocking netlink socket.
pub(crate) struct Socket {
    /// `None` in replay mode: nothing is sent, requests are recorded (in
    /// tests) and answered from `canned`.
    sys: Option<SysSocket>,
    /// Replay mode's answers, datagram by datagram.
    canned: VecDeque<Vec<u8>>,
    seq: u32,
    recv: Vec<u8>,
    send: Vec<u8>,
    /// Names the family in error texts ("route", "netfilter").
    what: &'static str,
    /// Kept open until the process exits instead of closed when dropped,
    /// and reused (netfilter sockets: see [`LINGERING`]).
    linger: bool,
    /// The namespace the socket belongs to, when it may be reused.
    ns: Option<(u64, u64)>,
    /// The requests of replay mode, for tests to compare.
    #[cfg(any(test, feature = "test-support"))]
    captured: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket")
            .field("what", &self.what)
            .field("seq", &self.seq)
            .field("replay", &self.sys.is_none())
            .finish_non_exhaustive()
    }
}

/// How an exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The ACK, or the end of a dump.
    Done,
    /// A dump whose data changed while it ran (`NLM_F_DUMP_INTR`): the
    /// answers may be inconsistent; ask again.
    Interrupted,
}

/// Why an exchange failed, before the operation's name is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The kernel refused: errno (positive) and its explanation.
    Kernel(i32, ExtAck),
    /// An answer that is not valid netlink, or that the crate could not
    /// decode.
    Decode(String),
}

impl Failure {
    fn into_error(self, op: &str) -> NetError {
        match self {
            Failure::Kernel(errno, ack) => NetError::kernel(op, errno, ack.msg),
            Failure::Decode(text) => NetError::other(op, text),
        }
    }
}

/// What an exchange hands each answer to: its header and the payload
/// after the netlink header. An `Err` text fails the exchange (after the
/// rest of the answer is drained).
pub(crate) type OnAnswer<'a> = dyn FnMut(&NetlinkHeader, &[u8]) -> Result<(), String> + 'a;

/// The receiving half of one exchange, fed datagram by datagram. Pure, so
/// the terminator and extended-ACK handling are tested on crafted bytes.
#[derive(Debug)]
pub(crate) struct Exchange {
    seq: u32,
    /// A GET without ACK: the first answer ends the exchange.
    single: bool,
    interrupted: bool,
    /// The first answer that failed to decode; reported at the terminator
    /// so that the rest of the answer is drained first.
    failed: Option<String>,
}

impl Exchange {
    pub(crate) fn new(seq: u32) -> Exchange {
        Exchange {
            seq,
            single: false,
            interrupted: false,
            failed: None,
        }
    }

    /// Walks one datagram. Hands every answer of this exchange (header,
    /// payload after the netlink header) to `each`. Returns the outcome once
    /// a terminator is seen, `None` when more datagrams follow.
    pub(crate) fn feed(
        &mut self,
        mut datagram: &[u8],
        each: &mut OnAnswer<'_>,
    ) -> Result<Option<Outcome>, Failure> {
        while !datagram.is_empty() {
            let head = |at: usize| -> Result<[u8; 4], Failure> {
                match datagram.get(at..at + 4) {
                    Some(&[a, b, c, d]) => Ok([a, b, c, d]),
                    _ => Err(Failure::Decode(
                        "netlink message shorter than its header".into(),
                    )),
                }
            };
            let len = u32::from_ne_bytes(head(0)?) as usize;
            let [t0, t1, f0, f1] = head(4)?;
            let seq = u32::from_ne_bytes(head(8)?);
            let port = u32::from_ne_bytes(head(12)?);
            if len < NLMSG_HDRLEN || len > datagram.len() {
                return Err(Failure::Decode(format!(
                    "netlink message length {len} out of bounds ({} bytes left)",
                    datagram.len()
                )));
            }
            let mut header = NetlinkHeader::default();
            header.length = len as u32;
            header.message_type = u16::from_ne_bytes([t0, t1]);
            header.flags = u16::from_ne_bytes([f0, f1]);
            header.sequence_number = seq;
            header.port_number = port;
            let payload = datagram.get(NLMSG_HDRLEN..len).unwrap_or_default();
            datagram = datagram.get(align4(len)..).unwrap_or_default();

            if seq != self.seq || header.message_type == NLMSG_NOOP {
                continue;
            }
            if header.flags & NLM_F_DUMP_INTR != 0 {
                self.interrupted = true;
            }
            match header.message_type {
                NLMSG_ERROR | NLMSG_DONE => {
                    // An old kernel's NLMSG_DONE may carry no code.
                    let code = match payload.get(..4) {
                        Some(&[a, b, c, d]) => i32::from_ne_bytes([a, b, c, d]),
                        _ => 0,
                    };
                    if code < 0 {
                        let is_error = header.message_type == NLMSG_ERROR;
                        let ack = ExtAck::parse(header.flags, payload, is_error);
                        return Err(Failure::Kernel(code.saturating_neg(), ack));
                    }
                    if let Some(text) = self.failed.take() {
                        return Err(Failure::Decode(text));
                    }
                    return Ok(Some(if self.interrupted {
                        Outcome::Interrupted
                    } else {
                        Outcome::Done
                    }));
                }
                _ => {
                    if self.failed.is_none()
                        && let Err(text) = each(&header, payload)
                    {
                        self.failed = Some(text);
                    }
                    if self.single {
                        return match self.failed.take() {
                            Some(text) => Err(Failure::Decode(text)),
                            None => Ok(Some(Outcome::Done)),
                        };
                    }
                }
            }
        }
        Ok(None)
    }
}

/// Writes `seq` into the header of every message in `buf` (one request,
/// or an nfnetlink batch of several: the kernel answers each message with
/// its own sequence number, and [`Exchange`] reads only this exchange's).
fn stamp_seq(buf: &mut [u8], seq: u32) {
    let mut at = 0;
    while let Some(len) = buf.get(at..at + 4) {
        let len = u32::from_ne_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if let Some(slot) = buf.get_mut(at + 8..at + 12) {
            slot.copy_from_slice(&seq.to_ne_bytes());
        }
        if len < NLMSG_HDRLEN {
            break;
        }
        at += align4(len);
    }
}

/// Netfilter sockets dropped by this process, left open until it exits,
/// and handed out again to the next netfilter socket opened in the same
/// network namespace.
///
/// Closing a bound `NETLINK_NETFILTER` socket is not free: the kernel's
/// release notifier for nf_tables (`nft_rcv_nl_event`) takes the commit
/// mutex and, while deleted rules or chains of any process await their
/// RCU grace period, waits for that destruction work to finish: 10-50 ms
/// here whenever other DELs run, for a socket that only read, with every
/// nf_tables transaction of the node (any process's) queued behind that
/// mutex meanwhile. A socket closed where it is dropped is closed inside
/// whatever the caller holds, typically the host-wide lock of portmap or
/// firewall, and then every waiter for that lock pays a grace period in
/// turn (a storm of 50 DELs serialised on it). Kept here instead, the
/// sockets close when the process exits, after every lock is released;
/// and reused, a plugin that queries and changes several tables or both
/// families releases one socket at exit instead of one per query (a
/// bridge DEL with ipMasq had two, firewall's four or five), each release
/// being one more wait on the commit mutex for the whole node.
/// Plugins are short-lived; a long-lived process keeps at most
/// [`MAX_LINGERING`], the rest close at once.
static LINGERING: std::sync::Mutex<Vec<Kept>> = std::sync::Mutex::new(Vec::new());
/// The most sockets [`LINGERING`] keeps.
const MAX_LINGERING: usize = 16;

/// A netfilter socket kept for reuse.
struct Kept {
    /// The namespace it belongs to (see [`thread_netns`]).
    ns: (u64, u64),
    sys: SysSocket,
    /// Its last sequence number: a reused socket goes on from there, so
    /// that an answer left unread by an earlier exchange is never taken
    /// for a new one's.
    seq: u32,
}

/// The calling thread's network namespace: the device and inode of
/// `/proc/thread-self/ns/net` (one `statx`). `None` when `/proc` cannot
/// tell; such a socket is never reused.
fn thread_netns() -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// A kept netfilter socket of namespace `ns`, with its last sequence
/// number.
fn reuse(ns: (u64, u64)) -> Option<(SysSocket, u32)> {
    let mut kept = LINGERING.lock().ok()?;
    let at = kept.iter().position(|k| k.ns == ns)?;
    let k = kept.swap_remove(at);
    Some((k.sys, k.seq))
}

impl Drop for Socket {
    fn drop(&mut self) {
        if !self.linger {
            return;
        }
        if let Some(sys) = self.sys.take()
            && let Ok(mut kept) = LINGERING.lock()
            && kept.len() < MAX_LINGERING
        {
            // Without a namespace to match it is kept, never reused.
            let ns = self.ns.unwrap_or((u64::MAX, u64::MAX));
            let seq = self.seq;
            kept.push(Kept { ns, sys, seq });
        }
    }
}

/// Decodes one answer of type `M`, naming its message type on failure.
fn decode<M: NetlinkDeserializable>(header: &NetlinkHeader, payload: &[u8]) -> Result<M, String> {
    M::deserialize(header, payload)
        .map_err(|e| format!("decode netlink message type {}: {e}", header.message_type))
}

impl Socket {
    /// Opens a socket of netlink `protocol` (`netlink_sys::protocols::*`)
    /// in the calling thread's namespace, with extended ACKs and capped
    /// error echoes. `what` names it in error texts.
    pub(crate) fn open(protocol: isize, what: &'static str) -> Result<Socket, NetError> {
        let netfilter = protocol == netlink_sys::protocols::NETLINK_NETFILTER;
        let ns = if netfilter { thread_netns() } else { None };
        if let Some((sys, seq)) = ns.and_then(reuse) {
            let mut socket = Socket::with(Some(sys), what);
            (socket.linger, socket.ns, socket.seq) = (true, ns, seq);
            return Ok(socket);
        }
        let sys_err =
            |step: &str, e: io::Error| NetError::io(format!("{step} {what} netlink socket"), e);
        let mut sys = SysSocket::new(protocol).map_err(|e| sys_err("open", e))?;
        // Both are best effort: a kernel without them still answers.
        let _ = sys.set_ext_ack(true);
        let _ = sys.set_cap_ack(true);
        sys.bind(&SocketAddr::new(0, 0))
            .map_err(|e| sys_err("bind", e))?;
        let mut socket = Socket::with(Some(sys), what);
        (socket.linger, socket.ns) = (netfilter, ns);
        Ok(socket)
    }

    #[cfg(any(test, feature = "test-support"))]
    /// A socket that sends nothing: every request is recorded (see
    /// [`Socket::captured`]) and answered with an empty ACK or dump.
    /// For byte-level tests without root.
    pub(crate) fn capture(what: &'static str) -> Socket {
        Socket::with(None, what)
    }

    /// A socket that sends nothing and reads `answers` as the kernel's
    /// datagrams, in order, through the same exchange as a real socket:
    /// the fuzz targets' way into every parser of kernel answers. Each
    /// exchange reads datagrams until its terminator (ACK, error, end of
    /// dump); answers that run out before it fail the exchange, and an
    /// exchange that starts with none left gets an empty ACK or dump.
    pub(crate) fn replay(what: &'static str, answers: Vec<Vec<u8>>) -> Socket {
        let mut s = Socket::with(None, what);
        s.canned = answers.into();
        s
    }

    fn with(sys: Option<SysSocket>, what: &'static str) -> Socket {
        Socket {
            sys,
            canned: VecDeque::new(),
            seq: 0,
            recv: Vec::new(),
            send: Vec::new(),
            what,
            linger: false,
            ns: None,
            #[cfg(any(test, feature = "test-support"))]
            captured: Vec::new(),
        }
    }

    /// Turns strict checking of GET requests on (`NETLINK_GET_STRICT_CHK`):
    /// the kernel then filters dumps by the header's fields and attributes
    /// (an address dump by interface index, a route dump by `RTA_TABLE`)
    /// and refuses dump requests with stray header fields.
    pub(crate) fn set_strict(&mut self) -> Result<(), NetError> {
        match &self.sys {
            Some(s) => s.set_netlink_get_strict_chk(true).map_err(|e| {
                NetError::io(format!("set strict checking on {} netlink", self.what), e)
            }),
            None => Ok(()),
        }
    }

    /// The requests recorded in capture mode, each a whole netlink message.
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) fn captured(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.captured)
    }

    /// Sends the message in `self.send` (already framed; its sequence
    /// number is set here) and walks the answers until a terminator.
    fn exchange(
        &mut self,
        op: &str,
        single: bool,
        each: &mut OnAnswer<'_>,
    ) -> Result<Outcome, NetError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        stamp_seq(&mut self.send, seq);
        let Some(sys) = &self.sys else {
            return self.replay_exchange(op, seq, single, each);
        };
        let kernel = SocketAddr::new(0, 0);
        loop {
            match sys.send_to(&self.send, &kernel, 0) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(NetError::io(
                        format!("{op}: send to {} netlink", self.what),
                        e,
                    ));
                }
            }
        }
        let mut exchange = Exchange::new(seq);
        exchange.single = single;
        loop {
            let n = recv_datagram(sys, &mut self.recv).map_err(|e| {
                NetError::io(format!("{op}: receive from {} netlink", self.what), e)
            })?;
            let datagram = self.recv.get(..n).unwrap_or_default();
            if let Some(outcome) = exchange
                .feed(datagram, each)
                .map_err(|f| f.into_error(op))?
            {
                return Ok(outcome);
            }
        }
    }

    /// [`Socket::exchange`] in replay mode: the canned datagrams instead of
    /// the kernel's.
    fn replay_exchange(
        &mut self,
        op: &str,
        seq: u32,
        single: bool,
        each: &mut OnAnswer<'_>,
    ) -> Result<Outcome, NetError> {
        #[cfg(any(test, feature = "test-support"))]
        self.captured.push(self.send.clone());
        if self.canned.is_empty() {
            return Ok(Outcome::Done);
        }
        let mut exchange = Exchange::new(seq);
        exchange.single = single;
        while let Some(datagram) = self.canned.pop_front() {
            if let Some(outcome) = exchange
                .feed(&datagram, each)
                .map_err(|f| f.into_error(op))?
            {
                return Ok(outcome);
            }
        }
        Err(NetError::other(op, "the answer ended without a terminator"))
    }

    /// Sends `msg` with `flags` (plus `NLM_F_REQUEST`) and hands every
    /// answer's header and payload (after the netlink header) to `each`,
    /// undecoded: for answers read lazily, a few attributes at a time,
    /// instead of through a crate type's parser (`cni-fw`'s nf_tables and
    /// conntrack answers).
    pub(crate) fn request<M: NetlinkSerializable>(
        &mut self,
        msg: &M,
        flags: u16,
        op: &str,
        mut each: impl FnMut(&NetlinkHeader, &[u8]) -> Result<(), String>,
    ) -> Result<Outcome, NetError> {
        self.encode(msg, flags, op)?;
        self.exchange(op, false, &mut each)
    }

    /// Encodes `msg` with `flags` (plus `NLM_F_REQUEST`) into `self.send`.
    fn encode<M: NetlinkSerializable>(
        &mut self,
        msg: &M,
        flags: u16,
        op: &str,
    ) -> Result<(), NetError> {
        self.send.clear();
        self.append(msg, flags, op)
    }

    /// Appends `msg` with `flags` (plus `NLM_F_REQUEST`) to `self.send`,
    /// padded to 4 bytes as netlink messages in one datagram must be.
    fn append<M: NetlinkSerializable>(
        &mut self,
        msg: &M,
        flags: u16,
        op: &str,
    ) -> Result<(), NetError> {
        let len = NLMSG_HDRLEN + msg.buffer_len();
        // The kernel's length field is u32; attributes over 64 KiB would
        // already have wrapped their u16 length inside the crate.
        let len32 = u32::try_from(len).map_err(|_| NetError::other(op, "request too long"))?;
        let start = self.send.len();
        super::attrs::extend_zeroed(&mut self.send, align4(len));
        let Some(whole) = self.send.get_mut(start..start + len) else {
            return Err(NetError::other(op, "request too long"));
        };
        let (head, body) = whole.split_at_mut(NLMSG_HDRLEN);
        head[0..4].copy_from_slice(&len32.to_ne_bytes());
        head[4..6].copy_from_slice(&msg.message_type().to_ne_bytes());
        head[6..8].copy_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
        msg.serialize(body);
        Ok(())
    }

    /// Sends `msgs` in one datagram between `begin` and `end` (nfnetlink's
    /// batches: `cni-fw`'s `nfm` makes the two ends). Only the last message
    /// asks for an ACK: the kernel answers in message order, so the first
    /// answer read is the error of the first message that failed (for an
    /// nf_tables batch, the whole batch was then aborted) or that ACK. No
    /// messages: nothing is sent. `flags` gives each message's flags (e.g.
    /// `NLM_F_CREATE | NLM_F_APPEND` for rules appended to their chain,
    /// `NLM_F_EXCL` for a chain that must be new).
    pub(crate) fn batch<E: NetlinkSerializable, M: NetlinkSerializable>(
        &mut self,
        begin: &E,
        msgs: &[M],
        flags: impl Fn(&M) -> u16,
        end: &E,
        op: &str,
    ) -> Result<(), NetError> {
        let Some(last) = msgs.len().checked_sub(1) else {
            return Ok(());
        };
        self.send.clear();
        self.append(begin, 0, op)?;
        for (i, msg) in msgs.iter().enumerate() {
            let ack = if i == last { NLM_F_ACK } else { 0 };
            self.append(msg, flags(msg) | ack, op)?;
        }
        self.append(end, 0, op)?;
        self.exchange(op, false, &mut |_, _| Ok(())).map(|_| ())
    }

    /// A request answered by an ACK: create, set, delete. `flags` are
    /// added to `NLM_F_REQUEST | NLM_F_ACK` (e.g. `NLM_F_CREATE |
    /// NLM_F_EXCL`).
    pub(crate) fn ack<M: NetlinkSerializable>(
        &mut self,
        msg: &M,
        flags: u16,
        op: &str,
    ) -> Result<(), NetError> {
        self.encode(msg, NLM_F_ACK | flags, op)?;
        self.exchange(op, false, &mut |_, _| Ok(())).map(|_| ())
    }

    /// A request for one object (GETLINK by name or index, GETROUTE of a
    /// destination): its answer, `None` when the kernel sent none. Sent
    /// without `NLM_F_ACK`, as iproute2 does: the kernel answers with the
    /// object or an error, and an ACK would be one more datagram to read.
    pub(crate) fn get<M: NetlinkSerializable + NetlinkDeserializable>(
        &mut self,
        msg: &M,
        op: &str,
    ) -> Result<Option<M>, NetError> {
        self.encode(msg, 0, op)?;
        let mut first = None;
        self.exchange(op, true, &mut |h, p| {
            if first.is_none() {
                first = Some(decode::<M>(h, p)?);
            }
            Ok(())
        })?;
        Ok(first)
    }

    /// A dump: every answer that `keep` maps to `Some`. The request is
    /// built by `make` and sent again (up to 5 times) while the kernel flags
    /// the dump as interrupted; then the last answer is used.
    pub(crate) fn dump<M: NetlinkSerializable + NetlinkDeserializable, T>(
        &mut self,
        make: impl Fn() -> M,
        op: &str,
        mut keep: impl FnMut(M) -> Option<T>,
    ) -> Result<Vec<T>, NetError> {
        let mut out = Vec::new();
        for _ in 0..DUMP_RETRIES {
            out.clear();
            self.encode(&make(), NLM_F_DUMP, op)?;
            let outcome = self.exchange(op, false, &mut |h, p| {
                if let Some(t) = keep(decode::<M>(h, p)?) {
                    out.push(t);
                }
                Ok(())
            })?;
            if outcome == Outcome::Done {
                break;
            }
            log::debug!("{op}: dump interrupted, asking again");
        }
        Ok(out)
    }
}

/// Receives one datagram into `buf` (grown to the datagram's size first,
/// learnt with `MSG_PEEK | MSG_TRUNC`) from the kernel; returns its length.
fn recv_datagram(sys: &SysSocket, buf: &mut Vec<u8>) -> io::Result<usize> {
    loop {
        let mut probe: &mut [u8] = &mut [];
        let want = match sys.recv(&mut probe, nix::libc::MSG_PEEK | nix::libc::MSG_TRUNC) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        buf.clear();
        buf.reserve(want);
        let from = match sys.recv_from(buf, 0) {
            Ok((_, from)) => from,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // Only the kernel (port 0) answers requests; drop anything else.
        if from.port_number() != 0 {
            continue;
        }
        return Ok(buf.len());
    }
}

#[cfg(test)]
mod tests;
