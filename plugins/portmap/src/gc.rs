//! GC: the rules of this network's containers that are not in the valid
//! attachments, in both backends.

use crate::{config, ipt, lock, nft};
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

pub fn gc(args: &CmdArgs) -> CmdResult {
    let conf = config::parse(&args.config)?;
    // Portmap's rules are per container, whatever the interface.
    let valid: Vec<String> = cni_skel::conf::valid_attachments(&args.stdin)?
        .into_iter()
        .map(|(cid, _)| cid)
        .collect();
    let _lock = lock()?;
    let mut errors = Vec::new();
    // Both backends: rules may have been written by either.
    if let Err(e) = ipt::gc(&conf.network, &valid) {
        errors.push(e.msg);
    }
    if cni_fw::nft::usable()
        && let Err(e) = nft::gc(&conf.network, &valid)
    {
        errors.push(e.msg);
    }
    if errors.is_empty() {
        Ok(Output::Nothing)
    } else {
        Err(CniError::internal(errors.join("; ")))
    }
}
