//! Configs the reference accepts that rcni used to refuse (issue 28, "as
//! tolerant as the reference"), each run through ours and Go's
//! (/usr/lib/cni, Debian's v1.1.1, installed by scripts/test-deps) on
//! identical fresh namespaces, asserting the same outcome: success or
//! failure, and the kernel state that matters. Tags `par…`, subnets
//! 10.162.N.0/24 and fd62:N::/64.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::host_local_util::DataDir;
use rcni_tests::{Invocation, Netns, PluginOutput, bin, go_bin, skip_unless_root};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// One side's run: whether ADD succeeded, what `look` saw after it,
/// whether CHECK then succeeded (when asked), and what `look` saw after
/// DEL.
#[derive(Debug, PartialEq)]
struct Outcome {
    ok: bool,
    state: String,
    check: Option<bool>,
    after_del: String,
}

/// A private host namespace and a container namespace.
struct Pair {
    host: Netns,
    cont: Netns,
}

impl Pair {
    fn new() -> Pair {
        let host = Netns::new("parh");
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        Pair {
            host,
            cont: Netns::new("parc"),
        }
    }

    fn run(&self, plugin: &Path, cmd: &str, conf: &Value) -> PluginOutput {
        Invocation::new(plugin, cmd)
            .attach("par1", &self.cont, "eth0")
            .in_host(&self.host)
            .config(conf)
            .run()
    }
}

/// Ours and Go's `kind`.
fn both(kind: &str) -> [PathBuf; 2] {
    let go = go_bin(kind).unwrap_or_else(|| panic!("no Go {kind}: run scripts/test-deps"));
    [bin(kind), go]
}

/// ADD of `conf` by ours and by Go's `kind`, each in a fresh [`Pair`]
/// (`prepare`d) with its own host-local `dataDir` when `conf` has an
/// `ipam`, then CHECK (when `check`) and DEL, which succeeds: the same
/// [`Outcome`] on both sides (returned).
fn same_outcome(
    kind: &str,
    conf: &Value,
    check: bool,
    prepare: impl Fn(&Pair),
    look: impl Fn(&Pair) -> String,
) -> Outcome {
    let [ours, theirs] = both(kind).map(|plugin| {
        let p = Pair::new();
        prepare(&p);
        let data = DataDir::new("par");
        let mut c = conf.clone();
        if c.get("ipam").is_some() {
            c["ipam"]["dataDir"] = json!(data.path().display().to_string());
        }
        let out = p.run(&plugin, "ADD", &c);
        let state = look(&p);
        let check = (check && out.code == 0).then(|| p.run(&plugin, "CHECK", &c).code == 0);
        let del = p.run(&plugin, "DEL", &c);
        assert_eq!(del.code, 0, "{} DEL {c}: {del:?}", plugin.display());
        let got = Outcome {
            ok: out.code == 0,
            state,
            check,
            after_del: look(&p),
        };
        (got, out)
    });
    assert_eq!(
        ours.0, theirs.0,
        "{kind} {conf}: ours {:?}, Go's {:?}",
        ours.1, theirs.1
    );
    ours.0
}

/// A config ours refuses and the reference's `kind` takes: ours' ADD, in
/// a fresh [`Pair`] (`prepare`d), fails with a CNI error, leaving what
/// `look` sees as it was, and DEL then succeeds; Go's ADD in another fresh
/// `Pair` succeeds. Returns ours' error.
fn ours_refuses_go_takes(
    kind: &str,
    conf: &Value,
    prepare: impl Fn(&Pair),
    look: impl Fn(&Pair) -> String,
) -> Value {
    let [ours, go] = both(kind);
    let p = Pair::new();
    prepare(&p);
    let before = look(&p);
    let err = p.run(&ours, "ADD", conf).err();
    assert_eq!(look(&p), before, "{kind} {conf}: {err}");
    p.run(&ours, "DEL", conf).ok();
    let p = Pair::new();
    prepare(&p);
    p.run(&go, "ADD", conf).ok();
    err
}

/// The MTU of `dev` in `ns`.
fn mtu(ns: &Netns, dev: &str) -> u64 {
    ns.ip_json(&["link", "show", dev])[0]["mtu"]
        .as_u64()
        .unwrap()
}

