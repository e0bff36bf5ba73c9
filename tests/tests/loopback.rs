//! The loopback plugin, exec'd as a runtime does, in namespaces these tests
//! create (named `lo…`), and side by side with the Go reference in
//! /usr/lib/cni. Nothing here touches the real host's links: the plugin
//! only acts inside `CNI_NETNS`.

// Everything here is test code, helpers included (for clippy's
// allow-unwrap/expect/panic-in-tests).
#![cfg(test)]

use rcni_tests::{Invocation, Netns, PluginOutput, bin, error_msg, go_bin, skip_unless_root};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const ALL_VERSIONS: [&str; 7] = [
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];
/// Debian's Go build (v1.1.1) stops at 1.0.0.
const GO_VERSIONS: [&str; 6] = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0"];

fn conf(version: &str) -> Value {
    json!({"cniVersion": version, "name": "lo-net", "type": "loopback"})
}

fn invoke(plugin: &Path, command: &str, ns: &Netns, conf: &Value) -> PluginOutput {
    Invocation::new(plugin, command)
        .attach("lo-container-1", ns, "eth0")
        .config(conf)
        .run()
}

fn ours(command: &str, ns: &Netns, conf: &Value) -> PluginOutput {
    invoke(&bin("loopback"), command, ns, conf)
}

/// `ip -j link show lo` flags inside the namespace.
fn lo_flags(ns: &Netns) -> Vec<String> {
    let links = ns.ip_json(&["link", "show", "lo"]);
    links[0]["flags"]
        .as_array()
        .expect("flags")
        .iter()
        .map(|f| f.as_str().unwrap_or_default().to_string())
        .collect()
}

fn lo_is_up(ns: &Netns) -> bool {
    lo_flags(ns).iter().any(|f| f == "UP")
}

