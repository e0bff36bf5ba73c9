//! Go's `net/rpc` over HTTP CONNECT with `encoding/gob`, as a Go
//! `rpc.Client` and `rpc.Server` speak it over a stream socket: a client
//! and the per-connection server loop, byte for byte as Go's, so either
//! side can be a Go process. Nothing here knows which service runs on it:
//! a server is a [`Service`] (a name and its methods over gob
//! [`Value`](gob::Value)s), a client sends values of the schemas
//! ([`gob::TypeDef`]) its caller declares.
//!
//! A connection starts with `CONNECT /_goRPC_ HTTP/1.0` and the answer
//! `HTTP/1.0 200 Connected to Go RPC`; then each call is an `rpc.Request`
//! (method, sequence number) and the argument, each answered by an
//! `rpc.Response` (method, sequence number, error text) and the reply, all
//! gob values on one gob stream per direction ([`gob`]).
//!
//! Peers may be hostile. Whatever they send, the decoder holds at most a
//! message of [`gob::MAX_MESSAGE`] and a value of [`gob::MAX_DECODED`]
//! (nested at most [`gob::MAX_DEPTH`] levels, decoded without recursion),
//! and [`gob::MAX_TYPES`] definitions a stream; the server ([`serve`])
//! runs at most [`Limits::max_conns`] connections and drops a peer that
//! has not sent its request by [`Limits::deadline`].

pub mod gob;

use gob::{Kind, Ty, TypeDef, Value, field};
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const CONNECT: &[u8] = b"CONNECT /_goRPC_ HTTP/1.0\n\n";
const RPC_PATH: &str = "/_goRPC_";
const CONNECTED: &str = "200 Connected to Go RPC";
/// Bound on an HTTP head, either side.
const MAX_HEAD: u64 = 8192;

// `rpc.Request` is the first type a Go client process sends, and
// `rpc.Response` the first a Go server sends: id 65 on both streams.
// (`rpc.Request`'s `next` field is unexported, so not sent.)
static REQUEST: TypeDef = TypeDef {
    id: 65,
    name: "Request",
    kind: Kind::Struct(&[("ServiceMethod", Ty::String), ("Seq", Ty::Uint)]),
};
static RESPONSE: TypeDef = TypeDef {
    id: 65,
    name: "Response",
    kind: Kind::Struct(&[
        ("ServiceMethod", Ty::String),
        ("Seq", Ty::Uint),
        ("Error", Ty::String),
    ]),
};

/// `rpc.Request` and `rpc.Response` (a request has no error).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    pub service_method: String,
    pub seq: u64,
    pub error: String,
}

impl Header {
    fn to_value(&self) -> Value {
        Value::Struct(vec![
            (
                "ServiceMethod".into(),
                Value::String(self.service_method.clone()),
            ),
            ("Seq".into(), Value::Uint(self.seq)),
            ("Error".into(), Value::String(self.error.clone())),
        ])
    }

    /// Reads a header value; absent fields are Go's zero.
    pub fn from_value(v: &Value) -> Result<Header, String> {
        Ok(Header {
            service_method: field::string(v, "ServiceMethod")?,
            seq: field::uint(v, "Seq")?,
            error: field::string(v, "Error")?,
        })
    }
}

/// Why a call did not return a reply.
#[derive(Debug)]
pub enum CallError {
    /// The server answered with this error text.
    Remote(String),
    /// The connection broke, or the other side does not speak net/rpc.
    Protocol(String),
}

impl CallError {
    /// The server does not serve the method (Go's text).
    pub fn is_unknown_method(&self) -> bool {
        matches!(self, CallError::Remote(m) if m.starts_with("rpc: can't find method "))
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Remote(m) | CallError::Protocol(m) => f.write_str(m),
        }
    }
}

fn protocol(context: &str, e: impl fmt::Display) -> CallError {
    CallError::Protocol(format!("{context}: {e}"))
}

/// Reads an HTTP head (request or status line, headers, blank line) and
/// returns its first line. Lines may end in `\n` (as Go's rpc sends them)
/// or `\r\n`.
fn read_http_head(r: &mut impl BufRead) -> io::Result<String> {
    let mut first: Option<String> = None;
    let mut left = MAX_HEAD;
    loop {
        let mut line = Vec::new();
        let n = r.by_ref().take(left).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if line.last() != Some(&b'\n') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP head too long",
            ));
        }
        left -= n as u64;
        let text = String::from_utf8_lossy(&line)
            .trim_end_matches(['\r', '\n'])
            .to_string();
        match (text.is_empty(), &first) {
            (true, Some(head)) => return Ok(head.clone()),
            (true, None) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "empty HTTP head",
                ));
            }
            (false, None) => first = Some(text),
            (false, Some(_)) => {} // a header: nothing we need
        }
    }
}

// ---- client ----

/// One connection to a server; calls on it share the gob streams, as a
/// Go `rpc.Client`'s do.
pub struct Client {
    reader: BufReader<UnixStream>,
    encoder: gob::Encoder,
    decoder: gob::Decoder,
    seq: u64,
}

