//! ADD: the interface enslaved to the VRF (made when missing), its
//! global IPv6 addresses and main-table routes put back, the routes in
//! the VRF's table. A failed ADD undoes what it did.

use crate::config::{Conf, is_reserved_table};
use crate::{NO_PREV_RESULT, find_vrf, must_open_netns};
use cni_net::{AddrFlags, IpFamily, Link, Netlink, Route, TABLE_MAIN, scope};
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};
use ipnetwork::IpNetwork;
use std::collections::HashSet;

/// ADD.
pub fn add(args: &CmdArgs) -> CmdResult {
    let conf = Conf::parse(args)?;
    let result = args.required_prev_result(NO_PREV_RESULT)?;
    let ns = must_open_netns(args)?;
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host().cni()?;
        add_in_ns(&nl, &conf, &args.ifname)
    })
    .cni()?
    .map_err(|e| e.context("cmdAdd failed"))?;
    Ok(Output::Result(result))
}

/// ADD inside the container namespace. Everything that can be refused is
/// checked before anything changes; a failure after that undoes what was
/// done.
fn add_in_ns(nl: &Netlink, conf: &Conf, ifname: &str) -> Result<(), CniError> {
    let existing = find_vrf(nl, &conf.vrfname)?;
    if let (Some(vrf), Some(want)) = (&existing, conf.table)
        && vrf.vrf_table != Some(want)
    {
        return Err(CniError::internal(format!(
            "VRF {} already exist with different routing table {}",
            conf.vrfname,
            vrf.vrf_table.unwrap_or(0)
        )));
    }
    let link = nl
        .link_by_name(ifname)
        .cni()?
        .ok_or_else(|| CniError::internal(format!("could not get link by name {ifname}")))?;
    if let Some(master) = link.master {
        let name = nl
            .link_by_index(master)
            .cni()?
            .map(|m| m.name)
            .unwrap_or_else(|| master.to_string());
        return Err(CniError::internal(format!(
            "interface {ifname} has already a master set: {name}"
        )));
    }
    // Choosing a free table dumps every route: the main table's come
    // with it, and Saved takes those instead of asking again.
    let (vrf, created, all_routes) = match existing {
        Some(vrf) => (vrf, false, None),
        None => {
            let (vrf, routes) = create_vrf(nl, conf)?;
            (vrf, true, routes)
        }
    };
    let table = vrf
        .vrf_table
        .ok_or_else(|| CniError::internal(format!("VRF {} reports no routing table", vrf.name)))?;
    let saved = Saved::take(nl, &link, all_routes)?;
    if let Err(e) = nl.set_master(&link, Some(vrf.index)) {
        if created {
            undo_log(nl.del_link(&vrf));
        }
        return Err(CniError::internal(format!(
            "could not set vrf {} as master of {ifname}: {}",
            vrf.name,
            e.reason()
        )));
    }
    if let Err(e) = saved.restore(nl, &link, &vrf, table) {
        undo_enslave(nl, &link, &saved);
        if created {
            undo_log(nl.del_link(&vrf));
        }
        return Err(e);
    }
    Ok(())
}

fn undo_log(r: Result<(), cni_net::NetError>) {
    if let Err(e) = r {
        log::error!("undoing a failed ADD: {e}");
    }
}

/// Creates the VRF: with the configured table, which no other VRF may use,
/// else with the first table nothing uses. Returns it, and every route of
/// the namespace when it dumped them to choose the table.
fn create_vrf(nl: &Netlink, conf: &Conf) -> Result<(Link, Option<Vec<Route>>), CniError> {
    let vrfs = nl.vrfs().cni()?;
    let mut all_routes = None;
    let table = match conf.table {
        Some(t) => {
            if let Some(other) = vrfs.iter().find(|v| v.vrf_table == Some(t)) {
                return Err(CniError::internal(format!(
                    "routing table {t} is already used by VRF {}",
                    other.name
                )));
            }
            t
        }
        None => {
            let routes = nl.all_routes(None).cni()?;
            let t = first_free_table(&used_tables(nl, &vrfs, &routes)?)?;
            all_routes = Some(routes);
            t
        }
    };
    let vrf = match nl.create_vrf(&conf.vrfname, table) {
        Ok(v) => v,
        // Made by someone else between our lookup and our request: theirs
        // must do, if it is a VRF with the right table.
        Err(e) if e.is_exists() => {
            let v = find_vrf(nl, &conf.vrfname)?.ok_or_else(|| {
                CniError::internal(format!("could not add VRF {}: {e}", conf.vrfname))
            })?;
            if conf.table.is_some_and(|t| v.vrf_table != Some(t)) {
                return Err(CniError::internal(format!(
                    "VRF {} already exist with different routing table {}",
                    conf.vrfname,
                    v.vrf_table.unwrap_or(0)
                )));
            }
            v
        }
        Err(e) => {
            return Err(CniError::internal(format!(
                "could not add VRF {}: {}",
                conf.vrfname,
                e.reason()
            )));
        }
    };
    Ok((vrf, all_routes))
}

