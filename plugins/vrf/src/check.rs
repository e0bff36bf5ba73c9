//! CHECK: the VRF is there, up, with its table, and the interface is its
//! port.

use crate::config::Conf;
use crate::{NO_PREV_RESULT, find_vrf, must_open_netns};
use cni_net::Netlink;
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// CHECK: the VRF exists (with the configured table) and is up, and the
/// interface is enslaved to it.
pub fn check(args: &CmdArgs) -> CmdResult {
    let conf = Conf::parse(args)?;
    args.required_prev_result(NO_PREV_RESULT)?;
    let ns = must_open_netns(args)?;
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host().cni()?;
        let vrf = find_vrf(&nl, &conf.vrfname)?
            .ok_or_else(|| CniError::internal(format!("VRF {}: Link not found", conf.vrfname)))?;
        if let Some(want) = conf.table
            && vrf.vrf_table != Some(want)
        {
            return Err(CniError::internal(format!(
                "VRF {} has routing table {}, not {want}",
                conf.vrfname,
                vrf.vrf_table.unwrap_or(0)
            )));
        }
        if !vrf.up {
            return Err(CniError::internal(format!("VRF {} is down", conf.vrfname)));
        }
        let link = nl.link_by_name(&args.ifname).cni()?;
        if link.is_none_or(|l| l.master != Some(vrf.index)) {
            return Err(CniError::internal(format!(
                "failed to find {} associated to vrf {}",
                args.ifname, conf.vrfname
            )));
        }
        Ok(())
    })
    .cni()??;
    Ok(Output::Nothing)
}
