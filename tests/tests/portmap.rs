//! The portmap plugin with real traffic. Every test builds its own little
//! world of network namespaces (named `pm…`): a private "host" in which the
//! plugins run, containers, and a "client" namespace routed to the host
//! over a veth. Servers and clients are `rcni-echo` (tests/src/bin).
//!
//! The behaviour tests drive a conflist through cni-runtime, as a runtime
//! does: our bridge (with our host-local, data in the test's temp dir)
//! followed by our portmap with `"capabilities": {"portMappings": true}`,
//! the mappings given as capability arguments, the result cache in the
//! test's temp dir. cni-runtime execs the plugins from a thread that has
//! entered the "host" namespace ([`Netns::run_in`]), so they run there.
//! The byte-for-byte comparison with the Go portmap instead chains both
//! after the Go reference bridge + host-local, handing each the same
//! `prevResult`.
//!
//! Subnets per test `n`: bridge 10.60.(2n).0/24 and fd60:n::/64, uplink
//! 10.60.(2n+1).0/24 and fd60:n:1::/64.

#![cfg(test)]

use cni_runtime::{CniConfig, CniError, CniResult, GcAttachment, NetworkConfigList, RuntimeConf};
use rcni_tests::fw_tools::Tools;
use rcni_tests::netns_setup::{ip_batch, sysctls};
use rcni_tests::tempdir::TempDir;
use rcni_tests::{
    FIREWALL_TOOLS, Invocation, Netns, PluginOutput, bin, bin_dir, go_bin, skip_unless,
};
use serde_json::{Map, Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Root only: the conflist tests run our plugins.
fn skip(test: &str) -> bool {
    skip_if(test, false)
}

/// Root and the Go reference plugins.
fn skip_go(test: &str) -> bool {
    skip_if(test, true)
}

fn skip_if(test: &str, go: bool) -> bool {
    use std::io::Write;
    if skip_unless(test, FIREWALL_TOOLS) {
        return true;
    }
    let why = if go && (go_bin("bridge").is_none() || go_bin("portmap").is_none()) {
        "needs the Go reference plugins in /usr/lib/cni"
    } else {
        return false;
    };
    let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: {why}");
    true
}

/// A running `rcni-echo serve`, killed on drop.
struct Server(Child);

impl Server {
    fn start(ns: &Netns, tag: &str, ports: &[u16]) -> Server {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns.name()])
            .arg(bin("rcni-echo"))
            .args(["serve", tag])
            .args(ports.iter().map(u16::to_string))
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn rcni-echo");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .expect("read ready");
        assert_eq!(line.trim(), "ready", "rcni-echo did not start");
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What `rcni-echo ask` got back from `addr:port` when run in `ns`.
fn ask(ns: &Netns, proto: &str, addr: &str, port: u16) -> Result<String, String> {
    ask_from(ns, proto, addr, port, 0, 2000)
}

fn ask_from(
    ns: &Netns,
    proto: &str,
    addr: &str,
    port: u16,
    src: u16,
    timeout_ms: u32,
) -> Result<String, String> {
    let echo = bin("rcni-echo").display().to_string();
    let out = ns.exec(
        &echo,
        &[
            "ask",
            proto,
            addr,
            &port.to_string(),
            &src.to_string(),
            &timeout_ms.to_string(),
        ],
    );
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

fn expect_answer(ns: &Netns, proto: &str, addr: &str, port: u16, want: &str, what: &str) {
    let mut last = Err(String::new());
    // The first IPv6 packets may wait for neighbour discovery: retry a little.
    for _ in 0..3 {
        last = ask(ns, proto, addr, port);
        if last.as_deref() == Ok(want) {
            return;
        }
    }
    panic!("{what}: {proto} {addr} port {port}: expected {want:?}, got {last:?}");
}

fn expect_no_answer(ns: &Netns, proto: &str, addr: &str, port: u16, what: &str) {
    let got = ask_from(ns, proto, addr, port, 0, 700);
    assert!(
        got.is_err(),
        "{what}: {proto} {addr} port {port} answered {got:?}"
    );
}

/// One test's namespaces and addresses.
struct Lab {
    n: u8,
    host: Netns,
    client: Netns,
    /// host-local's dataDir (`ipam`) and the runtime's cache (`cache`).
    dir: TempDir,
    /// The runtime: our plugins, the cache in `dir`.
    cni: CniConfig,
    /// Containers made so far (kept alive until the lab drops).
    containers: Vec<Netns>,
}

impl Lab {
    /// The host (forwarding on) and the client, wired by a veth, and one
    /// `ip -batch` for each side's links, addresses and routes.
    fn new(n: u8) -> Lab {
        let lab = Lab::unwired(n);
        let (host_v4, host_v6) = (lab.host_v4(), lab.host_v6());
        ip_batch(
            &lab.host,
            &[
                format!(
                    "link add pmup type veth peer name eth0 netns {}",
                    lab.client.name()
                ),
                format!("addr add {host_v4}/24 dev pmup"),
                format!("addr add {host_v6}/64 dev pmup nodad"),
                "link set pmup up".into(),
            ],
        );
        ip_batch(
            &lab.client,
            &[
                format!("addr add 10.60.{}.2/24 dev eth0", 2 * n + 1),
                format!("addr add fd60:{n}:1::2/64 dev eth0 nodad"),
                "link set eth0 up".into(),
                format!("route add default via {host_v4}"),
                format!("route add default via {host_v6}"),
            ],
        );
        lab
    }

    /// The host (forwarding on) and an unconnected client: for the tests
    /// that look at rules only, not at traffic.
    fn unwired(n: u8) -> Lab {
        let host = Netns::new("pmh");
        let client = Netns::new("pmc");
        for ns in [&host, &client] {
            ip_batch(ns, &["link set lo up"]);
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
        let dir = TempDir::new("pm");
        // The conflists' plugins, all ours (fails with a hint when not built).
        for plugin in ["bridge", "host-local", "portmap"] {
            bin(plugin);
        }
        let cni = CniConfig::new(vec![bin_dir()]).with_cache_dir(dir.join("cache"));
        Lab {
            n,
            host,
            client,
            dir,
            cni,
            containers: Vec::new(),
        }
    }

    /// The host's uplink addresses (what clients connect to).
    fn host_v4(&self) -> String {
        format!("10.60.{}.1", 2 * self.n + 1)
    }
    fn host_v6(&self) -> String {
        format!("fd60:{}:1::1", self.n)
    }
    /// The bridge's addresses: also the host's.
    fn gw_v4(&self) -> String {
        format!("10.60.{}.1", 2 * self.n)
    }
    fn gw_v6(&self) -> String {
        format!("fd60:{}::1", self.n)
    }

    /// The bridge plugin of a network: hairpin, gateway, no masquerade,
    /// host-local over the whole bridge subnets (dual stack when `v6`) or,
    /// with `part`, over a slice of them, so that several networks can
    /// share the bridge without sharing addresses.
    fn bridge_plugin(&self, v6: bool, part: Option<u8>) -> Value {
        let range = |subnet: String, bounds: Option<(String, String)>| match bounds {
            Some((start, end)) => {
                json!([{"subnet": subnet, "rangeStart": start, "rangeEnd": end}])
            }
            None => json!([{"subnet": subnet}]),
        };
        let (b4, n) = (2 * self.n, self.n);
        let mut ranges = vec![range(
            format!("10.60.{b4}.0/24"),
            part.map(|k| {
                (
                    format!("10.60.{b4}.{}", 100 * k + 2),
                    format!("10.60.{b4}.{}", 100 * k + 99),
                )
            }),
        )];
        if v6 {
            ranges.push(range(
                format!("fd60:{n}::/64"),
                part.map(|k| (format!("fd60:{n}::{k}:2"), format!("fd60:{n}::{k}:ffff"))),
            ));
        }
        json!({
            "type": "bridge", "bridge": "pmbr0",
            "isGateway": true, "ipMasq": false,
            // With br_netfilter loaded, a DNATed frame returning to the
            // port it came from needs hairpin mode on that port.
            "hairpinMode": true,
            "ipam": {"type": "host-local", "ranges": ranges, "dataDir": self.dir.file("ipam"),
                     "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]}
        })
    }

    /// The Go reference bridge's config (a single plugin, cniVersion 1.0.0).
    fn go_bridge_conf(&self, v6: bool) -> Value {
        let mut conf = self.bridge_plugin(v6, None);
        conf["cniVersion"] = json!("1.0.0");
        conf["name"] = json!("pmnet");
        conf
    }

    /// The conflist `name`: our bridge, then our portmap with the
    /// `portMappings` capability and the options in `extra`.
    fn conflist(&self, name: &str, extra: &Value, v6: bool, part: Option<u8>) -> NetworkConfigList {
        let mut pm = json!({"type": "portmap", "capabilities": {"portMappings": true}});
        for (k, v) in extra.as_object().expect("object") {
            pm[k] = v.clone();
        }
        let list = json!({"cniVersion": "1.1.0", "name": name,
                          "plugins": [self.bridge_plugin(v6, part), pm]});
        NetworkConfigList::from_bytes(list.to_string().as_bytes()).expect("conflist")
    }

    /// A list of our portmap alone, for handing it an explicit `prevResult`.
    fn portmap_only(&self, name: &str, extra: &Value) -> NetworkConfigList {
        let mut pm = json!({"type": "portmap", "capabilities": {"portMappings": true}});
        for (k, v) in extra.as_object().expect("object") {
            pm[k] = v.clone();
        }
        let list = json!({"cniVersion": "1.1.0", "name": name, "plugins": [pm]});
        NetworkConfigList::from_bytes(list.to_string().as_bytes()).expect("conflist")
    }

    /// A new, empty container namespace; returns its index in `containers`.
    fn netns(&mut self) -> usize {
        let ns = Netns::new("pmk");
        ip_batch(&ns, &["link set lo up"]);
        sysctls(
            &ns,
            &[
                "net.ipv6.conf.all.accept_dad=0",
                "net.ipv6.conf.default.accept_dad=0",
            ],
        );
        self.containers.push(ns);
        self.containers.len() - 1
    }

    /// A new container attached to the bridge by the Go reference bridge
    /// (dual stack unless `v4_only`); returns its index and the result.
    fn go_container(&mut self, id: &str, v4_only: bool) -> (usize, Value) {
        let i = self.netns();
        let out = Invocation::new(go_bin("bridge").expect("go bridge"), "ADD")
            .attach(id, self.ns(i), "eth0")
            .in_host(&self.host)
            .config(&self.go_bridge_conf(!v4_only))
            .run();
        (i, out.ok())
    }

    /// What the runtime passes for container `i`: `maps` (unless null) as
    /// the `portMappings` capability argument.
    fn rt(&self, cid: &str, i: usize, maps: &Value) -> RuntimeConf {
        let mut capability_args = Map::new();
        if !maps.is_null() {
            capability_args.insert("portMappings".into(), maps.clone());
        }
        RuntimeConf {
            container_id: cid.into(),
            netns: self.ns(i).path().display().to_string(),
            ifname: "eth0".into(),
            args: Vec::new(),
            capability_args,
        }
    }

    /// Runs `op` with the runtime and the runtime config of container `i`
    /// (as `cid`, `maps` its port mappings) on a thread in the host.
    fn in_host<T: Send>(
        &self,
        cid: &str,
        i: usize,
        maps: &Value,
        op: impl FnOnce(&CniConfig, &RuntimeConf) -> T + Send,
    ) -> T {
        let rt = self.rt(cid, i, maps);
        self.host.run_in(|| op(&self.cni, &rt))
    }

    /// ADD of the list for container `i`, the plugins running in the host;
    /// the chain's result as JSON.
    fn add(
        &self,
        list: &NetworkConfigList,
        cid: &str,
        i: usize,
        maps: &Value,
    ) -> Result<Value, CniError> {
        let result = self.in_host(cid, i, maps, |cni, rt| cni.add_network_list(list, rt))?;
        let text = result.to_json(&list.cni_version)?;
        Ok(serde_json::from_str(&text).expect("result JSON"))
    }

    /// CHECK of the list with the cached result.
    fn check(
        &self,
        list: &NetworkConfigList,
        cid: &str,
        i: usize,
        maps: &Value,
    ) -> Result<(), CniError> {
        self.in_host(cid, i, maps, |cni, rt| cni.check_network_list(list, rt))
    }

    /// DEL of the list with the cached result (if any).
    fn del(
        &self,
        list: &NetworkConfigList,
        cid: &str,
        i: usize,
        maps: &Value,
    ) -> Result<(), CniError> {
        self.in_host(cid, i, maps, |cni, rt| cni.del_network_list(list, rt))
    }

    /// The cached result of an attachment (what DEL and CHECK hand on).
    fn cached(&self, list: &NetworkConfigList, cid: &str, i: usize) -> CniResult {
        self.cni
            .get_network_list_cached_result(list, &self.rt(cid, i, &Value::Null))
            .expect("read the cache")
            .expect("a cached result")
    }

    /// GC of the list with the attachments (`eth0` of each ID) still valid.
    fn gc(&self, list: &NetworkConfigList, valid: &[&str]) -> Result<(), CniError> {
        let valid: Vec<GcAttachment> = valid
            .iter()
            .map(|cid| GcAttachment {
                container_id: (*cid).into(),
                ifname: "eth0".into(),
            })
            .collect();
        self.host
            .run_in(|| self.cni.gc_network_list(list, Some(&valid)))
    }

    fn ns(&self, i: usize) -> &Netns {
        &self.containers[i]
    }

    fn save(&self, v6: bool) -> String {
        let tool = if v6 {
            "ip6tables-save"
        } else {
            "iptables-save"
        };
        let text = self.host.exec_ok(tool, &["-t", "nat"]);
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn nft(&self) -> String {
        let out = self.host.exec("nft", &["list", "ruleset"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn address(result: &Value, v6: bool) -> String {
    result["ips"]
        .as_array()
        .expect("ips")
        .iter()
        .map(|ip| ip["address"].as_str().expect("address"))
        .find(|a| a.contains(':') == v6)
        .expect("address of the family")
        .split('/')
        .next()
        .expect("ip")
        .to_string()
}

fn pm_conf(net: &str, extra: Value, maps: Value, prev: Option<&Value>) -> Value {
    let mut c = json!({"cniVersion": "1.0.0", "name": net, "type": "portmap",
                       "runtimeConfig": {"portMappings": maps}});
    if let Some(p) = prev {
        c["prevResult"] = p.clone();
    }
    for (k, v) in extra.as_object().expect("object") {
        c[k] = v.clone();
    }
    c
}

fn portmap(
    plugin: &std::path::Path,
    cmd: &str,
    lab: &Lab,
    cid: &str,
    i: usize,
    conf: &Value,
) -> PluginOutput {
    Invocation::new(plugin, cmd)
        .attach(cid, lab.ns(i), "eth0")
        .in_host(&lab.host)
        .config(conf)
        .run()
}

fn chain_of(net: &str, cid: &str) -> String {
    cni_fw_chain(net, cid)
}

/// `CNI-DN-` + sha512(net+cid) cut to 28 characters, computed with the
/// system's sha512sum so the test does not share code with the plugin.
fn cni_fw_chain(net: &str, cid: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", &format!("printf %s '{net}{cid}' | sha512sum")])
        .output()
        .expect("sha512sum");
    let hex = String::from_utf8_lossy(&out.stdout);
    format!("CNI-DN-{}", &hex[..21])
}

// ---------------------------------------------------------------------------

/// Same input, same `iptables-save` for us and the Go reference, for ADD and
/// for DEL, over several option sets. Each implementation gets one host
/// with two containers of the Go bridge and runs every option set there in
/// turn, the nat table emptied between them (but for the chain
/// `KUBE-MARK-MASQ` that `externalSetMarkChain` names), which is the state
/// a new namespace has: the Go portmap runs `iptables` twice a rule, so
/// each mapping costs dozens of processes, which the VMs of scripts/vmtest
/// pay 40-90 ms each for.
#[test]
fn iptables_rules_match_the_reference() {
    if skip_go("iptables_rules_match_the_reference") {
        return;
    }
    // Both protocols and families, a host address of each family and the
    // unspecified one.
    let mut many = vec![
        json!({"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}),
        json!({"hostPort": 8081, "containerPort": 81, "protocol": "udp"}),
        json!({"hostPort": 8082, "containerPort": 82, "protocol": "tcp", "hostIP": "10.60.3.1"}),
        json!({"hostPort": 8083, "containerPort": 83, "protocol": "udp", "hostIP": "fd60:1:1::1"}),
        json!({"hostPort": 8084, "containerPort": 84, "protocol": "tcp", "hostIP": "0.0.0.0"}),
    ];
    let few = Value::Array(many.clone());
    // More than 15 ports of one protocol: the multiport entries split.
    for p in 9001..=9017 {
        many.push(json!({"hostPort": p, "containerPort": p, "protocol": "tcp"}));
    }
    let many = Value::Array(many);
    // The option sets, each with the mappings it needs: the conditions go
    // on the multiport entries, so on each part of a split one; the rest
    // change the rules of each mapping alike (`snat: false` drops their
    // masquerade marks, which the last two change), which a few show.
    let variants = [
        (json!({}), &few),
        (
            json!({"snat": false, "conditionsV4": ["-s", "10.0.0.0/8"],
                   "conditionsV6": ["!", "-s", "fd00:1::/64"]}),
            &many,
        ),
        (json!({"markMasqBit": 5}), &few),
        (json!({"externalSetMarkChain": "KUBE-MARK-MASQ"}), &few),
    ];
    // Per implementation, per option set: the nat tables after ADD of both
    // containers and after DEL of the first.
    let mut saved = Vec::new();
    for plugin in [go_bin("portmap").expect("go portmap"), bin("portmap")] {
        let mut lab = Lab::unwired(1);
        let (a, ra) = lab.go_container("pm-ref-a", false);
        let (b, rb) = lab.go_container("pm-ref-b", false);
        let fresh_nat = lab.dir.file("fresh-nat");
        std::fs::write(&fresh_nat, "*nat\n:KUBE-MARK-MASQ - [0:0]\nCOMMIT\n").expect("write");
        let mut of_plugin = Vec::new();
        for (extra, maps) in &variants {
            for t in ["iptables-restore", "ip6tables-restore"] {
                lab.host.exec_ok(t, &[&fresh_nat]);
            }
            let ca = pm_conf("pmnet", extra.clone(), (*maps).clone(), Some(&ra));
            let cb = pm_conf(
                "pmnet",
                extra.clone(),
                json!([{"hostPort": 7000, "containerPort": 70, "protocol": "tcp"}]),
                Some(&rb),
            );
            portmap(&plugin, "ADD", &lab, "pm-ref-a", a, &ca).ok();
            portmap(&plugin, "ADD", &lab, "pm-ref-b", b, &cb).ok();
            let added = (lab.save(false), lab.save(true));
            portmap(&plugin, "DEL", &lab, "pm-ref-a", a, &ca).ok();
            let deleted = (lab.save(false), lab.save(true));
            of_plugin.push((added, deleted));
        }
        saved.push(of_plugin);
    }
    for ((extra, _), (ours, theirs)) in variants.iter().zip(saved[1].iter().zip(&saved[0])) {
        assert_eq!(ours.0.0, theirs.0.0, "iptables after ADD, options {extra}");
        assert_eq!(ours.0.1, theirs.0.1, "ip6tables after ADD, options {extra}");
        assert_eq!(ours.1.0, theirs.1.0, "iptables after DEL, options {extra}");
        assert_eq!(ours.1.1, theirs.1.1, "ip6tables after DEL, options {extra}");
        assert!(
            ours.0.0.contains(&chain_of("pmnet", "pm-ref-a")),
            "{}",
            ours.0.0
        );
        assert!(
            !ours.1.0.contains(&chain_of("pmnet", "pm-ref-a")),
            "{}",
            ours.1.0
        );
    }
}

/// Every path, TCP and UDP, IPv4 and IPv6, with one backend; then CHECK,
/// DEL and "nothing left". Run with bridged frames passing iptables
/// (`br_netfilter`, as on Kubernetes nodes) and without, when the kernel
/// lets us choose.
fn traffic(backend: &str, n: u8) {
    let nf = std::path::Path::new("/proc/sys/net/bridge/bridge-nf-call-iptables").exists();
    traffic_with(backend, n, nf.then_some(true));
    if nf {
        traffic_with(backend, n, Some(false));
    }
}

fn traffic_with(backend: &str, n: u8, br_netfilter: Option<bool>) {
    let mut lab = Lab::new(n);
    if let Some(on) = br_netfilter {
        let v = u8::from(on);
        sysctls(
            &lab.host,
            &[
                &format!("net.bridge.bridge-nf-call-iptables={v}"),
                &format!("net.bridge.bridge-nf-call-ip6tables={v}"),
            ],
        );
    }
    let extra = json!({"backend": backend});
    let list = lab.conflist("pmnet", &extra, true, None);
    let (a, b) = (lab.netns(), lab.netns());
    let maps = json!([
        {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
        {"hostPort": 8080, "containerPort": 80, "protocol": "udp"},
        {"hostPort": 8090, "containerPort": 80, "protocol": "tcp", "hostIP": lab.host_v4()},
        {"hostPort": 8091, "containerPort": 80, "protocol": "tcp", "hostIP": lab.host_v6()},
    ]);
    let added = lab.add(&list, "pm-a", a, &maps).expect("ADD pm-a");
    // A second container on the bridge, with no mappings.
    lab.add(&list, "pm-b", b, &Value::Null).expect("ADD pm-b");
    let _sa = Server::start(lab.ns(a), "A", &[80]);
    let _sb = Server::start(lab.ns(b), "B", &[80]);
    assert_bridge_result(&lab, a, &added);
    assert_eq!(lab.host.sysctl("net/ipv4/conf/pmbr0/route_localnet"), "1");

    let (h4, h6) = (lab.host_v4(), lab.host_v6());
    for proto in ["tcp", "udp"] {
        for addr in [&h4, &h6] {
            expect_answer(
                &lab.client,
                proto,
                addr,
                8080,
                "A",
                "from another namespace",
            );
            expect_answer(&lab.host, proto, addr, 8080, "A", "from the host");
            expect_answer(
                lab.ns(a),
                proto,
                addr,
                8080,
                "A",
                "hairpin from the container itself",
            );
            expect_answer(
                lab.ns(b),
                proto,
                addr,
                8080,
                "A",
                "from a second container on the bridge",
            );
        }
        expect_answer(
            &lab.host,
            proto,
            "127.0.0.1",
            8080,
            "A",
            "from the host to localhost",
        );
    }
    // A hostIP mapping answers on that address only.
    expect_answer(&lab.client, "tcp", &h4, 8090, "A", "hostIP v4");
    expect_no_answer(
        &lab.client,
        "tcp",
        &lab.gw_v4(),
        8090,
        "hostIP v4 on another host address",
    );
    expect_answer(&lab.client, "tcp", &h6, 8091, "A", "hostIP v6");
    expect_no_answer(
        &lab.client,
        "tcp",
        &lab.gw_v6(),
        8091,
        "hostIP v6 on another host address",
    );
    expect_no_answer(&lab.client, "tcp", &h6, 8090, "a v4 hostIP mapping on v6");

    lab.check(&list, "pm-a", a, &maps).expect("CHECK pm-a");

    // DEL: nothing left that mentions the container, traffic stops.
    let prev = lab.cached(&list, "pm-a", a);
    lab.del(&list, "pm-a", a, &maps).expect("DEL pm-a");
    let chain = chain_of("pmnet", "pm-a");
    for text in [lab.save(false), lab.save(true), lab.nft()] {
        assert!(
            !text.contains(&chain) && !text.contains("\"pm-a\""),
            "left after DEL:\n{text}"
        );
    }
    expect_no_answer(&lab.client, "tcp", &h4, 8080, "after DEL");
    // CHECK after DEL: the runtime has no cached result any more; portmap,
    // handed the result of ADD, misses its rules.
    let e = lab
        .check(&list, "pm-a", a, &maps)
        .expect_err("CHECK after DEL");
    assert_eq!(e.code, 3, "{e:?}");
    let portmap_only = lab.portmap_only("pmnet", &extra);
    let e = lab
        .in_host("pm-a", a, &maps, |cni, rt| {
            cni.check_network_list_with(&portmap_only, rt, Some(&prev))
        })
        .expect_err("portmap CHECK after DEL");
    assert_eq!(e.code, 999, "{e:?}");
    // DEL again (rules already gone), with the result of ADD as prevResult
    // and without any (nothing cached any more), succeeds.
    lab.in_host("pm-a", a, &maps, |cni, rt| {
        cni.del_network_list_with(&list, rt, Some(&prev))
    })
    .expect("DEL again with prevResult");
    lab.del(&list, "pm-a", a, &maps)
        .expect("DEL again without prevResult");
    lab.del(&list, "pm-b", b, &Value::Null).expect("DEL pm-b");
}

/// The chain's result is the bridge's, passed through by portmap: the
/// bridge, the container's `eth0` in its namespace, and the addresses
/// `eth0` really has.
fn assert_bridge_result(lab: &Lab, i: usize, result: &Value) {
    let ifaces = result["interfaces"].as_array().expect("interfaces");
    assert!(
        ifaces.iter().any(|x| x["name"] == "pmbr0"),
        "no bridge in {result}"
    );
    let sandbox = lab.ns(i).path().display().to_string();
    assert!(
        ifaces
            .iter()
            .any(|x| x["name"] == "eth0" && x["sandbox"] == sandbox.as_str()),
        "no container eth0 in {result}"
    );
    let mut have: Vec<String> = lab.ns(i).ip_json(&["addr", "show", "dev", "eth0"])[0]["addr_info"]
        .as_array()
        .expect("addr_info")
        .iter()
        .filter(|a| a["scope"] == "global")
        .map(|a| format!("{}/{}", a["local"].as_str().expect("local"), a["prefixlen"]))
        .collect();
    let mut got: Vec<String> = result["ips"]
        .as_array()
        .expect("ips")
        .iter()
        .map(|ip| ip["address"].as_str().expect("address").to_string())
        .collect();
    have.sort();
    got.sort();
    assert_eq!(got, have, "ADD passes the bridge's result through");
}

#[test]
fn traffic_iptables() {
    if skip("traffic_iptables") {
        return;
    }
    traffic("iptables", 2);
}

#[test]
fn traffic_nftables() {
    if skip("traffic_nftables") {
        return;
    }
    traffic("nftables", 3);
}

#[test]
fn nftables_structure() {
    if skip("nftables_structure") {
        return;
    }
    let mut lab = Lab::new(4);
    let list = lab.conflist("pmnet", &json!({"backend": "nftables"}), true, None);
    let a = lab.netns();
    let maps = json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]);
    let ra = lab.add(&list, "pm-nft", a, &maps).expect("ADD pm-nft");
    let (v4, v6) = (address(&ra, false), address(&ra, true));
    for (fam, ip) in [("ip", &v4), ("ip6", &v6)] {
        let t = lab
            .host
            .exec_ok("nft", &["list", "table", fam, "cni_hostport"]);
        for chain in [
            "hostports",
            "hostip_hostports",
            "hostports_all",
            "prerouting",
            "output",
            "masquerading",
        ] {
            assert!(
                t.contains(&format!("chain {chain} {{")),
                "{fam}: no chain {chain}:\n{t}"
            );
        }
        assert!(
            t.contains("type nat hook prerouting priority dstnat"),
            "{t}"
        );
        assert!(
            t.contains("type nat hook postrouting priority srcnat"),
            "{t}"
        );
        let dnat = if fam == "ip" {
            format!("dnat to {ip}:80")
        } else {
            format!("dnat to [{ip}]:80")
        };
        assert!(
            t.contains(&format!("tcp dport 8080 {dnat} comment \"pm-nft\"")),
            "{t}"
        );
        assert!(t.contains("fib daddr type local jump hostports_all"), "{t}");
    }
    // nftables-only configuration: no iptables chains at all.
    assert!(!lab.save(false).contains("CNI-"), "{}", lab.save(false));
    // The Go reference's DEL rule — delete rules whose comment is the
    // container ID — finds every rule (emulated here with nft itself).
    let listing = lab
        .host
        .exec_ok("nft", &["-a", "list", "table", "ip", "cni_hostport"]);
    let ours_commented = listing
        .lines()
        .filter(|l| l.contains("comment \"pm-nft\""))
        .count();
    assert!(ours_commented >= 3, "{listing}");
    lab.del(&list, "pm-nft", a, &maps).expect("DEL pm-nft");
    assert!(!lab.nft().contains("pm-nft"), "{}", lab.nft());
}

/// A container with only IPv4: CHECK must not look for IPv6 rules; a
/// missing rule fails CHECK.
#[test]
fn check_single_family_and_tampering() {
    if skip("check_single_family_and_tampering") {
        return;
    }
    let mut lab = Lab::new(5);
    let a = lab.netns();
    let maps = json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]);
    for backend in ["iptables", "nftables"] {
        let list = lab.conflist("pmnet", &json!({"backend": backend}), false, None);
        let ra = lab.add(&list, "pm-chk", a, &maps).expect("ADD pm-chk");
        assert!(
            ra["ips"].as_array().expect("ips").len() == 1,
            "IPv4 only: {ra}"
        );
        lab.check(&list, "pm-chk", a, &maps).expect("CHECK pm-chk");
        if backend == "iptables" {
            let chain = chain_of("pmnet", "pm-chk");
            lab.host
                .exec_ok("iptables", &["-t", "nat", "-D", &chain, "1"]);
        } else {
            let listing = lab.host.exec_ok(
                "nft",
                &["-a", "list", "chain", "ip", "cni_hostport", "hostports"],
            );
            let handle = listing
                .lines()
                .find(|l| l.contains("comment \"pm-chk\""))
                .and_then(|l| l.rsplit("# handle ").next())
                .expect("rule")
                .trim()
                .to_string();
            lab.host.exec_ok(
                "nft",
                &[
                    "delete",
                    "rule",
                    "ip",
                    "cni_hostport",
                    "hostports",
                    "handle",
                    &handle,
                ],
            );
        }
        let e = lab
            .check(&list, "pm-chk", a, &maps)
            .expect_err("CHECK with a rule missing");
        assert!(
            e.msg.starts_with("plugin type=\"portmap\" failed (check)")
                && (e.msg.contains("not found") || e.msg.contains("missing")),
            "{e:?}"
        );
        lab.del(&list, "pm-chk", a, &maps).expect("DEL pm-chk");
    }
}

/// UDP: a client that kept sending to a host port reaches the new container
/// at once after ADD (stale conntrack entries are flushed), also after a
/// DEL + ADD on the same host port.
fn udp_readd(backend: &str, n: u8) {
    let mut lab = Lab::new(n);
    let list = lab.conflist("pmnet", &json!({"backend": backend}), true, None);
    let (a, b, o) = (lab.netns(), lab.netns(), lab.netns());
    let _sa = Server::start(lab.ns(a), "A", &[81]);
    let _sb = Server::start(lab.ns(b), "B", &[81]);
    let udp = |p: u16| json!([{"hostPort": p, "containerPort": 81, "protocol": "udp"}]);
    // Some other mapping first, so that conntrack and NAT are active.
    let other = json!([{"hostPort": 7000, "containerPort": 81, "protocol": "tcp"}]);
    lab.add(&list, "pm-uo", o, &other).expect("ADD pm-uo");
    for addr in [lab.host_v4(), lab.host_v6()] {
        // Unmapped yet: the host answers nothing, but conntrack remembers the flow.
        assert!(ask_from(&lab.client, "udp", &addr, 9000, 40000, 300).is_err());
        lab.add(&list, "pm-ua", a, &udp(9000)).expect("ADD pm-ua");
        assert_eq!(
            ask_from(&lab.client, "udp", &addr, 9000, 40000, 1000),
            Ok("A".into()),
            "{addr} after ADD"
        );
        // Same host port to another container: the same flow moves at once.
        lab.del(&list, "pm-ua", a, &udp(9000)).expect("DEL pm-ua");
        lab.add(&list, "pm-ub", b, &udp(9000)).expect("ADD pm-ub");
        assert_eq!(
            ask_from(&lab.client, "udp", &addr, 9000, 40000, 1000),
            Ok("B".into()),
            "{addr} after re-ADD"
        );
        lab.del(&list, "pm-ub", b, &udp(9000)).expect("DEL pm-ub");
    }
    lab.del(&list, "pm-uo", o, &other).expect("DEL pm-uo");
}

#[test]
fn udp_readd_iptables() {
    if skip("udp_readd_iptables") {
        return;
    }
    udp_readd("iptables", 6);
}

#[test]
fn udp_readd_nftables() {
    if skip("udp_readd_nftables") {
        return;
    }
    udp_readd("nftables", 7);
}

/// GC keeps the valid containers working and removes the rest of this
/// network, in both backends; other networks keep theirs.
#[test]
fn gc_removes_only_stale_attachments() {
    if skip("gc_removes_only_stale_attachments") {
        return;
    }
    let mut lab = Lab::new(8);
    let (a, b, c) = (lab.netns(), lab.netns(), lab.netns());
    let _sa = Server::start(lab.ns(a), "A", &[80]);
    let _sb = Server::start(lab.ns(b), "B", &[80]);
    let _sc = Server::start(lab.ns(c), "C", &[80]);
    let map = |p: u16| json!([{"hostPort": p, "containerPort": 80, "protocol": "tcp"}]);
    let h4 = lab.host_v4();
    for (backend, base) in [("iptables", 8000u16), ("nftables", 8100u16)] {
        let extra = json!({"backend": backend});
        // Two networks on the one bridge, each with its own addresses.
        let gcnet = lab.conflist("gcnet", &extra, true, Some(0));
        let othernet = lab.conflist("othernet", &extra, true, Some(1));
        lab.add(&gcnet, "pm-gca", a, &map(base))
            .expect("ADD pm-gca");
        lab.add(&gcnet, "pm-gcb", b, &map(base + 1))
            .expect("ADD pm-gcb");
        lab.add(&othernet, "pm-gcc", c, &map(base + 2))
            .expect("ADD pm-gcc");
        for (p, want) in [(base, "A"), (base + 1, "B"), (base + 2, "C")] {
            expect_answer(&lab.client, "tcp", &h4, p, want, backend);
        }
        // The runtime lost track of pm-gcb (its cache entry is gone, as
        // after a crash): GC cannot DEL it, only the plugins' own GC with
        // the valid attachments can remove what is left of it.
        let stale = lab.dir.join("cache/results/gcnet-pm-gcb-eth0");
        std::fs::remove_file(&stale).unwrap_or_else(|e| panic!("remove {}: {e}", stale.display()));
        lab.gc(&gcnet, &["pm-gca"]).expect("GC gcnet");
        expect_answer(
            &lab.client,
            "tcp",
            &h4,
            base,
            "A",
            "valid attachment after GC",
        );
        expect_no_answer(
            &lab.client,
            "tcp",
            &h4,
            base + 1,
            "stale attachment after GC",
        );
        expect_answer(
            &lab.client,
            "tcp",
            &h4,
            base + 2,
            "C",
            "other network after GC",
        );
        let text = format!("{}\n{}\n{}", lab.save(false), lab.save(true), lab.nft());
        assert!(
            !text.contains(&chain_of("gcnet", "pm-gcb")) && !text.contains("\"pm-gcb\""),
            "{text}"
        );
        lab.check(&gcnet, "pm-gca", a, &map(base))
            .expect("CHECK pm-gca after GC");
        // The misspelt key of the spec works too; then nothing of gcnet is
        // valid. No runtime sends it alone (cni-runtime sends both keys), so
        // portmap gets it directly.
        let gc2 = json!({"cniVersion": "1.1.0", "name": "gcnet", "type": "portmap", "cni.dev/attachments": []});
        Invocation::new(bin("portmap"), "GC")
            .in_host(&lab.host)
            .config(&gc2)
            .run()
            .ok();
        expect_no_answer(
            &lab.client,
            "tcp",
            &h4,
            base,
            "after GC with no valid attachment",
        );
        expect_answer(
            &lab.client,
            "tcp",
            &h4,
            base + 2,
            "C",
            "other network after second GC",
        );
        // Whatever is left goes: pm-gca with its cached result, pm-gcb
        // (uncached) without one.
        lab.del(&gcnet, "pm-gca", a, &map(base))
            .expect("DEL pm-gca");
        lab.del(&gcnet, "pm-gcb", b, &map(base + 1))
            .expect("DEL pm-gcb");
        lab.del(&othernet, "pm-gcc", c, &map(base + 2))
            .expect("DEL pm-gcc");
    }
}

/// Invalid input is refused before any rule is written; the chaining and
/// no-mapping rules of the reference.
#[test]
fn invalid_input_and_protocol_rules() {
    if skip("invalid_input_and_protocol_rules") {
        return;
    }
    let mut lab = Lab::new(9);
    // A container for the conflist case (below).
    let c = lab.netns();
    let k = Netns::new("pmk");
    let prev = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": k.path().display().to_string()}],
        "ips": [{"interface": 0, "address": "10.60.18.2/24"}]});
    let ok_map = json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]);
    let run = |cmd: &str, conf: &Value| {
        Invocation::new(bin("portmap"), cmd)
            .attach("pm-bad", &k, "eth0")
            .in_host(&lab.host)
            .config(conf)
            .run()
    };
    let cases: Vec<(Value, Value, &str)> = vec![
        (
            json!({"backend": "pf"}),
            ok_map.clone(),
            "unrecognized backend \"pf\"",
        ),
        (
            json!({}),
            json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "not-an-ip"}]),
            "Invalid hostIP \"not-an-ip\"",
        ),
        (
            json!({}),
            json!([{"hostPort": 0, "containerPort": 80, "protocol": "tcp"}]),
            "Invalid host port number: 0",
        ),
        (
            json!({}),
            json!([{"hostPort": 65536, "containerPort": 80, "protocol": "tcp"}]),
            "Invalid host port number: 65536",
        ),
        (
            json!({}),
            json!([{"hostPort": 80, "containerPort": 0, "protocol": "tcp"}]),
            "Invalid container port number: 0",
        ),
        (
            json!({}),
            json!([{"hostPort": 80, "containerPort": 70000, "protocol": "tcp"}]),
            "Invalid container port number: 70000",
        ),
        (
            json!({}),
            json!([{"hostPort": 80, "containerPort": 80, "protocol": "icmp"}]),
            "Invalid protocol \"icmp\"",
        ),
        (
            json!({"markMasqBit": 32}),
            ok_map.clone(),
            "MasqMarkBit must be between 0 and 31",
        ),
        (
            json!({"markMasqBit": 3, "externalSetMarkChain": "X"}),
            ok_map.clone(),
            "Cannot specify externalSetMarkChain and markMasqBit",
        ),
        (
            json!({"backend": "nftables", "externalSetMarkChain": "X"}),
            ok_map.clone(),
            "nftables backend was requested but configuration contains iptables-specific options [externalSetMarkChain]",
        ),
        (
            json!({"backend": "nftables", "conditionsV4": ["-s", "10.0.0.0/8"]}),
            ok_map.clone(),
            "nftables backend was requested but configuration contains iptables-specific options [conditionsV4]",
        ),
        (
            json!({"backend": "iptables", "conditionsV6": ["ip6", "saddr", "fd00::/8"]}),
            ok_map.clone(),
            "iptables backend was requested but configuration contains nftables-specific options [conditionsV6]",
        ),
        (
            json!({"conditionsV4": ["ip", "saddr", "10.0.0.0/8"]}),
            ok_map.clone(),
            "iptables backend was requested but configuration contains nftables-specific options [conditionsV4]",
        ),
        (
            json!({"snat": "yes"}),
            ok_map.clone(),
            "failed to parse network configuration",
        ),
    ];
    for (extra, maps, msg) in cases {
        let conf = pm_conf("pmbad", extra.clone(), maps, Some(&prev));
        let e = run("ADD", &conf).err();
        assert_eq!(e["code"], 7, "{extra}: {e}");
        let got = e["msg"].as_str().expect("msg");
        assert!(
            got.starts_with(&format!("failed to parse config: {msg}")),
            "{extra}: {got}"
        );
    }
    // Not chained.
    let e = run("ADD", &pm_conf("pmbad", json!({}), ok_map.clone(), None)).err();
    assert_eq!(e["msg"], "must be called as chained plugin");
    let e = run("CHECK", &pm_conf("pmbad", json!({}), ok_map.clone(), None)).err();
    assert_eq!(e["msg"], "Required prevResult missing");
    // No mappings: ADD passes prevResult through, DEL touches nothing.
    let out = run("ADD", &pm_conf("pmbad", json!({}), json!([]), Some(&prev))).ok();
    assert_eq!(out["ips"][0]["address"], "10.60.18.2/24");
    run("DEL", &pm_conf("pmbad", json!({}), json!([]), None)).ok();
    run(
        "DEL",
        &json!({"cniVersion": "1.0.0", "name": "pmbad", "type": "portmap"}),
    )
    .ok();
    // Through the runtime, after the bridge: the chain fails with portmap's
    // error, its code intact.
    let list = lab.conflist("pmbad", &json!({}), true, None);
    let bad =
        json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "not-an-ip"}]);
    let e = lab
        .add(&list, "pm-bad", c, &bad)
        .expect_err("ADD with a bad mapping");
    assert_eq!(e.code, 7, "{e:?}");
    assert!(
        e.msg.starts_with(
            "plugin type=\"portmap\" failed (add): failed to parse config: Invalid hostIP \"not-an-ip\""
        ),
        "{e:?}"
    );
    // Nothing was written by any of it.
    assert!(!lab.save(false).contains("CNI-"), "{}", lab.save(false));
    assert!(!lab.save(true).contains("CNI-"), "{}", lab.save(true));
    assert!(!lab.nft().contains("cni_hostport"), "{}", lab.nft());
    // Every spec version is accepted.
    for v in ["0.3.1", "0.4.0", "1.1.0"] {
        let mut c = pm_conf("pmbad", json!({}), json!([]), None);
        c["cniVersion"] = json!(v);
        let prev = json!({"cniVersion": v, "ips": [{"address": "10.60.18.2/24", "version": "4"}]});
        c["prevResult"] = prev;
        let out = run("ADD", &c).ok();
        assert_eq!(out["cniVersion"], v);
    }
}

