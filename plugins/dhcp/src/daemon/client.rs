//! The DHCP client exchanges of one attachment, over a UDP socket created
//! in the container's netns and bound to its interface: DISCOVER/OFFER/
//! REQUEST/ACK (with the reference's retry schedule), RENEW (unicast to the
//! server from the leased address), REBIND (broadcast) and RELEASE (unicast
//! from the leased address, not 0.0.0.0: plugins#1278).
//!
//! Blocking code, one exchange per call: the daemon calls these on an RPC
//! thread (first lease) or a short-lived maintenance worker (renewals), so
//! a slow server holds up only its own attachment.

use cni_net::udp::{UdpOpts, bound_to_device};
use cni_net::{NetNs, Netlink};
use dhcp4::{CLIENT_PORT, FLAG_BROADCAST, Message, MessageType, SERVER_PORT, opt};
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

/// The container side of an attachment, resolved in its netns.
#[derive(Debug, Clone)]
pub struct Iface {
    pub name: String,
    pub mac: [u8; 6],
}

/// What every message of this attachment carries.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Option 61 value, type byte included.
    pub client_id: Vec<u8>,
    /// Option 55.
    pub request: Vec<u8>,
    /// Options sent as given (may override 61).
    pub provide: Vec<(u8, Vec<u8>)>,
}

/// The daemon's timing flags.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How long one exchange waits for an answer (`-timeout`).
    pub timeout: Duration,
    /// The cap of the backoff between tries (`-resendmax`).
    pub resend_max: Duration,
    /// How long an acquisition tries in all (`-resendtimeout`).
    pub resend_timeout: Duration,
}

/// Why an exchange did not give an ACK.
#[derive(Debug)]
pub enum Failure {
    /// The server refused (DHCPNAK): the address is no longer ours.
    Nak(String),
    /// No answer in time, or a socket error; worth another try.
    Retry(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Nak(m) => write!(f, "DHCP server NAK'd the request{m}"),
            Failure::Retry(m) => f.write_str(m),
        }
    }
}

/// Looks the interface up in `ns`, setting it up if it is down (as Go
/// does: the main plugin may not have yet).
pub fn resolve_iface(ns: &NetNs, if_name: &str) -> Result<Iface, String> {
    lookup(ns, if_name, true)
}

/// As [`resolve_iface`], leaving the link's state alone (for RELEASE).
pub fn resolve_iface_quiet(ns: &NetNs, if_name: &str) -> Result<Iface, String> {
    lookup(ns, if_name, false)
}

fn lookup(ns: &NetNs, if_name: &str, bring_up: bool) -> Result<Iface, String> {
    let nl = Netlink::for_ns(ns).map_err(|e| e.to_string())?;
    let link = nl
        .link_by_name(if_name)
        .map_err(|e| format!("error looking up {if_name:?}: {e}"))?
        .ok_or_else(|| format!("error looking up {if_name:?}: Link not found"))?;
    if bring_up && !link.up {
        log::info!("Link {if_name:?} down. Attempting to set up");
        nl.set_up(&link).map_err(|e| e.to_string())?;
    }
    let mac = parse_mac(&link.mac)
        .ok_or_else(|| format!("{if_name:?} has no Ethernet address ({:?})", link.mac))?;
    Ok(Iface {
        name: if_name.to_string(),
        mac,
    })
}

/// True when `if_name` still exists in `ns`.
pub fn link_exists(ns: &NetNs, if_name: &str) -> Result<bool, String> {
    let nl = Netlink::for_ns(ns).map_err(|e| e.to_string())?;
    Ok(nl
        .link_by_name(if_name)
        .map_err(|e| e.to_string())?
        .is_some())
}

