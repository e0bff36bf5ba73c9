//! DEL of a config ADD refuses (issue 28): a runtime whose DEL fails
//! retries it forever and cannot remove the pod, while the reference's DEL
//! succeeds for these configs. Ours cleans up what the rest of the config
//! names and exits 0, side by side with Go's (/usr/lib/cni). Tags `pb…`,
//! subnets 10.161.N.0/24.

#![cfg(test)]
#![allow(clippy::unwrap_used)]

use rcni_tests::host_local_util::DataDir;
use rcni_tests::{Invocation, Netns, PluginOutput, bin, go_bin, skip_unless_root};
use serde_json::{Value, json};
use std::path::Path;

fn run(plugin: &Path, cmd: &str, host: &Netns, cont: &Netns, conf: &Value) -> PluginOutput {
    Invocation::new(plugin, cmd)
        .attach("pbdel", cont, "eth0")
        .in_host(host)
        .config(conf)
        .run()
}

/// A private host with a veth `pbm0` (macvlan's master).
fn host() -> Netns {
    let h = Netns::new("pbh");
    h.exec_ok("ip", &["link", "set", "lo", "up"]);
    h.exec_ok(
        "ip",
        &[
            "link", "add", "pbm0", "type", "veth", "peer", "name", "pbm1",
        ],
    );
    h
}

