//! The static IPAM plugin, exec'd as a runtime (or a main plugin) does.
//!
//! As an IPAM plugin on its own it needs no privileges: its output is
//! compared with the Go reference (/usr/lib/cni/static, v1.1.1) for every
//! spec version that one speaks (≤ 1.0.0). Chained under ptp and bridge in
//! private namespaces (`st…`, root only) the addresses and routes must
//! really land on the container's interface. Subnets 10.122.N.0/24 and
//! fd22:122::/64.

// Everything here is test code, helpers included.
#![cfg(test)]

use rcni_tests::{Invocation, Netns, PluginOutput, bin, go_bin, skip_unless_root};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const GO_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0"];

fn ours() -> PathBuf {
    bin("static")
}

/// Runs the plugin as IPAM: a runtime's environment, no namespace needed.
fn run(plugin: &Path, cmd: &str, conf: &Value, cni_args: &str) -> PluginOutput {
    Invocation::new(plugin, cmd)
        .env("CNI_CONTAINERID", "st-ctr")
        .env("CNI_NETNS", "/run/netns/st-none")
        .env("CNI_IFNAME", "eth0")
        .env("CNI_ARGS", cni_args)
        .config(conf)
        .run()
}

fn ipam_conf(version: &str, ipam: Value, extra: Value) -> Value {
    let mut c = json!({"cniVersion": version, "name": "st-net", "type": "ptp", "ipam": ipam});
    if let (Some(m), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
    c
}

fn full_ipam() -> Value {
    json!({
        "type": "static",
        "addresses": [
            {"address": "10.122.1.5/24", "gateway": "10.122.1.1"},
            {"address": "fd22:122::5/64", "gateway": "fd22:122::1"},
        ],
        "routes": [
            {"dst": "0.0.0.0/0"},
            {"dst": "0.0.0.0/0"},
            {"dst": "10.122.9.0/24", "gw": "10.122.1.9"},
            {"dst": "::/0"},
        ],
        "dns": {"nameservers": ["10.122.1.53"], "domain": "st.example", "search": ["st.example"], "options": ["ndots:2"]},
    })
}

/// The cases compared with Go: (config ipam, extra top-level keys, CNI_ARGS).
fn cases() -> Vec<(Value, Value, &'static str)> {
    vec![
        (full_ipam(), json!({}), ""),
        (
            json!({"type": "static", "addresses": [{"address": "10.122.1.5/24"}]}),
            json!({}),
            "IgnoreUnknown=1;K8S_POD_NAME=p;IP=10.122.2.5/24,fd22:122::7/64;GATEWAY=10.122.2.1,fd22:122::1",
        ),
        (
            json!({"type": "static", "addresses": [{"address": "10.122.1.5/24", "gateway": "10.122.1.1"}], "routes": [{"dst": "0.0.0.0/0"}]}),
            json!({"args": {"cni": {"ips": ["10.122.3.5/24"]}}, "runtimeConfig": {"ips": ["10.122.4.5/24", "fd22:122::4/64"]}}),
            "IP=10.122.2.5/24",
        ),
        (
            json!({"type": "static"}),
            json!({"args": {"cni": {"ips": ["fd22:122::3/64"]}}}),
            "",
        ),
        (json!({"type": "static"}), json!({}), ""),
        (
            json!({"TYPE": "static", "ADDRESSES": [{"ADDRESS": "10.122.1.5/24", "Gateway": "10.122.1.1"}]}),
            json!({}),
            "",
        ),
        // Errors, each with the reference's text.
        (
            json!({"type": "static", "addresses": [{"address": "10.122.1.5"}]}),
            json!({}),
            "",
        ),
        (
            json!({"type": "static", "addresses": [{"address": "10.122.1.5/24", "gateway": "x"}]}),
            json!({}),
            "",
        ),
        (json!({"type": "static"}), json!({}), "IP=10.122.1.5"),
        (
            json!({"type": "static"}),
            json!({}),
            "IP=10.122.1.5/24;GATEWAY=nope",
        ),
        (json!({"type": "static"}), json!({}), "K8S_POD_NAME=p"),
        (
            json!({"type": "static"}),
            json!({"runtimeConfig": {"ips": ["10.122.1.5"]}}),
            "",
        ),
        (
            json!({"type": "static"}),
            json!({"args": {"cni": {"ips": ["x/24"]}}}),
            "",
        ),
        (
            json!({"type": "static", "routes": [{"dst": "10.0.0.0"}]}),
            json!({}),
            "",
        ),
        (
            json!({"type": "static", "addresses": [{"address": "10.122.1.5/24"}, {"address": "10.122.1.6/24"}]}),
            json!({}),
            "",
        ),
    ]
}

/// A 1.x result without an empty `dns`: Go 1.1.1 prints `"dns": {}`, the
/// current reference (and we) leave it out.
fn normalise(mut v: Value, version: &str) -> Value {
    if version.starts_with('1')
        && let Some(m) = v.as_object_mut()
        && m.get("dns").is_some_and(|d| d == &json!({}))
    {
        m.remove("dns");
    }
    v
}

#[test]
fn add_prints_what_go_prints_in_every_version() {
    let Some(go) = go_bin("static") else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIP static::add_prints_what_go_prints_in_every_version: /usr/lib/cni/static missing"
        );
        return;
    };
    let mut compared = 0;
    for version in GO_VERSIONS {
        for (ipam, extra, cni_args) in cases() {
            let conf = ipam_conf(version, ipam, extra);
            let (o, g) = (
                run(&ours(), "ADD", &conf, cni_args),
                run(&go, "ADD", &conf, cni_args),
            );
            assert_eq!(
                o.code, g.code,
                "{version} {conf} {cni_args}: ours {o:?} Go {g:?}"
            );
            if g.code == 0 {
                assert_eq!(
                    normalise(o.json(), version),
                    normalise(g.json(), version),
                    "{version} {conf} {cni_args}"
                );
                // 0.x results are printed in Go's struct order: compare text.
                if !version.starts_with('1') {
                    assert_eq!(o.stdout, g.stdout, "{version} {conf}");
                }
            } else {
                // Config errors are code 7 here (999 in Go); same text.
                let (oe, ge) = (o.err(), g.err());
                assert_eq!(oe["msg"], ge["msg"], "{version} {conf} {cni_args}");
                assert!(oe["code"] == 7 || oe["code"] == ge["code"], "{oe}");
            }
            compared += 1;
        }
    }
    assert_eq!(compared, GO_VERSIONS.len() * cases().len());
}

