//! DEL: the container's rules and the mapped UDP ports' conntrack entries.

use crate::config::Backend;
use crate::{flush_conntrack, ipt, lock, nft, parse_wrapped, resolve};
use cni_skel::{CmdArgs, CmdResult, Output};

pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = parse_wrapped(args)?;
    if conf.mappings.is_empty() {
        return Ok(Output::Nothing);
    }
    let backend = resolve(&conf).map_err(|e| e.context("failed to parse config"))?;
    let _lock = lock()?;
    match backend {
        Backend::Iptables => ipt::del(&conf, &args.container_id)?,
        Backend::Nftables => nft::del(&conf.network, &args.container_id)?,
    }
    flush_conntrack(&conf, None);
    Ok(Output::Nothing)
}
