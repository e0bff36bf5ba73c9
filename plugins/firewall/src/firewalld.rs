//! The firewalld backend: each container address becomes a source of a
//! firewalld zone (`trusted` by default) through firewalld's D-Bus API, as
//! in the reference. These are runtime (not permanent) changes, so
//! `firewall-cmd --reload` drops them, as it does the reference's.

use crate::backend::{FirewallBackend, Request};
use crate::ipt::{self, Attachment};
use crate::sources::{Record, Records, ZoneSource};
use cni_fw::dbus::{self, Connection, Value};
use cni_skel::CniError;
use std::net::IpAddr;

const BUS_NAME: &str = "org.freedesktop.DBus";
const BUS_PATH: &str = "/org/freedesktop/DBus";
const FIREWALLD: &str = "org.fedoraproject.FirewallD1";
const FIREWALLD_PATH: &str = "/org/fedoraproject/FirewallD1";
const ZONE_INTERFACE: &str = "org.fedoraproject.FirewallD1.zone";
const ZONE_ALREADY_SET: &str = "ZONE_ALREADY_SET";

/// A connection to a firewalld that was found running.
pub struct Firewalld {
    conn: Connection,
}

/// Whether firewalld can serve this invocation.
pub enum Found {
    /// Running, in this process's network namespace.
    Here(Firewalld),
    /// Running, but in another network namespace (its PID given) or one
    /// that cannot be told: its zones do not filter this namespace's
    /// traffic.
    Elsewhere(String),
    /// Not running, or no system bus (why).
    Absent(String),
}

/// Looks for firewalld on the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else
/// the default socket) and tells whether it runs in our network namespace:
/// the bus is reachable from any namespace, but firewalld only filters the
/// one it runs in.
pub fn find() -> Found {
    let mut conn = match dbus::system_bus() {
        Ok(c) => c,
        Err(e) => return Found::Absent(e.to_string()),
    };
    let owner = match conn.call(BUS_NAME, BUS_PATH, BUS_NAME, "GetNameOwner", &[FIREWALLD]) {
        Ok(Value::Str(o)) => o,
        Ok(other) => return Found::Absent(format!("GetNameOwner answered {other:?}")),
        Err(e) => return Found::Absent(format!("firewalld is not running: {e}")),
    };
    let pid = match conn.call(
        BUS_NAME,
        BUS_PATH,
        BUS_NAME,
        "GetConnectionUnixProcessID",
        &[&owner],
    ) {
        Ok(Value::U32(pid)) => pid,
        other => {
            return Found::Elsewhere(format!(
                "the process of firewalld's connection is unknown ({other:?})"
            ));
        }
    };
    match same_netns(pid) {
        Ok(true) => Found::Here(Firewalld { conn }),
        Ok(false) => Found::Elsewhere(format!(
            "firewalld (pid {pid}) runs in another network namespace"
        )),
        Err(e) => Found::Elsewhere(format!(
            "cannot tell firewalld's (pid {pid}) network namespace: {e}"
        )),
    }
}

/// True when process `pid` (as the bus daemon sees it, so the same PID
/// namespace is assumed) shares our network namespace.
fn same_netns(pid: u32) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/net"))?;
    let ours = std::fs::metadata("/proc/self/ns/net")?;
    Ok(theirs.dev() == ours.dev() && theirs.ino() == ours.ino())
}

/// `10.1.0.2/32`, `fd00::2/128`: the source firewalld is given.
pub fn source(ip: IpAddr) -> String {
    format!("{ip}/{}", if ip.is_ipv4() { 32 } else { 128 })
}

impl Firewalld {
    fn zone_call(&mut self, method: &str, zone: &str, src: &str) -> Result<Value, dbus::Error> {
        self.conn.call(
            FIREWALLD,
            FIREWALLD_PATH,
            ZONE_INTERFACE,
            method,
            &[zone, src],
        )
    }

