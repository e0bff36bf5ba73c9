//! The bridge plugin, exec'd as a runtime does. Every test creates its own
//! private "host" namespace (the plugin runs there through `ip netns exec`)
//! and container namespaces, all tagged `br…`; bridge names, subnets
//! (10.50.N.0/24, fd50:N::/64) and host-local data directories are unique
//! per test, and everything is removed on drop, also when a test fails.
//! Where the Go reference (/usr/lib/cni, cniVersion ≤ 1.0.0) supports a
//! scenario, the same scenario runs with it in another private host and the
//! resulting kernel state is compared.

#![cfg(test)]

mod common;

use common::{masq_expected, masq_lines};
use rcni_tests::fw_tools::Tools;
use rcni_tests::host_local_util::DataDir;
use rcni_tests::netns_setup::sysctls;
use rcni_tests::{
    FIREWALL_TOOLS, Invocation, Netns, PluginOutput, bin, error_msg, go_bin,
    kernel_feature_present, skip_unless, skip_unless_root, skip_without_kernel_feature, unique,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: {why}");
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Impl {
    Ours,
    Go,
}

impl Impl {
    fn plugin(self) -> Option<PathBuf> {
        match self {
            Impl::Ours => Some(bin("bridge")),
            Impl::Go => go_bin("bridge").filter(|_| go_bin("host-local").is_some()),
        }
    }
}

/// Address families of a test network.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fam {
    V4,
    V6,
    Dual,
}

/// One test's world for one implementation: a private host namespace, a
/// bridge name, a host-local data directory and the subnet index `n`.
struct World {
    imp: Impl,
    plugin: PathBuf,
    host: Netns,
    data: DataDir,
    bridge: String,
    n: u8,
    version: &'static str,
}

impl World {
    fn new(imp: Impl, n: u8) -> Option<World> {
        let plugin = imp.plugin()?;
        let host = Netns::new("brh");
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        Some(World {
            imp,
            plugin,
            host,
            data: DataDir::new("brnet"),
            bridge: unique("rb"),
            n,
            version: if imp == Impl::Go { "1.0.0" } else { "1.1.0" },
        })
    }

    fn v4_subnet(&self) -> String {
        format!("10.50.{}.0/24", self.n)
    }

    fn v4(&self, host: u8) -> String {
        format!("10.50.{}.{host}", self.n)
    }

    fn v6(&self, host: u8) -> String {
        format!("fd50:{}::{host:x}", self.n)
    }

