//! Helpers for the interface plugins' tests (macvlan, ipvlan, vlan, dummy,
//! host-device): a private "host" namespace holding a veth pair whose one
//! end is the parent (`mst0`) and whose other end (`peer0`, with an
//! address in the test's subnet) stands for the rest of the segment;
//! container namespaces; plugin runs inside the private host
//! ([`HostPlugin`]); configs; and a probe for link kinds this kernel may
//! lack.

use crate::host_local_util::DataDir;
use crate::{Invocation, Netns, PluginOutput};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The parent's name in [`Segment::host`].
pub const MASTER: &str = "mst0";
/// The parent's veth peer, the segment's other station.
pub const PEER: &str = "peer0";

/// A private host namespace with the veth pair `mst0` <-> `peer0`, both up;
/// `peer0` holds `<prefix>.254/24` and accepts gratuitous ARP
/// (`arp_accept=1`), so a container's announcement shows up in its
/// neighbour table.
pub struct Segment {
    /// The private "host".
    pub host: Netns,
    /// `a.b.c` of the segment's /24.
    pub prefix: String,
}

impl Segment {
    /// A segment for the /24 `prefix` (`10.124.1`), namespaces tagged `tag`.
    pub fn new(tag: &str, prefix: &str) -> Segment {
        let host = Netns::new(tag);
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        host.exec_ok(
            "ip",
            &["link", "add", MASTER, "type", "veth", "peer", "name", PEER],
        );
        host.exec_ok(
            "sysctl",
            &["-qw", &format!("net.ipv4.conf.{PEER}.arp_accept=1")],
        );
        host.exec_ok(
            "ip",
            &["addr", "add", &format!("{prefix}.254/24"), "dev", PEER],
        );
        for l in [MASTER, PEER] {
            host.exec_ok("ip", &["link", "set", l, "up"]);
        }
        Segment {
            host,
            prefix: prefix.to_string(),
        }
    }

    /// The peer's address.
    pub fn peer_ip(&self) -> String {
        format!("{}.254", self.prefix)
    }

    /// `plugin` (a binary) run inside this segment's host.
    pub fn plugin(&self, plugin: impl Into<PathBuf>) -> HostPlugin<'_> {
        HostPlugin::new(plugin, &self.host)
    }
}

/// A plugin binary run as a runtime runs it, inside a private host, for
/// the container interface `eth0` unless told another.
pub struct HostPlugin<'a> {
    plugin: PathBuf,
    host: &'a Netns,
}

