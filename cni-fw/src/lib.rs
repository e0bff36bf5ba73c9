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
/// when this process deleted rules or chains over netlink, waits for an
/// RCU grace period before the exit closes its netfilter socket
/// ([`cni_net::NfSocket::await_grace_period`] says why: issue 30's DEL
/// storm). With `commit_was_last` (firewall, portmap: the deleting commit
/// is the process's last kernel work) always: the exit would wait for
/// that commit's grace period anyway, under the kernel's commit mutex, so
/// the wait costs a lone DEL about what the exit's did (firewall DEL
/// 0.990x, portmap DEL 1.012-1.023x of the build waiting only in a crowd)
/// and in a storm leaves the mutex to the others' commits (the Podman DEL
/// storm in 0.558x of that build's time; 42e0713). Otherwise
/// (bridge: its link deletion after the commit outlasts the grace period,
/// so a lone exit waits for nothing; waiting every time made bridge DEL
/// with ipMasq 2.0x as long) only when the commit waited for the commit
/// mutex: a crowd.
pub fn settle(commit_was_last: bool) {
    let wait = nfm::deleted() && (commit_was_last || nfm::deleted_in_a_crowd());
    if wait && !cni_net::NfSocket::await_grace_period() {
        log::debug!("membarrier refused: the exit waits for the grace period");
    }
}

/// The D-Bus client (crate `dbus`, wire/dbus), here for the firewall
/// plugin's firewalld backend.
pub use dbus;
