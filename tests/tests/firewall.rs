//! The firewall plugin against real netfilter state. Every test builds its
//! own namespaces (named `fw…`): a private "host" in which the plugins run
//! (its FORWARD chain, never the machine's), bridges and containers made by
//! the test itself, and an "outside" namespace routed to the host over a
//! veth. The plugins get a `prevResult` written by the test, as the bridge
//! plugin would return it (the bridge first).
//!
//! Subnets of test `n`: bridge `k` 10.121.(4n+k).0/24 and
//! fd21:121::(4n+k):0/112, the uplink 10.121.(4n+3).0/24 and
//! fd21:121::(4n+3):0/112; tests `n` from 100 on (the ADD over netlink)
//! are in 10.138 and fd21:138:: with `n - 100`.
//!
//! `DBUS_SYSTEM_BUS_ADDRESS` points nowhere in every invocation, so neither
//! implementation can reach a firewalld of the machine: they use iptables.

#![cfg(test)]

use rcni_tests::fw_tools::Tools;
use rcni_tests::netns_setup::{ip_batch, sysctls};
use rcni_tests::{FIREWALL_TOOLS, Invocation, Netns, PluginOutput, bin, go_bin, skip_unless};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const NO_BUS: &str = "unix:path=/nonexistent/rcni-no-bus";

fn skip(test: &str, go: bool) -> bool {
    use std::io::Write;
    if skip_unless(test, FIREWALL_TOOLS) {
        return true;
    }
    let why = if go && go_bin("firewall").is_none() {
        "needs the Go reference plugins in /usr/lib/cni"
    } else {
        return false;
    };
    let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: {why}");
    true
}

fn ours() -> std::path::PathBuf {
    bin("firewall")
}

fn go() -> std::path::PathBuf {
    go_bin("firewall").expect("Go firewall")
}

/// One test's world: the host, the outside, bridges and containers.
struct Lab {
    n: u8,
    host: Netns,
    outside: Netns,
    containers: Vec<Netns>,
    bridges: u8,
}

/// The second group of the addresses of test `n` and its index there.
fn subnet(n: u8) -> (u8, u8) {
    if n >= 100 { (138, n - 100) } else { (121, n) }
}

fn v4(n: u8, k: u8, host: u8) -> String {
    let (net, n) = subnet(n);
    format!("10.{net}.{}.{host}", 4 * n + k)
}

/// In canonical form, as iptables prints it.
fn v6(n: u8, k: u8, host: u8) -> String {
    let (net, n) = subnet(n);
    let a: std::net::Ipv6Addr = format!("fd21:{net}::{}:{host}", 4 * u16::from(n) + u16::from(k))
        .parse()
        .unwrap();
    a.to_string()
}

impl Lab {
    /// The host (forwarding on, FORWARD policy DROP in both families) and
    /// the outside namespace, 10.121.(4n+3).2 / ::2, routed via the host.
    fn new(n: u8) -> Lab {
        let host = Netns::new("fwh");
        let outside = Netns::new("fwo");
        for ns in [&host, &outside] {
            sysctls(
                ns,
                &[
                    "net.ipv6.conf.all.accept_dad=0",
                    "net.ipv6.conf.default.accept_dad=0",
                ],
            );
        }
        sysctls(
            &host,
            &["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"],
        );
        host.exec_ok("iptables", &["-w", "-P", "FORWARD", "DROP"]);
        host.exec_ok("ip6tables", &["-w", "-P", "FORWARD", "DROP"]);
        let up = 3;
        ip_batch(
            &host,
            &[
                "link set lo up".into(),
                format!(
                    "link add fwup type veth peer name eth0 netns {}",
                    outside.name()
                ),
                format!("addr add {}/24 dev fwup", v4(n, up, 1)),
                format!("addr add {}/112 dev fwup nodad", v6(n, up, 1)),
                "link set fwup up".into(),
            ],
        );
        ip_batch(
            &outside,
            &[
                "link set lo up".into(),
                format!("addr add {}/24 dev eth0", v4(n, up, 2)),
                format!("addr add {}/112 dev eth0 nodad", v6(n, up, 2)),
                "link set eth0 up".into(),
                format!("route add default via {}", v4(n, up, 1)),
                format!("route add default via {}", v6(n, up, 1)),
            ],
        );
        Lab {
            n,
            host,
            outside,
            containers: Vec::new(),
            bridges: 0,
        }
    }

    /// A host with nothing in it (for comparing rule texts).
    fn bare() -> Netns {
        Netns::new("fwb")
    }

    /// Bridge `k` (0..=2) in the host, `fwbr<k>`, with the gateway addresses.
    fn bridge(&mut self, k: u8) -> String {
        let name = format!("fwbr{k}");
        ip_batch(
            &self.host,
            &[
                format!("link add {name} type bridge"),
                format!("addr add {}/24 dev {name}", v4(self.n, k, 1)),
                format!("addr add {}/112 dev {name} nodad", v6(self.n, k, 1)),
                format!("link set {name} up"),
            ],
        );
        self.bridges += 1;
        name
    }

    /// A container on bridge `k` with host number `host`; returns its index
    /// and the `prevResult` the bridge plugin would have returned.
    fn container(&mut self, k: u8, host: u8) -> (usize, Value) {
        let ns = Netns::new("fwc");
        let hostif = format!("fwv{}{k}{host}", self.n);
        let br = format!("fwbr{k}");
        sysctls(
            &ns,
            &[
                "net.ipv6.conf.all.accept_dad=0",
                "net.ipv6.conf.default.accept_dad=0",
            ],
        );
        ip_batch(
            &self.host,
            &[
                format!(
                    "link add {hostif} type veth peer name eth0 netns {}",
                    ns.name()
                ),
                format!("link set {hostif} master {br} up"),
            ],
        );
        let (a4, a6) = (v4(self.n, k, host), v6(self.n, k, host));
        ip_batch(
            &ns,
            &[
                "link set lo up".into(),
                format!("addr add {a4}/24 dev eth0"),
                format!("addr add {a6}/112 dev eth0 nodad"),
                "link set eth0 up".into(),
                format!("route add default via {}", v4(self.n, k, 1)),
                format!("route add default via {}", v6(self.n, k, 1)),
            ],
        );
        let prev = json!({
            "cniVersion": "1.0.0",
            "interfaces": [
                {"name": br},
                {"name": hostif},
                {"name": "eth0", "sandbox": ns.path()}
            ],
            "ips": [
                {"address": format!("{a4}/24"), "gateway": v4(self.n, k, 1), "interface": 2},
                {"address": format!("{a6}/112"), "gateway": v6(self.n, k, 1), "interface": 2}
            ]
        });
        self.containers.push(ns);
        (self.containers.len() - 1, prev)
    }

    fn ns(&self, i: usize) -> &Netns {
        &self.containers[i]
    }
}

/// The firewall config of network `net`, with `extra` keys and `prev`.
fn conf(net: &str, extra: &Value, prev: Option<&Value>) -> Value {
    let mut c = json!({"cniVersion": "1.0.0", "name": net, "type": "firewall"});
    for (k, v) in extra.as_object().into_iter().flatten() {
        c[k] = v.clone();
    }
    if let Some(p) = prev {
        c["prevResult"] = p.clone();
    }
    c
}

/// Runs `plugin` in `host` for container netns `container`.
fn run(
    plugin: &std::path::Path,
    cmd: &str,
    host: &Netns,
    container: &Netns,
    cid: &str,
    conf: &Value,
) -> PluginOutput {
    Invocation::new(plugin, cmd)
        .attach(cid, container, "eth0")
        .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
        .in_host(host)
        .config(conf)
        .run()
}

/// `iptables-save -t filter` (or ip6tables) in `ns`, without the comment
/// lines and counters.
fn save(ns: &Netns, v6: bool) -> Vec<String> {
    let tool = if v6 {
        "ip6tables-save"
    } else {
        "iptables-save"
    };
    ns.exec_ok(tool, &["-t", "filter"])
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| match l.strip_suffix(" [0:0]") {
            Some(s) if l.starts_with(':') => s.split(' ').take(2).collect::<Vec<_>>().join(" "),
            _ => l.to_string(),
        })
        .collect()
}

/// The rules (`-A …`) of both families.
fn rules(ns: &Netns) -> Vec<String> {
    let mut r: Vec<String> = save(ns, false)
        .into_iter()
        .chain(save(ns, true))
        .filter(|l| l.starts_with("-A "))
        .collect();
    r.sort();
    r
}

/// The rules that let `addr`'s traffic through (the reference's texts).
fn address_rules(addr: &str) -> [String; 2] {
    let len = if addr.contains(':') { 128 } else { 32 };
    [
        format!(
            "-A CNI-FORWARD -d {addr}/{len} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
        ),
        format!("-A CNI-FORWARD -s {addr}/{len} -j ACCEPT"),
    ]
}

fn has_address_rules(ns: &Netns, addr: &str) -> bool {
    has_address_rules_in(&save(ns, addr.contains(':')), addr)
}

fn no_address_rules(ns: &Netns, addr: &str) -> bool {
    no_address_rules_in(&save(ns, addr.contains(':')), addr)
}

/// rcni's records of `addr` (`CNI-FW-ATTACHMENTS`).
fn records(ns: &Netns, addr: &str) -> usize {
    records_in(&save(ns, addr.contains(':')), addr)
}

/// [`has_address_rules`] in `saved`, the [`save`] of `addr`'s family: one
/// `iptables-save` serves several questions (a process costs 40-90 ms in
/// scripts/vmtest's qemu).
fn has_address_rules_in(saved: &[String], addr: &str) -> bool {
    address_rules(addr).iter().all(|r| saved.contains(r))
}

fn no_address_rules_in(saved: &[String], addr: &str) -> bool {
    address_rules(addr).iter().all(|r| !saved.contains(r))
}