#[test]
fn results_of_each_version() {
    let full = |v: &str| run(&ours(), "ADD", &ipam_conf(v, full_ipam(), json!({})), "").ok();
    // 0.1.0/0.2.0: one address per family, routes sorted by family.
    let r = full("0.2.0");
    assert_eq!(r["ip4"]["ip"], "10.122.1.5/24");
    assert_eq!(r["ip4"]["gateway"], "10.122.1.1");
    assert_eq!(r["ip4"]["routes"].as_array().unwrap().len(), 3);
    assert_eq!(r["ip6"]["routes"], json!([{"dst": "::/0"}]));
    // 0.3.x/0.4.0: "version" per address, dns always present.
    for v in ["0.3.0", "0.3.1", "0.4.0"] {
        let r = full(v);
        assert_eq!(r["cniVersion"], v);
        assert_eq!(r["ips"][0]["version"], "4");
        assert_eq!(r["ips"][1]["version"], "6");
        assert!(r["ips"][0].get("interface").is_none());
        assert_eq!(
            r["routes"].as_array().unwrap().len(),
            4,
            "ECMP duplicates kept"
        );
    }
    // 1.x: no version, no interface; 1.1.0 route attributes pass through.
    let ipam = json!({"type": "static", "addresses": [{"address": "10.122.1.5/24"}],
        "routes": [{"dst": "10.122.8.0/24", "gw": "10.122.1.1", "mtu": 1400, "advmss": 1360, "priority": 7, "table": 100, "scope": 0}]});
    let r = run(&ours(), "ADD", &ipam_conf("1.1.0", ipam, json!({})), "").ok();
    assert_eq!(r["ips"], json!([{"address": "10.122.1.5/24"}]));
    assert_eq!(
        r["routes"],
        json!([{"dst": "10.122.8.0/24", "gw": "10.122.1.1", "mtu": 1400, "advmss": 1360, "priority": 7, "table": 100, "scope": 0}])
    );
    assert!(r.get("dns").is_none(), "an empty dns is left out: {r}");
    // No addresses: fine for 0.3.0 on, not convertible to 0.2.0.
    let none = ipam_conf("1.1.0", json!({"type": "static"}), json!({}));
    assert_eq!(
        run(&ours(), "ADD", &none, "").ok(),
        json!({"cniVersion": "1.1.0"})
    );
    let none = ipam_conf("0.2.0", json!({"type": "static"}), json!({}));
    assert_eq!(
        run(&ours(), "ADD", &none, "").err()["msg"],
        "cannot convert: no valid IP addresses"
    );
}

