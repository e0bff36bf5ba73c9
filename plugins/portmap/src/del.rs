//! DEL: the container's rules and the mapped UDP ports' conntrack entries.
//!
//! With iptables-nft the container's chain and its jumps go over netlink
//! ([`crate::ipt_netlink_del`]) holding the portmap lock shared
//! ([`cni_lock::named_shared`]): each DEL deletes only its own chain and the
//! entries that jump to it, by kernel handle, in one transaction, which
//! commutes with every other such DEL; what it must not interleave with is
//! a text path's read-modify-write of the `nat` table (an ADD, or a DEL
//! that could not go by netlink), which holds the lock exclusively. In a
//! storm the DELs then no longer wait for each other in turn (issue 30).
//! When the netlink path does not apply to both families, the whole DEL is
//! done again under the exclusive lock, as before.

use crate::config::Backend;
use crate::{flush_conntrack, ipt, lock, nft, parse_wrapped, resolve};
use cni_skel::{CmdArgs, CmdResult, Output};

pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = parse_wrapped(args)?;
    if conf.mappings.is_empty() {
        return Ok(Output::Nothing);
    }
    let backend = resolve(&conf).map_err(|e| e.context("failed to parse config"))?;
    if backend == Backend::Iptables && by_netlink_shared(&conf, &args.container_id)? {
        flush_conntrack(&conf, None);
        return Ok(Output::Nothing);
    }
    let _lock = lock()?;
    match backend {
        Backend::Iptables => ipt::del(&conf, &args.container_id)?,
        Backend::Nftables => nft::del(&conf.network, &args.container_id)?,
    }
    flush_conntrack(&conf, None);
    Ok(Output::Nothing)
}

/// The netlink DEL of both families under the shared lock: true when both
/// are done (or had nothing of the container).
fn by_netlink_shared(
    conf: &crate::config::Conf,
    container_id: &str,
) -> Result<bool, cni_skel::CniError> {
    let _shared = cni_lock::named_shared("portmap")?;
    Ok([false, true]
        .into_iter()
        .all(|v6| crate::ipt_netlink_del::del(conf, container_id, v6)))
}
