//! ADD: the container's addresses let through (iptables rules, or firewalld
//! sources with a record of them) and the bridge isolated when
//! `ingressPolicy` asks; prevResult is passed on.

use crate::{
    Backend, NO_PREV_RESULT, attachment, config, firewalld, ipt, isolation, lock, parse, resolve,
    sources,
};
use cni_skel::{CmdArgs, CmdResult, Output};
use std::net::IpAddr;

/// The record of `att` after an ADD of `ips` to `zone`: what `before` held
/// plus the new sources.
fn record_with(
    before: Option<sources::Record>,
    att: &ipt::Attachment<'_>,
    zone: &str,
    ips: &[IpAddr],
) -> sources::Record {
    let mut rec = before.unwrap_or_default();
    rec.network = att.network.to_string();
    rec.container_id = att.container_id.to_string();
    rec.ifname = att.ifname.to_string();
    for ip in ips {
        let s = sources::ZoneSource {
            zone: zone.to_string(),
            source: firewalld::source(*ip),
        };
        if !rec.sources.contains(&s) {
            rec.sources.push(s);
        }
    }
    rec
}

pub fn add(args: &CmdArgs) -> CmdResult {
    // Everything is validated before anything is written.
    let conf = parse(args)?;
    let policy = conf.ingress_policy()?;
    let prev = args.required_prev_result(NO_PREV_RESULT)?;
    let ips = config::container_ips(&prev);
    let iso = isolation(&prev, policy)?;
    let iso = iso.as_ref().map(|(b, p)| (b.as_str(), *p));
    let backend = resolve(&conf)?;
    let _lock = lock()?;
    match backend {
        Backend::Iptables => {
            ipt::require_tools(&ips)?;
            ipt::add(&conf, &attachment(args), &ips, iso)?;
        }
        Backend::Firewalld(mut fw) => {
            // The isolation rules are iptables rules whatever the
            // backend, as in the reference.
            if iso.is_some() {
                ipt::require_tools(&ips)?;
            }
            // The record first: a source is never without one.
            let att = attachment(args);
            let records = sources::Records::default();
            let before = records.read(&att);
            records.write(&att, &record_with(before.clone(), &att, &conf.zone, &ips))?;
            let undo_record = || {
                let _ = match &before {
                    Some(r) => records.write(&att, r),
                    None => records.remove(&att),
                };
            };
            if let Err(e) = fw.add(&conf.zone, &ips) {
                undo_record();
                return Err(e);
            }
            if let Some((bridge, policy)) = iso
                && let Err(e) = ipt::isolate_only(&ips, bridge, policy)
            {
                fw.del(&conf.zone, &ips);
                undo_record();
                return Err(e);
            }
        }
    }
    Ok(Output::Result(prev))
}
