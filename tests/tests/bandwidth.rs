//! The bandwidth plugin, exec'd as a runtime does, chained after our ptp
//! (host-local IPAM) in a private "host" namespace (`bwh…`) with one
//! container namespace per attachment (`bwc…`), subnets 10.123.N.0/24.
//! Namespaces and data directories go on drop, also when a test fails;
//! the ifbs live in the private host namespace and go with it.
//!
//! What is checked is the kernel's state, read back with `tc -j` and
//! `ip -j`: qdiscs and their parameters, the filter's redirect target, the
//! ifb (name, MTU, queue length, alias), compared with what the Go
//! reference (/usr/lib/cni/bandwidth 1.1.1, cniVersion 1.0.0) makes for the
//! same config in the same host; and traffic: a TCP transfer through each
//! shaped direction lands within ±25% of the configured rate.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::host_local_util::DataDir;
use rcni_tests::{Invocation, Netns, PluginOutput, bin, go_bin, skip_unless_root, unique};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The private host: lo up.
struct World {
    host: Netns,
    data: DataDir,
    n: u8,
}

/// One container attached with ptp.
struct Pod {
    cont: Netns,
    cid: String,
    /// ptp's result: the prevResult of bandwidth.
    prev: Value,
}

impl World {
    fn new(n: u8) -> World {
        let host = Netns::new("bwh");
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        World {
            host,
            data: DataDir::new("bwn"),
            n,
        }
    }

    fn name(&self) -> &str {
        self.data.name()
    }

    fn ptp_conf(&self, version: &str) -> Value {
        json!({
            "cniVersion": version,
            "name": self.name(),
            "type": "ptp",
            "ipam": {
                "type": "host-local",
                "dataDir": self.data.path().display().to_string(),
                "ranges": [[{"subnet": format!("10.123.{}.0/24", self.n)}]],
            },
        })
    }

    fn pod(&self) -> Pod {
        self.pod_v("1.0.0")
    }

    /// A pod attached with ptp at config version `version`.
    fn pod_v(&self, version: &str) -> Pod {
        let cont = Netns::new("bwc");
        let cid = unique("bwcid");
        let prev = Invocation::new(bin("ptp"), "ADD")
            .attach(&cid, &cont, "eth0")
            .in_host(&self.host)
            .config(&self.ptp_conf(version))
            .run()
            .ok();
        Pod { cont, cid, prev }
    }

    /// A bandwidth config with `limits` at the top level and the pod's
    /// ptp result as prevResult.
    fn conf(&self, pod: &Pod, version: &str, limits: Value) -> Value {
        let mut c = json!({
            "cniVersion": version,
            "name": self.name(),
            "type": "bandwidth",
            "prevResult": pod.prev,
        });
        for (k, v) in limits.as_object().cloned().unwrap_or_default() {
            c[k] = v;
        }
        c
    }

    fn run(&self, plugin: &Path, cmd: &str, pod: &Pod, conf: &Value) -> PluginOutput {
        Invocation::new(plugin, cmd)
            .attach(&pod.cid, &pod.cont, "eth0")
            .in_host(&self.host)
            .config(conf)
            .run()
    }

    fn tc(&self, args: &[&str]) -> Value {
        let mut full = vec!["-j"];
        full.extend_from_slice(args);
        let text = self.host.exec_ok("tc", &full);
        serde_json::from_str(if text.trim().is_empty() { "[]" } else { &text }).unwrap()
    }

    /// The qdiscs of `dev` (none when there is no such device).
    fn qdiscs(&self, dev: &str) -> Vec<Value> {
        let out = self.host.exec("tc", &["-j", "qdisc", "show", "dev", dev]);
        if !out.status.success() {
            return Vec::new();
        }
        serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .filter(|q| q["kind"] != "noqueue")
            .collect()
    }

    fn link(&self, dev: &str) -> Option<Value> {
        let out = self.host.exec("ip", &["-j", "-d", "link", "show", dev]);
        if !out.status.success() {
            return None;
        }
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v.get(0).cloned()
    }