/// `(family, local/prefixlen)` of every address on lo, in kernel order.
fn lo_addrs(ns: &Netns) -> Vec<(String, String)> {
    let v = ns.ip_json(&["addr", "show", "lo"]);
    v[0]["addr_info"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| {
                    (
                        i["family"].as_str().unwrap_or_default().to_string(),
                        format!(
                            "{}/{}",
                            i["local"].as_str().unwrap_or_default(),
                            i["prefixlen"]
                        ),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn first_addr(ns: &Netns, family: &str) -> Option<String> {
    lo_addrs(ns)
        .into_iter()
        .find(|(f, _)| f == family)
        .map(|(_, a)| a)
}

/// Checks the result's shape for its version against lo's addresses.
fn check_add_result(version: &str, result: &Value, ns: &Netns) {
    let v4 = first_addr(ns, "inet").expect("lo has 127.0.0.1 once up");
    assert_eq!(v4, "127.0.0.1/8");
    let v6 = first_addr(ns, "inet6");
    assert_eq!(result["cniVersion"], version, "{result}");
    let obj = result.as_object().expect("object");
    match version {
        "0.1.0" | "0.2.0" => {
            let mut want = json!({"cniVersion": version, "ip4": {"ip": v4}, "dns": {}});
            if let Some(v6) = &v6 {
                want["ip6"] = json!({"ip": v6});
            }
            assert_eq!(result, &want);
        }
        _ => {
            let sandbox = ns.path().display().to_string();
            assert_eq!(
                result["interfaces"],
                json!([{"name": "lo", "mac": "00:00:00:00:00:00", "sandbox": sandbox}]),
                "{result}"
            );
            let with_version = matches!(version, "0.3.0" | "0.3.1" | "0.4.0");
            let ip = |addr: &str, fam: &str| {
                let mut i = json!({"interface": 0, "address": addr});
                if with_version {
                    i["version"] = json!(fam);
                }
                i
            };
            let mut ips = vec![ip(&v4, "4")];
            if let Some(v6) = &v6 {
                ips.push(ip(v6, "6"));
            }
            assert_eq!(result["ips"], Value::Array(ips), "{result}");
            assert!(!obj.contains_key("routes"), "{result}");
            for ip in result["ips"].as_array().unwrap() {
                assert!(ip.get("gateway").is_none(), "no gateway: {result}");
            }
            if with_version {
                assert_eq!(
                    result["dns"],
                    json!({}),
                    "0.x prints an empty dns: {result}"
                );
            } else {
                assert!(!obj.contains_key("dns"), "1.x omits an empty dns: {result}");
            }
        }
    }
}

#[test]
fn add_every_version_sets_lo_up() {
    if skip_unless_root("loopback::add_every_version_sets_lo_up") {
        return;
    }
    for version in ALL_VERSIONS {
        let ns = Netns::new("loadd");
        assert!(!lo_is_up(&ns), "a new netns has lo down");
        let out = ours("ADD", &ns, &conf(version));
        let result = out.ok();
        assert!(lo_is_up(&ns), "{version}: lo is up after ADD");
        check_add_result(version, &result, &ns);
        // ADD again is harmless and answers the same.
        assert_eq!(ours("ADD", &ns, &conf(version)).ok(), result, "{version}");
    }
}

#[test]
fn ifname_is_ignored() {
    if skip_unless_root("loopback::ifname_is_ignored") {
        return;
    }
    let ns = Netns::new("loifn");
    let out = Invocation::new(bin("loopback"), "ADD")
        .attach("lo-container-1", &ns, "net7")
        .config(&conf("1.0.0"))
        .run();
    let result = out.ok();
    assert_eq!(result["interfaces"][0]["name"], "lo");
    assert!(lo_is_up(&ns));
    assert_eq!(
        ns.ip_json(&["link"]).as_array().map(Vec::len),
        Some(1),
        "no other link is created"
    );
}

#[test]
fn del_sets_lo_down() {
    if skip_unless_root("loopback::del_sets_lo_down") {
        return;
    }
    for version in ALL_VERSIONS {
        let ns = Netns::new("lodel");
        ours("ADD", &ns, &conf(version)).ok();
        assert!(lo_is_up(&ns));
        let out = ours("DEL", &ns, &conf(version));
        assert_eq!(out.ok(), Value::Null, "{version}: DEL prints nothing");
        assert!(out.stdout.is_empty(), "{out:?}");
        assert!(!lo_is_up(&ns), "{version}: lo is down after DEL");
        // DEL is idempotent.
        assert_eq!(ours("DEL", &ns, &conf(version)).ok(), Value::Null);
    }
}

#[test]
fn del_tolerates_missing_or_empty_netns() {
    if skip_unless_root("loopback::del_tolerates_missing_or_empty_netns") {
        return;
    }
    // A namespace that existed and is gone.
    let ns = Netns::new("logone");
    ours("ADD", &ns, &conf("1.0.0")).ok();
    let gone_path = ns.path();
    let inv = Invocation::new(bin("loopback"), "DEL").attach("lo-container-1", &ns, "eth0");
    drop(ns);
    assert!(!gone_path.exists());
    let out = inv.config(&conf("1.0.0")).run();
    assert_eq!(out.ok(), Value::Null, "{out:?}");
    assert!(out.stdout.is_empty());

    // A path that never existed.
    let out = Invocation::new(bin("loopback"), "DEL")
        .env("CNI_CONTAINERID", "lo-container-1")
        .env("CNI_IFNAME", "eth0")
        .env("CNI_NETNS", "/nonexistent/lo-netns")
        .config(&conf("0.4.0"))
        .run();
    assert_eq!(out.ok(), Value::Null, "{out:?}");

    // No netns at all: empty, and unset.
    for inv in [
        Invocation::new(bin("loopback"), "DEL").env("CNI_NETNS", ""),
        Invocation::new(bin("loopback"), "DEL").unset("CNI_NETNS"),
    ] {
        let out = inv
            .env("CNI_CONTAINERID", "lo-container-1")
            .env("CNI_IFNAME", "eth0")
            .config(&conf("1.1.0"))
            .run();
        assert_eq!(out.ok(), Value::Null, "{out:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn del_of_a_non_netns_path_fails() {
    if skip_unless_root("loopback::del_of_a_non_netns_path_fails") {
        return;
    }
    let file = RegularFile::new();
    let out = Invocation::new(bin("loopback"), "DEL")
        .env("CNI_CONTAINERID", "lo-container-1")
        .env("CNI_IFNAME", "eth0")
        .env("CNI_NETNS", file.path.display().to_string())
        .config(&conf("1.0.0"))
        .run();
    let e = out.err();
    assert_eq!(e["code"], 999);
    assert!(error_msg(&e).starts_with("unknown FS magic on "), "{e}");
}

#[test]
fn check_passes_when_up_and_fails_when_down() {
    if skip_unless_root("loopback::check_passes_when_up_and_fails_when_down") {
        return;
    }
    for version in ["0.4.0", "1.0.0", "1.1.0"] {
        let ns = Netns::new("lochk");
        ours("ADD", &ns, &conf(version)).ok();
        let out = ours("CHECK", &ns, &conf(version));
        assert_eq!(out.ok(), Value::Null, "{version}: {out:?}");
        assert!(out.stdout.is_empty());

        ns.exec_ok("ip", &["link", "set", "lo", "down"]);
        let e = ours("CHECK", &ns, &conf(version)).err();
        assert_eq!(
            (e["code"].as_u64(), e["msg"].as_str()),
            (Some(999), Some("loopback interface is down")),
            "{e}"
        );
    }
    // CHECK before any ADD: a new namespace has lo down.
    let ns = Netns::new("lochk");
    assert_eq!(
        ours("CHECK", &ns, &conf("1.0.0")).err()["msg"],
        "loopback interface is down"
    );
}

#[test]
fn add_with_missing_netns_fails() {
    if skip_unless_root("loopback::add_with_missing_netns_fails") {
        return;
    }
    for (cmd, version) in [("ADD", "1.0.0"), ("ADD", "0.3.1"), ("CHECK", "1.0.0")] {
        let out = Invocation::new(bin("loopback"), cmd)
            .env("CNI_CONTAINERID", "lo-container-1")
            .env("CNI_IFNAME", "eth0")
            .env("CNI_NETNS", "/nonexistent")
            .config(&conf(version))
            .run();
        let e = out.err();
        assert_eq!(e["code"], 999, "{e}");
        assert_eq!(
            e["msg"], r#"failed to Statfs "/nonexistent": no such file or directory"#,
            "{e}"
        );
    }
}

/// A regular file (not a namespace) that removes itself.
struct RegularFile {
    path: PathBuf,
}

impl RegularFile {
    fn new() -> RegularFile {
        let path = std::env::temp_dir().join(rcni_tests::unique("lofile"));
        std::fs::write(&path, b"not a netns").unwrap();
        RegularFile { path }
    }
}

impl Drop for RegularFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn add_with_a_regular_file_as_netns_fails() {
    if skip_unless_root("loopback::add_with_a_regular_file_as_netns_fails") {
        return;
    }
    let file = RegularFile::new();
    let path = file.path.display().to_string();
    let magic = rcni_tests::run_ok("stat", &["-f", "-c", "%t", &path])
        .trim()
        .to_string();
    let out = Invocation::new(bin("loopback"), "ADD")
        .env("CNI_CONTAINERID", "lo-container-1")
        .env("CNI_IFNAME", "eth0")
        .env("CNI_NETNS", &path)
        .config(&conf("1.0.0"))
        .run();
    let e = out.err();
    assert_eq!(e["code"], 999);
    assert_eq!(
        e["msg"],
        format!("unknown FS magic on {path:?}: {magic}"),
        "{e}"
    );
}

#[test]
fn non_loopback_address_on_lo_is_an_error() {
    if skip_unless_root("loopback::non_loopback_address_on_lo_is_an_error") {
        return;
    }
    let ns = Netns::new("loaddr");
    ns.exec_ok("ip", &["addr", "add", "10.99.0.1/32", "dev", "lo"]);
    let e = ours("ADD", &ns, &conf("1.0.0")).err();
    assert_eq!(e["code"], 999);
    assert_eq!(
        e["msg"], r#"loopback interface found with non-loopback address "10.99.0.1""#,
        "{e}"
    );
}

fn prev_result(version: &str) -> Value {
    let mut ip = json!({"interface": 0, "address": "10.1.2.3/24", "gateway": "10.1.2.1"});
    if version.starts_with("0.") {
        ip["version"] = json!("4");
    }
    json!({
        "cniVersion": version,
        "interfaces": [{"name": "eth0", "mac": "0a:58:0a:01:02:03", "sandbox": "/run/netns/somewhere"}],
        "ips": [ip],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}],
        "dns": {"nameservers": ["10.1.2.1"], "search": ["example.org"]}
    })
}

#[test]
fn prev_result_is_passed_through() {
    if skip_unless_root("loopback::prev_result_is_passed_through") {
        return;
    }
    for version in ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
        let ns = Netns::new("loprev");
        let mut c = conf(version);
        c["prevResult"] = prev_result(version);
        let result = ours("ADD", &ns, &c).ok();
        assert_eq!(result, prev_result(version), "{version}");
        assert!(lo_is_up(&ns), "{version}: lo is still set up");
    }
    // A prevResult without a cniVersion takes the config's.
    let ns = Netns::new("loprev");
    let mut c = conf("1.0.0");
    let mut prev = prev_result("1.0.0");
    prev.as_object_mut().unwrap().remove("cniVersion");
    c["prevResult"] = prev;
    assert_eq!(ours("ADD", &ns, &c).ok(), prev_result("1.0.0"));
}

#[test]
fn bad_prev_result_fails_before_touching_lo() {
    if skip_unless_root("loopback::bad_prev_result_fails_before_touching_lo") {
        return;
    }
    let ns = Netns::new("lobadp");
    let mut c = conf("1.0.0");
    c["prevResult"] = prev_result("0.4.0");
    let e = ours("ADD", &ns, &c).err();
    let msg = e["msg"].as_str().unwrap();
    assert!(msg.starts_with("failed to parse prevResult: "), "{e}");
    assert!(msg.contains(r#"unmarshalled CNIVersion is "0.4.0""#), "{e}");
    assert!(!lo_is_up(&ns), "the config is checked before lo is touched");
}

#[test]
fn gc_and_status_succeed_silently() {
    for cmd in ["GC", "STATUS"] {
        let out = Invocation::new(bin("loopback"), cmd)
            .config(&conf("1.1.0"))
            .run();
        assert_eq!(out.ok(), Value::Null, "{cmd}: {out:?}");
        assert!(out.stdout.is_empty());
    }
}

// ---- side by side with the Go reference ----

/// A result with the parts that legitimately differ made equal: the
/// sandbox path (each plugin has its own namespace) and the empty `dns`
/// that Debian's 1.0.0 printer always emits.
fn normalise(mut v: Value) -> Value {
    if let Some(ifaces) = v.get_mut("interfaces").and_then(Value::as_array_mut) {
        for i in ifaces {
            if i.get("sandbox").is_some() {
                i["sandbox"] = json!("<netns>");
            }
        }
    }
    if v.get("dns") == Some(&json!({}))
        && v["cniVersion"]
            .as_str()
            .is_some_and(|s| s.starts_with("1."))
    {
        v.as_object_mut().map(|o| o.remove("dns"));
    }
    v
}

/// The addresses a result reports, from whichever format it is in:
/// `ips[].address` (0.3.0 and later) or `ip4.ip`/`ip6.ip` (0.1.0, 0.2.0).
fn addresses(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v["ips"]
        .as_array()
        .map(|ips| {
            ips.iter()
                .filter_map(|i| i["address"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    for k in ["ip4", "ip6"] {
        if let Some(ip) = v[k]["ip"].as_str() {
            out.push(ip.to_string());
        }
    }
    out
}

/// The Go plugin fills a 1.0.0 result struct but labels it with the
/// config's version, and the Go library's same-version shortcut then
/// prints it unconverted: for a 0.x config it answers a 1.0.0-shaped
/// result (no `ips[].version`; for 0.1.0/0.2.0 no `ip4`/`ip6`). We print
/// the config version's real format instead, so for 0.x the comparison is
/// on content: the same addresses, and (0.3.0+) the same interfaces and
/// ips with their interface index.
fn compare_add_results(version: &str, ours: Value, go: Value) {
    assert_eq!(
        addresses(&ours),
        addresses(&go),
        "{version}: addresses differ: {ours} / {go}"
    );
    assert_eq!(ours["cniVersion"], go["cniVersion"], "{version}");
    match version {
        "0.1.0" | "0.2.0" => {}
        "0.3.0" | "0.3.1" | "0.4.0" => {
            let mut ours = normalise(ours);
            if let Some(ips) = ours["ips"].as_array_mut() {
                for ip in ips {
                    ip.as_object_mut().map(|o| o.remove("version"));
                }
            }
            assert_eq!(
                ours,
                normalise(go),
                "{version}: ADD results differ (ignoring ips[].version)"
            );
        }
        _ => assert_eq!(
            normalise(ours),
            normalise(go),
            "{version}: ADD results differ"
        ),
    }
}

fn go_loopback(test: &str) -> Option<PathBuf> {
    let p = go_bin("loopback");
    if p.is_none() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIP {test}: the Go reference /usr/lib/cni/loopback is not installed"
        );
    }
    p
}

#[test]
fn same_as_go_reference() {
    if skip_unless_root("loopback::same_as_go_reference") {
        return;
    }
    let Some(go) = go_loopback("loopback::same_as_go_reference") else {
        return;
    };
    for version in GO_VERSIONS {
        let (ns_ours, ns_go) = (Netns::new("locmp"), Netns::new("locmp"));
        let a = ours("ADD", &ns_ours, &conf(version));
        let b = invoke(&go, "ADD", &ns_go, &conf(version));
        assert_eq!((a.code, b.code), (0, 0), "{version}: {a:?} / {b:?}");
        compare_add_results(version, a.json(), b.json());
        assert_eq!(
            lo_flags(&ns_ours),
            lo_flags(&ns_go),
            "{version}: lo flags after ADD"
        );
        assert_eq!(
            lo_addrs(&ns_ours),
            lo_addrs(&ns_go),
            "{version}: lo addresses after ADD"
        );

        if version >= "0.4.0" {
            let a = ours("CHECK", &ns_ours, &conf(version));
            let b = invoke(&go, "CHECK", &ns_go, &conf(version));
            assert_eq!(
                (a.code, a.stdout.as_str()),
                (b.code, b.stdout.as_str()),
                "{version}: CHECK"
            );
        }

        let a = ours("DEL", &ns_ours, &conf(version));
        let b = invoke(&go, "DEL", &ns_go, &conf(version));
        assert_eq!(
            (a.code, a.stdout.as_str()),
            (b.code, b.stdout.as_str()),
            "{version}: DEL"
        );
        assert_eq!(
            lo_flags(&ns_ours),
            lo_flags(&ns_go),
            "{version}: lo flags after DEL"
        );

        if version >= "0.4.0" {
            let a = ours("CHECK", &ns_ours, &conf(version)).err();
            let b = invoke(&go, "CHECK", &ns_go, &conf(version)).err();
            assert_eq!(
                (&a["code"], &a["msg"]),
                (&b["code"], &b["msg"]),
                "{version}: CHECK when down"
            );
        }
    }
}

#[test]
fn same_errors_as_go_reference() {
    if skip_unless_root("loopback::same_errors_as_go_reference") {
        return;
    }
    let Some(go) = go_loopback("loopback::same_errors_as_go_reference") else {
        return;
    };
    let file = RegularFile::new();
    let gone = Netns::new("logone").path();
    // `gone` was dropped at the end of the statement: the path is free.
    for netns in [
        "/nonexistent".to_string(),
        file.path.display().to_string(),
        gone.display().to_string(),
    ] {
        for cmd in ["ADD", "DEL", "CHECK"] {
            let run = |plugin: &Path| {
                Invocation::new(plugin, cmd)
                    .env("CNI_CONTAINERID", "lo-container-1")
                    .env("CNI_IFNAME", "eth0")
                    .env("CNI_NETNS", &netns)
                    .config(&conf("1.0.0"))
                    .run()
            };
            let (a, b) = (run(&bin("loopback")), run(&go));
            assert_eq!(a.code, b.code, "{cmd} {netns}: {a:?} / {b:?}");
            if b.code == 0 {
                assert_eq!(a.stdout, b.stdout, "{cmd} {netns}");
            } else {
                let (a, b) = (a.json(), b.json());
                assert_eq!(
                    (&a["code"], &a["msg"]),
                    (&b["code"], &b["msg"]),
                    "{cmd} {netns}"
                );
            }
        }
    }

    // A non-loopback address on lo.
    let (ns_ours, ns_go) = (Netns::new("locmp"), Netns::new("locmp"));
    for ns in [&ns_ours, &ns_go] {
        ns.exec_ok("ip", &["addr", "add", "10.99.0.1/32", "dev", "lo"]);
    }
    let a = ours("ADD", &ns_ours, &conf("1.0.0")).err();
    let b = invoke(&go, "ADD", &ns_go, &conf("1.0.0")).err();
    assert_eq!((&a["code"], &a["msg"]), (&b["code"], &b["msg"]));
}

#[test]
fn same_prev_result_passthrough_as_go_reference() {
    if skip_unless_root("loopback::same_prev_result_passthrough_as_go_reference") {
        return;
    }
    let Some(go) = go_loopback("loopback::same_prev_result_passthrough_as_go_reference") else {
        return;
    };
    for version in ["0.3.1", "0.4.0", "1.0.0"] {
        let (ns_ours, ns_go) = (Netns::new("locmp"), Netns::new("locmp"));
        let mut c = conf(version);
        c["prevResult"] = prev_result(version);
        let a = ours("ADD", &ns_ours, &c).ok();
        let b = invoke(&go, "ADD", &ns_go, &c).ok();
        assert_eq!(normalise(a), normalise(b), "{version}");
        assert_eq!(lo_flags(&ns_ours), lo_flags(&ns_go), "{version}");
    }
}