/// The MTUs of the container's `eth0` and of every link in the host but
/// `lo` (the bridge, the host veth), or "none" where there is none.
fn mtus(p: &Pair) -> String {
    let mut out = Vec::new();
    if p.cont.link_names().iter().any(|l| l == "eth0") {
        out.push(format!("eth0 {}", mtu(&p.cont, "eth0")));
    }
    for l in p.host.link_names() {
        if l != "lo" {
            // Host veth names are random: the kind stands for the name.
            let kind = if l.starts_with("veth") { "veth" } else { &l };
            out.push(format!("{kind} {}", mtu(&p.host, &l)));
        }
    }
    out.sort();
    if out.is_empty() {
        "none".into()
    } else {
        out.join(", ")
    }
}

/// bridge and ptp: an `mtu` of 0 or less is the kernel's default (Go's
/// netlink sends no MTU then), 68 and 65535 are set, 67 and 65536 fail
/// (the kernel refuses them; ours before creating anything, leaving
/// nothing either).
#[test]
fn par_bridge_ptp_mtu_like_go() {
    if skip_unless_root("parity::par_bridge_ptp_mtu_like_go") {
        return;
    }
    for (kind, n) in [("bridge", 1), ("ptp", 2)] {
        for (m, want) in [
            (json!(0), Some(1500)),
            (json!(-1), Some(1500)),
            (json!(-100000), Some(1500)),
            (json!(68), Some(68)),
            (json!(65535), Some(65535)),
            (json!(67), None),
            (json!(65536), None),
        ] {
            let conf = json!({
                "cniVersion": "1.0.0", "name": "parnet", "type": kind,
                "bridge": "parbr0", "mtu": m,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": format!("10.162.{n}.0/24")}]]},
            });
            let got = same_outcome(kind, &conf, false, |_| {}, mtus);
            match want {
                Some(w) => {
                    assert!(got.ok, "{kind} mtu {m}");
                    let links = if kind == "bridge" {
                        format!("eth0 {w}, parbr0 {w}, veth {w}")
                    } else {
                        format!("eth0 {w}, veth {w}")
                    };
                    assert_eq!(got.state, links, "{kind} mtu {m}");
                }
                None => {
                    assert!(!got.ok, "{kind} mtu {m}");
                    assert_eq!(got.state, "none", "{kind} mtu {m}");
                }
            }
        }
    }
}

/// A veth `eth0` in the container (10.162.10.2/24, fd62:10::2/64) to
/// `peth0` in the host, up, as a main plugin leaves it.
fn wired(p: &Pair) {
    p.cont.exec_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "peth0",
        ],
    );
    p.cont
        .exec_ok("ip", &["link", "set", "peth0", "netns", p.host.name()]);
    p.cont
        .exec_ok("ip", &["addr", "add", "10.162.10.2/24", "dev", "eth0"]);
    p.cont.exec_ok(
        "ip",
        &["addr", "add", "fd62:10::2/64", "dev", "eth0", "nodad"],
    );
    p.cont.exec_ok("ip", &["link", "set", "eth0", "up"]);
    p.host.exec_ok("ip", &["link", "set", "peth0", "up"]);
}

/// A prevResult of the container's `eth0` with `addrs` (CIDR).
fn prev_result(addrs: &[String]) -> Value {
    let ips: Vec<Value> = addrs
        .iter()
        .map(|a| json!({"interface": 0, "address": a}))
        .collect();
    json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": "/x"}],
        "ips": ips,
    })
}

/// The container's rules, both families.
fn rules(p: &Pair) -> String {
    format!(
        "{}\n{}",
        p.cont.exec_ok("ip", &["-4", "rule"]),
        p.cont.exec_ok("ip", &["-6", "rule"])
    )
}

/// What v1.9.1's sbr sends in `table` mode (`doRoutesWithTable`), replayed
/// with `ip rule`: per address in prevResult order, a rule "from <address>
/// lookup <table>" without priority (its netlink puts a table below 256
/// in the header, sends none for a negative one, and `ip rule ... table
/// 0` sends that very request), stopping at the first error. Whether all
/// were added.
fn v191_table_rules(p: &Pair, ips: &[&str], table: i64) -> bool {
    let table = table.max(0).to_string();
    ips.iter().all(|ip| {
        let family = if ip.contains(':') { "-6" } else { "-4" };
        p.cont
            .exec("ip", &[family, "rule", "add", "from", ip, "table", &table])
            .status
            .success()
    })
}

