//! Netfilter rules shared by the rcni plugins, written exactly as the Go
//! reference writes them so both implementations can manage one node:
//! the same iptables chain names and comments, the same nftables tables,
//! chains and rule comments.
//!
//! Every change is one transaction per backend and family: one
//! `iptables-restore --noflush` or one `nft -f -`, never a process per rule.
//!
//! All of the workspace's netfilter code is here: the tools' text
//! ([`iptables`], [`nft`]) and the netlink codecs ([`nf_tables`],
//! [`iptables_nft`], [`conntrack`]), whose requests go through
//! `cni_net::NfSocket`. What this crate may know: netfilter's messages and
//! tools, CNI's errors (`cni-skel`), and `cni-net`'s namespaces and
//! socket. What it may not: sockets or system calls of its own (`unsafe`
//! stays in `cni-net`), or a plugin's config. The address family is
//! `cni-net`'s [`IpFamily`](cni_net::IpFamily) ([`iptables::Family`]).

pub mod conntrack;
pub mod exec;
pub mod hash;
pub mod iptables;
pub mod iptables_nft;
pub mod masq;
mod nf_gaps;
pub mod nf_tables;
mod nfm;
pub mod nft;
pub mod spoofcheck;

pub use masq::Backend;

/// The D-Bus client (crate `dbus`, wire/dbus), here for the firewall
/// plugin's firewalld backend.
pub use dbus;