    /// Puts every address into `zone`. An address already there is fine;
    /// on another failure the addresses this call added are taken out
    /// again.
    pub fn add_sources(&mut self, zone: &str, ips: &[IpAddr]) -> Result<(), CniError> {
        let mut added = Vec::new();
        for ip in ips {
            let src = source(*ip);
            match self.zone_call("addSource", zone, &src) {
                Ok(_) => added.push(src),
                Err(e) if e.to_string().contains(ZONE_ALREADY_SET) => {}
                Err(e) => {
                    for s in &added {
                        let _ = self.zone_call("removeSource", zone, s);
                    }
                    return Err(CniError::internal(format!(
                        "failed to add the address {src} to {zone} zone: {e}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Takes the addresses out of `zone`; errors (not there, say) are
    /// ignored, as in the reference.
    pub fn del_sources(&mut self, zone: &str, ips: &[IpAddr]) {
        for ip in ips {
            self.remove_source(zone, &source(*ip));
        }
    }

    /// Takes one source out of `zone`; errors are ignored.
    pub fn remove_source(&mut self, zone: &str, src: &str) {
        let _ = self.zone_call("removeSource", zone, src);
    }

    /// Every address is a source of `zone` (the reference ignores
    /// `querySource`'s answer; here `false` fails).
    pub fn check_sources(&mut self, zone: &str, ips: &[IpAddr]) -> Result<(), CniError> {
        for ip in ips {
            let src = source(*ip);
            match self.zone_call("querySource", zone, &src) {
                Ok(Value::Bool(true)) => {}
                Ok(_) => {
                    return Err(CniError::internal(format!(
                        "failed to find the address {src} in {zone} zone"
                    )));
                }
                Err(e) => {
                    return Err(CniError::internal(format!(
                        "failed to find the address {src} in {zone} zone: {e}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The record of `att` after an ADD of `ips` to `zone`: what `before` held
/// plus the new sources.
fn record_with(before: Option<Record>, att: &Attachment<'_>, zone: &str, ips: &[IpAddr]) -> Record {
    let mut rec = before.unwrap_or_default();
    rec.network = att.network.to_string();
    rec.container_id = att.container_id.to_string();
    rec.ifname = att.ifname.to_string();
    for ip in ips {
        let s = ZoneSource {
            zone: zone.to_string(),
            source: source(*ip),
        };
        if !rec.sources.contains(&s) {
            rec.sources.push(s);
        }
    }
    rec
}

/// The firewalld backend: the sources, with a record of them per
/// attachment (`crate::sources`); the isolation rules of `ingressPolicy`
/// are iptables rules whatever the backend, as in the reference.
impl FirewallBackend for Firewalld {
    fn add(&mut self, req: &Request<'_>) -> Result<(), CniError> {
        let (att, ips, zone) = (&req.att, req.ips, req.conf.zone.as_str());
        if req.isolation.is_some() {
            ipt::require_tools(ips)?;
        }
        // The record first: a source is never without one.
        let records = Records::default();
        let before = records.read(att);
        records.write(att, &record_with(before.clone(), att, zone, ips))?;
        let undo_record = || {
            let _ = match &before {
                Some(r) => records.write(att, r),
                None => records.remove(att),
            };
        };
        if let Err(e) = self.add_sources(zone, ips) {
            undo_record();
            return Err(e);
        }
        if let Some((bridge, policy)) = req.isolation
            && let Err(e) = ipt::isolate_only(ips, bridge, policy)
        {
            self.del_sources(zone, ips);
            undo_record();
            return Err(e);
        }
        Ok(())
    }

    /// The sources of `prevResult` and the recorded ones (in the zone they
    /// were recorded with) but those another attachment's record claims,
    /// the record, then this attachment's iptables rules if there are any
    /// (added before firewalld was started, or by the iptables backend).
    fn del(&mut self, req: &Request<'_>) -> Result<(), CniError> {
        let att = &req.att;
        let records = Records::default();
        let mut doomed: Vec<ZoneSource> = req
            .ips
            .iter()
            .map(|ip| ZoneSource {
                zone: req.conf.zone.clone(),
                source: source(*ip),
            })
            .collect();
        for s in records.read(att).map(|r| r.sources).unwrap_or_default() {
            if !doomed.contains(&s) {
                doomed.push(s);
            }
        }
        // A source another attachment's record claims stays.
        let others = records.all(None);
        doomed.retain(|d| {
            !others
                .iter()
                .any(|r| !r.is_of(att) && r.sources.contains(d))
        });
        for d in &doomed {
            self.remove_source(&d.zone, &d.source);
        }
        records.remove(att)?;
        ipt::del(att, req.ips)
    }

    fn check(&mut self, req: &Request<'_>) -> Result<(), CniError> {
        self.check_sources(&req.conf.zone, req.ips)?;
        if let Some((bridge, policy)) = req.isolation {
            ipt::require_tools(req.ips)?;
            ipt::check_isolation(req.ips, bridge, policy)?;
        }
        Ok(())
    }

    fn usable(&mut self) -> bool {
        true
    }
}

/// For the iptables backend's DEL: the record of `att` left by a
/// firewalld that is no longer running goes (its runtime sources went
/// with it).
pub fn forget_if_gone(att: &Attachment<'_>) -> Result<(), CniError> {
    let records = Records::default();
    if records.read(att).is_some() && matches!(find(), Found::Absent(_)) {
        records.remove(att)?;
    }
    Ok(())
}

/// GC of the firewalld sources of `network`'s attachments that are not in
/// `valid`: with a firewalld of this namespace their sources (unless a
/// kept record claims them) and records go; with none running only the
/// records (its runtime sources went with it); with a firewalld elsewhere
/// nothing.
pub fn gc(network: &str, valid: &[(String, String)]) -> Result<(), CniError> {
    let records = Records::default();
    let is_valid = |r: &Record| {
        valid
            .iter()
            .any(|(cid, ifname)| *cid == r.container_id && *ifname == r.ifname)
    };
    let stale: Vec<Record> = records
        .all(Some(network))
        .into_iter()
        .filter(|r| r.network == network && !is_valid(r))
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    let mut fw = match find() {
        Found::Here(fw) => Some(fw),
        Found::Absent(_) => None,
        Found::Elsewhere(why) => {
            log::debug!("firewalld sources not collected: {why}");
            return Ok(());
        }
    };
    // Every record that stays, of any network.
    let others: Vec<Record> = records
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
        records.remove(&Attachment {
            network: &rec.network,
            container_id: &rec.container_id,
            ifname: &rec.ifname,
        })?;
    }
    Ok(())
}
