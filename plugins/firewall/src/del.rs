//! DEL: the attachment's firewalld sources (those no other record claims)
//! and its record, then its iptables rules whatever the backend.

use crate::{Backend, attachment, config, firewalld, ipt, lock, parse, resolve, sources};
use cni_skel::{CmdArgs, CmdResult, Output};
use std::net::IpAddr;

pub fn del(args: &CmdArgs) -> CmdResult {
    let conf = parse(args)?;
    // DEL works without prevResult: the records name the addresses.
    let ips: Vec<IpAddr> = args
        .prev_result()?
        .map(|p| config::container_ips(&p))
        .unwrap_or_default();
    let backend = resolve(&conf)?;
    let _lock = lock()?;
    let att = attachment(args);
    let records = sources::Records::default();
    match backend {
        Backend::Firewalld(mut fw) => {
            let mut doomed: Vec<sources::ZoneSource> = ips
                .iter()
                .map(|ip| sources::ZoneSource {
                    zone: conf.zone.clone(),
                    source: firewalld::source(*ip),
                })
                .collect();
            for s in records.read(&att).map(|r| r.sources).unwrap_or_default() {
                if !doomed.contains(&s) {
                    doomed.push(s);
                }
            }
            // A source another attachment's record claims stays.
            let others = records.all(None);
            doomed.retain(|d| {
                !others
                    .iter()
                    .any(|r| !r.is_of(&att) && r.sources.contains(d))
            });
            for d in &doomed {
                fw.remove_source(&d.zone, &d.source);
            }
            records.remove(&att)?;
        }
        Backend::Iptables => {
            // A record from a firewalld that is no longer running:
            // its runtime sources went with it.
            if records.read(&att).is_some()
                && matches!(firewalld::find(), firewalld::Found::Absent(_))
            {
                records.remove(&att)?;
            }
        }
    }
    // Whatever the backend: iptables rules of this attachment may exist
    // (added before firewalld was started, or by the iptables backend).
    ipt::del(&attachment(args), &ips)?;
    Ok(Output::Nothing)
}