    /// The ifbs of the host namespace, by name.
    fn ifbs(&self) -> Vec<String> {
        self.host
            .ip_json(&["-d", "link", "show", "type", "ifb"])
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|l| l["ifname"].as_str().map(str::to_string))
            .collect()
    }

    /// The device the first action of the ingress filter redirects to.
    fn redirect_target(&self, dev: &str) -> Option<String> {
        let filters = self.tc(&["filter", "show", "dev", dev, "ingress"]);
        filters.as_array()?.iter().find_map(|f| {
            f["options"]["actions"]
                .get(0)
                .and_then(|a| a["to_dev"].as_str())
                .map(str::to_string)
        })
    }
}

impl Pod {
    fn host_veth(&self) -> String {
        self.prev["interfaces"][0]["name"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn ip(&self) -> String {
        let a = self.prev["ips"][0]["address"].as_str().unwrap();
        a.split('/').next().unwrap().to_string()
    }

    fn gateway(&self) -> String {
        self.prev["ips"][0]["gateway"].as_str().unwrap().to_string()
    }
}

fn ours() -> PathBuf {
    bin("bandwidth")
}

fn go() -> Option<PathBuf> {
    let g = go_bin("bandwidth");
    if g.is_none() {
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIP the Go comparison: /usr/lib/cni/bandwidth missing"
        );
    }
    g
}

/// `bwp` + sha512(network + containerID)[..12].
fn ifb_name(network: &str, cid: &str) -> String {
    let out = std::process::Command::new("sha512sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .unwrap()
                .write_all(format!("{network}{cid}").as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    format!("bwp{}", &String::from_utf8_lossy(&out.stdout)[..12])
}

fn both(rate: u64, burst: u64) -> Value {
    json!({"ingressRate": rate, "ingressBurst": burst, "egressRate": rate, "egressBurst": burst})
}

/// The qdiscs on a pod's host veth and on its ifb, as tc shows them.
fn shaping(w: &World, pod: &Pod) -> (Vec<Value>, Vec<Value>) {
    let ifb = ifb_name(w.name(), &pod.cid);
    (w.qdiscs(&pod.host_veth()), w.qdiscs(&ifb))
}

/// Everything tc and ip show of one attachment's shaping, for comparison
/// between ours and Go's: qdiscs with their options, the redirect target
/// (as "IFB"), the ifb's MTU and queue length.
fn observed(w: &World, pod: &Pod) -> Value {
    let ifb = ifb_name(w.name(), &pod.cid);
    let (veth, ifbq) = shaping(w, pod);
    let link = w.link(&ifb);
    json!({
        "veth": veth,
        "ifb": ifbq,
        "redirect": w.redirect_target(&pod.host_veth()).map(|t| if t == ifb { "IFB".to_string() } else { t }),
        "ifb_mtu": link.as_ref().map(|l| l["mtu"].clone()),
        // ip leaves txqlen out when it is 0.
        "ifb_qlen": link.as_ref().map(|l| l.get("txqlen").cloned().unwrap_or(json!(0))),
        "ifb_up": link.as_ref().map(|l| l["flags"].as_array().is_some_and(|f| f.contains(&json!("UP")))),
        "veth_mtu": w.link(&pod.host_veth()).map(|l| l["mtu"].clone()),
    })
}

#[test]
fn shapes_as_the_reference_does() {
    if skip_unless_root("shapes_as_the_reference_does") {
        return;
    }
    let w = World::new(1);
    for limits in [
        both(1_000_000, 1_000_000),
        both(8, 8),
        json!({"ingressRate": 16, "ingressBurst": 8, "egressRate": 123_456_789, "egressBurst": 12_000}),
        // 5 GB/s: TCA_TBF_RATE64.
        both(40_000_000_000, 8_000_000),
        json!({"ingressRate": 10_000_000, "ingressBurst": 80_000}),
        json!({"egressRate": 10_000_000, "egressBurst": 80_000}),
    ] {
        let pod = w.pod();
        let conf = w.conf(&pod, "1.0.0", limits.clone());
        let result = w.run(&ours(), "ADD", &pod, &conf).ok();
        let seen = observed(&w, &pod);
        let ifb = ifb_name(w.name(), &pod.cid);
        if limits.get("egressRate").is_some() {
            // The ifb is appended to the result, with its MAC.
            let ifaces = result["interfaces"].as_array().unwrap();
            let last = ifaces.last().unwrap();
            assert_eq!(last["name"], json!(ifb), "{result}");
            assert_eq!(last["mac"], w.link(&ifb).unwrap()["address"], "{result}");
            assert!(last.get("sandbox").is_none());
            assert_eq!(
                ifaces.len(),
                pod.prev["interfaces"].as_array().unwrap().len() + 1
            );
            assert_eq!(seen["redirect"], json!("IFB"), "{seen}");
            assert_eq!(seen["ifb_mtu"], seen["veth_mtu"], "{seen}");
            assert_eq!(seen["ifb_qlen"], json!(0), "{seen}");
            assert_eq!(seen["ifb_up"], json!(true), "{seen}");
            let alias = w.link(&ifb).unwrap()["ifalias"].clone();
            assert_eq!(
                alias,
                json!(format!(
                    "cni-bandwidth network={} containerID={} ifname=eth0",
                    w.name(),
                    pod.cid
                ))
            );
        } else {
            assert_eq!(result["interfaces"], pod.prev["interfaces"]);
            assert!(w.link(&ifb).is_none());
            assert_eq!(seen["redirect"], Value::Null);
        }
        // CHECK agrees.
        let with_prev = {
            let mut c = conf.clone();
            c["prevResult"] = result.clone();
            c
        };
        w.run(&ours(), "CHECK", &pod, &with_prev).ok();

        let Some(go) = go() else { continue };
        let gpod = w.pod();
        w.run(&go, "ADD", &gpod, &w.conf(&gpod, "1.0.0", limits.clone()))
            .ok();
        assert_eq!(seen, observed(&w, &gpod), "{limits}");
    }
}

#[test]
fn kubernetes_default_burst() {
    if skip_unless_root("kubernetes_default_burst") {
        return;
    }
    // containerd puts burst = MaxUint32 bits; the reference's buffer
    // overflows (wraps on amd64), ours saturates: same rate and limit, a
    // larger (closer to asked) burst.
    let w = World::new(2);
    let rc = |pod: &Pod| {
        let mut c = w.conf(pod, "1.0.0", json!({}));
        c["runtimeConfig"] = json!({"bandwidth": both(1_000_000, u64::from(u32::MAX))});
        c
    };
    let pod = w.pod();
    w.run(&ours(), "ADD", &pod, &rc(&pod)).ok();
    let (veth, ifb) = shaping(&w, &pod);
    assert_eq!(veth[0]["options"]["rate"], json!(125_000));
    assert_eq!(veth[0]["options"]["burst"], json!(34_359_738), "{veth:?}");
    assert_eq!(ifb[0]["options"], veth[0]["options"]);
    let Some(go) = go() else { return };
    let gpod = w.pod();
    w.run(&go, "ADD", &gpod, &rc(&gpod)).ok();
    let (gveth, _) = shaping(&w, &gpod);
    assert_eq!(gveth[0]["options"]["rate"], json!(125_000));
    assert_eq!(gveth[0]["options"]["burst"], json!(21_474_835), "{gveth:?}");
}

#[test]
fn runtime_config_and_precedence() {
    if skip_unless_root("runtime_config_and_precedence") {
        return;
    }
    let w = World::new(3);
    // runtimeConfig alone, in each version that has chaining; the ifb is
    // appended to the result in that version's format.
    for v in ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
        let pod = w.pod_v(v);
        let mut c = w.conf(&pod, v, json!({}));
        c["runtimeConfig"] = json!({"bandwidth": {"ingressRate": 2_000_000, "ingressBurst": 40_000, "egressRate": 8_000_000, "egressBurst": 40_000}});
        let res = w.run(&ours(), "ADD", &pod, &c).ok();
        assert_eq!(res["cniVersion"], json!(v));
        let mut want = pod.prev.clone();
        let ifb = ifb_name(w.name(), &pod.cid);
        let mac = w.link(&ifb).unwrap()["address"].clone();
        want["interfaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": ifb, "mac": mac}));
        assert_eq!(res, want, "{v}");
        let (veth, ifbq) = shaping(&w, &pod);
        assert_eq!(veth[0]["options"]["rate"], json!(250_000));
        assert_eq!(ifbq[0]["options"]["rate"], json!(1_000_000));
    }
    // Any top-level key wins, even 0: then nothing is shaped.
    let pod = w.pod();
    let mut c = w.conf(&pod, "1.0.0", json!({"egressRate": 0}));
    c["runtimeConfig"] = json!({"bandwidth": {"ingressRate": 2_000_000, "ingressBurst": 40_000}});
    let res = w.run(&ours(), "ADD", &pod, &c).ok();
    assert_eq!(res, pod.prev);
    assert!(shaping(&w, &pod).0.is_empty());
    assert!(w.link(&ifb_name(w.name(), &pod.cid)).is_none());
}