/// sbr's `table` 0 or less and 253-255, which ours refused. v1.9.1's
/// netlink sends no table for 0 or less, so the kernel gives an IPv4 rule
/// a new empty table of its choosing (the first free id) and refuses an
/// IPv6 one (ADD fails); 253-255 are rules to the kernel's own tables
/// (`table` mode adds rules only). Ours makes the same rules as v1.9.1's
/// requests replayed (Debian's v1.1.1 has no `table` key: its ADD of these
/// configs succeeds in its default mode, checked too), CHECK finds them,
/// DEL removes them (v1.9.1's DEL lists every table for 0).
#[test]
fn par_sbr_tables_like_go() {
    if skip_unless_root("parity::par_sbr_tables_like_go") {
        return;
    }
    let v4 = "10.162.10.2";
    let v6 = "fd62:10::2";
    for (table, ips, ok) in [
        (0, vec![v4], true),
        (-1, vec![v4], true),
        (0, vec![v4, v6], false),
        (253, vec![v4, v6], true),
        (254, vec![v4, v6], true),
        (255, vec![v4, v6], true),
        (4294967295, vec![v4, v6], true),
    ] {
        let addrs: Vec<String> = ips
            .iter()
            .map(|ip| {
                let len = if ip.contains(':') { 64 } else { 24 };
                format!("{ip}/{len}")
            })
            .collect();
        let conf = json!({
            "cniVersion": "1.0.0", "name": "parnet", "type": "sbr", "table": table,
            "prevResult": prev_result(&addrs),
        });
        let ours = Pair::new();
        wired(&ours);
        let out = ours.run(&bin("sbr"), "ADD", &conf);
        let v191 = Pair::new();
        wired(&v191);
        assert_eq!(
            out.code == 0,
            v191_table_rules(&v191, &ips, table),
            "table {table} {ips:?}: {out:?}"
        );
        assert_eq!(out.code == 0, ok, "table {table} {ips:?}: {out:?}");
        if ok {
            assert_eq!(rules(&ours), rules(&v191), "table {table} {ips:?}");
            assert!(rules(&ours).contains(&format!("from {v4} lookup")));
            ours.run(&bin("sbr"), "CHECK", &conf).ok();
            let go = Pair::new();
            wired(&go);
            go.run(&go_bin("sbr").unwrap(), "ADD", &conf).ok();
        } else {
            // Ours takes back the IPv4 rule (v1.9.1 leaves it).
            assert!(!rules(&ours).contains(v4), "{}", rules(&ours));
        }
        ours.run(&bin("sbr"), "DEL", &conf).ok();
        assert!(!rules(&ours).contains(v4), "{}", rules(&ours));
        ours.run(&bin("sbr"), "DEL", &conf).ok();
    }
}

/// tuning's relative `dataDir`, which ours refused: the reference makes
/// it relative to the directory the runtime runs the plugin in. Ours and
/// Go's, each run from a fresh directory: ADD sets the MTU and saves the
/// original under `<dir>/<dataDir>/<cid>_eth0.json`, DEL restores it from
/// there and removes the file.
#[test]
fn par_tuning_relative_data_dir_like_go() {
    if skip_unless_root("parity::par_tuning_relative_data_dir_like_go") {
        return;
    }
    let conf = json!({
        "cniVersion": "1.0.0", "name": "parnet", "type": "tuning",
        "mtu": 1400, "dataDir": "par-rel/state",
        "prevResult": prev_result(&["10.162.20.2/24".into()]),
    });
    let [ours, theirs] = both("tuning").map(|plugin| {
        let p = Pair::new();
        wired(&p);
        let cwd = rcni_tests::tempdir::TempDir::new("par-tuning");
        let dir = cwd.path().display().to_string();
        let run = |cmd: &str| {
            Invocation::new(&plugin, cmd)
                .attach("par1", &p.cont, "eth0")
                .via(&["env", "-C", &dir])
                .config(&conf)
                .run()
        };
        let saved = cwd.path().join("par-rel/state/par1_eth0.json");
        let add = run("ADD");
        let after_add = (add.code == 0, mtu(&p.cont, "eth0"), saved.is_file());
        let del = run("DEL");
        let after_del = (del.code == 0, mtu(&p.cont, "eth0"), saved.exists());
        ((after_add, after_del), add)
    });
    assert_eq!(ours.0, theirs.0, "ours {:?}, Go's {:?}", ours.1, theirs.1);
    assert_eq!(ours.0, ((true, 1400, true), (true, 1500, false)));
}

