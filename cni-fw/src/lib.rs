//! Netfilter rules shared by the rcni plugins, written exactly as the Go
//! reference writes them so both implementations can manage one node:
//! the same iptables chain names and comments, the same nftables tables,
//! chains and rule comments.
//!
//! Every change is one transaction per backend and family: one
//! `iptables-restore --noflush` or one `nft -f -`, never a process per rule.

pub mod exec;
pub mod hash;
pub mod iptables;
pub mod masq;
pub mod nft;
pub mod spoofcheck;

pub use masq::Backend;

/// The D-Bus client (crate `dbus`, wire/dbus), here for the firewall
/// plugin's firewalld backend.
pub use dbus;
