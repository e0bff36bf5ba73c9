//! Kernel networking for rcni plugins: network namespaces, a synchronous
//! rtnetlink facade, and sysctls.
//!
//! This is the only crate that touches the kernel network API. Plugins see
//! plain blocking calls and small owned types ([`Link`], [`Addr`], [`Route`]);
//! rtnetlink and tokio stay behind this seam.
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

pub mod conntrack;
mod error;
pub mod iface;
mod netlink;
pub mod netns;
mod nlmsg;
pub mod route_get;
pub mod sysctl;

pub use error::NetError;
pub use netlink::{
    Addr, BridgeOpts, IpFamily, Link, MAX_IFNAME_LEN, Mac, Netlink, Route, TABLE_MAIN, VethOpts,
    scope,
};
pub use netns::NetNs;

#[cfg(test)]
pub(crate) mod testutil {
    /// True when running as root.
    pub fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    /// Prints a visible skip line and returns true when not root. The line
    /// goes straight to stderr: libtest captures `eprintln!`.
    pub fn skip_unless_root(test: &str) -> bool {
        use std::io::Write;
        if is_root() {
            return false;
        }
        let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: needs root");
        true
    }
}
