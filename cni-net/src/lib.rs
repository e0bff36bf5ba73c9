//! Kernel networking for rcni plugins: network namespaces, a blocking
//! netlink client, and sysctls.
//!
//! This is the only crate that touches the kernel network API, and the only
//! one with `unsafe` (a few small functions: [`process`]'s, the tun ioctls
//! of [`tuntap`], [`NetNs::cookie`]'s `getsockopt` and
//! [`NfSocket::await_grace_period`]'s `membarrier`). Plugins see
//! plain blocking calls and small owned types ([`Link`], [`Addr`], [`Route`]).
//! The messages are the rust-netlink crates' types (`netlink-packet-route`)
//! sent over a blocking socket (`nl`), without rtnetlink and tokio: one-shot
//! processes gain nothing from an async runtime (see README).
//!
//! What this crate may know: the kernel's network API (namespaces,
//! rtnetlink's links, addresses, routes, rules and tc, sysctls, sysfs,
//! tun/tap) and its own error type, [`NetError`]. What it may not: CNI
//! (its config, results, error codes: `cni-plugin` turns a [`NetError`]
//! into a CNI error) and netfilter's messages (`cni-fw` encodes them and
//! sends them through [`NfSocket`], the one netfilter thing here).
//!
//! ```no_run
//! # fn main() -> Result<(), cni_net::NetError> {
//! let ns = cni_net::NetNs::open("/run/netns/example")?;
//! let nl = cni_net::Netlink::for_ns(&ns)?;
//! let lo = nl.must_link("lo")?;
//! nl.set_up(&lo)?;
//! ns.run(|| cni_net::sysctl::write("net/ipv4/ip_forward", "1"))??;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

// Every binary that links cni-net (the netlink plugins) allocates with
// dlmalloc (see cni-alloc for why).
use cni_alloc as _;

mod error;
pub mod netns;
pub mod nfnetlink;
pub(crate) mod nl;
/// Hand-built netlink messages for byte-level tests (`test-support`).
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub use nl::nfnl;
pub mod process;
pub mod route_get;
pub mod rtnl;
pub mod sysctl;
pub mod sysfs;
pub mod tuntap;
pub mod udp;

pub use error::NetError;
pub use netns::NetNs;
pub use nfnetlink::NfSocket;
pub use nl::attrs::Attrs;
pub use rtnl::{
    Addr, AddrFlags, BridgeOpts, ChildKind, ChildOpts, IpFamily, IpvlanMode, Link, LinkExtras,
    LinkSet, MAX_IFNAME_LEN, Mac, MacvlanMode, Netlink, Route, Rule, TABLE_MAIN, VethOpts,
    addr_flags, bridge_vlan, scope, tc, veth_mtu,
};

// The tests' skips and feature ledger, shared with the integration tests.
#[cfg(test)]
pub(crate) use rcni_test_support as testutil;
