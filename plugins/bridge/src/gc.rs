//! GC and STATUS (spec 1.1.0).

use crate::config;
use cni_net::Netlink;
use cni_skel::delegate;
use cni_skel::teardown::Teardown;
use cni_skel::{CmdArgs, CmdResult, Command, Output};

/// GC: forwards to IPAM, then removes the masquerade and spoof-check rules
/// of attachments not in the valid list. Every step runs; every failure
/// is reported.
pub fn gc(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
    let mut steps = Teardown::default();
    if conf.layer3 {
        steps.step(delegate::ipam_run(Command::Gc, args));
    }
    steps.step(cni_fw::masq::gc(&conf.network, &valid));
    // Spoof-check rules carry no network name: only those whose host veth
    // is a port of this network's bridge (or is gone) are ours to collect.
    match Netlink::host() {
        Ok(host) => {
            let bridge = host.link_by_name(&conf.bridge).ok().flatten();
            let is_ours = |veth: Option<&str>| match veth {
                None => false,
                Some(name) => match host.link_by_name(name) {
                    Ok(None) => true,
                    Ok(Some(l)) => bridge.as_ref().is_some_and(|b| l.master == Some(b.index)),
                    Err(_) => false,
                },
            };
            steps.step(cni_fw::spoofcheck::gc(&valid, is_ours));
        }
        Err(e) => steps.fail(cni_plugin::net_error(e)),
    }
    steps.finish()?;
    Ok(Output::Nothing)
}

/// STATUS: IPAM's answer (available when there is no IPAM).
pub fn status(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    if conf.layer3 {
        delegate::ipam_run(Command::Status, args)?;
    }
    Ok(Output::Nothing)
}
