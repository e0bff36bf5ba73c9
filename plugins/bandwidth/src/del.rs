//! DEL and GC.

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

/// GC: deletes the ifbs this plugin made for this network (their alias
/// names it) whose container is in none of the valid attachments; and
/// ifbs with the reference's name pattern that an ADD killed between
/// creating and labelling left behind (down, no alias).
pub fn gc(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
    let keep: Vec<String> = valid
        .iter()
        .map(|(cid, _)| ifb::name(&conf.network, cid))
        .collect();
    let nl = Netlink::host()?;
    let mut errors = Vec::new();
    for dev in nl.ifbs()? {
        if !dev.name.starts_with(ifb::PREFIX) || keep.contains(&dev.name) {
            continue;
        }
        let stale = match ifb::alias_network(&dev.alias) {
            Some(net) => net == conf.network,
            None => dev.alias.is_empty() && !dev.up && is_ifb_name(&dev.name),
        };
        if stale {
            log::debug!("gc: deleting {} ({:?})", dev.name, dev.alias);
            if let Err(e) = nl.del_link_by_name(&dev.name) {
                errors.push(format!("delete {}: {e}", dev.name));
            }
        }
    }
    if errors.is_empty() {
        Ok(Output::Nothing)
    } else {
        Err(CniError::internal(errors.join("; ")))
    }
}

/// `bwp` and 12 lower-case hex digits.
fn is_ifb_name(name: &str) -> bool {
    name.strip_prefix(ifb::PREFIX).is_some_and(|h| {
        h.len() == 12
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn ifb_names() {
        assert!(super::is_ifb_name("bwp301e6c256607"));
        assert!(!super::is_ifb_name("bwp301e6c25660"));
        assert!(!super::is_ifb_name("bwp301E6c256607"));
        assert!(!super::is_ifb_name("bwq301e6c256607"));
    }
}
