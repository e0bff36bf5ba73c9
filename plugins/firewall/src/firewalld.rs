//! The firewalld backend: each container address becomes a source of a
//! firewalld zone (`trusted` by default) through firewalld's D-Bus API, as
//! in the reference. These are runtime (not permanent) changes, so
//! `firewall-cmd --reload` drops them, as it does the reference's.

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
    pub fn add(&mut self, zone: &str, ips: &[IpAddr]) -> Result<(), CniError> {
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
    pub fn del(&mut self, zone: &str, ips: &[IpAddr]) {
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
    pub fn check(&mut self, zone: &str, ips: &[IpAddr]) -> Result<(), CniError> {
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
