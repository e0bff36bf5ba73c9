//! The sbr plugin, exec'd as a runtime does, against a container namespace
//! (`sbc…`) whose `eth0` is a veth to a peer namespace (`sbp…`, the
//! "network"). Checks the rules and tables in the kernel (compared with
//! what the Go reference v1.1.1 makes in an identical namespace), DEL
//! removing rules and emptying tables, DEL with the netns gone (no file
//! created), `table` mode, a table that holds routes without a rule being
//! skipped, CHECK, bad input changing nothing, and real traffic through
//! a second interface; HEAD's `gateways` and `addSourceHints` (the `pa_`
//! tests, `pasc…`/`pasp…`, 10.160.0.0/16). Namespaces go on drop, also
//! when a test fails.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::chain_util::ChainInHost;
use rcni_tests::{Invocation, Netns, PluginOutput, bin, go_bin, skip_unless_root, unique};
use serde_json::{Value, json};
use std::path::Path;

/// A container with `eth0` (10.126.N.2/24, fd26:126::N:2/112 style
/// addresses) wired to a peer namespace, a default route and a static
/// route through the peer, as a main plugin leaves it.
struct Ctr {
    ns: Netns,
    peer: Netns,
    subnet: u8,
    /// The first two octets of the IPv4 subnets ("10.126").
    v4net: &'static str,
    /// The first 32 bits of the IPv6 subnets ("fd26:126").
    v6net: &'static str,
}

impl Ctr {
    fn new(subnet: u8) -> Ctr {
        let c = Ctr::bare(("sbc", "sbp"), subnet, "10.126", "fd26:126");
        c.main_routes();
        c
    }

    /// The `pa` tests' container (10.160.N.0/24, fd16:160:0:N::/64),
    /// with or without the main plugin's routes in main.
    fn pa(subnet: u8, routes: bool) -> Ctr {
        let c = Ctr::bare(("pasc", "pasp"), subnet, "10.160", "fd16:160");
        if routes {
            c.main_routes();
        }
        c
    }

    /// Only the wired `eth0`: its connected routes, nothing else.
    fn bare(tags: (&str, &str), subnet: u8, v4net: &'static str, v6net: &'static str) -> Ctr {
        let ns = Netns::new(tags.0);
        let peer = Netns::new(tags.1);
        let c = Ctr {
            ns,
            peer,
            subnet,
            v4net,
            v6net,
        };
        c.wire("eth0");
        c
    }

    /// A default route and a static route through the peer, both families.
    fn main_routes(&self) {
        let far = format!("{}.250.0/24", self.v4net);
        self.ns
            .exec_ok("ip", &["route", "add", "default", "via", &self.v4(1)]);
        self.ns
            .exec_ok("ip", &["route", "add", &far, "via", &self.v4(1)]);
        self.ns
            .exec_ok("ip", &["-6", "route", "add", "default", "via", &self.v6(1)]);
    }

    /// A veth `ifname` in the container to a peer `p<ifname>`, with the
    /// container at .2 and the peer at .1 of `subnet`.
    fn wire(&self, ifname: &str) {
        let at = |host: u8| {
            [
                format!("{}/24", self.v4(host)),
                format!("{}/64", self.v6(host)),
            ]
        };
        self.ns
            .wire_to(ifname, &at(2), &self.peer, &format!("p{ifname}"), &at(1));
        self.ns.exec_ok("ip", &["link", "set", "lo", "up"]);
    }

    fn v4(&self, host: u8) -> String {
        format!("{}.{}.{host}", self.v4net, self.subnet)
    }

    fn v6(&self, host: u8) -> String {
        format!("{}:0:{:x}::{host}", self.v6net, self.subnet)
    }

