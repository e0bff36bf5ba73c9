//! CHECK: what ADD made is there.

use crate::{Backend, NO_PREV_RESULT, config, ipt, isolation, parse, resolve};
use cni_skel::{CmdArgs, CmdResult, Output};

pub fn check(args: &CmdArgs) -> CmdResult {
    let conf = parse(args)?;
    let policy = conf.ingress_policy()?;
    let prev = args.required_prev_result(NO_PREV_RESULT)?;
    let ips = config::container_ips(&prev);
    let iso = isolation(&prev, policy)?;
    let iso = iso.as_ref().map(|(b, p)| (b.as_str(), *p));
    match resolve(&conf)? {
        Backend::Iptables => {
            ipt::require_tools(&ips)?;
            ipt::check(&conf, &ips, iso)?;
        }
        Backend::Firewalld(mut fw) => {
            fw.check(&conf.zone, &ips)?;
            if let Some((bridge, policy)) = iso {
                ipt::require_tools(&ips)?;
                ipt::check_isolation(&ips, bridge, policy)?;
            }
        }
    }
    Ok(Output::Nothing)
}
