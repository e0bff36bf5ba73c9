//! The CNI loopback plugin: brings `lo` up in the container's network
//! namespace (ADD), down again (DEL), and checks it is up (CHECK).
//!
//! Behaviour follows the Go reference (plugins/main/loopback): `CNI_IFNAME`
//! is ignored, a `prevResult` is passed through unchanged, and DEL succeeds
//! when the namespace is already gone.

use cni_net::{IpFamily, Link, NetNs, Netlink};
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Interface, IpConfig, Output, Plugin};
use ipnetwork::IpNetwork;
use std::net::IpAddr;
use std::path::Path;

/// The only interface this plugin touches.
const LO: &str = "lo";

/// The plugin.
pub struct Loopback;

/// Go's `net.IP.IsLoopback`: 127.0.0.0/8 (also IPv4-mapped) or `::1`.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// The netns path as given (the skel requires it for ADD and CHECK).
fn netns_path(args: &CmdArgs) -> &Path {
    args.netns.as_deref().unwrap_or(Path::new(""))
}

/// `lo` in the namespace, with the reference's error when it is missing.
fn find_lo(nl: &Netlink) -> Result<Link, CniError> {
    nl.link_by_name(LO)
        .cni()?
        .ok_or_else(|| CniError::internal("Link not found"))
}

/// The first address of a family on `lo`, after checking that every
/// address of that family is a loopback one.
fn first_loopback_addr(
    nl: &Netlink,
    lo: &Link,
    family: IpFamily,
) -> Result<Option<IpNetwork>, CniError> {
    let addrs = nl.addrs(lo, Some(family)).cni()?;
    if let Some(bad) = addrs.iter().find(|a| !is_loopback(a.address.ip())) {
        return Err(CniError::internal(format!(
            "loopback interface found with non-loopback address {:?}",
            bad.address.ip().to_string()
        )));
    }
    Ok(addrs.first().map(|a| a.address))
}

impl Plugin for Loopback {
    fn about(&self) -> String {
        cni_skel::about("loopback")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        // The config (with its prevResult) is checked before touching anything.
        let prev = args.prev_result()?;
        let path = netns_path(args);
        let ns = NetNs::open(path).cni()?;
        let nl = Netlink::for_ns(&ns).cni()?;
        let lo = find_lo(&nl)?;
        nl.set_up(&lo).cni()?;
        let v4 = first_loopback_addr(&nl, &lo, IpFamily::V4)?;
        let v6 = first_loopback_addr(&nl, &lo, IpFamily::V6)?;

        if let Some(prev) = prev {
            // Chained after another plugin: pass its result through.
            return Ok(Output::Result(prev));
        }
        let result = CniResult {
            cni_version: args.cni_version().to_string(),
            interfaces: vec![Interface {
                name: LO.to_string(),
                mac: "00:00:00:00:00:00".to_string(),
                sandbox: path.display().to_string(),
                ..Default::default()
            }],
            ips: [v4, v6]
                .into_iter()
                .flatten()
                .map(|address| IpConfig {
                    interface: Some(0),
                    address,
                    gateway: None,
                })
                .collect(),
            ..Default::default()
        };
        Ok(Output::Result(result))
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        let Some(path) = args.netns.as_deref() else {
            return Ok(Output::Nothing);
        };
        // The runtime may call DEL more than once, or after the
        // namespace is gone (kubernetes#43014): nothing left to undo.
        let Some(ns) = NetNs::open_if_present(path).cni()? else {
            return Ok(Output::Nothing);
        };
        let nl = Netlink::for_ns(&ns).cni()?;
        let lo = find_lo(&nl)?;
        nl.set_down(&lo).cni()?;
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let ns = NetNs::open(netns_path(args)).cni()?;
        let nl = Netlink::for_ns(&ns).cni()?;
        let lo = find_lo(&nl)?;
        if !lo.up {
            return Err(CniError::internal("loopback interface is down"));
        }
        Ok(Output::Nothing)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    cni_skel::run(&Loopback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses() {
        for ok in ["127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(ok.parse().unwrap()), "{ok}");
        }
        for bad in ["10.0.0.1", "::", "::2", "fe80::1", "::ffff:10.0.0.1"] {
            assert!(!is_loopback(bad.parse().unwrap()), "{bad}");
        }
    }
}
