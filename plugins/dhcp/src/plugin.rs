//! The CNI side of dhcp: each command is one call to the daemon over its
//! unix socket. ADD and CHECK call `DHCP.Allocate` (CHECK discards the
//! lease, but fails when the daemon no longer holds it), DEL calls
//! `DHCP.Release`, GC calls `DHCP.GC` (ours only), STATUS checks that the
//! daemon accepts connections.
//!
//! Where we differ from the reference: DEL and GC succeed when the daemon is
//! not running (the reference's DEL fails, which blocks container removal
//! until the daemon is back); a config without `ipam` is an error, not a
//! panic; a daemon that is not running is reported with how to start it.

use crate::daemon::config::daemon_socket_path;
use crate::rpc::{self, CallError};
use cni_skel::error::code;
use cni_skel::{CmdArgs, CmdResult, CniError, Output, Plugin};
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

struct Dhcp;

/// The daemon's socket: `ipam.daemonSocketPath`, default /run/cni/dhcp.sock.
fn socket_path(stdin: &[u8]) -> Result<PathBuf, CniError> {
    let path = daemon_socket_path(stdin).map_err(|e| {
        CniError::internal(format!(
            "error obtaining socketPath: error parsing socket path conf: {e}"
        ))
    })?;
    Ok(if path.is_empty() {
        PathBuf::from(rpc::DEFAULT_SOCKET)
    } else {
        PathBuf::from(path)
    })
}

/// `filepath.Abs`: relative to the working directory, then cleaned
/// lexically (the daemon may run elsewhere). Empty stays empty (a DEL
/// without a netns), where Go would send the working directory.
fn absolute(path: &Path) -> PathBuf {
    if path.as_os_str().is_empty() {
        return PathBuf::new();
    }
    let joined = match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => cwd.join(path),
        _ => path.to_path_buf(),
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The RPC argument: the skel's inputs as the Go plugin forwards them.
fn rpc_args(args: &CmdArgs) -> rpc::CmdArgs {
    rpc::CmdArgs {
        container_id: args.container_id.clone(),
        netns: args
            .netns
            .as_deref()
            .map(|n| absolute(n).display().to_string())
            .unwrap_or_default(),
        if_name: args.ifname.clone(),
        args: args.args.clone(),
        path: args
            .path
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":"),
        netns_override: args.netns_override,
        stdin_data: args.stdin.clone(),
    }
}

const HOW_TO_START: &str = "is the dhcp daemon running? Start it with `/opt/cni/bin/dhcp daemon` or `systemctl start cni-dhcp.socket`";

/// A failed call as the reference words it (`error dialing DHCP daemon: …`,
/// `error calling DHCP.Allocate: …`), all code 999 as there.
fn call_error(method: &str, e: CallError) -> CniError {
    match e {
        CallError::Unreachable { .. } => {
            CniError::internal(format!("error dialing DHCP daemon: {e} ({HOW_TO_START})"))
        }
        other => CniError::internal(format!("error calling {method}: {other}")),
    }
}

impl Plugin for Dhcp {
    fn about(&self) -> String {
        cni_skel::about("dhcp")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        let socket = socket_path(&args.stdin)?;
        let mut result =
            rpc::allocate(&socket, &rpc_args(args)).map_err(|e| call_error(rpc::ALLOCATE, e))?;
        result.cni_version = args.cni_version().to_string();
        Ok(result.into())
    }

    /// The lease must still be held: the daemon answers from it, or fails
    /// (a lease lost at expiry). The result itself is not compared.
    fn check(&self, args: &CmdArgs) -> CmdResult {
        let socket = socket_path(&args.stdin)?;
        rpc::allocate(&socket, &rpc_args(args)).map_err(|e| call_error(rpc::ALLOCATE, e))?;
        Ok(Output::Nothing)
    }

    /// A daemon that is not running holds no lease to release (and the
    /// lease expires on the server): success, so the runtime can finish
    /// removing the container. An unknown lease is success in the daemon.
    fn del(&self, args: &CmdArgs) -> CmdResult {
        let socket = socket_path(&args.stdin)?;
        match rpc::release(&socket, &rpc_args(args)) {
            Ok(()) | Err(CallError::Unreachable { .. }) => Ok(Output::Nothing),
            Err(e) => Err(call_error(rpc::RELEASE, e)),
        }
    }