#[test]
fn status_reports_the_backend() {
    if skip("status_reports_the_backend") {
        return;
    }
    let lab = Lab::new(10);
    // A PATH without iptables or nft (only `ip`, which runs the plugin).
    let bare = TempDir::new("pmpath");
    let ip = ["/usr/sbin/ip", "/usr/bin/ip", "/sbin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("ip");
    std::os::unix::fs::symlink(ip, bare.join("ip")).expect("symlink");
    for backend in [json!("iptables"), json!("nftables"), Value::Null] {
        let mut conf = json!({"cniVersion": "1.1.0", "name": "pmst", "type": "portmap"});
        if !backend.is_null() {
            conf["backend"] = backend.clone();
        }
        Invocation::new(bin("portmap"), "STATUS")
            .in_host(&lab.host)
            .config(&conf)
            .run()
            .ok();
        let e = Invocation::new(bin("portmap"), "STATUS")
            .in_host(&lab.host)
            .env("PATH", bare.path().display().to_string())
            .config(&conf)
            .run()
            .err();
        assert_eq!(e["code"], 50, "{backend}: {e}");
    }
}

// ---- a failed ADD leaves nothing ----

/// A "host" with a bridge holding 10.148.(16+k).1/24 and
/// fd21:148::(16+k):1/112 (so that the container's addresses route through
/// it), a container namespace and the `prevResult` naming both.
fn undo_world(k: u8) -> (Netns, Netns, Value, String, String) {
    let host = Netns::new("frh");
    let sandbox = Netns::new("frc");
    host.exec_ok("ip", &["link", "add", "frbr", "type", "bridge"]);
    host.exec_ok(
        "ip",
        &[
            "addr",
            "add",
            &format!("10.148.{}.1/24", 16 + k),
            "dev",
            "frbr",
        ],
    );
    host.exec_ok(
        "ip",
        &[
            "-6",
            "addr",
            "add",
            &format!("fd21:148::{}:1/112", 16 + k),
            "dev",
            "frbr",
            "nodad",
        ],
    );
    host.exec_ok("ip", &["link", "set", "frbr", "up"]);
    let (a4, a6) = (
        format!("10.148.{}.2", 16 + k),
        format!("fd21:148::{}:2", 16 + k),
    );
    let prev = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": sandbox.path().display().to_string()}],
        "ips": [{"interface": 0, "address": format!("{a4}/24")},
                {"interface": 0, "address": format!("{a6}/112")}]});
    (host, sandbox, prev, a4, a6)
}

