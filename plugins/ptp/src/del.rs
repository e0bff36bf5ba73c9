//! DEL and GC: best effort, every step runs, errors are reported together.

use crate::config;
use cni_fw::masq::{self, Attachment};
use cni_net::{NetNs, Netlink};
use cni_skel::{CmdArgs, CmdResult, CniError, Command, Output, delegate};

/// One error as it is; several joined into one message (the first one's code).
fn report(mut errors: Vec<CniError>) -> CmdResult {
    if errors.is_empty() {
        return Ok(Output::Nothing);
    }
    let mut first = errors.remove(0);
    for e in errors {
        first.msg = format!("{}; {}", first.msg, e.msg);
    }
    Err(first)
}

/// DEL: IPAM, then the container link (in the order
/// [`delegate::del_ipam_and_link`] picks: IPAM DEL first, as in the
/// reference, since dhcp releases its lease from the link; beside the
/// link's deletion for host-local and static), then the masquerade rules
/// (which need no addresses, so they go even when the netns is gone).
/// IPAM's error comes first, as in the reference.
pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let (ipam, link) = delegate::del_ipam_and_link(args, true, || match args.netns.as_deref() {
        Some(path) => del_container_link(path, &args.ifname),
        None => Ok(()),
    });
    let mut errors = Vec::new();
    if let Err(e) = ipam {
        errors.push(e);
    }
    if let Err(e) = link {
        errors.push(e);
    }
    if conf.ip_masq {
        let att = Attachment {
            network: &conf.name,
            ifname: &args.ifname,
            container_id: &args.container_id,
        };
        if let Err(e) = masq::teardown(att) {
            errors.push(e);
        }
    }
    report(errors)
}

/// Deletes the container end of the veth pair (the host end goes with it);
/// a missing netns or link is success.
fn del_container_link(path: &std::path::Path, ifname: &str) -> Result<(), CniError> {
    // The container is gone, and with it the veth pair.
    let Some(ns) = NetNs::open_if_present(path)? else {
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

/// GC: forwarded to IPAM, then the masquerade rules of this network's
/// attachments that are not valid any more are removed (both backends).
pub fn gc(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
    let mut errors = Vec::new();
    if let Err(e) = delegate::ipam_run(Command::Gc, args) {
        errors.push(e);
    }
    if let Err(e) = masq::gc(&conf.name, &valid) {
        errors.push(e);
    }
    report(errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_joined() {
        assert_eq!(report(vec![]).unwrap(), Output::Nothing);
        let e = report(vec![
            CniError::new(11, "ipam busy", ""),
            CniError::internal("link"),
        ])
        .unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (11, "ipam busy; link"));
    }
}