    fn conf(&self, version: &str, extra: Value) -> Value {
        let mut c = json!({
            "cniVersion": version,
            "name": "sbrnet",
            "type": "sbr",
            "prevResult": {
                "cniVersion": version,
                "interfaces": [
                    {"name": "veth0", "mac": "aa:aa:aa:aa:aa:01"},
                    {"name": "eth0", "mac": "aa:aa:aa:aa:aa:02", "sandbox": self.ns.path().display().to_string()},
                ],
                "ips": [
                    {"interface": 1, "address": format!("{}/24", self.v4(2)), "gateway": self.v4(1)},
                    {"interface": 1, "address": format!("{}/64", self.v6(2)), "gateway": self.v6(1)},
                ],
            },
        });
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            c[k] = v;
        }
        c
    }

    fn run_with(&self, plugin: &Path, cmd: &str, conf: &Value) -> PluginOutput {
        Invocation::new(plugin, cmd)
            .attach("sbrcid", &self.ns, "eth0")
            .config(conf)
            .run()
    }

    fn run(&self, cmd: &str, conf: &Value) -> PluginOutput {
        self.run_with(&bin("sbr"), cmd, conf)
    }

    /// `ip rule` and `ip route show table all` minus the local table, as
    /// text lines (stable across runs: no link indexes).
    fn state(&self) -> Vec<String> {
        let mut out = Vec::new();
        for fam in ["-4", "-6"] {
            for l in self.ns.exec_ok("ip", &[fam, "rule"]).lines() {
                out.push(format!("{fam} rule {}", l.trim()));
            }
            for l in self
                .ns
                .exec_ok("ip", &[fam, "route", "show", "table", "all"])
                .lines()
            {
                if !l.contains("table local")
                    && !l.starts_with("local ")
                    && !l.starts_with("multicast")
                {
                    out.push(format!("{fam} route {}", l.trim()));
                }
            }
        }
        out
    }
}

#[test]
fn add_moves_routes_per_address_like_go() {
    if skip_unless_root("add_moves_routes_per_address_like_go") {
        return;
    }
    let ours = Ctr::new(1);
    let out = ours.run("ADD", &ours.conf("1.0.0", json!({}))).ok();
    assert_eq!(
        out["ips"].as_array().unwrap().len(),
        2,
        "prevResult passed on: {out}"
    );
    let rules4 = ours.ns.exec_ok("ip", &["-4", "rule"]);
    assert!(
        rules4.contains(&format!("from {} lookup 100", ours.v4(2))),
        "{rules4}"
    );
    let rules6 = ours.ns.exec_ok("ip", &["-6", "rule"]);
    assert!(
        rules6.contains(&format!("from {} lookup 101", ours.v6(2))),
        "{rules6}"
    );
    let t100 = ours.ns.routes("-4", "100");
    assert!(
        t100.iter()
            .any(|r| r.starts_with(&format!("default via {} dev eth0", ours.v4(1)))),
        "{t100:?}"
    );
    assert!(
        t100.iter().any(|r| r.starts_with("10.126.1.0/24 dev eth0")),
        "{t100:?}"
    );
    assert!(
        t100.iter().any(|r| r.starts_with("10.126.250.0/24 via")),
        "{t100:?}"
    );
    // The reference's bug: v6 connected routes in the v4 table. Not ours.
    assert!(ours.ns.routes("-6", "100").is_empty());
    let t101 = ours.ns.routes("-6", "101");
    assert!(
        t101.iter()
            .any(|r| r.starts_with("fd26:126:0:1::/64 dev eth0")),
        "{t101:?}"
    );
    assert!(
        t101.iter().any(|r| r.starts_with("fe80::/64 dev eth0")),
        "{t101:?}"
    );
    assert!(
        t101.iter()
            .any(|r| r.starts_with("default via fd26:126:0:1::1 dev eth0")),
        "{t101:?}"
    );
    // Main no longer routes through eth0.
    assert!(
        ours.ns.routes("-4", "main").is_empty(),
        "{:?}",
        ours.ns.routes("-4", "main")
    );
    assert!(
        ours.ns.routes("-6", "main").is_empty(),
        "{:?}",
        ours.ns.routes("-6", "main")
    );
    ours.run("CHECK", &ours.conf("1.0.0", json!({}))).ok();

    // Go v1.1.1 in an identical namespace: the same rules, the same v4
    // table and the same v6 table (Go also copies the v6 routes into 100).
    if let Some(go) = go_bin("sbr") {
        let theirs = Ctr::new(1);
        theirs
            .run_with(&go, "ADD", &theirs.conf("1.0.0", json!({})))
            .ok();
        assert_eq!(
            ours.ns.exec_ok("ip", &["-4", "rule"]),
            theirs.ns.exec_ok("ip", &["-4", "rule"])
        );
        assert_eq!(
            ours.ns.exec_ok("ip", &["-6", "rule"]),
            theirs.ns.exec_ok("ip", &["-6", "rule"])
        );
        assert_eq!(ours.ns.routes("-4", "100"), theirs.ns.routes("-4", "100"));
        assert_eq!(ours.ns.routes("-6", "101"), theirs.ns.routes("-6", "101"));
        assert!(
            !theirs.ns.routes("-6", "100").is_empty(),
            "the reference's bug went away?"
        );
    }

    // DEL: no rule, no table left; twice is fine.
    let before_del = ours.state();
    ours.run("DEL", &ours.conf("1.0.0", json!({}))).ok();
    let after = ours.state();
    assert!(
        !after
            .iter()
            .any(|l| l.contains("lookup 10") || l.contains("table 10")),
        "{after:?} (was {before_del:?})"
    );
    ours.run("DEL", &ours.conf("1.0.0", json!({}))).ok();
    // CHECK now fails: the rules are gone.
    ours.run("CHECK", &ours.conf("1.0.0", json!({}))).err();
}