impl Client {
    /// Does the HTTP CONNECT handshake on a connected stream.
    pub fn from_stream(stream: UnixStream) -> Result<Client, CallError> {
        // Go's server drops whatever arrives with the CONNECT line, so the
        // first request waits for the answer.
        (&stream)
            .write_all(CONNECT)
            .map_err(|e| protocol("sending the CONNECT request", e))?;
        let mut reader = BufReader::new(stream);
        let status_line =
            read_http_head(&mut reader).map_err(|e| protocol("reading the CONNECT answer", e))?;
        let status = status_line.split_once(' ').map_or("", |(_, s)| s);
        if status != CONNECTED {
            return Err(CallError::Protocol(format!(
                "unexpected HTTP response: {status}"
            )));
        }
        Ok(Client {
            reader,
            encoder: gob::Encoder::new(),
            decoder: gob::Decoder::new(),
            seq: 0,
        })
    }

    /// The sequence number of the next call.
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Calls `method` (`Service.Method`) with `args`, a value of the
    /// schema `def`, and returns the reply value.
    pub fn call(
        &mut self,
        method: &str,
        def: &'static TypeDef,
        args: &Value,
    ) -> Result<Value, CallError> {
        let request = Header {
            service_method: method.to_string(),
            seq: self.seq,
            error: String::new(),
        };
        self.seq += 1;
        let mut out = Vec::new();
        self.encoder
            .encode(&mut out, &REQUEST, &request.to_value())
            .and_then(|()| self.encoder.encode(&mut out, def, args))
            .map_err(|e| protocol("encoding the request", e))?;
        self.reader
            .get_ref()
            .write_all(&out)
            .map_err(|e| protocol("sending the request", e))?;
        let reply = |e: gob::Error| protocol("reading the reply", e);
        let response = self.decoder.read_value(&mut self.reader).map_err(reply)?;
        let response =
            Header::from_value(&response).map_err(|e| protocol("reading the reply", e))?;
        if response.seq != request.seq {
            return Err(CallError::Protocol(format!(
                "reply to call {} while waiting for call {}",
                response.seq, request.seq
            )));
        }
        // A body follows even an error (an empty struct).
        let body = self.decoder.read_value(&mut self.reader).map_err(reply)?;
        if !response.error.is_empty() {
            return Err(CallError::Remote(response.error));
        }
        Ok(body)
    }
}

// ---- server ----

/// A method's answer: a value of the schema `def`.
pub struct Reply {
    pub def: &'static TypeDef,
    pub value: Value,
}

/// What a server serves: one Go rpc service (`Service.Method` names).
pub trait Service {
    /// The part of `Service.Method` before the dot.
    fn name(&self) -> &str;
    /// `struct{}` with the id this server's Go counterpart gives it: the
    /// body Go sends with an error reply.
    fn empty(&self) -> &'static TypeDef;
    /// Runs `method` (the part after the dot) on `args`; `None` when the
    /// service has no such method. An `Err` becomes the response's error
    /// text, as Go's net/rpc sends it.
    fn call(&self, method: &str, args: &Value) -> Option<Result<Reply, String>>;
}

/// A server's bounds against its peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; while this many are open, the server
    /// accepts no more (they wait in the socket's listen queue, which the
    /// kernel bounds).
    pub max_conns: usize,
    /// How long a peer has to send its request (from the connection, or
    /// from the previous answer: the HTTP head, then header and body
    /// whole) and to take our answer. A peer that sends nothing, or stops
    /// mid-message, or trickles, is dropped when it has passed. The
    /// service's own work is not bounded by it.
    pub deadline: Duration,
    /// Stack of each connection's thread.
    pub stack_size: usize,
}

impl Default for Limits {
    /// 32 connections, 30 s, 256 KiB: a Go client sends its request as
    /// soon as the handshake is answered, so 30 s leaves room for a loaded
    /// node; decoding needs little stack.
    fn default() -> Self {
        Limits {
            max_conns: 32,
            deadline: Duration::from_secs(30),
            stack_size: 256 * 1024,
        }
    }
}

/// A connection whose reads and writes must be done by a deadline: each
/// read or write waits at most the time left.
struct Timed {
    stream: UnixStream,
    deadline: Instant,
}