#[test]
fn del_gc_status_succeed_without_state() {
    // DEL never reads the IPAM config: anything the skel accepts succeeds.
    for conf in [
        ipam_conf("1.1.0", full_ipam(), json!({})),
        json!({"cniVersion": "1.0.0", "name": "st-net", "type": "ptp"}),
        ipam_conf(
            "0.2.0",
            json!({"type": "static", "addresses": [{"address": "bad"}]}),
            json!({}),
        ),
    ] {
        assert_eq!(run(&ours(), "DEL", &conf, "").ok(), Value::Null, "{conf}");
        assert_eq!(
            run(&ours(), "DEL", &conf, "").ok(),
            Value::Null,
            "twice: {conf}"
        );
    }
    let conf = ipam_conf(
        "1.1.0",
        full_ipam(),
        json!({"cni.dev/valid-attachments": []}),
    );
    for cmd in ["GC", "STATUS"] {
        let out = Invocation::new(ours(), cmd)
            .env("CNI_PATH", "/nonexistent")
            .config(&conf)
            .run();
        assert_eq!(out.ok(), Value::Null, "{cmd}");
    }
    // Before 1.1.0 GC and STATUS do not exist.
    let old = ipam_conf("1.0.0", full_ipam(), json!({}));
    let e = Invocation::new(ours(), "STATUS").config(&old).run().err();
    assert_eq!(e["code"], 1);
}

#[test]
fn check_compares_prev_result_with_the_config() {
    let conf = ipam_conf("1.0.0", full_ipam(), json!({}));
    let result = run(&ours(), "ADD", &conf, "").ok();
    let mut with_prev = conf.clone();
    with_prev["prevResult"] = result.clone();
    assert_eq!(run(&ours(), "CHECK", &with_prev, "").ok(), Value::Null);
    if let Some(go) = go_bin("static") {
        assert_eq!(run(&go, "CHECK", &with_prev, "").ok(), Value::Null);
    }
    // Same address, another gateway.
    let mut bad = with_prev.clone();
    bad["prevResult"]["ips"][0]["gateway"] = json!("10.122.1.2");
    let e = run(&ours(), "CHECK", &bad, "").err();
    assert_eq!(
        e["msg"],
        "static: Failed to match addr 10.122.1.5 on interface eth0"
    );
    if let Some(go) = go_bin("static") {
        assert_eq!(run(&go, "CHECK", &bad, "").err()["msg"], e["msg"]);
    }
    // An address missing from prevResult: Go passes, we do not.
    let mut missing = with_prev.clone();
    missing["prevResult"]["ips"] = json!([result["ips"][0]]);
    let e = run(&ours(), "CHECK", &missing, "").err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("Failed to find addr fd22:122::5"),
        "{e}"
    );
    let e = run(&ours(), "CHECK", &conf, "").err();
    assert_eq!(e["msg"], "Required prevResult missing");
    // CHECK before 0.4.0 is the skel's code 1.
    let mut old = with_prev.clone();
    old["cniVersion"] = json!("0.3.1");
    assert_eq!(run(&ours(), "CHECK", &old, "").err()["code"], 1);
}

