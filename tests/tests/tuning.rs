//! The tuning plugin, exec'd as a runtime does, against a veth end `eth0`
//! in a private container namespace (`tuc…`; its peer stays in there too).
//! Checks the kernel (sysctls, MAC, MTU, promiscuous and all-multicast
//! flags, queue length), the saved-values file byte for byte, DEL's
//! restore, CHECK, GC, bad input leaving nothing changed, and interop
//! with the Go reference (/usr/lib/cni/tuning, v1.1.1, cniVersion 1.0.0)
//! in both directions. Each test has its own data directory; namespaces
//! and directories go on drop, also when a test fails.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::netns_setup::sysctls;
use rcni_tests::tempdir::TempDir;
use rcni_tests::{Invocation, Netns, PluginOutput, bin, go_bin, skip_unless_root, unique};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Sysctls the tests change: one of the interface, one of the namespace.
const IF_SYSCTL: &str = "net/ipv4/conf/eth0/rp_filter";
const NS_SYSCTL: &str = "net/core/somaxconn";

/// A container namespace with `eth0` (a veth whose peer `peer0` stays in
/// the same namespace), and a data directory.
struct Ctr {
    ns: Netns,
    data: TempDir,
    network: String,
}

impl Ctr {
    fn new() -> Ctr {
        let ns = Netns::new("tuc");
        ns.exec_ok(
            "ip",
            &[
                "link", "add", "eth0", "type", "veth", "peer", "name", "peer0",
            ],
        );
        Ctr {
            ns,
            data: TempDir::new("tuning"),
            network: unique("tunet"),
        }
    }

    fn netns(&self) -> String {
        self.ns.path().display().to_string()
    }

    fn prev(&self, version: &str) -> Value {
        json!({
            "cniVersion": version,
            "interfaces": [
                {"name": "veth1234", "mac": "aa:aa:aa:aa:aa:01"},
                {"name": "eth0", "mac": "aa:aa:aa:aa:aa:02", "sandbox": self.netns()},
            ],
            "ips": [{"interface": 1, "address": "10.120.1.2/24", "gateway": "10.120.1.1"}],
        })
    }