fn records_in(saved: &[String], addr: &str) -> usize {
    let prefix = format!("-A CNI-FW-ATTACHMENTS -s {addr}/");
    saved.iter().filter(|l| l.starts_with(&prefix)).count()
}

/// A running `rcni-echo serve`, killed on drop.
struct Server(Child);

impl Server {
    fn start(ns: &Netns, port: u16) -> Server {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns.name()])
            .arg(bin("rcni-echo"))
            .args(["serve", "hello", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn rcni-echo");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("ready");
        assert_eq!(line.trim(), "ready");
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether a TCP connection from `from` to `addr:port` gets the answer.
fn tcp_ok(from: &Netns, addr: &str, port: u16) -> bool {
    let echo = bin("rcni-echo").display().to_string();
    // Neighbour discovery may delay the first IPv6 packets: a few tries.
    (0..3).any(|_| {
        let out = from.exec(&echo, &["ask", "tcp", addr, &port.to_string(), "0", "700"]);
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "hello"
    })
}

fn ping_ok(from: &Netns, addr: &str) -> bool {
    (0..3).any(|_| {
        from.exec("ping", &["-c", "1", "-W", "1", addr])
            .status
            .success()
    })
}

#[test]
fn rule_texts_match_the_reference() {
    if skip("rule_texts_match_the_reference", true) {
        return;
    }
    let mut lab = Lab::new(0);
    lab.bridge(0);
    let (i, prev) = lab.container(0, 2);
    let go_host = Lab::bare();
    let our_host = Lab::bare();
    for policy in ["open", "same-bridge"] {
        let c = conf("fwnet", &json!({"ingressPolicy": policy}), Some(&prev));
        // Go v1.1.1 prints an empty "dns" object; both print the prevResult.
        let mut theirs = run(&go(), "ADD", &go_host, lab.ns(i), "fwc1", &c).ok();
        if theirs["dns"] == json!({}) {
            theirs.as_object_mut().unwrap().remove("dns");
        }
        assert_eq!(
            theirs,
            run(&ours(), "ADD", &our_host, lab.ns(i), "fwc1", &c).ok(),
            "ADD output (the prevResult)"
        );
    }
    for v6 in [false, true] {
        let addr = if v6 { v6_addr(&prev) } else { v4_addr(&prev) };
        let len = if v6 { 128 } else { 32 };
        let shared = "\"CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)\"";
        let own = "\"CNI firewall plugin rules (ingressPolicy: same-bridge)\"";
        let want: Vec<String> = vec![
            format!("-A FORWARD -m comment --comment {shared} -j CNI-ISOLATION-STAGE-1"),
            "-A FORWARD -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD".into(),
            "-A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-ADMIN".into(),
            format!("-A CNI-FORWARD -d {addr}/{len} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"),
            format!("-A CNI-FORWARD -s {addr}/{len} -j ACCEPT"),
            format!("-A CNI-ISOLATION-STAGE-1 -i fwbr0 ! -o fwbr0 -m comment --comment {own} -j CNI-ISOLATION-STAGE-2"),
            format!("-A CNI-ISOLATION-STAGE-1 -m comment --comment {shared} -j RETURN"),
            format!("-A CNI-ISOLATION-STAGE-2 -o fwbr0 -m comment --comment {shared} -j DROP"),
            format!("-A CNI-ISOLATION-STAGE-2 -m comment --comment {shared} -j RETURN"),
        ];
        // One save of each host serves every comparison below.
        let (ours_saved, go_saved) = (save(&our_host, v6), save(&go_host, v6));
        let our_rules: Vec<&String> = ours_saved
            .iter()
            .filter(|l| l.starts_with("-A ") && !l.starts_with("-A CNI-FW-ATTACHMENTS "))
            .collect();
        assert_eq!(
            our_rules,
            want.iter().collect::<Vec<_>>(),
            "our rules, v6={v6}"
        );
        // Go v1.1.1 writes the same, but its older comment on the rules
        // shared by all bridges.
        let go_rules: Vec<String> = go_saved
            .iter()
            .filter(|l| l.starts_with("-A "))
            .map(|l| {
                if l.contains("-i fwbr0 ! -o fwbr0") {
                    l.clone()
                } else {
                    l.replace(own, shared)
                }
            })
            .collect();
        assert_eq!(go_rules, want, "Go's rules, v6={v6}");
        // Chains: the reference's, plus rcni's record chain.
        let chains = |saved: &[String]| -> Vec<String> {
            saved
                .iter()
                .filter(|l| l.starts_with(":CNI"))
                .cloned()
                .collect()
        };
        let mut go_chains = chains(&go_saved);
        go_chains.push(":CNI-FW-ATTACHMENTS -".into());
        go_chains.sort();
        let mut our_chains = chains(&ours_saved);
        our_chains.sort();
        assert_eq!(our_chains, go_chains);
        assert_eq!(records_in(&ours_saved, &addr), 1);
    }
    // A custom admin chain.
    let admin_host = Lab::bare();
    let c = conf(
        "fwnet",
        &json!({"iptablesAdminChainName": "FW-MINE"}),
        Some(&prev),
    );
    run(&ours(), "ADD", &admin_host, lab.ns(i), "fwc1", &c).ok();
    let s = save(&admin_host, false);
    assert!(s.contains(&":FW-MINE -".to_string()), "{s:?}");
    assert!(s.contains(
        &"-A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j FW-MINE"
            .to_string()
    ));
    run(&ours(), "CHECK", &admin_host, lab.ns(i), "fwc1", &c).ok();
    run(&go(), "CHECK", &admin_host, lab.ns(i), "fwc1", &c).ok();
}

fn v4_addr(prev: &Value) -> String {
    addr_of(prev, false)
}

fn v6_addr(prev: &Value) -> String {
    addr_of(prev, true)
}

fn addr_of(prev: &Value, v6: bool) -> String {
    prev["ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ip| {
            ip["address"]
                .as_str()
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .to_string()
        })
        .find(|a| a.contains(':') == v6)
        .unwrap()
}

/// With the host's FORWARD policy DROP, the container reaches the outside
/// (ping, TCP; both families) only between ADD and DEL.
#[test]
fn forwarding_passes_only_while_added() {
    if skip("forwarding_passes_only_while_added", false) {
        return;
    }
    let mut lab = Lab::new(1);
    lab.bridge(0);
    let (i, prev) = lab.container(0, 2);
    let _server = Server::start(&lab.outside, 8080);
    let out4 = v4(lab.n, 3, 2);
    let out6 = v6(lab.n, 3, 2);
    let c = conf("fwfwd", &json!({}), Some(&prev));
    let blocked = |what: &str| {
        assert!(!tcp_ok(lab.ns(i), &out4, 8080), "{what}: TCP v4 passed");
        assert!(!tcp_ok(lab.ns(i), &out6, 8080), "{what}: TCP v6 passed");
        assert!(!ping_ok(lab.ns(i), &out4), "{what}: ping v4 passed");
    };
    blocked("before ADD");
    run(&ours(), "ADD", &lab.host, lab.ns(i), "fwfwd1", &c).ok();
    assert!(tcp_ok(lab.ns(i), &out4, 8080), "TCP v4 after ADD");
    assert!(tcp_ok(lab.ns(i), &out6, 8080), "TCP v6 after ADD");
    assert!(ping_ok(lab.ns(i), &out4), "ping v4 after ADD");
    assert!(ping_ok(lab.ns(i), &out6), "ping v6 after ADD");
    // Connections from the outside are not let in: only replies are.
    let _inner = Server::start(lab.ns(i), 8081);
    assert!(
        !tcp_ok(&lab.outside, &v4_addr(&prev), 8081),
        "inbound v4 passed"
    );
    run(&ours(), "CHECK", &lab.host, lab.ns(i), "fwfwd1", &c).ok();
    run(&ours(), "DEL", &lab.host, lab.ns(i), "fwfwd1", &c).ok();
    blocked("after DEL");
}

/// Go adds, we check and delete; we add, Go checks and deletes; and an
/// upgrade from Go's same-bridge rules leaves one set of isolation rules.
#[test]
fn interop_with_the_reference_both_ways() {
    if skip("interop_with_the_reference_both_ways", true) {
        return;
    }
    let mut lab = Lab::new(2);
    lab.bridge(0);
    let (i, prev) = lab.container(0, 2);
    let (a4, a6) = (v4_addr(&prev), v6_addr(&prev));
    let c = conf(
        "fwio",
        &json!({"ingressPolicy": "same-bridge"}),
        Some(&prev),
    );

    // Go ADD → our CHECK → our DEL.
    run(&go(), "ADD", &lab.host, lab.ns(i), "fwio1", &c).ok();
    run(&ours(), "CHECK", &lab.host, lab.ns(i), "fwio1", &c).ok();
    run(&ours(), "DEL", &lab.host, lab.ns(i), "fwio1", &c).ok();
    let saved = [save(&lab.host, false), save(&lab.host, true)];
    assert!(no_address_rules_in(&saved[0], &a4) && no_address_rules_in(&saved[1], &a6));
    let e = run(&go(), "CHECK", &lab.host, lab.ns(i), "fwio1", &c).err();
    assert!(
        e["msg"].as_str().unwrap().starts_with("expected rule ["),
        "{e}"
    );

    // Upgrade: our ADD over Go's v1.1.1 isolation rules replaces them.
    run(&ours(), "ADD", &lab.host, lab.ns(i), "fwio1", &c).ok();
    let saved = [save(&lab.host, false), save(&lab.host, true)];
    let old = "(ingressPolicy: same-bridge)\" -j";
    let old_shared: Vec<&String> = saved
        .iter()
        .flatten()
        .filter(|r| r.starts_with("-A "))
        .filter(|r| r.contains(old) && !r.contains("-i fwbr0 ! -o fwbr0"))
        .collect();
    assert!(old_shared.is_empty(), "v1.1.1 rules left: {old_shared:?}");
    for (v6, of_family) in [false, true].into_iter().zip(&saved) {
        let mut family: Vec<&String> = of_family.iter().filter(|l| l.starts_with("-A ")).collect();
        family.sort();
        let n = family.len();
        family.dedup();
        assert_eq!(family.len(), n, "duplicated rules (v6={v6}): {family:?}");
    }

    // Our ADD → Go CHECK → Go DEL (it deletes our rules by their text).
    run(&go(), "CHECK", &lab.host, lab.ns(i), "fwio1", &c).ok();
    run(&ours(), "CHECK", &lab.host, lab.ns(i), "fwio1", &c).ok();
    run(&go(), "DEL", &lab.host, lab.ns(i), "fwio1", &c).ok();
    let saved = [save(&lab.host, false), save(&lab.host, true)];
    assert!(no_address_rules_in(&saved[0], &a4) && no_address_rules_in(&saved[1], &a6));
    // Our record stays behind Go's DEL; our DEL (or GC) clears it.
    assert_eq!(records_in(&saved[0], &a4), 1);
    run(&ours(), "DEL", &lab.host, lab.ns(i), "fwio1", &c).ok();
    assert_eq!(records(&lab.host, &a4) + records(&lab.host, &a6), 0);
    // Go's DEL after ours finds nothing and succeeds.
    run(&go(), "DEL", &lab.host, lab.ns(i), "fwio1", &c).ok();
}

/// DEL twice, DEL without prevResult, DEL of what is already gone.
#[test]
fn del_is_idempotent_and_needs_no_prev_result() {
    if skip("del_is_idempotent_and_needs_no_prev_result", false) {
        return;
    }
    let mut lab = Lab::new(3);
    lab.bridge(0);
    let (i, prev) = lab.container(0, 2);
    let (j, prev2) = lab.container(0, 3);
    let (a4, a6) = (v4_addr(&prev), v6_addr(&prev));
    let c = conf("fwdel", &json!({}), Some(&prev));
    let bare = conf("fwdel", &json!({}), None);
    // DEL before any ADD, with and without prevResult.
    run(&ours(), "DEL", &lab.host, lab.ns(i), "fwdel1", &bare).ok();
    run(&ours(), "DEL", &lab.host, lab.ns(i), "fwdel1", &c).ok();

    run(&ours(), "ADD", &lab.host, lab.ns(i), "fwdel1", &c).ok();
    run(
        &ours(),
        "ADD",
        &lab.host,
        lab.ns(j),
        "fwdel2",
        &conf("fwdel", &json!({}), Some(&prev2)),
    )
    .ok();
    // A repeated ADD adds nothing.
    let before = rules(&lab.host);
    run(&ours(), "ADD", &lab.host, lab.ns(i), "fwdel1", &c).ok();
    assert_eq!(rules(&lab.host), before);
    assert!(has_address_rules(&lab.host, &a4) && has_address_rules(&lab.host, &a6));

    // Without prevResult, the records name the addresses.
    run(&ours(), "DEL", &lab.host, lab.ns(i), "fwdel1", &bare).ok();
    assert!(no_address_rules(&lab.host, &a4) && no_address_rules(&lab.host, &a6));
    assert_eq!(records(&lab.host, &a4) + records(&lab.host, &a6), 0);
    // The other container keeps its rules.
    assert!(has_address_rules(&lab.host, &v4_addr(&prev2)));
    assert!(has_address_rules(&lab.host, &v6_addr(&prev2)));
    // Again, both ways, and after the container's netns is gone.
    run(&ours(), "DEL", &lab.host, lab.ns(i), "fwdel1", &bare).ok();
    run(&ours(), "DEL", &lab.host, lab.ns(i), "fwdel1", &c).ok();
    let gone = lab.containers.remove(i);
    let path = gone.path();
    drop(gone);
    let out = Invocation::new(ours(), "DEL")
        .env("CNI_CONTAINERID", "fwdel1")
        .env("CNI_NETNS", path.display().to_string())
        .env("CNI_IFNAME", "eth0")
        .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
        .in_host(&lab.host)
        .config(&c)
        .run();
    out.ok();
    // The shared chains and jumps stay, as in the reference.
    let s = save(&lab.host, false);
    assert!(s.contains(
        &"-A FORWARD -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD".to_string()
    ));
}

/// DEL deletes by kernel handle where iptables is nf_tables: exactly the
/// rules `iptables -D` with the reference's texts would delete. Rules in
/// CNI-FORWARD that name the address in another form (an admin's) stay,
/// and make DEL take the iptables-save path, which deletes by text; a
/// duplicated rule goes with its copy. Addresses 10.134.1.0/24 and
/// fd21:134::1:0/112, in a bare host (no traffic is checked).
#[test]
fn del_deletes_exactly_the_reference_rules() {
    if skip("del_deletes_exactly_the_reference_rules", false) {
        return;
    }
    let host = Lab::bare();
    let container = Netns::new("fw13c");
    let prev = |h: u8| {
        json!({
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "fw13br"}, {"name": "fw13v"}, {"name": "eth0", "sandbox": container.path()}],
            "ips": [
                {"address": format!("10.134.1.{h}/24"), "gateway": "10.134.1.1", "interface": 2},
                {"address": format!("fd21:134::1:{h}/112"), "gateway": "fd21:134::1:1", "interface": 2}
            ]
        })
    };
    let add = |cid: &str, h: u8| {
        let c = conf("fw13net", &json!({}), Some(&prev(h)));
        run(&ours(), "ADD", &host, &container, cid, &c).ok();
    };
    let del = |cid: &str| {
        let c = conf("fw13net", &json!({}), None);
        run(&ours(), "DEL", &host, &container, cid, &c).ok();
    };
    let untouched = rules(&host);

    // The plain case: everything of the container goes, the other stays.
    add("fw13a", 2);
    add("fw13b", 3);
    del("fw13a");
    for a in ["10.134.1.2", "fd21:134::1:2"] {
        assert!(no_address_rules(&host, a) && records(&host, a) == 0, "{a}");
    }
    for a in ["10.134.1.3", "fd21:134::1:3"] {
        assert!(has_address_rules(&host, a) && records(&host, a) == 1, "{a}");
    }
    let only_b = rules(&host);

    // Near misses an admin might have put there, and a duplicate.
    add("fw13a", 2);
    let near = [
        ("iptables", "-s 10.134.1.2/32 -p tcp -j ACCEPT"),
        (
            "iptables",
            "-d 10.134.1.2/32 -m conntrack --ctstate NEW -j ACCEPT",
        ),
        ("iptables", "-s 10.134.1.2/32 -j DROP"),
        ("iptables", "-d 10.134.1.2/32 -j ACCEPT"),
        ("ip6tables", "-s fd21:134::1:2/128 -i fw13br -j ACCEPT"),
    ];
    for (tool, rule) in near {
        let mut args = vec!["-w", "-A", "CNI-FORWARD"];
        args.extend(rule.split(' '));
        host.exec_ok(tool, &args);
    }
    host.exec_ok(
        "iptables",
        &[
            "-w",
            "-A",
            "CNI-FORWARD",
            "-s",
            "10.134.1.2/32",
            "-j",
            "ACCEPT",
        ],
    );
    del("fw13a");
    let left = rules(&host);
    for (_, rule) in near {
        let line = format!("-A CNI-FORWARD {rule}");
        assert!(left.contains(&line), "{line} deleted: {left:?}");
    }
    for a in ["10.134.1.2", "fd21:134::1:2"] {
        assert!(
            no_address_rules(&host, a) && records(&host, a) == 0,
            "{a}: {left:?}"
        );
    }
    for (tool, rule) in near {
        let mut args = vec!["-w", "-D", "CNI-FORWARD"];
        args.extend(rule.split(' '));
        host.exec_ok(tool, &args);
    }
    // What is left is exactly what fw13b's ADD made.
    assert_eq!(rules(&host), only_b);
    del("fw13b");
    del("fw13b");
    assert!(rules(&host).len() > untouched.len());
    assert!(
        rules(&host)
            .iter()
            .all(|r| !r.contains("10.134.1.") && !r.contains("fd21:134::"))
    );
}

