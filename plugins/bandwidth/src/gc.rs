//! GC.

use crate::{config, ifb};
use cni_net::Netlink;
use cni_plugin::NetResult;
use cni_skel::teardown::Teardown;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

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
    let nl = Netlink::host().cni()?;
    let mut steps = Teardown::default();
    for dev in nl.ifbs().cni()? {
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
                steps.fail(CniError::internal(format!("delete {}: {e}", dev.name)));
            }
        }
    }
    steps.finish()?;
    Ok(Output::Nothing)
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