    /// A tuning config with `extra` merged in at the top level.
    fn conf(&self, version: &str, extra: Value) -> Value {
        let mut c = json!({
            "cniVersion": version,
            "name": self.network,
            "type": "tuning",
            "dataDir": self.data.path().display().to_string(),
            "prevResult": self.prev(version),
        });
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            c[k] = v;
        }
        c
    }

    fn run_with(&self, plugin: &Path, cmd: &str, cid: &str, conf: &Value) -> PluginOutput {
        Invocation::new(plugin, cmd)
            .attach(cid, &self.ns, "eth0")
            .config(conf)
            .run()
    }

    fn run(&self, cmd: &str, cid: &str, conf: &Value) -> PluginOutput {
        self.run_with(&bin("tuning"), cmd, cid, conf)
    }

    fn state_path(&self, cid: &str) -> PathBuf {
        self.data.join(&format!("{cid}_eth0.json"))
    }

    fn state(&self, cid: &str) -> Option<String> {
        std::fs::read_to_string(self.state_path(cid)).ok()
    }

    /// Everything tuning can change: eth0's attributes and the two sysctls.
    fn kernel(&self) -> Kernel {
        let l = &self.ns.ip_json(&["-d", "link", "show", "eth0"])[0];
        let flags: Vec<String> = l["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect();
        Kernel {
            mac: l["address"].as_str().unwrap().to_string(),
            mtu: l["mtu"].as_u64().unwrap(),
            txqlen: l["txqlen"].as_u64().unwrap(),
            promisc: flags.iter().any(|f| f == "PROMISC"),
            allmulti: flags.iter().any(|f| f == "ALLMULTI"),
            rp_filter: self.ns.sysctl(IF_SYSCTL),
            somaxconn: self.ns.sysctl(NS_SYSCTL),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Kernel {
    mac: String,
    mtu: u64,
    txqlen: u64,
    promisc: bool,
    allmulti: bool,
    rp_filter: String,
    somaxconn: String,
}

/// Every attribute and both sysctls, with the values a test expects.
fn full(mac: &str) -> Value {
    json!({
        "mac": mac,
        "mtu": 1400,
        "promisc": true,
        "allmulti": true,
        "txQLen": 77,
        "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2", "net/core/somaxconn": "333"},
    })
}

fn tuned(mac: &str) -> Kernel {
    Kernel {
        mac: mac.to_string(),
        mtu: 1400,
        txqlen: 77,
        promisc: true,
        allmulti: true,
        rp_filter: "2".into(),
        somaxconn: "333".into(),
    }
}

/// The saved-values file our ADD writes for `full` over `before`.
fn saved_text(before: &Kernel, network: &str) -> String {
    format!(
        "{{\n \"mac\": \"{}\",\n \"promisc\": false,\n \"mtu\": {},\n \"allmulti\": false,\n \"txQLen\": {},\n \"sysctl\": {{\n  \"{NS_SYSCTL}\": \"{}\",\n  \"{IF_SYSCTL}\": \"{}\"\n }},\n \"network\": \"{network}\"\n}}",
        before.mac, before.mtu, before.txqlen, before.somaxconn, before.rp_filter
    )
}

#[test]
fn add_check_del_every_attribute() {
    if skip_unless_root("add_check_del_every_attribute") {
        return;
    }
    for version in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
        let c = Ctr::new();
        let before = c.kernel();
        let conf = c.conf(version, full("C2:11:22:33:44:55"));
        let result = c.run("ADD", "cid1", &conf).ok();
        assert_eq!(c.kernel(), tuned("c2:11:22:33:44:55"), "{version}");
        assert_eq!(
            c.state("cid1").as_deref(),
            Some(saved_text(&before, &c.network).as_str())
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(c.state_path("cid1"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // The result is the prevResult with eth0's MAC (and MTU, where the
        // version has it) updated; the host veth is left alone.
        assert_eq!(result["cniVersion"], version);
        assert_eq!(result["interfaces"][1]["mac"], "c2:11:22:33:44:55");
        assert_eq!(result["interfaces"][0]["mac"], "aa:aa:aa:aa:aa:01");
        assert_eq!(result["ips"][0]["address"], "10.120.1.2/24");
        let mtu = if version == "1.1.0" {
            json!(1400)
        } else {
            Value::Null
        };
        assert_eq!(result["interfaces"][1]["mtu"], mtu);

        if version != "0.3.1" {
            let mut check = conf.clone();
            check["prevResult"] = result.clone();
            c.run("CHECK", "cid1", &check).ok();
            // Each attribute changed behind tuning's back fails CHECK.
            for (change, want) in [
                (
                    vec!["link", "set", "eth0", "mtu", "1500"],
                    "configured MTU of eth0 is 1400, current value is 1500",
                ),
                (
                    vec!["link", "set", "eth0", "promisc", "off"],
                    "configured promisc is true, current value is 0",
                ),
                (
                    vec!["link", "set", "eth0", "allmulticast", "off"],
                    "all-multicast mode of eth0 is true, current value is false",
                ),
                (
                    vec!["link", "set", "eth0", "txqueuelen", "5"],
                    "Transmit Queue Length of eth0 is 77, current value is 5",
                ),
                (
                    vec!["link", "set", "eth0", "address", "02:00:00:00:00:09"],
                    "configured Ethernet of eth0 is C2:11:22:33:44:55, current value is 02:00:00:00:00:09",
                ),
            ] {
                c.ns.exec_ok("ip", &change);
                let e = c.run("CHECK", "cid1", &check).err();
                assert!(
                    e["msg"].as_str().unwrap().contains(want),
                    "{version} {change:?}: {e}"
                );
                c.run("ADD", "cid1", &conf).ok();
                c.run("CHECK", "cid1", &check).ok();
            }
            c.ns.exec_ok("sysctl", &["-qw", "net.core.somaxconn=4"]);
            let e = c.run("CHECK", "cid1", &check).err();
            assert_eq!(
                e["msg"],
                "Error: Tuning configured value of /proc/sys/net/core/somaxconn is 333, current value is 4"
            );
            c.run("ADD", "cid1", &conf).ok();
        }
        // The re-ADDs kept the first ADD's originals.
        assert_eq!(
            c.state("cid1").as_deref(),
            Some(saved_text(&before, &c.network).as_str())
        );
        c.run("DEL", "cid1", &conf).ok();
        assert_eq!(c.kernel(), before, "{version}: DEL restores everything");
        assert_eq!(c.state("cid1"), None);
        c.run("DEL", "cid1", &conf).ok();
        assert_eq!(c.kernel(), before);
    }
}

#[test]
fn mac_sources_and_args_sysctl() {
    if skip_unless_root("mac_sources_and_args_sysctl") {
        return;
    }
    let c = Ctr::new();
    let before = c.kernel();
    let base = c.conf("1.0.0", json!({"mac": "02:00:00:00:00:01"}));
    let run_env = |conf: &Value, cni_args: &str| {
        Invocation::new(bin("tuning"), "ADD")
            .attach("cid2", &c.ns, "eth0")
            .env("CNI_ARGS", cni_args)
            .config(conf)
            .run()
    };
    let mac = |c: &Ctr| c.kernel().mac;
    run_env(&base, "").ok();
    assert_eq!(mac(&c), "02:00:00:00:00:01");
    run_env(
        &base,
        "IgnoreUnknown=1;K8S_POD_NAME=x;MAC=02:00:00:00:00:02",
    )
    .ok();
    assert_eq!(mac(&c), "02:00:00:00:00:02");
    let e = run_env(&base, "K8S_POD_NAME=x").err();
    assert_eq!(e["msg"], r#"ARGS: unknown args ["K8S_POD_NAME=x"]"#);
    let mut rc = base.clone();
    rc["runtimeConfig"] = json!({"mac": "02:00:00:00:00:03"});
    run_env(&rc, "MAC=02:00:00:00:00:02").ok();
    assert_eq!(mac(&c), "02:00:00:00:00:03");
    // args.cni wins over all, and its sysctl map works without a
    // top-level one (the reference panics there).
    rc["args"] =
        json!({"cni": {"mac": "02:00:00:00:00:04", "sysctl": {"net.core.somaxconn": "444"}}});
    let out = run_env(&rc, "MAC=02:00:00:00:00:02").ok();
    assert_eq!(out["interfaces"][1]["mac"], "02:00:00:00:00:04");
    assert_eq!(mac(&c), "02:00:00:00:00:04");
    assert_eq!(c.ns.sysctl(NS_SYSCTL), "444");
    // DEL restores the original MAC and sysctl, whatever the last ADD set.
    c.run("DEL", "cid2", &base).ok();
    assert_eq!(c.kernel(), before);
    assert_eq!(c.state("cid2"), None);
}

#[test]
fn del_when_the_netns_is_gone() {
    if skip_unless_root("del_when_the_netns_is_gone") {
        return;
    }
    let c = Ctr::new();
    let conf = c.conf("1.0.0", full("02:11:22:33:44:55"));
    c.run("ADD", "cid3", &conf).ok();
    assert!(c.state("cid3").is_some());
    let path = c.ns.path();
    rcni_tests::run_ok("ip", &["netns", "del", c.ns.name()]);
    assert!(!path.exists());
    c.run("DEL", "cid3", &conf).ok();
    assert_eq!(c.state("cid3"), None, "the file goes with the netns");
    // An empty CNI_NETNS (containerd after a kill) too.
    std::fs::write(c.state_path("cid4"), "{\n \"mtu\": 1500\n}").unwrap();
    let out = Invocation::new(bin("tuning"), "DEL")
        .env("CNI_CONTAINERID", "cid4")
        .env("CNI_IFNAME", "eth0")
        .env("CNI_NETNS", "")
        .config(&conf)
        .run();
    out.ok();
    assert_eq!(c.state("cid4"), None);
}

#[test]
fn del_edge_cases() {
    if skip_unless_root("del_edge_cases") {
        return;
    }
    let c = Ctr::new();
    let before = c.kernel();
    let conf = c.conf("1.0.0", json!({"mtu": 1300}));
    // Nothing saved: nothing to do, no prevResult needed.
    let mut bare = conf.clone();
    bare.as_object_mut().unwrap().remove("prevResult");
    c.run("DEL", "cid5", &bare).ok();
    // An unparsable file cannot be used by any DEL: it goes.
    std::fs::write(c.state_path("cid5"), "{\"mtu\":").unwrap();
    c.run("DEL", "cid5", &bare).ok();
    assert_eq!(c.state("cid5"), None);
    // The interface is gone: nothing to restore, the file goes.
    c.run("ADD", "cid6", &conf).ok();
    assert_eq!(c.kernel().mtu, 1300);
    c.ns.exec_ok("ip", &["link", "set", "eth0", "name", "eth9"]);
    c.run("DEL", "cid6", &bare).ok();
    assert_eq!(c.state("cid6"), None);
    c.ns.exec_ok("ip", &["link", "set", "eth9", "name", "eth0"]);
    // A config that fails to parse fails DEL (as in the reference).
    let mut bad = bare.clone();
    bad["mtu"] = json!("x");
    c.run("DEL", "cid6", &bad).err();
    c.ns.exec_ok("ip", &["link", "set", "eth0", "mtu", "1500"]);
    assert_eq!(c.kernel(), before);
}

#[test]
fn bad_input_changes_nothing() {
    if skip_unless_root("bad_input_changes_nothing") {
        return;
    }
    let c = Ctr::new();
    let before = c.kernel();
    let ok_sysctl = json!({"net.ipv4.conf.IFNAME.rp_filter": "2"});
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"sysctl": {"kernel.hostname": "x"}}),
            "invalid net sysctl key: \"kernel/hostname\"",
        ),
        (
            json!({"sysctl": {"net/../kernel/hostname": "x"}}),
            "invalid net sysctl key",
        ),
        (
            json!({"sysctl": {"net.ipv4.conf.../../../kernel/hostname": "x"}}),
            "invalid net sysctl key",
        ),
        (
            json!({"sysctl": {"/proc/sys/kernel/hostname": "x"}}),
            "invalid net sysctl key",
        ),
        (
            json!({"sysctl": {"/proc/sys/net/core/somaxconn": "1"}}),
            "invalid net sysctl key",
        ),
        (
            json!({"sysctl": {"/etc/passwd": "x"}}),
            "invalid net sysctl key",
        ),
        (
            json!({"sysctl": {"net.core.somaxconn": "1", "kernel.x": "1"}}),
            "invalid net sysctl key",
        ),
        (
            json!({"sysctl": {"net.ipv4.conf.IFNAME.nonexistent": "1"}}),
            "/proc/sys/net/ipv4/conf/eth0/nonexistent",
        ),
        (
            json!({"sysctl": {"net.core.somaxconn": 5}}),
            "failed to load netconf",
        ),
        (
            json!({"mac": "01:00:5e:00:00:01"}),
            "is a multicast address",
        ),
        (json!({"mac": "00:00:00:00:00:00"}), "all-zero"),
        (json!({"mac": "zz:11:22:33:44:55"}), "invalid MAC address"),
        (json!({"mac": "02:11:22:33:44"}), "invalid MAC address"),
        (
            json!({"runtimeConfig": {"mac": "ff:ff:ff:ff:ff:ff"}}),
            "multicast",
        ),
        (json!({"mtu": "1500"}), "failed to load netconf"),
        (json!({"mtu": -5}), "invalid mtu -5"),
        (json!({"txQLen": -1}), "invalid txQLen"),
        (json!({"promisc": "yes"}), "failed to load netconf"),
        (json!({"allmulti": 1}), "failed to load netconf"),
        // The kernel refuses these after the sysctl was written: the ADD
        // puts it back (and the MAC, MTU it set before).
        (
            json!({"sysctl": ok_sysctl, "mac": "02:00:00:00:00:07", "mtu": 70000}),
            "set mtu 70000 on eth0",
        ),
        (
            json!({"sysctl": ok_sysctl, "promisc": true, "mtu": 20}),
            "set mtu 20 on eth0",
        ),
    ];
    for (extra, want) in cases {
        let conf = c.conf("1.0.0", extra.clone());
        let e = c.run("ADD", "cid7", &conf).err();
        let msg = e["msg"].as_str().unwrap();
        assert!(msg.contains(want), "{extra}: {e}");
        assert_eq!(c.kernel(), before, "{extra} changed the kernel");
        assert_eq!(c.state("cid7"), None, "{extra} left a file");
    }
    // A duplicated key (the raw text, serde would keep the last).
    let text = c
        .conf("1.0.0", json!({"sysctl": {"net.core.somaxconn": "1"}}))
        .to_string()
        .replace(
            r#""net.core.somaxconn":"1""#,
            r#""net.core.somaxconn":"1","net.core.somaxconn":"2""#,
        );
    let e = Invocation::new(bin("tuning"), "ADD")
        .attach("cid7", &c.ns, "eth0")
        .stdin(text)
        .run()
        .err();
    assert_eq!(e["msg"], "duplicated sysctl keys are not allowed");
    // An unknown interface.
    let conf = c.conf(
        "1.0.0",
        json!({"mtu": 1400, "sysctl": {"net.core.somaxconn": "9"}}),
    );
    let e = Invocation::new(bin("tuning"), "ADD")
        .attach("cid7", &c.ns, "nosuch0")
        .config(&conf)
        .run()
        .err();
    assert_eq!(e["msg"], "failed to get \"nosuch0\": Link not found");
    // Without prevResult.
    let mut bare = conf.clone();
    bare.as_object_mut().unwrap().remove("prevResult");
    assert_eq!(
        c.run("ADD", "cid7", &bare).err()["msg"],
        "Required prevResult missing"
    );
    assert_eq!(c.kernel(), before);
    assert!(std::fs::read_dir(c.data.path()).unwrap().next().is_none());
}

#[test]
fn empty_config_is_a_pass_through() {
    if skip_unless_root("empty_config_is_a_pass_through") {
        return;
    }
    let c = Ctr::new();
    let before = c.kernel();
    for version in [
        "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
    ] {
        let mut conf = json!({"cniVersion": version, "name": c.network, "type": "tuning"});
        conf["prevResult"] = if version.starts_with("0.1") || version.starts_with("0.2") {
            json!({"cniVersion": version, "ip4": {"ip": "10.120.2.2/24"}})
        } else {
            c.prev(version)
        };
        let out = c.run("ADD", "cid8", &conf).ok();
        assert_eq!(out["cniVersion"], version);
        if version.starts_with("0.1") || version.starts_with("0.2") {
            assert_eq!(out["ip4"]["ip"], "10.120.2.2/24");
        } else {
            assert_eq!(
                out["interfaces"],
                c.prev(version)["interfaces"],
                "{version}"
            );
        }
        c.run("DEL", "cid8", &conf).ok();
    }
    assert_eq!(c.kernel(), before);
}

#[test]
fn gc_removes_this_networks_stale_files_only() {
    if skip_unless_root("gc_removes_this_networks_stale_files_only") {
        return;
    }
    let c = Ctr::new();
    let conf = c.conf("1.1.0", json!({"mtu": 1400}));
    let mut other = c.conf("1.1.0", json!({"mtu": 1400}));
    other["name"] = json!("tu-other-net");
    c.run("ADD", "keep", &conf).ok();
    c.run("ADD", "stale", &conf).ok();
    c.run("ADD", "othernet", &other).ok();
    // Written by the Go plugin: no network key.
    std::fs::write(c.state_path("gowritten"), "{\n \"mtu\": 1500\n}").unwrap();
    // A killed ADD's temporary file, of this network.
    std::fs::write(
        c.data.join(".stale2_eth0.json.tmp"),
        format!("{{\"mtu\":1500,\"network\":\"{}\"}}", c.network),
    )
    .unwrap();
    std::fs::write(c.data.join("unrelated.txt"), "x").unwrap();
    let mut gc = json!({"cniVersion": "1.1.0", "name": c.network, "type": "tuning",
        "dataDir": c.data.path().display().to_string(),
        "cni.dev/valid-attachments": [{"containerID": "keep", "ifname": "eth0"}]});
    Invocation::new(bin("tuning"), "GC").config(&gc).run().ok();
    let mut left: Vec<String> = std::fs::read_dir(c.data.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "gowritten_eth0.json",
            "keep_eth0.json",
            "othernet_eth0.json",
            "unrelated.txt"
        ]
    );
    // An empty list collects every file of the network.
    gc["cni.dev/valid-attachments"] = json!([]);
    Invocation::new(bin("tuning"), "GC").config(&gc).run().ok();
    assert_eq!(c.state("keep"), None);
    assert!(c.state("othernet").is_some());
    // GC and STATUS need 1.1.0.
    gc["cniVersion"] = json!("1.0.0");
    assert_eq!(
        Invocation::new(bin("tuning"), "GC").config(&gc).run().err()["code"],
        1
    );
    gc["cniVersion"] = json!("1.1.0");
    Invocation::new(bin("tuning"), "STATUS")
        .config(&gc)
        .run()
        .ok();
    // A missing data directory is nothing to collect.
    gc["dataDir"] = json!(c.data.file("nonexistent"));
    Invocation::new(bin("tuning"), "GC").config(&gc).run().ok();
}

