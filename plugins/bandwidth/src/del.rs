//! DEL.

use crate::{config, host, ifb};
use cni_net::{Netlink, tc};
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// DEL: the ifb named after (network, containerID), as in the reference;
/// and, where the container's veth survives (the netns is still there),
/// the ingress qdisc and root tbf this plugin put on its host end, so
/// that a later ADD on it works. Everything already gone is success.
pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let nl = Netlink::host()?;
    // The qdiscs first: the redirect must not outlive its target.
    match host::surviving(args.netns.as_deref(), &args.ifname, &nl) {
        Ok(Some(veth)) => {
            for r in [nl.del_ingress_qdisc(&veth), del_our_tbf(&nl, &veth)] {
                if let Err(e) = r {
                    log::warn!("remove qdisc from {}: {e}", veth.name);
                }
            }
        }
        Ok(None) => {}
        Err(e) => log::warn!("looking for the host veth: {}", e.msg),
    }
    let name = ifb::name(&conf.network, &args.container_id);
    nl.del_link_by_name(&name)
        .map_err(|e| CniError::internal(format!("delete {name}: {e}")))?;
    Ok(Output::Nothing)
}

/// Deletes `veth`'s root qdisc if it is the tbf ADD made (`1:`).
fn del_our_tbf(nl: &Netlink, veth: &cni_net::Link) -> Result<(), cni_net::NetError> {
    let ours = nl
        .qdiscs(veth)?
        .iter()
        .any(|q| q.kind == "tbf" && q.parent == tc::HANDLE_ROOT && q.handle == tc::HANDLE_TBF);
    if ours {
        nl.del_root_qdisc(veth)
    } else {
        Ok(())
    }
}