    /// A config: the network, the bridge, host-local over the families in
    /// `fam`, then `extra` merged on top (`"ipam": null` removes IPAM).
    fn conf(&self, fam: Fam, extra: Value) -> Value {
        let mut ranges = Vec::new();
        if fam != Fam::V6 {
            ranges.push(json!([{"subnet": self.v4_subnet()}]));
        }
        if fam != Fam::V4 {
            ranges.push(json!([{"subnet": format!("fd50:{}::/64", self.n)}]));
        }
        let mut c = json!({
            "cniVersion": self.version,
            "name": self.data.name(),
            "type": "bridge",
            "bridge": self.bridge,
            "ipam": {
                "type": "host-local",
                "dataDir": self.data.path().display().to_string(),
                "ranges": ranges,
            },
        });
        if let (Some(m), Some(e)) = (c.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                if v.is_null() {
                    m.remove(k);
                } else {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
        c
    }

    fn container(&self) -> Netns {
        Netns::new("brc")
    }

    fn inv(&self, cmd: &str, conf: &Value, cid: &str, ns: &Netns, ifname: &str) -> Invocation {
        Invocation::new(&self.plugin, cmd)
            .attach(cid, ns, ifname)
            .in_host(&self.host)
            .config(conf)
    }

    fn run(&self, cmd: &str, conf: &Value, cid: &str, ns: &Netns) -> PluginOutput {
        self.inv(cmd, conf, cid, ns, "eth0").run()
    }

    fn add(&self, conf: &Value, cid: &str, ns: &Netns) -> Value {
        self.run("ADD", conf, cid, ns).ok()
    }

    fn del(&self, conf: &Value, cid: &str, ns: &Netns) {
        self.run("DEL", conf, cid, ns).ok();
    }

    /// CHECK with `prevResult` = `result`.
    fn check(&self, conf: &Value, result: &Value, cid: &str, ns: &Netns) -> PluginOutput {
        let mut c = conf.clone();
        c["prevResult"] = result.clone();
        self.run("CHECK", &c, cid, ns)
    }

    /// The host veths (ports of our bridge).
    fn ports(&self) -> Vec<Value> {
        self.host
            .ip_json(&["-d", "link", "show", "master", &self.bridge])
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn veths_in_host(&self) -> usize {
        self.host
            .ip_json(&["link", "show", "type", "veth"])
            .as_array()
            .map_or(0, Vec::len)
    }

    /// Kernel state of the host and the containers, normalised so the two
    /// implementations can be compared (no random names, MACs or indexes).
    fn state(&self, containers: &[&Netns]) -> Value {
        let br = &self
            .host
            .ip_json(&["-d", "link", "show", "dev", &self.bridge])[0];
        let mut ports: Vec<Value> = self
            .ports()
            .iter()
            .map(|p| {
                let name = p["ifname"].as_str().unwrap_or_default();
                json!({
                    "kind": p["linkinfo"]["info_kind"],
                    "mtu": p["mtu"],
                    "up": flags_up(p),
                    "hairpin": p["linkinfo"]["info_slave_data"]["hairpin"],
                    "isolated": p["linkinfo"]["info_slave_data"]["isolated"],
                    "accept_ra": self.host.sysctl(&format!("net/ipv6/conf/{name}/accept_ra")),
                })
            })
            .collect();
        ports.sort_by_key(|p| p.to_string());
        let conts: Vec<Value> = containers.iter().map(|c| container_state(c)).collect();
        json!({
            "bridge": {
                "kind": br["linkinfo"]["info_kind"],
                "mtu": br["mtu"],
                "up": flags_up(br),
                "promisc": br["promiscuity"].as_u64().unwrap_or(0) > 0,
                "addrs": addrs(&self.host, &self.bridge),
                "accept_ra": self.host.sysctl(&format!("net/ipv6/conf/{}/accept_ra", self.bridge)),
            },
            "ports": ports,
            "ip_forward": self.host.sysctl("net/ipv4/ip_forward"),
            "ip6_forward": self.host.sysctl("net/ipv6/conf/all/forwarding"),
            "containers": conts,
        })
    }
}

/// World `n` of our bridge for `test`, or None (after a SKIP line) when
/// the test cannot run here: it needs root and `tools`.
fn ours(test: &str, n: u8, tools: &[&str]) -> Option<World> {
    if skip_unless(test, tools) {
        return None;
    }
    Some(World::new(Impl::Ours, n).expect("our bridge is built"))
}

fn link_exists(ns: &Netns, name: &str) -> bool {
    ns.exec("ip", &["link", "show", "dev", name])
        .status
        .success()
}

fn flags_up(link: &Value) -> bool {
    link["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "UP"))
}

/// Global addresses of a link, `addr/prefix`, sorted.
fn addrs(ns: &Netns, dev: &str) -> Vec<String> {
    ns.addrs(dev).into_iter().collect()
}

fn routes(ns: &Netns) -> Vec<String> {
    let mut out = Vec::new();
    for fam in ["-4", "-6"] {
        let v = ns.ip_json(&[fam, "route", "show", "table", "main"]);
        for r in v.as_array().cloned().unwrap_or_default() {
            out.push(format!(
                "{} via {} dev {} proto {} scope {} metric {} mtu {} advmss {}",
                r["dst"].as_str().unwrap_or(""),
                r["gateway"].as_str().unwrap_or("-"),
                r["dev"].as_str().unwrap_or(""),
                r["protocol"].as_str().unwrap_or(""),
                r["scope"].as_str().unwrap_or(""),
                r["metric"],
                r["metrics"]
                    .as_array()
                    .and_then(|m| m.iter().find_map(|x| x.get("mtu").cloned()))
                    .unwrap_or(Value::Null),
                r["metrics"]
                    .as_array()
                    .and_then(|m| m.iter().find_map(|x| x.get("advmss").cloned()))
                    .unwrap_or(Value::Null),
            ));
        }
    }
    out
}

fn container_state(c: &Netns) -> Value {
    let l = &c.ip_json(&["-d", "link", "show", "dev", "eth0"])[0];
    json!({
        "kind": l["linkinfo"]["info_kind"],
        "mtu": l["mtu"],
        "up": flags_up(l),
        "addrs": addrs(c, "eth0"),
        "routes": routes(c),
        "accept_dad": c.sysctl("net/ipv6/conf/eth0/accept_dad"),
        "arp_notify": c.sysctl("net/ipv4/conf/eth0/arp_notify"),
    })
}

/// Pings `ip` from `ns` (or from the host when `ns` is the host), retrying
/// while IPv6 DAD on the bridge finishes.
fn ping(ns: &Netns, ip: &str) {
    let start = Instant::now();
    loop {
        let out = ns.exec("ping", &["-c1", "-W1", ip]);
        if out.status.success() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "ping {ip} from {} failed: {}",
            ns.name(),
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn result_ips(r: &Value) -> Vec<String> {
    r["ips"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| i["address"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `scenario` for ours and, when installed, the Go reference, and
/// asserts both left the same kernel state.
fn compare(test: &str, n: u8, scenario: impl Fn(&World) -> Value) {
    let ours = World::new(Impl::Ours, n).expect("our bridge is built");
    let mine = scenario(&ours);
    match World::new(Impl::Go, n) {
        Some(go) => {
            let theirs = scenario(&go);
            assert_eq!(
                mine, theirs,
                "{test}: kernel state differs from the Go reference"
            );
        }
        None => skip(test, "Go reference not installed; compared nothing"),
    }
}

#[test]
fn two_containers_ipv4_ping_and_match_reference() {
    if skip_unless("two_containers_ipv4_ping_and_match_reference", &["ping"]) {
        return;
    }
    compare("two_containers_ipv4", 1, |w| {
        let conf = w.conf(Fam::V4, json!({"isGateway": true}));
        let (c1, c2) = (w.container(), w.container());
        let r1 = w.add(&conf, "c1", &c1);
        let r2 = w.add(&conf, "c2", &c2);
        assert_eq!(result_ips(&r1), vec![format!("{}/24", w.v4(2))]);
        assert_eq!(result_ips(&r2), vec![format!("{}/24", w.v4(3))]);
        ping(&c1, &w.v4(3));
        ping(&c2, &w.v4(2));
        ping(&c1, &w.v4(1));
        ping(&w.host, &w.v4(2));
        ping(&w.host, &w.v4(3));
        let s = w.state(&[&c1, &c2]);
        w.del(&conf, "c1", &c1);
        w.del(&conf, "c2", &c2);
        s
    });
}

#[test]
fn result_matches_kernel() {
    let Some(w) = ours("result_matches_kernel", 2, &[]) else {
        return;
    };
    let conf = w.conf(Fam::V4, json!({"isGateway": true}));
    let c = w.container();
    let r = w.add(&conf, "c1", &c);
    assert_eq!(r["cniVersion"], "1.1.0");
    let ifs = r["interfaces"].as_array().unwrap();
    assert_eq!(ifs.len(), 3);
    assert_eq!(ifs[0]["name"], w.bridge.as_str());
    let br = &w.host.ip_json(&["link", "show", "dev", &w.bridge])[0];
    assert_eq!(ifs[0]["mac"], br["address"]);
    let host_veth = ifs[1]["name"].as_str().unwrap();
    let hv = &w.host.ip_json(&["link", "show", "dev", host_veth])[0];
    assert_eq!(ifs[1]["mac"], hv["address"]);
    assert_eq!(hv["master"], w.bridge.as_str());
    let cv = &c.ip_json(&["link", "show", "dev", "eth0"])[0];
    assert_eq!(ifs[2]["mac"], cv["address"]);
    assert_eq!(ifs[2]["sandbox"], c.path().display().to_string());
    assert_eq!(r["ips"][0]["interface"], 2);
    assert_eq!(r["ips"][0]["gateway"], w.v4(1));
    // The bridge MAC is pinned: a second port does not change it.
    let c2 = w.container();
    let r2 = w.add(&conf, "c2", &c2);
    assert_eq!(r2["interfaces"][0]["mac"], ifs[0]["mac"]);
    w.del(&conf, "c1", &c);
    w.del(&conf, "c2", &c2);
}

#[test]
fn ipv6_ping_and_match_reference() {
    if skip_unless("ipv6_ping_and_match_reference", &["ping"]) {
        return;
    }
    compare("ipv6", 3, |w| {
        let conf = w.conf(Fam::V6, json!({"isGateway": true}));
        let (c1, c2) = (w.container(), w.container());
        w.add(&conf, "c1", &c1);
        w.add(&conf, "c2", &c2);
        ping(&c1, &w.v6(3));
        ping(&c2, &w.v6(2));
        ping(&c1, &w.v6(1));
        ping(&w.host, &w.v6(2));
        let s = w.state(&[&c1, &c2]);
        w.del(&conf, "c1", &c1);
        w.del(&conf, "c2", &c2);
        s
    });
}

#[test]
fn dual_stack_default_gateway_and_match_reference() {
    if skip_unless("dual_stack_default_gateway_and_match_reference", &["ping"]) {
        return;
    }
    compare("dual_stack", 4, |w| {
        let conf = w.conf(Fam::Dual, json!({"isDefaultGateway": true}));
        let (c1, c2) = (w.container(), w.container());
        let r = w.add(&conf, "c1", &c1);
        w.add(&conf, "c2", &c2);
        assert_eq!(
            result_ips(&r),
            vec![format!("{}/24", w.v4(2)), format!("{}/64", w.v6(2))]
        );
        ping(&c1, &w.v4(3));
        ping(&c1, &w.v6(3));
        ping(&w.host, &w.v6(3));
        ping(&w.host, &w.v4(2));
        let rs = routes(&c1);
        assert!(
            rs.iter()
                .any(|r| r.starts_with(&format!("default via {} dev eth0", w.v4(1)))),
            "{rs:?}"
        );
        assert!(
            rs.iter()
                .any(|r| r.starts_with(&format!("default via {} dev eth0", w.v6(1)))),
            "{rs:?}"
        );
        let s = w.state(&[&c1, &c2]);
        w.del(&conf, "c1", &c1);
        w.del(&conf, "c2", &c2);
        s
    });
}

#[test]
fn mtu_hairpin_promisc_and_match_reference() {
    if skip_unless_root("mtu_hairpin_promisc_and_match_reference") {
        return;
    }
    compare("mtu_hairpin", 5, |w| {
        let conf = w.conf(Fam::V4, json!({"mtu": 1400, "hairpinMode": true}));
        let c = w.container();
        w.add(&conf, "c1", &c);
        let s = w.state(&[&c]);
        assert_eq!(s["bridge"]["mtu"], 1400);
        assert_eq!(s["ports"][0]["mtu"], 1400);
        assert_eq!(s["ports"][0]["hairpin"], true);
        assert_eq!(s["containers"][0]["mtu"], 1400);
        // hairpin and promisc exclude each other.
        let bad = w.conf(Fam::V4, json!({"hairpinMode": true, "promiscMode": true}));
        let e = w.run("ADD", &bad, "c2", &c).err();
        assert!(
            error_msg(&e)
                .starts_with("cannot set hairpin mode and promiscuous mode at the same time"),
            "{e}"
        );
        w.del(&conf, "c1", &c);
        s
    });
    let w = World::new(Impl::Ours, 5).unwrap();
    let conf = w.conf(Fam::V4, json!({"promiscMode": true, "portIsolation": true}));
    let c = w.container();
    w.add(&conf, "c1", &c);
    let s = w.state(&[&c]);
    assert_eq!(s["bridge"]["promisc"], true);
    assert_eq!(s["ports"][0]["isolated"], true);
    assert_eq!(s["ports"][0]["hairpin"], false);
    w.del(&conf, "c1", &c);
}

/// Config keys in another case reach their fields, as Go's encoding/json
/// matches them (runtimes built on go-cni depend on it for capability
/// arguments): the same kernel state as the reference's.
#[test]
fn keys_in_any_case_like_the_reference() {
    if skip_unless("keys_in_any_case_like_the_reference", &["ping"]) {
        return;
    }
    compare("keys_in_any_case", 24, |w| {
        let conf = w.conf(
            Fam::V4,
            json!({"MTU": 1400, "HairpinMode": true, "isgateway": true}),
        );
        let c = w.container();
        w.add(&conf, "c1", &c);
        let s = w.state(&[&c]);
        assert_eq!(s["bridge"]["mtu"], 1400, "{s}");
        assert_eq!(s["ports"][0]["hairpin"], true, "{s}");
        assert_eq!(s["containers"][0]["mtu"], 1400, "{s}");
        ping(&c, &w.v4(1));
        w.del(&conf, "c1", &c);
        s
    });
}

#[test]
fn route_mtu_and_advmss_are_applied() {
    let Some(w) = ours("route_mtu_and_advmss_are_applied", 6, &[]) else {
        return;
    };
    let mut conf = w.conf(Fam::V4, json!({"isGateway": true}));
    conf["ipam"]["routes"] = json!([{"dst": "192.0.2.0/24", "mtu": 1300, "advmss": 1200},
                                    {"dst": "198.51.100.0/24", "gw": w.v4(1)}]);
    let c = w.container();
    let r = w.add(&conf, "c1", &c);
    let rs = routes(&c);
    assert!(
        rs.iter().any(
            |r| r.starts_with(&format!("192.0.2.0/24 via {} dev eth0", w.v4(1)))
                && r.ends_with("mtu 1300 advmss 1200")
        ),
        "{rs:?}"
    );
    // CHECK accepts routes with and without a gateway.
    w.check(&conf, &r, "c1", &c).ok();
    w.del(&conf, "c1", &c);
}

#[test]
fn force_address_and_failed_add_rolls_back() {
    if skip_unless("force_address_and_failed_add_rolls_back", &["ping"]) {
        return;
    }
    compare("force_address", 7, |w| {
        // A bridge that already has another address in the subnet.
        // With a MAC: the reference cannot pin a bridge's all-zero MAC
        // (a port-less bridge made by `ip link add`); ours can (below).
        w.host.exec_ok(
            "ip",
            &[
                "link",
                "add",
                &w.bridge,
                "address",
                "0a:00:00:00:07:01",
                "type",
                "bridge",
            ],
        );
        let other = format!("{}/24", w.v4(200));
        w.host
            .exec_ok("ip", &["addr", "add", &other, "dev", &w.bridge]);
        let c = w.container();
        let conf = w.conf(Fam::V4, json!({"isGateway": true}));
        let e = w.run("ADD", &conf, "c1", &c).err();
        let msg = e["msg"].as_str().unwrap();
        assert!(
            msg.contains(&format!(
                "\"{}\" already has an IP address different from {}/24",
                w.bridge,
                w.v4(1)
            )),
            "{msg}"
        );
        if w.imp == Impl::Ours {
            // Nothing left: no veth, no reservation.
            assert_eq!(w.veths_in_host(), 0);
            assert!(
                w.data.reservations().is_empty(),
                "{:?}",
                w.data.reservations()
            );
            assert!(!link_exists(&c, "eth0"));
        }
        w.del(&conf, "c1", &c);
        let forced = w.conf(Fam::V4, json!({"isGateway": true, "forceAddress": true}));
        let c2 = w.container();
        w.add(&forced, "c2", &c2);
        assert_eq!(addrs(&w.host, &w.bridge), vec![format!("{}/24", w.v4(1))]);
        ping(&c2, &w.v4(1));
        let s = w.state(&[&c2]);
        w.del(&forced, "c2", &c2);
        s
    });
}

#[test]
fn gateway_on_a_bridge_without_mac() {
    let Some(w) = ours("gateway_on_a_bridge_without_mac", 23, &[]) else {
        return;
    };
    w.host
        .exec_ok("ip", &["link", "add", &w.bridge, "type", "bridge"]);
    let conf = w.conf(Fam::V4, json!({"isGateway": true}));
    let c = w.container();
    let r = w.add(&conf, "c1", &c);
    let mac = r["interfaces"][0]["mac"].as_str().unwrap().to_string();
    assert_ne!(mac, "00:00:00:00:00:00");
    let c2 = w.container();
    let r2 = w.add(&conf, "c2", &c2);
    assert_eq!(r2["interfaces"][0]["mac"], mac.as_str());
    w.del(&conf, "c1", &c);
    w.del(&conf, "c2", &c2);
}

#[test]
fn taken_ifname_leaves_nothing_behind() {
    let Some(w) = ours("taken_ifname_leaves_nothing_behind", 8, FIREWALL_TOOLS) else {
        return;
    };
    let conf = w.conf(
        Fam::Dual,
        json!({"isGateway": true, "ipMasq": true, "macspoofchk": true}),
    );
    let c = w.container();
    c.exec_ok("ip", &["link", "add", "eth0", "type", "bridge"]);
    let e = w.run("ADD", &conf, "c1", &c).err();
    assert!(e["msg"].as_str().unwrap().contains("already exists"), "{e}");
    assert_eq!(w.veths_in_host(), 0);
    assert!(
        w.data.reservations().is_empty(),
        "{:?}",
        w.data.reservations()
    );
    assert!(
        !w.host
            .exec_ok("iptables-save", &["-t", "nat"])
            .contains("CNI-")
    );
    // The dummy is untouched.
    c.exec_ok("ip", &["link", "show", "dev", "eth0"]);
}

#[test]
fn l2_mode_and_check() {
    if skip_unless("l2_mode_and_check", &["ping"]) {
        return;
    }
    compare("l2", 9, |w| {
        let conf = w.conf(Fam::V4, json!({"ipam": null}));
        let (c1, c2) = (w.container(), w.container());
        let r = w.add(&conf, "c1", &c1);
        w.add(&conf, "c2", &c2);
        assert!(r["ips"].is_null(), "{r}");
        assert_eq!(r["interfaces"].as_array().unwrap().len(), 3);
        // Addresses set by hand reach each other over the bridge.
        c1.exec_ok("ip", &["addr", "add", "192.168.77.1/24", "dev", "eth0"]);
        c2.exec_ok("ip", &["addr", "add", "192.168.77.2/24", "dev", "eth0"]);
        ping(&c1, "192.168.77.2");
        c1.exec_ok("ip", &["addr", "flush", "dev", "eth0", "scope", "global"]);
        c2.exec_ok("ip", &["addr", "flush", "dev", "eth0", "scope", "global"]);
        if w.imp == Impl::Ours {
            // The reference fails here ("no plugin name provided").
            w.check(&conf, &r, "c1", &c1).ok();
        }
        let s = w.state(&[&c1, &c2]);
        w.del(&conf, "c1", &c1);
        w.del(&conf, "c2", &c2);
        s
    });
    // disableContainerInterface leaves the container end down.
    let w = World::new(Impl::Ours, 9).unwrap();
    let conf = w.conf(
        Fam::V4,
        json!({"ipam": null, "disableContainerInterface": true}),
    );
    let c = w.container();
    w.add(&conf, "c1", &c);
    assert!(!flags_up(&c.ip_json(&["link", "show", "dev", "eth0"])[0]));
    w.del(&conf, "c1", &c);
    let with_ipam = w.conf(Fam::V4, json!({"disableContainerInterface": true}));
    let e = w.run("ADD", &with_ipam, "c2", &c).err();
    assert_eq!(
        e["msg"],
        "cannot use IPAM when DisableContainerInterface flag is set"
    );
}

#[test]
fn mac_from_each_source() {
    let Some(w) = ours("mac_from_each_source", 10, &[]) else {
        return;
    };
    let cases = [
        (
            json!({}),
            "IgnoreUnknown=1;MAC=0a:00:00:00:0a:01",
            "0a:00:00:00:0a:01",
        ),
        (
            json!({"args": {"cni": {"mac": "0a:00:00:00:0a:02"}}}),
            "IgnoreUnknown=1;MAC=0a:00:00:00:0a:01",
            "0a:00:00:00:0a:02",
        ),
        (
            json!({"args": {"cni": {"mac": "0a:00:00:00:0a:02"}}, "runtimeConfig": {"mac": "0a:00:00:00:0a:03"}}),
            "IgnoreUnknown=1;MAC=0a:00:00:00:0a:01",
            "0a:00:00:00:0a:03",
        ),
        (
            json!({"runtimeConfig": {"mac": "0a:00:00:00:0a:04"}}),
            "",
            "0a:00:00:00:0a:04",
        ),
    ];
    for (i, (extra, cni_args, want)) in cases.iter().enumerate() {
        let conf = w.conf(Fam::V4, extra.clone());
        let c = w.container();
        let cid = format!("c{i}");
        let r = w
            .inv("ADD", &conf, &cid, &c, "eth0")
            .env("CNI_ARGS", cni_args)
            .run()
            .ok();
        assert_eq!(r["interfaces"][2]["mac"], *want);
        assert_eq!(
            c.ip_json(&["link", "show", "dev", "eth0"])[0]["address"],
            *want
        );
        w.del(&conf, &cid, &c);
    }
    // A bad MAC is refused before anything is created.
    let conf = w.conf(Fam::V4, json!({"runtimeConfig": {"mac": "not-a-mac"}}));
    let c = w.container();
    let e = w.run("ADD", &conf, "bad", &c).err();
    assert!(error_msg(&e).starts_with("invalid MAC address"), "{e}");
    assert_eq!(w.veths_in_host(), 0);
}

#[test]
fn old_versions_one_address_per_family() {
    if skip_unless_root("old_versions_one_address_per_family") {
        return;
    }
    for (i, version) in ["0.1.0", "0.2.0"].iter().enumerate() {
        let w = World::new(Impl::Ours, 11 + i as u8).unwrap();
        let mut conf = w.conf(Fam::Dual, json!({"isGateway": true}));
        conf["cniVersion"] = json!(version);
        let c = w.container();
        let r = w.add(&conf, "c1", &c);
        assert_eq!(r["cniVersion"], *version);
        assert_eq!(r["ip4"]["ip"], format!("{}/24", w.v4(2)));
        assert_eq!(r["ip6"]["ip"], format!("{}/64", w.v6(2)));
        assert!(r.get("interfaces").is_none());
        // Two IPv4 ranges cannot be expressed in a 0.x result: refused, and
        // nothing is left behind.
        let mut two = conf.clone();
        two["ipam"]["ranges"] =
            json!([[{"subnet": w.v4_subnet()}], [{"subnet": "10.50.250.0/24"}]]);
        let c2 = w.container();
        let e = w.run("ADD", &two, "c2", &c2).err();
        assert!(
            error_msg(&e).contains("does not support more than 1 address per family"),
            "{e}"
        );
        assert_eq!(w.ports().len(), 1);
        w.del(&conf, "c1", &c);
    }
}

#[test]
fn check_passes_then_fails_after_tampering() {
    let Some(w) = ours("check_passes_then_fails_after_tampering", 13, &[]) else {
        return;
    };
    let conf = w.conf(Fam::Dual, json!({"isDefaultGateway": true}));
    let c = w.container();
    let r = w.add(&conf, "c1", &c);
    w.check(&conf, &r, "c1", &c).ok();
    // With the 1.0.0 Go reference, on its own result.
    if let Some(go) = World::new(Impl::Go, 13) {
        let gconf = go.conf(Fam::Dual, json!({"isDefaultGateway": true}));
        let gc = go.container();
        let gr = go.add(&gconf, "c1", &gc);
        go.check(&gconf, &gr, "c1", &gc).ok();
        go.del(&gconf, "c1", &gc);
    }
    // A missing address.
    let v4 = format!("{}/24", w.v4(2));
    c.exec_ok("ip", &["addr", "del", &v4, "dev", "eth0"]);
    let e = w.check(&conf, &r, "c1", &c).err();
    assert!(e["msg"].as_str().unwrap().contains(&v4), "{e}");
    c.exec_ok("ip", &["addr", "add", &v4, "dev", "eth0"]);
    // A missing route (the default route went with the address).
    let e = w.check(&conf, &r, "c1", &c).err();
    assert!(e["msg"].as_str().unwrap().contains("route"), "{e}");
    c.exec_ok("ip", &["route", "add", "default", "via", &w.v4(1)]);
    w.check(&conf, &r, "c1", &c).ok();
    // A wrong MAC in prevResult.
    let mut bad = r.clone();
    bad["interfaces"][2]["mac"] = json!("0a:00:00:00:00:99");
    w.check(&conf, &bad, "c1", &c).err();
    // The veth removed.
    let host_veth = r["interfaces"][1]["name"].as_str().unwrap();
    w.host.exec_ok("ip", &["link", "del", host_veth]);
    let e = w.check(&conf, &r, "c1", &c).err();
    assert!(e["msg"].as_str().unwrap().contains("eth0"), "{e}");
    // CHECK without prevResult.
    let e = w.run("CHECK", &conf, "c1", &c).err();
    assert_eq!(e["msg"], "Required prevResult missing");
    w.del(&conf, "c1", &c);
}

#[test]
fn del_is_idempotent() {
    let Some(w) = ours("del_is_idempotent", 14, FIREWALL_TOOLS) else {
        return;
    };
    let conf = w.conf(
        Fam::Dual,
        json!({"isGateway": true, "ipMasq": true, "macspoofchk": true}),
    );
    // DEL twice.
    let c = w.container();
    w.add(&conf, "c1", &c);
    assert_eq!(w.data.reservations().len(), 2);
    w.del(&conf, "c1", &c);
    w.del(&conf, "c1", &c);
    assert!(w.data.reservations().is_empty());
    assert_eq!(w.veths_in_host(), 0);
    // DEL after the netns is gone: reservation and rules go too.
    let c2 = w.container();
    let path = c2.path();
    w.add(&conf, "c2", &c2);
    assert!(
        w.host
            .exec_ok("iptables-save", &["-t", "nat"])
            .contains("CNI-")
    );
    assert!(
        w.host
            .exec_ok("nft", &["list", "table", "bridge", "nat"])
            .contains("macspoofchk-c2-eth0")
    );
    drop(c2);
    let out = Invocation::new(&w.plugin, "DEL")
        .attach_at("c2", &path, "eth0")
        .in_host(&w.host)
        .config(&conf)
        .run();
    out.ok();
    assert!(w.data.reservations().is_empty());
    assert!(
        !w.host
            .exec_ok("iptables-save", &["-t", "nat"])
            .contains("CNI-")
    );
    assert!(
        !w.host
            .exec_ok("ip6tables-save", &["-t", "nat"])
            .contains("CNI-")
    );
    assert!(
        !w.host
            .exec_ok("nft", &["list", "table", "bridge", "nat"])
            .contains("macspoofchk")
    );
    // DEL with an empty CNI_NETNS.
    let c3 = w.container();
    w.add(&conf, "c3", &c3);
    Invocation::new(&w.plugin, "DEL")
        .env("CNI_CONTAINERID", "c3")
        .env("CNI_NETNS", "")
        .env("CNI_IFNAME", "eth0")
        .in_host(&w.host)
        .config(&conf)
        .run()
        .ok();
    assert!(w.data.reservations().is_empty());
    assert!(
        !w.host
            .exec_ok("iptables-save", &["-t", "nat"])
            .contains("CNI-")
    );
    // The bridge and its addresses stay.
    assert_eq!(addrs(&w.host, &w.bridge).len(), 2);
}

/// Connects `outside` to the host with a veth 10.51.N.1 (host) / .2.
fn outside_link(w: &World, outside: &Netns) -> String {
    let (a, b) = (unique("bro"), unique("bro"));
    w.host.exec_ok(
        "ip",
        &["link", "add", &a, "type", "veth", "peer", "name", &b],
    );
    w.host
        .exec_ok("ip", &["link", "set", &b, "netns", outside.name()]);
    let host_ip = format!("10.51.{}.1", w.n);
    let out_ip = format!("10.51.{}.2", w.n);
    w.host
        .exec_ok("ip", &["addr", "add", &format!("{host_ip}/24"), "dev", &a]);
    w.host.exec_ok("ip", &["link", "set", &a, "up"]);
    outside.exec_ok("ip", &["addr", "add", &format!("{out_ip}/24"), "dev", &b]);
    outside.exec_ok("ip", &["link", "set", &b, "up"]);
    outside.exec_ok("ip", &["link", "set", "lo", "up"]);
    out_ip
}

/// Connects from `c` to `ip:7777` and returns the source address the
/// listener in `outside` saw.
fn seen_source(c: &Netns, outside: &Netns, ip: &str) -> String {
    let server = std::process::Command::new("ip")
        .args(["netns", "exec", outside.name(), "python3", "-c"])
        .arg(
            "import socket,sys\n\
             s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
             s.bind(('0.0.0.0',7777));s.listen(1);s.settimeout(10)\n\
             print('ready',flush=True)\n\
             c,a=s.accept();print(a[0],flush=True)",
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server = Kill(server);
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(server.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    c.exec_ok(
        "python3",
        &[
            "-c",
            &format!("import socket;socket.create_connection(('{ip}',7777),timeout=5).close()"),
        ],
    );
    lines.next().unwrap().unwrap()
}

#[test]
fn ip_masq_both_backends() {
    if skip_unless("ip_masq_both_backends", FIREWALL_TOOLS) {
        return;
    }
    for (i, backend) in ["iptables", "nftables"].iter().enumerate() {
        let w = World::new(Impl::Ours, 15 + i as u8).unwrap();
        let outside = Netns::new("bro");
        let out_ip = outside_link(&w, &outside);
        let conf = w.conf(
            Fam::V4,
            json!({"isDefaultGateway": true, "ipMasq": true, "ipMasqBackend": backend}),
        );
        let c = w.container();
        // Off first: a new namespace inherits init_net's value.
        sysctls(&w.host, &["net.ipv4.ip_forward=0"]);
        w.add(&conf, "c1", &c);
        assert_eq!(w.host.sysctl("net/ipv4/ip_forward"), "1");
        let seen = seen_source(&c, &outside, &out_ip);
        assert_eq!(seen, format!("10.51.{}.1", w.n), "{backend}");
        w.del(&conf, "c1", &c);
        assert!(
            !w.host
                .exec_ok("iptables-save", &["-t", "nat"])
                .contains("CNI-")
        );
        let nft = w.host.exec_ok("nft", &["list", "ruleset"]);
        assert!(!nft.contains("saddr"), "{nft}");
    }
    // The reference (iptables only in 1.1.1) masquerades the same way.
    if let Some(go) = World::new(Impl::Go, 17) {
        let outside = Netns::new("bro");
        let out_ip = outside_link(&go, &outside);
        let conf = go.conf(Fam::V4, json!({"isDefaultGateway": true, "ipMasq": true}));
        let c = go.container();
        go.add(&conf, "c1", &c);
        assert_eq!(
            seen_source(&c, &outside, &out_ip),
            format!("10.51.{}.1", go.n)
        );
        // Our DEL removes the reference's rules (same chain names).
        let ours = bin("bridge");
        Invocation::new(&ours, "DEL")
            .attach("c1", &c, "eth0")
            .in_host(&go.host)
            .env("CNI_PATH", rcni_tests::bin_dir().display().to_string())
            .config(&conf)
            .run()
            .ok();
        assert!(
            !go.host
                .exec_ok("iptables-save", &["-t", "nat"])
                .contains("CNI-")
        );
    }
}

#[test]
fn macspoofchk_rules_follow_the_reference_layout() {
    let tools = [FIREWALL_TOOLS, &["ping"]].concat();
    let Some(w) = ours("macspoofchk_rules_follow_the_reference_layout", 18, &tools) else {
        return;
    };
    let conf = w.conf(Fam::V4, json!({"macspoofchk": true}));
    let c = w.container();
    let r = w.add(&conf, "c1", &c);
    let t = w.host.exec_ok("nft", &["list", "table", "bridge", "nat"]);
    let veth = r["interfaces"][1]["name"].as_str().unwrap();
    let mac = r["interfaces"][2]["mac"].as_str().unwrap();
    // nft prints priority -300 of the bridge family as "dstnat".
    assert!(
        t.contains("type filter hook prerouting priority dstnat; policy accept;"),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "iifname \"{veth}\" jump cni-br-iface-c1-eth0 comment \"macspoofchk-c1-eth0\""
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "ether saddr {mac} return comment \"macspoofchk-c1-eth0\""
        )),
        "{t}"
    );
    assert!(t.contains("drop comment \"macspoofchk-c1-eth0\""), "{t}");
    // Traffic still flows with the container's own MAC.
    let c2 = w.container();
    w.add(&conf, "c2", &c2);
    c.exec_ok("ip", &["addr", "flush", "dev", "eth0"]);
    c.exec_ok(
        "ip",
        &["addr", "add", &format!("{}/24", w.v4(2)), "dev", "eth0"],
    );
    ping(&c, &w.v4(3));
    // A spoofed source MAC is dropped.
    c.exec_ok(
        "ip",
        &["link", "set", "eth0", "address", "0a:00:00:00:66:66"],
    );
    c.exec_ok("ip", &["neigh", "flush", "all"]);
    assert!(!c.exec("ping", &["-c2", "-W1", &w.v4(3)]).status.success());
    w.del(&conf, "c1", &c);
    let t = w.host.exec_ok("nft", &["list", "table", "bridge", "nat"]);
    assert!(!t.contains("c1-eth0"), "{t}");
    assert!(t.contains("c2-eth0"), "{t}");
    w.del(&conf, "c2", &c2);
}

#[test]
fn gc_and_status() {
    let Some(w) = ours("gc_and_status", 19, FIREWALL_TOOLS) else {
        return;
    };
    let conf = w.conf(
        Fam::V4,
        json!({"isGateway": true, "ipMasq": true, "ipMasqBackend": "nftables", "macspoofchk": true}),
    );
    let (c1, c2) = (w.container(), w.container());
    w.add(&conf, "c1", &c1);
    w.add(&conf, "c2", &c2);
    assert_eq!(w.data.reservations().len(), 2);
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "c1", "ifname": "eth0"}]);
    Invocation::new(&w.plugin, "GC")
        .in_host(&w.host)
        .config(&gc)
        .run()
        .ok();
    let res = w.data.reservations();
    assert_eq!(res.len(), 1, "{res:?}");
    assert!(res.values().all(|v| v.starts_with("c1")));
    let nft = w.host.exec_ok("nft", &["list", "ruleset"]);
    assert!(
        nft.contains("macspoofchk-c1-eth0") && !nft.contains("macspoofchk-c2-eth0"),
        "{nft}"
    );
    assert!(nft.contains("id: c1") && !nft.contains("id: c2"), "{nft}");
    // The other key name works too.
    let mut gc2 = conf.clone();
    gc2["cni.dev/attachments"] = json!([]);
    Invocation::new(&w.plugin, "GC")
        .in_host(&w.host)
        .config(&gc2)
        .run()
        .ok();
    assert!(w.data.reservations().is_empty());
    let nft = w.host.exec_ok("nft", &["list", "ruleset"]);
    assert!(
        !nft.contains("macspoofchk-c1") && !nft.contains("id: c1"),
        "{nft}"
    );
    // STATUS answers as IPAM does.
    Invocation::new(&w.plugin, "STATUS")
        .in_host(&w.host)
        .config(&conf)
        .run()
        .ok();
    let mut broken = conf.clone();
    broken["ipam"]["type"] = json!("no-such-ipam");
    let e = Invocation::new(&w.plugin, "STATUS")
        .in_host(&w.host)
        .config(&broken)
        .run()
        .err();
    assert!(e["msg"].as_str().unwrap().contains("no-such-ipam"), "{e}");
    w.del(&conf, "c1", &c1);
    w.del(&conf, "c2", &c2);
}

#[test]
fn config_errors_touch_nothing() {
    let Some(w) = ours("config_errors_touch_nothing", 20, &[]) else {
        return;
    };
    let c = w.container();
    for (extra, want) in [
        (
            json!({"vlan": 5000}),
            "invalid VLAN ID 5000 (must be between 0 and 4094)",
        ),
        (json!({"mtu": 67}), "invalid MTU 67"),
        (json!({"mtu": 70000}), "invalid MTU 70000"),
        (
            json!({"bridge": "this-name-is-too-long"}),
            "invalid bridge name",
        ),
        (
            json!({"vlanTrunk": [{"minID": 5}]}),
            "minID and maxID should be configured simultaneously, maxID is missing",
        ),
        (
            json!({"ipMasqBackend": "pf"}),
            "unknown ipmasq backend \"pf\"",
        ),
        (json!({"isGateway": "yes"}), "failed to load netconf"),
    ] {
        let conf = w.conf(Fam::V4, extra);
        let e = w.run("ADD", &conf, "c1", &c).err();
        assert!(e["msg"].as_str().unwrap().starts_with(want), "{e}");
    }
    assert!(!link_exists(&w.host, &w.bridge));
    assert!(w.data.reservations().is_empty());
    // An existing link of that name that is not a bridge.
    let peer = unique("brp");
    w.host.exec_ok(
        "ip",
        &[
            "link", "add", &w.bridge, "type", "veth", "peer", "name", &peer,
        ],
    );
    let conf = w.conf(Fam::V4, json!({}));
    let e = w.run("ADD", &conf, "c1", &c).err();
    assert!(
        error_msg(&e).contains("already exists but is not a bridge"),
        "{e}"
    );
    assert!(w.data.reservations().is_empty());
}

#[test]
fn vlan_needs_kernel_support() {
    let Some(w) = ours("vlan_needs_kernel_support", 21, &[]) else {
        return;
    };
    let conf = w.conf(Fam::V4, json!({"vlan": 100, "isGateway": true}));
    let c = w.container();
    let Some(r) = add_with_vlan_filtering(&w, &conf, &c, "vlan_needs_kernel_support") else {
        return;
    };
    assert_eq!(r["interfaces"].as_array().unwrap().len(), 4);
    let vlans = w.host.exec_ok("bridge", &["vlan", "show"]);
    assert!(vlans.contains("100"), "{vlans}");
    w.del(&conf, "c1", &c);
}

/// ADD of `conf` (with VLANs) for `c1` in `c`: its result, or None where
/// this kernel's bridges lack VLAN filtering and the ADD failed with
/// EOPNOTSUPP, leaving no address reserved ([`skip_without_kernel_feature`]
/// said so, or failed `test` where the kernel must have it).
fn add_with_vlan_filtering(w: &World, conf: &Value, c: &Netns, test: &str) -> Option<Value> {
    let out = w.run("ADD", conf, "c1", c);
    if out.code == 0 {
        kernel_feature_present(test, "VLAN filtering on bridges");
        return Some(out.ok());
    }
    let e = out.err();
    assert!(
        error_msg(&e).contains("Operation not supported") || error_msg(&e).contains("os error 95"),
        "{e}"
    );
    skip_without_kernel_feature(test, "VLAN filtering on bridges");
    assert!(w.data.reservations().is_empty());
    None
}

/// The VLANs of one bridge port, from `bridge -j vlan show`: (vid, flags).
/// iproute2 prints a range as one entry with `vlanEnd` when it compresses.
fn port_vlans(host: &Netns, port: &str) -> Vec<(u64, Vec<String>)> {
    let text = host.exec_ok("bridge", &["-j", "vlan", "show", "dev", port]);
    let v: Value = serde_json::from_str(if text.trim().is_empty() { "[]" } else { &text })
        .unwrap_or_else(|e| panic!("bridge -j vlan show: {e}: {text}"));
    let mut out = Vec::new();
    for entry in v.as_array().into_iter().flatten() {
        for vlan in entry["vlans"].as_array().into_iter().flatten() {
            let first = vlan["vlan"].as_u64().unwrap();
            let last = vlan["vlanEnd"].as_u64().unwrap_or(first);
            let flags: Vec<String> = vlan["flags"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect();
            out.extend((first..=last).map(|vid| (vid, flags.clone())));
        }
    }
    out
}

#[test]
fn vlan_trunk_ports_carry_tagged_vlans_only() {
    const T: &str = "vlan_trunk_ports_carry_tagged_vlans_only";
    let Some(w) = ours(T, 23, &[]) else {
        return;
    };
    let ipam = json!({
        "type": "host-local",
        "dataDir": w.data.path().display().to_string(),
        "ranges": [[{"subnet": "10.128.1.0/24"}]],
    });
    let conf = w.conf(
        Fam::V4,
        json!({"ipam": ipam, "vlanTrunk": [{"minID": 101, "maxID": 103}, {"id": 200}]}),
    );
    let c = Netns::new("vmc");
    if add_with_vlan_filtering(&w, &conf, &c, T).is_none() {
        return;
    }
    let ports = w.ports();
    assert_eq!(ports.len(), 1, "{ports:?}");
    let port = ports[0]["ifname"].as_str().unwrap().to_string();
    // The trunk's VLANs, tagged; with no access VLAN the port keeps VLAN 1
    // as its native (PVID, untagged) VLAN, as in the reference.
    let native = vec!["PVID".to_string(), "Egress Untagged".to_string()];
    let mut want: Vec<(u64, Vec<String>)> = vec![(1, native)];
    want.extend([101, 102, 103, 200].map(|v| (v, vec![])));
    assert_eq!(port_vlans(&w.host, &port), want);
    // An access port on the same bridge: only its VLAN, as PVID and
    // untagged; the default VLAN 1 is gone (preserveDefaultVlan is false).
    let access = w.conf(Fam::V4, json!({"ipam": conf["ipam"], "vlan": 300}));
    let c2 = Netns::new("vmc");
    w.add(&access, "c2", &c2);
    let port2 = w
        .ports()
        .iter()
        .filter_map(|p| p["ifname"].as_str().map(str::to_string))
        .find(|p| *p != port)
        .unwrap();
    let pvid = vec!["PVID".to_string(), "Egress Untagged".to_string()];
    assert_eq!(port_vlans(&w.host, &port2), vec![(300, pvid)]);
    w.del(&access, "c2", &c2);
    w.del(&conf, "c1", &c);
    assert!(w.ports().is_empty());
    assert!(w.data.reservations().is_empty());
}

#[test]
fn parallel_adds_on_one_bridge() {
    let Some(w) = ours("parallel_adds_on_one_bridge", 22, &["ping"]) else {
        return;
    };
    let conf = w.conf(Fam::V4, json!({"isGateway": true}));
    let containers: Vec<Netns> = (0..32).map(|_| w.container()).collect();
    let outs: Vec<PluginOutput> = std::thread::scope(|s| {
        let handles: Vec<_> = containers
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let inv = w.inv("ADD", &conf, &format!("p{i}"), c, "eth0");
                s.spawn(move || inv.run())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ips: Vec<String> = outs.iter().flat_map(|o| result_ips(&o.ok())).collect();
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 32);
    assert_eq!(w.ports().len(), 32);
    ping(&containers[0], &w.v4(1));
    // Container 0's own address, not the lowest of all: that one may be
    // container 31's, whose lo is down, so the ping would never answer.
    let first = result_ips(&outs[0].ok()).remove(0);
    ping(&containers[31], first.trim_end_matches("/24"));
    std::thread::scope(|s| {
        for (i, c) in containers.iter().enumerate() {
            let inv = w.inv("DEL", &conf, &format!("p{i}"), c, "eth0");
            s.spawn(move || inv.run().ok());
        }
    });
    assert_eq!(w.ports().len(), 0);
    assert!(w.data.reservations().is_empty());
}

/// ipMasq with iptables writes IPv4, then IPv6: when IPv6's transaction
/// fails, the failed ADD leaves no masquerade chain in either family (the
/// undo removes IPv4's), no veth and no reservation, and the error is the
/// tool's.
#[test]
fn ip_masq_second_family_failure_leaves_nothing() {
    let Some(w) = ours(
        "ip_masq_second_family_failure_leaves_nothing",
        0,
        FIREWALL_TOOLS,
    ) else {
        return;
    };
    let mut conf = w.conf(
        Fam::Dual,
        json!({"isGateway": true, "ipMasq": true, "ipMasqBackend": "iptables"}),
    );
    conf["ipam"]["ranges"] = json!([
        [{"subnet": "10.148.33.0/24"}],
        [{"subnet": "fd21:148::33:0/112"}]
    ]);
    let c = w.container();
    let fails = Tools::failing("ip6tables-restore");
    let e = w
        .inv("ADD", &conf, "frb1", &c, "eth0")
        .env("PATH", fails.path())
        .run()
        .err();
    assert_eq!(e["code"], 999, "{e}");
    assert!(e["msg"].as_str().unwrap().starts_with("iptables: "), "{e}");
    assert!(fails.ran("iptables-restore"), "IPv4 was not written first");
    let nat = |tool: &str| w.host.exec_ok(tool, &["-t", "nat"]);
    for tool in ["iptables-save", "ip6tables-save"] {
        assert!(!nat(tool).contains("CNI-"), "{tool}:\n{}", nat(tool));
    }
    assert_eq!(w.veths_in_host(), 0);
    assert!(w.data.reservations().is_empty());
    // With working tools: ADD, then DEL.
    w.add(&conf, "frb1", &c);
    assert!(nat("iptables-save").contains("CNI-") && nat("ip6tables-save").contains("CNI-"));
    w.del(&conf, "frb1", &c);
    for tool in ["iptables-save", "ip6tables-save"] {
        assert!(!nat(tool).contains("CNI-"), "{tool}:\n{}", nat(tool));
    }
}

/// The bridge family's `nat` table in `host`: its chains and, per rule,
/// `(chain, comment)`, sorted.
fn lk_spoof_table(host: &Netns) -> (Vec<String>, Vec<(String, String)>) {
    let out = host.exec("nft", &["-j", "list", "table", "bridge", "nat"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let (mut chains, mut rules) = (Vec::new(), Vec::new());
    for item in v["nftables"].as_array().into_iter().flatten() {
        if let Some(name) = item["chain"]["name"].as_str() {
            chains.push(name.to_string());
        }
        if let Some(chain) = item["rule"]["chain"].as_str() {
            let comment = item["rule"]["comment"].as_str().unwrap_or_default();
            rules.push((chain.to_string(), comment.to_string()));
        }
    }
    chains.sort();
    rules.sort();
    (chains, rules)
}

/// One attachment's spoof-check objects, named by `id`: its two chains and
/// its four rules.
fn lk_spoof_objects(id: &str) -> (Vec<String>, Vec<(String, String)>) {
    let (ic, mc, c) = (
        format!("cni-br-iface-{id}"),
        format!("cni-br-iface-{id}-mac"),
        format!("macspoofchk-{id}"),
    );
    let rules = vec![
        ("PREROUTING".to_string(), c.clone()),
        (ic.clone(), c.clone()),
        (mc.clone(), c.clone()),
        (mc.clone(), c),
    ];
    (vec![ic, mc], rules)
}

/// The expected table holding the objects of `ids`.
fn lk_spoof_expected(ids: &[&str]) -> (Vec<String>, Vec<(String, String)>) {
    let (mut chains, mut rules) = (vec!["PREROUTING".to_string()], Vec::new());
    for id in ids {
        let (c, r) = lk_spoof_objects(id);
        chains.extend(c);
        rules.extend(r);
    }
    chains.sort();
    rules.sort();
    (chains, rules)
}

fn lk_spoof_conf(w: &World, subnet: &str) -> Value {
    w.conf(
        Fam::V4,
        json!({"macspoofchk": true, "ipam": {"type": "host-local",
            "dataDir": w.data.path().display().to_string(),
            "ranges": [[{"subnet": subnet}]]}}),
    )
}

/// An interface name with nft syntax in it (`;`, `#`, `{`, `$`) no longer
/// breaks the pod's own transaction (issue 25): ADD succeeds and leaves
/// exactly its own chains and rules, under the hex-encoded name; DEL
/// removes them all.
#[test]
fn lk_spoofcheck_ifname_with_nft_syntax() {
    let Some(w) = ours("lk_spoofcheck_ifname_with_nft_syntax", 20, FIREWALL_TOOLS) else {
        return;
    };
    let conf = lk_spoof_conf(&w, "10.152.20.0/24");
    let c = w.container();
    for ifname in ["e;#{$x", "a\"b}", "eth-1"] {
        let out = w.inv("ADD", &conf, "lkc1", &c, ifname).run();
        out.ok();
        let id = format!("lkc1-/{}", cni_fw::hash::hex(ifname.as_bytes()));
        assert_eq!(
            lk_spoof_table(&w.host),
            lk_spoof_expected(&[&id]),
            "{ifname}"
        );
        w.inv("DEL", &conf, "lkc1", &c, ifname).run().ok();
        assert_eq!(lk_spoof_table(&w.host), lk_spoof_expected(&[]), "{ifname}");
    }
}

/// `eth0` and `eth0-mac` of one container: the second's chain was the
/// first's MAC chain, which its ADD flushed and its DEL deleted (issue 25).
/// Now both keep their own chains, and each DEL removes only its own.
#[test]
fn lk_spoofcheck_eth0_and_eth0_mac_coexist() {
    let Some(w) = ours(
        "lk_spoofcheck_eth0_and_eth0_mac_coexist",
        21,
        FIREWALL_TOOLS,
    ) else {
        return;
    };
    let conf = lk_spoof_conf(&w, "10.152.21.0/24");
    let c = w.container();
    let first = w.inv("ADD", &conf, "lkc1", &c, "eth0").run().ok();
    let mac = first["interfaces"][2]["mac"].as_str().unwrap().to_string();
    w.inv("ADD", &conf, "lkc1", &c, "eth0-mac").run().ok();
    let other = format!("lkc1-/{}", cni_fw::hash::hex(b"eth0-mac"));
    // eth0's chains keep the reference's names.
    assert_eq!(
        lk_spoof_table(&w.host),
        lk_spoof_expected(&["lkc1-eth0", &other])
    );
    let text = w.host.exec_ok(
        "nft",
        &[
            "list",
            "chain",
            "bridge",
            "nat",
            "cni-br-iface-lkc1-eth0-mac",
        ],
    );
    assert!(
        text.contains(&format!("ether saddr {mac} return")) && text.contains("drop"),
        "{text}"
    );
    w.inv("DEL", &conf, "lkc1", &c, "eth0-mac").run().ok();
    assert_eq!(lk_spoof_table(&w.host), lk_spoof_expected(&["lkc1-eth0"]));
    // And the other way round.
    w.inv("ADD", &conf, "lkc1", &c, "eth0-mac").run().ok();
    w.inv("DEL", &conf, "lkc1", &c, "eth0").run().ok();
    assert_eq!(lk_spoof_table(&w.host), lk_spoof_expected(&[&other]));
    w.inv("DEL", &conf, "lkc1", &c, "eth0-mac").run().ok();
    assert_eq!(lk_spoof_table(&w.host), lk_spoof_expected(&[]));
}

/// With iptables-nft, ipMasq's rules go over netlink once the node has a
/// `nat` table (the first ADD of a node writes them with iptables-restore,
/// which creates it): no tool runs, and `iptables -t nat -S` prints
/// exactly the reference's text, IPv4 and IPv6. CHECK passes; a chain
/// there already is left to iptables-restore, which refills it; our DEL
/// and the Go reference's DEL remove the rules.
#[test]
fn nm_masq_over_netlink_reads_as_iptables_restore_writes_it() {
    let Some(w) = ours(
        "nm_masq_over_netlink_reads_as_iptables_restore_writes_it",
        0,
        FIREWALL_TOOLS,
    ) else {
        return;
    };
    let subnets = ["10.181.1.0/24", "fd00:181::1:0/112"];
    let mut conf = w.conf(
        Fam::Dual,
        json!({"isGateway": true, "ipMasq": true, "ipMasqBackend": "iptables"}),
    );
    conf["ipam"]["ranges"] = json!([[{"subnet": subnets[0]}], [{"subnet": subnets[1]}]]);
    let net = w.data.name();
    let tools = Tools::recording("xtables-nft-multi");
    let run = |cmd: &str, conf: &Value, cid: &str, c: &Netns| {
        w.inv(cmd, conf, cid, c, "eth0")
            .env("PATH", tools.path())
            .run()
    };
    let restored = |calls: &[String]| calls.iter().any(|c| c.contains("tables-restore"));
    let (c1, c2) = (w.container(), w.container());
    let r1 = run("ADD", &conf, "nmc1", &c1).ok();
    assert!(
        restored(&tools.take_calls()),
        "a node's first ADD creates nat"
    );
    let r2 = run("ADD", &conf, "nmc2", &c2).ok();
    let calls = tools.take_calls();
    assert!(calls.is_empty(), "no tool runs: {calls:?}");
    for (cid, r) in [("nmc1", &r1), ("nmc2", &r2)] {
        let want = masq_expected(net, cid, &result_ips(r), &subnets);
        assert_eq!(masq_lines(&w.host, net, cid), want, "{cid}");
    }
    let mut checked = conf.clone();
    checked["prevResult"] = r2.clone();
    run("CHECK", &checked, "nmc2", &c2).ok();
    // A chain there already (a stale one): iptables-restore flushes and
    // refills it.
    let stale = cni_fw::hash::chain_name(net, "nmc4");
    for tool in ["iptables", "ip6tables"] {
        w.host.exec_ok(tool, &["-t", "nat", "-N", &stale]);
        w.host
            .exec_ok(tool, &["-t", "nat", "-A", &stale, "-j", "ACCEPT"]);
    }
    let c4 = w.container();
    let r4 = run("ADD", &conf, "nmc4", &c4).ok();
    assert!(restored(&tools.take_calls()));
    let want4 = masq_expected(net, "nmc4", &result_ips(&r4), &subnets);
    assert_eq!(masq_lines(&w.host, net, "nmc4"), want4);
    for (cid, c) in [("nmc2", &c2), ("nmc4", &c4)] {
        run("DEL", &conf, cid, c).ok();
    }
    assert_eq!(
        masq_lines(&w.host, net, "nmc2"),
        [vec![], vec![]] as [Vec<String>; 2]
    );
    let want1 = masq_expected(net, "nmc1", &result_ips(&r1), &subnets);
    assert_eq!(masq_lines(&w.host, net, "nmc1"), want1);
    // The reference's DEL finds and removes what we wrote over netlink.
    if let (Some(go), Some(_)) = (go_bin("bridge"), go_bin("host-local")) {
        let c3 = w.container();
        let r3 = run("ADD", &conf, "nmc3", &c3).ok();
        assert!(tools.take_calls().is_empty());
        let want3 = masq_expected(net, "nmc3", &result_ips(&r3), &subnets);
        assert_eq!(masq_lines(&w.host, net, "nmc3"), want3);
        let mut go_conf = conf.clone();
        go_conf["cniVersion"] = json!("1.0.0");
        Invocation::new(&go, "DEL")
            .attach("nmc3", &c3, "eth0")
            .in_host(&w.host)
            .env("CNI_PATH", go.parent().unwrap().display().to_string())
            .config(&go_conf)
            .run()
            .ok();
        assert_eq!(
            masq_lines(&w.host, net, "nmc3"),
            [vec![], vec![]] as [Vec<String>; 2]
        );
    }
    run("DEL", &conf, "nmc1", &c1).ok();
    for tool in ["iptables", "ip6tables"] {
        let nat = w.host.exec_ok(tool, &["-t", "nat", "-S"]);
        assert!(!nat.contains("CNI-"), "{tool}:\n{nat}");
    }
}

/// Many first ADDs at once on a node without a `nat` table, then as many
/// on the node that has one (over netlink), then every DEL at once: every
/// call succeeds (no "chain exists" race), each container's masquerade
/// rules are there exactly once in both families, and nothing is left.
#[test]
fn nm_masq_storm_on_a_cold_node() {
    let Some(w) = ours("nm_masq_storm_on_a_cold_node", 0, FIREWALL_TOOLS) else {
        return;
    };
    const PODS: usize = 12;
    let subnets = ["10.182.0.0/24", "fd00:182::/112"];
    let mut conf = w.conf(
        Fam::Dual,
        json!({"isGateway": true, "ipMasq": true, "ipMasqBackend": "iptables"}),
    );
    conf["ipam"]["ranges"] = json!([[{"subnet": subnets[0]}], [{"subnet": subnets[1]}]]);
    let net = w.data.name();
    let containers: Vec<Netns> = (0..2 * PODS).map(|_| w.container()).collect();
    let storm = |cmd: &str, range: std::ops::Range<usize>| -> Vec<PluginOutput> {
        let barrier = std::sync::Barrier::new(range.len());
        std::thread::scope(|s| {
            let handles: Vec<_> = range
                .map(|i| {
                    let inv = w.inv(cmd, &conf, &format!("nms{i}"), &containers[i], "eth0");
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        inv.run()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    let mut results = Vec::new();
    for wave in [0..PODS, PODS..2 * PODS] {
        for out in storm("ADD", wave) {
            results.push(out.ok());
        }
    }
    for (i, r) in results.iter().enumerate() {
        let cid = format!("nms{i}");
        let want = masq_expected(net, &cid, &result_ips(r), &subnets);
        assert_eq!(masq_lines(&w.host, net, &cid), want, "{cid}");
    }
    for out in storm("DEL", 0..2 * PODS) {
        out.ok();
    }
    for tool in ["iptables", "ip6tables"] {
        let nat = w.host.exec_ok(tool, &["-t", "nat", "-S"]);
        assert!(!nat.contains("CNI-"), "{tool}:\n{nat}");
    }
}
