//! Go's `net/rpc` over HTTP CONNECT with gob encoding: the protocol between
//! the dhcp plugin and its daemon, as the Go reference speaks it on both
//! sides, so our plugin works with a Go daemon and a Go plugin with ours.
//!
//! Owned by the rpc half of the dhcp work: the gob codec, the client calls
//! (`DHCP.Allocate`, `DHCP.Release`) and the per-connection server loop.

use cni_skel::CniResult;

/// `skel.CmdArgs` as the Go plugin sends it (the RPC argument of both calls).
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
}
