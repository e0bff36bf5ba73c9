//! DEL: the rules of the interface's addresses, and the tables only they
//! used; idempotent.

use crate::config::{self, Conf};
use crate::{FIRST_TABLE, family_of, flush_table, host_net, ips_of};
use cni_net::{IpFamily, Netlink, Rule};
use cni_plugin::NetResult;
use cni_skel::teardown::Teardown;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};
use ipnetwork::IpNetwork;

/// The addresses sbr made rules for: the prevResult's when there is one,
/// else the interface's (the reference's way).
fn del_ips(args: &CmdArgs, nl: &Netlink) -> Result<Vec<IpNetwork>, CniError> {
    if let Ok(Some(prev)) = args.prev_result() {
        let ips = ips_of(&prev, &args.ifname);
        if !ips.is_empty() {
            return Ok(ips);
        }
    }
    let Some(link) = nl.link_by_name(&args.ifname).cni()? else {
        return Ok(Vec::new());
    };
    Ok(nl
        .addrs(&link, None)
        .cni()?
        .iter()
        .map(|a| a.address)
        .collect())
}

/// DEL: the rules from the interface's addresses (to `table` when set),
/// and, without `table`, the routes of the tables they pointed to unless
/// another rule still uses that table. A gone netns is success and is
/// never created.
pub fn del(args: &CmdArgs) -> CmdResult {
    let table = Conf::parse(args)?.table;
    let Some(path) = args.netns.as_deref().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(Output::Nothing);
    };
    let Some(ns) = cni_plugin::netns::open_locked_if_present(path)? else {
        return Ok(Output::Nothing);
    };
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host().cni()?;
        let sources: Vec<IpNetwork> = del_ips(args, &nl)?.iter().map(host_net).collect();
        let mut steps = Teardown::default();
        for family in [IpFamily::V4, IpFamily::V6] {
            // No rule of a family without one of the sources is ours: its
            // dump would find nothing to do.
            if !sources.iter().any(|s| family_of(s) == family) {
                continue;
            }
            let rules = nl.rules(family).cni()?;
            let (mine, others): (Vec<&Rule>, Vec<&Rule>) = rules.iter().partition(|r| {
                r.src.is_some_and(|s| sources.contains(&s))
                    && config::names(table, r.table)
                    && !r.l3mdev
            });
            for r in &mine {
                if let Err(e) = nl.del_rule(r) {
                    steps.fail(CniError::internal(format!("Failed to delete rule {e}")));
                }
            }
            if table.is_some() {
                continue;
            }
            let mut tables: Vec<u32> = mine.iter().map(|r| r.table).collect();
            tables.sort_unstable();
            tables.dedup();
            for t in tables {
                if t < FIRST_TABLE || others.iter().any(|o| o.table == t) {
                    continue;
                }
                steps.step(flush_table(&nl, family, t));
            }
        }
        steps.finish()
    })
    .cni()??;
    Ok(Output::Nothing)
}