/// A link's byte counter (`rx` or tx) in `ns` and the time it was read,
/// from /proc/net/dev on a thread in the namespace (read again should the
/// read itself have been descheduled).
fn link_bytes(ns: &Netns, link: &str, rx: bool) -> (Instant, u64) {
    ns.run_in(|| {
        loop {
            let before = Instant::now();
            let dev = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
            let after = Instant::now();
            if after - before > Duration::from_millis(20) {
                continue;
            }
            // "  <name>: <rx bytes> <7 more rx counters> <tx bytes> ..."
            let counters = dev
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(name, _)| name.trim() == link)
                .map(|(_, c)| c.split_whitespace().collect::<Vec<_>>())
                .unwrap_or_else(|| panic!("no {link} in /proc/net/dev"));
            let bytes = counters[if rx { 0 } else { 8 }].parse().unwrap();
            return (before + (after - before) / 2, bytes);
        }
    })
}

/// Runs a TCP transfer from `client_ns` to `server` (listening in
/// `server_ns`) and returns the rate, in bits per second, at which the
/// shaped link `counter` (namespace, link, rx or tx) passed it over 3 s,
/// starting 1 s in (the bucket's initial burst left out). Kernel counters
/// and their read times, not the receiver's reads: under user-mode-linux
/// on a loaded host a descheduled receiver read a backlog late and the
/// rate came out 26% high or low.
fn measured_rate(
    server_ns: &Netns,
    client_ns: &Netns,
    server: &str,
    counter: (&Netns, &str, bool),
) -> f64 {
    use std::sync::atomic::{AtomicBool, Ordering};
    let addr: SocketAddr = format!("{server}:5201").parse().unwrap();
    let listener = server_ns.run_in(|| TcpListener::bind(addr).unwrap());
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; 65536];
            while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
        });
        let sender = s.spawn(|| {
            client_ns.run_in(|| {
                let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
                conn.set_write_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let chunk = vec![0x5au8; 16384];
                while !done.load(Ordering::Relaxed) {
                    match conn.write(&chunk) {
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
            })
        });
        let (ns, link, rx) = counter;
        std::thread::sleep(Duration::from_secs(1));
        let (t0, b0) = link_bytes(ns, link, rx);
        std::thread::sleep(Duration::from_secs(3));
        let (t1, b1) = link_bytes(ns, link, rx);
        done.store(true, Ordering::Relaxed);
        sender.join().unwrap();
        (b1 - b0) as f64 * 8.0 / (t1 - t0).as_secs_f64()
    })
}