/// Sets the interface down: a lease that ran out leaves an address the
/// server may give to someone else (the reference does the same).
pub fn set_down(ns: &NetNs, if_name: &str) -> Result<(), String> {
    let nl = Netlink::for_ns(ns).map_err(|e| e.to_string())?;
    if let Some(link) = nl.link_by_name(if_name).map_err(|e| e.to_string())? {
        nl.set_down(&link).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// A random 64-bit value from the standard library's per-process seeded
/// hasher keys (xids and jitter need no more than that).
pub fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}

fn socket(
    ns: &NetNs,
    iface: &Iface,
    bind: Ipv4Addr,
    transparent: bool,
) -> Result<UdpSocket, String> {
    let opts = UdpOpts {
        broadcast: true,
        transparent,
    };
    ns.run(|| bound_to_device(&iface.name, SocketAddrV4::new(bind, CLIENT_PORT), opts))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

fn with_identity(mut m: Message, id: &Identity, requested_params: bool) -> Message {
    m.set_option(opt::CLIENT_ID, with_type_byte(&id.client_id));
    for (code, v) in &id.provide {
        m.set_option(*code, v.clone());
    }
    if requested_params && !id.request.is_empty() {
        m.set_option(opt::PARAMETER_REQUEST_LIST, id.request.clone());
    }
    m
}

/// Option 61: type 0 ("not a hardware address") and the reference's id.
fn with_type_byte(client_id: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(client_id.len() + 1);
    v.push(0);
    v.extend_from_slice(client_id);
    v
}

/// Sends `m` to `to` and waits until `deadline` for a reply of one of the
/// `wanted` types (DHCPNAK always ends the wait).
fn transact(
    sock: &UdpSocket,
    m: &Message,
    to: SocketAddrV4,
    wanted: MessageType,
    deadline: Instant,
) -> Result<Message, Failure> {
    sock.send_to(&m.encode(), to)
        .map_err(|e| Failure::Retry(format!("send {:?} to {to}: {e}", m.message_type())))?;
    let mut buf = vec![0u8; 1500];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::Retry(format!(
                "no {wanted:?} from the DHCP server (to {to}) in time"
            )));
        }
        sock.set_read_timeout(Some(left))
            .map_err(|e| Failure::Retry(e.to_string()))?;
        let n = match sock.recv_from(&mut buf) {
            Ok((n, _)) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::Retry(format!("receive: {e}"))),
        };
        let Some(reply) = buf.get(..n).and_then(Message::decode) else {
            continue;
        };
        if reply.op != dhcp4::BOOTREPLY || reply.xid != m.xid || reply.chaddr != m.chaddr {
            continue;
        }
        match reply.message_type() {
            Some(t) if t == wanted => return Ok(reply),
            Some(MessageType::Nak) => {
                let text = reply
                    .option(opt::MESSAGE)
                    .map(|t| format!(": {}", String::from_utf8_lossy(t)))
                    .unwrap_or_default();
                return Err(Failure::Nak(text));
            }
            _ => continue,
        }
    }
}

const BROADCAST: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::BROADCAST, SERVER_PORT);

/// One DISCOVER/OFFER/REQUEST/ACK, each step waiting up to `timeout`.
pub fn dora_once(
    ns: &NetNs,
    iface: &Iface,
    id: &Identity,
    timeout: Duration,
) -> Result<Message, Failure> {
    let sock = socket(ns, iface, Ipv4Addr::UNSPECIFIED, false).map_err(Failure::Retry)?;
    let xid = random_u64() as u32;
    let mut discover = with_identity(
        Message::request(MessageType::Discover, xid, iface.mac),
        id,
        true,
    );
    discover.flags = FLAG_BROADCAST;
    let offer = transact(
        &sock,
        &discover,
        BROADCAST,
        MessageType::Offer,
        Instant::now() + timeout,
    )?;
    let server = offer
        .ip_option(opt::SERVER_ID)
        .ok_or_else(|| Failure::Retry("DHCPOFFER without a server identifier".into()))?;
    let mut request = with_identity(
        Message::request(MessageType::Request, xid, iface.mac),
        id,
        true,
    );
    request.flags = FLAG_BROADCAST;
    request.set_option(opt::REQUESTED_IP, offer.yiaddr.octets().to_vec());
    request.set_option(opt::SERVER_ID, server.octets().to_vec());
    transact(
        &sock,
        &request,
        BROADCAST,
        MessageType::Ack,
        Instant::now() + timeout,
    )
}

/// The reference's acquisition: tries DORA with 4 fast retries 2 s ± 1 s
/// apart, then 4 s, 8 s ... up to `resend_max` (± 1 s), for at most
/// `resend_timeout` in all; then "no more tries".
pub fn acquire(ns: &NetNs, iface: &Iface, id: &Identity, t: Timing) -> Result<Message, String> {
    let start = Instant::now();
    let mut fast_left = 4u32;
    let mut base = Duration::from_secs(4);
    loop {
        match dora_once(ns, iface, id, t.timeout) {
            Ok(ack) => return Ok(ack),
            Err(e) => log::warn!("{}: {e}", String::from_utf8_lossy(&id.client_id)),
        }
        let jitter_ms = (random_u64() % 2000) as i64 - 1000;
        let delay = if fast_left > 0 {
            fast_left -= 1;
            Duration::from_secs(2)
        } else {
            let d = base;
            base = (base * 2).min(t.resend_max.max(Duration::from_secs(1)));
            d
        };
        let delay = jittered(delay, jitter_ms);
        if start.elapsed() + delay >= t.resend_timeout {
            return Err("no more tries".into());
        }
        log::info!("retrying in {:.3} seconds", delay.as_secs_f64());
        std::thread::sleep(delay);
    }
}