/// GC removes the rules of attachments not listed, in its network only.
#[test]
fn gc_is_scoped_to_the_network() {
    if skip("gc_is_scoped_to_the_network", false) {
        return;
    }
    let mut lab = Lab::new(4);
    lab.bridge(0);
    let mut added = Vec::new();
    for (host, net, cid) in [
        (2, "fwgca", "fwg1"),
        (3, "fwgca", "fwg2"),
        (4, "fwgcb", "fwg3"),
    ] {
        let (i, prev) = lab.container(0, host);
        let c = conf(net, &json!({}), Some(&prev));
        run(&ours(), "ADD", &lab.host, lab.ns(i), cid, &c).ok();
        added.push((v4_addr(&prev), v6_addr(&prev)));
    }
    let gc = |net: &str, valid: Value| {
        let mut c = conf(net, &json!({}), None);
        c["cniVersion"] = json!("1.1.0");
        c["cni.dev/valid-attachments"] = valid;
        Invocation::new(ours(), "GC")
            .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
            .in_host(&lab.host)
            .config(&c)
            .run()
    };
    // Another interface of fwg2 does not keep fwg2/eth0.
    gc(
        "fwgca",
        json!([{"containerID": "fwg1", "ifname": "eth0"}, {"containerID": "fwg2", "ifname": "eth1"}]),
    )
    .ok();
    let present = |k: usize| {
        has_address_rules(&lab.host, &added[k].0) && has_address_rules(&lab.host, &added[k].1)
    };
    let absent = |k: usize| {
        no_address_rules(&lab.host, &added[k].0) && no_address_rules(&lab.host, &added[k].1)
    };
    assert!(present(0), "valid attachment lost its rules");
    assert!(absent(1), "stale attachment kept its rules");
    assert!(present(2), "another network's attachment lost its rules");
    // GC with nothing valid clears the network; twice is fine.
    gc("fwgca", json!([])).ok();
    gc("fwgca", json!([])).ok();
    assert!(absent(0) && present(2));
    assert_eq!(records(&lab.host, &added[0].0), 0);
}