#[test]
fn measured_rate_in_both_directions() {
    if skip_unless_root("measured_rate_in_both_directions") {
        return;
    }
    let w = World::new(4);
    let pod = w.pod();
    pod.cont.exec_ok("ip", &["link", "set", "lo", "up"]);
    // 1 Mbit/s into the container, 0.5 Mbit/s out; buckets of 32 KB. Low
    // enough that the sender outruns the bucket however slow the kernel it
    // runs on: under user-mode-linux on a loaded host, an unshaped stream
    // was measured at 2.7 Mbit/s, so a 4 Mbit/s limit read as too strict.
    let (ingress, egress) = (1_000_000.0, 500_000.0);
    let limits = json!({"ingressRate": ingress as u64, "ingressBurst": 256_000, "egressRate": egress as u64, "egressBurst": 256_000});
    w.run(&ours(), "ADD", &pod, &w.conf(&pod, "1.0.0", limits))
        .ok();
    // Into the container: what its eth0 received (shaped on the host
    // veth); out of it: what the ifb sent on (shaped there).
    let into = measured_rate(&pod.cont, &w.host, &pod.ip(), (&pod.cont, "eth0", true));
    let ifb = ifb_name(w.name(), &pod.cid);
    let out_of = measured_rate(&w.host, &pod.cont, &pod.gateway(), (&w.host, &ifb, false));
    let _ = writeln!(
        std::io::stderr().lock(),
        "bandwidth: measured {:.3} Mbit/s into ({} set), {:.3} Mbit/s out of ({} set) the container",
        into / 1e6,
        ingress / 1e6,
        out_of / 1e6,
        egress / 1e6
    );
    // The upper bound is what shows the shaping; the lower one only that
    // the rate is not mis-scaled (bits for bytes, k for M: 8x, 1000x off).
    // It is 0.5x, not 0.75x: in user-mode-linux 7.2 beside three other VMs
    // on two cores, the container's sender could not keep the 0.5 Mbit/s
    // bucket full (0.67x of the set rate; 0.90x in the same VM alone).
    assert!(
        (0.5 * ingress..=1.25 * ingress).contains(&into),
        "ingress {into} bit/s"
    );
    assert!(
        (0.5 * egress..=1.25 * egress).contains(&out_of),
        "egress {out_of} bit/s"
    );
}

