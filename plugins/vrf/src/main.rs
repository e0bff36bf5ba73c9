//! The CNI vrf plugin: puts the container's interface into a VRF (layer 3
//! master device) inside the container namespace, creating the VRF when it
//! does not exist yet. The interface keeps its addresses, and its routes
//! move into the VRF's table, as the reference (v1.9.1) moves them.
//!
//! See README.md for the keys and where this differs from the reference.

use cni_net::{AddrFlags, IpFamily, Link, NetNs, Netlink, Route, TABLE_MAIN, scope};
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Output, Plugin};
use ipnetwork::IpNetwork;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;
use std::process::ExitCode;

struct Vrf;

#[derive(Debug, Default, Deserialize)]
struct RawConf {
    #[serde(default)]
    vrfname: Option<String>,
    #[serde(default)]
    table: Option<u32>,
}

/// The plugin's keys, validated.
#[derive(Debug, PartialEq, Eq)]
struct Conf {
    vrfname: String,
    /// The table of a VRF made by this plugin; `None` = the first free one.
    table: Option<u32>,
}

impl Conf {
    fn parse(args: &CmdArgs) -> Result<Conf, CniError> {
        Conf::from_json(&args.stdin)
    }

    fn from_json(stdin: &[u8]) -> Result<Conf, CniError> {
        let c: RawConf = cni_skel::gojson::from_slice(stdin)
            .map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
        let vrfname = c.vrfname.unwrap_or_default();
        if vrfname.is_empty() {
            return Err(CniError::invalid_config(
                "configuration is expected to have a valid vrf name",
            ));
        }
        // What the kernel accepts as a device name (dev_valid_name).
        if vrfname.len() > cni_net::MAX_IFNAME_LEN
            || vrfname == "."
            || vrfname == ".."
            || vrfname
                .chars()
                .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            return Err(CniError::invalid_config(format!(
                "vrfname {vrfname:?} is not a valid interface name"
            )));
        }
        let table = match c.table {
            // 0 (unspec) = pick one, as in the reference.
            None | Some(0) => None,
            // default, main, local: a VRF there would capture the
            // namespace's own routing.
            Some(t) if is_reserved_table(t) => {
                return Err(CniError::invalid_config(format!(
                    "table {t} is one of the kernel's own (253 default, 254 main, 255 local)"
                )));
            }
            Some(t) => Some(t),
        };
        Ok(Conf { vrfname, table })
    }
}

fn is_reserved_table(t: u32) -> bool {
    (253..=255).contains(&t)
}

impl Plugin for Vrf {
    fn about(&self) -> String {
        cni_skel::about("vrf")
    }

    /// From 0.3.1, as the reference.
    fn supported_versions(&self) -> Vec<String> {
        cni_skel::version::since("0.3.1")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        add(args)
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        del(args)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        check(args)
    }

    /// The VRF lives in the container's namespace and goes with it: there
    /// is nothing on the host to collect.
    fn gc(&self, args: &CmdArgs) -> CmdResult {
        Conf::parse(args)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        Conf::parse(args)?;
        Ok(Output::Nothing)
    }
}

fn prev_result(args: &CmdArgs) -> Result<CniResult, CniError> {
    args.prev_result()?
        .ok_or_else(|| CniError::internal("missing prevResult from earlier plugin"))
}

/// The container namespace, locked for the rest of the command (its
/// `cni_lock::netns` lock): a concurrent DEL must not delete a VRF that an
/// ADD is about to use.
/// `None` when CNI_NETNS is empty or gone.
fn open_netns(args: &CmdArgs) -> Result<Option<NetNs>, CniError> {
    let Some(path) = args.netns.as_deref().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(None);
    };
    NetNs::open_locked_if_present(path)
}

fn must_open_netns(args: &CmdArgs) -> Result<NetNs, CniError> {
    open_netns(args)?.ok_or_else(|| {
        let path = args.netns.as_deref().unwrap_or(Path::new(""));
        CniError::internal(format!("failed to open netns {:?}", path.display()))
    })
}

/// The link called `name` if it is a VRF; another kind is an error.
fn find_vrf(nl: &Netlink, name: &str) -> Result<Option<Link>, CniError> {
    match nl.link_by_name(name)? {
        Some(l) if l.kind != "vrf" => {
            Err(CniError::internal(format!("Netlink {name} is not a VRF")))
        }
        other => Ok(other),
    }
}