/// Invalid input fails before anything is written.
#[test]
fn bad_input_leaves_nothing() {
    if skip("bad_input_leaves_nothing", false) {
        return;
    }
    let mut lab = Lab::new(5);
    lab.bridge(0);
    let (i, prev) = lab.container(0, 2);
    let mut no_ifaces = prev.clone();
    no_ifaces["interfaces"] = json!([]);
    no_ifaces["ips"][0]["interface"] = Value::Null;
    no_ifaces["ips"][1]["interface"] = Value::Null;
    let mut bad_bridge = prev.clone();
    bad_bridge["interfaces"][0]["name"] = json!("fw+");
    let cases = [
        (
            json!({"ingressPolicy": "closed"}),
            Some(&prev),
            "unknown ingress policy: \"closed\"",
        ),
        (
            json!({"ingressPolicy": "same-bridge"}),
            Some(&no_ifaces),
            "interface needs to be set",
        ),
        (
            json!({"ingressPolicy": "isolated"}),
            Some(&bad_bridge),
            "invalid bridge name",
        ),
        (
            json!({"iptablesAdminChainName": "FORWARD"}),
            Some(&prev),
            "invalid iptablesAdminChainName",
        ),
        (
            json!({"iptablesAdminChainName": "a\" -j ACCEPT"}),
            Some(&prev),
            "invalid iptablesAdminChainName",
        ),
        (
            json!({"ingressPolicy": 5}),
            Some(&prev),
            "failed to load netconf",
        ),
        (json!({}), None, "missing prevResult from earlier plugin"),
    ];
    let empty_v4 = save(&lab.host, false);
    let empty_v6 = save(&lab.host, true);
    for (extra, p, msg) in cases {
        let c = conf("fwbad", &extra, p);
        let e = run(&ours(), "ADD", &lab.host, lab.ns(i), "fwbad1", &c).err();
        assert!(e["msg"].as_str().unwrap().contains(msg), "{extra}: {e}");
        assert_eq!(save(&lab.host, false), empty_v4, "{extra} left IPv4 rules");
        assert_eq!(save(&lab.host, true), empty_v6, "{extra} left IPv6 rules");
    }
    // An unknown policy does not make DEL fail (the reference's does).
    run(
        &ours(),
        "DEL",
        &lab.host,
        lab.ns(i),
        "fwbad1",
        &conf("fwbad", &json!({"ingressPolicy": "closed"}), Some(&prev)),
    )
    .ok();
}

/// same-bridge lets containers of one bridge talk and stops traffic from
/// another bridge; isolated also stops it within the bridge.
#[test]
fn ingress_policies_isolate_bridges() {
    if skip("ingress_policies_isolate_bridges", false) {
        return;
    }
    let mut lab = Lab::new(6);
    lab.bridge(0);
    lab.bridge(1);
    // Bridged traffic through iptables, so that "isolated" can see it.
    lab.host.exec_ok(
        "sysctl",
        &["-q", "-w", "net.bridge.bridge-nf-call-iptables=1"],
    );
    let (a1, p1) = lab.container(0, 2);
    let (a2, p2) = lab.container(0, 3);
    let (b1, q1) = lab.container(1, 2);
    let same = json!({"ingressPolicy": "same-bridge"});
    run(
        &ours(),
        "ADD",
        &lab.host,
        lab.ns(a1),
        "fwi1",
        &conf("fwisa", &same, Some(&p1)),
    )
    .ok();
    run(
        &ours(),
        "ADD",
        &lab.host,
        lab.ns(a2),
        "fwi2",
        &conf("fwisa", &same, Some(&p2)),
    )
    .ok();
    run(
        &ours(),
        "ADD",
        &lab.host,
        lab.ns(b1),
        "fwi3",
        &conf("fwisb", &same, Some(&q1)),
    )
    .ok();
    run(
        &ours(),
        "CHECK",
        &lab.host,
        lab.ns(a1),
        "fwi1",
        &conf("fwisa", &same, Some(&p1)),
    )
    .ok();
    let _s2 = Server::start(lab.ns(a2), 8080);
    let _s3 = Server::start(lab.ns(b1), 8080);
    assert!(
        tcp_ok(lab.ns(a1), &v4_addr(&p2), 8080),
        "same bridge blocked"
    );
    assert!(
        !tcp_ok(lab.ns(a1), &v4_addr(&q1), 8080),
        "other bridge reached"
    );

    // isolated on bridge 0: traffic within it stops too.
    let iso = json!({"ingressPolicy": "isolated"});
    run(
        &ours(),
        "ADD",
        &lab.host,
        lab.ns(a1),
        "fwi1",
        &conf("fwisa", &iso, Some(&p1)),
    )
    .ok();
    run(
        &ours(),
        "CHECK",
        &lab.host,
        lab.ns(a1),
        "fwi1",
        &conf("fwisa", &iso, Some(&p1)),
    )
    .ok();
    assert!(
        !tcp_ok(lab.ns(a1), &v4_addr(&p2), 8080),
        "isolated bridge passed"
    );
    let s = save(&lab.host, false);
    assert!(s.contains(&"-A CNI-ISOLATION-STAGE-1 -i fwbr0 -o fwbr0 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: isolated)\" -j DROP".to_string()), "{s:?}");
}

/// CHECK fails when a rule is missing, with the reference's message.
#[test]
fn check_finds_missing_rules() {
    if skip("check_finds_missing_rules", false) {
        return;
    }
    let mut lab = Lab::new(7);
    lab.bridge(0);
    let (i, prev) = lab.container(0, 2);
    let c = conf("fwchk", &json!({}), Some(&prev));
    let e = run(&ours(), "CHECK", &lab.host, lab.ns(i), "fwchk1", &c).err();
    assert_eq!(
        e["msg"],
        "expected FORWARD rule [-m comment --comment CNI firewall plugin rules -j CNI-FORWARD] not found"
    );
    // Unlike the reference, CHECK creates nothing.
    assert!(!save(&lab.host, false).iter().any(|l| l.starts_with(":CNI")));
    run(&ours(), "ADD", &lab.host, lab.ns(i), "fwchk1", &c).ok();
    run(&ours(), "CHECK", &lab.host, lab.ns(i), "fwchk1", &c).ok();
    let a6 = v6_addr(&prev);
    lab.host.exec_ok(
        "ip6tables",
        &[
            "-w",
            "-D",
            "CNI-FORWARD",
            "-s",
            &format!("{a6}/128"),
            "-j",
            "ACCEPT",
        ],
    );
    let e = run(&ours(), "CHECK", &lab.host, lab.ns(i), "fwchk1", &c).err();
    assert_eq!(
        e["msg"],
        format!("expected rule [-s {a6}/128 -j ACCEPT] not found")
    );
}

#[test]
fn status_needs_a_backend() {
    if skip("status_needs_a_backend", false) {
        return;
    }
    let host = Lab::bare();
    let c = json!({"cniVersion": "1.1.0", "name": "fwst", "type": "firewall"});
    Invocation::new(ours(), "STATUS")
        .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
        .in_host(&host)
        .config(&c)
        .run()
        .ok();
    // No iptables tools on PATH and no firewalld: code 50.
    let e = Invocation::new(ours(), "STATUS")
        .env("CNI_PATH", "/nonexistent")
        .env("PATH", "/nonexistent")
        .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
        .config(&c)
        .run()
        .err();
    assert_eq!(e["code"], 50, "{e}");
}

// ---- firewalld ----

/// A real firewalld, started inside `host` (so its nftables rules are that
/// namespace's) on a private D-Bus daemon of its own (bus socket and config
/// in a temp dir), never the machine's bus or firewalld. Both are killed,
/// and the directory removed, on drop.
struct Firewalld {
    dir: rcni_tests::tempdir::TempDir,
    bus: String,
    daemons: Vec<Child>,
}

fn firewalld_missing() -> Option<&'static str> {
    let found = |p: &str| {
        ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(p).exists())
    };
    if !found("firewalld") {
        Some("needs firewalld (apt package firewalld)")
    } else if !found("dbus-daemon") {
        Some("needs dbus-daemon (apt package dbus-daemon)")
    } else if !found("dbus-send") {
        Some("needs dbus-send (apt package dbus-bin)")
    } else {
        None
    }
}

fn skip_firewalld(test: &str) -> bool {
    use std::io::Write;
    if skip(test, false) {
        return true;
    }
    match firewalld_missing() {
        Some(why) => {
            let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: {why}");
            true
        }
        None => false,
    }
}

