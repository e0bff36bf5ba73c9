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
//! - [`rollback`]: the undo stack of a half-done ADD.

#![warn(missing_docs)]

pub mod iface;
pub mod link_plugin;
pub mod rollback;
