//! DEL: idempotent; the VRF goes with its last interface.

use crate::config::Conf;
use crate::open_netns;
use cni_net::Netlink;
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// DEL: frees the interface from the VRF, and deletes the VRF when nothing
/// else is enslaved to it. A gone netns, VRF or interface is success.
pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = Conf::parse(args)?;
    // A name the kernel refuses (DEL's parse left it empty) names no VRF.
    if conf.vrfname.is_empty() {
        return Ok(Output::Nothing);
    }
    let Some(ns) = open_netns(args)? else {
        return Ok(Output::Nothing);
    };
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host().cni()?;
        let Some(vrf) = nl.link_by_name(&conf.vrfname).cni()? else {
            return Ok(());
        };
        if vrf.kind != "vrf" {
            // Not ours: nothing of this plugin to undo.
            log::warn!("{} is not a VRF; nothing to undo", conf.vrfname);
            return Ok(());
        }
        if let Some(link) = nl.link_by_name(&args.ifname).cni()?
            && link.master == Some(vrf.index)
        {
            match nl.set_master(&link, None) {
                Ok(()) => {}
                // Gone meanwhile.
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    return Err(CniError::internal(format!(
                        "resetMaster: could not reset master of {}: {}",
                        args.ifname,
                        e.reason()
                    )));
                }
            }
        }
        if nl.links_with_master(vrf.index).cni()?.is_empty() {
            nl.del_link(&vrf).cni()?;
        }
        Ok(())
    })
    .cni()??;
    Ok(Output::Nothing)
}
