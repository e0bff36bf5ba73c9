//! DHCPv4 messages (RFC 2131/2132): the fixed BOOTP header, the magic
//! cookie and the options, encoded and decoded without panicking on
//! whatever arrives from the wire; options carried in `sname`/`file`
//! (overload, option 52), long options split over several instances
//! (RFC 3396), and the route options 121 (RFC 3442) and 33.
//!
//! Bytes in, values out: no sockets, no clock, nothing of CNI. The dhcp
//! plugin's daemon is its user; the fuzz target `dhcp4_packet` reaches the
//! same functions.

use std::net::Ipv4Addr;

pub const BOOTREQUEST: u8 = 1;
pub const BOOTREPLY: u8 = 2;
pub const CLIENT_PORT: u16 = 68;
pub const SERVER_PORT: u16 = 67;
/// The `flags` bit asking the server to broadcast its replies: a client
/// without an address on the interface cannot receive a unicast one.
pub const FLAG_BROADCAST: u16 = 0x8000;

const MAGIC_COOKIE: [u8; 4] = [99, 130, 83, 99];
const FIXED_LEN: usize = 236;
/// BOOTP relays and some servers drop shorter messages.
const MIN_LEN: usize = 300;

/// Option codes a CNI DHCP client reads or writes.
pub mod opt {
    pub const PAD: u8 = 0;
    pub const SUBNET_MASK: u8 = 1;
    pub const ROUTER: u8 = 3;
    pub const HOST_NAME: u8 = 12;
    pub const STATIC_ROUTES: u8 = 33;
    pub const REQUESTED_IP: u8 = 50;
    pub const LEASE_TIME: u8 = 51;
    pub const OVERLOAD: u8 = 52;
    pub const MESSAGE_TYPE: u8 = 53;
    pub const SERVER_ID: u8 = 54;
    pub const PARAMETER_REQUEST_LIST: u8 = 55;
    pub const MESSAGE: u8 = 56;
    pub const RENEWAL_TIME: u8 = 58;
    pub const REBINDING_TIME: u8 = 59;
    pub const VENDOR_CLASS_ID: u8 = 60;
    pub const CLIENT_ID: u8 = 61;
    pub const USER_CLASS: u8 = 77;
    pub const CLASSLESS_ROUTES: u8 = 121;
    pub const END: u8 = 255;
}

/// Values of option 53.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    Discover = 1,
    Offer = 2,
    Request = 3,
    Decline = 4,
    Ack = 5,
    Nak = 6,
    Release = 7,
    Inform = 8,
}

impl MessageType {
    fn from_u8(v: u8) -> Option<MessageType> {
        Some(match v {
            1 => MessageType::Discover,
            2 => MessageType::Offer,
            3 => MessageType::Request,
            4 => MessageType::Decline,
            5 => MessageType::Ack,
            6 => MessageType::Nak,
            7 => MessageType::Release,
            8 => MessageType::Inform,
            _ => return None,
        })
    }
}

/// One DHCP message. Options keep their order; a code that appears several
/// times on the wire is joined into one value (RFC 3396).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub op: u8,
    pub xid: u32,
    pub secs: u16,
    pub flags: u16,
    pub ciaddr: Ipv4Addr,
    pub yiaddr: Ipv4Addr,
    pub siaddr: Ipv4Addr,
    pub giaddr: Ipv4Addr,
    /// Client hardware address (Ethernet: 6 bytes).
    pub chaddr: [u8; 6],
    pub options: Vec<(u8, Vec<u8>)>,
}

impl Message {
    /// A client request of type `kind` with the options after 53 in order.
    pub fn request(kind: MessageType, xid: u32, chaddr: [u8; 6]) -> Message {
        Message {
            op: BOOTREQUEST,
            xid,
            chaddr,
            secs: 0,
            flags: 0,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            yiaddr: Ipv4Addr::UNSPECIFIED,
            siaddr: Ipv4Addr::UNSPECIFIED,
            giaddr: Ipv4Addr::UNSPECIFIED,
            options: vec![(opt::MESSAGE_TYPE, vec![kind as u8])],
        }
    }

