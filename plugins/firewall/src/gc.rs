//! GC: the firewalld sources and records, then the iptables rules, of this
//! network's attachments that are not valid any more: both backends'
//! leftovers, whichever the config names (see `crate::backend`).

use crate::{firewalld, ipt, lock, parse};
use cni_skel::{CmdArgs, CmdResult, Output};

pub fn gc(args: &CmdArgs) -> CmdResult {
    let conf = parse(args)?;
    let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
    let _lock = lock()?;
    firewalld::gc(&conf.network, &valid)?;
    ipt::gc(&conf.network, &valid)?;
    Ok(Output::Nothing)
}
