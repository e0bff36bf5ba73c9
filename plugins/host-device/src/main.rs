//! The CNI host-device plugin: moves an existing host network device into
//! the container as `CNI_IFNAME` (its host name kept in `IFLA_IFALIAS`) and
//! back on DEL, each way in one netns move that never shows the device on
//! the host under a foreign name. What it had on the host (MTU, up/down,
//! addresses, routes) is saved at ADD and put back at DEL ([`hostside`]),
//! with what the container cannot change about the device ([`identity`]):
//! DEL moves back that device, whatever it is named, and nothing else.
//! Addressing, undo, CHECK are `cni_net::link_plugin`'s.

mod config;
mod hostside;
mod identity;
mod sysfs;

use cni_net::link_plugin::{self, Addressing, Ctx, Expect, L3Opts};
use cni_net::{Link, NetNs, Netlink};
use cni_skel::{
    CmdArgs, CmdResult, CniError, CniResult, Command, Interface, Output, Plugin, delegate,
};
use config::{Conf, Selector};
use hostside::HostSide;
use identity::Identity;
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

/// A PCI function bound to a userspace driver, or `DPDKMode` without a
/// PCI function (as the reference's `loadConf`): nothing to move.
fn dpdk(conf: &Conf, sys: &Sysfs) -> Result<bool, CniError> {
    match &conf.pci {
        Some(p) => sys.is_userspace_driven(p).map_err(CniError::internal),
        None => Ok(conf.dpdk_mode),
    }
}

/// Moves `dev` into the container as `ifname`, alias = host name, in one
/// `RTM_SETLINK` (one netns move; the reference since v1.6.0 makes two,
/// through an empty namespace). `ifname` must be free in the container:
/// then the kernel either moves the device straight under `ifname` (its
/// host name is taken there) or moves it under its host name and renames
/// it inside the container, where the host's udev and NetworkManager do
/// not see it. Either way no name is ever taken on the host. If the
/// request fails after the move, the device goes back to the host under
/// its name, with its configuration.
fn move_in(cx: &Ctx, dev: &Link, ifname: &str, saved: &HostSide) -> Result<Link, CniError> {
    let fail = |e: String| {
        CniError::internal(format!(
            "failed to move link failed to move {ifname:?} (host: {:?}) to container NS: {e}",
            dev.name
        ))
    };
    if cx.ns_nl.link_by_name(ifname)?.is_some() {
        return Err(fail("file exists".into()));
    }
    if let Err(e) = cx
        .host_nl
        .move_rename_alias(dev, &cx.ns, ifname, Some(&dev.name))
    {
        // Not moved: still on the host, as it was. Moved (under either
        // name): back.
        if cx.host_nl.link_by_name(&dev.name)?.is_none() {
            let stranded = [ifname, dev.name.as_str()]
                .into_iter()
                .find_map(|n| cx.ns_nl.link_by_name(n).ok().flatten());
            if let Some(l) = stranded {
                match move_out(&cx.ns, &cx.ns_nl, &l, &dev.name) {
                    Ok(()) => {
                        saved.restore(&cx.host_nl);
                    }
                    Err(b) => {
                        log::warn!("rollback: moving {} back to the host: {}", dev.name, b.msg)
                    }
                }
            }
        }
        return Err(fail(e.reason()));
    }
    Ok(cx.ns_nl.must_link(ifname)?)
}