#[test]
fn skips_tables_that_hold_routes() {
    if skip_unless_root("skips_tables_that_hold_routes") {
        return;
    }
    let c = Ctr::new(2);
    c.ns.exec_ok(
        "ip",
        &[
            "route",
            "add",
            "10.126.77.0/24",
            "dev",
            "eth0",
            "table",
            "100",
        ],
    );
    c.ns.exec_ok(
        "ip",
        &["rule", "add", "from", "10.126.78.1", "table", "102"],
    );
    c.run("ADD", &c.conf("0.4.0", json!({}))).ok();
    let rules = c.ns.exec_ok("ip", &["-4", "rule"]);
    assert!(rules.contains("from 10.126.2.2 lookup 101"), "{rules}");
    let rules6 = c.ns.exec_ok("ip", &["-6", "rule"]);
    assert!(
        rules6.contains("from fd26:126:0:2::2 lookup 103"),
        "{rules6}"
    );
    // Untouched by ADD and DEL: the foreign table and rule.
    c.run("DEL", &c.conf("0.4.0", json!({}))).ok();
    assert_eq!(
        c.ns.routes("-4", "100"),
        vec!["10.126.77.0/24 dev eth0 scope link".to_string()]
    );
    assert!(
        c.ns.exec_ok("ip", &["-4", "rule"])
            .contains("from 10.126.78.1 lookup 102")
    );
    assert!(c.ns.routes("-4", "101").is_empty() && c.ns.routes("-6", "103").is_empty());
}

#[test]
fn table_mode_adds_only_rules() {
    if skip_unless_root("table_mode_adds_only_rules") {
        return;
    }
    let c = Ctr::new(3);
    let before = c.ns.routes("-4", "main");
    let conf = c.conf("1.0.0", json!({"table": 500}));
    c.run("ADD", &conf).ok();
    assert_eq!(c.ns.routes("-4", "main"), before);
    assert!(
        c.ns.exec_ok("ip", &["-4", "rule"])
            .contains("from 10.126.3.2 lookup 500")
    );
    assert!(
        c.ns.exec_ok("ip", &["-6", "rule"])
            .contains("from fd26:126:0:3::2 lookup 500")
    );
    c.run("DEL", &conf).ok();
    assert!(!c.ns.exec_ok("ip", &["-4", "rule"]).contains("lookup 500"));
    assert!(!c.ns.exec_ok("ip", &["-6", "rule"]).contains("lookup 500"));
    assert_eq!(c.ns.routes("-4", "main"), before);
}

#[test]
fn del_with_netns_gone_succeeds_and_creates_nothing() {
    if skip_unless_root("del_with_netns_gone_succeeds_and_creates_nothing") {
        return;
    }
    let c = Ctr::new(4);
    let gone = format!("/run/netns/{}", unique("sbgone"));
    let out = Invocation::new(bin("sbr"), "DEL")
        .attach("sbrcid", &c.ns, "eth0")
        .env("CNI_NETNS", &gone)
        .config(&c.conf("1.0.0", json!({})))
        .run();
    out.ok();
    assert!(!Path::new(&gone).exists(), "DEL created {gone}");
    let empty = Invocation::new(bin("sbr"), "DEL")
        .attach("sbrcid", &c.ns, "eth0")
        .env("CNI_NETNS", "")
        .config(&c.conf("1.0.0", json!({})))
        .run();
    empty.ok();
}

