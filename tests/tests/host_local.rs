//! host-local, exec'd as a runtime runs it. No network namespace is needed,
//! so these tests run without root (except the one using the default dataDir).
//! Each test has its own data directory and network name, removed on drop.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::host_local_util::*;
use rcni_tests::{go_bin, is_root};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

const ALL_VERSIONS: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

fn owner(cid: &str, ifname: &str) -> String {
    format!("{cid}\r\n{ifname}")
}

fn write_resolv(d: &DataDir) -> String {
    std::fs::create_dir_all(d.path()).unwrap();
    let p = d.path().join("resolv.conf");
    std::fs::write(
        &p,
        "nameserver 192.0.2.53\nnameserver 2001:db8::53\ndomain example.com\nsearch a.example b.example\noptions ndots:2 rotate\n",
    )
    .unwrap();
    p.display().to_string()
}

#[test]
fn add_del_dual_stack_with_routes_and_dns_in_every_version() {
    for v in ALL_VERSIONS {
        let d = DataDir::new("hlv");
        let resolv = write_resolv(&d);
        let conf = d.conf(
            v,
            json!({
                "ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "2001:db8:1::/64"}]],
                "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16", "gw": "10.1.2.254"},
                           {"dst": "::/0"}, {"dst": "2001:db8:9::/48", "gw": "2001:db8:1::fe"}],
                "resolvConf": resolv,
            }),
        );
        let r = add(&conf, "dummy", "eth0").ok();
        assert_eq!(r["cniVersion"], json!(v));
        match *v {
            "0.1.0" | "0.2.0" => {
                assert_eq!(r["ip4"]["ip"], "10.1.2.2/24", "{v}: {r}");
                assert_eq!(r["ip4"]["gateway"], "10.1.2.1");
                assert_eq!(
                    r["ip4"]["routes"],
                    json!([{"dst":"0.0.0.0/0"},{"dst":"192.168.0.0/16","gw":"10.1.2.254"}])
                );
                assert_eq!(r["ip6"]["ip"], "2001:db8:1::2/64");
                assert_eq!(r["ip6"]["gateway"], "2001:db8:1::1");
                assert_eq!(
                    r["ip6"]["routes"],
                    json!([{"dst":"::/0"},{"dst":"2001:db8:9::/48","gw":"2001:db8:1::fe"}])
                );
            }
            _ => {
                let ips = r["ips"].as_array().unwrap();
                assert_eq!(ips.len(), 2, "{v}: {r}");
                assert_eq!(ips[0]["address"], "10.1.2.2/24");
                assert_eq!(ips[0]["gateway"], "10.1.2.1");
                assert_eq!(ips[1]["address"], "2001:db8:1::2/64");
                assert_eq!(ips[1]["gateway"], "2001:db8:1::1");
                assert!(ips[0].get("interface").is_none());
                let has_version = matches!(*v, "0.3.0" | "0.3.1" | "0.4.0");
                assert_eq!(ips[0].get("version").is_some(), has_version, "{v}: {r}");
                if has_version {
                    assert_eq!(ips[1]["version"], "6");
                }
                assert_eq!(r["routes"].as_array().unwrap().len(), 4);
                assert_eq!(
                    r["routes"][1],
                    json!({"dst":"192.168.0.0/16","gw":"10.1.2.254"})
                );
            }
        }
        assert_eq!(
            r["dns"]["nameservers"],
            json!(["192.0.2.53", "2001:db8::53"]),
            "{v}"
        );
        assert_eq!(r["dns"]["domain"], "example.com");
        assert_eq!(r["dns"]["search"], json!(["a.example", "b.example"]));
        assert_eq!(r["dns"]["options"], json!(["ndots:2", "rotate"]));

        let want: BTreeMap<String, String> = [
            ("10.1.2.2".to_string(), owner("dummy", "eth0")),
            ("2001:db8:1::2".to_string(), owner("dummy", "eth0")),
        ]
        .into();
        assert_eq!(d.reservations(), want);
        assert_eq!(
            std::fs::read_to_string(d.net_dir().join("last_reserved_ip.0")).unwrap(),
            "10.1.2.2"
        );
        assert_eq!(
            std::fs::read_to_string(d.net_dir().join("last_reserved_ip.1")).unwrap(),
            "2001:db8:1::2"
        );
        let out = del(&conf, "dummy", "eth0");
        assert_eq!(out.ok(), Value::Null);
        assert!(out.stderr.is_empty(), "{out:?}");
        assert!(d.reservations().is_empty());
    }
}

#[test]
fn first_add_prints_nothing_on_stderr_and_sets_modes() {
    use std::os::unix::fs::PermissionsExt;
    let d = DataDir::new("hlmod");
    let conf = d.conf("1.0.0", json!({"subnet": "10.1.3.0/24"}));
    let out = add(&conf, "c1", "eth0");
    out.ok();
    assert!(out.stderr.is_empty(), "{out:?}");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.net_dir().join("10.1.3.2")), 0o600);
    assert_eq!(mode(&d.net_dir().join("last_reserved_ip.0")), 0o600);
    assert_eq!(mode(&d.net_dir()) & 0o755, 0o755);
    assert!(d.net_dir().join("lock").is_file());
}

#[test]
fn legacy_single_range_keys() {
    let d = DataDir::new("hlleg");
    let conf = d.conf(
        "0.3.1",
        json!({"subnet": "10.4.0.0/24", "rangeStart": "10.4.0.100", "rangeEnd": "10.4.0.101", "gateway": "10.4.0.254"}),
    );
    let a = add(&conf, "a", "eth0").ok();
    assert_eq!(a["ips"][0]["address"], "10.4.0.100/24");
    assert_eq!(a["ips"][0]["gateway"], "10.4.0.254");
    assert_eq!(a["ips"][0]["version"], "4");
    assert_eq!(result_ips(&add(&conf, "b", "eth0").ok()), ["10.4.0.101/24"]);
    let e = add(&conf, "c", "eth0").err();
    assert_eq!(
        e["msg"],
        "failed to allocate for range 0: no IP addresses available in range set: 10.4.0.100-10.4.0.101"
    );
    // nothing was left behind by the failure
    assert_eq!(d.reservations().len(), 2);
    del(&conf, "a", "eth0").ok();
    assert_eq!(result_ips(&add(&conf, "c", "eth0").ok()), ["10.4.0.100/24"]);
}

#[test]
fn pools_in_a_set_round_robin_and_wrap() {
    let d = DataDir::new("hlpool");
    let conf = d.conf(
        "1.0.0",
        json!({"ranges": [[
            {"subnet": "10.5.0.0/24", "rangeStart": "10.5.0.10", "rangeEnd": "10.5.0.11"},
            {"subnet": "10.5.1.0/24", "rangeStart": "10.5.1.1", "rangeEnd": "10.5.1.3"}
        ]]}),
    );
    let mut got = Vec::new();
    for i in 0..4 {
        got.extend(result_ips(&add(&conf, &format!("c{i}"), "eth0").ok()));
    }
    // 10.5.1.1 is the second pool's gateway
    assert_eq!(
        got,
        ["10.5.0.10/24", "10.5.0.11/24", "10.5.1.2/24", "10.5.1.3/24"]
    );
    let r = add(&conf, "c9", "eth0").err();
    assert_eq!(
        r["msg"],
        "failed to allocate for range 0: no IP addresses available in range set: 10.5.0.10-10.5.0.11,10.5.1.1-10.5.1.3"
    );
    // round robin: after the last one, the first pool again
    del(&conf, "c1", "eth0").ok();
    del(&conf, "c2", "eth0").ok();
    assert_eq!(result_ips(&add(&conf, "c5", "eth0").ok()), ["10.5.0.11/24"]);
    assert_eq!(result_ips(&add(&conf, "c6", "eth0").ok()), ["10.5.1.2/24"]);
}