#[test]
fn check_sees_changes() {
    if skip_unless_root("check_sees_changes") {
        return;
    }
    let w = World::new(5);
    let pod = w.pod();
    let conf = w.conf(&pod, "1.0.0", both(1_000_000, 100_000));
    let res = w.run(&ours(), "ADD", &pod, &conf).ok();
    let mut chk = conf.clone();
    chk["prevResult"] = res;
    w.run(&ours(), "CHECK", &pod, &chk).ok();
    // Another rate in the config.
    let mut other = chk.clone();
    other["ingressRate"] = json!(2_000_000);
    let e = w.run(&ours(), "CHECK", &pod, &other).err();
    assert!(
        e["msg"].as_str().unwrap().contains("Rate doesn't match"),
        "{e}"
    );
    other = chk.clone();
    other["egressBurst"] = json!(200_000);
    let e = w.run(&ours(), "CHECK", &pod, &other).err();
    assert!(
        e["msg"].as_str().unwrap().contains("Limit doesn't match"),
        "{e}"
    );
    // The redirect removed.
    let veth = pod.host_veth();
    w.host
        .exec_ok("tc", &["qdisc", "del", "dev", &veth, "ingress"]);
    let e = w.run(&ours(), "CHECK", &pod, &chk).err();
    assert!(
        e["msg"].as_str().unwrap().contains("no ingress qdisc"),
        "{e}"
    );
    // The ifb removed.
    w.host
        .exec_ok("ip", &["link", "del", &ifb_name(w.name(), &pod.cid)]);
    let e = w.run(&ours(), "CHECK", &pod, &chk).err();
    assert!(e["msg"].as_str().unwrap().contains("get ifb device"), "{e}");
    // The tbf on the veth removed.
    w.host
        .exec_ok("tc", &["qdisc", "del", "dev", &veth, "root"]);
    let e = w.run(&ours(), "CHECK", &pod, &chk).err();
    assert!(e["msg"].as_str().unwrap().contains("qdisc"), "{e}");
}