/// The host's iptables and ip6tables rules (`-S`) but rcni's records
/// (chain `CNI-FW-ATTACHMENTS`, which the reference does not have).
fn filter_rules(p: &Pair) -> String {
    ["iptables", "ip6tables"]
        .iter()
        .flat_map(|tool| {
            p.host
                .exec_ok(tool, &["-w", "-t", "filter", "-S"])
                .lines()
                .filter(|l| !l.contains("CNI-FW-ATTACHMENTS"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// firewall's `iptablesAdminChainName`: a name with `#` or non-ASCII
/// letters, which ours refused, makes the same rules in both families as
/// the reference's (its iptables takes any name without white space, not
/// starting with `-`/`!`, up to 28 bytes, not a target's); CHECK passes
/// and DEL leaves the same. Names iptables refuses (white space, a leading
/// `-`, a built-in chain, a target, the plugin's own chain, 29 bytes) fail
/// both ways. Names the reference takes and ours still refuses: quotes
/// and backslashes (iptables-restore, which ours writes through, reads
/// them as quoting, so they would change the transaction's words) and
/// the chains ours keeps state in or shares with bridge's isolation (see
/// plugins/firewall/README.md).
#[test]
fn par_firewall_admin_chain_like_go() {
    if rcni_tests::skip_unless(
        "parity::par_firewall_admin_chain_like_go",
        rcni_tests::FIREWALL_TOOLS,
    ) {
        return;
    }
    let conf = |chain: &str| {
        json!({
            "cniVersion": "1.0.0", "name": "parnet", "type": "firewall",
            "backend": "iptables", "iptablesAdminChainName": chain,
            "prevResult": prev_result(&["10.163.1.2/24".into(), "fd63:1::2/64".into()]),
        })
    };
    for chain in ["par#adm", "PÄR-ADM", "par%adm.v1"] {
        let got = same_outcome("firewall", &conf(chain), true, |_| {}, filter_rules);
        assert!(got.ok && got.check == Some(true), "{chain}: {got:?}");
        assert!(
            got.state.contains(&format!("-A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j {chain}")),
            "{chain}: {}",
            got.state
        );
    }
    for chain in [
        "par adm",
        "-par",
        "!par",
        "FORWARD",
        "INPUT",
        "ACCEPT",
        "CNI-FORWARD",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ123",
    ] {
        for plugin in both("firewall") {
            let p = Pair::new();
            let out = p.run(&plugin, "ADD", &conf(chain));
            assert_ne!(out.code, 0, "{chain} {}: {out:?}", plugin.display());
        }
    }
    for chain in [
        "par\"adm",
        "par'adm",
        "par\\adm",
        "CNI-FW-ATTACHMENTS",
        "CNI-ISOLATION-STAGE-1",
        "CNI-ISOLATION-STAGE-2",
    ] {
        let err = ours_refuses_go_takes("firewall", &conf(chain), |_| {}, filter_rules);
        assert!(
            rcni_tests::error_msg(&err).contains("iptablesAdminChainName"),
            "{chain}: {err}"
        );
    }
}

/// The host's nat rules of both families (`-S`).
fn nat_rules(p: &Pair) -> String {
    ["iptables", "ip6tables"]
        .iter()
        .map(|tool| p.host.exec_ok(tool, &["-w", "-t", "nat", "-S"]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`wired`], the host end addressed (so the host routes to the
/// container), and nat chains `chains` in both families.
fn wired_with_chains(p: &Pair, chains: &[&str]) {
    wired(p);
    p.host
        .exec_ok("ip", &["addr", "add", "10.162.10.1/24", "dev", "peth0"]);
    p.host.exec_ok(
        "ip",
        &["addr", "add", "fd62:10::1/64", "dev", "peth0", "nodad"],
    );
    for tool in ["iptables", "ip6tables"] {
        for chain in chains {
            p.host.exec_ok(tool, &["-w", "-t", "nat", "-N", chain]);
        }
    }
}

/// portmap (iptables): an `externalSetMarkChain` with `#` or non-ASCII
/// letters, and iptables conditions with `;` and `#`, which ours refused:
/// the same nat rules of both families as the reference's (Debian's
/// v1.1.1 passes both to iptables as arguments), CHECK passes, DEL leaves
/// the same. Still refused by ours where the reference takes them: a
/// chain name with a quote (iptables-restore's quoting), a condition
/// with a newline (it would end iptables-restore's line) and a `hostIP`
/// that is no address (see plugins/portmap/README.md).
#[test]
fn par_portmap_chain_and_tokens_like_go() {
    if rcni_tests::skip_unless(
        "parity::par_portmap_chain_and_tokens_like_go",
        rcni_tests::FIREWALL_TOOLS,
    ) {
        return;
    }
    let conf = |extra: Value| {
        let mut c = json!({
            "cniVersion": "1.0.0", "name": "parnet", "type": "portmap",
            "backend": "iptables",
            "runtimeConfig": {"portMappings": [
                {"hostPort": 18162, "containerPort": 80, "protocol": "tcp"},
            ]},
            "prevResult": prev_result(&["10.162.10.2/24".into(), "fd62:10::2/64".into()]),
        });
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };
    let chains = ["PÄR#MARK", "PAR\"MARK"];
    for extra in [
        json!({"externalSetMarkChain": "PÄR#MARK"}),
        json!({"conditionsV4": ["-m", "comment", "--comment", "par;#4"],
               "conditionsV6": ["!", "-s", "fd62:99::/64", "-m", "comment", "--comment", "#par;6"]}),
    ] {
        // Debian's v1.1.1 CHECK fails on an attachment of one family (it
        // looks for the other family's chain): ours' CHECK alone.
        let got = same_outcome(
            "portmap",
            &conf(extra.clone()),
            false,
            |p| wired_with_chains(p, &chains),
            nat_rules,
        );
        assert!(got.ok, "{extra}: {got:?}");
        assert!(got.state.contains("18162"), "{extra}: {}", got.state);
        let p = Pair::new();
        wired_with_chains(&p, &chains);
        p.run(&bin("portmap"), "ADD", &conf(extra.clone())).ok();
        p.run(&bin("portmap"), "CHECK", &conf(extra.clone())).ok();
        p.run(&bin("portmap"), "DEL", &conf(extra.clone())).ok();
    }
    for extra in [
        json!({"externalSetMarkChain": "PAR\"MARK"}),
        json!({"conditionsV4": ["-m", "comment", "--comment", "par\n4"]}),
        // Go takes it for IPv6 and drops the mapping of an IPv4-only
        // container.
        json!({
            "runtimeConfig": {"portMappings": [
                {"hostPort": 18162, "containerPort": 80, "protocol": "tcp", "hostIP": "nope"},
            ]},
            "prevResult": prev_result(&["10.162.10.2/24".into()]),
        }),
    ] {
        // Go's ADD succeeds (its DEL of the newline one then fails: it
        // cannot parse its own rule back).
        ours_refuses_go_takes(
            "portmap",
            &conf(extra),
            |p| wired_with_chains(p, &chains),
            nat_rules,
        );
    }
}

/// firewall's isolation rules name the bridge of prevResult's first
/// interface: names with `#` or non-ASCII letters, which ours refused,
/// make the same rules of both families as the reference's (v1.9.1's
/// comment on the shared rules, `same-bridge|isolated`, read as v1.1.1's);
/// a `+`, which iptables reads as a wildcard, is still refused by ours
/// and taken by the reference's.
#[test]
fn par_firewall_bridge_names_like_go() {
    if rcni_tests::skip_unless(
        "parity::par_firewall_bridge_names_like_go",
        rcni_tests::FIREWALL_TOOLS,
    ) {
        return;
    }
    let conf = |bridge: &str| {
        let mut prev = prev_result(&["10.163.2.2/24".into(), "fd63:2::2/64".into()]);
        prev["interfaces"] = json!([{"name": bridge}, {"name": "eth0", "sandbox": "/x"}]);
        for ip in prev["ips"].as_array_mut().unwrap() {
            ip["interface"] = json!(1);
        }
        json!({
            "cniVersion": "1.0.0", "name": "parnet", "type": "firewall",
            "backend": "iptables", "ingressPolicy": "same-bridge",
            "prevResult": prev,
        })
    };
    let look = |p: &Pair| filter_rules(p).replace("same-bridge|isolated", "same-bridge");
    for bridge in ["par#br", "parbrü0"] {
        let got = same_outcome("firewall", &conf(bridge), true, |_| {}, look);
        assert!(got.ok && got.check == Some(true), "{bridge}: {got:?}");
        assert!(
            got.state.contains(&format!("-o {bridge} -m comment")),
            "{bridge}: {}",
            got.state
        );
    }
    ours_refuses_go_takes("firewall", &conf("parbr+"), |_| {}, filter_rules);
}
