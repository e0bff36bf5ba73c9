//! UDP sockets pinned to one interface, for protocols that must speak on a
//! given link before (or without) the routing table knowing where to go:
//! DHCP's client side (port 68, broadcast, on an interface with no address
//! yet). Create the socket inside the wanted netns ([`crate::NetNs::run`]);
//! it stays there whatever thread uses it afterwards.

use crate::error::NetError;
use nix::sys::socket::{
    AddressFamily, SockFlag, SockType, SockaddrIn, bind, setsockopt, socket, sockopt,
};
use std::ffi::OsString;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// How to set up the socket.
#[derive(Debug, Clone, Copy, Default)]
pub struct UdpOpts {
    /// SO_BROADCAST: may send to 255.255.255.255.
    pub broadcast: bool,
    /// IP_TRANSPARENT: may bind (and send from) an address not configured
    /// on any interface, e.g. a DHCP lease the main plugin already removed.
    pub transparent: bool,
}

/// A UDP socket bound to `addr` on interface `dev` only (SO_BINDTODEVICE,
/// SO_REUSEADDR so that one port serves several interfaces of one netns).
pub fn bound_to_device(
    dev: &str,
    addr: SocketAddrV4,
    opts: UdpOpts,
) -> Result<UdpSocket, NetError> {
    let op = |what: &str| format!("{what} (udp {addr} on {dev})");
    let fd = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| NetError::errno(op("socket"), e as i32))?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)
        .map_err(|e| NetError::errno(op("SO_REUSEADDR"), e as i32))?;
    setsockopt(&fd, sockopt::BindToDevice, &OsString::from(dev))
        .map_err(|e| NetError::errno(op("SO_BINDTODEVICE"), e as i32))?;
    if opts.broadcast {
        setsockopt(&fd, sockopt::Broadcast, &true)
            .map_err(|e| NetError::errno(op("SO_BROADCAST"), e as i32))?;
    }
    if opts.transparent {
        setsockopt(&fd, sockopt::IpTransparent, &true)
            .map_err(|e| NetError::errno(op("IP_TRANSPARENT"), e as i32))?;
    }
    bind(fd.as_raw_fd(), &SockaddrIn::from(addr))
        .map_err(|e| NetError::errno(op("bind"), e as i32))?;
    Ok(UdpSocket::from(fd))
}