#[test]
fn ipv6_only_and_three_sets() {
    let d = DataDir::new("hlv6");
    let conf = d.conf(
        "1.1.0",
        json!({"ranges": [
            [{"subnet": "2001:db8:5::/126"}],
            [{"subnet": "10.6.0.0/30"}],
            [{"subnet": "10.6.1.0/29", "gateway": "10.6.1.6"}]
        ]}),
    );
    let r = add(&conf, "c", "eth0").ok();
    assert_eq!(
        result_ips(&r),
        ["2001:db8:5::2/126", "10.6.0.2/30", "10.6.1.1/29"]
    );
    assert_eq!(r["ips"][2]["gateway"], "10.6.1.6");
    // the v4 /30 has one address: the next ADD gets ::3 in set 0, fails in
    // set 1 and gives ::3 back
    let before = d.reservations();
    let e = add(&conf, "d", "eth0").err();
    assert_eq!(
        e["msg"],
        "failed to allocate for range 1: no IP addresses available in range set: 10.6.0.1-10.6.0.2"
    );
    assert_eq!(d.reservations(), before);
    // an IPv6 range ends at the last address (no broadcast)
    assert_eq!(
        result_ips(
            &add(
                &d.conf(
                    "1.1.0",
                    json!({"ranges": [[{"subnet": "2001:db8:5::/126"}]]})
                ),
                "d",
                "eth0"
            )
            .ok()
        ),
        ["2001:db8:5::3/126"]
    );
}

#[test]
fn failure_in_a_later_set_releases_the_earlier_ones() {
    let d = DataDir::new("hlrel");
    let conf = d.conf(
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.7.0.0/24"}], [{"subnet": "10.7.1.0/30"}]]}),
    );
    add(&conf, "a", "eth0").ok();
    let before = d.reservations();
    let e = add(&conf, "b", "eth0").err();
    assert_eq!(
        e["msg"],
        "failed to allocate for range 1: no IP addresses available in range set: 10.7.1.1-10.7.1.2"
    );
    assert_eq!(d.reservations(), before, "10.7.0.3 must have been released");
}

#[test]
fn route_attributes_of_1_1_0_are_carried() {
    let d = DataDir::new("hlrt");
    let conf = d.conf(
        "1.1.0",
        json!({"subnet": "10.8.0.0/24", "routes": [
            {"dst": "0.0.0.0/0", "gw": "10.8.0.254", "mtu": 1400, "advmss": 1360, "priority": 100, "table": 50, "scope": 0},
            {"dst": "10.9.0.5/16"}
        ]}),
    );
    let r = add(&conf, "c", "eth0").ok();
    assert_eq!(
        r["routes"],
        json!([
            {"advmss": 1360, "dst": "0.0.0.0/0", "gw": "10.8.0.254", "mtu": 1400, "priority": 100, "scope": 0, "table": 50},
            {"dst": "10.9.0.5/16"}
        ])
    );
    // key order of 1.x results is sorted, as the Go library prints them
    assert!(
        add(
            &d.conf("1.1.0", json!({"subnet": "10.8.1.0/24"})),
            "c",
            "eth0"
        )
        .stdout
        .starts_with("{\n    \"cniVersion\": \"1.1.0\",\n    \"ips\": [")
    );
}

