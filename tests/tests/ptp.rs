//! The ptp plugin, exec'd as a runtime does. Every test creates its own
//! private "host" namespace (`pth…`) where the plugin runs, and container
//! namespaces (`ptc…`), so the real host's links, routes, sysctls and
//! firewall are never touched. Each test has its own subnets
//! (10.40.N.0/24, fd40:N::/64) and host-local data directory; namespaces
//! and directories are removed on drop, also when a test fails.
//!
//! Where it is meaningful, the same config also runs through the Go
//! reference (/usr/lib/cni/ptp with its host-local, cniVersion 1.0.0) in a
//! second pair of namespaces, and the kernel state of both is compared.

// Everything here is test code, helpers included.
#![cfg(test)]

mod common;

use common::{masq_expected, masq_lines};
use rcni_tests::fw_tools::Tools;
use rcni_tests::host_local_util::DataDir;
use rcni_tests::netns_setup::sysctls;
use rcni_tests::{
    FIREWALL_TOOLS, Invocation, Netns, PluginOutput, bin, error_msg, go_bin, skip_unless,
    skip_unless_root, unique,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A private "host" namespace: lo up, FORWARD accepting (only in there).
fn host_ns() -> Netns {
    let host = Netns::new("pth");
    host.exec_ok("ip", &["link", "set", "lo", "up"]);
    // A new namespace's FORWARD policy is ACCEPT already; make it explicit.
    let _ = host.exec("iptables", &["-P", "FORWARD", "ACCEPT"]);
    host
}

fn container_ns() -> Netns {
    Netns::new("ptc")
}

/// A ptp config for subnet number `n` (10.40.n.0/24; with `v6` also
/// fd40:n::/64), merged with `extra` at the top level.
fn conf(data: &DataDir, version: &str, n: u8, v4: bool, v6: bool, extra: Value) -> Value {
    let mut ranges = Vec::new();
    if v4 {
        ranges.push(json!([{"subnet": format!("10.40.{n}.0/24")}]));
    }
    if v6 {
        ranges.push(json!([{"subnet": format!("fd40:{n}::/64")}]));
    }
    let mut c = json!({
        "cniVersion": version,
        "name": data.name(),
        "type": "ptp",
        "ipam": {
            "type": "host-local",
            "dataDir": data.path().display().to_string(),
            "ranges": ranges,
        },
    });
    if let (Some(m), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
    c
}

fn ours() -> PathBuf {
    bin("ptp")
}

fn run(
    plugin: &Path,
    cmd: &str,
    cid: &str,
    host: &Netns,
    cont: &Netns,
    conf: &Value,
) -> PluginOutput {
    Invocation::new(plugin, cmd)
        .attach(cid, cont, "eth0")
        .in_host(host)
        .config(conf)
        .run()
}

fn add(cid: &str, host: &Netns, cont: &Netns, conf: &Value) -> Value {
    run(&ours(), "ADD", cid, host, cont, conf).ok()
}

fn del(cid: &str, host: &Netns, cont: &Netns, conf: &Value) {
    run(&ours(), "DEL", cid, host, cont, conf).ok();
}

/// A CHECK/DEL config: the ADD result as prevResult.
fn with_prev(conf: &Value, result: &Value) -> Value {
    let mut c = conf.clone();
    c["prevResult"] = result.clone();
    c
}

/// The addresses of a result (without prefix), in order.
fn result_ips(result: &Value) -> Vec<String> {
    result["ips"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["address"].as_str())
                .map(|s| s.split('/').next().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn host_veth_name(result: &Value) -> String {
    result["interfaces"][0]["name"]
        .as_str()
        .expect("host interface")
        .to_string()
}

/// Pings `dst` from `ns`, retrying for up to 5 s (IPv6 neighbours take a moment).
fn ping(ns: &Netns, dst: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = ns.exec("ping", &["-c", "1", "-W", "1", dst]);
        if out.status.success() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn link_mtu(ns: &Netns, name: &str) -> u64 {
    ns.ip_json(&["link", "show", name])[0]["mtu"]
        .as_u64()
        .expect("mtu")
}

/// Routes of a namespace, normalised for comparison: host veth names
/// become `HOSTVETH`; link-local routes and the protocol are left out.
fn routes(ns: &Netns) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for fam in ["-4", "-6"] {
        let v = ns.ip_json(&[fam, "route", "show"]);
        for r in v.as_array().cloned().unwrap_or_default() {
            let dst = r["dst"].as_str().unwrap_or_default();
            if dst.starts_with("fe80") || dst.starts_with("ff00") {
                continue;
            }
            let dev = r["dev"].as_str().unwrap_or_default();
            let dev = if dev.starts_with("veth") {
                "HOSTVETH"
            } else {
                dev
            };
            out.insert(format!(
                "{dst} via {} dev {dev} scope {} src {} metric {}",
                r["gateway"].as_str().unwrap_or("-"),
                r["scope"].as_str().unwrap_or("global"),
                r["prefsrc"].as_str().unwrap_or("-"),
                r["metric"].as_u64().unwrap_or(0),
            ));
        }
    }
    out
}

/// The kernel state an ADD leaves, normalised: container addresses and
/// routes, host veth addresses, MTUs, host routes.
fn kernel_state(host: &Netns, cont: &Netns, result: &Value) -> Vec<String> {
    let hv = host_veth_name(result);
    let mut s = vec![format!(
        "mtu cont {} host {}",
        link_mtu(cont, "eth0"),
        link_mtu(host, &hv)
    )];
    s.extend(
        cont.addrs("eth0")
            .into_iter()
            .map(|a| format!("cont addr {a}")),
    );
    s.extend(routes(cont).into_iter().map(|r| format!("cont route {r}")));
    s.extend(
        host.addrs(&hv)
            .into_iter()
            .map(|a| format!("host addr {a}")),
    );
    s.extend(routes(host).into_iter().map(|r| format!("host route {r}")));
    s
}

/// Runs `conf` (cniVersion 1.0.0) through ours and the Go reference, each
/// in fresh namespaces with its own data dir, and compares the kernel
/// state and the result's shape. Returns ours (host, container, result).
fn compare_with_go(test: &str, conf_for: impl Fn(&DataDir) -> Value) -> Option<Vec<String>> {
    let Some(go) = go_bin("ptp") else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIP {test}: Go comparison (/usr/lib/cni/ptp missing)"
        );
        return None;
    };
    let mut states = Vec::new();
    let mut shapes = Vec::new();
    for plugin in [ours(), go] {
        let data = DataDir::new("ptg");
        let (host, cont) = (host_ns(), container_ns());
        let c = conf_for(&data);
        let r = run(&plugin, "ADD", "cmp-1", &host, &cont, &c).ok();
        states.push(kernel_state(&host, &cont, &r));
        shapes.push((
            r["interfaces"].as_array().map(Vec::len),
            r["interfaces"][1]["sandbox"] == json!(cont.path().display().to_string()),
            result_ips(&r),
            r["ips"][0]["interface"].clone(),
        ));
        run(&plugin, "DEL", "cmp-1", &host, &cont, &c).ok();
        assert!(host.veths().is_empty(), "{}", plugin.display());
        assert!(data.reservations().is_empty(), "{}", plugin.display());
    }
    assert_eq!(shapes[0], shapes[1], "result shape: ours vs Go");
    assert_eq!(states[0], states[1], "kernel state: ours vs Go");
    Some(states.swap_remove(0))
}

// ---------------------------------------------------------------------------

#[test]
fn add_connects_host_and_container_like_go() {
    if skip_unless("ptp::add_connects_host_and_container_like_go", &["ping"]) {
        return;
    }
    let data = DataDir::new("pt1");
    let (host, cont) = (host_ns(), container_ns());
    // Off first (a new namespace inherits init_net's value): ADD turns it on.
    sysctls(&host, &["net.ipv4.ip_forward=0"]);
    let c = conf(&data, "1.0.0", 1, true, false, json!({}));
    let r = add("c1", &host, &cont, &c);
    let ip = &result_ips(&r)[0];
    assert_eq!(r["ips"][0]["gateway"], "10.40.1.1");
    assert_eq!(r["ips"][0]["interface"], 1);
    // Kernel-true MACs in the result.
    let hv = host_veth_name(&r);
    assert_eq!(
        r["interfaces"][0]["mac"],
        host.ip_json(&["link", "show", &hv])[0]["address"]
    );
    assert_eq!(
        r["interfaces"][1]["mac"],
        cont.ip_json(&["link", "show", "eth0"])[0]["address"]
    );
    assert_eq!(
        r["interfaces"][1]["sandbox"],
        cont.path().display().to_string()
    );
    // The kernel's prefix route is replaced by gw/32 + subnet via gw.
    let rs = routes(&cont);
    assert!(rs.contains(&format!(
        "10.40.1.1 via - dev eth0 scope link src {ip} metric 0"
    )));
    assert!(rs.contains(&format!(
        "10.40.1.0/24 via 10.40.1.1 dev eth0 scope global src {ip} metric 0"
    )));
    assert!(
        !rs.iter().any(|r| r.starts_with("10.40.1.0/24 via -")),
        "{rs:?}"
    );
    assert!(routes(&host).contains(&format!(
        "{ip} via - dev HOSTVETH scope host src - metric 0"
    )));
    assert_eq!(
        host.addrs(&hv),
        BTreeSet::from(["10.40.1.1/32".to_string()])
    );
    assert_eq!(host.sysctl("net/ipv4/ip_forward"), "1");
    assert!(ping(&cont, "10.40.1.1"), "container -> gateway");
    assert!(ping(&host, ip), "host -> container");
    del("c1", &host, &cont, &c);
    assert!(host.veths().is_empty());
    assert!(data.reservations().is_empty());

    compare_with_go("ptp::add_connects_host_and_container_like_go", |d| {
        let mut c = conf(d, "1.0.0", 1, true, false, json!({}));
        c["ipam"]["routes"] =
            json!([{"dst": "0.0.0.0/0"}, {"dst": "192.0.2.0/24", "gw": "10.40.1.254"}]);
        c
    });
}

#[test]
fn container_to_container_through_host() {
    if skip_unless("ptp::container_to_container_through_host", &["ping"]) {
        return;
    }
    let data = DataDir::new("pt2");
    let host = host_ns();
    let (a, b) = (container_ns(), container_ns());
    let c = conf(&data, "1.0.0", 2, true, true, json!({}));
    let ra = add("c-a", &host, &a, &c);
    let rb = add("c-b", &host, &b, &c);
    let (ia, ib) = (result_ips(&ra), result_ips(&rb));
    assert_ne!(ia, ib);
    // Both host veths hold the same gateways.
    assert_eq!(
        host.addrs(&host_veth_name(&ra)),
        host.addrs(&host_veth_name(&rb))
    );
    for (from, to) in [(&a, &ib), (&b, &ia)] {
        for ip in to.iter() {
            assert!(ping(from, ip), "container -> {ip}");
        }
    }
    del("c-a", &host, &a, &c);
    del("c-b", &host, &b, &c);
    assert!(host.veths().is_empty());
    assert!(data.reservations().is_empty());
}

#[test]
fn ipv6_and_dual_stack_like_go() {
    if skip_unless("ptp::ipv6_and_dual_stack_like_go", &["ping"]) {
        return;
    }
    let host = host_ns();
    for (v4, v6) in [(false, true), (true, true)] {
        let data = DataDir::new("pt3");
        let cont = container_ns();
        let c = conf(&data, "1.0.0", 3, v4, v6, json!({}));
        sysctls(&host, &["net.ipv6.conf.all.forwarding=0"]);
        let r = add("c6", &host, &cont, &c);
        let ips = result_ips(&r);
        assert_eq!(ips.len(), usize::from(v4) + 1, "{r}");
        let v6ip = ips.iter().find(|i| i.contains(':')).expect("v6 address");
        assert_eq!(host.sysctl("net/ipv6/conf/all/forwarding"), "1");
        let rs = routes(&cont);
        assert!(
            rs.contains(&format!(
                "fd40:3::/64 via fd40:3::1 dev eth0 scope global src {v6ip} metric 1024"
            )),
            "{rs:?}"
        );
        assert!(ping(&cont, "fd40:3::1"), "container -> v6 gateway");
        assert!(ping(&host, v6ip), "host -> container v6");
        if v4 {
            assert!(ping(&host, &ips[0]), "host -> container v4");
        }
        del("c6", &host, &cont, &c);
        assert!(host.veths().is_empty());
        assert!(data.reservations().is_empty());
    }
    compare_with_go("ptp::ipv6_and_dual_stack_like_go", |d| {
        let mut c = conf(d, "1.0.0", 3, true, true, json!({}));
        c["ipam"]["routes"] = json!([{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]);
        c
    });
}

#[test]
fn mtu_on_both_ends_like_go() {
    if skip_unless("ptp::mtu_on_both_ends_like_go", &["ping"]) {
        return;
    }
    let data = DataDir::new("pt4");
    let (host, cont) = (host_ns(), container_ns());
    let c = conf(&data, "1.0.0", 4, true, true, json!({"mtu": 1400}));
    let r = add("cm", &host, &cont, &c);
    assert_eq!(link_mtu(&cont, "eth0"), 1400);
    assert_eq!(link_mtu(&host, &host_veth_name(&r)), 1400);
    // Large packets that fit pass; DF packets over the MTU do not.
    assert!(
        cont.exec(
            "ping",
            &["-c1", "-W1", "-M", "do", "-s", "1372", "10.40.4.1"]
        )
        .status
        .success()
    );
    assert!(
        !cont
            .exec(
                "ping",
                &["-c1", "-W1", "-M", "do", "-s", "1373", "10.40.4.1"]
            )
            .status
            .success()
    );
    del("cm", &host, &cont, &c);
    let state = compare_with_go("ptp::mtu_on_both_ends_like_go", |d| {
        conf(d, "1.0.0", 4, true, true, json!({"mtu": 1400}))
    });
    if let Some(s) = state {
        assert_eq!(s[0], "mtu cont 1400 host 1400");
    }
}

#[test]
fn route_mtu_and_advmss_are_applied() {
    if skip_unless("ptp::route_mtu_and_advmss_are_applied", FIREWALL_TOOLS) {
        return;
    }
    let data = DataDir::new("pt15");
    let (host, cont) = (host_ns(), container_ns());
    let mut c = conf(&data, "1.1.0", 15, true, false, json!({}));
    c["ipam"]["routes"] = json!([{"dst": "192.0.2.0/24", "mtu": 1300, "advmss": 1260}]);
    add("cr", &host, &cont, &c);
    let v = cont.ip_json(&["route", "show", "192.0.2.0/24"]);
    let metrics = v[0]["metrics"].to_string();
    assert!(metrics.contains("1300") && metrics.contains("1260"), "{v}");
    del("cr", &host, &cont, &c);
}

/// The "outside" world: a namespace linked to the host namespace by a
/// veth, 172.31.n.2 outside / 172.31.n.1 on the host, with no route back
/// to the container subnet, counting ICMP from the host's address.
struct Outside {
    ns: Netns,
}

impl Outside {
    fn new(host: &Netns, n: u8) -> Outside {
        let ns = Netns::new("pto");
        let (a, b) = (unique("pto"), unique("pto"));
        rcni_tests::run_ok(
            "ip",
            &[
                "link",
                "add",
                &a,
                "netns",
                host.name(),
                "type",
                "veth",
                "peer",
                "name",
                &b,
                "netns",
                ns.name(),
            ],
        );
        host.exec_ok(
            "ip",
            &["addr", "add", &format!("172.31.{n}.1/24"), "dev", &a],
        );
        host.exec_ok("ip", &["link", "set", &a, "up"]);
        ns.exec_ok(
            "ip",
            &["addr", "add", &format!("172.31.{n}.2/24"), "dev", &b],
        );
        ns.exec_ok("ip", &["link", "set", &b, "up"]);
        ns.exec_ok("ip", &["link", "set", "lo", "up"]);
        ns.exec_ok(
            "iptables",
            &[
                "-A",
                "INPUT",
                "-p",
                "icmp",
                "-s",
                &format!("172.31.{n}.1"),
                "-j",
                "ACCEPT",
            ],
        );
        Outside { ns }
    }

    /// Packets counted from the host's address.
    fn packets_from_host(&self) -> u64 {
        let out = self
            .ns
            .exec_ok("iptables", &["-L", "INPUT", "-v", "-n", "-x"]);
        out.lines()
            .nth(2)
            .and_then(|l| l.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    }
}

/// Masquerade rules of network `net` left in the host namespace, both backends.
fn masq_rules(host: &Netns, net: &str) -> Vec<String> {
    let mut out = Vec::new();
    for tool in ["iptables-save", "ip6tables-save"] {
        let o = host.exec(tool, &["-t", "nat"]);
        out.extend(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.contains(&format!("name: \\\"{net}\\\"")) || l.starts_with(":CNI-"))
                .map(str::to_string),
        );
    }
    let o = host.exec("nft", &["list", "table", "inet", "cni_plugins_masquerade"]);
    out.extend(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains(&format!("net: {net},")))
            .map(str::to_string),
    );
    out
}

fn masquerade(test: &str, backend: &str, n: u8) {
    if skip_unless(test, &[FIREWALL_TOOLS, &["ping"]].concat()) {
        return;
    }
    let data = DataDir::new("ptm");
    let host = host_ns();
    let outside = Outside::new(&host, n);
    let cont = container_ns();
    let mut c = conf(
        &data,
        "1.0.0",
        n,
        true,
        false,
        json!({"ipMasq": true, "ipMasqBackend": backend}),
    );
    c["ipam"]["routes"] = json!([{"dst": "0.0.0.0/0"}]);
    let r = add("cq", &host, &cont, &c);
    assert!(!masq_rules(&host, data.name()).is_empty());
    let before = outside.packets_from_host();
    let dst = format!("172.31.{n}.2");
    assert!(ping(&cont, &dst), "container -> outside through masquerade");
    assert!(
        outside.packets_from_host() > before,
        "traffic arrives with the host's address"
    );
    // Inside the container's own subnet nothing is masqueraded.
    assert!(ping(&host, &result_ips(&r)[0]));
    // CHECK covers the rules.
    let cc = with_prev(&c, &r);
    run(&ours(), "CHECK", "cq", &host, &cont, &cc).ok();
    if backend == "iptables" {
        host.exec_ok("iptables", &["-t", "nat", "-F", "POSTROUTING"]);
    } else {
        host.exec_ok(
            "nft",
            &[
                "flush",
                "chain",
                "inet",
                "cni_plugins_masquerade",
                "masq_checks",
            ],
        );
    }
    let e = run(&ours(), "CHECK", "cq", &host, &cont, &cc).err();
    assert!(error_msg(&e).starts_with("ipMasq: "), "{e}");
    del("cq", &host, &cont, &c);
    assert_eq!(masq_rules(&host, data.name()), Vec::<String>::new());
    assert!(!cont.exec("ping", &["-c1", "-W1", &dst]).status.success());
}

#[test]
fn masquerade_iptables() {
    masquerade("ptp::masquerade_iptables", "iptables", 5);
}

#[test]
fn masquerade_nftables() {
    masquerade("ptp::masquerade_nftables", "nftables", 6);
}

#[test]
fn check_after_add_and_after_tampering() {
    if skip_unless_root("ptp::check_after_add_and_after_tampering") {
        return;
    }
    let data = DataDir::new("pt7");
    let (host, cont) = (host_ns(), container_ns());
    let c = conf(&data, "1.0.0", 7, true, true, json!({}));
    let r = add("ck", &host, &cont, &c);
    let cc = with_prev(&c, &r);
    let check = || run(&ours(), "CHECK", "ck", &host, &cont, &cc);
    check().ok();
    if let Some(go) = go_bin("ptp") {
        // The reference accepts our result for its CHECK too.
        let out = Invocation::new(go, "CHECK")
            .attach("ck", &cont, "eth0")
            .in_host(&host)
            .env(
                "CNI_PATH",
                bin("ptp").parent().expect("dir").display().to_string(),
            )
            .config(&cc)
            .run();
        out.ok();
    }
    let hv = host_veth_name(&r);
    let ip = result_ips(&r)[0].clone();
    let add_host_route = || {
        let dst = format!("{ip}/32");
        host.exec_ok("ip", &["route", "add", &dst, "dev", &hv, "scope", "host"])
    };
    let check_fails_with = |needle: &str| {
        let e = check().err();
        assert!(error_msg(&e).contains(needle), "{e}");
    };
    // Host side: the host route to the container.
    host.exec_ok("ip", &["route", "del", &format!("{ip}/32"), "dev", &hv]);
    check_fails_with("host route");
    add_host_route();
    check().ok();
    // Host side: the gateway on the host veth.
    host.exec_ok("ip", &["addr", "del", "10.40.7.1/32", "dev", &hv]);
    check_fails_with("gateway");
    host.exec_ok("ip", &["addr", "add", "10.40.7.1/32", "dev", &hv]);
    // Removing the last IPv4 address flushed the device's IPv4 routes.
    add_host_route();
    check().ok();
    // Container: the subnet route via the gateway.
    cont.exec_ok("ip", &["route", "del", "10.40.7.0/24"]);
    check_fails_with("10.40.7.0/24");
    cont.exec_ok(
        "ip",
        &[
            "route",
            "add",
            "10.40.7.0/24",
            "via",
            "10.40.7.1",
            "dev",
            "eth0",
            "src",
            &ip,
        ],
    );
    check().ok();
    // Container: the MAC.
    let mac = r["interfaces"][1]["mac"].as_str().expect("mac").to_string();
    cont.exec_ok(
        "ip",
        &["link", "set", "eth0", "address", "02:00:00:00:00:01"],
    );
    check_fails_with("Mac");
    cont.exec_ok("ip", &["link", "set", "eth0", "address", &mac]);
    check().ok();
    // Container: an address.
    cont.exec_ok("ip", &["addr", "del", &format!("{ip}/24"), "dev", "eth0"]);
    check_fails_with("addr");
    // No prevResult; a missing container interface.
    let e = run(&ours(), "CHECK", "ck", &host, &cont, &c).err();
    assert_eq!(e["msg"], "ptp: Required prevResult missing");
    del("ck", &host, &cont, &c);
    check().err();
}

fn has_reservation(data: &DataDir) -> bool {
    !data.reservations().is_empty()
}

#[test]
fn del_is_idempotent_and_works_without_netns() {
    if skip_unless(
        "ptp::del_is_idempotent_and_works_without_netns",
        FIREWALL_TOOLS,
    ) {
        return;
    }
    let data = DataDir::new("pt8");
    let host = host_ns();
    let c = conf(&data, "1.0.0", 8, true, false, json!({"ipMasq": true}));
    // Twice.
    let cont = container_ns();
    let r = add("d1", &host, &cont, &c);
    let dc = with_prev(&c, &r);
    run(&ours(), "DEL", "d1", &host, &cont, &dc).ok();
    run(&ours(), "DEL", "d1", &host, &cont, &dc).ok();
    assert!(host.veths().is_empty() && !has_reservation(&data));
    assert!(masq_rules(&host, data.name()).is_empty());
    // The netns is gone.
    let gone = container_ns();
    let path = gone.path();
    add("d2", &host, &gone, &c);
    assert!(has_reservation(&data) && !masq_rules(&host, data.name()).is_empty());
    drop(gone);
    let out = Invocation::new(ours(), "DEL")
        .attach_at("d2", &path, "eth0")
        .in_host(&host)
        .config(&c)
        .run();
    out.ok();
    assert!(!has_reservation(&data));
    assert!(masq_rules(&host, data.name()).is_empty());
    // CNI_NETNS empty: IPAM and masquerade rules still go.
    let cont3 = container_ns();
    add("d3", &host, &cont3, &c);
    let out = Invocation::new(ours(), "DEL")
        .attach("d3", &cont3, "eth0")
        .env("CNI_NETNS", "")
        .in_host(&host)
        .config(&c)
        .run();
    out.ok();
    assert!(!has_reservation(&data));
    assert!(masq_rules(&host, data.name()).is_empty());
    drop(cont3);
    // Go agrees that both are fine.
    if let Some(go) = go_bin("ptp") {
        let cont = container_ns();
        let data = DataDir::new("pt8g");
        let c = conf(&data, "1.0.0", 8, true, false, json!({}));
        run(&go, "ADD", "g1", &host, &cont, &c).ok();
        run(&go, "DEL", "g1", &host, &cont, &c).ok();
        run(&go, "DEL", "g1", &host, &cont, &c).ok();
        run(&ours(), "DEL", "g1", &host, &cont, &c).ok();
    }
}

#[test]
fn add_failure_leaves_nothing() {
    if skip_unless("ptp::add_failure_leaves_nothing", FIREWALL_TOOLS) {
        return;
    }
    let data = DataDir::new("pt9");
    let (host, cont) = (host_ns(), container_ns());
    // Config errors: nothing is touched, not even the data dir.
    for (extra, want) in [
        (json!({"mtu": 67}), "invalid MTU 67"),
        (json!({"mtu": "9000"}), "failed to load netconf"),
        (json!({"ipMasq": 1}), "failed to load netconf"),
        (json!({"ipMasqBackend": "pf"}), "unknown ipmasq backend"),
        (json!({"ipam": {}}), "requires an IPAM plugin"),
        (json!({"dns": []}), "error unmarshall"),
    ] {
        let c = conf(&data, "1.0.0", 9, true, false, extra.clone());
        let e = run(&ours(), "ADD", "f1", &host, &cont, &c).err();
        assert!(error_msg(&e).contains(want), "{extra}: {e}");
        assert!(!data.path().exists(), "{extra}");
        assert!(host.veths().is_empty());
    }
    // A taken container interface name: after IPAM, everything is undone.
    cont.exec_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "other0",
        ],
    );
    let c = conf(&data, "1.0.0", 9, true, true, json!({"ipMasq": true}));
    let e = run(&ours(), "ADD", "f2", &host, &cont, &c).err();
    assert!(error_msg(&e).contains("already exists"), "{e}");
    assert!(host.veths().is_empty() && !has_reservation(&data));
    assert!(masq_rules(&host, data.name()).is_empty());
    cont.exec_ok("ip", &["link", "del", "eth0"]);
    // An IPv6 address with an MTU IPv6 cannot use: the veth existed, the
    // address was reserved, both are gone.
    let c = conf(&data, "1.0.0", 9, true, true, json!({"mtu": 1000}));
    let e = run(&ours(), "ADD", "f3", &host, &cont, &c).err();
    assert!(error_msg(&e).contains("IPv6"), "{e}");
    assert!(host.veths().is_empty() && !has_reservation(&data));
    assert!(!cont.exec("ip", &["link", "show", "eth0"]).status.success());
    // A failure late in ADD (a route the kernel refuses) is undone too.
    let mut c = conf(&data, "1.0.0", 9, true, false, json!({"ipMasq": true}));
    c["ipam"]["routes"] = json!([{"dst": "192.0.2.0/24", "gw": "203.0.113.1"}]);
    let e = run(&ours(), "ADD", "f4", &host, &cont, &c).err();
    assert!(error_msg(&e).contains("route"), "{e}");
    assert!(host.veths().is_empty() && !has_reservation(&data));
    assert!(masq_rules(&host, data.name()).is_empty());
    // IPAM itself fails (the veth pair was being made meanwhile): no veth.
    let mut c = conf(&data, "1.0.0", 9, true, false, json!({}));
    c["runtimeConfig"] = json!({"ips": ["10.99.0.5/24"]});
    run(&ours(), "ADD", "f6", &host, &cont, &c).err();
    assert!(host.veths().is_empty() && !has_reservation(&data));
    assert!(!cont.exec("ip", &["link", "show", "eth0"]).status.success());
    // The namespace is fine afterwards.
    let c = conf(&data, "1.0.0", 9, true, false, json!({}));
    add("f5", &host, &cont, &c);
    del("f5", &host, &cont, &c);
}

