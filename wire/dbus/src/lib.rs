//! A minimal, blocking D-Bus client: enough to call a few methods on the
//! system bus (firewalld's zone sources, the bus daemon's name queries)
//! with string arguments and one basic value in the reply.
//!
//! Why not a D-Bus crate: a plugin makes two to four calls per run and
//! exits. `zbus` brings an async executor and threads; `rustbus` is
//! blocking but adds its generic (de)marshalling and a proc-macro crate for
//! what is here a few hundred lines (the measured sizes are in
//! plugins/firewall/README.md). The wire format is the D-Bus
//! specification's: SASL `EXTERNAL` authentication on a Unix socket, then
//! little-endian messages; replies in either byte order are read.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The system bus when `DBUS_SYSTEM_BUS_ADDRESS` is unset (the
/// specification's default).
pub const DEFAULT_SYSTEM_BUS: &str = "unix:path=/var/run/dbus/system_bus_socket";

/// How long one call may take before it fails (firewalld applies a source
/// change to the kernel before it answers).
const TIMEOUT: Duration = Duration::from_secs(20);

/// A D-Bus failure: the connection, the protocol, or an error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// No bus could be reached at the address (no daemon running).
    Unreachable(String),
    /// The connection broke, or the peer spoke something else.
    Protocol(String),
    /// The callee answered with an error: its name and message.
    Reply {
        /// E.g. `org.freedesktop.DBus.Error.NameHasNoOwner`.
        name: String,
        /// The error's message text (may be empty).
        message: String,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Unreachable(m) | Error::Protocol(m) => f.write_str(m),
            Error::Reply { name, message } if message.is_empty() => f.write_str(name),
            Error::Reply { name, message } => write!(f, "{name}: {message}"),
        }
    }
}

fn proto(what: impl Into<String>) -> Error {
    Error::Protocol(what.into())
}

/// One value in a reply body (the first one; the calls used here return
/// a single value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// No body.
    Empty,
    /// `s`, `o` or `g`.
    Str(String),
    /// `b`.
    Bool(bool),
    /// `u`.
    U32(u32),
    /// Any other type: its signature.
    Other(String),
}

/// The longest SASL line read from the bus (its lines are under 100 bytes).
const MAX_AUTH_LINE: u64 = 4096;
/// The most SASL lines read before `OK` (the bus sends one to three).
const MAX_AUTH_LINES: usize = 8;

/// A connection to a bus, after `Hello`: over a Unix socket
/// ([`Connection::open`]), or over any byte stream ([`Connection::over`]).
pub struct Connection<S: Read + Write = UnixStream> {
    stream: BufReader<S>,
    serial: u32,
}

/// The system bus: `DBUS_SYSTEM_BUS_ADDRESS`, else the default socket.
pub fn system_bus() -> Result<Connection, Error> {
    let addr = std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
        .ok()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| DEFAULT_SYSTEM_BUS.to_string());
    Connection::open(&addr)
}

/// Where a `unix:` address points.
#[derive(Debug, Clone, PartialEq, Eq)]
enum UnixAddr {
    Path(String),
    Abstract(String),
}

/// The Unix socket addresses in a D-Bus address list
/// (`unix:path=/x,guid=…;unix:abstract=y`), unescaping `%xx`.
fn parse_addresses(list: &str) -> Vec<UnixAddr> {
    let mut out = Vec::new();
    for entry in list.split(';') {
        let Some(params) = entry.strip_prefix("unix:") else {
            continue;
        };
        for kv in params.split(',') {
            match kv.split_once('=') {
                Some(("path", v)) => out.push(UnixAddr::Path(unescape(v))),
                Some(("abstract", v)) => out.push(UnixAddr::Abstract(unescape(v))),
                _ => {}
            }
        }
    }
    out
}