    /// The value of option `code`, if present.
    pub fn option(&self, code: u8) -> Option<&[u8]> {
        self.options
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, v)| v.as_slice())
    }

    /// Sets option `code`, replacing an earlier value in place.
    pub fn set_option(&mut self, code: u8, value: Vec<u8>) {
        match self.options.iter_mut().find(|(c, _)| *c == code) {
            Some(slot) => slot.1 = value,
            None => self.options.push((code, value)),
        }
    }

    pub fn message_type(&self) -> Option<MessageType> {
        match self.option(opt::MESSAGE_TYPE) {
            Some([v]) => MessageType::from_u8(*v),
            _ => None,
        }
    }

    pub fn ip_option(&self, code: u8) -> Option<Ipv4Addr> {
        match self.option(code) {
            Some(v) if v.len() >= 4 => Some(Ipv4Addr::new(v[0], v[1], v[2], v[3])),
            _ => None,
        }
    }

    pub fn u32_option(&self, code: u8) -> Option<u32> {
        match self.option(code) {
            Some(v) if v.len() == 4 => Some(u32::from_be_bytes([v[0], v[1], v[2], v[3]])),
            _ => None,
        }
    }

    /// Wire form. Option values longer than 255 bytes are split into
    /// several instances of the same code (RFC 3396).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(MIN_LEN + 64);
        b.push(self.op);
        b.push(1); // htype: Ethernet
        b.push(6); // hlen
        b.push(0); // hops
        b.extend_from_slice(&self.xid.to_be_bytes());
        b.extend_from_slice(&self.secs.to_be_bytes());
        b.extend_from_slice(&self.flags.to_be_bytes());
        for a in [self.ciaddr, self.yiaddr, self.siaddr, self.giaddr] {
            b.extend_from_slice(&a.octets());
        }
        b.extend_from_slice(&self.chaddr);
        b.resize(FIXED_LEN, 0); // chaddr padding, sname, file
        b.extend_from_slice(&MAGIC_COOKIE);
        for (code, value) in &self.options {
            if value.is_empty() {
                b.extend_from_slice(&[*code, 0]);
            }
            for chunk in value.chunks(255) {
                b.push(*code);
                b.push(chunk.len() as u8);
                b.extend_from_slice(chunk);
            }
        }
        b.push(opt::END);
        if b.len() < MIN_LEN {
            b.resize(MIN_LEN, 0);
        }
        b
    }

    /// Parses a message; `None` for anything that is not a well-formed
    /// DHCP message (too short, no magic cookie, an option running past
    /// the end). Options in `sname`/`file` (overload, option 52) are read
    /// too.
    pub fn decode(b: &[u8]) -> Option<Message> {
        if b.len() < FIXED_LEN + MAGIC_COOKIE.len() || b[FIXED_LEN..FIXED_LEN + 4] != MAGIC_COOKIE {
            return None;
        }
        if b[1] != 1 || b[2] != 6 {
            return None; // not Ethernet: not ours
        }
        let ip = |at: usize| Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3]);
        let mut m = Message {
            op: b[0],
            xid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            secs: u16::from_be_bytes([b[8], b[9]]),
            flags: u16::from_be_bytes([b[10], b[11]]),
            ciaddr: ip(12),
            yiaddr: ip(16),
            siaddr: ip(20),
            giaddr: ip(24),
            chaddr: [b[28], b[29], b[30], b[31], b[32], b[33]],
            options: Vec::new(),
        };
        parse_options(&b[FIXED_LEN + 4..], &mut m.options)?;
        if let Some(&[overload]) = m.option(opt::OVERLOAD) {
            if overload & 1 != 0 {
                parse_options(&b[108..236], &mut m.options)?;
            }
            if overload & 2 != 0 {
                parse_options(&b[44..108], &mut m.options)?;
            }
        }
        Some(m)
    }
}

fn parse_options(mut b: &[u8], out: &mut Vec<(u8, Vec<u8>)>) -> Option<()> {
    while let Some((&code, rest)) = b.split_first() {
        match code {
            opt::PAD => b = rest,
            opt::END => break,
            _ => {
                let (&len, rest) = rest.split_first()?;
                let value = rest.get(..usize::from(len))?;
                match out.iter_mut().find(|(c, _)| *c == code) {
                    Some(slot) => slot.1.extend_from_slice(value),
                    None => out.push((code, value.to_vec())),
                }
                b = &rest[usize::from(len)..];
            }
        }
    }
    Some(())
}

/// Option 121 (RFC 3442): destination prefix, significant octets, router.
/// `None` when malformed (then the whole option is ignored, as the RFC
/// says a client should).
pub fn classless_routes(v: &[u8]) -> Option<Vec<(Ipv4Addr, u8, Ipv4Addr)>> {
    let mut out = Vec::new();
    let mut b = v;
    while let Some((&width, rest)) = b.split_first() {
        if width > 32 {
            return None;
        }
        let n = usize::from(width).div_ceil(8);
        let dst = rest.get(..n)?;
        let gw = rest.get(n..n + 4)?;
        let mut d = [0u8; 4];
        d[..n].copy_from_slice(dst);
        out.push((
            Ipv4Addr::from(d),
            width,
            Ipv4Addr::new(gw[0], gw[1], gw[2], gw[3]),
        ));
        b = &rest[n + 4..];
    }
    Some(out)
}

/// Option 33: (classful destination, router) pairs.
pub fn static_routes(v: &[u8]) -> Vec<(Ipv4Addr, u8, Ipv4Addr)> {
    v.chunks_exact(8)
        .map(|c| {
            let dst = Ipv4Addr::new(c[0], c[1], c[2], c[3]);
            (
                dst,
                classful_prefix(dst),
                Ipv4Addr::new(c[4], c[5], c[6], c[7]),
            )
        })
        .collect()
}

