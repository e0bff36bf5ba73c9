//! The calls between the dhcp plugin and its daemon: Go's net/rpc with gob
//! (the `netrpc` crate), with the reference's service `DHCP`, its methods
//! and argument and reply types ([`wire`]), so our plugin works with a Go
//! daemon and a Go plugin with ours.

mod wire;

use cni_skel::CniResult;
use std::fmt;
use std::io;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Where the daemon listens unless `daemonSocketPath` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/cni/dhcp.sock";
/// ADD and CHECK: acquire or confirm the attachment's lease.
pub const ALLOCATE: &str = "DHCP.Allocate";
/// DEL: stop maintaining the lease and release it.
pub const RELEASE: &str = "DHCP.Release";
/// GC (ours only; a Go daemon does not know it): drop the leases of the
/// network's attachments that are not in `cni.dev/valid-attachments`.
pub const GC: &str = "DHCP.GC";

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

/// What the daemon does for each RPC method; [`Dhcp`] serves it as the
/// net/rpc service `DHCP`.
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

/// A [`Service`] (behind a reference or an `Arc`) as the net/rpc service
/// `DHCP`.
pub struct Dhcp<S>(pub S);

impl<S, D> netrpc::Service for Dhcp<S>
where
    S: std::ops::Deref<Target = D>,
    D: Service + ?Sized,
{
    fn name(&self) -> &str {
        "DHCP"
    }

    fn empty(&self) -> &'static netrpc::gob::TypeDef {
        &wire::EMPTY
    }

    fn call(
        &self,
        method: &str,
        body: &netrpc::gob::Value,
    ) -> Option<Result<netrpc::Reply, String>> {
        let args = || wire::cmd_args_from_value(body).map_err(|e| format!("gob: {e}"));
        let empty = || netrpc::Reply {
            def: &wire::EMPTY,
            value: netrpc::gob::Value::Struct(Vec::new()),
        };
        Some(match method {
            "Allocate" => args()
                .and_then(|a| self.0.allocate(&a))
                .map(|r| netrpc::Reply {
                    def: &wire::RESULT,
                    value: wire::result_to_value(&r),
                }),
            "Release" => args().and_then(|a| self.0.release(&a)).map(|()| empty()),
            "GC" => args().and_then(|a| self.0.gc(&a)).map(|()| empty()),
            _ => return None,
        })
    }
}

/// Why a call did not return a reply.
#[derive(Debug)]
pub enum CallError {
    /// Nothing accepts connections on the socket (no socket file,
    /// connection refused, ...): the daemon is not running.
    Unreachable { socket: String, source: io::Error },
    /// The daemon answered with an error, the connection broke, or the
    /// other side does not speak net/rpc.
    Rpc(netrpc::CallError),
}

impl From<netrpc::CallError> for CallError {
    fn from(e: netrpc::CallError) -> Self {
        CallError::Rpc(e)
    }
}

impl CallError {
    /// The daemon does not serve the method (a Go daemon asked for GC).
    pub fn is_unknown_method(&self) -> bool {
        matches!(self, CallError::Rpc(e) if e.is_unknown_method())
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
            CallError::Rpc(e) => e.fmt(f),
        }
    }
}

fn connect(socket: &Path) -> Result<UnixStream, CallError> {
    UnixStream::connect(socket).map_err(|source| CallError::Unreachable {
        socket: socket.display().to_string(),
        source,
    })
}

/// One call on a new connection, as the Go plugin makes it.
fn call(socket: &Path, method: &str, args: &CmdArgs) -> Result<netrpc::gob::Value, CallError> {
    let mut client = netrpc::Client::from_stream(connect(socket)?)?;
    Ok(client.call(method, &wire::CMD_ARGS, &wire::cmd_args_to_value(args))?)
}

/// `DHCP.Allocate` on a new connection.
pub fn allocate(socket: &Path, args: &CmdArgs) -> Result<CniResult, CallError> {
    let reply = call(socket, ALLOCATE, args)?;
    wire::result_from_value(&reply).map_err(|e| {
        CallError::Rpc(netrpc::CallError::Protocol(format!(
            "reading the result: {e}"
        )))
    })
}

/// `DHCP.Release` on a new connection.
pub fn release(socket: &Path, args: &CmdArgs) -> Result<(), CallError> {
    call(socket, RELEASE, args).map(drop)
}

/// `DHCP.GC` on a new connection.
pub fn gc(socket: &Path, args: &CmdArgs) -> Result<(), CallError> {
    call(socket, GC, args).map(drop)
}

/// Whether something accepts connections on `socket` (STATUS). A
/// socket-activated daemon counts: systemd starts it on the first call.
pub fn reachable(socket: &Path) -> Result<(), CallError> {
    connect(socket).map(drop)
}

#[cfg(test)]
mod tests;
