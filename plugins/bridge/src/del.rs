//! DEL: idempotent and best effort. The container interface goes (which
//! takes the host end with it), the IPAM reservation is always released,
//! and this attachment's masquerade and spoof-check rules are removed even
//! when the netns is already gone. The bridge and its address stay.

use crate::config;
use cni_fw::masq::{self, Attachment};
use cni_net::Netlink;
use cni_skel::delegate;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

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
    let (ipam, link) = delegate::del_ipam_and_link(args, conf.layer3, || {
        ns.as_ref().map_or(Ok(()), |ns| {
            Netlink::for_ns(ns)
                .and_then(|nl| nl.del_link_by_name(&args.ifname))
                .map(|_| ())
        })
    });
    let mut errors: Vec<CniError> = Vec::new();
    if let Err(e) = link {
        errors.push(cni_plugin::net_error(e));
    }
    if let Err(e) = ipam {
        errors.push(e);
    }
    if conf.mac_spoof_chk {
        // As in the reference, a spoof-check teardown failure is only reported.
        if let Err(e) = cni_fw::spoofcheck::teardown(&args.container_id, &args.ifname) {
            log::warn!("{}", e.msg);
        }
    }
    if conf.layer3 && conf.ip_masq {
        let att = Attachment {
            network: &conf.network,
            ifname: &args.ifname,
            container_id: &args.container_id,
        };
        if let Err(e) = masq::teardown(att) {
            errors.push(e);
        }
    }
    match errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(Output::Nothing),
    }
}