#[test]
fn requested_addresses_from_args_runtime_config_and_cni_args() {
    let d = DataDir::new("hlreq");
    let base = d.conf(
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.10.0.0/24"}], [{"subnet": "2001:db8:a::/64"}]]}),
    );
    // CNI_ARGS IP=, with and without a prefix
    let out = invocation(&ours(), "ADD", &base, "a", "eth0")
        .env("CNI_ARGS", "IP=10.10.0.50")
        .run()
        .ok();
    assert_eq!(result_ips(&out), ["10.10.0.50/24", "2001:db8:a::2/64"]);
    let out = invocation(&ours(), "ADD", &base, "b", "eth0")
        .env(
            "CNI_ARGS",
            "IgnoreUnknown=1;K8S_POD_NAME=x;IP=10.10.0.51/24",
        )
        .run()
        .ok();
    assert_eq!(result_ips(&out)[0], "10.10.0.51/24");
    // unknown CNI_ARGS without IgnoreUnknown
    let e = invocation(&ours(), "ADD", &base, "x", "eth0")
        .env("CNI_ARGS", "FOO=1")
        .run()
        .err();
    assert_eq!(e["msg"], r#"ARGS: unknown args ["FOO=1"]"#);
    // args.cni.ips, one per family
    let mut c = base.clone();
    c["args"] = json!({"cni": {"ips": ["10.10.0.60", "2001:db8:a::60/64"]}});
    assert_eq!(
        result_ips(&add(&c, "c", "eth0").ok()),
        ["10.10.0.60/24", "2001:db8:a::60/64"]
    );
    // runtimeConfig.ips (capability "ips")
    let mut c = base.clone();
    c["runtimeConfig"] = json!({"ips": ["2001:db8:a::70"]});
    assert_eq!(
        result_ips(&add(&c, "d", "eth0").ok()),
        ["10.10.0.61/24", "2001:db8:a::70/64"]
    );
    // last_reserved_ip follows requested addresses
    assert_eq!(
        std::fs::read_to_string(d.net_dir().join("last_reserved_ip.1")).unwrap(),
        "2001:db8:a::70"
    );

    let before = d.reservations();
    let fail = |c: &Value, env_ip: Option<&str>| {
        let mut inv = invocation(&ours(), "ADD", c, "z", "eth0");
        if let Some(ip) = env_ip {
            inv = inv.env("CNI_ARGS", format!("IP={ip}"));
        }
        inv.run().err()
    };
    // taken
    let e = fail(&base, Some("10.10.0.50"));
    assert_eq!(
        e["msg"],
        "failed to allocate for range 0: requested IP address 10.10.0.50 is not available in range set 10.10.0.1-10.10.0.254"
    );
    // the gateway
    let e = fail(&base, Some("10.10.0.1"));
    assert_eq!(
        e["msg"],
        "failed to allocate for range 0: requested ip 10.10.0.1 is subnet's gateway"
    );
    // outside every range
    let e = fail(&base, Some("10.99.0.1"));
    assert_eq!(e["msg"], "failed to allocate all requested IPs: 10.99.0.1");
    // two requests in one set
    let mut c = base.clone();
    c["args"] = json!({"cni": {"ips": ["10.10.0.80", "10.10.0.81"]}});
    assert_eq!(
        fail(&c, None)["msg"],
        "failed to allocate all requested IPs: 10.10.0.81"
    );
    // unparsable
    let e = fail(&base, Some("banana"));
    assert_eq!(
        e["msg"],
        r#"ARGS: error parsing value of pair "IP=banana": invalid IP address banana"#
    );
    let mut c = base.clone();
    c["runtimeConfig"] = json!({"ips": ["10.10.0.300"]});
    let e = fail(&c, None);
    assert_eq!(
        (e["msg"].as_str(), e["details"].as_str()),
        (
            Some("invalid IP address 10.10.0.300"),
            Some(r#"runtimeConfig.ips[0]: "10.10.0.300""#)
        )
    );
    assert_eq!(d.reservations(), before, "failed ADDs changed the store");
}

#[test]
fn runtime_ip_ranges_come_first() {
    let d = DataDir::new("hlrr");
    let mut conf = d.conf(
        "1.0.0",
        json!({"subnet": "10.11.0.0/24", "ranges": [[{"subnet": "2001:db8:b::/64"}]]}),
    );
    conf["runtimeConfig"] =
        json!({"ipRanges": [[{"subnet": "10.12.0.0/24", "rangeStart": "10.12.0.40"}]]});
    let r = add(&conf, "a", "eth0").ok();
    assert_eq!(
        result_ips(&r),
        ["10.12.0.40/24", "10.11.0.2/24", "2001:db8:b::2/64"]
    );
    assert_eq!(
        std::fs::read_to_string(d.net_dir().join("last_reserved_ip.0")).unwrap(),
        "10.12.0.40"
    );
    assert_eq!(
        std::fs::read_to_string(d.net_dir().join("last_reserved_ip.1")).unwrap(),
        "10.11.0.2"
    );
}

#[test]
fn default_data_dir_is_var_lib_cni_networks() {
    if !is_root() {
        eprintln!(
            "SKIP default_data_dir_is_var_lib_cni_networks: needs root to write /var/lib/cni/networks"
        );
        return;
    }
    let name = rcni_tests::unique("hldef");
    /// Removes the network's directory, and the parents this test created
    /// if they are empty.
    struct Cleanup(std::path::PathBuf, Vec<&'static str>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
            for p in &self.1 {
                let _ = std::fs::remove_dir(p);
            }
        }
    }
    let created: Vec<&'static str> = ["/var/lib/cni/networks", "/var/lib/cni"]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    let dir = Path::new("/var/lib/cni/networks").join(&name);
    let _cleanup = Cleanup(dir.clone(), created);
    let conf = json!({"cniVersion": "1.0.0", "name": name, "ipam": {"type": "host-local", "subnet": "10.13.0.0/24"}});
    add(&conf, "a", "eth0").ok();
    assert_eq!(
        std::fs::read_to_string(dir.join("10.13.0.2")).unwrap(),
        owner("a", "eth0")
    );
    del(&conf, "a", "eth0").ok();
}

#[test]
fn invalid_configs_are_errors_naming_key_and_value_and_touch_nothing() {
    let d = DataDir::new("hlbad");
    let dd = d.path().display().to_string();
    let n = d.name().to_string();
    let ipam = |extra: Value| {
        let mut m = json!({"type": "host-local", "dataDir": dd});
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        m
    };
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"cniVersion":"1.0.0","name":n}),
            "IPAM config missing 'ipam' key",
            "",
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({}))}),
            "no IP ranges specified",
            "ipam.subnet, ipam.ranges, runtimeConfig.ipRanges: none given",
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"ranges":[[]]}))}),
            "invalid range set 0: empty range set",
            "ipam.ranges[0]: []",
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/31"}))}),
            "invalid range set 0: Network 10.0.0.0/31 too small to allocate from",
            r#"ipam.subnet: "10.0.0.0/31""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/32"}))}),
            "invalid range set 0: Network 10.0.0.0/32 too small to allocate from",
            r#"ipam.subnet: "10.0.0.0/32""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"ranges":[[{"subnet":"2001:db8::/127"}]]}))}),
            "invalid range set 0: Network 2001:db8::/127 too small to allocate from",
            r#"ipam.ranges[0][0].subnet: "2001:db8::/127""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"ranges":[[{"subnet":"2001:db8::/128"}]]}))}),
            "invalid range set 0: Network 2001:db8::/128 too small to allocate from",
            r#"ipam.ranges[0][0].subnet: "2001:db8::/128""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.1/24"}))}),
            "invalid range set 0: Network has host bits set. For a subnet mask of length 24 the network address is 10.0.0.0",
            r#"ipam.subnet: "10.0.0.1/24""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/24","rangeStart":"10.0.1.1"}))}),
            "invalid range set 0: RangeStart 10.0.1.1 not in network 10.0.0.0/24",
            r#"ipam.rangeStart: "10.0.1.1""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/24","rangeEnd":"10.0.1.1"}))}),
            "invalid range set 0: RangeEnd 10.0.1.1 not in network 10.0.0.0/24",
            r#"ipam.rangeEnd: "10.0.1.1""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"ranges":[[{"subnet":"10.0.0.0/24"},{"subnet":"2001:db8::/64"}]]}))}),
            "invalid range set 0: mixed address families",
            r#"ipam.ranges[0][1].subnet: "2001:db8::/64""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"ranges":[[{"subnet":"10.1.0.0/22"},{"subnet":"10.1.2.0/24"}]]}))}),
            "invalid range set 0: subnets 10.1.0.1-10.1.3.254 and 10.1.2.1-10.1.2.254 overlap",
            r#"ipam.ranges[0][0].subnet: "10.1.0.0/22", ipam.ranges[0][1].subnet: "10.1.2.0/24""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.1.2.0/24","ranges":[[{"subnet":"10.1.0.0/16"}]]}))}),
            "range set 0 overlaps with 1",
            r#"ipam: "10.1.2.1-10.1.2.254", ipam.ranges[0]: "10.1.0.1-10.1.255.254""#,
        ),
        (
            json!({"cniVersion":"0.2.0","name":n,"ipam":ipam(json!({"ranges":[[{"subnet":"10.1.2.0/24"}],[{"subnet":"10.1.3.0/24"}]]}))}),
            "CNI version 0.2.0 does not support more than 1 address per family",
            r#"cniVersion: "0.2.0"; 2 IPv4 and 0 IPv6 range sets"#,
        ),
        (
            json!({"cniVersion":"0.1.0","name":n,"ipam":ipam(json!({"ranges":[[{"subnet":"2001:db8:1::/64"}],[{"subnet":"2001:db8:2::/64"}]]}))}),
            "CNI version 0.1.0 does not support more than 1 address per family",
            r#"cniVersion: "0.1.0"; 0 IPv4 and 2 IPv6 range sets"#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/33"}))}),
            "invalid CIDR address: 10.0.0.0/33",
            r#"ipam.subnet: "10.0.0.0/33""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/24","gateway":"10.0.0"}))}),
            "invalid IP address: 10.0.0",
            r#"ipam.gateway: "10.0.0""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/24","routes":[{"dst":"nope"}]}))}),
            "invalid CIDR address: nope",
            r#"ipam.routes[0].dst: "nope""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/24","resolvConf":7}))}),
            "ipam.resolvConf must be a string",
            "ipam.resolvConf: 7",
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/24"})),"args":{"cni":{"ips":"10.0.0.5"}}}),
            "args.cni.ips must be an array",
            r#"args.cni.ips: "10.0.0.5""#,
        ),
        (
            json!({"cniVersion":"1.0.0","name":n,"ipam":ipam(json!({"subnet":"10.0.0.0/24"})),"runtimeConfig":{"ipRanges":[[{"subnet":"10.0.0.0/31"}]]}}),
            "invalid range set 0: Network 10.0.0.0/31 too small to allocate from",
            r#"runtimeConfig.ipRanges[0][0].subnet: "10.0.0.0/31""#,
        ),
    ];
    for (conf, msg, details) in &cases {
        for cmd in ["ADD", "DEL", "CHECK", "STATUS", "GC"] {
            let mut conf = conf.clone();
            if cmd == "CHECK" && conf["cniVersion"] != "1.0.0" {
                continue;
            }
            if matches!(cmd, "STATUS" | "GC") {
                if conf["cniVersion"] != "1.0.0" {
                    continue;
                }
                conf["cniVersion"] = json!("1.1.0");
            }
            // DEL reads only name and dataDir: what ADD refuses in the
            // ranges and requested addresses is logged, and DEL succeeds.
            let del_refuses = [
                "IPAM config missing 'ipam' key",
                "invalid CIDR address: nope",
                "ipam.resolvConf must be a string",
            ];
            if cmd == "DEL" && !del_refuses.contains(msg) {
                let out = run(&ours(), cmd, &conf, "c1", "eth0");
                out.ok();
                assert!(out.stderr.contains(*msg), "{conf}: {out:?}");
                continue;
            }
            let e = run(&ours(), cmd, &conf, "c1", "eth0").err();
            assert_eq!(e["msg"], *msg, "{cmd} {conf}");
            assert_eq!(
                e["details"].as_str().unwrap_or(""),
                *details,
                "{cmd} {conf}"
            );
            assert_eq!(e["code"], 7, "{cmd} {conf}");
        }
    }
    // a resolv.conf that cannot be read fails the ADD
    let conf = d.conf(
        "1.0.0",
        json!({"subnet": "10.0.0.0/24", "resolvConf": "/nonexistent/resolv.conf"}),
    );
    let e = add(&conf, "c1", "eth0").err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .starts_with("failed to read resolvConf /nonexistent/resolv.conf: "),
        "{e}"
    );
    assert_eq!(
        e["details"],
        r#"ipam.resolvConf: "/nonexistent/resolv.conf""#
    );
    assert!(
        !d.path().exists(),
        "an invalid config created {}",
        d.path().display()
    );
}