#[test]
fn bad_input_changes_nothing() {
    if skip_unless_root("bad_input_changes_nothing") {
        return;
    }
    let c = Ctr::new(5);
    let before = c.state();
    let mut no_prev = c.conf("1.0.0", json!({}));
    no_prev.as_object_mut().unwrap().remove("prevResult");
    let e = c.run("ADD", &no_prev).err();
    assert_eq!(e["msg"], "This plugin must be called as chained plugin");
    let missing = Invocation::new(bin("sbr"), "ADD")
        .attach("sbrcid", &c.ns, "net9")
        .config(&c.conf("1.0.0", json!({})))
        .run();
    // The prevResult's IPs name eth0, not net9: none are net9's.
    missing.err();
    let mut bad_if = c.conf("1.0.0", json!({}));
    bad_if["prevResult"]["interfaces"][1]["name"] = json!("net9");
    let e = Invocation::new(bin("sbr"), "ADD")
        .attach("sbrcid", &c.ns, "net9")
        .config(&bad_if)
        .run()
        .err();
    assert!(e["msg"].as_str().unwrap().contains("net9"), "{e}");
    c.run("ADD", &c.conf("1.0.0", json!({"table": 4294967296u64})))
        .err();
    c.run("ADD", &c.conf("1.0.0", json!({"table": "x"}))).err();
    assert_eq!(c.state(), before);
}

/// A two-homed container: requests to net1's address from a far network
/// are answered through net1 (the main default route points to eth0).
#[test]
fn replies_leave_through_the_incoming_interface() {
    if skip_unless_root("replies_leave_through_the_incoming_interface") {
        return;
    }
    let c = Ctr::new(6);
    c.ns.wire_to(
        "net1",
        &["10.126.7.2/24".into()],
        &c.peer,
        "pnet1",
        &["10.126.7.1/24".into()],
    );
    // The far network lives on the peer's loopback.
    c.peer.exec_ok("ip", &["link", "set", "lo", "up"]);
    c.peer
        .exec_ok("ip", &["addr", "add", "10.126.8.1/32", "dev", "lo"]);
    let far = "10.126.8.1";
    let before =
        c.ns.exec_ok("ip", &["route", "get", far, "from", "10.126.7.2"]);
    assert!(before.contains("dev eth0"), "{before}");
    let conf = json!({
        "cniVersion": "1.0.0", "name": "sbrnet", "type": "sbr",
        "prevResult": {
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "net1", "sandbox": c.ns.path().display().to_string()}],
            "ips": [{"interface": 0, "address": "10.126.7.2/24", "gateway": "10.126.7.1"}],
        },
    });
    Invocation::new(bin("sbr"), "ADD")
        .attach("sbrcid", &c.ns, "net1")
        .config(&conf)
        .run()
        .ok();
    let after =
        c.ns.exec_ok("ip", &["route", "get", far, "from", "10.126.7.2"]);
    assert!(after.contains("dev net1"), "{after}");
    // Traffic: the peer pings net1's address from the far network. With
    // rp_filter strict on the peer's net1 side, a reply through eth0
    // would not count; it arrives through pnet1.
    c.peer
        .exec_ok("sysctl", &["-qw", "net.ipv4.conf.all.rp_filter=1"]);
    c.peer
        .exec_ok("ping", &["-c1", "-W5", "-I", far, "10.126.7.2"]);
    // eth0 stays in main, untouched.
    assert!(
        c.ns.exec_ok("ip", &["route", "show", "default"])
            .contains("dev eth0")
    );
    Invocation::new(bin("sbr"), "DEL")
        .attach("sbrcid", &c.ns, "net1")
        .config(&conf)
        .run()
        .ok();
}

/// A libcni CHECK of [bridge, sbr] passes: bridge's CHECK finds its
/// gateway where sbr moved it (the reference's always fails here). Run
/// through cni-runtime inside a private "host" namespace.
#[test]
fn chain_check_after_bridge() {
    if skip_unless_root("chain_check_after_bridge") {
        return;
    }
    let chain = ChainInHost::new("sb", "sbrchain", |dir| {
        json!([
            {"type": "bridge", "bridge": unique("sbbr"), "isGateway": true,
             "ipam": {"type": "host-local", "subnet": "10.126.20.0/24",
                      "dataDir": dir.join("ipam").display().to_string(),
                      "routes": [{"dst": "10.126.21.0/24"}]}},
            {"type": "sbr"},
        ])
    });
    let ctr = &chain.container;
    chain.add().unwrap();
    let main = ctr.exec_ok("ip", &["-4", "route", "show", "table", "main"]);
    assert!(main.trim().is_empty(), "sbr left routes in main: {main}");
    let t100 = ctr.exec_ok("ip", &["-4", "route", "show", "table", "100"]);
    assert!(t100.contains("10.126.21.0/24 via 10.126.20.1"), "{t100}");
    chain.check().unwrap();
    // A moved route that goes missing is still caught.
    ctr.exec_ok("ip", &["route", "del", "10.126.21.0/24", "table", "100"]);
    assert!(chain.check().is_err());
    chain.del().unwrap();
    chain.del().unwrap();
}