/// Moves the container's `link` back to the host under its alias, the
/// alias cleared, down (a netns move downs it; DEL then puts back what
/// [`HostSide`] saved). In the container it is set down and renamed to
/// its host name first, then moved by one `RTM_SETLINK`: the host never
/// sees it under a foreign name. If the host has that name, it stays in
/// the container under its name, up again if it was. If the container has
/// a link with the host name, it goes through an empty namespace instead
/// (as the reference, two moves).
fn move_out(ns: &NetNs, ns_nl: &Netlink, link: &Link, alias: &str) -> Result<(), CniError> {
    // The caller's view can be stale (ADD's undo got it before the link
    // went up), and kernels before 6.x refuse to rename a link that is up.
    let current = ns_nl.link_by_index(link.index)?;
    let link = current.as_ref().unwrap_or(link);
    let fail = |e: String| {
        CniError::internal(format!(
            "failed to move {:?} (host: {alias:?}) to the host namespace: {e}",
            link.name
        ))
    };
    let reup = |l: &Link| {
        if link.up
            && let Err(e) = ns_nl.set_up(l)
        {
            log::warn!("rollback: setting {} up: {e}", link.name);
        }
    };
    if link.up {
        ns_nl.set_down(link).map_err(|e| fail(e.reason()))?;
    }
    let mut renamed = link.clone();
    if link.name != alias {
        match ns_nl.set_name(link, alias) {
            Ok(()) => renamed.name = alias.to_string(),
            Err(e) if e.is_exists() => {
                reup(link);
                return move_out_via_empty_ns(ns, ns_nl, link, alias);
            }
            Err(e) => {
                reup(link);
                return Err(fail(e.reason()));
            }
        }
    }
    let home = NetNs::current()?;
    if let Err(e) = ns_nl.move_rename_alias(&renamed, &home, alias, Some("")) {
        if renamed.name != link.name
            && let Err(b) = ns_nl.set_name(&renamed, &link.name)
        {
            log::warn!("rollback: renaming {alias} back to {}: {b}", link.name);
        }
        reup(link);
        return Err(fail(e.reason()));
    }
    Ok(())
}