impl Firewalld {
    fn start(host: &Netns) -> Firewalld {
        let dir = rcni_tests::tempdir::TempDir::new("fwd");
        let socket = dir.join("bus");
        let bus = format!("unix:path={}", socket.display());
        let conf = format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>{bus}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#
        );
        std::fs::write(dir.join("bus.conf"), conf).unwrap();
        // firewalld's configuration: a copy of the package's, so that
        // nothing under /etc changes.
        let etc = dir.join("etc");
        std::fs::create_dir(&etc).unwrap();
        let cp = Command::new("cp")
            .args(["-r", "/etc/firewalld/.", &etc.display().to_string()])
            .status()
            .unwrap();
        assert!(cp.success(), "copy /etc/firewalld");
        let mut fw = Firewalld {
            dir,
            bus,
            daemons: Vec::new(),
        };
        let log = std::fs::File::create(fw.dir.join("dbus.log")).unwrap();
        fw.daemons.push(
            host.spawn(
                Command::new("dbus-daemon")
                    .args(["--nofork", "--nopidfile"])
                    .arg(format!(
                        "--config-file={}",
                        fw.dir.join("bus.conf").display()
                    ))
                    .stdout(Stdio::null())
                    .stderr(log),
            )
            .expect("dbus-daemon"),
        );
        // firewalld only once the bus listens: one that finds no bus exits
        // (under qemu's emulation dbus-daemon can take seconds to listen).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while !socket.exists() {
            fw.assert_running(0, "dbus.log");
            assert!(
                std::time::Instant::now() < deadline,
                "dbus-daemon never listened"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // firewalld makes its run directory with "mkdir unless it exists":
        // three starting at once on a fresh /run (the VMs' tmpfs) raced
        // there, and the losers exited with EEXIST. Made here first.
        std::fs::create_dir_all("/run/firewalld").unwrap();
        // Its console log goes to stdout or stderr by level: both kept.
        let log = std::fs::File::create(fw.dir.join("firewalld.log")).unwrap();
        fw.daemons.push(
            host.spawn(
                Command::new("firewalld")
                    .args(["--nofork", "--nopid"])
                    .arg("--system-config")
                    .arg(&etc)
                    .args(["--log-target", "console"])
                    .env("DBUS_SYSTEM_BUS_ADDRESS", &fw.bus)
                    .stdout(log.try_clone().unwrap())
                    .stderr(log),
            )
            .expect("firewalld"),
        );
        // Up when its state says so (firewalld is Python: a second here,
        // half a minute under qemu's emulation). Each look is a process,
        // which costs under qemu too: the pause doubles up to a second.
        let mut pause = std::time::Duration::from_millis(100);
        while std::time::Instant::now() < deadline {
            let state = fw.call(
                "org.freedesktop.DBus.Properties.Get",
                &["string:org.fedoraproject.FirewallD1", "string:state"],
            );
            if state.is_ok_and(|reply| reply.iter().any(|w| w == "RUNNING")) {
                return fw;
            }
            fw.assert_running(1, "firewalld.log");
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_secs(1));
        }
        let log = std::fs::read_to_string(fw.dir.join("firewalld.log")).unwrap_or_default();
        panic!("firewalld did not start: {log}");
    }

    /// Panics with its log when daemon `i` (0: dbus-daemon, 1: firewalld)
    /// has exited.
    fn assert_running(&mut self, i: usize, log: &str) {
        if let Ok(Some(status)) = self.daemons[i].try_wait() {
            let text = std::fs::read_to_string(self.dir.join(log)).unwrap_or_default();
            panic!("{log}: exited ({status}) before it was up: {text}");
        }
    }

    /// Calls `method` (`zone.getSources`: of org.fedoraproject.FirewallD1,
    /// unless it names an interface) of firewalld's object on this bus
    /// with `dbus-send`, arguments as it takes them (`string:trusted`):
    /// the words of the reply, or the error. Not firewall-cmd, which is
    /// Python: 0.8 s a run here against dbus-send's 15 ms, seconds under
    /// scripts/vmtest's qemu.
    fn call(&self, method: &str, args: &[&str]) -> Result<Vec<String>, String> {
        let method = if method.starts_with("org.") {
            method.to_string()
        } else {
            format!("org.fedoraproject.FirewallD1.{method}")
        };
        let out = Command::new("dbus-send")
            .arg(format!("--bus={}", self.bus))
            .args([
                "--print-reply=literal",
                "--dest=org.fedoraproject.FirewallD1",
                "/org/fedoraproject/FirewallD1",
                &method,
            ])
            .args(args)
            .output()
            .expect("dbus-send");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// The sources of `zone`, sorted.
    fn sources(&self, zone: &str) -> Vec<String> {
        let reply = self
            .call("zone.getSources", &[&format!("string:{zone}")])
            .unwrap_or_else(|e| panic!("sources of {zone}: {e}"));
        // `array [ a b ]`
        let mut s: Vec<String> = reply
            .into_iter()
            .filter(|w| !["array", "[", "]"].contains(&w.as_str()))
            .collect();
        s.sort();
        s
    }

    fn remove_source(&self, zone: &str, source: &str) {
        self.call(
            "zone.removeSource",
            &[&format!("string:{zone}"), &format!("string:{source}")],
        )
        .unwrap_or_else(|e| panic!("remove {source} from {zone}: {e}"));
    }
}

impl Drop for Firewalld {
    fn drop(&mut self) {
        // firewalld first, while its bus is still there.
        for d in self.daemons.iter_mut().rev() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

/// `plugin` in `host` with the private bus as the system bus.
fn run_bus(
    plugin: &std::path::Path,
    cmd: &str,
    host: &Netns,
    container: &Netns,
    cid: &str,
    conf: &Value,
    bus: &str,
) -> PluginOutput {
    Invocation::new(plugin, cmd)
        .attach(cid, container, "eth0")
        .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
        .in_host(host)
        .config(conf)
        .run()
}

fn sources_of(prev: &Value) -> Vec<String> {
    let mut s = vec![
        format!("{}/32", v4_addr(prev)),
        format!("{}/128", v6_addr(prev)),
    ];
    s.sort();
    s
}

/// Without a `backend` key, a firewalld running in the plugin's namespace
/// is used: the addresses become sources of the zone, CHECK asks
/// firewalld (and fails when a source is gone, unlike the reference), DEL
/// takes them out; no iptables rule is written. The Go plugin and ours
/// take over from each other.
#[test]
fn firewalld_backend_on_a_real_firewalld() {
    if skip_firewalld("firewalld_backend_on_a_real_firewalld") {
        return;
    }
    let mut lab = Lab::new(8);
    lab.bridge(0);
    let (i, prev) = lab.container(0, 2);
    let fw = Firewalld::start(&lab.host);
    let bus = fw.bus.clone();
    let _cleanup = SourceRecordsOf(vec!["fwfd".to_string()]);
    let c = conf("fwfd", &json!({}), Some(&prev));
    let want = sources_of(&prev);

    let out = run_bus(&ours(), "ADD", &lab.host, lab.ns(i), "fwd1", &c, &bus).ok();
    assert_eq!(out["ips"], prev["ips"]);
    assert_eq!(fw.sources("trusted"), want);
    assert!(
        !save(&lab.host, false).iter().any(|l| l.contains("CNI-")),
        "iptables rules written with firewalld"
    );
    // Again: ZONE_ALREADY_SET is not an error.
    run_bus(&ours(), "ADD", &lab.host, lab.ns(i), "fwd1", &c, &bus).ok();
    run_bus(&ours(), "CHECK", &lab.host, lab.ns(i), "fwd1", &c, &bus).ok();
    // A source removed behind our back: our CHECK fails, Go's does not.
    fw.remove_source("trusted", &want[0]);
    let e = run_bus(&ours(), "CHECK", &lab.host, lab.ns(i), "fwd1", &c, &bus).err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .starts_with("failed to find the address"),
        "{e}"
    );
    if go_bin("firewall").is_some() {
        run_bus(&go(), "CHECK", &lab.host, lab.ns(i), "fwd1", &c, &bus).ok();
    }
    run_bus(&ours(), "ADD", &lab.host, lab.ns(i), "fwd1", &c, &bus).ok();
    run_bus(&ours(), "DEL", &lab.host, lab.ns(i), "fwd1", &c, &bus).ok();
    assert!(fw.sources("trusted").is_empty());
    run_bus(&ours(), "DEL", &lab.host, lab.ns(i), "fwd1", &c, &bus).ok();

    // Another zone, and the isolation rules (iptables whatever the backend).
    let z = conf(
        "fwfd",
        &json!({"firewalldZone": "internal", "ingressPolicy": "same-bridge", "backend": "firewalld"}),
        Some(&prev),
    );
    run_bus(&ours(), "ADD", &lab.host, lab.ns(i), "fwd2", &z, &bus).ok();
    assert_eq!(fw.sources("internal"), want);
    assert!(fw.sources("trusted").is_empty());
    assert!(
        save(&lab.host, false)
            .contains(&"-A CNI-ISOLATION-STAGE-2 -o fwbr0 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)\" -j DROP".to_string())
    );
    run_bus(&ours(), "CHECK", &lab.host, lab.ns(i), "fwd2", &z, &bus).ok();
    run_bus(&ours(), "DEL", &lab.host, lab.ns(i), "fwd2", &z, &bus).ok();
    assert!(fw.sources("internal").is_empty());

    // The Go plugin and ours, both ways.
    if go_bin("firewall").is_some() {
        run_bus(&go(), "ADD", &lab.host, lab.ns(i), "fwd3", &c, &bus).ok();
        assert_eq!(fw.sources("trusted"), want);
        run_bus(&ours(), "CHECK", &lab.host, lab.ns(i), "fwd3", &c, &bus).ok();
        run_bus(&ours(), "DEL", &lab.host, lab.ns(i), "fwd3", &c, &bus).ok();
        assert!(fw.sources("trusted").is_empty());
        run_bus(&ours(), "ADD", &lab.host, lab.ns(i), "fwd3", &c, &bus).ok();
        run_bus(&go(), "CHECK", &lab.host, lab.ns(i), "fwd3", &c, &bus).ok();
        run_bus(&go(), "DEL", &lab.host, lab.ns(i), "fwd3", &c, &bus).ok();
        assert!(fw.sources("trusted").is_empty());
        // Go's DEL leaves our record of the sources; ours removes it.
        assert_eq!(source_records("fwfd", "fwd3").len(), 1);
        run_bus(&ours(), "DEL", &lab.host, lab.ns(i), "fwd3", &c, &bus).ok();
    }
    assert!(source_records("fwfd", "fwd1").is_empty());
    assert!(source_records("fwfd", "fwd3").is_empty());
}

/// A plugin running in another network namespace than firewalld's reaches
/// the same bus, but firewalld does not filter its namespace: without a
/// `backend` key it uses iptables there (the reference hands the addresses
/// to that firewalld); with `backend: firewalld` it refuses.
#[test]
fn firewalld_of_another_namespace_is_not_used() {
    if skip_firewalld("firewalld_of_another_namespace_is_not_used") {
        return;
    }
    let mut lab = Lab::new(9);
    lab.bridge(0);
    let (i, prev) = lab.container(0, 2);
    let elsewhere = Lab::bare();
    let fw = Firewalld::start(&elsewhere);
    let bus = fw.bus.clone();
    let c = conf("fwfe", &json!({}), Some(&prev));
    run_bus(&ours(), "ADD", &lab.host, lab.ns(i), "fwe1", &c, &bus).ok();
    assert!(fw.sources("trusted").is_empty());
    assert!(has_address_rules(&lab.host, &v4_addr(&prev)));
    assert!(has_address_rules(&lab.host, &v6_addr(&prev)));
    run_bus(&ours(), "DEL", &lab.host, lab.ns(i), "fwe1", &c, &bus).ok();
    assert!(no_address_rules(&lab.host, &v4_addr(&prev)));

    let explicit = conf("fwfe", &json!({"backend": "firewalld"}), Some(&prev));
    let e = run_bus(
        &ours(),
        "ADD",
        &lab.host,
        lab.ns(i),
        "fwe2",
        &explicit,
        &bus,
    )
    .err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("another network namespace"),
        "{e}"
    );
    assert!(fw.sources("trusted").is_empty());
    // STATUS of the explicit backend: not available here.
    let mut s = explicit.clone();
    s["cniVersion"] = json!("1.1.0");
    s.as_object_mut().unwrap().remove("prevResult");
    let e = Invocation::new(ours(), "STATUS")
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus)
        .in_host(&lab.host)
        .config(&s)
        .run()
        .err();
    assert_eq!(e["code"], 50);
    // In firewalld's own namespace it is.
    Invocation::new(ours(), "STATUS")
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus)
        .in_host(&elsewhere)
        .config(&s)
        .run()
        .ok();
}