/// A second interface of one container on the same network: its routes
/// would be the first one's (same destinations), so ADD fails on the
/// existing route, as the reference's does, instead of taking the routes
/// over and cutting the first interface off. Unlike the reference (which
/// leaves the second veth pair behind), everything it made is undone.
#[test]
fn second_attachment_on_the_same_subnet_fails_and_spares_the_first() {
    if skip_unless(
        "ptp::second_attachment_on_the_same_subnet_fails_and_spares_the_first",
        &["ping"],
    ) {
        return;
    }
    let data = DataDir::new("pt16");
    let (host, cont) = (host_ns(), container_ns());
    let c = conf(&data, "1.0.0", 16, true, false, json!({}));
    let first = add("s1", &host, &cont, &c);
    let e = Invocation::new(ours(), "ADD")
        .attach("s1", &cont, "eth1")
        .in_host(&host)
        .config(&c)
        .run()
        .err();
    let msg = e["msg"].as_str().unwrap_or_default();
    assert!(
        msg.contains("failed to add route") && msg.contains("File exists"),
        "{e}"
    );
    // Only the first attachment is left, and it still works.
    assert!(!cont.exec("ip", &["link", "show", "eth1"]).status.success());
    assert_eq!(host.veths().len(), 1, "{:?}", host.veths());
    assert_eq!(
        data.reservations().into_keys().collect::<Vec<_>>(),
        result_ips(&first)
    );
    run(&ours(), "CHECK", "s1", &host, &cont, &with_prev(&c, &first)).ok();
    assert!(ping(&cont, "10.40.16.1"));
    del("s1", &host, &cont, &with_prev(&c, &first));
    assert!(host.veths().is_empty() && !has_reservation(&data));
}

