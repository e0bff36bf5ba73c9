//! STATUS: whether the configured backend (unset: either) can be used.

use crate::config::{self, Backend};
use crate::{ipt, nft};
use cni_skel::error::code;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

fn nft_usable() -> bool {
    cni_fw::nft::check(&format!("add table ip {}\n", nft::TABLE)).is_ok()
}

pub fn status(args: &CmdArgs) -> CmdResult {
    let conf = config::parse(&args.config)?;
    let iptables = || ipt::save(false).is_ok() || ipt::save(true).is_ok();
    let usable = match conf.backend {
        Some(Backend::Iptables) => iptables(),
        Some(Backend::Nftables) => nft_usable(),
        None => iptables() || nft_usable(),
    };
    if usable {
        return Ok(Output::Nothing);
    }
    let which = conf
        .backend
        .map(Backend::name)
        .unwrap_or("iptables or nftables");
    Err(CniError::new(
        code::PLUGIN_NOT_AVAILABLE,
        format!("portmap: {which} is not usable"),
        "",
    ))
}