/// Nothing of container `cid` of network `net` in either family: no
/// `CNI-DN-` chain or entry in the iptables `nat` tables, no rule commented
/// with its ID in nftables' `cni_hostport`.
fn nothing_of(host: &Netns, net: &str, cid: &str) -> Result<(), String> {
    let chain = chain_of(net, cid);
    for tool in ["iptables-save", "ip6tables-save"] {
        let saved = host.exec_ok(tool, &["-t", "nat"]);
        if saved.contains(&chain) || saved.contains(&format!("id: \\\"{cid}\\\"")) {
            return Err(format!("{tool}:\n{saved}"));
        }
    }
    let nft = String::from_utf8_lossy(&host.exec("nft", &["list", "ruleset"]).stdout).into_owned();
    if nft.contains(&format!("comment \"{cid}\"")) {
        return Err(format!("nft:\n{nft}"));
    }
    Ok(())
}

/// With iptables the families are two transactions, IPv4 first: when
/// IPv6's fails, IPv4's chain and entry are undone, and the error is the
/// tool's, in Go's shape.
#[test]
fn failed_ipv6_undoes_ipv4() {
    if skip("failed_ipv6_undoes_ipv4") {
        return;
    }
    let (host, sandbox, prev, _, _) = undo_world(0);
    let maps = json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]);
    let c = pm_conf("frpm", json!({}), maps, Some(&prev));
    let fails = Tools::failing("ip6tables-restore");
    let out = Invocation::new(bin("portmap"), "ADD")
        .attach("frpm1", &sandbox, "eth0")
        .env("PATH", fails.path())
        .in_host(&host)
        .config(&c)
        .run();
    let e = out.err();
    assert_eq!(e["code"], 999, "{e}");
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .starts_with("unable to set up iptables rules for port mappings"),
        "{e}"
    );
    assert!(fails.ran("iptables-restore"), "IPv4 was not written first");
    nothing_of(&host, "frpm", "frpm1").unwrap();
    // The ADD again, with working tools, and DEL.
    let run = |cmd: &str| {
        Invocation::new(bin("portmap"), cmd)
            .attach("frpm1", &sandbox, "eth0")
            .in_host(&host)
            .config(&c)
            .run()
    };
    run("ADD").ok();
    assert!(nothing_of(&host, "frpm", "frpm1").is_err());
    run("DEL").ok();
    nothing_of(&host, "frpm", "frpm1").unwrap();
}

