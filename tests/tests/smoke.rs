//! A smoke test of a shipped set of plugins, wherever it is: ADD, CHECK
//! and DEL of loopback, host-local, bridge (with host-local) and macvlan
//! (with host-local) in throwaway namespaces (tags `rl…`, subnets
//! 10.156.N.0/24), over netlink only (no masquerade: qemu-user passes no
//! netfilter sockets).
//!
//! It runs with every test run against `target/<profile>`, and
//! `scripts/dist-test` points `RCNI_BIN_DIR` at an untarred release, and
//! at wrappers that run the arm64 release under `qemu-aarch64-static`
//! (the IPAM plugin is found through `CNI_PATH`, the same directory).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::host_local_util::{DataDir, NO_NETNS};
use rcni_tests::iface_util::{
    self, MASTER, Segment, conf, container_links, first_ip, ping, with_prev,
};
use rcni_tests::{Invocation, Netns, bin, skip_unless_root};
use serde_json::{Value, json};

#[test]
fn loopback_add_check_del() {
    if skip_unless_root("smoke::loopback_add_check_del") {
        return;
    }
    let ns = Netns::new("rllo");
    let c = json!({"cniVersion": "1.1.0", "name": "rl-lo", "type": "loopback"});
    let run = |cmd: &str, c: &Value| {
        Invocation::new(bin("loopback"), cmd)
            .attach("rl-lo", &ns, "lo")
            .config(c)
            .run()
    };
    let lo_up = || {
        let l = ns.ip_json(&["link", "show", "lo"]);
        l[0]["flags"]
            .as_array()
            .is_some_and(|f| f.contains(&json!("UP")))
    };
    assert!(!lo_up());
    let r = run("ADD", &c).ok();
    assert_eq!(r["interfaces"][0]["name"], "lo", "{r}");
    assert!(lo_up());
    assert_eq!(run("CHECK", &with_prev(&c, &r)).ok(), Value::Null);
    assert_eq!(run("DEL", &c).ok(), Value::Null);
    assert!(!lo_up());
}

#[test]
fn host_local_add_check_del() {
    if skip_unless_root("smoke::host_local_add_check_del") {
        return;
    }
    let data = DataDir::new("rlhl");
    let c = data.conf("1.1.0", json!({"ranges": [[{"subnet": "10.156.1.0/24"}]]}));
    let run = |cmd: &str, c: &Value| {
        let mut inv = Invocation::new(bin("host-local"), cmd)
            .env("CNI_CONTAINERID", "rl-hl")
            .env("CNI_IFNAME", "eth0")
            .config(c);
        if cmd != "DEL" {
            inv = inv.env("CNI_NETNS", NO_NETNS);
        }
        inv.run()
    };
    let r = run("ADD", &c).ok();
    assert_eq!(r["ips"][0]["address"], "10.156.1.2/24", "{r}");
    assert_eq!(
        data.reservations().into_iter().collect::<Vec<_>>(),
        [("10.156.1.2".to_string(), "rl-hl\r\neth0".to_string())]
    );
    assert_eq!(run("CHECK", &with_prev(&c, &r)).ok(), Value::Null);
    assert_eq!(run("DEL", &c).ok(), Value::Null);
    assert!(data.reservations().is_empty());
}

#[test]
fn bridge_add_check_del() {
    if skip_unless_root("smoke::bridge_add_check_del") {
        return;
    }
    iface_util::bridge_add_check_del(&bin("bridge"), "rl", "10.156.2");
}

#[test]
fn macvlan_add_check_del() {
    if skip_unless_root("smoke::macvlan_add_check_del") {
        return;
    }
    let seg = Segment::new("rlmh", "10.156.3");
    let plugin = seg.plugin(bin("macvlan"));
    let cont = Netns::new("rlmc");
    let data = DataDir::new("rlmv");
    let c = conf(
        "macvlan",
        &data,
        "1.1.0",
        Some("10.156.3.0/24"),
        json!({"master": MASTER}),
    );
    let r = plugin.add("rl-mv", &cont, &c);
    assert_eq!(first_ip(&r), "10.156.3.2", "{r}");
    assert!(ping(&cont, &seg.peer_ip()), "container -> segment");
    assert_eq!(plugin.check("rl-mv", &cont, &c, &r).ok(), Value::Null);
    plugin.del("rl-mv", &cont, &with_prev(&c, &r));
    assert!(container_links(&cont).is_empty());
    assert!(data.reservations().is_empty());
}
