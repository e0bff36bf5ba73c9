//! ADD: per address of the interface, a rule "from <address> lookup
//! <table>"; without `table`, also a free table holding the interface's
//! routes (and, with `addSourceHints`, the subnet routes back in main with
//! the address as their source). A failed ADD takes back what it did.

use crate::config::{Conf, Gateways};
use crate::{FIRST_TABLE, NO_PREV_RESULT, family_of, flush_table, host_net, ips_of, ns_path};
use cni_net::{IpFamily, Netlink, Route, Rule, TABLE_MAIN, scope};
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Output};
use ipnetwork::IpNetwork;

/// ADD.
pub fn add(args: &CmdArgs) -> CmdResult {
    let conf = Conf::parse(args)?;
    let result = args.required_prev_result(NO_PREV_RESULT)?;
    let ips = ips_of(&result, &args.ifname);
    if ips.is_empty() {
        return Err(CniError::internal(format!(
            "No IP addresses supplied on interface: {}",
            args.ifname
        )));
    }
    let ns = cni_plugin::netns::open_locked(ns_path(args)?)?;
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host().cni()?;
        let mut undo = Undo::default();
        let r = match conf.table {
            // The reference reads `gateways` and `addSourceHints` only
            // without `table`.
            Some(t) => rules_only(&nl, &ips, t, &mut undo),
            None => route_tables(&nl, &args.ifname, &result, &ips, &conf, &mut undo),
        };
        if r.is_err() {
            undo.run(&nl);
        }
        r
    })
    .cni()??;
    Ok(Output::Result(result))
}

/// What a failed ADD takes back: its rules, its tables' routes, and the
/// main-table routes it already removed.
#[derive(Default)]
struct Undo {
    rules: Vec<Rule>,
    tables: Vec<(IpFamily, u32)>,
    removed_from_main: Vec<Route>,
}

impl Undo {
    fn run(&self, nl: &Netlink) {
        for r in &self.rules {
            if let Err(e) = nl.del_rule(r) {
                log::error!("undoing a failed ADD: {e}");
            }
        }
        for &(family, t) in &self.tables {
            if let Err(e) = flush_table(nl, family, t) {
                log::error!("undoing a failed ADD: {e}");
            }
        }
        for r in &self.removed_from_main {
            if let Err(e) = nl.replace_route(r) {
                log::error!("undoing a failed ADD: {e}");
            }
        }
    }
}

/// `table` mode: only the rules; the routes are already in that table.
fn rules_only(
    nl: &Netlink,
    ips: &[IpNetwork],
    table: u32,
    undo: &mut Undo,
) -> Result<(), CniError> {
    for ip in ips {
        let rule = Rule::from_source(host_net(ip), table);
        nl.add_rule(&rule)
            .map_err(|e| CniError::internal(format!("failed to add rule: {e}")))?;
        undo.rules.push(rule);
    }
    Ok(())
}

/// The interface's routes in the main table, and the tables in use by a
/// rule or holding a route, in either family: one dump of every table per
/// family serves both (a dump of main alone as well cost two more round
/// trips, a tenth of what the namespace lock added to ADD).
fn main_routes_and_used_tables(nl: &Netlink, oif: u32) -> Result<(Vec<Route>, Vec<u32>), CniError> {
    let mut main_routes = Vec::new();
    let mut used = Vec::new();
    for family in [IpFamily::V4, IpFamily::V6] {
        used.extend(nl.rules(family).cni()?.iter().map(|r| r.table));
        for r in nl.routes_all_tables(family).cni()? {
            used.extend(r.table);
            if r.table == Some(TABLE_MAIN) && r.oif == Some(oif) {
                main_routes.push(r);
            }
        }
    }
    used.sort_unstable();
    used.dedup();
    Ok((main_routes, used))
}

fn next_free(used: &[u32], from: u32) -> Result<u32, CniError> {
    (from..u32::MAX)
        .find(|t| !used.contains(t) && !(253..=255).contains(t))
        .ok_or_else(|| CniError::internal("no free routing table"))
}

/// Does `route` belong with `ip` (the reference's test, but per family:
/// its source or gateway lies in the address's subnet, or it has neither)?
fn belongs_to(route: &Route, ip: &IpNetwork) -> bool {
    if IpFamily::of(&route.dst.ip()) != family_of(ip) {
        return false;
    }
    let within = |a: Option<std::net::IpAddr>| a.is_some_and(|a| ip.contains(a));
    within(route.src) || within(route.gateway) || (route.src.is_none() && route.gateway.is_none())
}

