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

pub mod gob;

use gob::{Kind, Ty, TypeDef, Value, field};
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;

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

/// Serves one connection: the HTTP CONNECT handshake, then requests until
/// the peer closes. Returns `Ok` when it does (or after refusing a request
/// that is not a CONNECT to `/_goRPC_`, answered as Go's server does), and
/// an error when the stream breaks or is not gob. Call it on a thread per
/// connection: it blocks while `service` works.
pub fn serve_conn(stream: UnixStream, service: &impl Service) -> io::Result<()> {
    let mut reader = BufReader::new(stream);
    let request_line = read_http_head(&mut reader)?;
    let mut words = request_line.split(' ');
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let mut writer = reader.get_ref();
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
        reader.get_ref().write_all(&out)?;
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