#[test]
fn del_is_idempotent_and_allows_a_new_add() {
    if skip_unless_root("del_is_idempotent_and_allows_a_new_add") {
        return;
    }
    let w = World::new(6);
    let pod = w.pod();
    let conf = w.conf(&pod, "1.0.0", both(1_000_000, 100_000));
    w.run(&ours(), "ADD", &pod, &conf).ok();
    assert_eq!(w.ifbs(), vec![ifb_name(w.name(), &pod.cid)]);
    for _ in 0..2 {
        w.run(&ours(), "DEL", &pod, &conf).ok();
        assert!(w.ifbs().is_empty());
        assert!(shaping(&w, &pod).0.is_empty(), "{:?}", shaping(&w, &pod).0);
    }
    // The veth survived: a new ADD on it works (the reference's fails on
    // its leftover qdiscs).
    w.run(&ours(), "ADD", &pod, &conf).ok();
    assert_eq!(w.ifbs().len(), 1);
    // DEL without prevResult, netns or limits: the ifb still goes.
    let bare = json!({"cniVersion": "1.0.0", "name": w.name(), "type": "bandwidth"});
    Invocation::new(ours(), "DEL")
        .env("CNI_CONTAINERID", &pod.cid)
        .env("CNI_IFNAME", "eth0")
        .in_host(&w.host)
        .config(&bare)
        .run()
        .ok();
    assert!(w.ifbs().is_empty());
}

#[test]
fn del_with_the_netns_gone() {
    if skip_unless_root("del_with_the_netns_gone") {
        return;
    }
    let w = World::new(7);
    let pod = w.pod();
    let conf = w.conf(&pod, "1.0.0", both(1_000_000, 100_000));
    w.run(&ours(), "ADD", &pod, &conf).ok();
    let Pod { cont, cid, prev } = pod;
    let path = cont.path();
    drop(cont);
    assert!(!path.exists());
    let out = Invocation::new(ours(), "DEL")
        .attach_at(&cid, &path, "eth0")
        .in_host(&w.host)
        .config(&conf)
        .run();
    out.ok();
    assert!(w.ifbs().is_empty());
    let _ = prev;
}

#[test]
fn gc_removes_ifbs_of_this_network_only() {
    if skip_unless_root("gc_removes_ifbs_of_this_network_only") {
        return;
    }
    let w = World::new(8);
    let keep = w.pod();
    let stale = w.pod();
    let limits = json!({"egressRate": 1_000_000, "egressBurst": 100_000});
    for pod in [&keep, &stale] {
        w.run(&ours(), "ADD", pod, &w.conf(pod, "1.1.0", limits.clone()))
            .ok();
    }
    // Another network's ifb in the same host, made by us and by Go.
    let other = w.pod();
    let mut oc = w.conf(&other, "1.0.0", limits.clone());
    oc["name"] = json!("bw-other-net");
    w.run(&ours(), "ADD", &other, &oc).ok();
    let go_pod = w.pod();
    if let Some(go) = go() {
        w.run(
            &go,
            "ADD",
            &go_pod,
            &w.conf(&go_pod, "1.0.0", limits.clone()),
        )
        .ok();
    }
    // What an ADD killed between creating and labelling its ifb leaves.
    w.host
        .exec_ok("ip", &["link", "add", "bwp0123456789ab", "type", "ifb"]);
    let before = w.ifbs();
    let gc = json!({
        "cniVersion": "1.1.0", "name": w.name(), "type": "bandwidth",
        "cni.dev/valid-attachments": [{"containerID": keep.cid, "ifname": "eth0"}],
    });
    Invocation::new(ours(), "GC")
        .in_host(&w.host)
        .config(&gc)
        .run()
        .ok();
    let after = w.ifbs();
    let gone: Vec<&String> = before.iter().filter(|i| !after.contains(i)).collect();
    let mut want = vec![
        ifb_name(w.name(), &stale.cid),
        "bwp0123456789ab".to_string(),
    ];
    want.sort();
    let mut gone: Vec<String> = gone.into_iter().cloned().collect();
    gone.sort();
    assert_eq!(gone, want, "before {before:?} after {after:?}");
    assert!(after.contains(&ifb_name(w.name(), &keep.cid)));
    assert!(after.contains(&ifb_name("bw-other-net", &other.cid)));
    // GC with nothing valid: everything of this network goes.
    let none = json!({"cniVersion": "1.1.0", "name": w.name(), "type": "bandwidth"});
    Invocation::new(ours(), "GC")
        .in_host(&w.host)
        .config(&none)
        .run()
        .ok();
    assert!(!w.ifbs().contains(&ifb_name(w.name(), &keep.cid)));
    assert!(w.ifbs().contains(&ifb_name("bw-other-net", &other.cid)));
}

