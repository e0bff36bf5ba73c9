//! Concurrency beyond the existing tests (32 parallel bridge ADDs, 64
//! parallel host-local ADDs): 64 processes adding to one bridge network at
//! once, and ADDs racing DELs on the same bridge and the same portmap tables
//! (iptables and nftables). Private host namespaces tagged `cx…`, subnets
//! 10.80.2x.0/24.
//!
//! Prints `concurrency: ...` lines with duplicates and failures.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{cni_env, diff, reservations, say, snapshot};
use rcni_tests::tempdir::TempDir;
use rcni_tests::{
    FIREWALL_TOOLS, Invocation, Netns, PluginOutput, bin, skip_unless, skip_unless_root, unique,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;

struct Net {
    host: Netns,
    _tmp: TempDir,
    net_dir: std::path::PathBuf,
    bridge_conf: Value,
    name: String,
}

impl Net {
    fn new(n: u8) -> Net {
        let host = Netns::new("cxh");
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        let tmp = TempDir::new("cx");
        let name = unique("cxn");
        let bridge_conf = json!({
            "cniVersion": "1.0.0", "name": name, "type": "bridge",
            "bridge": unique("cxb"), "isGateway": true,
            "ipam": {"type": "host-local", "dataDir": tmp.file("data"),
                     "ranges": [[{"subnet": format!("10.80.{n}.0/24")}]]},
        });
        Net {
            net_dir: tmp.join("data").join(&name),
            host,
            _tmp: tmp,
            bridge_conf,
            name,
        }
    }

    fn run(&self, plugin: &str, cmd: &str, cid: &str, ns: &Netns, conf: &Value) -> PluginOutput {
        let env = cni_env(cmd, cid, &ns.path().display().to_string(), "eth0");
        Invocation::bare(bin(plugin))
            .in_host(&self.host)
            .envs(env)
            .config(conf)
            .run()
    }

    fn portmap_conf(&self, i: usize, prev: &Value) -> Value {
        json!({
            "cniVersion": "1.0.0", "name": self.name, "type": "portmap",
            "backend": if i.is_multiple_of(2) { "iptables" } else { "nftables" },
            "runtimeConfig": {"portMappings": [
                {"hostPort": 20000 + i, "containerPort": 80, "protocol": "tcp"}]},
            "prevResult": prev,
        })
    }

    fn reservations(&self) -> usize {
        reservations(&self.net_dir)
    }
}

fn ips_of(result: &Value) -> Vec<String> {
    result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["address"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn sixty_four_adds_on_one_bridge() {
    if skip_unless_root("sixty_four_adds_on_one_bridge") {
        return;
    }
    let net = Net::new(20);
    // The bridge exists before the rush, as on any host after the first pod.
    let warm = Netns::new("cxc");
    net.run("bridge", "ADD", "cxwarm", &warm, &net.bridge_conf);
    net.run("bridge", "DEL", "cxwarm", &warm, &net.bridge_conf);
    let baseline = snapshot(&net.host);
    let containers: Vec<Netns> = (0..64).map(|_| Netns::new("cxc")).collect();
    let outs: Vec<PluginOutput> = std::thread::scope(|s| {
        let hs: Vec<_> = containers
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let net = &net;
                s.spawn(move || net.run("bridge", "ADD", &format!("cx{i}"), c, &net.bridge_conf))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let failures: Vec<&PluginOutput> = outs.iter().filter(|o| o.code != 0).collect();
    let ips: Vec<String> = outs
        .iter()
        .filter(|o| o.code == 0)
        .flat_map(|o| ips_of(&serde_json::from_str(&o.stdout).unwrap()))
        .collect();
    let distinct: BTreeSet<&String> = ips.iter().collect();
    let duplicates = ips.len() - distinct.len();
    let reserved = net.reservations();
    std::thread::scope(|s| {
        for (i, c) in containers.iter().enumerate() {
            let net = &net;
            s.spawn(move || {
                let out = net.run("bridge", "DEL", &format!("cx{i}"), c, &net.bridge_conf);
                assert_eq!(out.code, 0, "DEL: {out:?}");
            });
        }
    });
    let left = diff(&baseline, &snapshot(&net.host));
    say(&format!(
        "concurrency: 64 parallel bridge ADDs: {} failures, {duplicates} duplicate addresses, \
         {reserved} reservations; after 64 parallel DELs: {} reservations, {} changes left",
        failures.len(),
        net.reservations(),
        left.len()
    ));
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(duplicates, 0, "{ips:?}");
    assert_eq!(distinct.len(), 64);
    assert_eq!(reserved, 64);
    assert_eq!(net.reservations(), 0);
    assert!(left.is_empty(), "{left:?}");
}

/// bridge + portmap ADD, as a runtime chains them; the bridge result.
fn add_chain(net: &Net, i: usize, ns: &Netns) -> Result<Value, String> {
    let cid = format!("cx{i}");
    let out = net.run("bridge", "ADD", &cid, ns, &net.bridge_conf);
    if out.code != 0 {
        return Err(format!("bridge ADD {cid}: {out:?}"));
    }
    let prev: Value = serde_json::from_str(&out.stdout).unwrap();
    let out = net.run("portmap", "ADD", &cid, ns, &net.portmap_conf(i, &prev));
    if out.code != 0 {
        return Err(format!("portmap ADD {cid}: {out:?}"));
    }
    Ok(prev)
}

/// portmap then bridge DEL, as a runtime undoes a chain.
fn del_chain(net: &Net, i: usize, ns: &Netns, prev: &Value) -> Result<(), String> {
    let cid = format!("cx{i}");
    let out = net.run("portmap", "DEL", &cid, ns, &net.portmap_conf(i, prev));
    if out.code != 0 {
        return Err(format!("portmap DEL {cid}: {out:?}"));
    }
    let out = net.run("bridge", "DEL", &cid, ns, &net.bridge_conf);
    if out.code != 0 {
        return Err(format!("bridge DEL {cid}: {out:?}"));
    }
    Ok(())
}

/// CHECK of both plugins: whether the attachment is complete.
fn check_chain(net: &Net, i: usize, ns: &Netns, prev: &Value) -> bool {
    let cid = format!("cx{i}");
    let mut bc = net.bridge_conf.clone();
    bc["prevResult"] = prev.clone();
    net.run("bridge", "CHECK", &cid, ns, &bc).code == 0
        && net
            .run("portmap", "CHECK", &cid, ns, &net.portmap_conf(i, prev))
            .code
            == 0
}

#[test]
fn adds_race_deletes_on_bridge_and_portmap() {
    if skip_unless("adds_race_deletes_on_bridge_and_portmap", FIREWALL_TOOLS) {
        return;
    }
    const N: usize = 32;
    let net = Net::new(21);
    let warm = Netns::new("cxc");
    for i in [1000, 1001] {
        let prev = add_chain(&net, i, &warm).unwrap();
        del_chain(&net, i, &warm, &prev).unwrap();
    }
    let baseline = snapshot(&net.host);
    let old: Vec<Netns> = (0..N).map(|_| Netns::new("cxc")).collect();
    let new: Vec<Netns> = (0..N).map(|_| Netns::new("cxc")).collect();
    let old_prev: Vec<Value> = std::thread::scope(|s| {
        let hs: Vec<_> = old
            .iter()
            .enumerate()
            .map(|(i, ns)| {
                let net = &net;
                s.spawn(move || add_chain(net, i, ns).unwrap())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // The race: DELs of the old attachments against ADDs of new ones.
    let (del_errs, adds): (Vec<String>, Vec<Result<Value, String>>) = std::thread::scope(|s| {
        let dels: Vec<_> = old
            .iter()
            .enumerate()
            .map(|(i, ns)| {
                let (net, prev) = (&net, &old_prev[i]);
                s.spawn(move || del_chain(net, i, ns, prev))
            })
            .collect();
        let adds: Vec<_> = new
            .iter()
            .enumerate()
            .map(|(i, ns)| {
                let net = &net;
                s.spawn(move || add_chain(net, N + i, ns))
            })
            .collect();
        (
            dels.into_iter()
                .filter_map(|h| h.join().unwrap().err())
                .collect(),
            adds.into_iter().map(|h| h.join().unwrap()).collect(),
        )
    });
    let add_errs: Vec<&String> = adds.iter().filter_map(|r| r.as_ref().err()).collect();
    let incomplete: Vec<usize> = adds
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            r.as_ref()
                .is_ok_and(|p| !check_chain(&net, N + i, &new[*i], p))
        })
        .map(|(i, _)| N + i)
        .collect();
    let reserved = net.reservations();
    for (i, r) in adds.iter().enumerate() {
        if let Ok(prev) = r {
            del_chain(&net, N + i, &new[i], prev).unwrap();
        }
    }
    let left = diff(&baseline, &snapshot(&net.host));
    say(&format!(
        "concurrency: {N} bridge+portmap DELs racing {N} ADDs: {} DEL failures, {} ADD failures, \
         {} incomplete survivors, {reserved} reservations (want {N}), {} changes left after cleanup",
        del_errs.len(),
        add_errs.len(),
        incomplete.len(),
        left.len()
    ));
    assert!(del_errs.is_empty(), "{del_errs:?}");
    assert!(add_errs.is_empty(), "{add_errs:?}");
    assert!(incomplete.is_empty(), "CHECK failed for {incomplete:?}");
    assert_eq!(reserved, N);
    assert!(left.is_empty(), "{left:?}");
}