/// rcni's records of firewalld sources
/// (`/run/cni/firewall/<network hash>/<cid>_<ifname>.json`) of network
/// `net` and container `cid`.
fn source_records(net: &str, cid: &str) -> Vec<Value> {
    source_record_files(net)
        .into_iter()
        .filter(|(_, r)| r["containerID"] == cid)
        .map(|(_, r)| r)
        .collect()
}

/// The record files of network `net`, with their contents.
fn source_record_files(net: &str) -> Vec<(std::path::PathBuf, Value)> {
    let Ok(dir) = std::fs::read_dir("/run/cni/firewall") else {
        return Vec::new();
    };
    // One directory per network.
    dir.flatten()
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|d| d.flatten())
        .filter_map(|e| {
            let r = serde_json::from_slice::<Value>(&std::fs::read(e.path()).ok()?).ok()?;
            Some((e.path(), r))
        })
        .filter(|(_, r)| r["network"] == net)
        .collect()
}

/// Removes the source records of its networks on drop (a failed test
/// would leave them to claim its addresses in the next run).
struct SourceRecordsOf(Vec<String>);

impl Drop for SourceRecordsOf {
    fn drop(&mut self) {
        for net in &self.0 {
            for (path, _) in source_record_files(net) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// With firewalld, ADD records the sources it gives each attachment, so
/// DEL without `prevResult` and GC take them out (the reference's DEL then
/// removes nothing, and it has no GC); a repeated ADD into another zone is
/// recorded too. With firewalld gone, DEL and GC drop the records (its
/// runtime sources went with it). Addresses 10.134.2.0/24 and
/// fd21:134::2:0/112 in a bare host (no traffic is checked).
#[test]
fn firewalld_sources_are_recorded_for_del_and_gc() {
    if skip_firewalld("firewalld_sources_are_recorded_for_del_and_gc") {
        return;
    }
    let host = Lab::bare();
    let container = Netns::new("fw13d");
    let fw = Firewalld::start(&host);
    let bus = fw.bus.clone();
    let (net, other_net) = (rcni_tests::unique("fw13n"), rcni_tests::unique("fw13o"));
    let _cleanup = SourceRecordsOf(vec![net.clone(), other_net.clone()]);
    let prev = |h: u8| {
        json!({
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "fw13br"}, {"name": "fw13v"}, {"name": "eth0", "sandbox": container.path()}],
            "ips": [
                {"address": format!("10.134.2.{h}/24"), "interface": 2},
                {"address": format!("fd21:134::2:{h}/112"), "interface": 2}
            ]
        })
    };
    let srcs = |h: u8| {
        let mut v = vec![format!("10.134.2.{h}/32"), format!("fd21:134::2:{h}/128")];
        v.sort();
        v
    };
    let add = |net: &str, cid: &str, h: u8, zone: &str| {
        let c = conf(
            net,
            &json!({"backend": "firewalld", "firewalldZone": zone}),
            Some(&prev(h)),
        );
        run_bus(&ours(), "ADD", &host, &container, cid, &c, &bus).ok();
    };
    let bare = |net: &str| conf(net, &json!({"backend": "firewalld"}), None);
    let gc = |net: &str, valid: Value, bus: &str| {
        let mut c = bare(net);
        c["cniVersion"] = json!("1.1.0");
        c["cni.dev/valid-attachments"] = valid;
        Invocation::new(ours(), "GC")
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
            .in_host(&host)
            .config(&c)
            .run()
    };

    add(&net, "fw13a", 2, "internal");
    add(&net, "fw13b", 3, "trusted");
    add(&other_net, "fw13c", 4, "trusted");
    let recs = source_records(&net, "fw13a");
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["ifname"], "eth0");
    assert_eq!(recs[0]["sources"].as_array().unwrap().len(), 2, "{recs:?}");
    assert_eq!(fw.sources("internal"), srcs(2));
    // An ADD that fails (a source is bound to one zone only) leaves the
    // record as it was.
    let c = conf(&net, &json!({"backend": "firewalld"}), Some(&prev(2)));
    let e = run_bus(&ours(), "ADD", &host, &container, "fw13a", &c, &bus).err();
    assert!(e["msg"].as_str().unwrap().contains("ZONE_CONFLICT"), "{e}");
    assert_eq!(source_records(&net, "fw13a"), recs);

    // DEL without prevResult (and the default zone in its config): the
    // recorded zone's sources of fw13a go.
    run_bus(
        &ours(),
        "DEL",
        &host,
        &container,
        "fw13a",
        &bare(&net),
        &bus,
    )
    .ok();
    assert!(fw.sources("internal").is_empty());
    let mut left = srcs(3);
    left.extend(srcs(4));
    left.sort();
    assert_eq!(fw.sources("trusted"), left);
    assert!(source_records(&net, "fw13a").is_empty());
    run_bus(
        &ours(),
        "DEL",
        &host,
        &container,
        "fw13a",
        &bare(&net),
        &bus,
    )
    .ok();

    // GC of the network: fw13b goes, the other network's fw13c stays.
    gc(
        &net,
        json!([{"containerID": "fw13a", "ifname": "eth0"}]),
        &bus,
    )
    .ok();
    assert_eq!(fw.sources("trusted"), srcs(4));
    assert!(source_records(&net, "fw13b").is_empty());
    assert_eq!(source_records(&other_net, "fw13c").len(), 1);
    // Valid attachments keep theirs.
    gc(
        &other_net,
        json!([{"containerID": "fw13c", "ifname": "eth0"}]),
        &bus,
    )
    .ok();
    assert_eq!(fw.sources("trusted"), srcs(4));

    // firewalld stopped: DEL (now on iptables) and GC drop the records.
    add(&net, "fw13e", 5, "trusted");
    drop(fw);
    let none = NO_BUS.to_string();
    let mut c = bare(&other_net);
    c.as_object_mut().unwrap().remove("backend");
    Invocation::new(ours(), "DEL")
        .attach("fw13c", &container, "eth0")
        .env("DBUS_SYSTEM_BUS_ADDRESS", &none)
        .in_host(&host)
        .config(&c)
        .run()
        .ok();
    assert!(source_records(&other_net, "fw13c").is_empty());
    gc(&net, json!([]), &none).ok();
    assert!(source_records(&net, "fw13e").is_empty());
}

// ---- ADD over nf_tables netlink (chains already there) ----

/// As [`run`], with `tools` first on PATH.
fn run_with(
    tools: &Tools,
    plugin: &std::path::Path,
    cmd: &str,
    host: &Netns,
    container: &Netns,
    cid: &str,
    conf: &Value,
) -> PluginOutput {
    Invocation::new(plugin, cmd)
        .attach(cid, container, "eth0")
        .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
        .env("PATH", tools.path())
        .in_host(host)
        .config(conf)
        .run()
}

/// A bridge plugin's `prevResult` with `a4` and `a6`, for tests that need
/// no traffic.
fn prev_with(a4: &str, a6: &str, sandbox: &Netns) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "fwbr0"}, {"name": "eth0", "sandbox": sandbox.path()}],
        "ips": [
            {"address": format!("{a4}/24"), "interface": 1},
            {"address": format!("{a6}/112"), "interface": 1}
        ]
    })
}

/// `nft --debug=netlink list table <family> filter` without the rule
/// handles and positions: every expression of every rule, in order.
fn nft_expressions(ns: &Netns, family: &str) -> Vec<String> {
    ns.exec_ok(
        "nft",
        &["--debug=netlink", "list", "table", family, "filter"],
    )
    .lines()
    .map(|l| {
        if l.starts_with(&format!("{family} filter ")) {
            l.split(' ').take(3).collect::<Vec<_>>().join(" ")
        } else {
            l.to_string()
        }
    })
    .collect()
}