#[test]
fn status_and_version() {
    if skip_unless_root("status_and_version") {
        return;
    }
    let w = World::new(9);
    let conf = json!({"cniVersion": "1.1.0", "name": w.name(), "type": "bandwidth"});
    Invocation::new(ours(), "STATUS")
        .in_host(&w.host)
        .config(&conf)
        .run()
        .ok();
    let v = Invocation::new(ours(), "VERSION").run().ok();
    assert_eq!(
        v["supportedVersions"],
        json!(["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"])
    );
}

#[test]
fn bad_input_leaves_nothing() {
    if skip_unless_root("bad_input_leaves_nothing") {
        return;
    }
    let w = World::new(10);
    let pod = w.pod();
    for (limits, want) in [
        (
            json!({"ingressRate": 1000}),
            "ingressRate is 1000 but ingressBurst is not set",
        ),
        (
            json!({"egressBurst": 1000}),
            "egressBurst is 1000 but egressRate is not set",
        ),
        (
            json!({"egressRate": 8000, "egressBurst": 34_359_738_360u64}),
            "burst cannot be more than 4GB",
        ),
        (
            json!({"ingressRate": -1, "ingressBurst": 8}),
            "ingressRate must be a whole number",
        ),
        (
            json!({"ingressRate": 8000, "ingressBurst": 800, "egressRate": 4, "egressBurst": 800}),
            "egressRate is 4",
        ),
    ] {
        let e = w
            .run(&ours(), "ADD", &pod, &w.conf(&pod, "1.0.0", limits.clone()))
            .err();
        assert_eq!(e["code"], json!(7), "{e}");
        assert!(e["msg"].as_str().unwrap().contains(want), "{limits}: {e}");
        assert!(w.ifbs().is_empty());
        assert!(shaping(&w, &pod).0.is_empty());
    }
    // A failure midway (the ifb's name is taken) undoes the ingress tbf.
    let ifb = ifb_name(w.name(), &pod.cid);
    w.host.exec_ok(
        "ip",
        &[
            "link", "add", &ifb, "type", "veth", "peer", "name", "bwtaken",
        ],
    );
    let e = w
        .run(
            &ours(),
            "ADD",
            &pod,
            &w.conf(&pod, "1.0.0", both(1_000_000, 100_000)),
        )
        .err();
    assert!(e["msg"].as_str().unwrap().starts_with("adding link"), "{e}");
    assert!(shaping(&w, &pod).0.is_empty(), "{:?}", shaping(&w, &pod).0);
    w.host.exec_ok("ip", &["link", "del", &ifb]);
    // Not a veth: no veth peer.
    let mut c = w.conf(&pod, "1.0.0", both(1_000_000, 100_000));
    c["prevResult"]["interfaces"] = json!([{"name": "lo"}]);
    let e = Invocation::new(ours(), "ADD")
        .attach(&pod.cid, &pod.cont, "lo")
        .in_host(&w.host)
        .config(&c)
        .run()
        .err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("was not a veth interface"),
        "{e}"
    );
    // The veth is not among prevResult's host interfaces.
    c["prevResult"]["interfaces"] = json!([{"name": "elsewhere"}]);
    let e = w.run(&ours(), "ADD", &pod, &c).err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("no veth peer of container interface found"),
        "{e}"
    );
    // No prevResult, with limits.
    let mut c = w.conf(&pod, "1.0.0", both(1_000_000, 100_000));
    c.as_object_mut().unwrap().remove("prevResult");
    let e = w.run(&ours(), "ADD", &pod, &c).err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("must be called as chained plugin"),
        "{e}"
    );
    assert!(w.ifbs().is_empty());
    assert!(shaping(&w, &pod).0.is_empty());
    // No prevResult and no limits: an empty result (the reference panics).
    c = json!({"cniVersion": "1.0.0", "name": w.name(), "type": "bandwidth"});
    let r = w.run(&ours(), "ADD", &pod, &c).ok();
    assert_eq!(r, json!({"cniVersion": "1.0.0"}));
}