/// The allowlist lives at a fixed path: the plugin runs in a private
/// mount namespace with a tmpfs over /etc/cni, so the host's is untouched.
#[test]
fn sysctl_allowlist() {
    if skip_unless_root("sysctl_allowlist") {
        return;
    }
    if !Path::new("/etc/cni").is_dir() {
        let _ = std::fs::create_dir_all("/etc/cni");
    }
    let c = Ctr::new();
    let wrapper = c.data.join("with-allowlist");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec unshare -m sh -c 'mount -t tmpfs tmpfs /etc/cni && mkdir /etc/cni/tuning && printf \"%s\\n\" \"^net\\.core\\.somaxconn$\" \"\" \"  rp_filter \" > /etc/cni/tuning/allowlist.conf && exec {}'\n",
            bin("tuning").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ok = c.conf(
        "1.0.0",
        json!({"dataDir": c.data.file("state"), "sysctl": {"net.core.somaxconn": "123", "net.ipv4.conf.IFNAME.rp_filter": "1"}}),
    );
    c.run_with(&wrapper, "ADD", "cid9", &ok).ok();
    assert_eq!(c.ns.sysctl(NS_SYSCTL), "123");
    c.run_with(&wrapper, "DEL", "cid9", &ok).ok();
    let bad = c.conf("1.0.0", json!({"sysctl": {"net.ipv4.ip_forward": "1"}}));
    // 0 to start from: a new namespace inherits init_net's value.
    sysctls(&c.ns, &["net.ipv4.ip_forward=0"]);
    let e = c.run_with(&wrapper, "ADD", "cid9", &bad).err();
    assert_eq!(
        e["msg"],
        "Sysctl net.ipv4.ip_forward is not allowed. Only the following sysctls are allowed: [^net\\.core\\.somaxconn$ rp_filter]"
    );
    assert_eq!(c.ns.sysctl("net/ipv4/ip_forward"), "0");
    // CHECK does not read the allowlist (as in the reference).
    c.run("ADD", "cid9", &bad).ok();
    c.run_with(&wrapper, "CHECK", "cid9", &bad).ok();
    c.run("DEL", "cid9", &bad).ok();
    assert_eq!(c.ns.sysctl("net/ipv4/ip_forward"), "0");
}