#[test]
fn second_add_for_the_same_attachment_is_an_error() {
    let d = DataDir::new("hldup");
    let conf = d.conf(
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.14.0.0/24"}], [{"subnet": "2001:db8:e::/64"}]]}),
    );
    add(&conf, "a", "eth0").ok();
    let e = add(&conf, "a", "eth0").err();
    assert_eq!(
        e["msg"],
        "failed to allocate for range 0: 10.14.0.2 has been allocated to a, duplicate allocation is not allowed"
    );
    assert_eq!(e["code"], 999);
    // requested addresses do not get around it
    let e = invocation(&ours(), "ADD", &conf, "a", "eth0")
        .env("CNI_ARGS", "IP=10.14.0.9")
        .run()
        .err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("duplicate allocation is not allowed"),
        "{e}"
    );
    assert_eq!(d.reservations().len(), 2);
    // another interface of the same container is a new attachment
    assert_eq!(
        result_ips(&add(&conf, "a", "eth1").ok()),
        ["10.14.0.3/24", "2001:db8:e::3/64"]
    );
    // a duplicate made by a legacy (id-only) file counts as well
    std::fs::write(d.net_dir().join("10.14.0.100"), "legacy").unwrap();
    assert!(
        add(&conf, "legacy", "eth0").err()["msg"]
            .as_str()
            .unwrap()
            .contains("10.14.0.100 has been allocated to legacy")
    );
}

#[test]
fn del_releases_everything_of_the_attachment_and_is_idempotent() {
    let d = DataDir::new("hldel");
    let conf = d.conf(
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.15.0.0/24"}], [{"subnet": "2001:db8:f::/64"}]]}),
    );
    // a missing directory: success, and it is not created
    del(&conf, "nobody", "eth0").ok();
    assert!(!d.net_dir().exists());
    add(&conf, "a", "eth0").ok();
    add(&conf, "a", "eth1").ok();
    add(&conf, "b", "eth0").ok();
    // a file outside the configured ranges is still the attachment's
    std::fs::write(d.net_dir().join("10.99.0.1"), owner("a", "eth0")).unwrap();
    del(&conf, "a", "eth0").ok();
    let left: BTreeSet<String> = d.reservations().values().cloned().collect();
    assert_eq!(
        left,
        [owner("a", "eth1"), owner("b", "eth0")]
            .into_iter()
            .collect()
    );
    // unknown container, second DEL
    del(&conf, "zzz", "eth0").ok();
    del(&conf, "a", "eth0").ok();
    // legacy files holding only the container ID are released when the
    // attachment has no file of its own
    std::fs::write(d.net_dir().join("10.15.0.200"), "old\n").unwrap();
    del(&conf, "old", "eth0").ok();
    assert!(!d.net_dir().join("10.15.0.200").exists());
    // whitespace around the content is ignored
    std::fs::write(d.net_dir().join("10.15.0.201"), "  c9\r\neth0\n").unwrap();
    del(&conf, "c9", "eth0").ok();
    assert!(!d.net_dir().join("10.15.0.201").exists());
    assert!(d.files().contains(&"lock".to_string()));
}

#[test]
fn check_finds_the_reservation_or_fails() {
    let d = DataDir::new("hlchk");
    let conf = d.conf("1.0.0", json!({"subnet": "10.16.0.0/24"}));
    let e = check(&conf, "a", "eth0").err();
    assert_eq!(
        e["msg"],
        "host-local: Failed to find address added by container a"
    );
    add(&conf, "a", "eth0").ok();
    check(&conf, "a", "eth0").ok();
    let e = check(&conf, "a", "eth1").err();
    assert_eq!(
        e["msg"],
        "host-local: Failed to find address added by container a"
    );
    // a file written by someone else (the Go plugin) is found
    std::fs::write(d.net_dir().join("10.16.0.77"), owner("go", "eth0")).unwrap();
    check(&conf, "go", "eth0").ok();
    // legacy id-only file
    std::fs::write(d.net_dir().join("10.16.0.78"), "old").unwrap();
    check(&conf, "old", "eth3").ok();
    del(&conf, "a", "eth0").ok();
    assert_eq!(
        check(&conf, "a", "eth0").err()["msg"],
        "host-local: Failed to find address added by container a"
    );
    // CHECK needs 0.4.0
    let old = d.conf("0.3.1", json!({"subnet": "10.16.0.0/24"}));
    assert_eq!(
        check(&old, "go", "eth0").err()["msg"],
        "config version does not allow CHECK"
    );
}

fn with_attachments(conf: &Value, key: &str, list: Value) -> Value {
    let mut c = conf.clone();
    c[key] = list;
    c
}

#[test]
fn gc_removes_reservations_of_other_attachments() {
    let d = DataDir::new("hlgc");
    let conf = d.conf(
        "1.1.0",
        json!({"ranges": [[{"subnet": "10.17.0.0/24"}], [{"subnet": "2001:db8:11::/64"}]]}),
    );
    // another network in the same dataDir must not be touched
    let other_name = rcni_tests::unique("hlgco");
    let mut other_conf = conf.clone();
    other_conf["name"] = json!(other_name);
    add(&other_conf, "gone", "eth0").ok();

    // GC of a network without a directory: success, nothing created
    gc(&with_attachments(
        &conf,
        "cni.dev/valid-attachments",
        json!([]),
    ))
    .ok();
    assert!(!d.net_dir().exists());

    for cid in ["keep", "gone"] {
        add(&conf, cid, "eth0").ok();
    }
    add(&conf, "keep", "eth1").ok();
    std::fs::write(d.net_dir().join("10.17.0.100"), "").unwrap(); // empty (plugins#498)
    std::fs::write(d.net_dir().join("10.17.0.101"), [0xff, 0x00, 0x13]).unwrap();
    std::fs::write(d.net_dir().join("10.17.0.102"), "keep").unwrap(); // legacy, still valid
    std::fs::write(d.net_dir().join("10.17.0.103"), "dead").unwrap(); // legacy, not valid
    std::fs::create_dir(d.net_dir().join("10.17.0.104")).unwrap(); // unreadable

    let valid = json!([{"containerID": "keep", "ifname": "eth0"}, {"containerID": "nothere", "ifname": "eth0"}]);
    let out = gc(&with_attachments(
        &conf,
        "cni.dev/valid-attachments",
        valid.clone(),
    ));
    // the directory cannot be removed as a file: GC goes on and reports it
    let e = out.err();
    assert!(e["msg"].as_str().unwrap().contains("10.17.0.104"), "{e}");
    std::fs::remove_dir(d.net_dir().join("10.17.0.104")).unwrap();
    gc(&with_attachments(&conf, "cni.dev/valid-attachments", valid)).ok();
    let left: BTreeMap<String, String> = d.reservations();
    let want: BTreeMap<String, String> = [
        ("10.17.0.2".to_string(), owner("keep", "eth0")),
        ("2001:db8:11::2".to_string(), owner("keep", "eth0")),
        ("10.17.0.102".to_string(), "keep".to_string()),
    ]
    .into();
    assert_eq!(left, want);
    let files = d.files();
    for f in ["lock", "last_reserved_ip.0", "last_reserved_ip.1"] {
        assert!(files.contains(&f.to_string()), "{f} was removed: {files:?}");
    }
    // the misspelt key libcni also sends works alone
    add(&conf, "x", "eth0").ok();
    gc(&with_attachments(
        &conf,
        "cni.dev/attachments",
        json!([{"containerID": "x", "ifname": "eth0"}]),
    ))
    .ok();
    let left: BTreeSet<String> = d.reservations().values().cloned().collect();
    assert_eq!(left, [owner("x", "eth0")].into_iter().collect());
    // an empty list releases everything
    gc(&with_attachments(
        &conf,
        "cni.dev/valid-attachments",
        json!([]),
    ))
    .ok();
    assert!(d.reservations().is_empty());
    // and the next ADD works
    add(&conf, "y", "eth0").ok();
    // the other network is intact
    assert_eq!(reservations(&d.path().join(&other_name)).len(), 2);
    // GC needs 1.1.0
    let old = d.conf("1.0.0", json!({"subnet": "10.17.0.0/24"}));
    assert_eq!(gc(&old).err()["msg"], "config version does not allow GC");
}

