//! DEL: what the backend added for this attachment; the firewalld
//! backend's sources (those no other record claims) and record, and the
//! iptables rules whatever the backend.

use crate::{backend, config, lock, parse, request};
use cni_skel::{CmdArgs, CmdResult, Output};
use std::net::IpAddr;

pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = parse(args)?;
    // DEL works without prevResult: the records name the addresses.
    let ips: Vec<IpAddr> = args
        .prev_result()?
        .map(|p| config::container_ips(&p))
        .unwrap_or_default();
    let mut backend = backend::resolve(&conf)?;
    let _lock = lock()?;
    backend.del(&request(args, &conf, &ips, &None))?;
    Ok(Output::Nothing)
}
