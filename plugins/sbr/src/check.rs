//! CHECK: the rules and tables ADD made are there.

use crate::config::{self, Conf};
use crate::{NO_PREV_RESULT, family_of, host_net, ips_of, ns_path};
use cni_net::Netlink;
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// CHECK: every address has its rule, and (without `table`) the table it
/// points to routes through the interface.
pub fn check(args: &CmdArgs) -> CmdResult {
    let table = Conf::parse(args)?.table;
    let result = args.required_prev_result(NO_PREV_RESULT)?;
    let ips = ips_of(&result, &args.ifname);
    let ns = cni_plugin::netns::open_locked(ns_path(args)?)?;
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host().cni()?;
        let link = nl.link_by_name(&args.ifname).cni()?.ok_or_else(|| {
            CniError::internal(format!("Cannot find network interface {}", args.ifname))
        })?;
        for ip in &ips {
            let family = family_of(ip);
            let src = host_net(ip);
            let rule = nl
                .rules(family)
                .cni()?
                .into_iter()
                .find(|r| r.src == Some(src) && config::names(table, r.table))
                .ok_or_else(|| CniError::internal(format!("no rule from {src}")))?;
            if table.is_none()
                && !nl
                    .routes(family, Some(rule.table))
                    .cni()?
                    .iter()
                    .any(|r| r.oif == Some(link.index))
            {
                return Err(CniError::internal(format!(
                    "table {} has no route through {}",
                    rule.table, args.ifname
                )));
            }
        }
        Ok(())
    })
    .cni()??;
    Ok(Output::Nothing)
}
