//! DEL: best effort, every step runs, errors are reported together.

use crate::config;
use cni_fw::masq::{self, Attachment};
use cni_net::Netlink;
use cni_skel::teardown::Teardown;
use cni_skel::{CmdArgs, CmdResult, CniError, Output, delegate};

/// DEL: IPAM DEL, then the container link ([`delegate::del_ipam_and_link`]:
/// as in the reference, since dhcp releases its lease from the link),
/// then the masquerade rules
/// (which need no addresses, so they go even when the netns is gone).
/// IPAM's error comes first, as in the reference.
pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let (ipam, link) = delegate::del_ipam_and_link(args, true, || match args.netns.as_deref() {
        Some(path) => del_container_link(path, &args.ifname),
        None => Ok(()),
    });
    let mut steps = Teardown::of([ipam, link]);
    if conf.ip_masq {
        let att = Attachment {
            network: &conf.name,
            ifname: &args.ifname,
            container_id: &args.container_id,
        };
        steps.step(masq::teardown(att));
    }
    steps.finish()?;
    Ok(Output::Nothing)
}

/// Deletes the container end of the veth pair (the host end goes with it);
/// a missing netns or link is success.
fn del_container_link(path: &std::path::Path, ifname: &str) -> Result<(), CniError> {
    // The container is gone, and with it the veth pair.
    let Some(ns) = cni_plugin::netns::open_if_present(path)? else {
        return Ok(());
    };
    Netlink::for_ns(&ns)
        .and_then(|nl| nl.del_link_by_name(ifname))
        .map(|_| ())
        .map_err(|e| {
            CniError::internal(format!(
                "failed to delete {ifname:?} in {:?}: {e}",
                path.display()
            ))
        })
}