/// Go's `net.IP.DefaultMask`: class A /8, B /16, C /24; D and E have none
/// (Go then prints the route with a nil mask; we take /32).
fn classful_prefix(ip: Ipv4Addr) -> u8 {
    match ip.octets()[0] {
        0..=127 => 8,
        128..=191 => 16,
        192..=223 => 24,
        _ => 32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut m = Message::request(MessageType::Discover, 0xdeadbeef, [2, 0, 0, 0, 0, 1]);
        m.flags = FLAG_BROADCAST;
        m.set_option(opt::CLIENT_ID, b"\0abc/net/eth0".to_vec());
        m.set_option(opt::PARAMETER_REQUEST_LIST, vec![1, 3]);
        let wire = m.encode();
        assert_eq!(wire.len(), MIN_LEN);
        assert_eq!(&wire[236..240], &MAGIC_COOKIE);
        assert_eq!(&wire[240..243], &[53, 1, 1]);
        let back = Message::decode(&wire).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.message_type(), Some(MessageType::Discover));
    }

    #[test]
    fn long_option_split_and_joined() {
        let mut m = Message::request(MessageType::Request, 1, [0; 6]);
        m.set_option(opt::USER_CLASS, vec![b'x'; 300]);
        let wire = m.encode();
        let back = Message::decode(&wire).unwrap();
        assert_eq!(back.option(opt::USER_CLASS).unwrap().len(), 300);
    }

    #[test]
    fn hostile_bytes_never_panic() {
        let m = Message::request(MessageType::Ack, 7, [1; 6]).encode();
        for cut in 0..m.len() {
            let _ = Message::decode(&m[..cut]);
        }
        let mut bad = m.clone();
        bad[240] = 53;
        bad[241] = 250; // length past the end
        bad.truncate(260);
        assert!(Message::decode(&bad).is_none());
        let mut overload = m;
        overload.splice(243..243, [52, 1, 3]);
        assert!(Message::decode(&overload).is_some());
        assert!(Message::decode(&[0xff; 400]).is_none());
    }

    #[test]
    fn overload_reads_file_then_sname() {
        let mut wire = Message::request(MessageType::Offer, 9, [2; 6]).encode();
        // 52 = 3: options in `file` (108..236) first, then `sname` (44..108).
        wire.splice(243..243, [52, 1, 3]);
        // file: the mask, a pad, the first half of 121 (10.0.0.0/8 via ...), end.
        let file = [1, 4, 255, 255, 255, 0, 0, 121, 2, 8, 10, 255];
        wire[108..108 + file.len()].copy_from_slice(&file);
        // sname: a pad, the router, the rest of 121 (... 10.154.0.1), end.
        let sname = [0, 3, 4, 10, 154, 0, 1, 121, 4, 10, 154, 0, 1, 255];
        wire[44..44 + sname.len()].copy_from_slice(&sname);
        let m = Message::decode(&wire).unwrap();
        assert_eq!(
            m.ip_option(opt::SUBNET_MASK),
            Some(Ipv4Addr::new(255, 255, 255, 0))
        );
        assert_eq!(m.ip_option(opt::ROUTER), Some(Ipv4Addr::new(10, 154, 0, 1)));
        // 121 split over `file` and `sname` is one value (RFC 3396).
        let routes = classless_routes(m.option(opt::CLASSLESS_ROUTES).unwrap()).unwrap();
        assert_eq!(
            routes,
            vec![(Ipv4Addr::new(10, 0, 0, 0), 8, Ipv4Addr::new(10, 154, 0, 1))]
        );
        // Without the overload option those bytes are not options.
        let mut plain = wire.clone();
        plain.drain(243..246);
        assert_eq!(
            Message::decode(&plain).unwrap().option(opt::SUBNET_MASK),
            None
        );
        // An option in `file` running past its end: not well formed.
        wire[108..108 + file.len()].fill(0);
        wire[233..236].copy_from_slice(&[3, 9, 1]);
        assert!(Message::decode(&wire).is_none());
    }

    #[test]
    fn routes_121_and_33() {
        // 10.0.0.0/8 via 10.131.0.1, 0/0 via 10.131.0.1, 192.168.1.0/24 via 0.0.0.0
        let v = [
            8, 10, 10, 131, 0, 1, 0, 10, 131, 0, 1, 24, 192, 168, 1, 0, 0, 0, 0,
        ];
        let r = classless_routes(&v).unwrap();
        assert_eq!(
            r,
            vec![
                (Ipv4Addr::new(10, 0, 0, 0), 8, Ipv4Addr::new(10, 131, 0, 1)),
                (Ipv4Addr::UNSPECIFIED, 0, Ipv4Addr::new(10, 131, 0, 1)),
                (Ipv4Addr::new(192, 168, 1, 0), 24, Ipv4Addr::UNSPECIFIED),
            ]
        );
        assert!(classless_routes(&[33, 1, 2, 3, 4, 5, 6, 7, 8]).is_none());
        assert!(classless_routes(&[24, 1, 2]).is_none());
        let s = static_routes(&[172, 16, 0, 0, 10, 131, 0, 1, 1, 2]);
        assert_eq!(
            s,
            vec![(
                Ipv4Addr::new(172, 16, 0, 0),
                16,
                Ipv4Addr::new(10, 131, 0, 1)
            )]
        );
    }
}