#[test]
fn status_reports_whether_an_add_could_be_served() {
    let d = DataDir::new("hlst");
    let conf = d.conf(
        "1.1.0",
        json!({"ranges": [[{"subnet": "10.18.0.0/24"}], [{"subnet": "10.18.1.0/30"}]]}),
    );
    // a data dir that does not exist yet but can be created
    status(&conf).ok();
    assert!(!d.path().exists(), "STATUS created the data dir");
    add(&conf, "a", "eth0").ok();
    // set 1 (a /30: one address) is now full
    let e = status(&conf).err();
    assert_eq!(e["code"], 50);
    assert_eq!(
        e["msg"],
        "no IP addresses available in range set 1: 10.18.1.1-10.18.1.2"
    );
    del(&conf, "a", "eth0").ok();
    status(&conf).ok();
    // a data dir that cannot be created: its parent is a file
    let blocker = d.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let mut bad = conf.clone();
    bad["ipam"]["dataDir"] = json!(blocker.join("sub").display().to_string());
    let e = status(&bad).err();
    assert_eq!(e["code"], 50);
    assert!(
        e["msg"].as_str().unwrap().contains("is not a directory"),
        "{e}"
    );
    // ... and ADD fails there too
    let mut bad_add = bad.clone();
    bad_add["cniVersion"] = json!("1.0.0");
    assert_eq!(add(&bad_add, "a", "eth0").err()["code"], 5);
    // a network directory that cannot be written
    if !is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.net_dir(), std::fs::Permissions::from_mode(0o555)).unwrap();
        assert_eq!(status(&conf).err()["code"], 50);
        std::fs::set_permissions(d.net_dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // STATUS needs 1.1.0
    let old = d.conf("1.0.0", json!({"subnet": "10.18.0.0/24"}));
    assert_eq!(
        status(&old).err()["msg"],
        "config version does not allow STATUS"
    );
}

#[test]
fn parallel_adds_get_distinct_addresses() {
    let d = DataDir::new("hlpar");
    let conf = d.conf("1.0.0", json!({"subnet": "10.19.0.0/24"}));
    let ips: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..64)
            .map(|i| {
                let conf = &conf;
                s.spawn(move || result_ips(&add(conf, &format!("p{i}"), "eth0").ok()).remove(0))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: BTreeSet<&String> = ips.iter().collect();
    assert_eq!(distinct.len(), 64, "{ips:?}");
    let res = d.reservations();
    assert_eq!(res.len(), 64);
    let owners: BTreeSet<&String> = res.values().collect();
    assert_eq!(owners.len(), 64);
    // round robin over a fresh /24: exactly .2 ... .65
    let want: BTreeSet<String> = (2..66).map(|i| format!("10.19.0.{i}/24")).collect();
    assert_eq!(ips.into_iter().collect::<BTreeSet<_>>(), want);
    // and 64 parallel DELs release all
    std::thread::scope(|s| {
        for i in 0..64 {
            let conf = &conf;
            s.spawn(move || del(conf, &format!("p{i}"), "eth0").ok());
        }
    });
    assert!(d.reservations().is_empty());
}

#[test]
fn adds_killed_at_random_moments_leave_a_consistent_store() {
    let d = DataDir::new("hlkill");
    let conf = d.conf(
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.20.0.0/22"}], [{"subnet": "2001:db8:14::/64"}]]}),
    );
    // warm up: directory, lock and index exist, so kills land in the allocation
    add(&conf, "warm", "eth0").ok();
    let mut rng = Rng::from_time("adds_killed_at_random_moments_leave_a_consistent_store");
    let mut finished = 0;
    for round in 0..50 {
        // two at a time, so kills also land while one waits for the lock
        let mut children: Vec<_> = (0..2)
            .map(|j| spawn_add(&conf, &format!("k{round}-{j}"), "eth0"))
            .collect();
        std::thread::sleep(std::time::Duration::from_micros(rng.below(6000)));
        for c in &mut children {
            let _ = c.kill(); // SIGKILL
        }
        for c in &mut children {
            if c.wait().map(|s| s.success()).unwrap_or(false) {
                finished += 1;
            }
        }
    }
    // No temp file, index or anything else the Go plugin would not have.
    assert_eq!(not_go_files(&d.net_dir()), Vec::<String>::new());
    eprintln!(
        "{finished} of 100 killed ADDs had finished before the kill; {} reservations",
        d.reservations().len()
    );
    let check_store = |phase: &str| {
        let res = d.reservations();
        let mut per_owner: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (ip, content) in &res {
            let (cid, ifname) = content.split_once("\r\n").unwrap_or_else(|| {
                panic!("{phase}: {ip} holds an incomplete reservation {content:?}")
            });
            assert_eq!(ifname, "eth0", "{phase}: {ip}: {content:?}");
            assert!(
                cid == "warm" || cid.starts_with('k') || cid == "after",
                "{phase}: {ip}: {content:?}"
            );
            per_owner.entry(cid).or_default().push(ip);
        }
        for (cid, ips) in &per_owner {
            assert!(ips.len() <= 2, "{phase}: {cid} holds {ips:?}");
            if ips.len() == 2 {
                assert!(
                    ips.iter().any(|i| i.contains(':')) && ips.iter().any(|i| !i.contains(':')),
                    "{phase}: {cid} holds {ips:?}"
                );
            }
        }
        for f in ["last_reserved_ip.0", "last_reserved_ip.1"] {
            let t = std::fs::read_to_string(d.net_dir().join(f)).unwrap();
            t.parse::<std::net::IpAddr>()
                .unwrap_or_else(|_| panic!("{phase}: {f} holds {t:?}"));
        }
    };
    check_store("after the kills");
    // the next ADD succeeds, cleans up stale temp files and keeps the store consistent
    let r = add(&conf, "after", "eth0").ok();
    assert_eq!(result_ips(&r).len(), 2);
    check_store("after the next ADD");
    assert_eq!(not_go_files(&d.net_dir()), Vec::<String>::new());
    // an interrupted ADD may have left a reservation (the runtime DELs it);
    // DEL of every container then empties the store
    for round in 0..50 {
        for j in 0..2 {
            del(&conf, &format!("k{round}-{j}"), "eth0").ok();
        }
    }
    del(&conf, "warm", "eth0").ok();
    del(&conf, "after", "eth0").ok();
    assert_eq!(
        d.files(),
        ["last_reserved_ip.0", "last_reserved_ip.1", "lock"]
    );
}

/// ADDs of the Go plugin and ours, alternating and in parallel on one
/// network: no address is handed out twice, and each DELs the other's.
#[test]
fn interoperates_with_the_go_plugin() {
    let Some(go) = go_bin("host-local") else {
        eprintln!("SKIP interoperates_with_the_go_plugin: /usr/lib/cni/host-local is missing");
        return;
    };
    let ours = ours();
    let d = DataDir::new("hlgo");
    // Debian's Go build accepts cniVersion up to 1.0.0.
    let conf = d.conf(
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.21.0.0/24"}], [{"subnet": "2001:db8:15::/64"}]]}),
    );

    // Sequential alternation shares one round-robin position.
    let mut seq = Vec::new();
    for i in 0..6 {
        let p = if i % 2 == 0 { &go } else { &ours };
        let r = run(p, "ADD", &conf, &format!("s{i}"), "eth0").ok();
        seq.push(result_ips(&r).remove(0));
    }
    let want: Vec<String> = (2..8).map(|i| format!("10.21.0.{i}/24")).collect();
    assert_eq!(seq, want);

    // 50 + 50 in parallel.
    let results: Vec<(bool, String, Vec<String>)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..100)
            .map(|i| {
                let (go, ours, conf) = (&go, &ours, &conf);
                s.spawn(move || {
                    let is_go = i % 2 == 0;
                    let cid = format!("{}{i}", if is_go { "go" } else { "rs" });
                    let out = run(if is_go { go } else { ours }, "ADD", conf, &cid, "eth0");
                    (is_go, cid, result_ips(&out.ok()))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<String> = seq.clone();
    for (_, _, ips) in &results {
        assert_eq!(ips.len(), 2);
        all.extend(ips.iter().cloned());
    }
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "an address was handed out twice");
    let res = d.reservations();
    assert_eq!(res.len(), 2 * 106);
    for (is_go, cid, ips) in &results {
        for ip in ips {
            let name = ip.split('/').next().unwrap();
            assert_eq!(
                res.get(name),
                Some(&owner(cid, "eth0")),
                "{ip} of {cid} (go: {is_go})"
            );
        }
    }
    // Each CHECKs and DELs the other's, in parallel.
    std::thread::scope(|s| {
        for (is_go, cid, _) in &results {
            let (go, ours, conf) = (&go, &ours, &conf);
            s.spawn(move || {
                let other = if *is_go { ours } else { go };
                run(other, "CHECK", conf, cid, "eth0").ok();
                run(other, "DEL", conf, cid, "eth0").ok();
            });
        }
    });
    for i in 0..6 {
        let p = if i % 2 == 0 { &ours } else { &go };
        run(p, "DEL", &conf, &format!("s{i}"), "eth0").ok();
    }
    assert!(d.reservations().is_empty(), "{:?}", d.reservations());
    // Go sees our ADD as a duplicate, and we see Go's.
    run(&go, "ADD", &conf, "dup", "eth0").ok();
    assert!(
        add(&conf, "dup", "eth0").err()["msg"]
            .as_str()
            .unwrap()
            .contains("duplicate allocation")
    );
    add(&conf, "dup2", "eth0").ok();
    assert!(
        run(&go, "ADD", &conf, "dup2", "eth0").err()["msg"]
            .as_str()
            .unwrap()
            .contains("duplicate allocation")
    );
}

/// The pid of a child of `parent` running `exe`, once it is blocked
/// reading its stdin (by then the skel has noted who its parent is).
fn child_reading_stdin(parent: u32, exe: &Path) -> Option<u32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // "pid (comm) state ppid ...": the comm may hold spaces.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(parent) || std::fs::read_link(e.path().join("exe")).ok()? != exe {
            continue;
        }
        // /proc/<pid>/syscall: "0 0x0 …" is read(0, …) on x86_64 and arm64
        // numbers it 63; accept either.
        let sc = std::fs::read_to_string(e.path().join("syscall")).unwrap_or_default();
        if sc.starts_with("0 0x0 ") || sc.starts_with("63 0x0 ") {
            return Some(pid);
        }
    }
    None
}

