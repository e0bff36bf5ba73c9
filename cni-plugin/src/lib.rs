//! The steps rcni's netlink plugins share, between the protocol
//! (`cni-skel`) and the kernel (`cni-net`).
//!
//! What this crate may know: CNI's arguments, results, error codes and
//! IPAM delegation (from `cni-skel`), and the kernel operations `cni-net`
//! offers. What it may not: the kernel's wire formats (netlink messages,
//! sockets, ioctls live in `cni-net`, the only crate with `unsafe`),
//! netfilter (`cni-fw`), or any one plugin's config.
//!
//! - [`link_plugin`]: a macvlan/ipvlan/vlan/dummy/tap link created into the
//!   container, configured or undone; DEL; CHECK (host-device uses the
//!   configure-and-undo half).
//! - [`iface`]: what the veth plugins (bridge, ptp) share: the veth pair,
//!   applying an IPAM result inside the container, CHECK's comparison of a
//!   `prevResult` with the kernel.
//! - [`ipam`]: ADD's IPAM job, run beside the making of the links, that
//!   undoes itself unless disarmed (bridge, ptp, the link plugins).
//! - [`rollback`]: the undo stack of a half-done ADD.
//! - [`netns`]: the container namespace opened under its host-wide lock
//!   (sbr, vrf).
//! - [`NetResult::cni`], [`net_error`]: a `cni-net` error as the runtime
//!   sees it (code 999, Go's `ErrInternal`, with the error's text).

#![warn(missing_docs)]

pub mod iface;
pub mod ipam;
pub mod link_plugin;
pub mod netns;
pub mod rollback;

use cni_net::NetError;
use cni_skel::CniError;

/// Kernel and namespace errors are plain plugin errors for the runtime:
/// code 999 (Go's `ErrInternal`) with the error's text.
pub fn net_error(e: NetError) -> CniError {
    CniError::internal(e.to_string())
}

/// A `cni-net` result as a plugin step's: `nl.set_up(&lo).cni()?`.
pub trait NetResult<T> {
    /// The error as [`net_error`] makes it.
    fn cni(self) -> Result<T, CniError>;
}

impl<T> NetResult<T> for Result<T, NetError> {
    fn cni(self) -> Result<T, CniError> {
        self.map_err(net_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_net_error_is_an_internal_error_with_its_text() {
        let e: Result<(), _> = Err(NetError::errno("create veth vethab12cd34 <-> eth0", 17));
        let c = e.cni().unwrap_err();
        assert_eq!(c.code, 999);
        assert_eq!(
            c.msg,
            "create veth vethab12cd34 <-> eth0: File exists (os error 17)"
        );
    }
}