/// The second ADD on a host (chains there) adds its rules over netlink,
/// running no tool, and the kernel then holds exactly what the text path
/// (`iptables-restore`) makes of the same ADD: the same `iptables-save`
/// texts and the same nf_tables expressions, in both families.
#[test]
fn netlink_add_writes_what_iptables_restore_writes() {
    if skip("netlink_add_writes_what_iptables_restore_writes", false) {
        return;
    }
    let recording = Tools::recording("xtables-nft-multi");
    let text_only = Tools::recording("xtables-wrapped");
    let sandbox = Netns::new("fwc");
    let c1 = conf(
        "fwnl",
        &json!({}),
        Some(&prev_with("10.138.64.2", "fd21:138::64:2", &sandbox)),
    );
    let c2 = conf(
        "fwnl",
        &json!({}),
        Some(&prev_with("10.138.64.3", "fd21:138::64:3", &sandbox)),
    );
    let by_netlink = Lab::bare();
    let by_text = Lab::bare();
    for (host, tools) in [(&by_netlink, &recording), (&by_text, &text_only)] {
        run_with(tools, &ours(), "ADD", host, &sandbox, "fwnl1", &c1).ok();
        let first = tools.take_calls();
        assert!(
            first.iter().any(|c| c.starts_with("iptables-restore")),
            "the first ADD sets the chains up with iptables-restore: {first:?}"
        );
        run_with(tools, &ours(), "ADD", host, &sandbox, "fwnl2", &c2).ok();
        let second = tools.take_calls();
        if std::ptr::eq(tools, &recording) {
            assert!(second.is_empty(), "the second ADD ran {second:?}");
        } else {
            assert!(
                second.iter().any(|c| c.starts_with("ip6tables-restore")),
                "the text path: {second:?}"
            );
        }
    }
    for v6 in [false, true] {
        let ours_saved = save(&by_netlink, v6);
        assert_eq!(ours_saved, save(&by_text, v6), "iptables-save, v6={v6}");
        let a = if v6 { "fd21:138::64:3" } else { "10.138.64.3" };
        assert!(has_address_rules(&by_netlink, a), "{ours_saved:?}");
        assert_eq!(records(&by_netlink, a), 1);
    }
    for family in ["ip", "ip6"] {
        assert_eq!(
            nft_expressions(&by_netlink, family),
            nft_expressions(&by_text, family),
            "nft --debug=netlink list table {family} filter"
        );
    }
    // CHECK and DEL find them, DEL by handle also without a tool.
    for cid_conf in [("fwnl2", &c2), ("fwnl1", &c1)] {
        run(
            &ours(),
            "CHECK",
            &by_netlink,
            &sandbox,
            cid_conf.0,
            cid_conf.1,
        )
        .ok();
        run_with(
            &recording,
            &ours(),
            "DEL",
            &by_netlink,
            &sandbox,
            cid_conf.0,
            cid_conf.1,
        )
        .ok();
    }
    assert_eq!(
        recording.take_calls(),
        Vec::<String>::new(),
        "DEL ran a tool"
    );
    for a in [
        "10.138.64.2",
        "10.138.64.3",
        "fd21:138::64:2",
        "fd21:138::64:3",
    ] {
        assert!(no_address_rules(&by_netlink, a) && records(&by_netlink, a) == 0);
    }
}

/// With the host's FORWARD policy DROP, a container added over netlink
/// (the second on the bridge) reaches the outside until DEL; Go's DEL
/// removes the rules we added that way, and Go's CHECK finds them.
#[test]
fn netlink_add_forwards_with_a_drop_policy() {
    if skip("netlink_add_forwards_with_a_drop_policy", false) {
        return;
    }
    let recording = Tools::recording("xtables-nft-multi");
    let mut lab = Lab::new(100);
    lab.bridge(0);
    let (first, prev1) = lab.container(0, 2);
    let (second, prev2) = lab.container(0, 3);
    let _server = Server::start(&lab.outside, 8080);
    let out4 = v4(lab.n, 3, 2);
    let out6 = v6(lab.n, 3, 2);
    let c1 = conf("fwnlfwd", &json!({}), Some(&prev1));
    let c2 = conf("fwnlfwd", &json!({}), Some(&prev2));
    let passes = |i: usize| tcp_ok(lab.ns(i), &out4, 8080) && tcp_ok(lab.ns(i), &out6, 8080);
    let add = |cid: &str, c: &Value| {
        run_with(
            &recording,
            &ours(),
            "ADD",
            &lab.host,
            lab.ns(second),
            cid,
            c,
        )
        .ok();
    };
    run_with(
        &recording,
        &ours(),
        "ADD",
        &lab.host,
        lab.ns(first),
        "fwnlfwd1",
        &c1,
    )
    .ok();
    recording.take_calls();
    assert!(!passes(second), "before ADD");
    add("fwnlfwd2", &c2);
    assert_eq!(
        recording.take_calls(),
        Vec::<String>::new(),
        "ADD ran a tool"
    );
    assert!(passes(second), "after an ADD over netlink");
    assert!(ping_ok(lab.ns(second), &out4) && ping_ok(lab.ns(second), &out6));
    run(&ours(), "CHECK", &lab.host, lab.ns(second), "fwnlfwd2", &c2).ok();
    if go_bin("firewall").is_some() {
        run(&go(), "CHECK", &lab.host, lab.ns(second), "fwnlfwd2", &c2).ok();
        run(&go(), "DEL", &lab.host, lab.ns(second), "fwnlfwd2", &c2).ok();
        for a in [v4_addr(&prev2), v6_addr(&prev2)] {
            assert!(no_address_rules(&lab.host, &a), "Go's DEL left {a}'s rules");
        }
        assert!(!passes(second), "after Go's DEL");
        add("fwnlfwd2", &c2);
        assert!(passes(second), "after the ADD again");
    } else {
        eprintln!("netlink_add_forwards_with_a_drop_policy: no Go firewall, interop part not run");
    }
    run_with(
        &recording,
        &ours(),
        "DEL",
        &lab.host,
        lab.ns(second),
        "fwnlfwd2",
        &c2,
    )
    .ok();
    assert!(!passes(second), "after DEL");
    assert!(passes(first), "the first container after the second's DEL");
    assert_eq!(records(&lab.host, &v4_addr(&prev2)), 0);
}

/// With legacy (x_tables) iptables on PATH, ADD, CHECK and DEL take the
/// text path: the rules are in the legacy tables, none in nf_tables.
#[test]
fn legacy_iptables_takes_the_text_path() {
    if skip("legacy_iptables_takes_the_text_path", false)
        || rcni_tests::skip_without_tools(
            "legacy_iptables_takes_the_text_path",
            &[
                "xtables-legacy-multi",
                "iptables-legacy-save",
                "ip6tables-legacy-save",
            ],
        )
    {
        return;
    }
    let legacy = Tools::legacy();
    let host = Lab::bare();
    let sandbox = Netns::new("fwc");
    let c1 = conf(
        "fwleg",
        &json!({}),
        Some(&prev_with("10.138.65.2", "fd21:138::65:2", &sandbox)),
    );
    let c2 = conf(
        "fwleg",
        &json!({}),
        Some(&prev_with("10.138.65.3", "fd21:138::65:3", &sandbox)),
    );
    for (cid, c) in [("fwleg1", &c1), ("fwleg2", &c2)] {
        run_with(&legacy, &ours(), "ADD", &host, &sandbox, cid, c).ok();
        run_with(&legacy, &ours(), "CHECK", &host, &sandbox, cid, c).ok();
    }
    let saved = host.exec_ok("iptables-legacy-save", &["-t", "filter"]);
    for rule in address_rules("10.138.65.3") {
        assert!(saved.contains(&rule), "{rule} not in\n{saved}");
    }
    let saved6 = host.exec_ok("ip6tables-legacy-save", &["-t", "filter"]);
    assert!(
        saved6.contains("-A CNI-FORWARD -s fd21:138::65:3/128 -j ACCEPT"),
        "{saved6}"
    );
    let nft = host.exec_ok("nft", &["list", "ruleset"]);
    assert!(!nft.contains("CNI-FORWARD"), "rules in nf_tables:\n{nft}");
    run_with(&legacy, &ours(), "DEL", &host, &sandbox, "fwleg2", &c2).ok();
    let saved = host.exec_ok("iptables-legacy-save", &["-t", "filter"]);
    assert!(!saved.contains("10.138.65.3"), "{saved}");
    assert!(saved.contains("10.138.65.2"), "{saved}");
    run_with(&legacy, &ours(), "DEL", &host, &sandbox, "fwleg1", &c1).ok();
}

// ---- a failed ADD undoes the family it already wrote ----

/// A `prevResult` with the addresses `addrs` on the container interface.
fn prev_of(addrs: &[&str], sandbox: &Netns) -> Value {
    let ips: Vec<Value> = addrs
        .iter()
        .map(|a| {
            let len = if a.contains(':') { 112 } else { 24 };
            json!({"address": format!("{a}/{len}"), "interface": 1})
        })
        .collect();
    json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "fwbr0"}, {"name": "eth0", "sandbox": sandbox.path()}],
        "ips": ips
    })
}

