//! Netfilter rules shared by the rcni plugins, written exactly as the Go
//! reference writes them so both implementations can manage one node:
//! the same iptables chain names and comments, the same nftables tables,
//! chains and rule comments.
//!
//! Every change is one transaction per backend and family: one
//! `iptables-restore --noflush` or one `nft -f -`, never a process per rule.
//! With iptables-nft, most iptables changes are one nf_tables transaction
//! over netlink instead, with no tool run: the masquerade's ADD (every
//! family at once) and teardown, the firewall's and portmap's rules, encoded
//! as iptables-nft 1.8.9 encodes the same text ([`iptables_nft`]).
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

/// To be called by a plugin at its very end, after its locks are released:
/// when this process deleted rules or chains over netlink in a crowd
/// (`crowded`: it waited for one of its locks, as `cni_lock::waited`
/// says; or its commit waited for the kernel's commit mutex), waits for
/// an RCU grace period before the exit closes its netfilter socket
/// ([`cni_net::NfSocket::await_grace_period`] says why: issue 30's DEL
/// storm). Nothing otherwise: alone, the exit's wait is shorter than a
/// grace period asked for afterwards (firewall DEL took up to 1.45x as
/// long with the wait every time, on a loaded machine).
pub fn settle(crowded: bool) {
    let wait = nfm::deleted() && (crowded || nfm::deleted_in_a_crowd());
    if wait && !cni_net::NfSocket::await_grace_period() {
        log::debug!("membarrier refused: the exit waits for the grace period");
    }
}

/// The D-Bus client (crate `dbus`, wire/dbus), here for the firewall
/// plugin's firewalld backend.
pub use dbus;
