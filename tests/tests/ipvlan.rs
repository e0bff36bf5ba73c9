//! The ipvlan plugin, exec'd as a runtime does, in private namespaces
//! (tags `iv…`): a private "host" whose veth `mst0` is the parent and whose
//! `peer0` stands for the segment. Subnets 10.124.2N.0/24. This machine's
//! kernel has no ipvlan: every test says so once and returns here, and
//! runs under scripts/vmtest (where a missing ipvlan fails it).

#![cfg(test)]

use rcni_tests::host_local_util::DataDir;
use rcni_tests::iface_util::{
    MASTER, Segment, conf, container_links, failed_adds_after_ipam_leave_nothing, first_ip, link,
    master_conf, ping, skip_unless_kind, with_prev,
};
use rcni_tests::netns_setup::{NOTIFY_OFF, sysctls};
use rcni_tests::{Netns, bin, error_msg, go_bin};
use serde_json::{Value, json};
use std::path::PathBuf;

fn ours() -> PathBuf {
    bin("ipvlan")
}

fn iv(data: &DataDir, n: u8, extra: Value) -> Value {
    master_conf("ipvlan", data, Some(n), extra)
}

/// Root and a kernel with ipvlan links.
fn skip(test: &str) -> bool {
    skip_unless_kind(test, "ipvlan")
}

#[test]
fn l2_containers_reach_each_other_and_the_segment() {
    if skip("ipvlan::l2_containers_reach_each_other_and_the_segment") {
        return;
    }
    let seg = Segment::new("ivh", "10.124.21");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("iv1");
    let (a, b) = (Netns::new("ivc"), Netns::new("ivc"));
    // The defaults a moved-in link takes, off: ADD must turn them on.
    sysctls(&a, NOTIFY_OFF);
    let c = iv(&data, 21, json!({"dns": {"nameservers": ["10.124.21.53"]}}));
    let ra = plugin.add("c-a", &a, &c);
    let rb = plugin.add("c-b", &b, &c);
    let l = link(&a, "eth0");
    assert_eq!(l["linkinfo"]["info_kind"], "ipvlan");
    assert_eq!(l["linkinfo"]["info_data"]["mode"], "l2");
    // Children carry the parent's MAC.
    assert_eq!(l["address"], link(&seg.host, MASTER)["address"]);
    assert_eq!(ra["interfaces"][0]["mac"], l["address"]);
    assert_eq!(ra["interfaces"].as_array().unwrap().len(), 1);
    assert_eq!(ra["ips"][0]["interface"], 0);
    assert_eq!(ra["dns"]["nameservers"], json!(["10.124.21.53"]));
    assert_eq!(a.sysctl("net/ipv4/conf/eth0/arp_notify"), "1");
    assert_eq!(a.sysctl("net/ipv6/conf/eth0/ndisc_notify"), "1");
    assert!(ping(&a, &first_ip(&rb)), "a -> b");
    assert!(ping(&b, &seg.peer_ip()), "b -> peer");

    let ca = with_prev(&c, &ra);
    plugin.run("CHECK", "c-a", &a, &ca).ok();
    let mut l3 = ca.clone();
    l3["mode"] = json!("l3");
    let e = plugin.run("CHECK", "c-a", &a, &l3).err();
    assert_eq!(
        e["msg"],
        "Container IPVlan mode l2 does not match expected value: l3"
    );
    plugin.del("c-a", &a, &ca);
    plugin.del("c-b", &b, &with_prev(&c, &rb));
    assert!(container_links(&a).is_empty() && container_links(&b).is_empty());
    assert!(data.reservations().is_empty());
}

#[test]
fn l3_and_l3s_modes() {
    if skip("ipvlan::l3_and_l3s_modes") {
        return;
    }
    let seg = Segment::new("ivh", "10.124.22");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("iv2");
    for mode in ["l3", "l3s"] {
        let (a, b) = (Netns::new("ivc"), Netns::new("ivc"));
        let c = iv(&data, 22, json!({"mode": mode}));
        let ra = plugin.add("c-a", &a, &c);
        let rb = plugin.add("c-b", &b, &c);
        assert_eq!(link(&a, "eth0")["linkinfo"]["info_data"]["mode"], mode);
        assert!(ping(&a, &first_ip(&rb)), "{mode}: a -> b");
        plugin.check("c-a", &a, &c, &ra).ok();
        plugin.del("c-a", &a, &c);
        plugin.del("c-b", &b, &c);
    }
    let cont = Netns::new("ivc");
    let e = plugin
        .run("ADD", "c-x", &cont, &iv(&data, 22, json!({"mode": "l4"})))
        .err();
    assert_eq!(e["msg"], r#"unknown ipvlan mode: "l4""#);
    assert!(data.reservations().is_empty());
}

#[test]
fn chained_on_a_previous_result() {
    if skip("ipvlan::chained_on_a_previous_result") {
        return;
    }
    let seg = Segment::new("ivh", "10.124.23");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("iv3");
    let cont = Netns::new("ivc");
    // No master and no ipam: the master is the previous result's only
    // interface, the addresses are its addresses.
    let mut c = conf("ipvlan", &data, "1.0.0", None, json!({}));
    c["prevResult"] = json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": MASTER}],
        "ips": [{"address": "10.124.23.7/24", "gateway": "10.124.23.254", "interface": 0}],
        "routes": [{"dst": "192.0.2.0/24"}],
    });
    let r = plugin.add("c-ch", &cont, &c);
    assert_eq!(r["ips"][0]["address"], "10.124.23.7/24");
    assert_eq!(r["interfaces"][0]["name"], "eth0");
    assert!(cont.addrs("eth0").contains("10.124.23.7/24"));
    assert!(ping(&cont, &seg.peer_ip()), "chained -> peer");
    plugin.del("c-ch", &cont, &c);
    assert!(container_links(&cont).is_empty());
    for interfaces in [json!([]), json!([{"name": "a"}, {"name": "b"}])] {
        let mut bad = c.clone();
        bad["prevResult"]["interfaces"] = interfaces;
        let e = plugin.run("ADD", "c-ch", &cont, &bad).err();
        assert_eq!(
            e["msg"],
            "chained master failure. PrevResult lacks a single named interface"
        );
    }
}