impl<'a> HostPlugin<'a> {
    /// `plugin` run inside `host`.
    pub fn new(plugin: impl Into<PathBuf>, host: &'a Netns) -> HostPlugin<'a> {
        HostPlugin {
            plugin: plugin.into(),
            host,
        }
    }

    /// Runs `cmd` for `cid`'s `eth0` in `cont`.
    pub fn run(&self, cmd: &str, cid: &str, cont: &Netns, conf: &Value) -> PluginOutput {
        self.run_as(cmd, cid, cont, "eth0", conf)
    }

    /// Runs `cmd` for `cid`'s `ifname` in `cont`.
    pub fn run_as(
        &self,
        cmd: &str,
        cid: &str,
        cont: &Netns,
        ifname: &str,
        conf: &Value,
    ) -> PluginOutput {
        Invocation::new(&self.plugin, cmd)
            .attach(cid, cont, ifname)
            .in_host(self.host)
            .config(conf)
            .run()
    }

    /// ADD, which must succeed: its result.
    pub fn add(&self, cid: &str, cont: &Netns, conf: &Value) -> Value {
        self.run("ADD", cid, cont, conf).ok()
    }

    /// DEL, which must succeed.
    pub fn del(&self, cid: &str, cont: &Netns, conf: &Value) {
        self.run("DEL", cid, cont, conf).ok();
    }

    /// CHECK of `conf` with `prevResult` = `result`.
    pub fn check(&self, cid: &str, cont: &Netns, conf: &Value, result: &Value) -> PluginOutput {
        self.run("CHECK", cid, cont, &with_prev(conf, result))
    }

    /// ADD for `cid` in a namespace (tagged `tag`) that is deleted next,
    /// then DEL with its path, which no longer exists: DEL must succeed.
    pub fn del_after_netns_gone(&self, tag: &str, cid: &str, conf: &Value) {
        let path = {
            let gone = Netns::new(tag);
            self.add(cid, &gone, conf);
            gone.path()
        };
        Invocation::new(&self.plugin, "DEL")
            .attach_at(cid, &path, "eth0")
            .in_host(self.host)
            .config(conf)
            .run()
            .ok();
    }
}

/// The container's links but `lo`.
pub fn container_links(cont: &Netns) -> Vec<String> {
    cont.link_names()
        .into_iter()
        .filter(|n| n != "lo")
        .collect()
}

/// A config of `kind` on the parent [`MASTER`] (unless `extra` sets
/// `master`), host-local on `10.124.<n>.0/24` (no `ipam` when `n` is
/// None), merged with `extra` as in [`conf`].
pub fn master_conf(kind: &str, data: &DataDir, n: Option<u8>, extra: Value) -> Value {
    let mut extra = extra;
    if extra.get("master").is_none() {
        extra["master"] = json!(MASTER);
    }
    let subnet = n.map(|n| format!("10.124.{n}.0/24"));
    conf(kind, data, "1.0.0", subnet.as_deref(), extra)
}

/// A config of plugin `kind` with host-local on `subnet` in `data` (no
/// `ipam` when `subnet` is None), merged with `extra` at the top level.
pub fn conf(
    kind: &str,
    data: &DataDir,
    version: &str,
    subnet: Option<&str>,
    extra: Value,
) -> Value {
    let mut c = json!({"cniVersion": version, "name": data.name(), "type": kind});
    if let Some(s) = subnet {
        c["ipam"] = json!({
            "type": "host-local",
            "dataDir": data.path().display().to_string(),
            "ranges": [[{"subnet": s}]],
        });
    }
    if let (Some(m), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
    c
}

/// `conf` with `prevResult` set.
pub fn with_prev(conf: &Value, result: &Value) -> Value {
    let mut c = conf.clone();
    c["prevResult"] = result.clone();
    c
}

/// `ip -d -j link show <name>` in `ns`: the link's JSON, or Null.
pub fn link(ns: &Netns, name: &str) -> Value {
    let out = ns.exec("ip", &["-d", "-j", "link", "show", name]);
    if !out.status.success() {
        return Value::Null;
    }
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v.get(0).cloned())
        .unwrap_or(Value::Null)
}

/// Pings `dst` from `ns`, retrying for up to 5 s (neighbours take a moment).
pub fn ping(ns: &Netns, dst: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if ns
            .exec("ping", &["-c", "1", "-W", "1", dst])
            .status
            .success()
        {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits up to 5 s for `cond`.
pub fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The neighbour entry (lladdr) for `ip` on `dev` in `ns`, if any.
pub fn neighbour(ns: &Netns, dev: &str, ip: &str) -> Option<String> {
    ns.ip_json(&["neigh", "show", "dev", dev])
        .as_array()?
        .iter()
        .find(|n| n["dst"] == ip)
        .and_then(|n| n["lladdr"].as_str().map(str::to_string))
}

/// The first address of a result, without its prefix.
pub fn first_ip(result: &Value) -> String {
    result["ips"][0]["address"]
        .as_str()
        .and_then(|a| a.split('/').next())
        .unwrap_or_default()
        .to_string()
}

/// True when this kernel can create links of `kind` (`dummy`, `ipvlan`,
/// `vlan`, `vrf`), probed in a scratch namespace.
pub fn kernel_has(kind: &str) -> bool {
    let ns = Netns::new("kp");
    ns.exec_ok(
        "ip",
        &["link", "add", "p0", "type", "veth", "peer", "name", "p1"],
    );
    let args: Vec<&str> = match kind {
        "vlan" => vec![
            "link", "add", "link", "p0", "name", "k0", "type", "vlan", "id", "5",
        ],
        "ipvlan" => vec!["link", "add", "link", "p0", "name", "k0", "type", "ipvlan"],
        "vrf" => vec!["link", "add", "k0", "type", "vrf", "table", "10"],
        other => vec!["link", "add", "k0", "type", other],
    };
    ns.exec("ip", &args).status.success()
}

/// [`crate::skip_unless_root`], then [`skip_without_kind`]: the guard of
/// a test of a link kind this kernel may lack.
pub fn skip_unless_kind(test: &str, kind: &str) -> bool {
    crate::skip_unless_root(test) || skip_without_kind(test, kind)
}

/// For tests of a link kind this kernel may lack: true when the test
/// cannot run here, through [`crate::skip_without_kernel_feature`] (which
/// says so once, and fails the test where the VM runner requires every
/// feature). Either way the feature ledger learns that `test` needs the
/// kind (rcni_test_support).
pub fn skip_without_kind(test: &str, kind: &str) -> bool {
    let feature = format!("{kind} links");
    if kernel_has(kind) {
        crate::kernel_feature_present(test, &feature);
        return false;
    }
    crate::skip_without_kernel_feature(test, &feature);
    true
}

/// ADD, CHECK and DEL of `bridge` (a path: the IPAM plugin host-local is
/// found beside it, through `CNI_PATH`) with host-local on `<prefix>.0/24`
/// and a gateway, in a throwaway host namespace; namespaces, bridge and
/// container ID tagged `tag` (2 bytes). After ADD the container pings the
/// gateway; after DEL nothing is left.
pub fn bridge_add_check_del(bridge: &std::path::Path, tag: &str, prefix: &str) {
    let host = Netns::new(&format!("{tag}bh"));
    host.exec_ok("ip", &["link", "set", "lo", "up"]);
    let cont = Netns::new(&format!("{tag}bc"));
    let data = DataDir::new(&format!("{tag}br"));
    let c = conf(
        "bridge",
        &data,
        "1.1.0",
        Some(&format!("{prefix}.0/24")),
        json!({"bridge": format!("{tag}br0"), "isGateway": true}),
    );
    let run = |cmd: &str, c: &Value| {
        Invocation::new(bridge, cmd)
            .attach(&format!("{tag}-br"), &cont, "eth0")
            .in_host(&host)
            .config(c)
            .run()
    };
    let r = run("ADD", &c).ok();
    assert_eq!(first_ip(&r), format!("{prefix}.2"), "{r}");
    assert_eq!(host.veths().len(), 1, "{:?}", host.link_names());
    assert!(ping(&cont, &format!("{prefix}.1")), "container -> gateway");
    assert_eq!(run("CHECK", &with_prev(&c, &r)).ok(), Value::Null);
    assert_eq!(run("DEL", &with_prev(&c, &r)).ok(), Value::Null);
    assert!(host.veths().is_empty(), "{:?}", host.link_names());
    assert!(container_links(&cont).is_empty());
    assert!(data.reservations().is_empty());
}

/// ADDs of our child-link plugin `kind` (macvlan, ipvlan, vlan; `extra`
/// is merged into its config, e.g. `vlanId`) that fail after their IPAM
/// ADD started, before the link is made: no netns, no parent, an MTU above
/// the parent's. Each leaves nothing: no link in the container, no
/// reservation; host-local's `last_reserved_ip.0` shows its ADD did run
/// (and its DEL gave the address back). The range (`<prefix>.0/30`) has a
/// single address, so a reservation left behind by any failure would make
/// the final ADD fail; that ADD gets it, and its DEL leaves nothing.
/// Namespaces and data tagged `tag`; the segment is `<prefix>.0/24`.
pub fn failed_adds_after_ipam_leave_nothing(kind: &str, tag: &str, prefix: &str, extra: Value) {
    let plugin = crate::bin(kind);
    let seg = Segment::new(&format!("{tag}h"), prefix);
    let run = seg.plugin(&plugin);
    let data = DataDir::new(&format!("{tag}d"));
    let cont = Netns::new(&format!("{tag}c"));
    let with = |more: Value| {
        let mut c = conf(
            kind,
            &data,
            "1.0.0",
            Some(&format!("{prefix}.0/30")),
            json!({"master": MASTER}),
        );
        for v in [&extra, &more] {
            for (k, v) in v.as_object().into_iter().flatten() {
                c[k] = v.clone();
            }
        }
        c
    };
    let gone = format!("/run/netns/{}-no-such-ns", crate::unique(tag));
    let no_netns = Invocation::new(&plugin, "ADD")
        .attach("c-ei", &cont, "eth0")
        .env("CNI_NETNS", &gone)
        .in_host(&seg.host)
        .config(&with(json!({})))
        .run()
        .err();
    assert!(
        crate::error_msg(&no_netns).starts_with(&format!("failed to open netns {gone:?}")),
        "{no_netns}"
    );
    let nothing_left = |what: &str| {
        assert!(container_links(&cont).is_empty(), "{what}: a link left");
        assert!(
            data.reservations().is_empty(),
            "{what}: a reservation left: {:?}",
            data.files()
        );
    };
    nothing_left("no netns");
    for (more, want) in [
        (
            json!({"master": "nope0"}),
            r#"failed to lookup master "nope0": Link not found"#,
        ),
        (
            json!({"mtu": 1501}),
            "invalid MTU 1501, must be [0, master MTU(1500)]",
        ),
    ] {
        let e = run.run("ADD", "c-ei", &cont, &with(more.clone())).err();
        assert_eq!(e["msg"], want, "{more}");
        nothing_left(want);
    }
    assert!(
        data.files().iter().any(|f| f == "last_reserved_ip.0"),
        "IPAM ADD never ran: {:?}",
        data.files()
    );
    let c = with(json!({}));
    let r = run.add("c-ei", &cont, &c);
    assert_eq!(first_ip(&r), format!("{prefix}.2"), "{r}");
    run.del("c-ei", &cont, &c);
    nothing_left("DEL");
    assert!(seg.host.veths().is_empty(), "{:?}", seg.host.link_names());
}