/// The families are separate transactions (netlink for one and
/// `iptables-restore` for the other, or `iptables-restore` for each): when
/// the second fails, the first is undone, so no rule or record of the
/// container is left in either family, and the error is the tool's, in
/// Go's shape. Each order: IPv4 over netlink then IPv6 by text, IPv6 over
/// netlink then IPv4 by text, IPv4 by text then IPv6 by text. Another
/// container's rules (the one whose ADD made the chains) stay.
#[test]
fn failed_second_family_leaves_nothing() {
    if skip("failed_second_family_leaves_nothing", false) {
        return;
    }
    let real = Tools::recording("xtables-nft-multi");
    // (case, the family made ready beforehand (its chains there: the netlink
    // path), the tool that fails, the path the first family should take)
    let cases = [
        ("v4 netlink, v6 text", Some(false), "ip6tables-restore"),
        ("v6 netlink, v4 text", Some(true), "iptables-restore"),
        ("v4 text, v6 text", None, "ip6tables-restore"),
    ];
    for (i, (case, ready, failing_tool)) in cases.into_iter().enumerate() {
        let host = Lab::bare();
        let sandbox = Netns::new("fwc");
        // IPv6 in canonical form, as ip6tables-save prints it.
        let canon = |a: String| a.parse::<std::net::Ipv6Addr>().unwrap().to_string();
        let (a4, a6) = (
            format!("10.148.{i}.2"),
            canon(format!("fd21:148::{}:2", i + 1)),
        );
        let (b4, b6) = (
            format!("10.148.{i}.3"),
            canon(format!("fd21:148::{}:3", i + 1)),
        );
        let net = "frnet";
        let mut kept: Vec<String> = Vec::new();
        if let Some(v6) = ready {
            let other = if v6 { &b6 } else { &b4 };
            let c = conf(net, &json!({}), Some(&prev_of(&[other], &sandbox)));
            run_with(&real, &ours(), "ADD", &host, &sandbox, "frother", &c).ok();
            kept.push(other.clone());
        }
        real.take_calls();
        let fails = Tools::failing(failing_tool);
        let c = conf(
            net,
            &json!({}),
            Some(&prev_of(&[a4.as_str(), a6.as_str()], &sandbox)),
        );
        let out = run_with(&fails, &ours(), "ADD", &host, &sandbox, "fr1", &c);
        let e = out.err();
        assert_eq!(e["code"], 999, "{case}: {e}");
        let msg = e["msg"].as_str().unwrap();
        assert!(
            msg.starts_with("iptables: ") && msg.contains("line 2 failed (rcni test)"),
            "{case}: {e}"
        );
        let calls = fails.take_calls();
        let first_by_text = if failing_tool == "ip6tables-restore" {
            "iptables-restore"
        } else {
            "ip6tables-restore"
        };
        // The path the first family took (only xtables-nft-multi calls are
        // recorded; the failing script records nothing).
        assert_eq!(
            calls.iter().any(|c| c.starts_with(first_by_text)),
            ready.is_none(),
            "{case}: {calls:?}"
        );
        for a in [&a4, &a6] {
            assert!(
                no_address_rules(&host, a),
                "{case}: {a}'s rules left: {:?}",
                rules(&host)
            );
            assert_eq!(records(&host, a), 0, "{case}: {a}'s record left");
        }
        for a in &kept {
            assert!(has_address_rules(&host, a), "{case}: {a}'s rules gone");
            assert_eq!(records(&host, a), 1, "{case}: {a}'s record gone");
        }
        // Nothing in the way of the ADD again, which works, and of DEL.
        run_with(&real, &ours(), "ADD", &host, &sandbox, "fr1", &c).ok();
        for a in [&a4, &a6] {
            assert!(
                has_address_rules(&host, a),
                "{case}: {a} after the ADD again"
            );
        }
        run_with(&real, &ours(), "DEL", &host, &sandbox, "fr1", &c).ok();
        for a in [&a4, &a6] {
            assert!(
                no_address_rules(&host, a) && records(&host, a) == 0,
                "{case}"
            );
        }
    }
}

/// A repeated ADD that fails in its second family takes away nothing of
/// what the first ADD made: the undo is of what this ADD wrote.
#[test]
fn failed_repeated_add_keeps_the_first() {
    if skip("failed_repeated_add_keeps_the_first", false) {
        return;
    }
    let real = Tools::recording("xtables-nft-multi");
    let host = Lab::bare();
    let sandbox = Netns::new("fwc");
    let (a4, a6) = ("10.148.8.2", "fd21:148::8:2");
    let c = conf("frnet", &json!({}), Some(&prev_of(&[a4, a6], &sandbox)));
    run_with(&real, &ours(), "ADD", &host, &sandbox, "fr2", &c).ok();
    let before = rules(&host);
    let fails = Tools::failing("ip6tables-restore");
    // Its IPv6 rules gone, the repeated ADD must run ip6tables-restore.
    host.exec_ok(
        "ip6tables",
        &[
            "-w",
            "-D",
            "CNI-FORWARD",
            "-s",
            &format!("{a6}/128"),
            "-j",
            "ACCEPT",
        ],
    );
    run_with(&fails, &ours(), "ADD", &host, &sandbox, "fr2", &c).err();
    let mut want = before.clone();
    want.retain(|r| !r.contains(&format!("-s {a6}/128 -j ACCEPT")));
    assert_eq!(rules(&host), want);
    run_with(&real, &ours(), "DEL", &host, &sandbox, "fr2", &c).ok();
}

/// DELs at once (issue 30: the iptables-nft DEL holds the firewall lock
/// shared): eight attachments with addresses of their own, and two
/// attachments of two networks that share one address (overlapping
/// subnets: whichever DEL comes last must take the address rules, which
/// needs the exclusive lock), all deleted concurrently, several times over.
/// Every record and address rule goes, and the DELs all succeed; a
/// repeated DEL at once finds nothing and succeeds too. Addresses
/// 10.187.0.0/24 and fd21:187::/112, in a bare host.
#[test]
fn ds_concurrent_dels_leave_nothing() {
    if skip("ds_concurrent_dels_leave_nothing", false) {
        return;
    }
    let host = Lab::bare();
    let container = Netns::new("dsfwc");
    let prev = |h: u8| {
        json!({
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "dsbr"}, {"name": "dsv"}, {"name": "eth0", "sandbox": container.path()}],
            "ips": [
                {"address": format!("10.187.0.{h}/24"), "gateway": "10.187.0.1", "interface": 2},
                {"address": format!("fd21:187::{h}/112"), "gateway": "fd21:187::1", "interface": 2}
            ]
        })
    };
    // (network, container ID, host part): two networks share .50.
    let mut atts: Vec<(String, String, u8)> = (0..8u8)
        .map(|i| ("ds_net_a".to_string(), format!("ds_fw{i}"), 10 + i))
        .collect();
    atts.push(("ds_net_a".into(), "ds_shared_a".into(), 50));
    atts.push(("ds_net_b".into(), "ds_shared_b".into(), 50));
    // The shared chains and jumps, made by a first ADD, stay after DEL.
    let c = conf("ds_net_a", &json!({}), Some(&prev(2)));
    run(&ours(), "ADD", &host, &container, "ds_first", &c).ok();
    run(&ours(), "DEL", &host, &container, "ds_first", &c).ok();
    let untouched = rules(&host);
    assert!(
        untouched.iter().all(|r| !r.contains("10.187.")),
        "{untouched:?}"
    );
    for round in 0..3 {
        for (net, cid, h) in &atts {
            let c = conf(net, &json!({}), Some(&prev(*h)));
            run(&ours(), "ADD", &host, &container, cid, &c).ok();
        }
        assert_eq!(records(&host, "10.187.0.50"), 2, "round {round}");
        for _ in 0..2 {
            std::thread::scope(|s| {
                let dels: Vec<_> = atts
                    .iter()
                    .map(|(net, cid, h)| {
                        let (host, container) = (&host, &container);
                        s.spawn(move || {
                            let c = conf(net, &json!({}), Some(&prev(*h)));
                            run(&ours(), "DEL", host, container, cid, &c)
                        })
                    })
                    .collect();
                for d in dels {
                    d.join().unwrap().ok();
                }
            });
            assert_eq!(rules(&host), untouched, "round {round}");
        }
    }
}

/// The grace period after a deleting commit (issue 30's DEL storm): a
/// firewall DEL that deleted rules waits for it once with membarrier(2)
/// before its exit (`cni_fw::settle`: its commit is its last kernel work,
/// so it costs a lone DEL nothing more, and in a crowd the exit then finds
/// nothing to wait for under the kernel's commit mutex); an ADD, and a DEL
/// that found nothing to delete, do not wait. Addresses of test 10.
#[test]
fn fw_del_that_deleted_waits_for_the_grace_period_before_it_exits() {
    if skip(
        "fw_del_that_deleted_waits_for_the_grace_period_before_it_exits",
        false,
    ) || rcni_tests::skip_without_tools(
        "fw_del_that_deleted_waits_for_the_grace_period_before_it_exits",
        &["strace"],
    ) {
        return;
    }
    let mut lab = Lab::new(10);
    lab.bridge(0);
    let (i, prev) = lab.container(0, 2);
    let c = conf("fwsettle", &json!({}), Some(&prev));
    let dir = rcni_tests::tempdir::TempDir::new("fwsettle");
    // Each run under strace, as a runtime execs the plugin (env and stdin
    // pass through); the number of membarrier calls it made.
    let waits = |cmd: &str, trace: &str| {
        let trace = dir.file(trace);
        Invocation::new(ours(), cmd)
            .attach("fwsettle1", lab.ns(i), "eth0")
            .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
            .in_host(&lab.host)
            .config(&c)
            .via(&[
                "strace",
                "-f",
                "-qq",
                "-e",
                "trace=membarrier",
                "-o",
                &trace,
            ])
            .run()
            .ok();
        std::fs::read_to_string(&trace)
            .unwrap()
            .matches("membarrier(")
            .count()
    };
    let a4 = v4_addr(&prev);
    let add = waits("ADD", "add");
    assert!(has_address_rules(&lab.host, &a4));
    let del = waits("DEL", "del");
    assert!(no_address_rules(&lab.host, &a4));
    let got = (add, del, waits("DEL", "again"));
    assert_eq!(got, (0, 1, 0), "membarrier calls of ADD, DEL, DEL again");
}