fn unescape(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = v
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn connect(addr: &UnixAddr) -> std::io::Result<UnixStream> {
    match addr {
        UnixAddr::Path(p) => UnixStream::connect(p),
        UnixAddr::Abstract(name) => {
            use std::os::linux::net::SocketAddrExt;
            let sa = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
            UnixStream::connect_addr(&sa)
        }
    }
}

impl Connection {
    /// Connects to the first reachable address of `address` (a D-Bus
    /// address list), authenticates and says `Hello`.
    pub fn open(address: &str) -> Result<Connection, Error> {
        let addrs = parse_addresses(address);
        let mut last = format!("no unix address in {address:?}");
        for a in &addrs {
            match connect(a) {
                Ok(s) => return Connection::start(s),
                Err(e) => last = format!("cannot connect to D-Bus at {a:?}: {e}"),
            }
        }
        Err(Error::Unreachable(last))
    }

    fn start(stream: UnixStream) -> Result<Connection, Error> {
        let io = |e: std::io::Error| proto(format!("D-Bus connection: {e}"));
        stream.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
        stream.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
        Connection::over(stream)
    }
}

impl<S: Read + Write> Connection<S> {
    /// Authenticates on `stream`, already connected to a bus, and says
    /// `Hello`. Every answer the client reads goes through here (the
    /// fuzz target replays bytes as the bus's side of the conversation);
    /// `stream` must bound its own waits ([`Connection::open`] sets a
    /// timeout on its socket).
    pub fn over(stream: S) -> Result<Connection<S>, Error> {
        let mut conn = Connection {
            stream: BufReader::new(stream),
            serial: 0,
        };
        conn.authenticate()?;
        conn.call(
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "Hello",
            &[],
        )?;
        Ok(conn)
    }

    /// SASL EXTERNAL without an authorization identity: the bus takes the
    /// socket's credentials (so no uid lookup is needed here).
    fn authenticate(&mut self) -> Result<(), Error> {
        let io = |e: std::io::Error| proto(format!("D-Bus authentication: {e}"));
        let sock = self.stream.get_mut();
        sock.write_all(b"\0AUTH EXTERNAL\r\n").map_err(io)?;
        let mut line = String::new();
        // Bounded: a peer that never ends a line, or never says OK, is an
        // error, not a loop or a growing buffer.
        for _ in 0..MAX_AUTH_LINES {
            line.clear();
            self.stream
                .by_ref()
                .take(MAX_AUTH_LINE)
                .read_line(&mut line)
                .map_err(io)?;
            if !line.ends_with('\n') {
                return Err(proto(format!(
                    "D-Bus authentication: no complete line in {} bytes",
                    line.len()
                )));
            }
            let l = line.trim_end();
            if l.starts_with("OK ") || l == "OK" {
                return self.stream.get_mut().write_all(b"BEGIN\r\n").map_err(io);
            }
            if l == "DATA" || l.starts_with("DATA ") {
                self.stream.get_mut().write_all(b"DATA\r\n").map_err(io)?;
                continue;
            }
            return Err(proto(format!("D-Bus authentication refused: {l:?}")));
        }
        Err(proto(format!(
            "D-Bus authentication: no OK in {MAX_AUTH_LINES} lines"
        )))
    }

    /// Calls `member` with string arguments and returns the first value of
    /// the reply, or the error reply.
    pub fn call(
        &mut self,
        destination: &str,
        path: &str,
        interface: &str,
        member: &str,
        args: &[&str],
    ) -> Result<Value, Error> {
        self.serial = self.serial.wrapping_add(1).max(1);
        let serial = self.serial;
        let msg = method_call(serial, destination, path, interface, member, args);
        let io = |e: std::io::Error| proto(format!("D-Bus call {interface}.{member}: {e}"));
        self.stream.get_mut().write_all(&msg).map_err(io)?;
        loop {
            let reply = read_message(&mut self.stream)?;
            // Signals (NameAcquired after Hello) and anything else that is
            // not the answer to this call are skipped.
            if reply.reply_serial != Some(serial) {
                continue;
            }
            return match reply.kind {
                METHOD_RETURN => reply.first_value(),
                ERROR => Err(Error::Reply {
                    name: reply.error_name.clone().unwrap_or_default(),
                    message: match reply.first_value() {
                        Ok(Value::Str(s)) => s,
                        _ => String::new(),
                    },
                }),
                other => Err(proto(format!("unexpected D-Bus message type {other}"))),
            };
        }
    }
}

const METHOD_CALL: u8 = 1;
const METHOD_RETURN: u8 = 2;
const ERROR: u8 = 3;

const FIELD_PATH: u8 = 1;
const FIELD_INTERFACE: u8 = 2;
const FIELD_MEMBER: u8 = 3;
const FIELD_ERROR_NAME: u8 = 4;
const FIELD_REPLY_SERIAL: u8 = 5;
const FIELD_DESTINATION: u8 = 6;
const FIELD_SIGNATURE: u8 = 8;

/// Little-endian marshalling into a buffer whose offset 0 is the start of
/// the message (alignment is relative to it).
struct Writer(Vec<u8>);

impl Writer {
    fn pad(&mut self, align: usize) {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
    }
    fn u32(&mut self, v: u32) {
        self.pad(4);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn string(&mut self, s: &str) {
        // Lengths fit: every string here is a name or a short argument.
        self.u32(u32::try_from(s.len()).unwrap_or(u32::MAX));
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
    }
    fn signature(&mut self, s: &str) {
        self.0.push(u8::try_from(s.len()).unwrap_or(u8::MAX));
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
    }
    /// A header field: struct (byte code, variant).
    fn field_str(&mut self, code: u8, sig: &str, value: &str) {
        self.pad(8);
        self.0.push(code);
        self.signature(sig);
        if sig == "g" {
            self.signature(value);
        } else {
            self.string(value);
        }
    }
}

fn method_call(
    serial: u32,
    destination: &str,
    path: &str,
    interface: &str,
    member: &str,
    args: &[&str],
) -> Vec<u8> {
    let mut body = Writer(Vec::new());
    for a in args {
        body.string(a);
    }
    let mut w = Writer(Vec::with_capacity(256));
    w.0.extend_from_slice(&[b'l', METHOD_CALL, 0, 1]);
    w.u32(u32::try_from(body.0.len()).unwrap_or(u32::MAX));
    w.u32(serial);
    w.u32(0); // header fields' length, patched below
    let start = w.0.len();
    w.field_str(FIELD_PATH, "o", path);
    w.field_str(FIELD_INTERFACE, "s", interface);
    w.field_str(FIELD_MEMBER, "s", member);
    w.field_str(FIELD_DESTINATION, "s", destination);
    if !args.is_empty() {
        w.field_str(FIELD_SIGNATURE, "g", &"s".repeat(args.len()));
    }
    let fields_len = u32::try_from(w.0.len() - start).unwrap_or(u32::MAX);
    w.0[12..16].copy_from_slice(&fields_len.to_le_bytes());
    w.pad(8);
    w.0.extend_from_slice(&body.0);
    w.0
}

/// The parts of a received message the client uses.
#[derive(Debug, Default)]
struct Message {
    kind: u8,
    big_endian: bool,
    reply_serial: Option<u32>,
    error_name: Option<String>,
    signature: String,
    body: Vec<u8>,
}

/// The largest message accepted (the specification's limit is 128 MiB;
/// the replies here are tiny).
const MAX_MESSAGE: usize = 1 << 20;

fn read_message(r: &mut impl Read) -> Result<Message, Error> {
    let io = |e: std::io::Error| proto(format!("D-Bus read: {e}"));
    let mut fixed = [0u8; 16];
    r.read_exact(&mut fixed).map_err(io)?;
    let big_endian = match fixed[0] {
        b'l' => false,
        b'B' => true,
        other => return Err(proto(format!("bad D-Bus endianness byte {other}"))),
    };
    let word = |b: &[u8]| -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    let body_len = word(&fixed[4..8]) as usize;
    let fields_len = word(&fixed[12..16]) as usize;
    let header_end = (16 + fields_len).next_multiple_of(8);
    if header_end + body_len > MAX_MESSAGE {
        return Err(proto("D-Bus message too large"));
    }
    let mut rest = vec![0u8; header_end - 16 + body_len];
    r.read_exact(&mut rest).map_err(io)?;
    let mut whole = fixed.to_vec();
    whole.extend_from_slice(&rest);
    let mut msg = Message {
        kind: fixed[1],
        big_endian,
        ..Message::default()
    };
    let mut cur = Reader {
        buf: &whole,
        pos: 16,
        end: 16 + fields_len,
        big_endian,
    };
    while cur.pos < cur.end {
        cur.align(8)?;
        if cur.pos >= cur.end {
            break;
        }
        let code = cur.byte()?;
        let sig = cur.signature()?;
        match (code, sig.as_str()) {
            (FIELD_REPLY_SERIAL, "u") => msg.reply_serial = Some(cur.u32()?),
            (FIELD_ERROR_NAME, "s") => msg.error_name = Some(cur.string()?),
            (FIELD_SIGNATURE, "g") => msg.signature = cur.signature()?,
            (_, "s" | "o") => {
                cur.string()?;
            }
            (_, "g") => {
                cur.signature()?;
            }
            (_, "u") => {
                cur.u32()?;
            }
            (_, other) => return Err(proto(format!("unexpected header field type {other:?}"))),
        }
    }
    msg.body = whole.split_off(header_end);
    Ok(msg)
}

impl Message {
    fn first_value(&self) -> Result<Value, Error> {
        let mut cur = Reader {
            buf: &self.body,
            pos: 0,
            end: self.body.len(),
            big_endian: self.big_endian,
        };
        Ok(match self.signature.chars().next() {
            None => Value::Empty,
            Some('s' | 'o') => Value::Str(cur.string()?),
            Some('g') => Value::Str(cur.signature()?),
            Some('b') => Value::Bool(cur.u32()? != 0),
            Some('u') => Value::U32(cur.u32()?),
            Some(_) => Value::Other(self.signature.clone()),
        })
    }
}

/// Unmarshalling with bounds checks: malformed input is an error, never a
/// panic. Alignment is relative to the start of `buf` (the message start
/// for headers, the body start for bodies, which is 8-aligned).
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    big_endian: bool,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Error> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.end);
        let slice = end.and_then(|e| self.buf.get(self.pos..e));
        match slice {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(proto("truncated D-Bus message")),
        }
    }
    fn align(&mut self, n: usize) -> Result<(), Error> {
        let to = self.pos.next_multiple_of(n);
        self.take(to - self.pos).map(|_| ())
    }
    fn byte(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, Error> {
        self.align(4)?;
        let big = self.big_endian;
        let b = self.take(4)?;
        let a = [b[0], b[1], b[2], b[3]];
        Ok(if big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
    fn string(&mut self) -> Result<String, Error> {
        let len = self.u32()? as usize;
        let s = String::from_utf8_lossy(self.take(len)?).into_owned();
        self.take(1)?;
        Ok(s)
    }
    fn signature(&mut self) -> Result<String, Error> {
        let len = usize::from(self.byte()?);
        let s = String::from_utf8_lossy(self.take(len)?).into_owned();
        self.take(1)?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            parse_addresses("unix:path=/run/x%20y,guid=1;tcp:host=a;unix:abstract=/tmp/dbus-q"),
            [
                UnixAddr::Path("/run/x y".into()),
                UnixAddr::Abstract("/tmp/dbus-q".into())
            ]
        );
        assert!(parse_addresses("tcp:host=x").is_empty());
    }

    #[test]
    fn call_marshals_as_the_specification_says() {
        let m = method_call(7, "d.e", "/p", "i.f", "m", &["ab"]);
        assert_eq!(&m[..4], b"l\x01\x00\x01");
        assert_eq!(u32::from_le_bytes([m[4], m[5], m[6], m[7]]), 7); // "ab": 4+2+1
        assert_eq!(u32::from_le_bytes([m[8], m[9], m[10], m[11]]), 7);
        let fields = u32::from_le_bytes([m[12], m[13], m[14], m[15]]) as usize;
        let body_at = (16 + fields).next_multiple_of(8);
        assert_eq!(&m[body_at..], b"\x02\x00\x00\x00ab\x00");
        // The first field: PATH, signature "o", "/p".
        assert_eq!(&m[16..24], b"\x01\x01o\x00\x02\x00\x00\x00");
    }

    /// A reply as the daemon writes it, built with the same writer.
    fn reply(kind: u8, reply_to: u32, sig: &str, body: &[u8], err: Option<&str>) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.0.extend_from_slice(&[b'l', kind, 1, 1]);
        w.u32(body.len() as u32);
        w.u32(99);
        w.u32(0);
        let start = w.0.len();
        w.pad(8);
        w.0.push(FIELD_REPLY_SERIAL);
        w.signature("u");
        w.u32(reply_to);
        if let Some(e) = err {
            w.field_str(FIELD_ERROR_NAME, "s", e);
        }
        if !sig.is_empty() {
            w.field_str(FIELD_SIGNATURE, "g", sig);
        }
        let len = (w.0.len() - start) as u32;
        w.0[12..16].copy_from_slice(&len.to_le_bytes());
        w.pad(8);
        w.0.extend_from_slice(body);
        w.0
    }

    #[test]
    fn replies_parse() {
        let r = reply(METHOD_RETURN, 3, "b", &[1, 0, 0, 0], None);
        let m = read_message(&mut r.as_slice()).unwrap();
        assert_eq!(m.reply_serial, Some(3));
        assert_eq!(m.first_value().unwrap(), Value::Bool(true));
        let mut body = Writer(Vec::new());
        body.string("ZONE_ALREADY_SET: 10.0.0.2/32");
        let r = reply(
            ERROR,
            4,
            "s",
            &body.0,
            Some("org.fedoraproject.FirewallD1.Exception"),
        );
        let m = read_message(&mut r.as_slice()).unwrap();
        assert_eq!(m.kind, ERROR);
        assert_eq!(
            m.error_name.as_deref(),
            Some("org.fedoraproject.FirewallD1.Exception")
        );
        assert_eq!(
            m.first_value().unwrap(),
            Value::Str("ZONE_ALREADY_SET: 10.0.0.2/32".into())
        );
    }

    /// A stream that reads `line` `times` times, then ends; writes vanish.
    struct Peer {
        data: std::io::Cursor<Vec<u8>>,
    }

    impl Read for Peer {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.data.read(buf)
        }
    }

    impl Write for Peer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn peer(line: &[u8], times: usize) -> Peer {
        Peer {
            data: std::io::Cursor::new(line.repeat(times)),
        }
    }

    /// Regression: a bus that never ends its line was read into one
    /// growing buffer (its whole text then went into the error), and one
    /// that kept sending DATA was answered for ever.
    #[test]
    fn authentication_reads_a_bounded_conversation() {
        let e = Connection::over(peer(b"x", 1 << 20)).err().unwrap();
        assert_eq!(
            e.to_string(),
            "D-Bus authentication: no complete line in 4096 bytes"
        );
        let e = Connection::over(peer(b"DATA\r\n", 100_000)).err().unwrap();
        assert_eq!(e.to_string(), "D-Bus authentication: no OK in 8 lines");
        // What a bus says: DATA, then OK; then the Hello reply.
        let mut bus = b"DATA\r\nOK 1234\r\n".to_vec();
        bus.extend(reply(
            METHOD_RETURN,
            1,
            "s",
            b"\x04\x00\x00\x00:1.0\x00",
            None,
        ));
        assert!(Connection::over(peer(&bus, 1)).is_ok());
    }

    #[test]
    fn malformed_replies_are_errors() {
        let r = reply(METHOD_RETURN, 3, "s", &[200, 0, 0, 0, b'x'], None);
        let m = read_message(&mut r.as_slice()).unwrap();
        assert!(m.first_value().is_err());
        for cut in 0..r.len() {
            let _ = read_message(&mut &r[..cut]);
        }
        let mut bad = r.clone();
        bad[0] = b'x';
        assert!(read_message(&mut bad.as_slice()).is_err());
        let mut huge = r;
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_message(&mut huge.as_slice()).is_err());
    }
}
