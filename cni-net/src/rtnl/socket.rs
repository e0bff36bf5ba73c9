//! A blocking netlink socket: one request out, its answers in.
//!
//! The socket belongs to the network namespace of the thread that created
//! it, for its whole life. A request carries a fresh sequence number;
//! answers with another sequence number, or not sent by the kernel, are
//! skipped. The exchange ends with the ACK (`NLMSG_ERROR` with code 0), a
//! kernel error (its errno becomes a [`NetError::Os`]), or the `NLMSG_DONE`
//! of a dump.

use super::msg::{
    self, Malformed, Message, NLM_F_DUMP_INTR, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP, Request,
};
use crate::error::NetError;
use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recv, recvfrom,
    sendto, socket,
};
use std::os::fd::{AsRawFd, OwnedFd};

/// Initial receive buffer; grown when the kernel sends a larger datagram.
const RECV_BUF: usize = 32 * 1024;

/// A blocking netlink socket bound to the namespace it was created in.
#[derive(Debug)]
pub(crate) struct Socket {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
    what: &'static str,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// ACK or the end of a dump.
    Done,
    /// A dump whose data changed while it ran (`NLM_F_DUMP_INTR`): the
    /// answers may be inconsistent; ask again.
    Interrupted,
}

impl Socket {
    /// Opens a socket of netlink `protocol` (`NetlinkRoute`,
    /// `NetlinkNetFilter`) in the calling thread's namespace. `what` names
    /// it in error messages ("route", "conntrack").
    pub(crate) fn open(protocol: SockProtocol, what: &'static str) -> Result<Socket, NetError> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            protocol,
        )
        .map_err(|e| NetError::errno(format!("open {what} netlink socket"), e as i32))?;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))
            .map_err(|e| NetError::errno(format!("bind {what} netlink socket"), e as i32))?;
        Ok(Socket {
            fd,
            seq: 0,
            buf: vec![0u8; RECV_BUF],
            what,
        })
    }

    /// A `NETLINK_ROUTE` socket.
    pub(crate) fn route() -> Result<Socket, NetError> {
        Socket::open(SockProtocol::NetlinkRoute, "route")
    }

    /// Sends `req` and hands every answer message (type, payload after the
    /// netlink header) to `each`, until the ACK or the end of the dump. A
    /// kernel error becomes [`NetError`] with its errno and `op`; an error
    /// returned by `each` ends the exchange (the rest of the answer is
    /// drained first, so the socket stays usable).
    pub(crate) fn request(
        &mut self,
        req: Request,
        op: &str,
        mut each: impl FnMut(u16, &[u8]) -> Result<(), Malformed>,
    ) -> Result<Outcome, NetError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let bytes = req
            .finish(seq)
            .map_err(|e| NetError::other(op, e.to_string()))?;
        let dest = NetlinkAddr::new(0, 0);
        loop {
            match sendto(self.fd.as_raw_fd(), &bytes, &dest, MsgFlags::empty()) {
                Ok(_) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    return Err(NetError::errno(
                        format!("{op}: send to {} netlink", self.what),
                        e as i32,
                    ));
                }
            }
        }
        let mut interrupted = false;
        let mut failed: Option<Malformed> = None;
        loop {
            let n = self.recv_datagram(op)?;
            let Some(datagram) = self.buf.get(..n) else {
                return Err(NetError::other(op, "netlink answer truncated"));
            };
            for m in msg::messages(datagram) {
                let m: Message<'_> = m.map_err(|e| NetError::other(op, e.to_string()))?;
                if m.seq != seq || m.kind == NLMSG_NOOP {
                    continue;
                }
                if m.flags & NLM_F_DUMP_INTR != 0 {
                    interrupted = true;
                }
                match m.kind {
                    NLMSG_ERROR | NLMSG_DONE => {
                        // NLMSG_DONE of an old kernel may carry no code.
                        let code = msg::i32_at(m.payload, 0).unwrap_or(0);
                        if code < 0 {
                            return Err(NetError::errno(op, code.saturating_neg()));
                        }
                        if let Some(e) = failed {
                            return Err(NetError::other(op, e.to_string()));
                        }
                        return Ok(if interrupted {
                            Outcome::Interrupted
                        } else {
                            Outcome::Done
                        });
                    }
                    _ => {
                        if failed.is_none()
                            && let Err(e) = each(m.kind, m.payload)
                        {
                            failed = Some(e);
                        }
                    }
                }
            }
        }
    }

    /// Receives one datagram from the kernel into `self.buf`, growing it
    /// to the datagram's size first. Returns the length.
    fn recv_datagram(&mut self, op: &str) -> Result<usize, NetError> {
        let fd = self.fd.as_raw_fd();
        loop {
            // Peek with MSG_TRUNC: the kernel reports the full length.
            let want = match recv(fd, &mut self.buf, MsgFlags::MSG_PEEK | MsgFlags::MSG_TRUNC) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(self.recv_error(op, e)),
            };
            if want > self.buf.len() {
                self.buf.resize(want, 0);
            }
            let (n, from) = match recvfrom::<NetlinkAddr>(fd, &mut self.buf) {
                Ok(r) => r,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(self.recv_error(op, e)),
            };
            // Only the kernel (port 0) answers requests; drop anything else.
            if from.is_some_and(|a| a.pid() != 0) {
                continue;
            }
            return Ok(n.min(self.buf.len()));
        }
    }

    fn recv_error(&self, op: &str, e: Errno) -> NetError {
        NetError::errno(
            format!("{op}: receive from {} netlink", self.what),
            e as i32,
        )
    }
}
