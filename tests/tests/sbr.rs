//! The sbr plugin, exec'd as a runtime does, against a container namespace
//! (`sbc…`) whose `eth0` is a veth to a peer namespace (`sbp…`, the
//! "network"). Checks the rules and tables in the kernel (compared with
//! what the Go reference v1.1.1 makes in an identical namespace), DEL
//! removing rules and emptying tables, DEL with the netns gone (no file
//! created), `table` mode, a table that holds routes without a rule being
//! skipped, CHECK, bad input changing nothing, and real traffic through
//! a second interface. Namespaces go on drop, also when a test fails.

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
}

impl Ctr {
    fn new(subnet: u8) -> Ctr {
        let ns = Netns::new("sbc");
        let peer = Netns::new("sbp");
        let c = Ctr { ns, peer, subnet };
        c.wire("eth0");
        c.ns.exec_ok("ip", &["route", "add", "default", "via", &c.v4(1)]);
        c.ns.exec_ok("ip", &["route", "add", "10.126.250.0/24", "via", &c.v4(1)]);
        c.ns.exec_ok("ip", &["-6", "route", "add", "default", "via", &c.v6(1)]);
        c
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
        format!("10.126.{}.{host}", self.subnet)
    }

    fn v6(&self, host: u8) -> String {
        format!("fd26:126:0:{:x}::{host}", self.subnet)
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
    c.run("ADD", &c.conf("1.0.0", json!({"table": 254}))).err();
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
