//! ADD: the container's addresses let through by the backend (iptables
//! rules, or firewalld sources with a record of them) and the bridge
//! isolated when `ingressPolicy` asks; prevResult is passed on.

use crate::{NO_PREV_RESULT, backend, config, isolation, lock, parse, request};
use cni_skel::{CmdArgs, CmdResult, Output};

pub fn add(args: &CmdArgs) -> CmdResult {
    // Everything is validated before anything is written.
    let conf = parse(args)?;
    let policy = conf.ingress_policy()?;
    let prev = args.required_prev_result(NO_PREV_RESULT)?;
    let ips = config::container_ips(&prev);
    let iso = isolation(&prev, policy)?;
    let mut backend = backend::resolve(&conf)?;
    let _lock = lock()?;
    backend.add(&request(args, &conf, &ips, &iso))?;
    Ok(Output::Result(prev))
}
