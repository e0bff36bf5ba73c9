//! DEL: what the backend added for this attachment; the firewalld
//! backend's sources (those no other record claims) and record, and the
//! iptables rules whatever the backend.
//!
//! The iptables backend's DEL first tries its netlink deletion by handle
//! holding the firewall lock shared (`FirewallBackend::del_shared`): in a
//! storm the DELs then run side by side instead of one after another
//! (issue 30); anything else waits for the exclusive lock.

use crate::{backend, config, lock, lock_shared, parse, request};
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
    let req = request(args, &conf, &ips, &None);
    let done = {
        let _shared = lock_shared()?;
        backend.del_shared(&req)?
    };
    if !done {
        let _lock = lock()?;
        backend.del(&req)?;
    }
    Ok(Output::Nothing)
}
