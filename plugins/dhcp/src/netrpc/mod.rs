//! Go's `net/rpc` over HTTP CONNECT with gob encoding: the protocol between
//! the dhcp plugin and its daemon, as the Go reference speaks it on both
//! sides, so our plugin works with a Go daemon and a Go plugin with ours.
//!
//! A connection starts with `CONNECT /_goRPC_ HTTP/1.0` and the answer
//! `HTTP/1.0 200 Connected to Go RPC`; then each call is an `rpc.Request`
//! (method, sequence number) and the argument, each answered by an
//! `rpc.Response` (method, sequence number, error text) and the reply, all
//! gob values on one gob stream per direction ([`gob`], [`wire`]).
//!
//! Owned by the rpc half of the dhcp work: the gob codec, the client calls
//! (`DHCP.Allocate`, `DHCP.Release`, `DHCP.GC`) and the per-connection
//! server loop the daemon runs ([`serve_conn`]).

pub mod gob;
mod wire;

use cni_skel::CniResult;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use wire::Header;

/// Where the daemon listens unless `daemonSocketPath` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/cni/dhcp.sock";
/// ADD and CHECK: acquire or confirm the attachment's lease.
pub const ALLOCATE: &str = "DHCP.Allocate";
/// DEL: stop maintaining the lease and release it.
pub const RELEASE: &str = "DHCP.Release";
/// GC (ours only; a Go daemon does not know it): drop the leases of the
/// network's attachments that are not in `cni.dev/valid-attachments`.
pub const GC: &str = "DHCP.GC";

const CONNECT: &[u8] = b"CONNECT /_goRPC_ HTTP/1.0\n\n";
const RPC_PATH: &str = "/_goRPC_";
const CONNECTED: &str = "200 Connected to Go RPC";
/// Bound on an HTTP head, either side.
const MAX_HEAD: u64 = 8192;

/// `skel.CmdArgs` as the Go plugin sends it (the RPC argument of every call).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CmdArgs {
    pub container_id: String,
    /// Made absolute by the plugin before the call.
    pub netns: String,
    pub if_name: String,
    pub args: String,
    pub path: String,
    pub netns_override: bool,
    pub stdin_data: Vec<u8>,
}

/// What the daemon does for each RPC method. The server loop decodes a
/// request, calls this, and encodes the reply (an `Err` becomes the
/// response's error string, as Go's net/rpc sends it).
pub trait Service {
    /// `DHCP.Allocate`: acquire (or answer from) the attachment's lease.
    fn allocate(&self, args: &CmdArgs) -> Result<CniResult, String>;
    /// `DHCP.Release`: stop maintaining the lease and release it.
    fn release(&self, args: &CmdArgs) -> Result<(), String>;
    /// `DHCP.GC`: `args.stdin_data` is the GC config (network name and
    /// `cni.dev/valid-attachments`); the other fields but `args`/`path` are
    /// empty. Until a service provides it, it answers as a Go daemon does.
    fn gc(&self, _args: &CmdArgs) -> Result<(), String> {
        Err(format!("rpc: can't find method {GC}"))
    }
}

/// Why a call did not return a reply.
#[derive(Debug)]
pub enum CallError {
    /// Nothing accepts connections on the socket (no socket file,
    /// connection refused, ...): the daemon is not running.
    Unreachable { socket: String, source: io::Error },
    /// The daemon answered with this error text.
    Remote(String),
    /// The connection broke, or the other side does not speak net/rpc.
    Protocol(String),
}