/// A bridge or ptp killed mid-ADD leaves its IPAM child running, and the
/// runtime may send DEL before that child reserves: the address would
/// leak. host-local notes its parent when it starts; if the parent has
/// gone by the time it has reserved, it gives the addresses back (still
/// under the lock) and fails.
#[test]
fn add_whose_caller_died_gives_the_address_back() {
    use std::io::Write;
    use std::process::Command;
    let d = DataDir::new("hlorphan");
    let conf = d.conf("1.0.0", json!({"subnet": "10.1.77.0/24"}));
    std::fs::create_dir_all(d.path()).unwrap();
    let fifo = d.path().join("stdin");
    let out = d.path().join("stdout");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // A write end held open (O_RDWR does not wait for a reader): the plugin
    // blocks reading its stdin instead of seeing EOF.
    let mut writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let exe = ours();
    // `; true` keeps the shell from exec'ing the plugin: the shell is the
    // parent, and the one this test kills.
    let mut parent = Command::new("sh")
        .args(["-c", "\"$0\" < \"$1\" > \"$2\"; true"])
        .arg(&exe)
        .arg(&fifo)
        .arg(&out)
        .env("CNI_COMMAND", "ADD")
        .env("CNI_CONTAINERID", "orphan")
        .env("CNI_NETNS", NO_NETNS)
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", "/nonexistent")
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + HANG;
    let plugin = loop {
        if let Some(pid) = child_reading_stdin(parent.id(), &exe) {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "host-local never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    parent.kill().unwrap();
    parent.wait().unwrap();
    writer.write_all(conf.to_string().as_bytes()).unwrap();
    drop(writer);
    // The plugin now belongs to another parent; wait for it to finish.
    let gone = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
    };
    while !gone(plugin) {
        assert!(
            std::time::Instant::now() < deadline,
            "host-local did not finish"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let answer: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(
        answer["msg"]
            .as_str()
            .unwrap_or_default()
            .contains("has exited: released [10.1.77.2]"),
        "{answer}"
    );
    assert!(d.reservations().is_empty(), "{:?}", d.reservations());
    // A caller that stays gets its address as usual.
    let r = add(&conf, "orphan", "eth0").ok();
    assert_eq!(r["ips"][0]["address"], "10.1.77.3/24", "{r}");
}

/// A delegating plugin killed between starting host-local and host-local's
/// first look at its parent: host-local's parent is already someone else,
/// so only the pid the delegator named (`RCNI_INVOKER_PID`) tells it that
/// nobody waits for the address. It gives the address back. kill9_tap
/// left a reservation behind this way under user-mode-linux (a DEL that
/// ran before the orphan reserved); this failed before the variable.
#[test]
fn add_whose_delegator_died_before_it_looked_gives_the_address_back() {
    let d = DataDir::new("hlgone");
    let conf = d.conf("1.0.0", json!({"subnet": "10.1.78.0/24"}));
    // A pid that has exited (and was reaped): the delegator.
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    let out = invocation(&ours(), "ADD", &conf, "gone", "eth0")
        .env("RCNI_INVOKER_PID", pid.to_string())
        .run();
    let e = out.err();
    assert!(
        rcni_tests::error_msg(&e).contains("has exited: released [10.1.78.2]"),
        "{e}"
    );
    assert!(d.reservations().is_empty(), "{:?}", d.reservations());
    // Run by the named process itself, or through a shell that it ran,
    // the ADD keeps its address.
    let me = std::process::id().to_string();
    let r = invocation(&ours(), "ADD", &conf, "kept", "eth0")
        .env("RCNI_INVOKER_PID", &me)
        .run()
        .ok();
    assert_eq!(r["ips"][0]["address"], "10.1.78.3/24", "{r}");
    let r = invocation(&ours(), "ADD", &conf, "shell", "eth0")
        .env("RCNI_INVOKER_PID", &me)
        .via(&["sh", "-c", "\"$0\" \"$@\"; exit $?"])
        .run()
        .ok();
    assert_eq!(r["ips"][0]["address"], "10.1.78.4/24", "{r}");
    assert_eq!(d.reservations().len(), 2, "{:?}", d.reservations());
}

/// What another process can observe of a network directory without the
/// lock: every name with its content and inode, and the directory's mtime.
type Observed = (BTreeMap<String, (Vec<u8>, u64)>, (i64, i64));

fn observed(dir: &Path) -> Observed {
    use std::os::unix::fs::MetadataExt;
    let files = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().into_string().unwrap();
            let data = std::fs::read(e.path()).unwrap();
            (name, (data, e.metadata().unwrap().ino()))
        })
        .collect();
    let m = std::fs::metadata(dir).unwrap();
    (files, (m.mtime(), m.mtime_nsec()))
}

/// The network directory holds exactly what the Go plugin holds there:
/// after ADD, after failed ADD, CHECK and STATUS (which change nothing at
/// all), after GC and after the last DEL. The cache is elsewhere (in /run,
/// when it can be written) and goes with the last DEL.
#[test]
fn the_network_directory_holds_only_the_go_plugins_files() {
    let d = DataDir::new("hlgof");
    let conf = d.conf(
        "1.1.0",
        json!({"ranges": [[{"subnet": "10.129.0.0/24"}], [{"subnet": "fd29:129::/64"}]]}),
    );
    let cache_written = is_root();
    let go_after_add = |ips: &[&str]| {
        let mut v: Vec<String> = ips.iter().map(|s| s.to_string()).collect();
        v.extend(["last_reserved_ip.0", "last_reserved_ip.1", "lock"].map(String::from));
        v.sort();
        v
    };

    add(&conf, "c1", "eth0").ok();
    assert_eq!(d.files(), go_after_add(&["10.129.0.2", "fd29:129::2"]));
    let cache = host_local::store::cache_file(&d.net_dir()).unwrap();
    assert_eq!(cache.is_file(), cache_written, "{}", cache.display());

    // Failed ADD (the attachment has its addresses), failed and passing
    // CHECK, STATUS: nothing changes, not even the directory's mtime.
    let before = observed(&d.net_dir());
    assert!(
        add(&conf, "c1", "eth0").err()["msg"]
            .as_str()
            .unwrap()
            .contains("c1")
    );
    check(&conf, "c9", "eth0").err();
    check(&conf, "c1", "eth0").ok();
    status(&conf).ok();
    assert_eq!(observed(&d.net_dir()), before);

    for c in ["c2", "c3"] {
        add(&conf, c, "eth0").ok();
    }
    assert_eq!(
        d.files(),
        go_after_add(&[
            "10.129.0.2",
            "10.129.0.3",
            "10.129.0.4",
            "fd29:129::2",
            "fd29:129::3",
            "fd29:129::4"
        ])
    );
    gc(&with_attachments(
        &conf,
        "cni.dev/valid-attachments",
        json!([{"containerID": "c1", "ifname": "eth0"}]),
    ))
    .ok();
    assert_eq!(d.files(), go_after_add(&["10.129.0.2", "fd29:129::2"]));
    assert_eq!(cache.is_file(), cache_written);

    del(&conf, "c1", "eth0").ok();
    assert_eq!(d.files(), go_after_add(&[]));
    assert!(!cache.exists(), "the last DEL leaves {}", cache.display());

    // A range with one free address: the second ADD fails, changing
    // nothing; so does STATUS, which reports the range full.
    let small = DataDir::new("hlgos");
    let conf = small.conf("1.1.0", json!({"subnet": "10.129.1.0/30"}));
    add(&conf, "a", "eth0").ok();
    let before = observed(&small.net_dir());
    let e = add(&conf, "b", "eth0").err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("no IP addresses available"),
        "{e}"
    );
    assert_eq!(status(&conf).err()["code"], 50);
    assert_eq!(observed(&small.net_dir()), before);
    assert_eq!(small.files(), ["10.129.1.2", "last_reserved_ip.0", "lock"]);
    del(&conf, "a", "eth0").ok();
    assert_eq!(small.files(), ["last_reserved_ip.0", "lock"]);
}