    /// The daemon drops the network's leases whose attachment is not in
    /// `cni.dev/valid-attachments` (it reads the list from the config we
    /// forward). A Go daemon has no such method, and a daemon that is not
    /// running maintains nothing: both are success, with nothing done.
    fn gc(&self, args: &CmdArgs) -> CmdResult {
        let socket = socket_path(&args.stdin)?;
        // Checked here so a bad list is the plugin's error, code 7.
        cni_skel::conf::valid_attachments(&args.stdin)?;
        match rpc::gc(&socket, &rpc_args(args)) {
            Ok(()) | Err(CallError::Unreachable { .. }) => Ok(Output::Nothing),
            Err(e) if e.is_unknown_method() => Ok(Output::Nothing),
            Err(e) => Err(call_error(rpc::GC, e)),
        }
    }

    /// Available when the daemon accepts connections; else code 50.
    fn status(&self, args: &CmdArgs) -> CmdResult {
        let socket = socket_path(&args.stdin)?;
        rpc::reachable(&socket).map_err(|e| {
            CniError::new(
                code::PLUGIN_NOT_AVAILABLE,
                format!("DHCP daemon is not reachable: {e} ({HOW_TO_START})"),
                "",
            )
        })?;
        Ok(Output::Nothing)
    }
}

pub fn main() -> ExitCode {
    cni_skel::run(&Dhcp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_path_from_config() {
        let p = |s: &str| socket_path(s.as_bytes());
        assert_eq!(
            p(r#"{"ipam":{"type":"dhcp"}}"#).unwrap(),
            Path::new("/run/cni/dhcp.sock")
        );
        assert_eq!(
            p(r#"{"ipam":{"type":"dhcp","daemonSocketPath":""}}"#).unwrap(),
            Path::new("/run/cni/dhcp.sock")
        );
        // Go matches keys ignoring case.
        assert_eq!(
            p(r#"{"IPAM":{"DaemonSocketPath":"/x/d.sock"}}"#).unwrap(),
            Path::new("/x/d.sock")
        );
        for bad in [
            r#"{"name":"n"}"#,
            r#"{"ipam":null}"#,
            r#"{"ipam":{"daemonSocketPath":5}}"#,
            r#"{"ipam":{"provide":{"option":"host-name"}}}"#,
            r#"{"ipam":{"request":[{"skipDefault":"yes"}]}}"#,
            r#"{"ipam":{"priority":"high"}}"#,
        ] {
            let e = p(bad).unwrap_err();
            assert_eq!(e.code, 999, "{bad}");
            assert!(
                e.msg
                    .starts_with("error obtaining socketPath: error parsing socket path conf: "),
                "{bad}: {}",
                e.msg
            );
        }
        assert!(
            p(r#"{"name":"n"}"#)
                .unwrap_err()
                .msg
                .ends_with("IPAM config missing 'ipam' key")
        );
    }

    #[test]
    fn netns_is_made_absolute_and_clean() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute(Path::new("ns/x")), cwd.join("ns/x"));
        assert_eq!(
            absolute(Path::new("/run//netns/./a/../b")),
            Path::new("/run/netns/b")
        );
        assert_eq!(absolute(Path::new("/..")), Path::new("/"));
        assert_eq!(absolute(Path::new("")), Path::new(""));
    }

    #[test]
    fn unreachable_daemon_says_how_to_start_it() {
        let e = call_error(
            rpc::ALLOCATE,
            CallError::Unreachable {
                socket: "/run/cni/dhcp.sock".into(),
                source: std::io::Error::from_raw_os_error(2),
            },
        );
        assert_eq!(e.code, 999);
        assert!(
            e.msg.starts_with(
                "error dialing DHCP daemon: dial unix /run/cni/dhcp.sock: connect: no such file or directory ("
            ),
            "{}",
            e.msg
        );
        assert!(e.msg.contains("dhcp daemon") && e.msg.contains("cni-dhcp.socket"));
        let e = call_error(
            rpc::RELEASE,
            CallError::Rpc(netrpc::CallError::Remote("boom".into())),
        );
        assert_eq!(e.msg, "error calling DHCP.Release: boom");
    }
}
