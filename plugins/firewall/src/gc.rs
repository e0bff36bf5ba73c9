//! GC: the firewalld sources and records, then the iptables rules, of this
//! network's attachments that are not valid any more.

use crate::{firewalld, ipt, lock, parse, sources};
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// GC of the firewalld sources of `network`'s attachments that are not in
/// `valid`: with a firewalld of this namespace their sources (unless a
/// kept record claims them) and records go; with none running only the
/// records (its runtime sources went with it); with a firewalld elsewhere
/// nothing.
fn gc_firewalld_sources(network: &str, valid: &[(String, String)]) -> Result<(), CniError> {
    let records = sources::Records::default();
    let is_valid = |r: &sources::Record| {
        valid
            .iter()
            .any(|(cid, ifname)| *cid == r.container_id && *ifname == r.ifname)
    };
    let stale: Vec<sources::Record> = records
        .all(Some(network))
        .into_iter()
        .filter(|r| r.network == network && !is_valid(r))
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    let mut fw = match firewalld::find() {
        firewalld::Found::Here(fw) => Some(fw),
        firewalld::Found::Absent(_) => None,
        firewalld::Found::Elsewhere(why) => {
            log::debug!("firewalld sources not collected: {why}");
            return Ok(());
        }
    };
    // Every record that stays, of any network.
    let others: Vec<sources::Record> = records
        .all(None)
        .into_iter()
        .filter(|r| !stale.contains(r))
        .collect();
    for rec in &stale {
        if let Some(fw) = fw.as_mut() {
            for s in &rec.sources {
                if !others.iter().any(|o| o.sources.contains(s)) {
                    fw.remove_source(&s.zone, &s.source);
                }
            }
        }
        records.remove(&ipt::Attachment {
            network: &rec.network,
            container_id: &rec.container_id,
            ifname: &rec.ifname,
        })?;
    }
    Ok(())
}

pub fn gc(args: &CmdArgs) -> CmdResult {
    let conf = parse(args)?;
    let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
    let _lock = lock()?;
    gc_firewalld_sources(&conf.network, &valid)?;
    ipt::gc(&conf.network, &valid)?;
    Ok(Output::Nothing)
}