// ---- chained under a main plugin: the addresses reach the kernel ----

/// A private "host" namespace with lo up.
fn host_ns() -> Netns {
    let host = Netns::new("sth");
    host.exec_ok("ip", &["link", "set", "lo", "up"]);
    host
}

fn chained(main: &str, ipam: Value) -> Value {
    let mut c = json!({"cniVersion": "1.0.0", "name": "st-chain", "type": main, "ipam": ipam});
    if main == "bridge" {
        c["bridge"] = json!(rcni_tests::unique("stbr"));
        c["isGateway"] = json!(true);
    }
    c
}

fn main_plugin(
    main: &str,
    cmd: &str,
    host: &Netns,
    cont: &Netns,
    conf: &Value,
    cni_args: &str,
) -> PluginOutput {
    Invocation::new(bin(main), cmd)
        .attach("st-chained", cont, "eth0")
        .env("CNI_ARGS", cni_args)
        .in_host(host)
        .config(conf)
        .run()
}

fn routes(ns: &Netns, fam: &str) -> Vec<String> {
    ns.ip_json(&[fam, "route", "show"])
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            format!(
                "{} via {}",
                r["dst"].as_str().unwrap_or_default(),
                r["gateway"].as_str().unwrap_or("-")
            )
        })
        .collect()
}

#[test]
fn under_ptp_the_addresses_land_on_the_container_interface() {
    if skip_unless_root("static::under_ptp_the_addresses_land_on_the_container_interface") {
        return;
    }
    let (host, cont) = (host_ns(), Netns::new("stc"));
    let ipam = json!({
        "type": "static",
        "addresses": [
            {"address": "10.122.5.5/24", "gateway": "10.122.5.1"},
            {"address": "fd22:122::5/64", "gateway": "fd22:122::1"},
        ],
        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "10.122.50.0/24", "gw": "10.122.5.1"}],
        "dns": {"nameservers": ["10.122.5.53"]},
    });
    let conf = chained("ptp", ipam);
    let r = main_plugin("ptp", "ADD", &host, &cont, &conf, "").ok();
    assert_eq!(
        cont.addrs("eth0"),
        ["10.122.5.5/24", "fd22:122::5/64"].map(String::from).into()
    );
    let v4 = routes(&cont, "-4");
    assert!(v4.contains(&"default via 10.122.5.1".to_string()), "{v4:?}");
    assert!(
        v4.contains(&"10.122.50.0/24 via 10.122.5.1".to_string()),
        "{v4:?}"
    );
    assert_eq!(r["dns"]["nameservers"], json!(["10.122.5.53"]));
    assert_eq!(r["ips"][0]["interface"], 1);
    // CHECK through ptp runs static's CHECK too.
    let mut with_prev = conf.clone();
    with_prev["prevResult"] = r.clone();
    main_plugin("ptp", "CHECK", &host, &cont, &with_prev, "").ok();
    main_plugin("ptp", "DEL", &host, &cont, &with_prev, "").ok();
    assert!(host.veths().is_empty());
    assert!(!cont.link_names().contains(&"eth0".to_string()));
    // DEL again: static has nothing to release, ptp nothing to delete.
    main_plugin("ptp", "DEL", &host, &cont, &with_prev, "").ok();
}

