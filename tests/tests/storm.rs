//! Storms: many pods ADDed at once, then DELeted at once, through whole
//! plugin chains run by cni-runtime as libcni runs them, in a private
//! "host" namespace. Names tagged `st…`, subnets 10.168.0.0/16.
//!
//! The cold start is the case that once failed the Go plugins
//! (`iptables -N CNI-ADMIN: File exists`): a node with none of the shared
//! chains yet (CNI-HOSTPORT-*, CNI-FORWARD, CNI-ADMIN, the masquerade
//! chains), on which the first pods all arrive at once, so every ADD finds
//! the chains missing and would create them. Every ADD must succeed, no
//! address may be given twice, every DEL must succeed, and the DELs must
//! leave exactly what one pod's ADD and DEL leave on a fresh node (the
//! bridge and the shared chains, which stay after the reference's DEL too).
//! Nothing here depends on timing: the pods start together behind a
//! barrier and the outcome is checked, not measured.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{diff, reservations, say, snapshot};
use rcni_tests::tempdir::TempDir;
use rcni_tests::{FIREWALL_TOOLS, Netns, bin_dir, skip_unless, unique};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Barrier;

/// Pods per storm.
const PODS: usize = 30;

/// One chain on one fresh host namespace, its pods' namespaces and the
/// runtime's cache.
struct Node {
    host: Netns,
    dir: TempDir,
    list: cni_runtime::NetworkConfigList,
    cni: cni_runtime::CniConfig,
}

impl Node {
    /// A fresh host with the chain `plugins` (bridge `bridge`, subnet
    /// `subnet`) and nothing else: no bridge, no chain, no table.
    fn new(name: &str, bridge: &str, subnet: &str, kubernetes: bool) -> Node {
        let host = Netns::new("sth");
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        let dir = TempDir::new("st");
        let ipam = json!({"type": "host-local", "dataDir": dir.file("ipam"),
                          "ranges": [[{"subnet": subnet}]], "routes": [{"dst": "0.0.0.0/0"}]});
        let plugins = if kubernetes {
            json!([
                {"type": "bridge", "bridge": bridge, "isGateway": true, "ipMasq": true,
                 "promiscMode": true, "ipam": ipam},
                {"type": "portmap", "capabilities": {"portMappings": true}},
                {"type": "bandwidth", "capabilities": {"bandwidth": true}},
            ])
        } else {
            json!([
                {"type": "bridge", "bridge": bridge, "isGateway": true, "ipMasq": true,
                 "hairpinMode": true, "ipam": ipam},
                {"type": "portmap", "capabilities": {"portMappings": true}},
                {"type": "firewall", "backend": "iptables"},
                {"type": "tuning"},
            ])
        };
        let list = json!({"cniVersion": "1.0.0", "name": name, "plugins": plugins});
        let list = cni_runtime::NetworkConfigList::from_bytes(list.to_string().as_bytes()).unwrap();
        let cni = cni_runtime::CniConfig::new(vec![bin_dir()]).with_cache_dir(dir.join("cache"));
        Node {
            host,
            dir,
            list,
            cni,
        }
    }

