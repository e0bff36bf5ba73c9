//! cni-runtime driving chains of noop plugins: what each plugin is handed
//! (name, cniVersion, prevResult, runtimeConfig, CNI_* variables), the
//! order of calls, the result cache, and error propagation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cni_runtime::{CniConfig, GcAttachment, NetworkConfigList, RuntimeConf};
use rcni_tests::tempdir::TempDir;
use serde_json::{Value, json};

const RESULT_1: &str = r#"{
    "cniVersion": "1.0.0",
    "interfaces": [{"name": "eth0", "mac": "00:11:22:33:44:55", "sandbox": "/var/run/netns/x"}],
    "ips": [{"address": "10.1.2.15/24", "gateway": "10.1.2.1", "interface": 0}],
    "routes": [{"dst": "0.0.0.0/0"}]
}"#;

/// A network of noop plugins, each with its own debug file, sharing one
/// command log, with the result cache in the temp dir.
struct Net {
    dir: TempDir,
    list: NetworkConfigList,
    cni: CniConfig,
    debug: Vec<String>,
    log: String,
}

impl Net {
    /// `plugins[i]` is merged into plugin i's config; `reports[i]` is its debug file.
    fn new(
        tag: &str,
        version: &str,
        extra: Value,
        plugins: Vec<Value>,
        reports: Vec<Value>,
    ) -> Net {
        let dir = TempDir::new(tag);
        let log = dir.file("cmdlog.json");
        std::fs::write(&log, "[]").unwrap();
        let mut debug = Vec::new();
        let mut confs = Vec::new();
        for (i, (mut p, report)) in plugins.into_iter().zip(reports).enumerate() {
            let path = dir.file(&format!("debug{i}.json"));
            std::fs::write(&path, report.to_string()).unwrap();
            let obj = p.as_object_mut().unwrap();
            obj.insert("type".into(), json!("noop"));
            obj.insert("debugFile".into(), json!(path));
            obj.insert("commandLog".into(), json!(log));
            confs.push(p);
            debug.push(path);
        }
        let mut list =
            json!({"cniVersion": version, "name": format!("net-{tag}"), "plugins": confs});
        for (k, v) in extra.as_object().unwrap() {
            list[k] = v.clone();
        }
        let list = NetworkConfigList::from_bytes(list.to_string().as_bytes()).unwrap();
        let cni = CniConfig::new(vec![rcni_tests::bin_dir()]).with_cache_dir(dir.join("cache"));
        Net {
            dir,
            list,
            cni,
            debug,
            log,
        }
    }

    fn debug(&self, i: usize) -> Value {
        serde_json::from_str(&std::fs::read_to_string(&self.debug[i]).unwrap()).unwrap()
    }

    /// The config plugin `i` got on stdin in its last call.
    fn stdin(&self, i: usize) -> Value {
        let d = self.debug(i);
        decode_stdin(&d["CmdArgs"])
    }

    /// `(command, plugin index)` of every call so far.
    fn calls(&self) -> Vec<(String, usize)> {
        let entries: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&self.log).unwrap()).unwrap();
        entries
            .iter()
            .map(|e| {
                let stdin = decode_stdin(&e["CmdArgs"]);
                let i = self
                    .debug
                    .iter()
                    .position(|d| stdin["debugFile"] == *d)
                    .unwrap();
                (e["Command"].as_str().unwrap().to_string(), i)
            })
            .collect()
    }

    fn cache_file(&self, rt: &RuntimeConf) -> std::path::PathBuf {
        self.dir.join("cache").join("results").join(format!(
            "{}-{}-{}",
            self.list.name, rt.container_id, rt.ifname
        ))
    }
}