impl Timed {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer did not send its request in time",
            ));
        }
        Ok(left)
    }

    fn timed_out(e: io::Error) -> io::Error {
        match e.kind() {
            io::ErrorKind::WouldBlock => io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer did not send its request in time",
            ),
            _ => e,
        }
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        self.stream.read(buf).map_err(Timed::timed_out)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        self.stream.write(buf).map_err(Timed::timed_out)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Serves one connection: the HTTP CONNECT handshake, then requests until
/// the peer closes. Returns `Ok` when it does (or after refusing a request
/// that is not a CONNECT to `/_goRPC_`, answered as Go's server does), and
/// an error when the stream breaks, is not gob, or the peer misses the
/// deadline (`deadline` for each request, see [`Limits`]). Call it on a
/// thread per connection: it blocks while `service` works.
pub fn serve_conn(
    stream: UnixStream,
    service: &impl Service,
    deadline: Duration,
) -> io::Result<()> {
    let mut reader = BufReader::new(Timed {
        stream,
        deadline: Instant::now() + deadline,
    });
    let request_line = read_http_head(&mut reader)?;
    let mut words = request_line.split(' ');
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let writer = reader.get_mut();
    if path != RPC_PATH {
        writer.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n404 page not found\n")?;
        return Ok(());
    }
    if method != "CONNECT" {
        writer.write_all(b"HTTP/1.0 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n405 must CONNECT\n")?;
        return Ok(());
    }
    writer.write_all(format!("HTTP/1.0 {CONNECTED}\n\n").as_bytes())?;

    let mut decoder = gob::Decoder::new();
    let mut encoder = gob::Encoder::new();
    let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
    loop {
        let Some((request, body)) = read_request(&mut decoder, &mut reader)? else {
            return Ok(());
        };
        let (error, reply) = match dispatch(service, &request.service_method, &body) {
            Ok(reply) => (String::new(), reply),
            Err(e) => (
                e,
                Reply {
                    def: service.empty(),
                    value: Value::Struct(Vec::new()),
                },
            ),
        };
        let response = Header {
            service_method: request.service_method,
            seq: request.seq,
            error,
        };
        let mut out = Vec::new();
        encoder
            .encode(&mut out, &RESPONSE, &response.to_value())
            .and_then(|()| encoder.encode(&mut out, reply.def, &reply.value))
            .map_err(|e| invalid(e.to_string()))?;
        // The answer, and the next request, within a deadline of their own.
        let timed = reader.get_mut();
        timed.deadline = Instant::now() + deadline;
        timed.write_all(&out)?;
    }
}

/// Connections being served, at most `max`.
struct Slots {
    open: Mutex<usize>,
    freed: Condvar,
    max: usize,
}

impl Slots {
    /// Waits until fewer than `max` connections are open, then counts one.
    fn take(&self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        while *open >= self.max {
            open = self.freed.wait(open).unwrap_or_else(|p| p.into_inner());
        }
        *open += 1;
    }

    fn give_back(&self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        *open = open.saturating_sub(1);
        self.freed.notify_one();
    }
}

/// Gives the slot back when the connection's thread ends, however.
struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.give_back();
    }
}

/// The accept loop: serves each connection on a thread of its own
/// (`serve_conn`), at most `limits.max_conns` at once. Never returns:
/// accept errors (out of file descriptors) are logged and retried after a
/// pause.
pub fn serve<S>(listener: &UnixListener, service: Arc<S>, limits: Limits) -> !
where
    S: Service + Send + Sync + 'static,
{
    let slots = Arc::new(Slots {
        open: Mutex::new(0),
        freed: Condvar::new(),
        max: limits.max_conns.max(1),
    });
    loop {
        slots.take();
        let slot = Slot(Arc::clone(&slots));
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) => {
                log::warn!("accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let service = Arc::clone(&service);
        let spawned = std::thread::Builder::new()
            .name("rpc-conn".into())
            .stack_size(limits.stack_size)
            .spawn(move || {
                let _slot = slot;
                if let Err(e) = serve_conn(stream, &*service, limits.deadline) {
                    log::debug!("rpc connection: {e}");
                }
            });
        if let Err(e) = spawned {
            // The connection (and its slot) went with the closure.
            log::error!("start an rpc connection thread: {e}");
        }
    }
}

/// Reads one request, header and body, as the server does; `None` when
/// the stream ends cleanly before it. A header that is not an
/// `rpc.Request`, or bytes that are not gob, are errors: the stream is out
/// of step, the connection ends (as in Go).
pub fn read_request(
    decoder: &mut gob::Decoder,
    r: &mut impl Read,
) -> io::Result<Option<(Header, Value)>> {
    let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
    let header = match decoder.read_value(r) {
        Ok(v) => v,
        Err(gob::Error::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(gob::Error::Io(e)) => return Err(e),
        Err(e) => return Err(invalid(e.to_string())),
    };
    let header = Header::from_value(&header).map_err(invalid)?;
    // A value of the wrong type is the service's to answer, as in Go.
    let body = match decoder.read_value(r) {
        Ok(v) => v,
        Err(gob::Error::Io(e)) => return Err(e),
        Err(e) => return Err(invalid(e.to_string())),
    };
    Ok(Some((header, body)))
}

/// Runs one call, with Go's texts for what cannot be found.
fn dispatch(service: &impl Service, method: &str, body: &Value) -> Result<Reply, String> {
    let Some((svc, name)) = method.rsplit_once('.') else {
        return Err(format!("rpc: service/method request ill-formed: {method}"));
    };
    if svc != service.name() {
        return Err(format!("rpc: can't find service {method}"));
    }
    service
        .call(name, body)
        .unwrap_or_else(|| Err(format!("rpc: can't find method {method}")))
}

#[cfg(test)]
mod tests;
