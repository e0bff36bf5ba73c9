//! The CNI host-device plugin: moves an existing host network device into
//! the container as `CNI_IFNAME` (its host name kept in `IFLA_IFALIAS`) and
//! back on DEL. The move goes through an empty temporary namespace, where
//! the rename cannot clash with anything (as the reference since v1.6.0).
//! Addressing, undo, CHECK are `cni_net::link_plugin`'s.

mod config;
mod sysfs;

use cni_net::link_plugin::{self, Addressing, Ctx, Expect, L3Opts};
use cni_net::{Link, NetNs, Netlink};
use cni_skel::{
    CmdArgs, CmdResult, CniError, CniResult, Command, Interface, Output, Plugin, delegate,
};
use config::{Conf, Selector};
use std::process::ExitCode;
use sysfs::Sysfs;

struct HostDevice;

/// The host device the config names.
fn find_device(nl: &Netlink, sys: &Sysfs, sel: &Selector) -> Result<Link, CniError> {
    let by_name = |name: &str| -> Result<Link, CniError> {
        nl.link_by_name(name)?
            .ok_or_else(|| CniError::internal("failed to find host device: Link not found"))
    };
    let sysfs_err = |e: String| CniError::internal(format!("failed to find host device: {e}"));
    match sel {
        Selector::Name(n) => by_name(n),
        Selector::Mac(m) => {
            let mac: cni_net::Mac = m.parse().map_err(|_| {
                CniError::invalid_config(format!(
                    "failed to parse MAC address {m:?}: address {m}: invalid MAC address"
                ))
            })?;
            let want = mac.to_string();
            nl.links()?
                .into_iter()
                .find(|l| l.mac.eq_ignore_ascii_case(&want))
                .ok_or_else(|| {
                    CniError::internal(
                        "failed to find host device: failed to find physical interface",
                    )
                })
        }
        Selector::KernelPath(p) => by_name(&sys.netdev_of_kernel_path(p).map_err(sysfs_err)?),
        Selector::Pci(p) => by_name(&sys.netdev_of_pci(p).map_err(sysfs_err)?),
        Selector::Auxiliary(a) => by_name(&sys.netdev_of_aux(a).map_err(sysfs_err)?),
    }
}

/// A PCI function bound to a userspace driver: nothing to move.
fn dpdk(conf: &Conf, sys: &Sysfs) -> Result<bool, CniError> {
    match &conf.selector {
        Selector::Pci(p) => sys.is_userspace_driven(p).map_err(CniError::internal),
        _ => Ok(false),
    }
}

/// Moves `dev` into the container as `ifname`: into an empty temporary
/// namespace under the new name, alias = host name, then into the
/// container. If the container has `ifname` already, it goes back to the
/// host under its name, up again if it was.
fn move_in(cx: &Ctx, dev: &Link, ifname: &str) -> Result<Link, CniError> {
    let fail = |e: String| {
        CniError::internal(format!(
            "failed to move link failed to move {ifname:?} (host: {:?}) to container NS: {e}",
            dev.name
        ))
    };
    let temp = NetNs::new_anonymous()?;
    cx.host_nl
        .set_ns_name(dev, &temp, ifname)
        .map_err(|e| fail(e.reason()))?;
    let temp_nl = Netlink::for_ns(&temp)?;
    let moved = temp_nl.must_link(ifname)?;
    let into_container = temp_nl
        .set_alias(&moved, &dev.name)
        .and_then(|()| temp_nl.set_ns(&moved, &cx.ns));
    if let Err(e) = into_container {
        let back = temp_nl
            .set_alias(&moved, "")
            .and_then(|()| temp_nl.set_ns_name(&moved, &NetNs::current()?, &dev.name));
        if let Err(b) = back {
            log::warn!("rollback: moving {} back to the host: {b}", dev.name);
        } else if dev.up
            && let Ok(Some(l)) = cx.host_nl.link_by_name(&dev.name)
        {
            let _ = cx.host_nl.set_up(&l);
        }
        return Err(fail(e.reason()));
    }
    Ok(cx.ns_nl.must_link(ifname)?)
}

/// Moves the container's `link` back to the host under its alias, the
/// alias cleared, down (as the reference leaves it). If the host has that
/// name, it stays in the container, up again if it was.
fn move_out(ns: &NetNs, ns_nl: &Netlink, link: &Link, alias: &str) -> Result<(), CniError> {
    let fail = |e: String| {
        CniError::internal(format!(
            "failed to move {:?} (host: {alias:?}) to the host namespace: {e}",
            link.name
        ))
    };
    let temp = NetNs::new_anonymous()?;
    ns_nl
        .set_ns_name(link, &temp, alias)
        .map_err(|e| fail(e.reason()))?;
    let temp_nl = Netlink::for_ns(&temp)?;
    let moved = temp_nl.must_link(alias)?;
    let to_host = temp_nl
        .set_alias(&moved, "")
        .and_then(|()| temp_nl.set_ns(&moved, &NetNs::current()?));
    if let Err(e) = to_host {
        let back = temp_nl
            .set_alias(&moved, alias)
            .and_then(|()| temp_nl.set_ns_name(&moved, ns, &link.name));
        match back {
            Err(b) => log::warn!("rollback: moving {alias} back to the container: {b}"),
            Ok(()) if link.up => {
                if let Ok(Some(l)) = ns_nl.link_by_name(&link.name) {
                    let _ = ns_nl.set_up(&l);
                }
            }
            Ok(()) => {}
        }
        return Err(fail(e.reason()));
    }
    Ok(())
}