/// `extra` merged into `{cniVersion, name, type}`.
fn conf(kind: &str, extra: Value) -> Value {
    let mut c = json!({"cniVersion": "1.0.0", "name": "pbdel-net", "type": kind});
    if let (Some(m), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
    c
}

/// Ours and Go's DEL of `c` (a container holding a veth `eth0` with the
/// alias `pbz0`, since some plugins look for it: host-device moves it out
/// under its alias) both exit 0, where ADD refuses `c`.
fn both_del_ok(kind: &str, c: &Value) {
    del_ok(kind, c, go_bin(kind));
}

/// [`both_del_ok`] against `go` when given.
fn del_ok(kind: &str, c: &Value, go: Option<std::path::PathBuf>) {
    let h = host();
    for plugin in [Some(bin(kind)), go].into_iter().flatten() {
        let cont = Netns::new("pbc");
        cont.exec_ok(
            "ip",
            &[
                "link", "add", "eth0", "type", "veth", "peer", "name", "pbp0",
            ],
        );
        cont.exec_ok("ip", &["link", "set", "eth0", "alias", "pbz0"]);
        let out = run(&plugin, "DEL", &h, &cont, c);
        assert_eq!(out.code, 0, "{} DEL {c}: {out:?}", plugin.display());
    }
    let cont = Netns::new("pbc");
    let out = run(&bin(kind), "ADD", &h, &cont, c);
    assert_ne!(out.code, 0, "ours ADD {c} should be refused: {out:?}");
}

#[test]
fn pb_del_of_refused_configs_succeeds_like_go() {
    if skip_unless_root("del_refused::pb_del_of_refused_configs_succeeds_like_go") {
        return;
    }
    let data = DataDir::new("pbdel");
    let ipam = json!({"type": "host-local", "dataDir": data.path().display().to_string(),
                      "ranges": [[{"subnet": "10.161.1.0/24"}]]});
    for extra in [
        json!({"bridge": "pbbr0", "mtu": 67}),
        json!({"bridge": "pbbr0", "mtu": 70000}),
        json!({"bridge": "pbbr0", "hairpinMode": true, "promiscMode": true}),
        json!({"bridge": "pb/br0"}),
        json!({"bridge": "pbbr0", "runtimeConfig": {"mac": "zz"}}),
        json!({"bridge": "pbbr0", "ipMasq": true, "ipMasqBackend": "bogus", "ipam": ipam}),
        json!({"bridge": "pbbr0", "disableContainerInterface": true, "ipam": ipam}),
    ] {
        let mut c = conf("bridge", extra);
        c["name"] = json!(data.name());
        both_del_ok("bridge", &c);
    }
    for extra in [
        json!({"mtu": 67, "ipam": ipam}),
        json!({"mtu": 65536, "ipam": ipam}),
    ] {
        let mut c = conf("ptp", extra);
        c["name"] = json!(data.name());
        both_del_ok("ptp", &c);
    }
    both_del_ok("sbr", &conf("sbr", json!({"table": 4294967296u64})));
    for extra in [
        json!({"vrfname": "pbvrf", "table": 254}),
        json!({"vrfname": "pbvrf", "table": 255}),
        json!({"vrfname": "pb/vrf"}),
    ] {
        both_del_ok("vrf", &conf("vrf", extra));
    }
    // A dataDir with a NUL: Go's DEL fails (its stat fails, not with
    // "not found"), ours looks in the default.
    del_ok(
        "tuning",
        &conf("tuning", json!({"dataDir": "pb\u{0}rel"})),
        None,
    );
    both_del_ok(
        "host-device",
        &conf("host-device", json!({"kernelpath": "/tmp/pbx"})),
    );
    // A deviceID whose VF is gone: Go's DEL fails (lstat), ours goes on.
    del_ok(
        "host-device",
        &conf(
            "host-device",
            json!({"device": "pbz0", "runtimeConfig": {"deviceID": "pb-gone"}}),
        ),
        None,
    );
    both_del_ok(
        "macvlan",
        &conf("macvlan", json!({"master": "pbm0", "mode": "bogus"})),
    );
    // vlan's DEL reads neither master nor the ID; Go's DEL fails on both
    // (Debian's 1.1.1 also on 4095, despite its message): ours alone.
    for extra in [
        json!({"master": "pbm0", "vlanId": 4095}),
        json!({"vlanId": 5}),
    ] {
        del_ok("vlan", &conf("vlan", extra), None);
    }
    // No tap in Debian's Go set: ours alone.
    del_ok("tap", &conf("tap", json!({"mtu": -1, "mac": "zz"})), None);
    both_del_ok(
        "firewall",
        &conf(
            "firewall",
            json!({"iptablesAdminChainName": "pb bad chain"}),
        ),
    );
    // A name the reference takes and ours refuses (a quote).
    both_del_ok(
        "firewall",
        &conf("firewall", json!({"iptablesAdminChainName": "pb\"chain"})),
    );
    let maps =
        json!({"portMappings": [{"hostPort": 18161, "containerPort": 80, "protocol": "udp"}]});
    for extra in [
        json!({"backend": "bogus", "runtimeConfig": maps}),
        json!({"externalSetMarkChain": "pb bad", "runtimeConfig": maps}),
        json!({"externalSetMarkChain": "pb\\mark", "runtimeConfig": maps}),
        json!({"runtimeConfig": {"portMappings": [
            {"hostPort": 18161, "containerPort": 80, "protocol": "tcp", "hostIP": "pb"},
        ]}}),
    ] {
        both_del_ok("portmap", &conf("portmap", extra));
    }
    assert!(data.reservations().is_empty());
}

/// DEL with a refused MTU still removes the attachment a valid config
/// made: the container's interface and the IPAM reservation.
#[test]
fn pb_del_with_a_refused_mtu_cleans_up() {
    if skip_unless_root("del_refused::pb_del_with_a_refused_mtu_cleans_up") {
        return;
    }
    let h = host();
    for (kind, n) in [("bridge", 2), ("ptp", 3)] {
        let data = DataDir::new("pbdel");
        let cont = Netns::new("pbc");
        let mut c = conf(
            kind,
            json!({"ipam": {"type": "host-local", "dataDir": data.path().display().to_string(),
                            "ranges": [[{"subnet": format!("10.161.{n}.0/24")}]]}}),
        );
        c["name"] = json!(data.name());
        if kind == "bridge" {
            c["bridge"] = json!("pbbr0");
        }
        let r = run(&bin(kind), "ADD", &h, &cont, &c).ok();
        assert_eq!(data.reservations().len(), 1);
        c["mtu"] = json!(70000);
        c["prevResult"] = r;
        run(&bin(kind), "DEL", &h, &cont, &c).ok();
        assert_eq!(cont.link_names(), ["lo"], "{kind}");
        assert!(data.reservations().is_empty(), "{kind}");
    }
}

/// bandwidth DEL with a limit ADD refuses (a rate without a burst: Go's
/// DEL fails on it too) still removes the attachment's ifb, which is
/// named by the network and container ID only.
#[test]
fn pb_bandwidth_del_with_a_refused_limit_removes_the_ifb() {
    if skip_unless_root("del_refused::pb_bandwidth_del_with_a_refused_limit_removes_the_ifb") {
        return;
    }
    let h = host();
    let cont = Netns::new("pbc");
    let name = rcni_tests::unique("pbbw");
    let ifb = bandwidth::ifb::name(&name, "pbdel");
    h.exec_ok("ip", &["link", "add", &ifb, "type", "ifb"]);
    let mut c = conf("bandwidth", json!({"ingressRate": 100}));
    c["name"] = json!(name);
    run(&bin("bandwidth"), "DEL", &h, &cont, &c).ok();
    assert!(!h.link_names().contains(&ifb), "{:?}", h.link_names());
}

/// host-local DEL with ranges ADD refuses (a /33, overlapping sets, none)
/// still releases the attachment's reservation, which it finds by
/// container ID and interface in `<dataDir>/<name>` (Go's DEL fails on
/// them, so the address stays taken).
#[test]
fn pb_host_local_del_with_refused_ranges_releases() {
    use rcni_tests::host_local_util as hl;
    if skip_unless_root("del_refused::pb_host_local_del_with_refused_ranges_releases") {
        return;
    }
    let data = DataDir::new("pbhl");
    for bad in [
        json!({"subnet": "10.161.6.0/33"}),
        json!({"ranges": [[{"subnet": "10.161.6.0/24"}], [{"subnet": "10.161.6.0/25"}]]}),
        json!({}),
    ] {
        let ok = data.conf("1.0.0", json!({"ranges": [[{"subnet": "10.161.6.0/24"}]]}));
        hl::add(&ok, "pbhl1", "eth0").ok();
        assert_eq!(data.reservations().len(), 1);
        let c = data.conf("1.0.0", bad.clone());
        assert_ne!(hl::add(&c, "pbhl2", "eth0").code, 0, "{bad}");
        hl::del(&c, "pbhl1", "eth0").ok();
        assert!(data.reservations().is_empty(), "{bad}");
    }
}