fn decode_stdin(cmd_args: &Value) -> Value {
    let bytes = rcni_tests::base64_decode(cmd_args["StdinData"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn rt(cid: &str) -> RuntimeConf {
    RuntimeConf {
        container_id: cid.into(),
        netns: "/some/netns/path".into(),
        ifname: "eth0".into(),
        ..Default::default()
    }
}

fn calls(list: &[(&str, usize)]) -> Vec<(String, usize)> {
    list.iter().map(|(c, i)| (c.to_string(), *i)).collect()
}

/// What the passing-through plugin has in its own config, for the calls
/// that get no `prevResult` from the runtime (noop fails PASSTHROUGH
/// without one; libcni's tests configure one the same way).
fn static_prev() -> Value {
    json!({"ips": [{"address": "10.9.9.9/24"}]})
}

/// Two noops: the first reports a result, the second passes it through.
fn chain(tag: &str, version: &str, extra: Value) -> Net {
    let result: Value = serde_json::from_str(RESULT_1).unwrap();
    let mut first = result.clone();
    first["cniVersion"] = json!(version);
    Net::new(
        tag,
        version,
        extra,
        vec![json!({}), json!({"prevResult": static_prev()})],
        vec![
            json!({"ReportResult": first.to_string()}),
            json!({"ReportResult": "PASSTHROUGH"}),
        ],
    )
}

#[test]
fn add_chains_prev_results_and_caches_the_last() {
    let net = chain("rtadd", "1.0.0", json!({}));
    let rt = rt("c1");
    let result = net.cni.add_network_list(&net.list, &rt).unwrap();
    let want: Value = serde_json::from_str(RESULT_1).unwrap();
    let got: Value = serde_json::from_str(&result.to_json("1.0.0").unwrap()).unwrap();
    assert_eq!(got, want);

    // Plugin 0: name and version injected, no prevResult; plugin 1: plugin 0's result.
    let s0 = net.stdin(0);
    assert_eq!(
        (s0["name"].as_str(), s0["cniVersion"].as_str()),
        (Some("net-rtadd"), Some("1.0.0"))
    );
    assert!(s0.get("prevResult").is_none(), "{s0}");
    let s1 = net.stdin(1);
    assert_eq!(s1["prevResult"], want);
    assert_eq!(net.calls(), calls(&[("ADD", 0), ("ADD", 1)]));

    // The cache, in libcni's layout.
    let cached: Value =
        serde_json::from_str(&std::fs::read_to_string(net.cache_file(&rt)).unwrap()).unwrap();
    assert_eq!(cached["kind"], "cniCacheV1");
    assert_eq!(cached["containerId"], "c1");
    assert_eq!(cached["ifName"], "eth0");
    assert_eq!(cached["networkName"], "net-rtadd");
    assert_eq!(cached["netns"], "/some/netns/path");
    assert_eq!(cached["result"], want);
    assert!(
        cached.get("cniArgs").is_none() && cached.get("capabilityArgs").is_none(),
        "{cached}"
    );
    let config = rcni_tests::base64_decode(cached["config"].as_str().unwrap()).unwrap();
    assert_eq!(config, net.list.bytes);
    let again = net
        .cni
        .get_network_list_cached_result(&net.list, &rt)
        .unwrap()
        .unwrap();
    assert_eq!(again, result);
    let attachments = net.cni.get_cached_attachments("c1").unwrap();
    assert_eq!(attachments.len(), 1);
    assert_eq!(
        (
            attachments[0].network.as_str(),
            attachments[0].ifname.as_str()
        ),
        ("net-rtadd", "eth0")
    );
}

#[test]
fn env_and_capabilities_reach_the_plugins() {
    let net = Net::new(
        "rtcaps",
        "1.0.0",
        json!({}),
        vec![
            json!({"capabilities": {"portMappings": true, "mac": false, "ips": true}}),
            json!({}),
        ],
        vec![
            json!({"ReportResult": RESULT_1}),
            json!({"ReportResult": "PASSTHROUGH"}),
        ],
    );
    let mut rt = rt("c-caps");
    rt.args = vec![
        ("K8S_POD_NAME".into(), "pod".into()),
        ("FOO".into(), "bar".into()),
    ];
    rt.capability_args = json!({
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
        "mac": "00:11:22:33:44:66",
        "bandwidth": {"ingressRate": 1}
    })
    .as_object()
    .unwrap()
    .clone();
    net.cni.add_network_list(&net.list, &rt).unwrap();

    let s0 = net.stdin(0);
    assert_eq!(
        s0["runtimeConfig"],
        json!({"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]})
    );
    assert!(s0.get("capabilities").is_none(), "{s0}");
    let s1 = net.stdin(1);
    assert!(s1.get("runtimeConfig").is_none(), "{s1}");

    let a = &net.debug(0)["CmdArgs"];
    assert_eq!(a["ContainerID"], "c-caps");
    assert_eq!(a["Netns"], "/some/netns/path");
    assert_eq!(a["IfName"], "eth0");
    assert_eq!(a["Args"], "K8S_POD_NAME=pod;FOO=bar");
    assert_eq!(a["Path"], rcni_tests::bin_dir().display().to_string());

    // The cache keeps the arguments for DEL and GC.
    let cached: Value =
        serde_json::from_str(&std::fs::read_to_string(net.cache_file(&rt)).unwrap()).unwrap();
    assert_eq!(
        cached["cniArgs"],
        json!([["K8S_POD_NAME", "pod"], ["FOO", "bar"]])
    );
    assert_eq!(cached["capabilityArgs"]["mac"], "00:11:22:33:44:66");
    let (bytes, cached_rt) = net
        .cni
        .get_network_list_cached_config(
            &net.list,
            &RuntimeConf {
                args: vec![],
                ..rt.clone()
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(bytes, net.list.bytes);
    assert_eq!(cached_rt.args, rt.args);
    assert_eq!(cached_rt.capability_args, rt.capability_args);

    // DEL sends the same runtimeConfig.
    net.cni.del_network_list(&net.list, &rt).unwrap();
    assert_eq!(net.stdin(0)["runtimeConfig"], s0["runtimeConfig"]);
}

#[test]
fn del_runs_in_reverse_with_the_cached_result() {
    let net = chain("rtdel", "1.0.0", json!({}));
    let rt = rt("c1");
    net.cni.add_network_list(&net.list, &rt).unwrap();
    assert!(net.cache_file(&rt).exists());
    net.cni.del_network_list(&net.list, &rt).unwrap();
    assert_eq!(
        net.calls(),
        calls(&[("ADD", 0), ("ADD", 1), ("DEL", 1), ("DEL", 0)])
    );
    let want: Value = serde_json::from_str(RESULT_1).unwrap();
    for i in 0..2 {
        assert_eq!(net.stdin(i)["prevResult"], want, "plugin {i}");
        assert_eq!(net.debug(i)["Command"], "DEL");
    }
    assert!(
        !net.cache_file(&rt).exists(),
        "cache entry must go with DEL"
    );
    // DEL again: nothing cached, no prevResult, still fine.
    net.cni.del_network_list(&net.list, &rt).unwrap();
    assert!(net.stdin(0).get("prevResult").is_none());
    // An explicit prevResult instead of the cache.
    let explicit = cni_runtime::CniResult::parse(RESULT_1.as_bytes(), "1.0.0").unwrap();
    net.cni
        .del_network_list_with(&net.list, &rt, Some(&explicit))
        .unwrap();
    assert_eq!(net.stdin(1)["prevResult"], want);
}

#[test]
fn del_before_0_4_0_gets_no_prev_result() {
    let net = chain("rtdel031", "0.3.1", json!({}));
    let rt = rt("c1");
    net.cni.add_network_list(&net.list, &rt).unwrap();
    // 1.0.0 → 0.3.1 conversion of what plugin 0 reported, as plugin 1 saw it.
    assert_eq!(net.stdin(1)["prevResult"]["ips"][0]["version"], "4");
    net.cni.del_network_list(&net.list, &rt).unwrap();
    assert!(net.stdin(0).get("prevResult").is_none());
    assert_eq!(net.stdin(1)["prevResult"], static_prev(), "only its own");
    assert!(!net.cache_file(&rt).exists());
}

#[test]
fn check_uses_the_cache_and_honours_disable_check() {
    let net = chain("rtchk", "1.0.0", json!({}));
    let rt = rt("c1");
    // Nothing cached: CHECK has no prevResult to give.
    let e = net.cni.check_network_list(&net.list, &rt).unwrap_err();
    assert_eq!(e.code, 3, "{e:?}");
    net.cni.add_network_list(&net.list, &rt).unwrap();
    net.cni.check_network_list(&net.list, &rt).unwrap();
    assert_eq!(
        net.calls(),
        calls(&[("ADD", 0), ("ADD", 1), ("CHECK", 0), ("CHECK", 1)])
    );
    let want: Value = serde_json::from_str(RESULT_1).unwrap();
    assert_eq!(net.stdin(0)["prevResult"], want);
    // Explicitly without one.
    net.cni
        .check_network_list_with(&net.list, &rt, None)
        .unwrap();
    assert!(net.stdin(0).get("prevResult").is_none());

    let mut disabled = net.list.clone();
    disabled.disable_check = true;
    net.cni.check_network_list(&disabled, &rt).unwrap();
    assert_eq!(
        net.calls().len(),
        6,
        "disableCheck must not call the plugins"
    );

    let old = chain("rtchk031", "0.3.1", json!({}));
    let e = old.cni.check_network_list(&old.list, &rt).unwrap_err();
    assert_eq!(e.code, 1);
    assert_eq!(
        e.msg,
        r#"configuration version "0.3.1" does not support the CHECK command"#
    );
}

#[test]
fn disable_check_from_the_conflist() {
    let net = chain("rtchkoff", "1.0.0", json!({"disableCheck": true}));
    assert!(net.list.disable_check);
    net.cni.check_network_list(&net.list, &rt("c1")).unwrap();
    assert!(net.calls().is_empty());
}

#[test]
fn gc_deletes_stale_attachments_then_collects() {
    let net = chain("rtgc", "1.1.0", json!({}));
    let (a, b) = (rt("c-keep"), rt("c-stale"));
    net.cni.add_network_list(&net.list, &a).unwrap();
    net.cni.add_network_list(&net.list, &b).unwrap();
    let valid = [GcAttachment {
        container_id: "c-keep".into(),
        ifname: "eth0".into(),
    }];
    net.cni.gc_network_list(&net.list, Some(&valid)).unwrap();
    assert_eq!(
        net.calls(),
        calls(&[
            ("ADD", 0),
            ("ADD", 1),
            ("ADD", 0),
            ("ADD", 1),
            ("DEL", 1),
            ("DEL", 0),
            ("GC", 0),
            ("GC", 1),
        ])
    );
    assert!(net.cache_file(&a).exists());
    assert!(!net.cache_file(&b).exists());
    let want = json!([{"containerID": "c-keep", "ifname": "eth0"}]);
    for i in 0..2 {
        let s = net.stdin(i);
        assert_eq!(s["cni.dev/valid-attachments"], want, "{s}");
        assert_eq!(s["cni.dev/attachments"], want, "{s}");
        assert_eq!(
            (s["name"].as_str(), s["cniVersion"].as_str()),
            (Some("net-rtgc"), Some("1.1.0"))
        );
        let args = &net.debug(i)["CmdArgs"];
        assert_eq!(
            (args["ContainerID"].as_str(), args["IfName"].as_str()),
            (Some(""), Some(""))
        );
    }
    // The stale DEL got the stale attachment's arguments.
    let entries: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&net.log).unwrap()).unwrap();
    assert_eq!(entries[4]["CmdArgs"]["ContainerID"], "c-stale");

    // disableGC: nothing at all.
    let mut off = net.list.clone();
    off.disable_gc = true;
    net.cni.gc_network_list(&off, Some(&[])).unwrap();
    assert_eq!(net.calls().len(), 8);
}

#[test]
fn gc_before_1_1_0_only_deletes() {
    let net = chain("rtgc100", "1.0.0", json!({}));
    net.cni.add_network_list(&net.list, &rt("c1")).unwrap();
    net.cni.gc_network_list(&net.list, Some(&[])).unwrap();
    assert_eq!(
        net.calls(),
        calls(&[("ADD", 0), ("ADD", 1), ("DEL", 1), ("DEL", 0)])
    );
}

#[test]
fn status_from_1_1_0() {
    let net = chain("rtstat", "1.1.0", json!({}));
    net.cni.status_network_list(&net.list).unwrap();
    assert_eq!(net.calls(), calls(&[("STATUS", 0), ("STATUS", 1)]));
    let old = chain("rtstat100", "1.0.0", json!({}));
    old.cni.status_network_list(&old.list).unwrap();
    assert!(old.calls().is_empty());
    // A failure keeps its code (50: plugin not available).
    std::fs::write(
        &net.debug[1],
        json!({"ReportError": "not ready", "ReportErrorCode": 50}).to_string(),
    )
    .unwrap();
    let e = net.cni.status_network_list(&net.list).unwrap_err();
    assert_eq!(e.code, 50);
    assert_eq!(e.msg, r#"plugin type="noop" failed (status): not ready"#);
}

#[test]
fn plugin_errors_keep_their_code_and_name_the_plugin() {
    let net = Net::new(
        "rterr",
        "1.0.0",
        json!({}),
        vec![json!({}), json!({"name": "second"})],
        vec![
            json!({"ReportResult": RESULT_1}),
            json!({"ReportError": "nope", "ReportErrorCode": 117}),
        ],
    );
    let rt = rt("c1");
    let e = net.cni.add_network_list(&net.list, &rt).unwrap_err();
    assert_eq!(e.code, 117);
    assert_eq!(
        e.msg,
        r#"plugin type="noop" name="second" failed (add): nope"#
    );
    assert!(!net.cache_file(&rt).exists(), "no cache after a failed ADD");
    let e = net.cni.del_network_list(&net.list, &rt).unwrap_err();
    assert_eq!(
        (e.code, e.msg.as_str()),
        (
            117,
            r#"plugin type="noop" name="second" failed (delete): nope"#
        )
    );

    // A plugin dying without a word.
    std::fs::write(&net.debug[1], json!({"ExitWithCode": 3}).to_string()).unwrap();
    let e = net.cni.add_network_list(&net.list, &rt).unwrap_err();
    assert_eq!(e.code, 0);
    assert!(
        e.msg
            .ends_with("netplugin failed with no error message: exit status 3"),
        "{}",
        e.msg
    );
    // Skel errors come through too (code 1: version not claimed).
    std::fs::write(
        &net.debug[0],
        json!({"ReportVersionSupport": ["0.4.0"]}).to_string(),
    )
    .unwrap();
    let mut with_args = rt.clone();
    with_args.args = vec![("X".into(), "1".into())];
    let e = net.cni.add_network_list(&net.list, &with_args).unwrap_err();
    assert_eq!(
        (e.code, e.msg.as_str()),
        (
            1,
            r#"plugin type="noop" failed (add): incompatible CNI versions"#
        )
    );
    // A missing plugin binary.
    let mut missing = net.list.clone();
    missing.plugins[0]["type"] = json!("no-such-plugin");
    let e = net.cni.add_network_list(&missing, &rt).unwrap_err();
    assert!(
        e.msg
            .contains(r#"failed to find plugin "no-such-plugin" in path ["#),
        "{}",
        e.msg
    );
}

#[test]
fn single_conf_file_is_a_list_of_one() {
    let dir = TempDir::new("rtconf");
    let debug = dir.file("debug.json");
    std::fs::write(&debug, json!({"ReportResult": RESULT_1}).to_string()).unwrap();
    let conf = dir.join("10-single.conf");
    std::fs::write(
        &conf,
        json!({"cniVersion": "1.0.0", "name": "single", "type": "noop", "debugFile": debug})
            .to_string(),
    )
    .unwrap();
    let list = NetworkConfigList::from_file(&conf).unwrap();
    assert_eq!((list.name.as_str(), list.plugins.len()), ("single", 1));
    let same = cni_runtime::load_network_conf(dir.path(), "single").unwrap();
    assert_eq!(same, list);
    let cni = CniConfig::new(vec![rcni_tests::bin_dir()]).with_cache_dir(dir.join("cache"));
    let r = cni.add_network_list(&list, &rt("c1")).unwrap();
    assert_eq!(r.ips.len(), 1);
    cni.del_network_list(&list, &rt("c1")).unwrap();
}

#[test]
fn version_info() {
    let cni = CniConfig::new(vec![rcni_tests::bin_dir()]);
    let info = cni.get_version_info("noop").unwrap();
    assert_eq!(info.cni_version, "1.1.0");
    assert_eq!(
        info.supported_versions,
        [
            "0.-42.0", "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"
        ]
    );
}