impl CallError {
    /// The daemon does not serve the method (a Go daemon asked for GC).
    pub fn is_unknown_method(&self) -> bool {
        matches!(self, CallError::Remote(m) if m.starts_with("rpc: can't find method "))
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Go's text: dial unix /run/cni/dhcp.sock: connect: no such file or directory
            CallError::Unreachable { socket, source } => {
                let reason = match source.raw_os_error() {
                    Some(n) => cni_net::NetError::errno("", n).reason(),
                    None => source.to_string(),
                };
                write!(f, "dial unix {socket}: connect: {reason}")
            }
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

/// One connection to the daemon; calls on it share the gob streams, as a
/// Go `rpc.Client`'s do.
pub struct Client {
    reader: BufReader<UnixStream>,
    encoder: gob::Encoder,
    decoder: gob::Decoder,
    seq: u64,
}

impl Client {
    /// Connects to `socket` and does the HTTP CONNECT handshake.
    pub fn dial(socket: &Path) -> Result<Client, CallError> {
        let stream = UnixStream::connect(socket).map_err(|source| CallError::Unreachable {
            socket: socket.display().to_string(),
            source,
        })?;
        Client::from_stream(stream)
    }

    /// Does the handshake on a connected stream.
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

    /// Calls `method` with `args` and returns the reply value.
    pub fn call(&mut self, method: &str, args: &CmdArgs) -> Result<gob::Value, CallError> {
        let request = Header {
            service_method: method.to_string(),
            seq: self.seq,
            error: String::new(),
        };
        self.seq += 1;
        let mut out = Vec::new();
        self.encoder
            .encode(&mut out, &wire::REQUEST, &request.to_value())
            .and_then(|()| {
                self.encoder
                    .encode(&mut out, &wire::CMD_ARGS, &wire::cmd_args_to_value(args))
            })
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

/// `DHCP.Allocate` on a new connection.
pub fn allocate(socket: &Path, args: &CmdArgs) -> Result<CniResult, CallError> {
    let reply = Client::dial(socket)?.call(ALLOCATE, args)?;
    wire::result_from_value(&reply).map_err(|e| protocol("reading the result", e))
}

/// `DHCP.Release` on a new connection.
pub fn release(socket: &Path, args: &CmdArgs) -> Result<(), CallError> {
    Client::dial(socket)?.call(RELEASE, args).map(drop)
}

/// `DHCP.GC` on a new connection.
pub fn gc(socket: &Path, args: &CmdArgs) -> Result<(), CallError> {
    Client::dial(socket)?.call(GC, args).map(drop)
}

/// Whether something accepts connections on `socket` (STATUS). A
/// socket-activated daemon counts: systemd starts it on the first call.
pub fn reachable(socket: &Path) -> Result<(), CallError> {
    UnixStream::connect(socket)
        .map(drop)
        .map_err(|source| CallError::Unreachable {
            socket: socket.display().to_string(),
            source,
        })
}

// ---- server ----

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
        let request = match decoder.read_value(&mut reader) {
            Ok(v) => v,
            Err(gob::Error::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(gob::Error::Io(e)) => return Err(e),
            Err(e) => return Err(invalid(e.to_string())),
        };
        // A header that is not an rpc.Request ends the connection, as in Go.
        let request = Header::from_value(&request).map_err(invalid)?;
        // Bytes that are not gob leave the stream out of step: close. A
        // value of the wrong type is answered with an error, as in Go.
        let body = match decoder.read_value(&mut reader) {
            Ok(v) => v,
            Err(gob::Error::Io(e)) => return Err(e),
            Err(e) => return Err(invalid(e.to_string())),
        };
        let reply = dispatch(service, &request.service_method, &body);
        let (error, value, def) = match reply {
            Ok(Some(result)) => (String::new(), wire::result_to_value(&result), &wire::RESULT),
            Ok(None) => (String::new(), gob::Value::Struct(Vec::new()), &wire::EMPTY),
            Err(e) => (e, gob::Value::Struct(Vec::new()), &wire::EMPTY),
        };
        let response = Header {
            service_method: request.service_method,
            seq: request.seq,
            error,
        };
        let mut out = Vec::new();
        encoder
            .encode(&mut out, &wire::RESPONSE, &response.to_value())
            .and_then(|()| encoder.encode(&mut out, def, &value))
            .map_err(|e| invalid(e.to_string()))?;
        reader.get_ref().write_all(&out)?;
    }
}

/// Runs one call. `Ok(Some)` is Allocate's result, `Ok(None)` an empty
/// reply; `Err` the error text, with Go's texts for unknown methods.
fn dispatch(
    service: &impl Service,
    method: &str,
    body: &gob::Value,
) -> Result<Option<CniResult>, String> {
    let Some((svc, _)) = method.rsplit_once('.') else {
        return Err(format!("rpc: service/method request ill-formed: {method}"));
    };
    if svc != "DHCP" {
        return Err(format!("rpc: can't find service {method}"));
    }
    let args = || wire::cmd_args_from_value(body).map_err(|e| format!("gob: {e}"));
    match method {
        ALLOCATE => service.allocate(&args()?).map(Some),
        RELEASE => service.release(&args()?).map(|()| None),
        GC => service.gc(&args()?).map(|()| None),
        _ => Err(format!("rpc: can't find method {method}")),
    }
}

#[cfg(test)]
mod tests;
