//! The backends behind one trait, as the reference's `FirewallBackend`
//! interface (`Add`/`Del`/`Check`) and netavark's `FirewallDriver`: ADD,
//! DEL, CHECK and STATUS resolve the backend once ([`resolve`]) and call
//! it; each backend keeps its own bookkeeping (the firewalld backend's
//! records of its sources live in its impl, `crate::firewalld`).
//!
//! GC is not a method: it collects what either backend left for the
//! network's stale attachments, whichever backend the config names (a node
//! may have switched), and it must work when the configured one cannot be
//! resolved (`backend: firewalld` after firewalld stopped leaves records
//! to remove), so `crate::gc` calls both without resolving.

use crate::config::{BackendChoice, Conf, IngressPolicy};
use crate::{firewalld, ipt};
use cni_skel::CniError;
use std::net::IpAddr;

/// What one invocation asks of a backend.
pub struct Request<'a> {
    /// The parsed config (admin chain, zone).
    pub conf: &'a Conf,
    /// Whose addresses these are.
    pub att: ipt::Attachment<'a>,
    /// The container's addresses from `prevResult` (DEL: none without it).
    pub ips: &'a [IpAddr],
    /// The bridge to isolate and how (ADD, CHECK; `None` for DEL).
    pub isolation: Option<(&'a str, IngressPolicy)>,
}

/// A firewall backend.
pub trait FirewallBackend {
    /// ADD: lets the addresses through (and isolates the bridge); undoes
    /// what it did when it fails.
    fn add(&mut self, req: &Request<'_>) -> Result<(), CniError>;
    /// DEL: takes the attachment's addresses out again; what is already
    /// gone is not an error.
    fn del(&mut self, req: &Request<'_>) -> Result<(), CniError>;
    /// DEL's work where it commutes with every other DEL's, called with
    /// the firewall lock held shared: true when it did all of it; false
    /// (nothing changed) for [`FirewallBackend::del`] under the exclusive
    /// lock. None of it by default.
    fn del_shared(&mut self, _req: &Request<'_>) -> Result<bool, CniError> {
        Ok(false)
    }
    /// CHECK: what ADD made is there.
    fn check(&mut self, req: &Request<'_>) -> Result<(), CniError>;
    /// STATUS: whether the backend can be used.
    fn usable(&mut self) -> bool;
}

/// The configured backend, or the reference's choice: firewalld when it is
/// running, else iptables, with one difference: firewalld is chosen only
/// when it runs in the plugin's own network namespace. The system bus can
/// be reached from any namespace, but firewalld filters only its own, so a
/// plugin run in another one (rootless Podman's, a nested host) programs
/// iptables there instead of giving the host's firewalld the container's
/// addresses. `backend: firewalld` with a firewalld elsewhere is an error.
pub fn resolve(conf: &Conf) -> Result<Box<dyn FirewallBackend>, CniError> {
    match conf.backend {
        BackendChoice::Iptables => Ok(Box::new(ipt::Iptables)),
        BackendChoice::Auto => match firewalld::find() {
            firewalld::Found::Here(f) => Ok(Box::new(f)),
            firewalld::Found::Elsewhere(why) | firewalld::Found::Absent(why) => {
                log::debug!("firewalld not used: {why}");
                Ok(Box::new(ipt::Iptables))
            }
        },
        BackendChoice::Firewalld => match firewalld::find() {
            firewalld::Found::Here(f) => Ok(Box::new(f)),
            firewalld::Found::Elsewhere(why) | firewalld::Found::Absent(why) => Err(
                CniError::internal(format!("firewalld backend unavailable: {why}")),
            ),
        },
    }
}