/// Tables in use: by a VRF, by a rule, or holding one of `routes`.
fn used_tables(nl: &Netlink, vrfs: &[Link], routes: &[Route]) -> Result<HashSet<u32>, CniError> {
    let mut used: HashSet<u32> = vrfs.iter().filter_map(|v| v.vrf_table).collect();
    used.extend(nl.all_rules().cni()?.iter().map(|r| r.table));
    used.extend(routes.iter().filter_map(|r| r.table));
    Ok(used)
}

/// The lowest table id ≥ 1 not in `used` and not one of the kernel's own.
fn first_free_table(used: &HashSet<u32>) -> Result<u32, CniError> {
    (1..u32::MAX)
        .find(|t| !used.contains(t) && !is_reserved_table(*t))
        .ok_or_else(|| CniError::internal("findFreeRoutingTableID: no free routing table"))
}

/// What enslaving loses and ADD puts back: the global IPv6 addresses (gone
/// when the device cycles, unless keep_addr_on_down) and the interface's
/// scope-universe routes of the main table (flushed with the device).
struct Saved {
    v6_addrs: Vec<IpNetwork>,
    routes: Vec<Route>,
}

impl Saved {
    /// `all_routes`: every route of the namespace, if already dumped.
    fn take(nl: &Netlink, link: &Link, all_routes: Option<Vec<Route>>) -> Result<Saved, CniError> {
        let v6_addrs = nl
            .addrs(link, Some(IpFamily::V6))
            .cni()?
            .into_iter()
            .filter(|a| a.scope == scope::UNIVERSE)
            .map(|a| a.address)
            .collect();
        let routes = match all_routes {
            Some(r) => r,
            None => nl.all_routes(Some(TABLE_MAIN)).cni()?,
        };
        let routes = routes
            .into_iter()
            .filter(|r| {
                r.table == Some(TABLE_MAIN)
                    && r.oif == Some(link.index)
                    && r.scope == Some(scope::UNIVERSE)
            })
            .collect();
        Ok(Saved { v6_addrs, routes })
    }

    /// The addresses the device lost, back (without DAD: each was on this
    /// very link a moment ago; DAD would keep it tentative for a second or
    /// more, and routes using it as source cannot be added meanwhile, which
    /// the reference covers by polling for up to 2.5 s), then the routes,
    /// into the VRF's table.
    fn restore(&self, nl: &Netlink, link: &Link, vrf: &Link, table: u32) -> Result<(), CniError> {
        let now: Vec<IpNetwork> = if self.v6_addrs.is_empty() {
            Vec::new()
        } else {
            nl.addrs(link, Some(IpFamily::V6))
                .cni()?
                .into_iter()
                .map(|a| a.address)
                .collect()
        };
        let no_dad = AddrFlags {
            no_dad: true,
            ..AddrFlags::default()
        };
        for a in self.v6_addrs.iter().filter(|a| !now.contains(a)) {
            match nl.add_addr_flags(link, *a, no_dad) {
                Ok(()) => {}
                Err(e) if e.is_exists() => {}
                Err(e) => {
                    return Err(CniError::internal(format!(
                        "could not restore address {a} to {} @ {}: {}",
                        link.name,
                        vrf.name,
                        e.reason()
                    )));
                }
            }
        }
        for r in &self.routes {
            let mut moved = r.clone();
            moved.table = Some(table);
            nl.replace_route(&moved).map_err(|e| {
                CniError::internal(format!("could not add route '{moved}': {}", e.reason()))
            })?;
        }
        Ok(())
    }
}

/// Frees the interface again and puts its addresses and main-table routes
/// back, as well as can be done.
fn undo_enslave(nl: &Netlink, link: &Link, saved: &Saved) {
    undo_log(nl.set_master(link, None));
    let now: Vec<IpNetwork> = nl
        .addrs(link, Some(IpFamily::V6))
        .map(|v| v.into_iter().map(|a| a.address).collect())
        .unwrap_or_default();
    for a in saved.v6_addrs.iter().filter(|a| !now.contains(a)) {
        let no_dad = AddrFlags {
            no_dad: true,
            ..AddrFlags::default()
        };
        undo_log(nl.add_addr_flags(link, *a, no_dad));
    }
    for r in &saved.routes {
        undo_log(nl.replace_route(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_table_skips_used_and_reserved() {
        let used: HashSet<u32> = [0, 1, 2, 4, 255, 254, 253].into_iter().collect();
        assert_eq!(first_free_table(&used).ok(), Some(3));
        let used: HashSet<u32> = (1..253).collect();
        assert_eq!(first_free_table(&used).ok(), Some(256));
    }
}
