//! Property-based fuzzing (proptest) of every input path: the skel
//! (`cni_skel::dispatch` with arbitrary environment and stdin), the config
//! parsers of bridge and host-local (their lib crates), the other plugins'
//! configs through their binaries (ptp, portmap, loopback, noop, exec'd in
//! a private namespace `hxf…` when root), `CNI_ARGS`, `prevResult` parsing,
//! and result conversion between every pair of spec versions.
//!
//! The seed corpus in tests/fuzz-corpus runs first; proptest keeps the
//! seeds of any failure in tests/proptest-regressions. `PROPTEST_CASES`
//! raises the number of cases (default 256; 48 for the exec'd plugins).

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use cni_skel::version::ALL;
use cni_skel::{
    CmdArgs, CmdResult, CniError, CniResult, Dns, Interface, IpConfig, Output, Plugin, Route,
};
use common::{cni_env, os, set_at, set_env};
use ipnetwork::IpNetwork;
use proptest::prelude::*;
use rcni_tests::tempdir::TempDir;
use rcni_tests::{Invocation, Netns, PluginOutput, bin};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

// ---------- generators ----------

/// Values that mean something to some plugin: valid ones, edge cases, and
/// the kinds of values the hostile test found problems with.
const POOL: &[&str] = &[
    "true",
    "false",
    "0",
    "1",
    "67",
    "68",
    "1500",
    "4094",
    "4095",
    "65535",
    "65536",
    "70000",
    "-1",
    "31",
    "32",
    "1.5",
    "null",
    "[]",
    "{}",
    "\"\"",
    "\"10.80.40.0/24\"",
    "\"10.80.40.7/24\"",
    "\"10.80.40.7\"",
    "\"10.80.40.200\"",
    "\"10.80.40.0/31\"",
    "\"10.80.40.0/32\"",
    "\"0.0.0.0/0\"",
    "\"fd80:40::/64\"",
    "\"fd80:40::1\"",
    "\"::/0\"",
    "\"eth0\"",
    "\"cni0\"",
    "\"abcdefghijklmnop\"",
    "\"a/b\"",
    "\"..\"",
    "\"../x\"",
    "\"iptables\"",
    "\"nftables\"",
    "\"pf\"",
    "\"tcp\"",
    "\"udp\"",
    "\"sctp\"",
    "\"icmp\"",
    "\"02:00:00:00:00:01\"",
    "\"01:00:5e:00:00:01\"",
    "\"00:00:00:00:00:00\"",
    "\"zz\"",
    "\"host-local\"",
    "\"1.0.0\"",
    "\"1.1.0\"",
    "\"0.4.0\"",
    "\"0.3.1\"",
    "\"0.2.0\"",
    "\"0.1.0\"",
    "\"9.9.9\"",
    "\"KUBE-MARK-MASQ\"",
    "\"bad name\"",
    "\"-s\"",
    "\"a\\nb\"",
    "\"a;b\"",
    "\"#\"",
    "[[{\"subnet\":\"10.80.40.0/24\"}]]",
    "[[{\"subnet\":\"fd80:40::/64\"}]]",
    "[[{\"subnet\":\"10.80.40.0/24\",\"rangeStart\":\"10.80.40.9\",\"rangeEnd\":\"10.80.40.3\"}]]",
    "[[{\"subnet\":\"10.80.40.0/24\"}],[{\"subnet\":\"10.80.40.0/25\"}]]",
    "[{\"dst\":\"0.0.0.0/0\"}]",
    "[{\"dst\":\"0.0.0.0/0\",\"gw\":\"10.80.40.1\",\"mtu\":1400}]",
    "[{\"hostPort\":8080,\"containerPort\":80,\"protocol\":\"tcp\"}]",
    "[{\"hostPort\":0,\"containerPort\":80,\"protocol\":\"udp\",\"hostIP\":\"::1\"}]",
    "[{\"id\":5},{\"minID\":7,\"maxID\":9}]",
    "[{\"id\":5000}]",
    "[\"-s\",\"10.0.0.0/8\"]",
    "[\"ip\",\"saddr\",\"10.0.0.0/8\"]",
    "[\"10.80.40.9\"]",
    "[\"fd80:40::9/64\"]",
    "{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"10.80.40.2/24\"}]}",
    "{\"cniVersion\":\"1.0.0\",\"dns\":[]}",
    "{\"cniVersion\":\"0.2.0\",\"ip4\":{\"ip\":\"10.80.40.2/24\"}}",
    "{\"type\":\"host-local\",\"subnet\":\"10.80.40.0/24\"}",
    "{\"nameservers\":[\"1.1.1.1\"]}",
    "{\"mac\":\"02:00:00:00:00:02\"}",
    "{\"cni\":{\"ips\":[\"10.80.40.5\"],\"mac\":\"zz\"}}",
];

