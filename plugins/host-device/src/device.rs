//! The host device: found by the config's selector, moved into the
//! container and back.

use crate::config::{Conf, Selector};
use crate::hostside::HostSide;
use crate::sysfs::Sysfs;
use cni_net::{Link, NetNs, Netlink};
use cni_plugin::NetResult;
use cni_plugin::link_plugin::Ctx;
use cni_skel::CniError;

/// The host device the config names.
pub fn find_device(nl: &Netlink, sys: &Sysfs, sel: &Selector) -> Result<Link, CniError> {
    let by_name = |name: &str| -> Result<Link, CniError> {
        nl.link_by_name(name)
            .cni()?
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
            nl.links()
                .cni()?
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
pub fn dpdk(conf: &Conf, sys: &Sysfs) -> Result<bool, CniError> {
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
pub fn move_in(cx: &Ctx, dev: &Link, ifname: &str, saved: &HostSide) -> Result<Link, CniError> {
    let fail = |e: String| {
        CniError::internal(format!(
            "failed to move link failed to move {ifname:?} (host: {:?}) to container NS: {e}",
            dev.name
        ))
    };
    if cx.ns_nl.link_by_name(ifname).cni()?.is_some() {
        return Err(fail("file exists".into()));
    }
    if let Err(e) = cx
        .host_nl
        .move_rename_alias(dev, &cx.ns, ifname, Some(&dev.name))
    {
        // Not moved: still on the host, as it was. Moved (under either
        // name): back.
        if cx.host_nl.link_by_name(&dev.name).cni()?.is_none() {
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
    cx.ns_nl.must_link(ifname).cni()
}

/// Moves the container's `link` back to the host under its alias, the
/// alias cleared, down (a netns move downs it; DEL then puts back what
/// [`HostSide`] saved). In the container it is set down and renamed to
/// its host name first, then moved by one `RTM_SETLINK`: the host never
/// sees it under a foreign name. If the host has that name, it stays in
/// the container under its name, up again if it was. If the container has
/// a link with the host name, it goes through an empty namespace instead
/// (as the reference, two moves).
pub fn move_out(ns: &NetNs, ns_nl: &Netlink, link: &Link, alias: &str) -> Result<(), CniError> {
    // The caller's view can be stale (ADD's undo got it before the link
    // went up), and kernels before 6.x refuse to rename a link that is up.
    let current = ns_nl.link_by_index(link.index).cni()?;
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
    let home = NetNs::current().cni()?;
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
    let temp = NetNs::new_anonymous().cni()?;
    ns_nl
        .set_ns_name(link, &temp, alias)
        .map_err(|e| fail(e.reason()))?;
    let temp_nl = Netlink::for_ns(&temp).cni()?;
    let moved = temp_nl.must_link(alias).cni()?;
    let to_host = temp_nl.move_rename_alias(&moved, &NetNs::current().cni()?, alias, Some(""));
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