fn add(args: &CmdArgs, sys: &Sysfs) -> CmdResult {
    let conf = config::load(args, sys)?;
    let addressing = if conf.ipam {
        Addressing::Ipam
    } else {
        Addressing::L2
    };
    if dpdk(&conf, sys)? {
        let ns = link_plugin::open_netns(args)?;
        let mut result = if conf.ipam {
            delegate::ipam_add(args)?
        } else {
            CniResult::default()
        };
        result.interfaces = vec![Interface {
            name: args.ifname.clone(),
            sandbox: ns.path().display().to_string(),
            ..Interface::default()
        }];
        for ip in &mut result.ips {
            ip.interface = Some(0);
        }
        result.dns = conf.dns;
        return Ok(Output::Result(result));
    }
    let cx = Ctx::open(args)?;
    let dev = find_device(&cx.host_nl, sys, &conf.selector)?;
    let opts = L3Opts {
        dns: Some(conf.dns.clone()),
        ..L3Opts::default()
    };
    let result = link_plugin::add_with(
        args,
        &cx,
        addressing,
        &opts,
        || move_in(&cx, &dev, &args.ifname),
        |link| move_out(&cx.ns, &cx.ns_nl, link, &dev.name),
    )?;
    Ok(Output::Result(result))
}

/// DEL: IPAM DEL always (also when the netns is gone, so the address is
/// not leaked), then the device back to the host. A netns or device
/// already gone is success.
fn del(args: &CmdArgs, sys: &Sysfs) -> CmdResult {
    let conf = config::load(args, sys)?;
    let ipam = conf.ipam.then(|| delegate::ipam_start(Command::Del, args));
    // A VF that vanished cannot say whether it was DPDK: then there is
    // nothing of it in the container either.
    let device = if dpdk(&conf, sys).unwrap_or(false) {
        Ok(())
    } else {
        del_device(args)
    };
    let ipam = match ipam {
        Some(r) => r.and_then(|r| r.wait().map(|_| ())),
        None => Ok(()),
    };
    ipam.and(device)?;
    Ok(Output::Nothing)
}

fn del_device(args: &CmdArgs) -> Result<(), CniError> {
    let Some(path) = args.netns.as_deref() else {
        return Ok(());
    };
    let ns = match NetNs::open(path) {
        Ok(ns) => ns,
        Err(e) if e.is_ns_not_found() => return Ok(()),
        Err(e) => {
            return Err(CniError::internal(format!(
                "failed to open netns {:?}: {e}",
                path.display()
            )));
        }
    };
    let ns_nl = Netlink::for_ns(&ns)?;
    let Some(link) = ns_nl.link_by_name(&args.ifname)? else {
        return Ok(());
    };
    let alias = ns_nl
        .link_extras(link.index)?
        .map(|x| x.alias)
        .unwrap_or_default();
    if alias.is_empty() {
        return Err(CniError::internal(format!(
            "failed to find original ifname for {:?} (alias is not set)",
            args.ifname
        )));
    }
    move_out(&ns, &ns_nl, &link, &alias)
}

fn check(args: &CmdArgs, sys: &Sysfs) -> CmdResult {
    let conf = config::load(args, sys)?;
    if dpdk(&conf, sys)? {
        if conf.ipam {
            delegate::ipam_run(Command::Check, args)?;
        }
        args.prev_result()?
            .ok_or_else(|| CniError::internal("Required prevResult missing"))?;
        return Ok(Output::Nothing);
    }
    let cx = Ctx::open(args)?;
    let expect = Expect {
        routes: true,
        ..Expect::default()
    };
    link_plugin::check(args, &cx, conf.ipam, &expect)?;
    Ok(Output::Nothing)
}

impl Plugin for HostDevice {
    fn about(&self) -> String {
        format!("CNI host-device plugin v{}", env!("CARGO_PKG_VERSION"))
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        add(args, &Sysfs::default())
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        del(args, &Sysfs::default())
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        check(args, &Sysfs::default())
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        config::load(args, &Sysfs::default())?;
        link_plugin::gc(args)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        config::load(args, &Sysfs::default())?;
        link_plugin::status(args, None)?;
        Ok(Output::Nothing)
    }
}

fn main() -> ExitCode {
    cni_skel::run(&HostDevice)
}