#[test]
fn under_bridge_cni_args_choose_the_address() {
    if skip_unless_root("static::under_bridge_cni_args_choose_the_address") {
        return;
    }
    let (host, cont) = (host_ns(), Netns::new("stc"));
    let conf = chained("bridge", json!({"type": "static"}));
    let args = "IgnoreUnknown=1;K8S_POD_NAME=p;IP=10.122.6.7/24;GATEWAY=10.122.6.1";
    let r = main_plugin("bridge", "ADD", &host, &cont, &conf, args).ok();
    assert_eq!(cont.addrs("eth0"), ["10.122.6.7/24".to_string()].into());
    assert!(routes(&cont, "-4").contains(&"10.122.6.0/24 via -".to_string()));
    // The bridge holds the gateway the CNI_ARGS named.
    let br = conf["bridge"].as_str().unwrap();
    assert_eq!(host.addrs(br), ["10.122.6.1/24".to_string()].into());
    assert_eq!(r["ips"][0]["gateway"], "10.122.6.1");
    // runtimeConfig.ips wins over CNI_ARGS, on a second container.
    let cont2 = Netns::new("stc");
    let mut conf2 = conf.clone();
    conf2["runtimeConfig"] = json!({"ips": ["10.122.6.8/24"]});
    let out = Invocation::new(bin("bridge"), "ADD")
        .attach("st-chained-2", &cont2, "eth0")
        .env("CNI_ARGS", args)
        .in_host(&host)
        .config(&conf2)
        .run();
    let r2 = out.ok();
    assert_eq!(cont2.addrs("eth0"), ["10.122.6.8/24".to_string()].into());
    assert_eq!(r2["ips"][0]["address"], "10.122.6.8/24");
    for (cid, ns, c) in [
        ("st-chained", &cont, &conf),
        ("st-chained-2", &cont2, &conf2),
    ] {
        Invocation::new(bin("bridge"), "DEL")
            .attach(cid, ns, "eth0")
            .env("CNI_ARGS", args)
            .in_host(&host)
            .config(c)
            .run()
            .ok();
    }
    assert!(host.veths().is_empty());
}

#[test]
fn a_bad_address_fails_the_main_plugin_and_leaves_nothing() {
    if skip_unless_root("static::a_bad_address_fails_the_main_plugin_and_leaves_nothing") {
        return;
    }
    let (host, cont) = (host_ns(), Netns::new("stc"));
    let conf = chained(
        "ptp",
        json!({"type": "static", "addresses": [{"address": "10.122.7.5", "gateway": "10.122.7.1"}]}),
    );
    let e = main_plugin("ptp", "ADD", &host, &cont, &conf, "").err();
    assert_eq!(
        e["msg"],
        "the 'address' field is expected to be in CIDR notation, got: '10.122.7.5'"
    );
    assert!(host.veths().is_empty());
    assert_eq!(cont.link_names(), ["lo"]);
}

#[test]
fn under_macvlan_runtime_ips_land_on_the_child() {
    if skip_unless_root("static::under_macvlan_runtime_ips_land_on_the_child") {
        return;
    }
    // A Multus-style attachment: macvlan on a parent, static with the
    // `ips` capability.
    let (host, cont) = (host_ns(), Netns::new("stc"));
    host.exec_ok(
        "ip",
        &[
            "link", "add", "stp0", "type", "veth", "peer", "name", "stp1",
        ],
    );
    host.exec_ok("ip", &["link", "set", "stp0", "up"]);
    let mut conf = chained(
        "macvlan",
        json!({"type": "static",
        "addresses": [{"address": "10.122.8.5/24", "gateway": "10.122.8.1"}],
        "routes": [{"dst": "10.122.80.0/24"}]}),
    );
    conf["master"] = json!("stp0");
    conf["runtimeConfig"] = json!({"ips": ["10.122.8.7/24", "fd22:122::8:7/64"]});
    let r = Invocation::new(bin("macvlan"), "ADD")
        .attach("st-mv", &cont, "net1")
        .in_host(&host)
        .config(&conf)
        .run()
        .ok();
    assert_eq!(
        cont.addrs("net1"),
        ["10.122.8.7/24", "fd22:122::8:7/64"]
            .map(String::from)
            .into()
    );
    // No gateway from runtimeConfig: the route goes out of the link.
    assert!(routes(&cont, "-4").contains(&"10.122.80.0/24 via -".to_string()));
    assert_eq!(r["ips"][0]["interface"], 0);
    Invocation::new(bin("macvlan"), "DEL")
        .attach("st-mv", &cont, "net1")
        .in_host(&host)
        .config(&with_prev_result(&conf, &r))
        .run()
        .ok();
    assert_eq!(cont.link_names(), ["lo"]);
}

fn with_prev_result(conf: &Value, r: &Value) -> Value {
    let mut c = conf.clone();
    c["prevResult"] = r.clone();
    c
}
