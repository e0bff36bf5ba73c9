//! DEL.

use crate::config;
use crate::device::{dpdk, move_out};
use crate::hostside::{self, HostSide};
use crate::identity::{self, Identity};
use crate::sysfs::Sysfs;
use cni_net::{NetNs, Netlink};
use cni_plugin::NetResult;
use cni_skel::teardown::Teardown;
use cni_skel::{CmdArgs, CmdResult, CniError, Output, delegate};

/// DEL: IPAM DEL always (also when the netns is gone, so the address is
/// not leaked), then the device back to the host with what ADD saved of
/// its host-side configuration. The device stays in the container until
/// an IPAM that may work through it (dhcp sends its DHCPRELEASE from it)
/// has finished its DEL: [`delegate::del_ipam_and_link`] picks the
/// order. Both always run; each one's failure is reported. A netns or
/// device already gone is success (and the saved state goes: nothing can
/// use it).
pub fn del(args: &CmdArgs, sys: &Sysfs) -> CmdResult {
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
    Teardown::of([ipam, device]).finish()?;
    Ok(Output::Nothing)
}

fn del_device(args: &CmdArgs) -> Result<(), CniError> {
    let file = hostside::file(args);
    // No namespace named: the device is not touched, and its record stays
    // for a DEL that names one (GC drops it otherwise).
    let Some(path) = args.netns.as_deref() else {
        return Ok(());
    };
    let ns = cni_plugin::netns::open_if_present(path)?;
    let Some(ns) = ns else {
        return file.remove();
    };
    let ns_nl = Netlink::for_ns(&ns).cni()?;
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
    let Some(link) = identity::find(ns_nl, id, &[ifname, &saved.name]).cni()? else {
        log::warn!(
            "the device of {ifname:?} (host: {:?}) is not in the container's namespace any more: nothing to move back",
            saved.name
        );
        return Ok(());
    };
    move_out(ns, ns_nl, &link, &saved.name)?;
    if saved.saved_here(file) {
        saved.restore(&Netlink::host().cni()?);
    }
    Ok(())
}

/// DEL without a record of the device's identity (attached by the
/// reference or an earlier version, or by an ADD killed before it saved
/// it): `CNI_IFNAME` goes back under its alias, as the reference does,
/// only if it is a link no container can make (no kind, a bus device
/// under it); nothing is configured on it. Any other link is left alone.
fn del_unrecorded(ns: &NetNs, ns_nl: &Netlink, ifname: &str) -> Result<(), CniError> {
    let Some(link) = ns_nl.link_by_name(ifname).cni()? else {
        return Ok(());
    };
    let extras = ns_nl.link_extras(link.index).cni()?.unwrap_or_default();
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
