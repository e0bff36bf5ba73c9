//! The vlan plugin, exec'd as a runtime does, in private namespaces (tags
//! `vl…`): a private "host" whose veth `mst0` is the parent and whose
//! `peer0` carries a VLAN sub-interface of the same id, the tagged
//! segment's other station. Subnets 10.124.3N.0/24. This machine's kernel
//! has no 8021q: every test says so once and returns here, and runs under
//! scripts/vmtest (where a missing vlan fails it).

#![cfg(test)]

use rcni_tests::host_local_util::DataDir;
use rcni_tests::iface_util::{
    MASTER, PEER, Segment, conf, container_links, failed_adds_after_ipam_leave_nothing, link,
    master_conf, ping, skip_unless_kind, with_prev,
};
use rcni_tests::{Netns, bin, error_msg, go_bin};
use serde_json::{Value, json};
use std::path::PathBuf;

fn ours() -> PathBuf {
    bin("vlan")
}

fn vl(data: &DataDir, n: u8, extra: Value) -> Value {
    master_conf("vlan", data, Some(n), extra)
}

/// Root and a kernel with vlan links.
fn skip(test: &str) -> bool {
    skip_unless_kind(test, "vlan")
}

#[test]
fn tagged_traffic_reaches_a_peer_vlan() {
    if skip("vlan::tagged_traffic_reaches_a_peer_vlan") {
        return;
    }
    // The untagged segment is 10.124.39/24; the tagged one 10.124.31/24.
    let seg = Segment::new("vlh", "10.124.39");
    let plugin = seg.plugin(ours());
    seg.host.exec_ok(
        "ip",
        &[
            "link", "add", "link", PEER, "name", "pv124", "type", "vlan", "id", "124",
        ],
    );
    seg.host
        .exec_ok("ip", &["addr", "add", "10.124.31.254/24", "dev", "pv124"]);
    seg.host.exec_ok("ip", &["link", "set", "pv124", "up"]);
    let data = DataDir::new("vl1");
    let cont = Netns::new("vlc");
    let c = vl(
        &data,
        31,
        json!({"vlanId": 124, "dns": {"nameservers": ["10.124.31.53"]}}),
    );
    let r = plugin.add("c1", &cont, &c);
    let l = link(&cont, "eth0");
    assert_eq!(l["linkinfo"]["info_kind"], "vlan");
    assert_eq!(l["linkinfo"]["info_data"]["id"], 124);
    assert_eq!(l["linkinfo"]["info_data"]["protocol"], "802.1Q");
    assert_eq!(l["address"], link(&seg.host, MASTER)["address"]);
    assert_eq!(r["interfaces"][0]["mac"], l["address"]);
    assert_eq!(r["dns"]["nameservers"], json!(["10.124.31.53"]));
    assert!(
        ping(&cont, "10.124.31.254"),
        "tagged traffic to the peer's vlan 124"
    );
    let cp = with_prev(&c, &r);
    plugin.run("CHECK", "c1", &cont, &cp).ok();
    let mut other = cp.clone();
    other["vlanId"] = json!(125);
    let e = plugin.run("CHECK", "c1", &cont, &other).err();
    assert_eq!(
        e["msg"],
        "Error: Container interface eth0 has VLAN id 124, configured 125"
    );
    plugin.del("c1", &cont, &cp);
    plugin.del("c1", &cont, &cp);
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
}