/// A plugin run through `wrapper` (a program and its arguments, then the
/// plugin's path), with the environment of a runtime.
fn run_wrapped(
    wrapper: &[&str],
    command: &str,
    conf: &Value,
    cid: &str,
) -> rcni_tests::PluginOutput {
    invocation(&ours(), command, conf, cid, "eth0")
        .via(wrapper)
        .run()
}

/// Where the cache cannot be written (a read-only /run, another user),
/// host-local works as usual, on the slow path, without a word on stderr.
#[test]
fn without_a_writable_cache_host_local_still_works() {
    if rcni_tests::skip_unless_root("without_a_writable_cache_host_local_still_works") {
        return;
    }
    let ro_run = [
        "unshare",
        "-m",
        "sh",
        "-c",
        "mkdir -p /run/cni-rcni && mount -t tmpfs -o ro tmpfs /run/cni-rcni && exec \"$0\"",
    ];
    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    for (i, wrapper) in [&ro_run[..], &nobody[..]].into_iter().enumerate() {
        let d = DataDir::new("hlnoc");
        std::fs::create_dir_all(d.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let conf = d.conf("1.1.0", json!({"subnet": format!("10.129.{}.0/24", 2 + i)}));
        for c in ["n1", "n2", "n3"] {
            let out = run_wrapped(wrapper, "ADD", &conf, c);
            assert_eq!(out.stderr, "", "{wrapper:?}");
            out.ok();
        }
        let cache = host_local::store::cache_file(&d.net_dir()).unwrap();
        assert!(!cache.exists(), "{wrapper:?} wrote {}", cache.display());
        // Each session read everything: the duplicate is still found.
        let out = run_wrapped(wrapper, "ADD", &conf, "n2");
        assert!(
            out.err()["msg"].as_str().unwrap().contains("n2"),
            "{wrapper:?}"
        );
        let out = run_wrapped(wrapper, "CHECK", &conf, "n3");
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (0, ""),
            "{wrapper:?} {out:?}"
        );
        for c in ["n1", "n2", "n3"] {
            let out = run_wrapped(wrapper, "DEL", &conf, c);
            assert_eq!(
                (out.code, out.stderr.as_str()),
                (0, ""),
                "{wrapper:?} {out:?}"
            );
        }
        assert_eq!(d.files(), ["last_reserved_ip.0", "lock"], "{wrapper:?}");
    }
}

/// A symlink planted at `last_reserved_ip.0` is replaced by the plugin's
/// own file, never written through (issue 25): the file it points to keeps
/// its bytes. The ADD still succeeds and takes the address after the hint,
/// as the reference's would (the reference reads the hint through the link
/// too, but also writes through it).
#[test]
fn lk_last_reserved_symlink_is_replaced_not_followed() {
    let d = DataDir::new("lkhl");
    let conf = d.conf("1.0.0", json!({"subnet": "10.152.1.0/24"}));
    assert_eq!(
        result_ips(&add(&conf, "c1", "eth0").ok()),
        ["10.152.1.2/24"]
    );
    let outside = d.path().join("outside");
    std::fs::write(&outside, "10.152.1.2").unwrap();
    let hint = d.net_dir().join("last_reserved_ip.0");
    std::fs::remove_file(&hint).unwrap();
    std::os::unix::fs::symlink(&outside, &hint).unwrap();

    let out = add(&conf, "c2", "eth0");
    assert_eq!(result_ips(&out.ok()), ["10.152.1.3/24"]);
    assert_eq!(out.stderr, "");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "10.152.1.2");
    let m = std::fs::symlink_metadata(&hint).unwrap();
    assert!(m.file_type().is_file(), "{m:?}");
    assert_eq!(std::fs::read_to_string(&hint).unwrap(), "10.152.1.3");
    for c in ["c1", "c2"] {
        del(&conf, c, "eth0").ok();
    }
}

/// The bound on a plugin run that must not hang (a FIFO opened or read, a
/// lock waited for with a deadline of its own): the plugin answers in
/// milliseconds, but under scripts/vmtest's uml (one CPU, eight test
/// threads, the kill-at-random-moments tests beside) one ADD took over 10 s
/// (CI of abd67b4). Far short of forever, which is what a hang is.
const HANG: Duration = Duration::from_secs(120);

/// A store lock held and never released (a stuck writer) makes ADD fail
/// within `RCNI_LOCK_TIMEOUT` (code 11, naming the lock file) instead of
/// waiting forever; the lock file stays the reference's `<dir>/lock`.
#[test]
fn lk_store_lock_wait_is_bounded() {
    if !rcni_tests::skip_without_tools("lk_store_lock_wait_is_bounded", &["timeout"]) {
        let d = DataDir::new("lkhw");
        let conf = d.conf("1.0.0", json!({"subnet": "10.152.11.0/24"}));
        add(&conf, "c1", "eth0").ok();
        let lock = d.net_dir().join("lock");
        let holder = std::fs::File::open(&lock).unwrap();
        holder.lock().unwrap();
        let t = std::time::Instant::now();
        let out = invocation(&ours(), "ADD", &conf, "c2", "eth0")
            .env("RCNI_LOCK_TIMEOUT", "1")
            .via(&["timeout", &HANG.as_secs().to_string()])
            .run();
        let took = t.elapsed();
        drop(holder);
        let e = out.err();
        assert_eq!(e["code"], 11, "{e}");
        assert!(
            e["msg"]
                .as_str()
                .unwrap()
                .contains(&lock.display().to_string()),
            "{e}"
        );
        assert!(
            e["msg"].as_str().unwrap().contains("timed out after 1s"),
            "{e}"
        );
        // Not hung (a run costs seconds in the VMs).
        assert!(took.as_secs_f64() >= 1.0 && took < HANG, "{took:?}");
        // Released: the next ADD goes through.
        assert_eq!(
            result_ips(&add(&conf, "c2", "eth0").ok()),
            ["10.152.11.3/24"]
        );
    }
}

