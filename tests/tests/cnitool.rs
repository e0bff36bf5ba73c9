//! cnitool, run as a user runs it: `ip netns exec <host> cnitool add|check|
//! del|gc|status <net> [<netns>]`, inside a private "host" namespace
//! (`cth…`) with containers in `ctc…` namespaces, a temporary NETCONFPATH,
//! result cache (`CNITOOL_CACHE_DIR`) and host-local `dataDir`, so the real
//! host's links, firewall and `/var/lib/cni` are never touched. Subnets are
//! 10.70.N.0/24. Checks the result, the kernel (links, addresses, rules)
//! and the files (cache records, reservations) after every step.

#![cfg(test)]

use rcni_tests::tempdir::TempDir;
use rcni_tests::{
    FIREWALL_TOOLS, Netns, PluginOutput, bin, bin_dir, skip_unless, skip_unless_root, unique,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One test's world: host namespace, config dir, cache dir, data dir.
struct World {
    host: Netns,
    dir: TempDir,
    net: String,
}

impl World {
    fn new() -> World {
        let host = Netns::new("cth");
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        let dir = TempDir::new("cnitool");
        for d in ["net.d", "cache", "data"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        World {
            host,
            dir,
            net: format!("ct-{}", unique("n")),
        }
    }

    fn net_dir(&self) -> PathBuf {
        self.dir.join("net.d")
    }

    fn cache_dir(&self) -> PathBuf {
        self.dir.join("cache")
    }

    fn data_dir(&self) -> String {
        self.dir.file("data")
    }

    /// Writes a config file into NETCONFPATH.
    fn write_conf(&self, file: &str, conf: &Value) {
        std::fs::write(self.net_dir().join(file), conf.to_string()).unwrap();
    }

    /// Runs cnitool in the host namespace, from `cwd`, with only our
    /// variables (and PATH) in its environment.
    fn cnitool_in(&self, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> PluginOutput {
        let out = Command::new("ip")
            .args(["netns", "exec", self.host.name()])
            .arg(bin("cnitool"))
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("NETCONFPATH", self.net_dir())
            .env("CNI_PATH", bin_dir())
            .env("CNITOOL_CACHE_DIR", self.cache_dir())
            .envs(env.iter().copied())
            .output()
            .expect("run cnitool");
        PluginOutput::from(out)
    }

    fn cnitool(&self, args: &[&str], env: &[(&str, &str)]) -> PluginOutput {
        self.cnitool_in(Path::new("/"), args, env)
    }

    /// The cache records: file name -> record.
    fn cached(&self) -> Vec<(String, Value)> {
        let mut out: Vec<(String, Value)> = std::fs::read_dir(self.cache_dir().join("results"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| {
                        let name = e.file_name().into_string().unwrap();
                        let v = serde_json::from_slice(&std::fs::read(e.path()).unwrap())
                            .unwrap_or_else(|e| panic!("cache record {name}: {e}"));
                        (name, v)
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The cache record of one attachment, if any.
    fn record(&self, cid: &str, ifname: &str) -> Option<Value> {
        let name = format!("{}-{cid}-{ifname}", self.net);
        self.cached()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }

    /// host-local reservations: address -> "cid\r\nifname".
    fn reservations(&self) -> Vec<(String, String)> {
        rcni_tests::host_local_util::reservations(&self.dir.join("data").join(&self.net))
            .into_iter()
            .collect()
    }

    /// Lines of the host's `iptables-save -t nat` that mention `needle`.
    fn nat_rules(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.host.exec("iptables-save", &["-t", "nat"]).stdout)
            .lines()
            .filter(|l| l.contains(needle) && !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    }
}

/// Link names of a namespace.
fn links(ns: &Netns) -> BTreeSet<String> {
    ns.link_names().into_iter().collect()
}

/// The master of a link, if any.
fn master(ns: &Netns, dev: &str) -> Option<String> {
    ns.ip_json(&["link", "show", "dev", dev])[0]["master"]
        .as_str()
        .map(str::to_string)
}

/// The host-side interface of a result: the one without a sandbox that
/// is not `skip` (the bridge).
fn host_veth(result: &Value, skip: &str) -> String {
    result["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["sandbox"].is_null() && i["name"] != skip)
        .and_then(|i| i["name"].as_str())
        .unwrap_or_else(|| panic!("no host veth in {result}"))
        .to_string()
}

/// The container ID cnitool derives from a netns path, as the cache
/// record of that attachment tells; checks its Go-compatible shape.
fn cid_of(w: &World, netns: &Netns, ifname: &str) -> String {
    let path = netns.path().display().to_string();
    let (_, rec) = w
        .cached()
        .into_iter()
        .find(|(_, v)| v["netns"] == path.as_str() && v["ifName"] == ifname)
        .unwrap_or_else(|| panic!("no cache record for {path} {ifname}"));
    let cid = rec["containerId"].as_str().unwrap().to_string();
    let hex = cid.strip_prefix("cnitool-").unwrap_or_default();
    assert!(
        hex.len() == 20
            && hex
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_uppercase()),
        "container ID {cid:?} is not cnitool-<20 hex>"
    );
    cid
}

/// Polls `f` for up to 5 s (netns teardown is asynchronous in the kernel).
fn eventually(f: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !f() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    true
}

fn ports(host_port: u16) -> String {
    json!({"portMappings": [{"hostPort": host_port, "containerPort": 80, "protocol": "tcp"}]})
        .to_string()
}

#[test]
fn bridge_host_local_portmap_add_check_del_gc_status() {
    if skip_unless(
        "bridge_host_local_portmap_add_check_del_gc_status",
        FIREWALL_TOOLS,
    ) {
        return;
    }
    let w = World::new();
    let br = unique("ctbr");
    w.write_conf(
        "10-bridge.conflist",
        &json!({
            "cniVersion": "1.1.0",
            "name": w.net,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": br,
                    "isGateway": true,
                    "ipMasq": true,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": w.data_dir(),
                        "ranges": [[{"subnet": "10.70.1.0/24"}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
            ],
        }),
    );
    // A decoy: cnitool picks the network by name.
    w.write_conf(
        "05-other.conf",
        &json!({"cniVersion": "1.1.0", "name": "ct-other", "type": "rcni-absent"}),
    );
    let c1 = Netns::new("ctc");
    let c2 = Netns::new("ctc");
    let net = w.net.as_str();
    let p1 = c1.path().display().to_string();
    let p2 = c2.path().display().to_string();

    // ADD c1 with port mappings and CNI_ARGS.
    let cap = ports(18081);
    let args = "IgnoreUnknown=1;K8S_POD_NAME=p1";
    let r1 = w
        .cnitool(
            &["add", net, &p1],
            &[("CAP_ARGS", &cap), ("CNI_ARGS", args)],
        )
        .ok();
    assert_eq!(r1["cniVersion"], "1.1.0");
    assert_eq!(r1["ips"][0]["address"], "10.70.1.2/24", "{r1}");
    assert_eq!(r1["ips"][0]["gateway"], "10.70.1.1");
    let eth0 = r1["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "eth0")
        .unwrap_or_else(|| panic!("no eth0 in {r1}"));
    assert_eq!(eth0["sandbox"], p1.as_str());
    let veth1 = host_veth(&r1, &br);
    let cid1 = cid_of(&w, &c1, "eth0");
    // Kernel: bridge with the gateway, veth on it, address in the container.
    assert!(links(&w.host).contains(&veth1));
    assert_eq!(master(&w.host, &veth1).as_deref(), Some(br.as_str()));
    assert_eq!(w.host.addrs(&br), BTreeSet::from(["10.70.1.1/24".into()]));
    assert_eq!(c1.addrs("eth0"), BTreeSet::from(["10.70.1.2/24".into()]));
    // Files: the reservation and libcni's cache record.
    assert_eq!(
        w.reservations(),
        vec![("10.70.1.2".into(), format!("{cid1}\r\neth0"))]
    );
    let rec = w.record(&cid1, "eth0").unwrap();
    assert_eq!(rec["kind"], "cniCacheV1");
    assert_eq!(rec["networkName"], net);
    assert_eq!(
        rec["cniArgs"],
        json!([["IgnoreUnknown", "1"], ["K8S_POD_NAME", "p1"]])
    );
    assert_eq!(rec["capabilityArgs"]["portMappings"][0]["hostPort"], 18081);
    assert_eq!(rec["result"]["ips"][0]["address"], "10.70.1.2/24");
    // portmap's DNAT for the container, masquerade by bridge.
    let dnat = w.nat_rules("--to-destination 10.70.1.2:80");
    assert_eq!(dnat.len(), 1, "{dnat:?}");
    assert!(w.nat_rules(&format!("id: \\\"{cid1}\\\"")).len() >= 3);

    // CHECK and STATUS.
    w.cnitool(&["check", net, &p1], &[]).ok();
    w.cnitool(&["status", net], &[]).ok();
    w.cnitool(&["status", net, &p1], &[]).ok();

    // ADD c2 on another interface name (the -i flag).
    let r2 = w.cnitool(&["add", net, &p2, "-i", "net1"], &[]).ok();
    assert_eq!(r2["ips"][0]["address"], "10.70.1.3/24", "{r2}");
    let veth2 = host_veth(&r2, &br);
    let cid2 = cid_of(&w, &c2, "net1");
    assert_ne!(cid1, cid2);
    assert_eq!(c2.addrs("net1"), BTreeSet::from(["10.70.1.3/24".into()]));
    w.cnitool(&["check", net, &p2], &[("CNI_IFNAME", "net1")])
        .ok();

    // DEL c1: veth, address, reservation, record and rules go; c2 stays.
    w.cnitool(&["del", net, &p1], &[("CAP_ARGS", &cap)]).ok();
    assert!(!links(&w.host).contains(&veth1));
    assert!(!links(&c1).contains("eth0"));
    assert!(w.record(&cid1, "eth0").is_none());
    assert!(w.nat_rules(&format!("id: \\\"{cid1}\\\"")).is_empty());
    assert!(w.nat_rules("--to-destination 10.70.1.2:80").is_empty());
    assert_eq!(
        w.reservations(),
        vec![("10.70.1.3".into(), format!("{cid2}\r\nnet1"))]
    );
    // DEL again is fine; CHECK of a deleted attachment fails (code 3).
    w.cnitool(&["del", net, &p1], &[]).ok();
    let e = w.cnitool(&["check", net, &p1], &[]).err();
    assert_eq!(e["code"], 3, "{e}");

    // c1 again, then the runtime "forgets" it: no DEL is ever sent. GC
    // with c2 valid deletes c1 from its cache record; c2 stays.
    let r1 = w
        .cnitool(
            &["add", net, &p1],
            &[("CAP_ARGS", &cap), ("CNI_ARGS", args)],
        )
        .ok();
    let ip1 = r1["ips"][0]["address"].as_str().unwrap().to_string();
    let ip1 = ip1.split('/').next().unwrap().to_string();
    let veth1 = host_veth(&r1, &br);
    assert_eq!(w.nat_rules(&format!("--to-destination {ip1}:80")).len(), 1);
    let valid = json!([{"containerID": cid2, "ifname": "net1"}]).to_string();
    w.cnitool(&["gc", net], &[("CNITOOL_VALID_ATTACHMENTS", &valid)])
        .ok();
    assert!(!links(&w.host).contains(&veth1), "GC left {veth1}");
    assert!(!links(&c1).contains("eth0"));
    assert!(w.record(&cid1, "eth0").is_none());
    assert!(
        w.nat_rules(&format!("--to-destination {ip1}:80"))
            .is_empty()
    );
    assert!(w.nat_rules(&format!("id: \\\"{cid1}\\\"")).is_empty());
    assert_eq!(
        w.reservations(),
        vec![("10.70.1.3".into(), format!("{cid2}\r\nnet1"))]
    );
    assert!(links(&w.host).contains(&veth2));
    assert!(w.record(&cid2, "net1").is_some());
    w.cnitool(&["check", net, &p2, "-i", "net1"], &[]).ok();

    // GC as the Go cnitool does it (no valid list): everything goes.
    w.cnitool(&["gc", net, &p2], &[]).ok();
    assert!(!links(&w.host).contains(&veth2));
    assert!(!links(&c2).contains("net1"));
    assert!(w.cached().is_empty(), "{:?}", w.cached());
    assert!(w.reservations().is_empty());
    assert!(w.nat_rules(&format!("id: \\\"{cid2}\\\"")).is_empty());

    // A leak without a cache record (the record was lost): only the
    // plugins' own GC can find it. The reservation and rules go; the
    // veth (which only DEL knows about) is removed by a DEL without cache.
    let r1 = w.cnitool(&["add", net, &p1], &[("CAP_ARGS", &cap)]).ok();
    let ip1 = r1["ips"][0]["address"].as_str().unwrap().to_string();
    let ip1 = ip1.split('/').next().unwrap().to_string();
    for (name, _) in w.cached() {
        std::fs::remove_file(w.cache_dir().join("results").join(name)).unwrap();
    }
    assert_eq!(w.reservations().len(), 1);
    w.cnitool(&["gc", net], &[]).ok();
    assert!(w.reservations().is_empty());
    assert!(
        w.nat_rules(&format!("--to-destination {ip1}:80"))
            .is_empty()
    );
    assert!(w.nat_rules(&format!("id: \\\"{cid1}\\\"")).is_empty());
    w.cnitool(&["del", net, &p1], &[]).ok();
    assert!(!links(&c1).contains("eth0"));
    assert!(
        !links(&w.host).iter().any(|l| l.starts_with("veth")),
        "{:?}",
        links(&w.host)
    );
}

#[test]
fn ptp_host_local_conf_add_check_del_gc_status() {
    if skip_unless(
        "ptp_host_local_conf_add_check_del_gc_status",
        FIREWALL_TOOLS,
    ) {
        return;
    }
    let w = World::new();
    // A single-plugin .conf, and a conflist of another name before it.
    w.write_conf(
        "10-ptp.conf",
        &json!({
            "cniVersion": "1.1.0",
            "name": w.net,
            "type": "ptp",
            "ipMasq": true,
            "ipam": {
                "type": "host-local",
                "dataDir": w.data_dir(),
                "ranges": [[{"subnet": "10.70.2.0/24"}]],
            },
        }),
    );
    w.write_conf(
        "01-other.conflist",
        &json!({"cniVersion": "1.1.0", "name": "ct-other", "plugins": [{"type": "rcni-absent"}]}),
    );
    let c = Netns::new("ctc");
    let net = w.net.as_str();
    let p = c.path().display().to_string();

    let r = w.cnitool(&["add", net, &p], &[]).ok();
    assert_eq!(r["ips"][0]["address"], "10.70.2.2/24", "{r}");
    let veth = host_veth(&r, "");
    let cid = cid_of(&w, &c, "eth0");
    assert_eq!(w.host.addrs(&veth), BTreeSet::from(["10.70.2.1/32".into()]));
    assert_eq!(c.addrs("eth0"), BTreeSet::from(["10.70.2.2/24".into()]));
    assert_eq!(
        w.reservations(),
        vec![("10.70.2.2".into(), format!("{cid}\r\neth0"))]
    );
    assert!(!w.nat_rules(&format!("id: \\\"{cid}\\\"")).is_empty());

    // A relative netns path names the same container (Go's filepath.Abs).
    let name = c.name().to_string();
    w.cnitool_in(Path::new("/run/netns"), &["check", net, &name], &[])
        .ok();
    w.cnitool_in(
        Path::new("/run"),
        &["check", net, &format!("./x/../netns/{name}")],
        &[],
    )
    .ok();

    // A second attachment, in another container, named by CNI_IFNAME.
    let c2 = Netns::new("ctc");
    let p2 = c2.path().display().to_string();
    let r2 = w
        .cnitool(&["add", net, &p2], &[("CNI_IFNAME", "net1")])
        .ok();
    assert_eq!(r2["ips"][0]["address"], "10.70.2.3/24", "{r2}");
    let veth2 = host_veth(&r2, "");
    let cid2 = cid_of(&w, &c2, "net1");
    assert_eq!(c2.addrs("net1"), BTreeSet::from(["10.70.2.3/24".into()]));
    w.cnitool(&["check", net, &p2, "--ifname", "net1"], &[])
        .ok();
    w.cnitool(&["status", net], &[]).ok();
    assert_eq!(w.cached().len(), 2);

    // The container is gone before its DEL (the kernel removed the veth
    // pair with its netns): DEL by CNI_CONTAINERID, without a netns path.
    drop(c2);
    assert!(
        eventually(|| !links(&w.host).contains(&veth2)),
        "{veth2} outlived its peer's netns"
    );
    w.cnitool(
        &["del", net],
        &[("CNI_CONTAINERID", &cid2), ("CNI_IFNAME", "net1")],
    )
    .ok();
    assert_eq!(
        w.reservations(),
        vec![("10.70.2.2".into(), format!("{cid}\r\neth0"))]
    );
    assert!(w.record(&cid2, "net1").is_none());
    assert!(w.nat_rules(&format!("id: \\\"{cid2}\\\"")).is_empty());

    // eth0 is never deleted: GC releases it, veth and all.
    w.cnitool(&["gc", net], &[]).ok();
    assert!(!links(&c).contains("eth0"));
    assert!(!links(&w.host).contains(&veth));
    assert!(w.reservations().is_empty());
    assert!(w.cached().is_empty());
    assert!(w.nat_rules(&format!("id: \\\"{cid}\\\"")).is_empty());
}

#[test]
fn errors_are_cni_error_json() {
    if skip_unless_root("errors_are_cni_error_json") {
        return;
    }
    let w = World::new();
    let c = Netns::new("ctc");
    let p = c.path().display().to_string();
    w.write_conf(
        "10-bad.conflist",
        &json!({
            "cniVersion": "1.0.0",
            "name": w.net,
            "plugins": [
                {"type": "ptp", "mtu": "big", "ipam": {"type": "host-local", "dataDir": w.data_dir(), "subnet": "10.70.3.0/24"}},
            ],
        }),
    );
    w.write_conf(
        "20-missing.conflist",
        &json!({"cniVersion": "1.0.0", "name": "ct-missing", "plugins": [{"type": "rcni-absent"}]}),
    );
    // A plugin's own error, named.
    let e = w.cnitool(&["add", &w.net, &p], &[]).err();
    assert_eq!(e["cniVersion"], "1.0.0");
    let msg = e["msg"].as_str().unwrap();
    assert!(msg.starts_with("plugin type=\"ptp\" failed (add): "), "{e}");
    assert!(w.cached().is_empty());
    assert!(!links(&c).contains("eth0"));
    // A missing plugin, named.
    let e = w.cnitool(&["add", "ct-missing", &p], &[]).err();
    let msg = e["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("plugin type=\"rcni-absent\" failed (add): failed to find plugin"),
        "{e}"
    );
    // Unknown network, bad CAP_ARGS / CNI_ARGS, bad usage.
    let e = w.cnitool(&["add", "ct-nonesuch", &p], &[]).err();
    assert_eq!(e["code"], 7, "{e}");
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("no net configuration with name \"ct-nonesuch\"")
    );
    let e = w
        .cnitool(&["add", &w.net, &p], &[("CAP_ARGS", "{nope")])
        .err();
    assert_eq!(e["code"], 6, "{e}");
    let e = w.cnitool(&["add", &w.net, &p], &[("CNI_ARGS", "A")]).err();
    assert_eq!(e["msg"], "invalid CNI_ARGS pair \"A\"", "{e}");
    let e = w.cnitool(&["frob", &w.net, &p], &[]).err();
    assert_eq!(e["code"], 4, "{e}");
    let e = w.cnitool(&["add", &w.net], &[]).err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("netns path is required"),
        "{e}"
    );
    let help = w.cnitool(&["--help"], &[]);
    assert_eq!(help.code, 0);
    assert!(
        help.stdout
            .contains("cnitool add    <network-name> <netns-path>")
    );
    // STATUS below 1.1.0 succeeds without asking the plugins (libcni).
    w.cnitool(&["status", "ct-missing"], &[]).ok();
}