/// The last step of ADD, `route_localnet` on the interface that routes to
/// the container (with `snat`, the default), fails after both families'
/// rules are there when /proc/sys is read-only: with either backend they
/// are undone.
#[test]
fn failed_route_localnet_undoes_the_rules() {
    if skip("failed_route_localnet_undoes_the_rules") {
        return;
    }
    // The plugin behind a wrapper that makes /proc/sys read-only in a
    // mount namespace of its own.
    let dir = TempDir::new("frro");
    let wrapper = dir.path().join("portmap");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec unshare -m --propagation private sh -c 'mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && exec {}'\n",
            bin("portmap").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (k, backend) in [(1u8, "iptables"), (2, "nftables")] {
        let (host, sandbox, prev, _, _) = undo_world(k);
        let maps = json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]);
        let c = pm_conf("frpm", json!({"backend": backend}), maps, Some(&prev));
        let run = |plugin: &std::path::Path, cmd: &str| {
            Invocation::new(plugin, cmd)
                .attach("frpm2", &sandbox, "eth0")
                .in_host(&host)
                .config(&c)
                .run()
        };
        let e = run(&wrapper, "ADD").err();
        assert_eq!(e["code"], 999, "{backend}: {e}");
        assert!(
            e["msg"]
                .as_str()
                .unwrap()
                .starts_with("unable to enable route_localnet"),
            "{backend}: {e}"
        );
        nothing_of(&host, "frpm", "frpm2").unwrap_or_else(|s| panic!("{backend}: {s}"));
        run(&bin("portmap"), "ADD").ok();
        assert!(nothing_of(&host, "frpm", "frpm2").is_err(), "{backend}");
        run(&bin("portmap"), "DEL").ok();
        nothing_of(&host, "frpm", "frpm2").unwrap_or_else(|s| panic!("{backend}: {s}"));
    }
}