/// ADD with one implementation, DEL with the other (cniVersion 1.0.0, the
/// newest the Go v1.1.1 build speaks): the saved-values file is the same.
#[test]
fn interop_with_go() {
    if skip_unless_root("interop_with_go") {
        return;
    }
    let Some(go) = go_bin("tuning") else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIP interop_with_go: no /usr/lib/cni/tuning"
        );
        return;
    };
    // v1.1.1 has no txQLen; everything else.
    let attrs = json!({"mac": "02:11:22:33:44:55", "mtu": 1400, "promisc": true, "allmulti": true,
                       "sysctl": {"net.core.somaxconn": "333"}});
    // Go ADD, our DEL: everything Go saved is restored, the file goes.
    let c = Ctr::new();
    let before = c.kernel();
    // The link as it was before ADD; the sysctl is not compared (Go never
    // saves it, so its DEL does not restore it).
    let assert_link_restored = || {
        let after = c.kernel();
        assert_eq!(
            Kernel {
                somaxconn: before.somaxconn.clone(),
                ..after
            },
            before
        );
    };
    let reset_somaxconn = || {
        c.ns.exec_ok(
            "sysctl",
            &["-qw", &format!("net.core.somaxconn={}", before.somaxconn)],
        )
    };
    let conf = c.conf("1.0.0", attrs.clone());
    let go_result = c.run_with(&go, "ADD", "cidg", &conf).ok();
    let go_file = c.state("cidg").unwrap();
    let go_kernel = c.kernel();
    assert_eq!(
        go_file,
        format!(
            "{{\n \"mac\": \"{}\",\n \"promisc\": false,\n \"mtu\": {},\n \"allmulti\": false\n}}",
            before.mac, before.mtu
        )
    );
    c.run("CHECK", "cidg", &{
        let mut k = conf.clone();
        k["prevResult"] = go_result.clone();
        k
    })
    .ok();
    c.run("DEL", "cidg", &conf).ok();
    assert_eq!(c.state("cidg"), None);
    assert_link_restored();
    // Ours ADD: the same kernel state and result as Go's; the file has the
    // same keys plus ours; Go's DEL restores the link from it.
    reset_somaxconn();
    let ours_result = c.run("ADD", "cido", &conf).ok();
    assert_eq!(c.kernel(), go_kernel);
    assert_eq!(ours_result["interfaces"], go_result["interfaces"]);
    assert_eq!(ours_result["ips"], go_result["ips"]);
    let ours_file = c.state("cido").unwrap();
    assert!(
        ours_file.starts_with(&go_file[..go_file.len() - 2]),
        "{ours_file}"
    );
    c.run_with(&go, "DEL", "cido", &conf).ok();
    assert_eq!(c.state("cido"), None);
    assert_link_restored();
    // Go's ADD twice overwrites its file with tuned values; ours keeps the
    // originals when it re-ADDs over a Go file.
    reset_somaxconn();
    c.run_with(&go, "ADD", "cidx", &conf).ok();
    c.run("ADD", "cidx", &conf).ok();
    c.run("DEL", "cidx", &conf).ok();
    // (The sysctl's original is the value Go had already written.)
    assert_eq!(c.kernel().somaxconn, "333");
    assert_link_restored();
}