fn jittered(d: Duration, jitter_ms: i64) -> Duration {
    let ms = d.as_millis() as i64 + jitter_ms;
    Duration::from_millis(ms.max(100) as u64)
}

/// RENEWING: a REQUEST unicast to the server that gave the lease.
pub fn renew(
    ns: &NetNs,
    iface: &Iface,
    id: &Identity,
    leased: Ipv4Addr,
    server: Ipv4Addr,
    timeout: Duration,
) -> Result<Message, Failure> {
    request_leased(ns, iface, id, leased, Some(server), timeout)
}

/// REBINDING: the same REQUEST, broadcast to any server.
pub fn rebind(
    ns: &NetNs,
    iface: &Iface,
    id: &Identity,
    leased: Ipv4Addr,
    timeout: Duration,
) -> Result<Message, Failure> {
    request_leased(ns, iface, id, leased, None, timeout)
}

/// A REQUEST from the leased address (RFC 2131 4.3.2: ciaddr set, no
/// requested-IP/server-id), unicast to `server` (renewing) or, `None`,
/// broadcast (rebinding).
fn request_leased(
    ns: &NetNs,
    iface: &Iface,
    id: &Identity,
    leased: Ipv4Addr,
    server: Option<Ipv4Addr>,
    timeout: Duration,
) -> Result<Message, Failure> {
    // Bound to 0.0.0.0 on the interface, not to the leased address: the
    // ACK comes unicast to that address, but a DHCPNAK is broadcast, and
    // a socket bound to a unicast address never sees broadcasts. The
    // kernel sends from the leased address, the interface's own.
    let sock = socket(ns, iface, Ipv4Addr::UNSPECIFIED, false).map_err(Failure::Retry)?;
    let mut m = with_identity(
        Message::request(MessageType::Request, random_u64() as u32, iface.mac),
        id,
        true,
    );
    m.ciaddr = leased;
    let to = match server {
        Some(server) => SocketAddrV4::new(server, SERVER_PORT),
        None => {
            // The address may no longer be on the interface: ask for a
            // broadcast answer so that it reaches us either way.
            m.flags = FLAG_BROADCAST;
            BROADCAST
        }
    };
    transact(&sock, &m, to, MessageType::Ack, Instant::now() + timeout)
}

/// DHCPRELEASE, unicast to the server from the leased address. When the
/// address is already gone from the interface (the main plugin's DEL ran
/// first), the socket binds it anyway (IP_TRANSPARENT): servers drop a
/// release from 0.0.0.0.
pub fn release(
    ns: &NetNs,
    iface: &Iface,
    client_id: &[u8],
    leased: Ipv4Addr,
    server: Ipv4Addr,
) -> Result<(), String> {
    let sock = socket(ns, iface, leased, false).or_else(|_| socket(ns, iface, leased, true))?;
    let mut m = Message::request(MessageType::Release, random_u64() as u32, iface.mac);
    m.ciaddr = leased;
    m.set_option(opt::SERVER_ID, server.octets().to_vec());
    m.set_option(opt::CLIENT_ID, with_type_byte(client_id));
    sock.send_to(&m.encode(), SocketAddrV4::new(server, SERVER_PORT))
        .map(|_| ())
        .map_err(|e| format!("failed to send DHCPRELEASE to {server}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parse() {
        assert_eq!(
            parse_mac("02:ab:00:00:00:ff"),
            Some([2, 0xab, 0, 0, 0, 0xff])
        );
        assert_eq!(parse_mac(""), None);
        assert_eq!(parse_mac("02:ab:00:00:00"), None);
        assert_eq!(parse_mac("02:ab:00:00:00:ff:01"), None);
    }

    #[test]
    fn identity_options() {
        let id = Identity {
            client_id: b"c/n/eth0".to_vec(),
            request: vec![3, 1],
            provide: vec![(12, b"h".to_vec())],
        };
        let m = with_identity(
            Message::request(MessageType::Discover, 1, [0; 6]),
            &id,
            true,
        );
        assert_eq!(m.option(opt::CLIENT_ID), Some(&b"\0c/n/eth0"[..]));
        assert_eq!(m.option(opt::HOST_NAME), Some(&b"h"[..]));
        assert_eq!(m.option(opt::PARAMETER_REQUEST_LIST), Some(&[3u8, 1][..]));
        // A provided option 61 replaces the generated one, as in Go.
        let id2 = Identity {
            provide: vec![(61, b"mine".to_vec())],
            ..id
        };
        let m = with_identity(
            Message::request(MessageType::Discover, 1, [0; 6]),
            &id2,
            true,
        );
        assert_eq!(m.option(opt::CLIENT_ID), Some(&b"mine"[..]));
    }
}
