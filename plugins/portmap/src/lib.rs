//! portmap: forwards host ports to a container, as a chained plugin after
//! the one that gave the container its addresses (bridge, ptp).
//!
//! See README.md for every key. The rules are the Go reference's, in either
//! backend, so the two implementations can take over from each other.

pub mod add;
pub mod check;
pub mod config;
pub mod del;
pub mod gc;
pub mod ipt;
pub mod ipt_blind_del;
pub mod ipt_fast_add;
pub mod ipt_netlink_del;
pub mod nft;
pub mod status;

use cni_skel::{CmdArgs, CmdResult, CniError, Plugin};
use config::{Backend, Conf, Proto};
use ipnetwork::IpNetwork;
use std::process::ExitCode;

/// The plugin.
pub struct Portmap;

/// Serialises the read-modify-write of the iptables `nat` table among
/// concurrent invocations (the chains shared by all containers are created
/// by declaring them, which must not race).
/// `/run/cni-rcni/locks/portmap.lock`, waited for at most
/// `RCNI_LOCK_TIMEOUT` (cni-lock).
fn lock() -> Result<Option<cni_lock::Lock>, CniError> {
    cni_lock::named("portmap")
}

/// The backend to use. Unset, the reference's rule applies: iptables,
/// unless iptables cannot be used and nftables can. "Cannot be used" is
/// judged here by the tools being installed, which costs no process (STATUS
/// probes the kernel for real).
fn resolve(conf: &Conf) -> Result<Backend, CniError> {
    use cni_fw::iptables::{Family, usable};
    let backend = match conf.backend {
        Some(b) => b,
        None if !usable(Family::V4) && cni_fw::nft::usable() => Backend::Nftables,
        None => Backend::Iptables,
    };
    conf.check_backend(backend)?;
    Ok(backend)
}

fn udp_ports(conf: &Conf) -> Vec<u16> {
    let mut ports: Vec<u16> = conf
        .mappings
        .iter()
        .filter(|m| m.proto == Proto::Udp)
        .map(|m| m.host_port)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Deletes the UDP conntrack entries of the mapped host ports in `family`
/// (`None`: both), so that a client that kept sending is not stuck on a
/// stale mapping. Failures are only logged, as in the reference.
fn flush_conntrack(conf: &Conf, family: Option<cni_net::IpFamily>) {
    use cni_fw::conntrack::{PROTO_UDP, delete_by_orig_dst_port};
    let ports = udp_ports(conf);
    if ports.is_empty() {
        return;
    }
    match delete_by_orig_dst_port(family, PROTO_UDP, &ports) {
        Ok(n) => log::debug!("deleted {n} UDP conntrack entries for ports {ports:?}"),
        Err(e) => {
            log::warn!("failed to delete stale UDP conntrack entries for ports {ports:?}: {e}")
        }
    }
}

fn parse_wrapped(args: &CmdArgs) -> Result<Conf, CniError> {
    config::parse_for(&args.config, cni_skel::ParseFor::of(args))
        .map_err(|e| e.context("failed to parse config"))
}

fn addrs_of(v4: Option<IpNetwork>, v6: Option<IpNetwork>) -> Vec<IpNetwork> {
    [v4, v6].into_iter().flatten().collect()
}

impl Plugin for Portmap {
    fn about(&self) -> String {
        cni_skel::about("portmap")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        add::add(args)
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        del::del(args)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        check::check(args)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        gc::gc(args)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        status::status(args)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
///
/// Before it returns, [`cni_fw::settle`]: the wait for the kernel's grace
/// period after an nf_tables commit, made here, with no lock held, rather
/// than in the exit under the kernel's commit mutex (issue 30).
pub fn main(_args: cni_skel::ProgramArgs) -> ExitCode {
    let code = cni_skel::run(&Portmap);
    cni_fw::settle(true);
    code
}