/// ADD killed at random moments; afterwards DEL (half the runs) or GC
/// (the others) leaves no ifb and no qdisc, and ADD works again.
#[test]
fn kill9_during_add_then_del_or_gc() {
    if skip_unless_root("kill9_during_add_then_del_or_gc") {
        return;
    }
    let w = World::new(11);
    let pod = w.pod();
    let conf = w.conf(&pod, "1.1.0", both(1_000_000, 100_000));
    let gc = json!({"cniVersion": "1.1.0", "name": w.name(), "type": "bandwidth"});
    let mut killed = 0;
    for run in 0..20u64 {
        let mut child = std::process::Command::new("ip")
            .args(["netns", "exec", w.host.name()])
            .arg(ours())
            .env_clear()
            .env("CNI_COMMAND", "ADD")
            .env("CNI_CONTAINERID", &pod.cid)
            .env("CNI_NETNS", pod.cont.path())
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", "/nonexistent")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(conf.to_string().as_bytes())
            .unwrap();
        std::thread::sleep(Duration::from_micros(500 + (run * 397) % 4000));
        let _ = child.kill();
        let status = child.wait().unwrap();
        if !status.success() {
            killed += 1;
        }
        if run % 2 == 0 {
            w.run(&ours(), "DEL", &pod, &conf).ok();
            assert!(shaping(&w, &pod).0.is_empty(), "run {run}");
        } else {
            Invocation::new(ours(), "GC")
                .in_host(&w.host)
                .config(&gc)
                .run()
                .ok();
            assert!(w.ifbs().is_empty(), "run {run} after GC: {:?}", w.ifbs());
            // GC does not touch the host veth (it goes with its container);
            // this one lives on, so DEL clears its qdiscs for the next ADD.
            w.run(&ours(), "DEL", &pod, &conf).ok();
        }
        assert!(w.ifbs().is_empty(), "run {run}: {:?}", w.ifbs());
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "bandwidth kill9: {killed}/20 killed mid-ADD"
    );
    w.run(&ours(), "ADD", &pod, &conf).ok();
}

/// A node moving between the implementations: each one's DEL removes what
/// the other's ADD made (same ifb name), and CHECK accepts it.
#[test]
fn ours_and_go_undo_each_other() {
    if skip_unless_root("ours_and_go_undo_each_other") {
        return;
    }
    let Some(go) = go() else { return };
    let w = World::new(12);
    let limits = both(2_000_000, 200_000);
    // Go's ADD, our CHECK and DEL.
    let pod = w.pod();
    let conf = w.conf(&pod, "1.0.0", limits.clone());
    let res = w.run(&go, "ADD", &pod, &conf).ok();
    let mut chk = conf.clone();
    chk["prevResult"] = res;
    w.run(&ours(), "CHECK", &pod, &chk).ok();
    w.run(&ours(), "DEL", &pod, &conf).ok();
    assert!(w.ifbs().is_empty());
    assert!(shaping(&w, &pod).0.is_empty());
    // Our ADD, Go's CHECK and DEL (which leaves the veth's qdiscs, as it
    // always does).
    let pod = w.pod();
    let conf = w.conf(&pod, "1.0.0", limits);
    let res = w.run(&ours(), "ADD", &pod, &conf).ok();
    let mut chk = conf.clone();
    chk["prevResult"] = res;
    w.run(&go, "CHECK", &pod, &chk).ok();
    w.run(&go, "DEL", &pod, &conf).ok();
    assert!(w.ifbs().is_empty());
}
