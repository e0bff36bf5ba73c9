//! The kernel side, run inside the container's namespace: read the
//! current values, apply the configured ones, put saved ones back.

use crate::config::{Tuning, parse_go_mac};
use crate::state::Saved;
use cni_net::{Link, LinkSet, Mac, NetError, Netlink, sysctl};
use cni_plugin::NetResult;
use cni_skel::CniError;

/// The link, or the reference's error for a missing one.
pub fn must_link(nl: &Netlink, ifname: &str) -> Result<Link, CniError> {
    nl.link_by_name(ifname)
        .cni()?
        .ok_or_else(|| CniError::internal(format!("failed to get {ifname:?}: Link not found")))
}

/// The current values of everything `conf` changes: what DEL must put
/// back, and what a failed ADD goes back to; and the configured sysctls,
/// open, for [`apply`] to write. Fails, before anything is changed, on a
/// sysctl that does not exist or a MAC the link cannot take.
pub fn current(conf: &Tuning, link: &Link) -> Result<(Saved, Vec<sysctl::Held>), CniError> {
    let mut now = Saved {
        network: conf.parsed.network.clone(),
        ..Saved::default()
    };
    let mut held = Vec::with_capacity(conf.sysctls.len());
    for s in &conf.sysctls {
        let h = sysctl::hold(&s.path).map_err(cni_plugin::net_error)?;
        now.sysctl.insert(s.path.clone(), h.value().to_string());
        held.push(h);
    }
    if conf.mac.is_some() {
        if parse_go_mac(&link.mac).is_none_or(|b| b.len() != 6) {
            return Err(CniError::internal(format!(
                "failed to set MAC address of {}: the link has no Ethernet address (it has {:?})",
                link.name, link.mac
            )));
        }
        now.mac.clone_from(&link.mac);
    }
    if conf.parsed.promisc {
        now.promisc = Some(link.promisc);
    }
    if conf.mtu.is_some() {
        now.mtu = link.mtu;
    }
    if conf.parsed.allmulti.is_some() {
        now.allmulti = Some(link.allmulti);
    }
    if conf.txqlen.is_some() {
        now.txqlen = Some(link.txqlen);
    }
    Ok((now, held))
}

/// Applies `conf` in the reference's order: sysctls, MAC, promiscuous
/// mode, MTU, all-multicast, queue length. Stops at the first error.
/// `held` are `conf`'s sysctls as [`current`] opened them.
pub fn apply(
    nl: &Netlink,
    conf: &Tuning,
    link: &Link,
    held: &mut [sysctl::Held],
) -> Result<(), CniError> {
    for (s, h) in conf.sysctls.iter().zip(held) {
        h.set(&s.value).cni()?;
    }
    let all = LinkSet {
        mac: conf.mac,
        mtu: conf.mtu,
        promisc: conf.parsed.promisc.then_some(true),
        allmulti: conf.parsed.allmulti,
        txqlen: conf.txqlen,
    };
    if at_once(nl, link, &all) {
        return Ok(());
    }
    if let Some(mac) = conf.mac {
        nl.set_mac(link, mac).cni()?;
    }
    if conf.parsed.promisc {
        nl.set_promisc(link, true).cni()?;
    }
    if let Some(mtu) = conf.mtu {
        nl.set_mtu(link, mtu).cni()?;
    }
    if let Some(on) = conf.parsed.allmulti {
        nl.set_allmulti(link, on).cni()?;
    }
    if let Some(q) = conf.txqlen {
        nl.set_txqlen(link, q).cni()?;
    }
    Ok(())
}

/// Makes two or more link changes in one request (one round trip and one
/// notification instead of one each): whether it did. When it did not
/// (one change, or the kernel refused one), the caller makes them one by
/// one in the reference's order, which names the change that fails and
/// stops (or goes on) where the reference does; the ones the kernel made
/// before its refusal are made again, which changes nothing.
fn at_once(nl: &Netlink, link: &Link, changes: &LinkSet) -> bool {
    if changes.count() < 2 {
        return false;
    }
    match nl.set_link(link, changes) {
        Ok(()) => true,
        Err(e) => {
            log::debug!("{e}; one change at a time");
            false
        }
    }
}

/// Puts `saved` back, everything that can be: the link's attributes in the
/// reference's order (MTU, MAC, promiscuous, all-multicast, queue length)
/// when the link is there, then the sysctls. A sysctl that no longer
/// exists (its interface is gone) needs nothing. Returns the failures.
pub fn restore(nl: &Netlink, ifname: &str, saved: &Saved) -> Vec<String> {
    let mut errors = Vec::new();
    let mut note = |what: &str, r: Result<(), NetError>| {
        if let Err(e) = r {
            errors.push(format!("failed to restore {what}: {e}"));
        }
    };
    match nl.link_by_name(ifname) {
        Ok(Some(link)) => {
            let all = LinkSet {
                mtu: (saved.mtu != 0).then_some(saved.mtu),
                mac: saved_mac(&saved.mac),
                promisc: saved.promisc,
                allmulti: saved.allmulti,
                txqlen: saved.txqlen,
            };
            // A saved MAC that does not parse goes the slow way, which
            // reports it.
            let all_parsed = saved.mac.is_empty() || all.mac.is_some();
            if all_parsed && at_once(nl, &link, &all) {
                return restore_sysctls(saved, errors);
            }
            if saved.mtu != 0 {
                note("MTU", nl.set_mtu(&link, saved.mtu));
            }
            if !saved.mac.is_empty() {
                let mac = saved_mac(&saved.mac).ok_or_else(|| {
                    NetError::other(format!("parse MAC {:?}", saved.mac), "invalid MAC address")
                });
                note("MAC address", mac.and_then(|m| nl.set_mac(&link, m)));
            }
            if let Some(on) = saved.promisc {
                note("promiscuous mode", nl.set_promisc(&link, on));
            }
            if let Some(on) = saved.allmulti {
                note("all-multicast mode", nl.set_allmulti(&link, on));
            }
            if let Some(q) = saved.txqlen {
                note("transmit queue length", nl.set_txqlen(&link, q));
            }
        }
        // The interface is gone, and its attributes with it.
        Ok(None) => {}
        Err(e) => note(&format!("link {ifname}"), Err(e)),
    }
    restore_sysctls(saved, errors)
}

/// A saved MAC as the link takes it; `None` when it does not parse.
fn saved_mac(text: &str) -> Option<Mac> {
    parse_go_mac(text)
        .and_then(|b| <[u8; 6]>::try_from(b).ok())
        .map(Mac)
}

/// The sysctls part of [`restore`], after the link's: adds its failures
/// to `errors` and returns them all.
fn restore_sysctls(saved: &Saved, mut errors: Vec<String>) -> Vec<String> {
    for (path, value) in &saved.sysctl {
        match sysctl::write(path, value) {
            Err(e) if e.is_not_found() => {}
            Err(e) => errors.push(format!("failed to restore sysctl {path}: {e}")),
            Ok(_) => {}
        }
    }
    errors
}