/// The `pa` tests' config: the prevResult's addresses of `c`, with their
/// gateway only when `gw`, and `extra` keys.
fn pa_conf(c: &Ctr, gw: bool, extra: Value) -> Value {
    let mut conf = c.conf("1.0.0", extra);
    if !gw {
        for ip in conf["prevResult"]["ips"].as_array_mut().unwrap() {
            ip.as_object_mut().unwrap().remove("gateway");
        }
    }
    conf
}

/// HEAD's `gateways` (PR 1217): a DHCP-like network whose result has no
/// gateway (and nothing in main but the connected routes) gets its default
/// routes in the tables from `gateways`, one per family; without it, none.
#[test]
fn pa_gateways_give_a_gatewayless_network_its_default_routes() {
    if skip_unless_root("pa_gateways_give_a_gatewayless_network_its_default_routes") {
        return;
    }
    let default_in = |c: &Ctr, fam: &str, table: &str| {
        c.ns.routes(fam, table)
            .into_iter()
            .filter(|r| r.starts_with("default"))
            .collect::<Vec<_>>()
    };
    // The symptom users reported: no default route in the table.
    let without = Ctr::pa(5, false);
    without
        .run("ADD", &pa_conf(&without, false, json!({})))
        .ok();
    assert!(default_in(&without, "-4", "100").is_empty());
    assert!(default_in(&without, "-6", "101").is_empty());

    let c = Ctr::pa(1, false);
    let conf = pa_conf(&c, false, json!({"gateways": [c.v6(1), c.v4(1)]}));
    c.run("ADD", &conf).ok();
    let rules = c.ns.exec_ok("ip", &["-4", "rule"]);
    assert!(rules.contains("from 10.160.1.2 lookup 100"), "{rules}");
    assert_eq!(
        default_in(&c, "-4", "100"),
        ["default via 10.160.1.1 dev eth0"]
    );
    assert!(
        c.ns.routes("-4", "100")
            .iter()
            .any(|r| r.starts_with("10.160.1.0/24 dev eth0")),
        "{:?}",
        c.ns.routes("-4", "100")
    );
    let d6 = default_in(&c, "-6", "101");
    assert!(
        d6.len() == 1 && d6[0].starts_with("default via fd16:160:0:1::1 dev eth0"),
        "{d6:?}"
    );
    // The route a packet from the address takes: the table's default.
    let via = c.ns.exec_ok(
        "ip",
        &["route", "get", "10.160.250.5", "from", "10.160.1.2"],
    );
    assert!(via.contains("via 10.160.1.1 dev eth0 table 100"), "{via}");
    assert!(c.ns.routes("-4", "main").is_empty());
    c.run("CHECK", &conf).ok();
    c.run("DEL", &conf).ok();
    assert!(c.ns.routes("-4", "100").is_empty() && c.ns.routes("-6", "101").is_empty());
    let rules = c.ns.exec_ok("ip", &["-4", "rule"]);
    assert!(!rules.contains("lookup 100"), "{rules}");
}

/// `gateways` wins over the prevResult's gateway, and over the main
/// table's default route through the interface that ADD copies into the
/// table; the other family keeps the prevResult's.
#[test]
fn pa_gateways_override_the_prev_result() {
    if skip_unless_root("pa_gateways_override_the_prev_result") {
        return;
    }
    let c = Ctr::pa(2, true);
    c.run("ADD", &pa_conf(&c, true, json!({"gateways": [c.v4(254)]})))
        .ok();
    let t100 = c.ns.routes("-4", "100");
    let defaults: Vec<_> = t100.iter().filter(|r| r.starts_with("default")).collect();
    assert_eq!(defaults, ["default via 10.160.2.254 dev eth0"], "{t100:?}");
    // The static route through the prevResult's gateway still moved.
    assert!(
        t100.iter()
            .any(|r| r.starts_with("10.160.250.0/24 via 10.160.2.1")),
        "{t100:?}"
    );
    let t101 = c.ns.routes("-6", "101");
    assert!(
        t101.iter()
            .any(|r| r.starts_with("default via fd16:160:0:2::1 dev eth0")),
        "{t101:?}"
    );
}