fn pool(exclude_v6: bool) -> Vec<Value> {
    POOL.iter()
        .filter(|s| !(exclude_v6 && s.contains("fd80")))
        .map(|s| serde_json::from_str(s).unwrap())
        .collect()
}

fn leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null)),
        "\\PC{0,12}".prop_map(Value::from),
        prop::sample::select(pool(false)),
    ]
    .boxed()
}

/// Any JSON value, a few levels deep.
fn any_json() -> BoxedStrategy<Value> {
    leaf()
        .prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
}

/// `base` with 0..6 of `keys` set to pool values or arbitrary JSON.
fn config(base: Value, keys: &'static [&'static str], exclude_v6: bool) -> BoxedStrategy<Value> {
    let value = prop_oneof![3 => prop::sample::select(pool(exclude_v6)), 1 => any_json()];
    prop::collection::vec((prop::sample::select(keys), value), 0..6)
        .prop_map(move |muts| {
            let mut c = base.clone();
            for (k, v) in muts {
                let path: Vec<&str> = k.split('.').collect();
                c = set_at(&c, &path, v);
            }
            c
        })
        .boxed()
}

/// The keys every plugin's config shares (NetConf's).
const COMMON_KEYS: &[&str] = cni_skel::conf::FIELDS;

const IPAM_KEYS: &[&str] = &[
    "cniVersion",
    "name",
    "ipam",
    "ipam.type",
    "ipam.subnet",
    "ipam.rangeStart",
    "ipam.rangeEnd",
    "ipam.gateway",
    "ipam.ranges",
    "ipam.ranges.0",
    "ipam.ranges.0.0",
    "ipam.ranges.0.0.subnet",
    "ipam.ranges.0.0.rangeStart",
    "ipam.ranges.0.0.rangeEnd",
    "ipam.ranges.0.0.gateway",
    "ipam.ranges.1.0.subnet",
    "ipam.routes",
    "ipam.routes.0.dst",
    "ipam.routes.0.gw",
    "ipam.routes.0.mtu",
    "ipam.routes.0.scope",
    "ipam.routes.0.table",
    "ipam.resolvConf",
    "runtimeConfig",
    "runtimeConfig.ips",
    "runtimeConfig.ipRanges",
    "args",
    "args.cni",
    "args.cni.ips",
    "cni.dev/valid-attachments",
    "cni.dev/attachments",
];

const BRIDGE_KEYS: &[&str] = &[
    "bridge",
    "isGateway",
    "isDefaultGateway",
    "forceAddress",
    "ipMasq",
    "ipMasqBackend",
    "mtu",
    "hairpinMode",
    "promiscMode",
    "vlan",
    "vlanTrunk",
    "vlanTrunk.0.id",
    "vlanTrunk.0.minID",
    "vlanTrunk.0.maxID",
    "preserveDefaultVlan",
    "macspoofchk",
    "enabledad",
    "disableContainerInterface",
    "portIsolation",
    "args.cni.mac",
    "runtimeConfig.mac",
    "args",
    "runtimeConfig",
];

const PTP_KEYS: &[&str] = &[
    "cniVersion",
    "name",
    "ipMasq",
    "ipMasqBackend",
    "mtu",
    "dns",
    "ipam.type",
    "ipam.ranges",
    "ipam.ranges.0.0.subnet",
    "ipam.routes",
    "prevResult",
    "runtimeConfig",
];