/// Symlinks planted in the network directory are never read through: one
/// named as an address pointing at a file that holds an attachment's owner
/// text does not make that attachment an owner (CHECK fails, its ADD is no
/// duplicate, its DEL leaves the link), one pointing at a FIFO does not
/// hang the plugin under the lock, and a `last_reserved_ip.0` link is no
/// round-robin hint. The links stay taken addresses (their names exist)
/// until GC removes them as unreadable; what they point to keeps its bytes.
#[test]
fn hs_symlinks_in_the_network_directory_are_not_followed() {
    use std::os::unix::fs::symlink;
    let d = DataDir::new("hssym");
    let conf = d.conf("1.1.0", json!({"subnet": "10.174.1.0/24"}));
    assert_eq!(
        result_ips(&add(&conf, "hs-c1", "eth0").ok()),
        ["10.174.1.2/24"]
    );
    let outside = d.path().join("outside");
    std::fs::write(&outside, owner("hs-victim", "eth0")).unwrap();
    let hint = d.path().join("hint");
    std::fs::write(&hint, "10.174.1.50").unwrap();
    let fifo = d.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let net = d.net_dir();
    symlink(&outside, net.join("10.174.1.9")).unwrap();
    symlink(&fifo, net.join("10.174.1.10")).unwrap();
    let last = net.join("last_reserved_ip.0");
    std::fs::remove_file(&last).unwrap();
    symlink(&hint, &last).unwrap();
    let bounded = |command: &str, cid: &str| {
        invocation(&ours(), command, &conf, cid, "eth0")
            .timeout(HANG)
            .run()
    };

    // Through the links, hs-victim would own 10.174.1.9 (and the FIFO
    // would block the read until the timeout kills the plugin).
    let out = bounded("CHECK", "hs-victim");
    assert_eq!(out.signal, None, "{out:?}");
    assert!(
        rcni_tests::error_msg(&out.err())
            .contains("Failed to find address added by container hs-victim"),
        "{out:?}"
    );
    // Not a duplicate; the hint's 10.174.1.50 is not read, so the walk
    // starts at the range's start (.2 is taken).
    let out = bounded("ADD", "hs-victim");
    assert_eq!(result_ips(&out.ok()), ["10.174.1.3/24"], "{out:?}");
    // The new hint is the plugin's own file; the link's target is intact.
    assert!(
        std::fs::symlink_metadata(&last)
            .unwrap()
            .file_type()
            .is_file()
    );
    assert_eq!(std::fs::read_to_string(&hint).unwrap(), "10.174.1.50");
    // DEL releases the attachment's own file only.
    bounded("DEL", "hs-victim").ok();
    for l in ["10.174.1.9", "10.174.1.10"] {
        assert!(
            std::fs::symlink_metadata(net.join(l))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{l}"
        );
    }
    assert!(!net.join("10.174.1.3").exists());
    // GC removes the links (unreadable reservations), not their targets.
    let out = invocation(
        &ours(),
        "GC",
        &with_attachments(
            &conf,
            "cni.dev/valid-attachments",
            json!([{"containerID": "hs-c1", "ifname": "eth0"}]),
        ),
        "",
        "",
    )
    .timeout(HANG)
    .run();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(d.files(), ["10.174.1.2", "last_reserved_ip.0", "lock"]);
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        owner("hs-victim", "eth0")
    );
    del(&conf, "hs-c1", "eth0").ok();
}

/// DEL appends a removal line to the index and restamps it rather than
/// rewriting it: a DEL killed at any moment must never leave an index that
/// the next ADD trusts and that says a holder holds nothing (the ADD would
/// then give that holder a second address). After each kill every holder's
/// ADD is refused while its file exists, and gives it one address when the
/// killed DEL had removed it.
#[test]
fn dd_dels_killed_at_random_moments_never_make_the_index_lie() {
    let d = DataDir::new("dd-hldelkill");
    let conf = d.conf("1.0.0", json!({"subnet": "10.179.8.0/24"}));
    let holders: Vec<String> = (0..12).map(|i| format!("dd{i}")).collect();
    for h in &holders {
        add(&conf, h, "eth0").ok();
    }
    let mut rng = Rng::from_time("dd_dels_killed_at_random_moments_never_make_the_index_lie");
    let (mut killed, mut readded) = (0, 0);
    for round in 0..60 {
        let victim = &holders[rng.below(holders.len() as u64) as usize];
        let mut child = invocation(&ours(), "DEL", &conf, victim, "eth0").spawn();
        std::thread::sleep(std::time::Duration::from_micros(rng.below(2000)));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        killed += usize::from(!status.success());
        let res = d.reservations();
        for h in &holders {
            let held = res.values().filter(|c| **c == owner(h, "eth0")).count();
            assert!(
                held <= 1,
                "round {round}: {h} holds {held} addresses: {res:?}"
            );
            let out = add(&conf, h, "eth0");
            if held == 1 {
                let e = out.err();
                assert!(
                    e["msg"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("duplicate allocation is not allowed"),
                    "round {round}: {h} holds an address, yet ADD gave: {e}"
                );
            } else {
                assert_eq!(result_ips(&out.ok()).len(), 1, "round {round}: {h}");
                readded += 1;
            }
        }
        let res = d.reservations();
        for h in &holders {
            let held = res.values().filter(|c| **c == owner(h, "eth0")).count();
            assert_eq!(held, 1, "round {round}: {h}: {res:?}");
        }
    }
    assert_eq!(not_go_files(&d.net_dir()), Vec::<String>::new());
    eprintln!("60 DELs: {killed} killed before they finished, {readded} holders added again");
    for h in &holders {
        del(&conf, h, "eth0").ok();
    }
    assert!(d.reservations().is_empty());
}

/// The network's lock file is opened without following a symlink planted
/// in its place (and a FIFO there does not block the open): ADD fails
/// naming the file, and neither the link's target nor anything else is
/// touched.
#[test]
fn lk_a_planted_lock_file_is_not_followed() {
    use std::os::unix::fs::symlink;
    let d = DataDir::new("lksym");
    let conf = d.conf("1.1.0", json!({"subnet": "10.196.1.0/24"}));
    assert_eq!(
        result_ips(&add(&conf, "lk-c1", "eth0").ok()),
        ["10.196.1.2/24"]
    );
    let net = d.net_dir();
    let lock = net.join("lock");
    let target = d.path().join("target");
    std::fs::write(&target, "untouched").unwrap();
    std::fs::remove_file(&lock).unwrap();
    symlink(&target, &lock).unwrap();
    let out = invocation(&ours(), "ADD", &conf, "lk-c2", "eth0")
        .timeout(HANG)
        .run();
    assert_eq!(out.signal, None, "{out:?}");
    assert!(
        rcni_tests::error_msg(&out.err()).contains("lock file"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    assert!(!net.join("10.196.1.3").exists());

    // A FIFO in its place: the open does not wait for a writer.
    std::fs::remove_file(&lock).unwrap();
    nix::unistd::mkfifo(&lock, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let out = invocation(&ours(), "DEL", &conf, "lk-c1", "eth0")
        .timeout(HANG)
        .run();
    assert_eq!(out.signal, None, "{out:?}");
}