    fn rt(&self, pod: usize, ns: &Netns, kubernetes: bool) -> cni_runtime::RuntimeConf {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "portMappings".into(),
            json!([{"hostPort": 21000 + pod, "containerPort": 80, "protocol": "tcp"}]),
        );
        if kubernetes {
            caps.insert(
                "bandwidth".into(),
                json!({"ingressRate": 10_000_000, "ingressBurst": 10_000_000,
                       "egressRate": 10_000_000, "egressBurst": 10_000_000}),
            );
        }
        cni_runtime::RuntimeConf {
            container_id: format!("st-pod-{pod}"),
            netns: ns.path().display().to_string(),
            ifname: "eth0".into(),
            args: Vec::new(),
            capability_args: caps,
        }
    }

    /// ADD (`add`) or DEL of every pod at once, each from its own thread
    /// in the host namespace, released together; each pod's outcome (the
    /// addresses of its result on ADD).
    fn storm(
        &self,
        pods: &[Netns],
        add: bool,
        kubernetes: bool,
    ) -> Vec<Result<Vec<String>, cni_runtime::CniError>> {
        let start = Barrier::new(pods.len());
        std::thread::scope(|s| {
            let handles: Vec<_> = pods
                .iter()
                .enumerate()
                .map(|(i, ns)| {
                    let (start, rt) = (&start, self.rt(i, ns, kubernetes));
                    s.spawn(move || {
                        self.host.run_in(|| {
                            start.wait();
                            if add {
                                self.cni.add_network_list(&self.list, &rt).map(|r| {
                                    r.ips.iter().map(|ip| ip.address.to_string()).collect()
                                })
                            } else {
                                self.cni
                                    .del_network_list(&self.list, &rt)
                                    .map(|()| Vec::new())
                            }
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// host-local's reservation files.
    fn reservations(&self, name: &str) -> usize {
        reservations(&self.dir.join("ipam").join(name))
    }
}

/// The pods whose ADD or DEL failed, with the error.
fn failed<T>(outcomes: &[Result<T, cni_runtime::CniError>]) -> Vec<String> {
    outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().err().map(|e| format!("pod {i}: {e:?}")))
        .collect()
}

/// A snapshot without MAC addresses (two nodes' bridges differ in that
/// only).
fn state(host: &Netns) -> Vec<String> {
    snapshot(host)
        .into_iter()
        .map(|l| {
            l.split(' ')
                .filter(|w| !w.starts_with("mac="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn cold_start(test: &str, kubernetes: bool, subnet: &str) {
    if skip_unless(test, FIREWALL_TOOLS) {
        return;
    }
    let name = unique("stn");
    let bridge = unique("stb");
    // What one pod's ADD and DEL leave on a fresh node: the bridge with
    // its address and the shared chains.
    let reference = Node::new(&name, &bridge, subnet, kubernetes);
    let pod = vec![Netns::new("stc")];
    for add in [true, false] {
        let out = reference.storm(&pod, add, kubernetes);
        assert!(out[0].is_ok(), "one pod, ADD {add}: {:?}", out[0]);
    }
    let expected = state(&reference.host);

    let node = Node::new(&name, &bridge, subnet, kubernetes);
    let pods: Vec<Netns> = (0..PODS).map(|_| Netns::new("stc")).collect();
    let adds = node.storm(&pods, true, kubernetes);
    let add_errs = failed(&adds);
    let ips: Vec<String> = adds.iter().flatten().flatten().cloned().collect();
    let distinct: BTreeSet<&String> = ips.iter().collect();
    let reserved = node.reservations(&name);
    let dels = node.storm(&pods, false, kubernetes);
    let del_errs = failed(&dels);
    let left = diff(&expected, &state(&node.host));
    say(&format!(
        "storm: {PODS} ADDs at once on a fresh node ({}): {} failed, {} addresses ({} distinct), \
         {reserved} reservations; {PODS} DELs at once: {} failed, {} reservations, {} changes left",
        if kubernetes {
            "bridge+portmap+bandwidth"
        } else {
            "bridge+portmap+firewall+tuning"
        },
        add_errs.len(),
        ips.len(),
        distinct.len(),
        del_errs.len(),
        node.reservations(&name),
        left.len()
    ));
    assert!(add_errs.is_empty(), "{add_errs:#?}");
    assert_eq!(ips.len(), PODS, "{ips:?}");
    assert_eq!(distinct.len(), PODS, "addresses given twice: {ips:?}");
    assert_eq!(reserved, PODS);
    assert!(del_errs.is_empty(), "{del_errs:#?}");
    assert_eq!(node.reservations(&name), 0);
    assert!(left.is_empty(), "{left:#?}");
    let cached = std::fs::read_dir(node.dir.join("cache").join("results"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(cached, 0, "result cache entries left");
}

/// Podman's chain (bridge with ipMasq, portmap, firewall, tuning): 30
/// ADDs at once on a node without any of the chains, then 30 DELs.
#[test]
fn st_cold_start_podman_chain() {
    cold_start("st_cold_start_podman_chain", false, "10.168.0.0/24");
}

/// The Kubernetes chain (bridge with ipMasq, portmap, bandwidth), the
/// same way.
#[test]
fn st_cold_start_kubernetes_chain() {
    cold_start("st_cold_start_kubernetes_chain", true, "10.168.1.0/24");
}