const PORTMAP_KEYS: &[&str] = &[
    "cniVersion",
    "name",
    "backend",
    "snat",
    "masqAll",
    "markMasqBit",
    "externalSetMarkChain",
    "conditionsV4",
    "conditionsV6",
    "runtimeConfig",
    "runtimeConfig.portMappings",
    "runtimeConfig.portMappings.0.hostPort",
    "runtimeConfig.portMappings.0.containerPort",
    "runtimeConfig.portMappings.0.protocol",
    "runtimeConfig.portMappings.0.hostIP",
    "prevResult",
    "prevResult.ips",
    "prevResult.interfaces",
    "prevResult.cniVersion",
    "cni.dev/valid-attachments",
];

const NOOP_KEYS: &[&str] = &[
    "cniVersion",
    "name",
    "debugFile",
    "commandLog",
    "prevResult",
    "prevResult.cniVersion",
    "prevResult.ips",
    "prevResult.dns",
];

const STATIC_KEYS: &[&str] = &[
    "cniVersion",
    "name",
    "ipam.addresses",
    "ipam.addresses.0.address",
    "ipam.addresses.0.gateway",
    "ipam.addresses.1.address",
    "ipam.routes",
    "ipam.routes.0.dst",
    "ipam.routes.0.gw",
    "ipam.dns",
    "runtimeConfig.ips",
    "args.cni.ips",
    "prevResult",
];

const TAP_KEYS: &[&str] = &[
    "cniVersion",
    "name",
    "multiQueue",
    "mtu",
    "mac",
    "owner",
    "group",
    "bridge",
    "selinuxContext",
    "runtimeConfig.mac",
    "ipam.type",
    "ipam.addresses.0.address",
    "dns",
    "prevResult",
];

fn corpus() -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz-corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases: n,
        ..ProptestConfig::default()
    }
}

// ---------- the skel ----------

/// A plugin that uses what the skel hands it: prevResult, CNI_ARGS, and
/// prints a result converted to the config's version.
struct Echo;

impl Plugin for Echo {
    fn about(&self) -> String {
        "echo".into()
    }
    fn add(&self, args: &CmdArgs) -> CmdResult {
        args.cni_args(&["IP", "MAC"])?;
        let prev = args.prev_result()?;
        Ok(Output::Result(prev.unwrap_or_else(|| CniResult {
            cni_version: args.cni_version().to_string(),
            ips: vec![IpConfig {
                interface: None,
                address: "10.80.40.2/24".parse().unwrap(),
                gateway: Some("10.80.40.1".parse().unwrap()),
            }],
            ..Default::default()
        })))
    }
    fn del(&self, _: &CmdArgs) -> CmdResult {
        Ok(Output::Nothing)
    }
    fn check(&self, args: &CmdArgs) -> CmdResult {
        args.prev_result()?
            .ok_or_else(|| CniError::internal("no prevResult"))
            .map(|_| Output::Nothing)
    }
}

fn env_value(choices: &'static [&'static str]) -> BoxedStrategy<Option<String>> {
    prop_oneof![
        1 => Just(None),
        4 => prop::sample::select(choices).prop_map(|s| Some(s.to_string())),
        2 => "\\PC{0,20}".prop_map(Some),
    ]
    .boxed()
}

fn stdin_bytes() -> BoxedStrategy<Vec<u8>> {
    let base = json!({"cniVersion": "1.0.0", "name": "n", "type": "echo"});
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..64),
        1 => any_json().prop_map(|v| v.to_string().into_bytes()),
        4 => config(base, COMMON_KEYS, false).prop_map(|v| v.to_string().into_bytes()),
        1 => prop::sample::select(corpus()),
    ]
    .boxed()
}