fn add(args: &CmdArgs) -> CmdResult {
    let conf = Conf::parse(args)?;
    let result = prev_result(args)?;
    let ns = must_open_netns(args)?;
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host()?;
        add_in_ns(&nl, &conf, &args.ifname)
    })?
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
        .link_by_name(ifname)?
        .ok_or_else(|| CniError::internal(format!("could not get link by name {ifname}")))?;
    if let Some(master) = link.master {
        let name = nl
            .link_by_index(master)?
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
    let vrfs = nl.vrfs()?;
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
            let routes = nl.all_routes(None)?;
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
    used.extend(nl.all_rules()?.iter().map(|r| r.table));
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
            .addrs(link, Some(IpFamily::V6))?
            .into_iter()
            .filter(|a| a.scope == scope::UNIVERSE)
            .map(|a| a.address)
            .collect();
        let routes = match all_routes {
            Some(r) => r,
            None => nl.all_routes(Some(TABLE_MAIN))?,
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
            nl.addrs(link, Some(IpFamily::V6))?
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

/// DEL: frees the interface from the VRF, and deletes the VRF when nothing
/// else is enslaved to it. A gone netns, VRF or interface is success.
fn del(args: &CmdArgs) -> CmdResult {
    let conf = Conf::parse(args)?;
    let Some(ns) = open_netns(args)? else {
        return Ok(Output::Nothing);
    };
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host()?;
        let Some(vrf) = nl.link_by_name(&conf.vrfname)? else {
            return Ok(());
        };
        if vrf.kind != "vrf" {
            // Not ours: nothing of this plugin to undo.
            log::warn!("{} is not a VRF; nothing to undo", conf.vrfname);
            return Ok(());
        }
        if let Some(link) = nl.link_by_name(&args.ifname)?
            && link.master == Some(vrf.index)
        {
            match nl.set_master(&link, None) {
                Ok(()) => {}
                // Gone meanwhile.
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    return Err(CniError::internal(format!(
                        "resetMaster: could not reset master of {}: {}",
                        args.ifname,
                        e.reason()
                    )));
                }
            }
        }
        if nl.links_with_master(vrf.index)?.is_empty() {
            nl.del_link(&vrf)?;
        }
        Ok(())
    })??;
    Ok(Output::Nothing)
}

/// CHECK: the VRF exists (with the configured table) and is up, and the
/// interface is enslaved to it.
fn check(args: &CmdArgs) -> CmdResult {
    let conf = Conf::parse(args)?;
    prev_result(args)?;
    let ns = must_open_netns(args)?;
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host()?;
        let vrf = find_vrf(&nl, &conf.vrfname)?
            .ok_or_else(|| CniError::internal(format!("VRF {}: Link not found", conf.vrfname)))?;
        if let Some(want) = conf.table
            && vrf.vrf_table != Some(want)
        {
            return Err(CniError::internal(format!(
                "VRF {} has routing table {}, not {want}",
                conf.vrfname,
                vrf.vrf_table.unwrap_or(0)
            )));
        }
        if !vrf.up {
            return Err(CniError::internal(format!("VRF {} is down", conf.vrfname)));
        }
        let link = nl.link_by_name(&args.ifname)?;
        if link.is_none_or(|l| l.master != Some(vrf.index)) {
            return Err(CniError::internal(format!(
                "failed to find {} associated to vrf {}",
                args.ifname, conf.vrfname
            )));
        }
        Ok(())
    })??;
    Ok(Output::Nothing)
}

fn main() -> ExitCode {
    cni_skel::run(&Vrf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_keys() {
        let c = Conf::from_json(br#"{"vrfname":"red","table":1001}"#).unwrap();
        assert_eq!(
            c,
            Conf {
                vrfname: "red".into(),
                table: Some(1001)
            }
        );
        // Go's decoder: keys match ignoring case; 0 means "pick one".
        let c = Conf::from_json(br#"{"VRFName":"red","Table":0}"#).unwrap();
        assert_eq!(c.table, None);
        for bad in [
            r#"{}"#,
            r#"{"vrfname":""}"#,
            r#"{"vrfname":"a-name-far-too-long"}"#,
            r#"{"vrfname":"a/b"}"#,
            r#"{"vrfname":"a b"}"#,
            r#"{"vrfname":".."}"#,
            r#"{"vrfname":"red","table":254}"#,
            r#"{"vrfname":"red","table":-1}"#,
            r#"{"vrfname":"red","table":4294967296}"#,
            r#"{"vrfname":"red","table":"100"}"#,
            r#"{"vrfname":7}"#,
            r#"[]"#,
        ] {
            assert!(Conf::from_json(bad.as_bytes()).is_err(), "{bad}");
        }
        let e = Conf::from_json(b"{}").unwrap_err();
        assert_eq!(e.msg, "configuration is expected to have a valid vrf name");
    }

    #[test]
    fn free_table_skips_used_and_reserved() {
        let used: HashSet<u32> = [0, 1, 2, 4, 255, 254, 253].into_iter().collect();
        assert_eq!(first_free_table(&used).ok(), Some(3));
        let used: HashSet<u32> = (1..253).collect();
        assert_eq!(first_free_table(&used).ok(), Some(256));
    }
}
