//! DEL: idempotent and best effort. The container interface goes (which
//! takes the host end with it), the IPAM reservation is always released,
//! and this attachment's masquerade and spoof-check rules are removed even
//! when the netns is already gone. The bridge and its address stay.

use crate::config;
use cni_fw::masq::{self, Attachment};
use cni_net::Netlink;
use cni_skel::delegate;
use cni_skel::teardown::Teardown;
use cni_skel::{CmdArgs, CmdResult, Output};

/// DEL.
pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    // A netns that exists but cannot be opened fails DEL before IPAM DEL,
    // as in the reference (the address may still be in use).
    // A netns that is gone took the veth pair with it.
    let ns = match &args.netns {
        None => None,
        Some(path) => cni_plugin::netns::open_if_present(path)?,
    };
    // IPAM DEL before the link goes (dhcp releases its lease from it).
    // The masquerade's rules go just before the link (after an IPAM that
    // may need the link, as the link itself): their nf_tables commit
    // leaves the kernel a grace period to wait before it frees them, which
    // then runs during the link deletion's own waits instead of in this
    // process's exit (issue 30).
    let (ipam, (masq, link)) = delegate::del_ipam_and_link(args, conf.layer3, || {
        let masq = (conf.layer3 && conf.ip_masq).then(|| {
            masq::teardown(Attachment {
                network: &conf.network,
                ifname: &args.ifname,
                container_id: &args.container_id,
            })
        });
        let link = ns.as_ref().map_or(Ok(()), |ns| {
            Netlink::for_ns(ns)
                .and_then(|nl| nl.del_link_by_name(&args.ifname))
                .map(|_| ())
        });
        (masq, link)
    });
    let mut steps = Teardown::of([ipam, link.map_err(cni_plugin::net_error)]);
    if conf.mac_spoof_chk {
        // As in the reference, a spoof-check teardown failure is only reported.
        if let Err(e) = cni_fw::spoofcheck::teardown(&args.container_id, &args.ifname) {
            log::warn!("{}", e.msg);
        }
    }
    if let Some(masq) = masq {
        steps.step(masq);
    }
    steps.finish()?;
    Ok(Output::Nothing)
}