/// The outcome is an exit status of 0 or 1, and stdout is either empty or
/// JSON: a CNI error (`code`, `msg`) on 1.
fn well_formed(exit: u8, stdout: &str) -> Result<(), String> {
    match exit {
        0 if stdout.is_empty() => Ok(()),
        0 => serde_json::from_str::<Value>(stdout)
            .map(|_| ())
            .map_err(|e| format!("success output is not JSON: {e}: {stdout}")),
        1 => {
            let v: Value = serde_json::from_str(stdout).map_err(|e| format!("{e}: {stdout}"))?;
            if v["code"].is_u64() && v["msg"].is_string() {
                Ok(())
            } else {
                Err(format!("not a CNI error: {stdout}"))
            }
        }
        _ => Err(format!("exit {exit}")),
    }
}

fn dispatch(env: &HashMap<&'static str, String>, stdin: Vec<u8>) -> cni_skel::Outcome {
    let env = env.clone();
    cni_skel::dispatch(
        &Echo,
        &move |k| env.get(k).cloned(),
        Box::new(std::io::Cursor::new(stdin)),
    )
}

#[test]
fn corpus_through_the_skel() {
    for data in corpus() {
        for cmd in ["ADD", "CHECK", "DEL", "GC", "STATUS"] {
            let env: HashMap<&'static str, String> = [
                ("CNI_COMMAND", cmd),
                ("CNI_CONTAINERID", "c"),
                ("CNI_NETNS", "/nonexistent"),
                ("CNI_IFNAME", "eth0"),
                ("CNI_PATH", "/nonexistent"),
            ]
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect();
            let o = dispatch(&env, data.clone());
            well_formed(o.exit, &o.stdout).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn skel_dispatch(
        command in env_value(&["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "add", ""]),
        cid in env_value(&["c1", "../x", "a/b", "", "a b"]),
        netns in env_value(&["/nonexistent", "/proc/self/ns/net", "", "/dev/null"]),
        ifname in env_value(&["eth0", "abcdefghijklmnop", "a/b", "..", ""]),
        cni_args in env_value(&["IP=10.80.40.9", "a=b=c", "IgnoreUnknown=1;X=y", ";", "MAC=zz"]),
        path in env_value(&["/opt/cni/bin", ""]),
        netns_override in env_value(&["1", "true", "0"]),
        stdin in stdin_bytes(),
    ) {
        let mut env = HashMap::new();
        for (k, v) in [("CNI_COMMAND", command), ("CNI_CONTAINERID", cid), ("CNI_NETNS", netns),
                       ("CNI_IFNAME", ifname), ("CNI_ARGS", cni_args), ("CNI_PATH", path),
                       ("CNI_NETNS_OVERRIDE", netns_override)] {
            if let Some(v) = v {
                env.insert(k, v);
            }
        }
        let o = dispatch(&env, stdin);
        prop_assert!(well_formed(o.exit, &o.stdout).is_ok(), "{:?}: {:?}", well_formed(o.exit, &o.stdout), o);
    }

    #[test]
    fn cni_args_parse(raw in prop_oneof![
        "\\PC{0,30}",
        prop::collection::vec(("[A-Za-z]{0,5}", "[=;A-Za-z0-9.]{0,6}"), 0..4)
            .prop_map(|p| p.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(";")),
    ]) {
        if let Ok(a) = cni_skel::args::CniArgs::parse(&raw) {
            // What parses is exactly the pairs it was made of.
            let back: Vec<String> = a.pairs().iter().map(|(k, v)| format!("{k}={v}")).collect();
            prop_assert_eq!(back.join(";"), raw.clone());
        }
        let _ = cni_skel::args::CniArgs::load(&raw, &["IP", "MAC"]);
    }

    #[test]
    fn prev_result_parse(v in prop_oneof![any_json(), config(json!({"cniVersion": "1.0.0"}), &[
            "cniVersion", "ips", "ips.0", "ips.0.address", "ips.0.interface", "ips.0.gateway",
            "interfaces", "interfaces.0", "interfaces.0.name", "interfaces.0.mtu", "routes",
            "routes.0", "routes.0.dst", "dns", "dns.nameservers", "ip4", "ip4.ip", "ip6",
            "ip4.routes", "ip4.routes.0.dst"], false)],
        version in prop::sample::select(ALL),
    ) {
        if let Ok(r) = CniResult::parse_prev(&v, version) {
            // Whatever was accepted prints in every version or says why not.
            for to in ALL {
                if let Ok(text) = r.to_json(to) {
                    prop_assert!(CniResult::parse(text.as_bytes(), to).is_ok(), "{to}: {text}");
                }
            }
        }
        let _ = CniResult::parse(v.to_string().as_bytes(), version);
    }

    #[test]
    fn result_conversion(r in result()) {
        for from in ALL {
            let Ok(text) = r.to_json(from) else { continue };
            let parsed = CniResult::parse(text.as_bytes(), from);
            prop_assert!(parsed.is_ok(), "own {from} output does not parse: {text}");
            let parsed = parsed.unwrap();
            if *from == "1.1.0" {
                let mut want = r.clone();
                want.cni_version = "1.1.0".into();
                prop_assert_eq!(&parsed, &want);
            }
            for to in ALL {
                if let Ok(t2) = parsed.to_json(to) {
                    prop_assert!(CniResult::parse(t2.as_bytes(), to).is_ok(), "{from}->{to}: {t2}");
                }
            }
        }
    }

    #[test]
    fn bridge_config(
        v in prop_oneof![
            4 => config(json!({"cniVersion": "1.0.0", "name": "n", "type": "bridge"}), BRIDGE_KEYS, false),
            1 => any_json(),
        ],
        cni_args in env_value(&["MAC=02:00:00:00:00:01", "MAC=zz", "IgnoreUnknown=1;K=v", "a=b=c"]),
        layer3 in any::<bool>(),
    ) {
        if let Ok(c) = bridge::config::load_value(v, cni_args.as_deref().unwrap_or(""), layer3) {
            prop_assert!(!c.bridge.is_empty() && c.bridge.len() <= 15 && !c.bridge.contains('/'));
            prop_assert!(c.vlan <= 4094 && c.trunk.iter().all(|t| (1..=4094).contains(t)));
            prop_assert!(c.mtu.is_none_or(|m| (68..=65535).contains(&m)));
            prop_assert!(c.mac.is_none_or(|m| m.0[0] & 1 == 0 && m.0 != [0; 6]));
            prop_assert!(!(c.hairpin && c.promisc));
        }
    }

    #[test]
    fn host_local_config(
        v in prop_oneof![
            4 => config(json!({"cniVersion": "1.0.0", "name": "n",
                               "ipam": {"type": "host-local", "dataDir": "/nonexistent/rcni-fuzz",
                                        "ranges": [[{"subnet": "10.80.40.0/24"}]]}}), IPAM_KEYS, false)
                .prop_map(|v| v.to_string().into_bytes()),
            1 => prop::collection::vec(any::<u8>(), 0..48),
            1 => prop::sample::select(corpus()),
        ],
        cni_args in env_value(&["IP=10.80.40.9", "IP=fd80:40::9/64", "IP=", "IgnoreUnknown=1;K=v", "a=b=c"]),
    ) {
        if let Ok(c) = host_local::config::load(&v, cni_args.as_deref().unwrap_or("")) {
            prop_assert!(!c.ranges.is_empty());
            for set in &c.ranges {
                prop_assert!(set.capacity() > 0, "empty range set {set}");
            }
        }
        let _ = cni_skel::conf::valid_attachments(&v);
    }
}

/// An arbitrary result of the 1.1.0 superset.
fn result() -> impl Strategy<Value = CniResult> {
    let addr = prop_oneof![
        (any::<u32>(), 0u8..=32).prop_map(|(a, p)| IpNetwork::new(
            IpAddr::V4(Ipv4Addr::from(a)),
            p
        )
        .unwrap()),
        (any::<u128>(), 0u8..=128).prop_map(|(a, p)| IpNetwork::new(
            IpAddr::V6(Ipv6Addr::from(a)),
            p
        )
        .unwrap()),
    ];
    let ip = prop_oneof![
        any::<u32>().prop_map(|a| IpAddr::V4(Ipv4Addr::from(a))),
        any::<u128>().prop_map(|a| IpAddr::V6(Ipv6Addr::from(a))),
    ];
    let iface = (
        "[a-z0-9]{0,6}",
        prop::sample::select(vec!["", "02:00:00:00:00:01"]),
        0u32..9001,
        prop::sample::select(vec!["", "/run/netns/x"]),
        prop::sample::select(vec!["", "/var/run/vhu.sock"]),
        prop::sample::select(vec!["", "0000:00:01.0"]),
    )
        .prop_map(|(name, mac, mtu, sandbox, socket, pci)| Interface {
            name,
            mac: mac.into(),
            mtu,
            sandbox: sandbox.into(),
            socket_path: socket.into(),
            pci_id: pci.into(),
        });
    let ipc = (
        prop::option::of(0usize..4),
        addr.clone(),
        prop::option::of(ip.clone()),
    )
        .prop_map(|(interface, address, gateway)| IpConfig {
            interface,
            address,
            gateway,
        });
    let route = (
        addr,
        prop::option::of(ip),
        0u32..10_000,
        0u32..10_000,
        0u32..10_000,
        prop::option::of(any::<u32>()),
        prop::option::of(any::<u8>()),
    )
        .prop_map(|(dst, gw, mtu, adv_mss, priority, table, scope)| Route {
            dst,
            gw,
            mtu,
            adv_mss,
            priority,
            table,
            scope,
        });
    let dns = (
        prop::collection::vec("[0-9.]{1,15}", 0..3),
        "[a-z.]{0,10}",
        prop::collection::vec("[a-z.]{1,10}", 0..3),
        prop::collection::vec("[a-z:0-9]{1,10}", 0..3),
    )
        .prop_map(|(nameservers, domain, search, options)| Dns {
            nameservers,
            domain,
            search,
            options,
        });
    (
        prop::collection::vec(iface, 0..3),
        prop::collection::vec(ipc, 0..4),
        prop::collection::vec(route, 0..3),
        dns,
    )
        .prop_map(|(interfaces, ips, routes, dns)| CniResult {
            cni_version: "1.1.0".into(),
            interfaces,
            ips,
            routes,
            dns,
        })
}

// ---------- plugins without a lib crate, through their binaries ----------

/// A private host and container namespace and a temp dir for one exec'd
/// plugin's cases, removed when the test ends (also when it fails); `None`
/// when not root.
struct Sandbox {
    host: Netns,
    container: Netns,
    tmp: TempDir,
}

impl Sandbox {
    fn new() -> Option<Sandbox> {
        if rcni_tests::skip_unless_root("exec'd fuzz cases") {
            return None;
        }
        let host = Netns::new("hxfh");
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        let tmp = TempDir::new("hxf");
        std::fs::write(tmp.join("debug.json"), br#"{"ReportResult":"PASSTHROUGH"}"#).unwrap();
        std::fs::write(tmp.join("log.json"), b"[]").unwrap();
        Some(Sandbox {
            host,
            container: Netns::new("hxfc"),
            tmp,
        })
    }

    /// `conf` with the placeholders DATADIR, DEBUG and LOG pointing into
    /// the temp dir.
    fn fill(&self, conf: &Value) -> Value {
        let text = conf
            .to_string()
            .replace("\"DATADIR\"", &format!("{:?}", self.tmp.file("data")))
            .replace("\"DEBUG\"", &format!("{:?}", self.tmp.file("debug.json")))
            .replace("\"LOG\"", &format!("{:?}", self.tmp.file("log.json")));
        serde_json::from_str(&text).unwrap()
    }

    fn run(&self, plugin: &str, env: &[(OsString, OsString)], conf: &Value) -> PluginOutput {
        Invocation::bare(bin(plugin))
            .in_host(&self.host)
            .envs(env.iter().cloned())
            .config(conf)
            .run()
    }

    /// Runs one case: a clean outcome, and a successful ADD is undone.
    fn exec(
        &self,
        plugin: &str,
        cmd: &str,
        conf: &Value,
        cni_args: Option<&str>,
    ) -> Result<(), String> {
        let conf = self.fill(conf);
        let mut env = cni_env(
            cmd,
            "hxf",
            &self.container.path().display().to_string(),
            "eth0",
        );
        if let Some(a) = cni_args {
            set_env(&mut env, "CNI_ARGS", os(a.as_bytes().to_vec()));
        }
        let out = self.run(plugin, &env, &conf);
        if let Some(p) = out.panic() {
            return Err(format!("{plugin} {cmd} {conf}: {p}"));
        }
        let exit = u8::try_from(out.code).map_err(|_| format!("exit {}", out.code))?;
        well_formed(exit, &out.stdout).map_err(|e| format!("{plugin} {cmd} {conf}: {e}"))?;
        if out.code == 0 && cmd == "ADD" {
            let mut del = env.clone();
            set_env(&mut del, "CNI_COMMAND", "DEL".into());
            self.run(plugin, &del, &conf);
        }
        Ok(())
    }
}

fn commands() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["ADD", "ADD", "DEL", "CHECK", "GC", "STATUS"])
}

fn prev_v4() -> Value {
    json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
           "ips": [{"interface": 0, "address": "10.80.41.2/24"}]})
}

