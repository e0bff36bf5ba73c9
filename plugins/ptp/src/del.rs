//! DEL: best effort, every step runs, errors are reported together.

use crate::config;
use cni_fw::masq::{self, Attachment};
use cni_net::Netlink;
use cni_skel::teardown::Teardown;
use cni_skel::{CmdArgs, CmdResult, CniError, Output, delegate};

/// DEL: IPAM DEL, then the masquerade rules (which need no addresses, so
/// they go even when the netns is gone) and the container link
/// ([`delegate::del_ipam_and_link`]: as in the reference, since dhcp
/// releases its lease from the link). The rules go just before the link:
/// their nf_tables commit leaves the kernel a grace period to wait before
/// it frees them, which then runs during the link deletion's own waits
/// instead of in this process's exit (issue 30).
/// IPAM's error comes first, then the link's, as in the reference.
pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let (ipam, (masq, link)) = delegate::del_ipam_and_link(args, true, || {
        let masq = conf.ip_masq.then(|| {
            masq::teardown(Attachment {
                network: &conf.name,
                ifname: &args.ifname,
                container_id: &args.container_id,
            })
        });
        let link = match args.netns.as_deref() {
            Some(path) => del_container_link(path, &args.ifname),
            None => Ok(()),
        };
        (masq, link)
    });
    let mut steps = Teardown::of([ipam, link]);
    if let Some(masq) = masq {
        steps.step(masq);
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