#[test]
fn failures_undo_and_del_is_idempotent() {
    if skip("ipvlan::failures_undo_and_del_is_idempotent") {
        return;
    }
    let seg = Segment::new("ivh", "10.124.24");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("iv4");
    let cont = Netns::new("ivc");
    // MTU above the parent's (the reference does not check, #393).
    let e = plugin
        .run("ADD", "c-f", &cont, &iv(&data, 24, json!({"mtu": 1501})))
        .err();
    assert_eq!(e["msg"], "invalid MTU 1501, must be [0, master MTU(1500)]");
    let wrong = iv(&data, 24, json!({"master": "nope0"}));
    let e = plugin.run("ADD", "c-f", &cont, &wrong).err();
    assert_eq!(
        e["msg"],
        r#"failed to lookup master "nope0": Link not found"#
    );
    // Name taken in the container, IPAM failing: nothing left (the
    // reference leaves its link behind, #560).
    cont.exec_ok(
        "ip",
        &["link", "add", "eth0", "type", "veth", "peer", "name", "x0"],
    );
    let c = iv(&data, 24, json!({}));
    let e = plugin.run("ADD", "c-f", &cont, &c).err();
    assert!(error_msg(&e).contains("file exists"), "{e}");
    assert_eq!(container_links(&cont), ["eth0", "x0"]);
    cont.exec_ok("ip", &["link", "del", "eth0"]);
    let mut bad = c.clone();
    bad["ipam"]["ranges"] = json!([]);
    plugin.run("ADD", "c-f", &cont, &bad).err();
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
    // A parent carrying macvlans cannot carry ipvlans.
    seg.host.exec_ok(
        "ip",
        &[
            "link", "add", "link", MASTER, "name", "mv9", "type", "macvlan",
        ],
    );
    let e = plugin.run("ADD", "c-f", &cont, &c).err();
    assert!(error_msg(&e).starts_with("failed to create ipvlan"), "{e}");
    seg.host.exec_ok("ip", &["link", "del", "mv9"]);

    // DEL: twice; netns gone; without master, default route or prevResult
    // (the reference fails there).
    plugin.add("c-d", &cont, &c);
    plugin.del("c-d", &cont, &c);
    plugin.del("c-d", &cont, &c);
    plugin.del_after_netns_gone("ivc", "c-g", &c);
    let mut no_master = c.clone();
    no_master.as_object_mut().unwrap().remove("master");
    plugin.del("c-g", &cont, &no_master);
    assert!(data.reservations().is_empty());

    // L2 without IPAM (the reference refuses, #572).
    let l2 = conf("ipvlan", &data, "1.0.0", None, json!({"master": MASTER}));
    let r = plugin.add("c-l2", &cont, &l2);
    assert!(r.get("ips").is_none(), "{r}");
    plugin.del("c-l2", &cont, &l2);
    assert!(container_links(&cont).is_empty());
}

/// IPAM starts before the namespace is opened and the parent looked up:
/// an ADD failing on those (or on the MTU) gives its address back and
/// makes no link (tags `ei_`, 10.203.2.0/24).
#[test]
fn ei_failed_add_after_ipam_started_leaves_nothing() {
    if skip("ipvlan::ei_failed_add_after_ipam_started_leaves_nothing") {
        return;
    }
    failed_adds_after_ipam_leave_nothing("ipvlan", "ei_iv", "10.203.2", json!({}));
}

#[test]
fn kernel_state_like_go() {
    if skip("ipvlan::kernel_state_like_go") {
        return;
    }
    let Some(go) = go_bin("ipvlan") else {
        eprintln!("SKIP ipvlan::kernel_state_like_go: /usr/lib/cni/ipvlan missing");
        return;
    };
    let seg = Segment::new("ivh", "10.124.25");
    let state = |ns: &Netns| {
        let l = link(ns, "eth0");
        (
            l["linkinfo"]["info_kind"].clone(),
            l["linkinfo"]["info_data"]["mode"].clone(),
            l["mtu"].clone(),
            l["address"].clone(),
            ns.addrs("eth0"),
        )
    };
    let mut states = Vec::new();
    for path in [ours(), go] {
        let plugin = seg.plugin(path);
        let data = DataDir::new("iv5");
        let cont = Netns::new("ivc");
        let c = iv(&data, 25, json!({"mode": "l3", "mtu": 1400}));
        plugin.add("c-go", &cont, &c);
        states.push(state(&cont));
        plugin.del("c-go", &cont, &c);
        assert!(container_links(&cont).is_empty());
    }
    assert_eq!(states[0], states[1], "ours vs Go");
}