#[test]
fn parallel_adds() {
    if skip_unless("ptp::parallel_adds", &["ping"]) {
        return;
    }
    const N: usize = 32;
    let data = DataDir::new("pt10");
    let host = host_ns();
    let conts: Vec<Netns> = (0..N).map(|_| container_ns()).collect();
    let c = conf(&data, "1.0.0", 10, true, false, json!({}));
    let results: Vec<Value> = std::thread::scope(|s| {
        let handles: Vec<_> = conts
            .iter()
            .enumerate()
            .map(|(i, ns)| {
                let (host, c) = (&host, &c);
                s.spawn(move || add(&format!("p{i}"), host, ns, c))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("ADD thread"))
            .collect()
    });
    let ips: BTreeSet<String> = results.iter().map(|r| result_ips(r)[0].clone()).collect();
    assert_eq!(ips.len(), N);
    assert_eq!(host.veths().len(), N);
    assert_eq!(data.reservations().len(), N);
    assert!(ping(&conts[0], &result_ips(&results[N - 1])[0]));
    std::thread::scope(|s| {
        for (i, ns) in conts.iter().enumerate() {
            let (host, c) = (&host, &c);
            s.spawn(move || del(&format!("p{i}"), host, ns, c));
        }
    });
    assert!(host.veths().is_empty());
    assert!(data.reservations().is_empty());
}

#[test]
fn gc_and_status() {
    if skip_unless("ptp::gc_and_status", FIREWALL_TOOLS) {
        return;
    }
    let data = DataDir::new("pt11");
    let host = host_ns();
    let (a, b, x) = (container_ns(), container_ns(), container_ns());
    let c = conf(
        &data,
        "1.1.0",
        11,
        true,
        false,
        json!({"ipMasq": true, "ipMasqBackend": "nftables"}),
    );
    let ci = conf(
        &data,
        "1.1.0",
        11,
        true,
        false,
        json!({"ipMasq": true, "ipMasqBackend": "iptables"}),
    );
    add("keep", &host, &a, &c);
    add("drop", &host, &b, &c);
    add("dropi", &host, &x, &ci);
    assert_eq!(data.reservations().len(), 3);
    let status = |conf: &Value| {
        Invocation::new(ours(), "STATUS")
            .in_host(&host)
            .config(conf)
            .run()
    };
    status(&c).ok();
    for key in ["cni.dev/valid-attachments", "cni.dev/attachments"] {
        let mut g = c.clone();
        g[key] = json!([{"containerID": "keep", "ifname": "eth0"}]);
        Invocation::new(ours(), "GC")
            .in_host(&host)
            .config(&g)
            .run()
            .ok();
        let left = masq_rules(&host, data.name());
        assert!(
            left.iter().all(|l| l.contains("id: keep")),
            "{key}: {left:?}"
        );
        assert!(
            left.iter().any(|l| l.contains("id: keep")),
            "{key}: {left:?}"
        );
        assert_eq!(data.reservations().len(), 1, "{key}");
    }
    del("keep", &host, &a, &c);
    del("drop", &host, &b, &c);
    del("dropi", &host, &x, &ci);
    assert!(masq_rules(&host, data.name()).is_empty());
    // GC and STATUS need 1.1.0.
    let old = conf(&data, "1.0.0", 11, true, false, json!({}));
    let e = Invocation::new(ours(), "GC")
        .in_host(&host)
        .config(&old)
        .run()
        .err();
    assert_eq!(e["code"], 1);
    // STATUS passes IPAM's answer through.
    let mut bad = c.clone();
    bad["ipam"]["type"] = json!("no-such-ipam");
    let e = status(&bad).err();
    assert!(error_msg(&e).contains("no-such-ipam"), "{e}");
}

#[test]
fn every_version_capabilities_and_dns() {
    if skip_unless_root("ptp::every_version_capabilities_and_dns") {
        return;
    }
    let data = DataDir::new("pt12");
    let host = host_ns();
    for v in [
        "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
    ] {
        let cont = container_ns();
        let c = conf(&data, v, 12, true, false, json!({}));
        let r = add("v", &host, &cont, &c);
        assert_eq!(r["cniVersion"], v);
        if v.starts_with("0.1") || v.starts_with("0.2") {
            assert_eq!(r["ip4"]["gateway"], "10.40.12.1", "{r}");
        } else {
            assert_eq!(r["interfaces"].as_array().map(Vec::len), Some(2), "{r}");
        }
        if v >= "0.4.0" {
            run(&ours(), "CHECK", "v", &host, &cont, &with_prev(&c, &r)).ok();
        }
        del("v", &host, &cont, &c);
    }
    // host-local's capabilities work through ptp; conf dns overrides IPAM's.
    let cont = container_ns();
    let mut c = conf(
        &data,
        "1.0.0",
        12,
        true,
        false,
        json!({"dns": {"nameservers": ["10.40.12.53"], "search": ["ex.test"]}}),
    );
    c["runtimeConfig"] = json!({"ips": ["10.40.12.77/24"]});
    let r = add("caps", &host, &cont, &c);
    assert_eq!(result_ips(&r), vec!["10.40.12.77"]);
    assert_eq!(r["dns"]["nameservers"], json!(["10.40.12.53"]));
    assert_eq!(r["dns"]["search"], json!(["ex.test"]));
    del("caps", &host, &cont, &c);
    let mut c = conf(&data, "1.0.0", 12, true, false, json!({}));
    c["runtimeConfig"] =
        json!({"ipRanges": [[{"subnet": "10.40.12.0/24", "rangeStart": "10.40.12.200"}]]});
    c["ipam"].as_object_mut().expect("ipam").remove("ranges");
    let r = add("caps2", &host, &cont, &c);
    assert_eq!(result_ips(&r), vec!["10.40.12.200"]);
    assert!(r.get("dns").is_none_or(|d| d == &json!({})), "{r}");
    del("caps2", &host, &cont, &c);
    assert!(data.reservations().is_empty());
}

/// The iptables masquerade rules are the reference's, byte for byte: the
/// same chain name, rules and comments for the same network and container.
#[test]
fn masquerade_rules_like_go() {
    if skip_unless("ptp::masquerade_rules_like_go", FIREWALL_TOOLS) {
        return;
    }
    let Some(go) = go_bin("ptp") else {
        return;
    };
    let mut saved = Vec::new();
    for plugin in [ours(), go] {
        let data = DataDir::new("ptmg");
        let (host, cont) = (host_ns(), container_ns());
        let mut c = conf(
            &data,
            "1.0.0",
            13,
            true,
            true,
            json!({"ipMasq": true, "ipMasqBackend": "iptables"}),
        );
        // The same network name for both: it is part of the chain name.
        c["name"] = json!("ptp-masq-cmp");
        run(&plugin, "ADD", "cmp-masq", &host, &cont, &c).ok();
        let mut rules = Vec::new();
        for tool in ["iptables-save", "ip6tables-save"] {
            let out = host.exec_ok(tool, &["-t", "nat"]);
            rules.extend(
                out.lines()
                    .filter(|l| l.contains("CNI-"))
                    .map(str::to_string),
            );
        }
        rules.sort();
        run(&plugin, "DEL", "cmp-masq", &host, &cont, &c).ok();
        assert!(
            masq_rules(&host, "ptp-masq-cmp").is_empty(),
            "{}",
            plugin.display()
        );
        saved.push(rules);
    }
    assert!(!saved[0].is_empty());
    assert_eq!(saved[0], saved[1], "masquerade rules: ours vs Go");
}

/// Drop-in both ways: what one implementation ADDs, the other DELs
/// completely (veth, reservation, masquerade rules), with our host-local.
#[test]
fn go_and_ours_undo_each_other() {
    if skip_unless(
        "ptp::go_and_ours_undo_each_other",
        &[FIREWALL_TOOLS, &["ping"]].concat(),
    ) {
        return;
    }
    let Some(go) = go_bin("ptp") else {
        return;
    };
    let ipam_dir = bin("host-local")
        .parent()
        .expect("bin dir")
        .display()
        .to_string();
    let data = DataDir::new("pt14");
    let host = host_ns();
    let c = conf(
        &data,
        "1.0.0",
        14,
        true,
        true,
        json!({"ipMasq": true, "ipMasqBackend": "iptables"}),
    );
    for (adder, deleter) in [(ours(), go.clone()), (go.clone(), ours())] {
        let cont = container_ns();
        let invoke = |plugin: &Path, cmd: &str| {
            Invocation::new(plugin, cmd)
                .attach("interop", &cont, "eth0")
                .in_host(&host)
                .env("CNI_PATH", &ipam_dir)
                .config(&c)
                .run()
        };
        let r = invoke(&adder, "ADD").ok();
        assert!(ping(&cont, "10.40.14.1"), "{}", adder.display());
        assert!(!masq_rules(&host, data.name()).is_empty());
        let cc = with_prev(&c, &r);
        Invocation::new(&deleter, "CHECK")
            .attach("interop", &cont, "eth0")
            .in_host(&host)
            .env("CNI_PATH", &ipam_dir)
            .config(&cc)
            .run()
            .ok();
        invoke(&deleter, "DEL").ok();
        assert!(
            host.veths().is_empty(),
            "{} -> {}",
            adder.display(),
            deleter.display()
        );
        assert!(!has_reservation(&data));
        assert_eq!(masq_rules(&host, data.name()), Vec::<String>::new());
    }
}

/// ipMasq with iptables writes one family after the other: when IPv6's
/// transaction fails, IPv4's chain (written first) is gone after the
/// failed ADD as well, with the veth pair and the reservation, and the
/// error is the tool's.
#[test]
fn masquerade_second_family_failure_leaves_nothing() {
    if skip_unless(
        "ptp::masquerade_second_family_failure_leaves_nothing",
        FIREWALL_TOOLS,
    ) {
        return;
    }
    let data = DataDir::new("frpt");
    let (host, cont) = (host_ns(), container_ns());
    let mut c = conf(
        &data,
        "1.0.0",
        0,
        true,
        true,
        json!({"ipMasq": true, "ipMasqBackend": "iptables"}),
    );
    c["ipam"]["ranges"] = json!([
        [{"subnet": "10.148.32.0/24"}],
        [{"subnet": "fd21:148::32:0/112"}]
    ]);
    let fails = Tools::failing("ip6tables-restore");
    let e = Invocation::new(ours(), "ADD")
        .attach("frm1", &cont, "eth0")
        .env("PATH", fails.path())
        .in_host(&host)
        .config(&c)
        .run()
        .err();
    assert_eq!(e["code"], 999, "{e}");
    assert!(error_msg(&e).starts_with("iptables: "), "{e}");
    assert!(fails.ran("iptables-restore"), "IPv4 was not written first");
    assert_eq!(masq_rules(&host, data.name()), Vec::<String>::new());
    assert!(host.veths().is_empty() && !has_reservation(&data));
    // With working tools: ADD, then DEL.
    add("frm1", &host, &cont, &c);
    assert!(!masq_rules(&host, data.name()).is_empty());
    del("frm1", &host, &cont, &c);
    assert_eq!(masq_rules(&host, data.name()), Vec::<String>::new());
}

/// ptp's ipMasq over netlink (once the node has a `nat` table; the first
/// ADD creates it with iptables-restore): no tool runs, `iptables -t nat
/// -S` prints the reference's text in both families, CHECK passes, GC
/// removes the rules of the attachments not kept, DEL the rest.
#[test]
fn nm_ptp_masq_over_netlink_check_gc_del() {
    if skip_unless("nm_ptp_masq_over_netlink_check_gc_del", FIREWALL_TOOLS) {
        return;
    }
    let data = DataDir::new("ptnm");
    let host = host_ns();
    let subnets = ["10.183.1.0/24", "fd00:183::1:0/112"];
    let mut c = conf(
        &data,
        "1.1.0",
        0,
        true,
        true,
        json!({"ipMasq": true, "ipMasqBackend": "iptables"}),
    );
    c["ipam"]["ranges"] = json!([[{"subnet": subnets[0]}], [{"subnet": subnets[1]}]]);
    let net = data.name();
    let tools = Tools::recording("xtables-nft-multi");
    let conts: Vec<Netns> = (0..3).map(|_| container_ns()).collect();
    let cids = ["nmp0", "nmp1", "nmp2"];
    let call = |cmd: &str, i: usize, conf: &Value| {
        Invocation::new(ours(), cmd)
            .attach(cids[i], &conts[i], "eth0")
            .in_host(&host)
            .env("PATH", tools.path())
            .config(conf)
            .run()
    };
    let mut results = Vec::new();
    for i in 0..3 {
        results.push(call("ADD", i, &c).ok());
        let calls = tools.take_calls();
        let restored = calls.iter().any(|l| l.contains("tables-restore"));
        assert_eq!(restored, i == 0, "ADD {i}: {calls:?}");
    }
    for (i, r) in results.iter().enumerate() {
        let want = masq_expected(net, cids[i], &result_ips(r), &subnets);
        assert_eq!(masq_lines(&host, net, cids[i]), want, "{}", cids[i]);
        call("CHECK", i, &with_prev(&c, r)).ok();
    }
    let mut g = c.clone();
    g["cni.dev/valid-attachments"] = json!([{"containerID": "nmp1", "ifname": "eth0"}]);
    Invocation::new(ours(), "GC")
        .in_host(&host)
        .env("PATH", tools.path())
        .config(&g)
        .run()
        .ok();
    let none: [Vec<String>; 2] = [vec![], vec![]];
    for (i, cid) in cids.iter().enumerate() {
        let want = if i == 1 {
            masq_expected(net, cid, &result_ips(&results[i]), &subnets)
        } else {
            none.clone()
        };
        assert_eq!(masq_lines(&host, net, cid), want, "after GC: {cid}");
    }
    call("DEL", 1, &c).ok();
    assert_eq!(masq_lines(&host, net, "nmp1"), none);
    for i in [0, 2] {
        call("DEL", i, &c).ok();
    }
    for tool in ["iptables", "ip6tables"] {
        let nat = host.exec_ok(tool, &["-t", "nat", "-S"]);
        assert!(!nat.contains("CNI-"), "{tool}:\n{nat}");
    }
}
