//! The rtnetlink facade: links, addresses, routes and the rest in one
//! network namespace, as blocking calls on small owned types. Requests are
//! netlink-packet-route's message types, sent through `crate::nl`'s socket
//! (see there for how to add an operation); plugins never see those types.
//!
//! Each [`Netlink`] owns one `NETLINK_ROUTE` socket, with strict checking of
//! GET requests on (dumps filtered by the kernel); a method is one `sendto`
//! and the `recvfrom`s of its answer.
//!
//! A netlink socket talks to the namespace it was created in. [`Netlink::host`]
//! creates its socket on the calling thread; [`Netlink::for_ns`] creates it
//! inside the target namespace ([`NetNs::run`]) and then uses it from the
//! caller's namespace.
//!
//! Layout: `link`, `addr` and `route` build the messages, read the
//! answers into [`Link`], [`Addr`] and [`Route`], and hold the [`Netlink`]
//! methods; [`addr_flags`], [`bridge_vlan`], `vrf` and the other files add
//! operations the same way.

use crate::error::NetError;
use crate::netns::NetNs;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, PoisonError};

mod addr;
pub mod addr_flags;
pub mod bridge_vlan;
mod child;
mod link;
mod route;
mod rule;
pub mod tc;
mod vrf;

pub use addr::Addr;
pub use addr_flags::AddrFlags;
pub use child::{ChildKind, ChildOpts, IpvlanMode, LinkExtras, MacvlanMode};
pub use link::{BridgeOpts, Link, LinkSet, VethOpts, veth_mtu};
pub use route::Route;
pub use rule::Rule;

use crate::nl::{NETLINK_ROUTE, RouteSocket};

/// Longest interface name the kernel accepts (IFNAMSIZ - 1).
pub const MAX_IFNAME_LEN: usize = 15;

/// The main routing table.
pub const TABLE_MAIN: u32 = 254;

/// Route scopes (`RT_SCOPE_*`).
pub mod scope {
    /// Global.
    pub const UNIVERSE: u8 = 0;
    /// Site-local.
    pub const SITE: u8 = 200;
    /// Directly attached.
    pub const LINK: u8 = 253;
    /// Local to this host.
    pub const HOST: u8 = 254;
    /// No destination.
    pub const NOWHERE: u8 = 255;
}

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// IPv4 (`AF_INET`).
    V4,
    /// IPv6 (`AF_INET6`).
    V6,
}

impl IpFamily {
    /// The family of an address.
    pub fn of(ip: &IpAddr) -> IpFamily {
        if ip.is_ipv4() {
            IpFamily::V4
        } else {
            IpFamily::V6
        }
    }
}

/// A 48-bit MAC address. Parses `aa:bb:cc:dd:ee:ff` (or `-` separated) and
/// prints lower-case with colons, as Go's `net.HardwareAddr` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl FromStr for Mac {
    type Err = NetError;

    fn from_str(s: &str) -> Result<Mac, NetError> {
        let bad = || NetError::other(format!("parse MAC {s:?}"), "invalid MAC address");
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for byte in out.iter_mut() {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Mac(out))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_hw(&self.0))
    }
}

/// Hardware address bytes as `aa:bb:..`, any length. Digit by digit: a
/// `format!` per byte (an allocation and the formatting machinery each)
/// cost every link read 2,500 instructions.
fn format_hw(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}

/// A blocking rtnetlink connection bound to one network namespace.
///
/// `Send` and `Sync`: concurrent calls on one handle take turns.
pub struct Netlink {
    sock: Mutex<RouteSocket>,
}

impl fmt::Debug for Netlink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Netlink").finish_non_exhaustive()
    }
}

/// A kernel errno in `errnos` means "already gone": not an error.
pub(crate) fn ok_if_missing(r: Result<(), NetError>, errnos: &[i32]) -> Result<(), NetError> {
    match r {
        Err(e) if e.raw_errno().is_some_and(|n| errnos.contains(&n)) => Ok(()),
        other => other,
    }
}

/// The facade's socket: strict checking on, so that dumps are filtered by
/// the kernel (addresses of one link, routes of one table).
fn open_route() -> Result<RouteSocket, NetError> {
    let mut sock = RouteSocket::open(NETLINK_ROUTE, "route")?;
    sock.set_strict()?;
    Ok(sock)
}

/// The facade's name for a failure to open the socket: `open netlink socket`.
fn rename(e: NetError, op: String) -> NetError {
    match e {
        NetError::Os { source, .. } => NetError::io(op, source),
        NetError::Other { msg, .. } => NetError::other(op, msg),
        other => other,
    }
}

impl Netlink {
    /// A connection to the calling thread's namespace (the "host" for a
    /// plugin's main thread).
    pub fn host() -> Result<Netlink, NetError> {
        let sock = open_route().map_err(|e| rename(e, "open netlink socket".into()))?;
        Ok(Netlink {
            sock: Mutex::new(sock),
        })
    }

    /// A connection to `ns`: the socket is created inside `ns` ([`NetNs::run`];
    /// a netlink socket belongs to the namespace it was created in), then
    /// used from wherever the caller is.
    pub fn for_ns(ns: &NetNs) -> Result<Netlink, NetError> {
        let sock = ns
            .run(open_route)?
            .map_err(|e| rename(e, format!("open netlink socket in {}", ns.path().display())))?;
        Ok(Netlink {
            sock: Mutex::new(sock),
        })
    }

    /// A handle that sends nothing and reads `answers` as the kernel's
    /// datagrams, in order, through the same exchange and parsers as a
    /// real one: the fuzz targets' way into every parser of kernel answers
    /// (fuzz/bodies: any method the plugins call, fed any bytes). An
    /// exchange whose answers run out before its terminator fails; once
    /// none are left, each request gets an empty ACK or dump.
    #[doc(hidden)]
    pub fn replay(answers: Vec<Vec<u8>>) -> Netlink {
        Netlink {
            sock: Mutex::new(RouteSocket::replay("route", answers)),
        }
    }

    /// A handle that records requests instead of sending them (see
    /// [`crate::nl`]); read them with [`Netlink::captured`].
    #[cfg(test)]
    pub(crate) fn capture() -> Netlink {
        Netlink {
            sock: Mutex::new(RouteSocket::capture("route")),
        }
    }

    /// The requests recorded by a [`Netlink::capture`] handle.
    #[cfg(test)]
    pub(crate) fn captured(&self) -> Vec<Vec<u8>> {
        self.route().captured()
    }

    /// The rtnetlink socket, locked: what every operation sends through
    /// (see [`crate::nl`] for how to add one).
    pub(crate) fn route(&self) -> MutexGuard<'_, RouteSocket> {
        // A panic while holding the lock leaves no half-done state behind:
        // every request drains its answer before returning.
        self.sock.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod vs_iproute2;
