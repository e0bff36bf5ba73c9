//! The dummy plugin, exec'd as a runtime does, in private namespaces (tags
//! `dm…`). Subnets 10.124.4N.0/24. This machine's kernel has no dummy
//! links: every test says so once and returns here, and runs under
//! scripts/vmtest (where a missing dummy fails it). The Go reference of
//! Debian (v1.1.1) has no dummy plugin to compare with.

#![cfg(test)]

use rcni_tests::host_local_util::DataDir;
use rcni_tests::iface_util::{
    HostPlugin, conf, container_links, link, skip_unless_kind, with_prev,
};
use rcni_tests::tempdir::TempDir;
use rcni_tests::{Netns, bin, error_msg};
use serde_json::json;
use std::path::PathBuf;

fn ours() -> PathBuf {
    bin("dummy")
}

fn host() -> Netns {
    let h = Netns::new("dmh");
    h.exec_ok("ip", &["link", "set", "lo", "up"]);
    h
}

/// Root and a kernel with dummy links.
fn skip(test: &str) -> bool {
    skip_unless_kind(test, "dummy")
}

#[test]
fn dummy_carries_the_ipam_address() {
    if skip("dummy::dummy_carries_the_ipam_address") {
        return;
    }
    let h = host();
    let plugin = HostPlugin::new(ours(), &h);
    // A host link named like CNI_IFNAME does not get in the way (it did
    // before v1.9.0 of the reference).
    h.exec_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "dmx0",
        ],
    );
    let data = DataDir::new("dm1");
    let tmp = TempDir::new("dm1");
    let resolv = tmp.file("resolv.conf");
    std::fs::write(&resolv, "nameserver 10.124.41.53\nsearch example.test\n").unwrap();
    let cont = Netns::new("dmc");
    let mut c = conf("dummy", &data, "1.0.0", Some("10.124.41.0/24"), json!({}));
    c["ipam"]["resolvConf"] = json!(resolv);
    c["dns"] = json!({"nameservers": ["192.0.2.1"]});
    let r = plugin.add("c1", &cont, &c);
    let l = link(&cont, "eth0");
    assert_eq!(l["linkinfo"]["info_kind"], "dummy");
    assert!(l["flags"].as_array().unwrap().contains(&json!("UP")));
    assert_eq!(r["interfaces"][0]["mac"], l["address"]);
    assert_eq!(
        r["interfaces"][0]["sandbox"],
        cont.path().display().to_string()
    );
    assert_eq!(cont.addrs("eth0").len(), 1);
    // The IPAM plugin's DNS, not the config's (as the reference).
    assert_eq!(r["dns"]["nameservers"], json!(["10.124.41.53"]));
    let cp = with_prev(&c, &r);
    plugin.run("CHECK", "c1", &cont, &cp).ok();
    cont.exec_ok("ip", &["link", "set", "eth0", "down"]);
    let e = plugin.run("CHECK", "c1", &cont, &cp).err();
    assert_eq!(e["msg"], "Interface eth0 is down");
    plugin.del("c1", &cont, &cp);
    plugin.del("c1", &cont, &cp);
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
    assert!(link(&h, "eth0").is_object());
}

#[test]
fn requires_ipam_undoes_failures_and_del_is_idempotent() {
    if skip("dummy::requires_ipam_undoes_failures_and_del_is_idempotent") {
        return;
    }
    let h = host();
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("dm2");
    let cont = Netns::new("dmc");
    let wrong = conf("dummy", &data, "1.0.0", None, json!({}));
    let e = plugin.run("ADD", "c2", &cont, &wrong).err();
    assert_eq!(e["msg"], "dummy interface requires an IPAM configuration");
    let c = conf("dummy", &data, "1.0.0", Some("10.124.42.0/24"), json!({}));
    cont.exec_ok(
        "ip",
        &["link", "add", "eth0", "type", "veth", "peer", "name", "x0"],
    );
    let e = plugin.run("ADD", "c2", &cont, &c).err();
    assert!(error_msg(&e).contains("file exists"), "{e}");
    assert_eq!(container_links(&cont), ["eth0", "x0"]);
    assert!(data.reservations().is_empty());
    cont.exec_ok("ip", &["link", "del", "eth0"]);
    let mut bad = c.clone();
    bad["ipam"]["routes"] = json!([{"dst": "192.0.2.0/24", "gw": "198.51.100.1"}]);
    plugin.run("ADD", "c2", &cont, &bad).err();
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
    plugin.del_after_netns_gone("dmc", "c2", &c);
    assert!(data.reservations().is_empty());
}