#[test]
fn ids_mtu_and_master() {
    if skip("vlan::ids_mtu_and_master") {
        return;
    }
    let seg = Segment::new("vlh", "10.124.32");
    let plugin = seg.plugin(ours());
    seg.host
        .exec_ok("ip", &["link", "set", MASTER, "mtu", "1200"]);
    let data = DataDir::new("vl2");
    let cont = Netns::new("vlc");
    // 0 is accepted, as both Go versions accept it; MTU 0 = the parent's.
    let c = vl(&data, 32, json!({"vlanId": 0}));
    plugin.add("c2", &cont, &c);
    let l = link(&cont, "eth0");
    assert_eq!(l["linkinfo"]["info_data"]["id"], 0);
    assert_eq!(l["mtu"], 1200);
    plugin.del("c2", &cont, &c);
    let c = vl(&data, 32, json!({"vlanId": 4094, "mtu": 1100}));
    plugin.add("c2", &cont, &c);
    assert_eq!(link(&cont, "eth0")["mtu"], 1100);
    plugin.del("c2", &cont, &c);
    for (extra, want) in [
        (
            json!({"vlanId": 4095}),
            "invalid VLAN ID 4095 (must be between 0 and 4094 inclusive)",
        ),
        (
            json!({"vlanId": 5000}),
            "invalid VLAN ID 5000 (must be between 0 and 4094 inclusive)",
        ),
        (
            json!({"vlanId": -1}),
            "invalid VLAN ID -1 (must be between 0 and 4094 inclusive)",
        ),
        (
            json!({"vlanId": 7, "mtu": 1201}),
            "invalid MTU 1201, must be [0, master MTU(1200)]",
        ),
        (
            json!({"vlanId": 7, "master": ""}),
            r#""master" field is required. It specifies the host interface name to create the VLAN for"#,
        ),
        (
            json!({"vlanId": 7, "master": "nope0"}),
            r#"failed to lookup master "nope0": Link not found"#,
        ),
    ] {
        let e = plugin
            .run("ADD", "c2", &cont, &vl(&data, 32, extra.clone()))
            .err();
        assert_eq!(e["msg"], want, "{extra}");
    }
    let e = plugin
        .run("ADD", "c2", &cont, &vl(&data, 32, json!({"vlanId": "10"})))
        .err();
    assert!(error_msg(&e).starts_with("failed to load netconf"), "{e}");
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
}

#[test]
fn failures_undo_and_del_survives_the_master() {
    if skip("vlan::failures_undo_and_del_survives_the_master") {
        return;
    }
    let seg = Segment::new("vlh", "10.124.33");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("vl3");
    let cont = Netns::new("vlc");
    let c = vl(&data, 33, json!({"vlanId": 33}));
    cont.exec_ok(
        "ip",
        &["link", "add", "eth0", "type", "veth", "peer", "name", "x0"],
    );
    let e = plugin.run("ADD", "c3", &cont, &c).err();
    assert!(error_msg(&e).contains("file exists"), "{e}");
    assert_eq!(container_links(&cont), ["eth0", "x0"]);
    cont.exec_ok("ip", &["link", "del", "eth0"]);
    let mut bad = c.clone();
    bad["ipam"]["ranges"] = json!([]);
    plugin.run("ADD", "c3", &cont, &bad).err();
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
    // L2 without IPAM (the reference requires IPAM; PR #1302).
    let l2 = conf(
        "vlan",
        &data,
        "1.0.0",
        None,
        json!({"master": MASTER, "vlanId": 33}),
    );
    let r = plugin.add("c3", &cont, &l2);
    assert!(r.get("ips").is_none(), "{r}");
    plugin.del("c3", &cont, &l2);
    // The parent removed takes the vlan with it; DEL still succeeds and
    // releases the address (the reference fails: `Link not found`).
    plugin.add("c3", &cont, &c);
    seg.host.exec_ok("ip", &["link", "del", MASTER]);
    plugin.del("c3", &cont, &c);
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
}

/// IPAM starts before the namespace is opened and the parent looked up:
/// an ADD failing on those (or on the MTU) gives its address back and
/// makes no link (tags `ei_`, 10.203.3.0/24).
#[test]
fn ei_failed_add_after_ipam_started_leaves_nothing() {
    if skip("vlan::ei_failed_add_after_ipam_started_leaves_nothing") {
        return;
    }
    failed_adds_after_ipam_leave_nothing("vlan", "ei_vl", "10.203.3", json!({"vlanId": 203}));
}

#[test]
fn kernel_state_like_go() {
    if skip("vlan::kernel_state_like_go") {
        return;
    }
    let Some(go) = go_bin("vlan") else {
        eprintln!("SKIP vlan::kernel_state_like_go: /usr/lib/cni/vlan missing");
        return;
    };
    let seg = Segment::new("vlh", "10.124.34");
    let mut states = Vec::new();
    for path in [ours(), go] {
        let plugin = seg.plugin(path);
        let data = DataDir::new("vl4");
        let cont = Netns::new("vlc");
        let c = vl(&data, 34, json!({"vlanId": 34, "mtu": 1400}));
        plugin.add("c4", &cont, &c);
        let l = link(&cont, "eth0");
        states.push((
            l["linkinfo"].clone(),
            l["mtu"].clone(),
            l["address"].clone(),
            cont.addrs("eth0"),
        ));
        plugin.del("c4", &cont, &c);
        assert!(container_links(&cont).is_empty());
    }
    assert_eq!(states[0], states[1], "ours vs Go");
}