/// Runs `cases(48)` configs of `plugin` from `keys` over `base`, each with a
/// random command and `CNI_ARGS`, in a sandbox of its own.
fn exec_cases(plugin: &'static str, base: Value, keys: &'static [&'static str]) {
    let Some(sandbox) = Sandbox::new() else {
        return;
    };
    let args = env_value(&["DEBUG=/nonexistent", "a=b=c", "K=v", "IP=10.80.42.9"]);
    let mut runner = proptest::test_runner::TestRunner::new(cases(48));
    let result = runner.run(
        &(config(base, keys, true), commands(), args),
        |(v, cmd, a)| {
            let r = sandbox.exec(plugin, cmd, &v, a.as_deref());
            prop_assert!(r.is_ok(), "{:?}", r);
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{plugin}: {e}");
    }
}

#[test]
fn ptp_config() {
    exec_cases(
        "ptp",
        json!({"cniVersion": "1.1.0", "name": "hxfptp", "type": "ptp",
               "ipam": {"type": "host-local", "dataDir": "DATADIR",
                        "ranges": [[{"subnet": "10.80.42.0/24"}]]}}),
        PTP_KEYS,
    );
}

#[test]
fn portmap_config() {
    exec_cases(
        "portmap",
        json!({"cniVersion": "1.1.0", "name": "hxfpm", "type": "portmap",
               "runtimeConfig": {"portMappings": [{"hostPort": 18090, "containerPort": 80, "protocol": "tcp"}]},
               "prevResult": prev_v4()}),
        PORTMAP_KEYS,
    );
}

#[test]
fn loopback_config() {
    exec_cases(
        "loopback",
        json!({"cniVersion": "1.1.0", "name": "hxflo", "type": "loopback"}),
        COMMON_KEYS,
    );
}

#[test]
fn noop_config() {
    exec_cases(
        "noop",
        json!({"cniVersion": "1.1.0", "name": "hxfnoop", "type": "noop",
               "debugFile": "DEBUG", "commandLog": "LOG", "prevResult": prev_v4()}),
        NOOP_KEYS,
    );
}

#[test]
fn static_config() {
    exec_cases(
        "static",
        json!({"cniVersion": "1.1.0", "name": "hxfst", "type": "static",
               "ipam": {"type": "static", "addresses": [{"address": "10.80.43.5/24", "gateway": "10.80.43.1"}],
                        "routes": [{"dst": "0.0.0.0/0"}]}}),
        STATIC_KEYS,
    );
}

#[test]
fn tap_config() {
    exec_cases(
        "tap",
        json!({"cniVersion": "1.1.0", "name": "hxftap", "type": "tap", "owner": 0, "group": 0,
               "ipam": {"type": "static", "addresses": [{"address": "10.80.44.5/24"}]}}),
        TAP_KEYS,
    );
}
