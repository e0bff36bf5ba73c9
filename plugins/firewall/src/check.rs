//! CHECK: what ADD made is there.

use crate::{NO_PREV_RESULT, backend, config, isolation, parse, request};
use cni_skel::{CmdArgs, CmdResult, Output};

pub fn check(args: &CmdArgs) -> CmdResult {
    let conf = parse(args)?;
    let policy = conf.ingress_policy()?;
    let prev = args.required_prev_result(NO_PREV_RESULT)?;
    let ips = config::container_ips(&prev);
    let iso = isolation(&prev, policy)?;
    backend::resolve(&conf)?.check(&request(args, &conf, &ips, &iso))?;
    Ok(Output::Nothing)
}