/// The default mode: per address, a free table with the interface's
/// routes of that family (and the default route through the gateway: the
/// family's of `gateways`, else the prevResult's), a rule pointing to it;
/// then those routes leave the main table (with `addSourceHints`, the
/// connected ones stay there with a source hint).
fn route_tables(
    nl: &Netlink,
    ifname: &str,
    result: &CniResult,
    ips: &[IpNetwork],
    conf: &Conf,
    undo: &mut Undo,
) -> Result<(), CniError> {
    let gateways: Gateways = conf.gateways()?;
    let link = nl.link_by_name(ifname).cni()?.ok_or_else(|| {
        CniError::internal(format!(
            "Cannot find network interface {ifname}: Link not found"
        ))
    })?;
    let (main_routes, mut used) = main_routes_and_used_tables(nl, link.index)?;
    let mut table = next_free(&used, FIRST_TABLE)?;
    let mut moved: Vec<Route> = Vec::new();
    for ip in ips {
        let family = family_of(ip);
        let rule = Rule::from_source(host_net(ip), table);
        nl.add_rule(&rule)
            .map_err(|e| CniError::internal(format!("Failed to add rule: {e}")))?;
        undo.rules.push(rule);
        undo.tables.push((family, table));
        used.push(table);
        let from_result = result
            .ips
            .iter()
            .find(|c| c.address == *ip)
            .and_then(|c| c.gateway);
        let default_via = |gw: std::net::IpAddr| {
            let mut r = Route::default_route(family).via(gw).dev(link.index);
            r.table = Some(table);
            nl.replace_route(&r).map_err(|e| {
                CniError::internal(format!("Failed to add default route to {gw}: {e}"))
            })
        };
        // The prevResult's gateway goes first, so that a default route
        // in main through the interface, copied next, takes its place (as
        // in the reference); one of `gateways` goes last and stays.
        let ours = gateways.of(family == IpFamily::V4);
        if let (None, Some(gw)) = (ours, from_result) {
            default_via(gw)?;
        }
        for r in main_routes.iter().filter(|r| belongs_to(r, ip)) {
            let mut copy = r.clone();
            copy.table = Some(table);
            copy.onlink = false;
            nl.replace_route(&copy)
                .map_err(|e| CniError::internal(format!("Failed to readd route: {e}")))?;
            if !moved.contains(r) {
                moved.push(r.clone());
            }
        }
        if let Some(gw) = ours {
            default_via(gw)?;
        }
        table = next_free(&used, table + 1)?;
    }
    if conf.add_source_hints {
        source_hints(nl, ips, link.index, &moved);
        return Ok(());
    }
    for r in moved {
        nl.del_route(&r)
            .map_err(|e| CniError::internal(format!("Failed to delete route: {e}")))?;
        undo.removed_from_main.push(r);
    }
    Ok(())
}

/// `addSourceHints`, as the reference does it once the tables are made:
/// per address, `<subnet> dev <if> scope link src <address>` replaces its
/// subnet's route in the main table; then the moved routes not of scope
/// link leave main (IPv6 routes all read back as scope universe, so every
/// moved IPv6 route goes, the subnet's hint route staying beside them at
/// the kernel's user metric). Failures are only logged, as the
/// reference's: the rules and tables are in place, and the main table
/// keeps at worst a route it had.
fn source_hints(nl: &Netlink, ips: &[IpNetwork], oif: u32, moved: &[Route]) {
    for ip in ips {
        let subnet = IpNetwork::new(ip.network(), ip.prefix()).unwrap_or(*ip);
        let mut r = Route::new(subnet).dev(oif);
        r.src = Some(ip.ip());
        r.scope = Some(scope::LINK);
        if let Err(e) = nl.replace_route(&r) {
            log::warn!("Failed to add subnet route to main table: {e}");
        }
    }
    for r in moved.iter().filter(|r| r.scope != Some(scope::LINK)) {
        if let Err(e) = nl.del_route(r) {
            log::warn!("Failed to delete route: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_tables_skip_used_and_reserved() {
        assert_eq!(next_free(&[100, 101, 103], 100).ok(), Some(102));
        assert_eq!(next_free(&[], 253).ok(), Some(256));
    }

    #[test]
    fn routes_belong_per_family() {
        let ip: IpNetwork = "10.126.1.2/24".parse().unwrap();
        let v6 = Route::new("fd26:126::/64".parse().unwrap());
        let connected = Route::new("10.126.1.0/24".parse().unwrap());
        let mut far = Route::new("10.9.0.0/16".parse().unwrap());
        far.gateway = Some("10.126.1.1".parse().unwrap());
        let mut other = Route::new("10.9.0.0/16".parse().unwrap());
        other.gateway = Some("10.127.1.1".parse().unwrap());
        assert!(!belongs_to(&v6, &ip));
        assert!(belongs_to(&connected, &ip));
        assert!(belongs_to(&far, &ip));
        assert!(!belongs_to(&other, &ip));
    }
}