/// HEAD's `addSourceHints`: the tables and rules as without it, and the
/// subnet routes back in main with the address as source, so traffic
/// that picks no source still reaches the subnet (and gets the address),
/// while the default and static routes leave main.
#[test]
fn pa_source_hints_keep_subnet_routes_in_main() {
    if skip_unless_root("pa_source_hints_keep_subnet_routes_in_main") {
        return;
    }
    let c = Ctr::pa(3, true);
    let conf = pa_conf(&c, true, json!({"addSourceHints": true}));
    c.run("ADD", &conf).ok();
    assert_eq!(
        c.ns.routes("-4", "main"),
        ["10.160.3.0/24 dev eth0 scope link src 10.160.3.2"]
    );
    let main6 = c.ns.routes("-6", "main");
    assert!(
        main6.len() == 1 && main6[0].starts_with("fd16:160:0:3::/64 dev eth0 src fd16:160:0:3::2"),
        "{main6:?}"
    );
    let t100 = c.ns.routes("-4", "100");
    for want in [
        "default via 10.160.3.1 dev eth0",
        "10.160.3.0/24 dev eth0",
        "10.160.250.0/24 via 10.160.3.1",
    ] {
        assert!(t100.iter().any(|r| r.starts_with(want)), "{want}: {t100:?}");
    }
    let rules = c.ns.exec_ok("ip", &["-4", "rule"]);
    assert!(rules.contains("from 10.160.3.2 lookup 100"), "{rules}");
    // No source chosen: main, the hint's source.
    let near = c.ns.exec_ok("ip", &["route", "get", "10.160.3.9"]);
    assert!(near.contains("dev eth0 src 10.160.3.2"), "{near}");
    let far = c.ns.exec("ip", &["route", "get", "10.160.250.5"]);
    assert!(!far.status.success(), "main still routes far away");
    let far = c.ns.exec_ok(
        "ip",
        &["route", "get", "10.160.250.5", "from", "10.160.3.2"],
    );
    assert!(far.contains("via 10.160.3.1 dev eth0 table 100"), "{far}");
    c.run("CHECK", &conf).ok();
    c.run("DEL", &conf).ok();
    assert!(c.ns.routes("-4", "100").is_empty());
}

/// What the reference refuses in `gateways`, refused with its texts,
/// changing nothing; DEL of such a config succeeds, and `table` mode
/// ignores `gateways` (the reference reads it only without `table`).
#[test]
fn pa_bad_gateways_change_nothing() {
    if skip_unless_root("pa_bad_gateways_change_nothing") {
        return;
    }
    let c = Ctr::pa(4, true);
    let before = c.state();
    for (gws, msg) in [
        (
            json!(["10.160.4.1", "fd16:160:0:4::1", "10.160.4.9"]),
            "gateways list cannot contain more than 2 entries (one IPv4, one IPv6)",
        ),
        (
            json!(["10.160.4.1", "10.160.4.254"]),
            "gateways list contains multiple IPv4 addresses: 10.160.4.1 and 10.160.4.254",
        ),
        (
            json!(["fd16:160:0:4::1", "fd16:160:0:4::fe"]),
            "gateways list contains multiple IPv6 addresses: fd16:160:0:4::1 and fd16:160:0:4::fe",
        ),
        (
            json!(["10.160.4.1/24"]),
            "invalid static gateway IP address: 10.160.4.1/24",
        ),
    ] {
        let conf = pa_conf(&c, true, json!({"gateways": gws}));
        let e = c.run("ADD", &conf).err();
        assert_eq!(e["msg"], msg, "{gws}");
        assert_eq!(e["code"], 7, "{gws}");
        assert_eq!(c.state(), before, "{gws}");
        c.run("DEL", &conf).ok();
    }
    let e = c
        .run("ADD", &pa_conf(&c, true, json!({"gateways": "10.160.4.1"})))
        .err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .starts_with("failed to parse network configuration"),
        "{e}"
    );
    assert_eq!(c.state(), before);
    let table = pa_conf(&c, true, json!({"table": 600, "gateways": ["x", "y", "z"]}));
    c.run("ADD", &table).ok();
    let rules = c.ns.exec_ok("ip", &["-4", "rule"]);
    assert!(rules.contains("from 10.160.4.2 lookup 600"), "{rules}");
    c.run("DEL", &table).ok();
    assert_eq!(c.state(), before);
}