/// [`move_out`] through an empty temporary namespace, where the rename
/// cannot clash: for a container that has a link named as the device's
/// host name.
fn move_out_via_empty_ns(
    ns: &NetNs,
    ns_nl: &Netlink,
    link: &Link,
    alias: &str,
) -> Result<(), CniError> {
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
    let to_host = temp_nl.move_rename_alias(&moved, &NetNs::current()?, alias, Some(""));
    if let Err(e) = to_host {
        match temp_nl.set_ns_name(&moved, ns, &link.name) {
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
    let network = args.conf.name.clone().unwrap_or_default();
    let saved = HostSide::record(&cx.host_nl, &dev, &network)?;
    let before = Identity::of(&cx.host_nl, &dev)?;
    let file = hostside::file(args);
    let opts = L3Opts {
        dns: Some(conf.dns.clone()),
        ..L3Opts::default()
    };
    // Back to the host with its configuration, the state file gone.
    let take_back = |link: &Link| -> Result<(), CniError> {
        move_out(&cx.ns, &cx.ns_nl, link, &dev.name)?;
        saved.restore(&cx.host_nl);
        if let Err(e) = file.remove() {
            log::warn!("rollback: {}", e.msg);
        }
        Ok(())
    };
    let place = || -> Result<Link, CniError> {
        let link = move_in(&cx, &dev, &args.ifname, &saved)?;
        let undo = |e: CniError| {
            if let Err(b) = take_back(&link) {
                log::warn!("rollback: {}", b.msg);
            }
            e
        };
        // What the container cannot change, read in the container: the
        // record DEL finds the device by.
        let after = Identity::of(&cx.ns_nl, &link).map_err(|e| undo(e.into()))?;
        let mut differences = before.moved_differences(&after);
        if link.mac != dev.mac {
            differences.push(format!("MAC {}, not {}", link.mac, dev.mac));
        }
        if !differences.is_empty() {
            // Someone in the container replaced the device as it arrived:
            // nothing there is known to be it, so nothing is moved out.
            return Err(CniError::internal(format!(
                "{:?} in the container is not the device moved there ({}): left alone",
                args.ifname,
                differences.join(", ")
            )));
        }
        let saved = HostSide {
            identity: Some(after),
            ..saved.clone()
        };
        saved.save(&file).map_err(undo)?;
        Ok(link)
    };
    let result = link_plugin::add_with(args, &cx, addressing, &opts, place, take_back)?;
    Ok(Output::Result(result))
}

/// DEL: IPAM DEL always (also when the netns is gone, so the address is
/// not leaked), then the device back to the host with what ADD saved of
/// its host-side configuration. The device stays in the container until
/// an IPAM that may work through it (dhcp sends its DHCPRELEASE from it)
/// has finished its DEL: [`delegate::del_ipam_and_link`] picks the
/// order. Both always run; each one's failure is reported. A netns or
/// device already gone is success (and the saved state goes: nothing can
/// use it).
fn del(args: &CmdArgs, sys: &Sysfs) -> CmdResult {
    let conf = config::load(args, sys)?;
    // A VF that vanished cannot say whether it was DPDK: then there is
    // nothing of it in the container either.
    let (ipam, device) = delegate::del_ipam_and_link(args, conf.ipam, || {
        if dpdk(&conf, sys).unwrap_or(false) {
            Ok(())
        } else {
            del_device(args)
        }
    });
    CniError::all_ok([ipam, device])?;
    Ok(Output::Nothing)
}

fn del_device(args: &CmdArgs) -> Result<(), CniError> {
    let file = hostside::file(args);
    // No namespace named: the device is not touched, and its record stays
    // for a DEL that names one (GC drops it otherwise).
    let Some(path) = args.netns.as_deref() else {
        return Ok(());
    };
    let ns = NetNs::open_if_present(path).map_err(|e| {
        CniError::internal(format!("failed to open netns {:?}: {e}", path.display()))
    })?;
    let Some(ns) = ns else {
        return file.remove();
    };
    let ns_nl = Netlink::for_ns(&ns)?;
    match HostSide::load(&file) {
        Some(saved) => match &saved.identity {
            Some(id) => del_recorded(&file, &ns, &ns_nl, &saved, id, &args.ifname)?,
            None => del_unrecorded(&ns, &ns_nl, &args.ifname)?,
        },
        None => del_unrecorded(&ns, &ns_nl, &args.ifname)?,
    }
    file.remove()
}

/// DEL of the device ADD recorded: found in the container by its
/// identity, whatever it is named now, moved back under its saved host
/// name (not the alias, which the container can set) and given back its
/// host-side configuration. A link that claims its names but is not it is
/// left alone (and logged). Not in the namespace any more: nothing to
/// move (the kernel gives a physical device back to the host when the
/// namespace dies; a virtual one dies with it).
fn del_recorded(
    file: &cni_skel::state::StateFile,
    ns: &NetNs,
    ns_nl: &Netlink,
    saved: &HostSide,
    id: &Identity,
    ifname: &str,
) -> Result<(), CniError> {
    let Some(link) = identity::find(ns_nl, id, &[ifname, &saved.name])? else {
        log::warn!(
            "the device of {ifname:?} (host: {:?}) is not in the container's namespace any more: nothing to move back",
            saved.name
        );
        return Ok(());
    };
    move_out(ns, ns_nl, &link, &saved.name)?;
    if saved.saved_here(file) {
        saved.restore(&Netlink::host()?);
    }
    Ok(())
}

/// DEL without a record of the device's identity (attached by the
/// reference or an earlier version, or by an ADD killed before it saved
/// it): `CNI_IFNAME` goes back under its alias, as the reference does,
/// only if it is a link no container can make (no kind, a bus device
/// under it); nothing is configured on it. Any other link is left alone.
fn del_unrecorded(ns: &NetNs, ns_nl: &Netlink, ifname: &str) -> Result<(), CniError> {
    let Some(link) = ns_nl.link_by_name(ifname)? else {
        return Ok(());
    };
    let extras = ns_nl.link_extras(link.index)?.unwrap_or_default();
    if !Identity::from_parts(&link, &extras).is_physical() {
        log::warn!(
            "{ifname:?} in the container: no record of the device ADD moved there, and a {:?} link is one a container can make: left alone",
            link.kind
        );
        return Ok(());
    }
    if extras.alias.is_empty() {
        return Err(CniError::internal(format!(
            "failed to find original ifname for {ifname:?} (alias is not set)"
        )));
    }
    move_out(ns, ns_nl, &link, &extras.alias)
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

/// GC of the saved host-side state: this network's files whose
/// attachment is not valid any more.
fn gc_state(args: &CmdArgs) -> Result<(), CniError> {
    let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
    let network = args.conf.name.clone().unwrap_or_default();
    cni_skel::state::gc(std::path::Path::new(hostside::STATE_DIR), &valid, |path| {
        std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice::<HostSide>(&b).ok())
            .is_some_and(|s| s.network == network)
    })
}

impl Plugin for HostDevice {
    fn about(&self) -> String {
        cni_skel::about("host-device")
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
        gc_state(args)?;
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
