//! CHECK: the container's rules are in place.

use crate::config::{self, Backend};
use crate::{addrs_of, ipt, nft, resolve};
use cni_skel::{CmdArgs, CmdResult, Output};

pub fn check(args: &CmdArgs) -> CmdResult {
    let conf = config::parse(&args.config)?;
    let prev = args.required_prev_result("Required prevResult missing")?;
    if conf.mappings.is_empty() {
        return Ok(Output::Nothing);
    }
    let (v4, v6) = config::container_addrs(&prev, &args.ifname);
    let backend = resolve(&conf)?;
    for addr in addrs_of(v4, v6) {
        match backend {
            Backend::Iptables => {
                let table = ipt::save(addr.is_ipv6())?;
                ipt::check_table(&conf, &args.container_id, addr, &table)?;
            }
            Backend::Nftables => nft::check(&conf, &args.container_id, addr)?,
        }
    }
    Ok(Output::Nothing)
}
