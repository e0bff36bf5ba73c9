//! The host-device plugin, exec'd as a runtime does, in private namespaces
//! (tags `hd…`): a private "host" holding a veth pair, one end (`hdv0`) the
//! device that moves into the container, the other (`hdp0`, with an
//! address) staying on the host to talk to it. Subnet 10.125.N.0/24.
//! Ours and the Go reference (/usr/lib/cni/host-device, v1.1.1) must be
//! able to undo each other's attachments.

#![cfg(test)]

use rcni_tests::dhcp_util::{DaemonProc, Lan, QUICK_TIMING, wait_for};
use rcni_tests::host_local_util::DataDir;
use rcni_tests::iface_util::{
    HostPlugin, conf, container_links, eventually, link, ping, with_prev,
};
use rcni_tests::{
    Invocation, Netns, bin, error_msg, go_bin, skip_unless, skip_unless_root, unique,
};
use serde_json::{Value, json};
use std::path::PathBuf;

const DEV: &str = "hdv0";
const PEER: &str = "hdp0";

fn ours() -> PathBuf {
    bin("host-device")
}

/// A private host with the veth `hdv0` (up, MTU 1400) <-> `hdp0`
/// (`10.125.n.254/24`, up).
fn host(n: u8) -> Netns {
    let h = Netns::new("hdh");
    h.exec_ok("ip", &["link", "set", "lo", "up"]);
    h.exec_ok(
        "ip",
        &["link", "add", DEV, "type", "veth", "peer", "name", PEER],
    );
    h.exec_ok("ip", &["link", "set", DEV, "mtu", "1400"]);
    h.exec_ok(
        "ip",
        &["addr", "add", &format!("10.125.{n}.254/24"), "dev", PEER],
    );
    for l in [DEV, PEER] {
        h.exec_ok("ip", &["link", "set", l, "up"]);
    }
    h
}

fn hd(data: &DataDir, n: u8, extra: Value) -> Value {
    let mut extra = extra;
    if extra.get("device").is_none() && extra.get("hwaddr").is_none() {
        extra["device"] = json!(DEV);
    }
    conf(
        "host-device",
        data,
        "1.0.0",
        Some(&format!("10.125.{n}.0/24")),
        extra,
    )
}

fn flags(l: &Value) -> Vec<String> {
    l["flags"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn moves_in_configured_and_back_under_its_name() {
    if skip_unless_root("host_device::moves_in_configured_and_back_under_its_name") {
        return;
    }
    let h = host(1);
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd1");
    let cont = Netns::new("hdc");
    let mac = link(&h, DEV)["address"].clone();
    let c = hd(&data, 1, json!({"dns": {"nameservers": ["10.125.1.53"]}}));
    let r = plugin.add("c1", &cont, &c);
    // In the container: CNI_IFNAME, the host name as alias, up, MAC and
    // MTU kept, the IPAM address; gone from the host.
    let l = link(&cont, "eth0");
    assert_eq!(l["ifalias"], DEV);
    assert!(flags(&l).contains(&"UP".to_string()));
    assert_eq!(l["address"], mac);
    assert_eq!(l["mtu"], 1400);
    assert_eq!(link(&h, DEV), Value::Null);
    assert_eq!(r["interfaces"][0]["mac"], mac);
    assert_eq!(
        r["interfaces"][0]["sandbox"],
        cont.path().display().to_string()
    );
    assert_eq!(r["ips"][0]["interface"], 0);
    assert_eq!(r["dns"]["nameservers"], json!(["10.125.1.53"]));
    assert_eq!(cont.addrs("eth0").len(), 1);
    assert!(ping(&cont, "10.125.1.254"), "container -> host peer");
    let cp = with_prev(&c, &r);
    plugin.run("CHECK", "c1", &cont, &cp).ok();
    cont.exec_ok("ip", &["addr", "flush", "dev", "eth0"]);
    let e = plugin.run("CHECK", "c1", &cont, &cp).err();
    assert!(error_msg(&e).starts_with("Failed to match addr"), "{e}");

    // DEL: back on the host under its name, alias cleared, up as it was
    // (the reference leaves it down), the address released; a second DEL
    // is a no-op.
    plugin.del("c1", &cont, &cp);
    let back = link(&h, DEV);
    assert_eq!(back["address"], mac);
    assert_eq!(back["mtu"], 1400);
    assert!(back.get("ifalias").is_none_or(|a| a == ""), "{back}");
    assert!(flags(&back).contains(&"UP".to_string()));
    assert!(container_links(&cont).is_empty());
    assert!(data.reservations().is_empty());
    plugin.del("c1", &cont, &cp);
}

#[test]
fn selected_by_hwaddr_and_selection_errors() {
    if skip_unless_root("host_device::selected_by_hwaddr_and_selection_errors") {
        return;
    }
    let h = host(2);
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd2");
    let cont = Netns::new("hdc");
    let mac = link(&h, DEV)["address"].as_str().unwrap().to_uppercase();
    let c = hd(&data, 2, json!({"hwaddr": mac}));
    plugin.run_as("ADD", "c2", &cont, "net1", &c).ok();
    assert_eq!(link(&cont, "net1")["ifalias"], DEV);
    plugin.run_as("DEL", "c2", &cont, "net1", &c).ok();
    assert!(link(&h, DEV).is_object());

    for (extra, want) in [
        (
            json!({"device": "nope0"}),
            "failed to find host device: Link not found",
        ),
        (
            json!({"hwaddr": "02:25:00:00:00:99"}),
            "failed to find host device: failed to find physical interface",
        ),
        (
            json!({"hwaddr": "zz"}),
            r#"failed to parse MAC address "zz": address zz: invalid MAC address"#,
        ),
        (
            json!({"device": "", "kernelpath": "/tmp/x"}),
            r#"kernel device path "/tmp/x" must be absolute and begin with /sys/devices/"#,
        ),
        (
            json!({"device": "", "pciBusID": "0000:ff:1f.7"}),
            "error with host device: lstat /sys/bus/pci/devices/0000:ff:1f.7/driver: no such file or directory",
        ),
        (
            json!({"device": "", "runtimeConfig": {"deviceID": "nope"}}),
            "runtime config DeviceID nope not found or unsupported",
        ),
    ] {
        let e = plugin
            .run_as("ADD", "c2", &cont, "net1", &hd(&data, 2, extra.clone()))
            .err();
        assert_eq!(e["msg"], want, "{extra}");
    }
    let mut none = hd(&data, 2, json!({}));
    none.as_object_mut().unwrap().remove("device");
    let e = plugin.run_as("ADD", "c2", &cont, "net1", &none).err();
    assert_eq!(
        e["msg"],
        r#"specify either "device", "hwaddr", "kernelpath" or "pciBusID""#
    );
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
}

#[test]
fn failures_put_the_device_back() {
    if skip_unless_root("host_device::failures_put_the_device_back") {
        return;
    }
    let h = host(3);
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd3");
    let cont = Netns::new("hdc");
    // CNI_IFNAME taken in the container: the device stays on the host,
    // under its name, up.
    cont.exec_ok(
        "ip",
        &["link", "add", "eth0", "type", "veth", "peer", "name", "x0"],
    );
    let c = hd(&data, 3, json!({}));
    let e = plugin.run("ADD", "c3", &cont, &c).err();
    assert!(error_msg(&e).contains("file exists"), "{e}");
    let l = link(&h, DEV);
    assert!(flags(&l).contains(&"UP".to_string()), "{l}");
    assert!(l.get("ifalias").is_none_or(|a| a == ""), "{l}");
    assert!(data.reservations().is_empty());
    cont.exec_ok("ip", &["link", "del", "eth0"]);
    // IPAM fails: the device comes back (the reference strands it in the
    // container, up).
    let mut bad = c.clone();
    bad["ipam"]["ranges"] = json!([]);
    let e = plugin.run("ADD", "c3", &cont, &bad).err();
    assert!(error_msg(&e).contains("no IP ranges"), "{e}");
    assert!(link(&h, DEV).is_object() && container_links(&cont).is_empty());
    // An L2 result cannot be printed in 0.2.0: back as well.
    let mut l2 = c.clone();
    l2.as_object_mut().unwrap().remove("ipam");
    l2["cniVersion"] = json!("0.2.0");
    let e = plugin.run("ADD", "c3", &cont, &l2).err();
    assert_eq!(e["msg"], "cannot convert: no valid IP addresses");
    assert!(link(&h, DEV).is_object() && container_links(&cont).is_empty());
    // L2 in 1.0.0: moved and up, no addresses.
    l2["cniVersion"] = json!("1.0.0");
    let r = plugin.add("c3", &cont, &l2);
    assert!(r.get("ips").is_none(), "{r}");
    assert!(flags(&link(&cont, "eth0")).contains(&"UP".to_string()));
    plugin.del("c3", &cont, &l2);
    assert!(link(&h, DEV).is_object());
}

#[test]
fn del_with_the_host_name_taken_keeps_the_device_then_retries() {
    if skip_unless_root("host_device::del_with_the_host_name_taken_keeps_the_device_then_retries") {
        return;
    }
    let h = host(4);
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd4");
    let cont = Netns::new("hdc");
    let c = hd(&data, 4, json!({}));
    plugin.add("c4", &cont, &c);
    h.exec_ok(
        "ip",
        &["link", "add", DEV, "type", "veth", "peer", "name", "clash1"],
    );
    let e = plugin.run("DEL", "c4", &cont, &c).err();
    assert!(error_msg(&e).contains("file exists"), "{e}");
    // With the IPAM failing too, DEL reports both.
    let mut bad = c.clone();
    bad["ipam"]["type"] = json!("hdnope");
    let e = plugin.run("DEL", "c4", &cont, &bad).err();
    let msg = error_msg(&e);
    assert!(
        msg.contains(r#"failed to find plugin "hdnope""#) && msg.contains("file exists"),
        "{e}"
    );
    let l = link(&cont, "eth0");
    assert_eq!(l["ifalias"], DEV);
    assert!(flags(&l).contains(&"UP".to_string()));
    h.exec_ok("ip", &["link", "del", DEV]);
    plugin.del("c4", &cont, &c);
    assert!(link(&h, DEV).is_object() && container_links(&cont).is_empty());
    assert!(data.reservations().is_empty());
}

#[test]
fn del_releases_the_address_when_the_netns_is_gone_or_empty() {
    if skip_unless_root("host_device::del_releases_the_address_when_the_netns_is_gone_or_empty") {
        return;
    }
    let h = host(5);
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd5");
    let c = hd(&data, 5, json!({}));
    let path = {
        let cont = Netns::new("hdc");
        plugin.add("c5", &cont, &c);
        cont.path()
    };
    // The veth died with the namespace; the reference fails here and
    // never releases the address (#1196).
    let inv = |netns: Option<String>| {
        let mut i = Invocation::new(ours(), "DEL")
            .env("CNI_CONTAINERID", "c5")
            .env("CNI_IFNAME", "eth0")
            .in_host(&h)
            .config(&c);
        if let Some(p) = netns {
            i = i.env("CNI_NETNS", p);
        }
        i.run()
    };
    inv(Some(path.display().to_string())).ok();
    assert!(data.reservations().is_empty());
    h.exec_ok(
        "ip",
        &["link", "add", DEV, "type", "veth", "peer", "name", "hdq0"],
    );
    let cont = Netns::new("hdc");
    plugin.add("c5", &cont, &c);
    inv(None).ok();
    assert!(data.reservations().is_empty());
    // The device was not touched: its record stays for this DEL.
    assert!(state_file("c5", "eth0").is_file());
    plugin.del("c5", &cont, &c);
    assert!(link(&h, DEV).is_object());
}

#[test]
fn ours_and_go_undo_each_other() {
    if skip_unless_root("host_device::ours_and_go_undo_each_other") {
        return;
    }
    let Some(go) = go_bin("host-device") else {
        eprintln!(
            "SKIP host_device::ours_and_go_undo_each_other: /usr/lib/cni/host-device missing"
        );
        return;
    };
    let h = host(6);
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd6");
    let cont = Netns::new("hdc");
    let c = hd(&data, 6, json!({}));
    let state = |ns: &Netns| {
        let l = link(ns, "eth0");
        (
            l["address"].clone(),
            l["mtu"].clone(),
            l["ifalias"].clone(),
            ns.addrs("eth0").len(),
        )
    };
    // Go ADD, our DEL: the address is released, but we hold no record of
    // what the container cannot change about the device, and a veth is a
    // link the container could have planted under its name and alias: it
    // stays (a physical device would go back under its alias). Go's DEL
    // then takes it back.
    let go = HostPlugin::new(go, &h);
    let rg = go.add("c6", &cont, &c);
    let go_state = state(&cont);
    let out = plugin.run("DEL", "c6", &cont, &with_prev(&c, &rg));
    out.ok();
    assert!(
        out.stderr
            .contains("no record of the device ADD moved there"),
        "{out:?}"
    );
    assert!(data.reservations().is_empty());
    assert_eq!(link(&h, DEV), Value::Null);
    assert_eq!(link(&cont, "eth0")["ifalias"], DEV);
    go.del("c6", &cont, &c);
    assert!(link(&h, DEV).is_object() && container_links(&cont).is_empty());
    // Our ADD: the same container state; Go's DEL undoes it.
    let ro = plugin.add("c6", &cont, &c);
    assert_eq!(state(&cont), go_state, "container state: ours vs Go");
    assert_eq!(ro["interfaces"], rg["interfaces"]);
    go.del("c6", &cont, &with_prev(&c, &ro));
    assert!(link(&h, DEV).is_object() && container_links(&cont).is_empty());
    assert!(data.reservations().is_empty());
    // Go's DEL knows nothing of our saved host side: its file stays (GC or
    // the next ADD of the attachment replaces it).
    let saved = state_file("c6", "eth0");
    assert!(saved.is_file());
    std::fs::remove_file(saved).unwrap();
}

/// The host-side state file of an attachment.
fn state_file(cid: &str, ifname: &str) -> PathBuf {
    PathBuf::from(format!("/run/cni-rcni/host-device/{cid}_{ifname}.json"))
}

/// A host whose device (`hdv0`, MTU 1400, up) carries addresses and a
/// route, its veth peer in a namespace of its own (`peer`) on
/// 10.136.1.0/24 and fd36:1::/64: traffic to the device crosses the wire.
fn configured_host() -> (Netns, Netns) {
    configured_host_on("10.136", "fd36")
}

/// [`configured_host`] on `<v4>.1.0/24` and `<v6>:1::/64`, the route to
/// `<v4>.51.0/24`.
fn configured_host_on(v4: &str, v6: &str) -> (Netns, Netns) {
    let h = Netns::new("hdh");
    let peer = Netns::new("hdq");
    h.exec_ok("ip", &["link", "set", "lo", "up"]);
    h.exec_ok(
        "ip",
        &[
            "link",
            "add",
            DEV,
            "type",
            "veth",
            "peer",
            "name",
            PEER,
            "netns",
            peer.name(),
        ],
    );
    h.exec_ok("ip", &["link", "set", DEV, "mtu", "1400", "up"]);
    h.exec_ok("ip", &["addr", "add", &format!("{v4}.1.1/24"), "dev", DEV]);
    h.exec_ok(
        "ip",
        &["addr", "add", &format!("{v6}:1::1/64"), "dev", DEV, "nodad"],
    );
    h.exec_ok(
        "ip",
        &[
            "route",
            "add",
            &format!("{v4}.51.0/24"),
            "via",
            &format!("{v4}.1.2"),
            "dev",
            DEV,
            "metric",
            "77",
        ],
    );
    peer.exec_ok("ip", &["link", "set", PEER, "mtu", "1400", "up"]);
    peer.exec_ok("ip", &["addr", "add", &format!("{v4}.1.2/24"), "dev", PEER]);
    peer.exec_ok(
        "ip",
        &[
            "addr",
            "add",
            &format!("{v6}:1::2/64"),
            "dev",
            PEER,
            "nodad",
        ],
    );
    (h, peer)
}

/// A config on `hdv0` with host-local on 10.136.n.0/24.
fn hd136(data: &DataDir, n: u8) -> Value {
    let mut c = hd(data, 0, json!({}));
    c["ipam"]["ranges"] = json!([[{"subnet": format!("10.136.{n}.0/24")}]]);
    c
}

/// What the host has of the device: name, MTU, up, addresses, the route.
fn host_side(h: &Netns) -> (Value, Value, bool, Vec<String>, String) {
    host_side_on(h, "10.136")
}

/// [`host_side`] of a [`configured_host_on`] `v4`.
fn host_side_on(h: &Netns, v4: &str) -> (Value, Value, bool, Vec<String>, String) {
    let l = link(h, DEV);
    let route = h
        .exec_ok("ip", &["route", "show", &format!("{v4}.51.0/24")])
        .trim()
        .to_string();
    (
        l["ifname"].clone(),
        l["mtu"].clone(),
        flags(&l).contains(&"UP".to_string()),
        h.addrs(DEV).into_iter().collect(),
        route,
    )
}

#[test]
fn del_restores_the_host_side_and_the_device_answers_again() {
    if skip_unless_root("host_device::del_restores_the_host_side_and_the_device_answers_again") {
        return;
    }
    let (h, peer) = configured_host();
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd7");
    let cont = Netns::new("hdc");
    let cid = unique("iface15");
    let before = host_side(&h);
    assert_eq!(
        before,
        (
            json!(DEV),
            json!(1400),
            true,
            vec!["10.136.1.1/24".to_string(), "fd36:1::1/64".to_string()],
            "10.136.51.0/24 via 10.136.1.2 dev hdv0 metric 77".to_string()
        )
    );
    assert!(ping(&peer, "10.136.1.1"), "peer -> host device before ADD");
    let mut c = hd136(&data, 1);
    c["ipam"]["ranges"][0][0]["rangeStart"] = json!("10.136.1.100");
    let r = plugin.add(&cid, &cont, &c);
    // The device is the container's, with its IPAM address only; the host
    // side is saved beside the host.
    assert_eq!(link(&h, DEV), Value::Null);
    assert!(state_file(&cid, "eth0").is_file());
    assert_eq!(cont.addrs("eth0").len(), 1, "{r}");
    assert!(ping(&cont, "10.136.1.2"), "container -> peer");
    // The workload changes the MTU; DEL puts the host's back.
    cont.exec_ok("ip", &["link", "set", "eth0", "mtu", "1280"]);
    plugin.del(&cid, &cont, &with_prev(&c, &r));
    assert_eq!(host_side(&h), before);
    assert!(!state_file(&cid, "eth0").exists());
    assert!(data.reservations().is_empty());
    assert!(ping(&peer, "10.136.1.1"), "peer -> host device after DEL");
    // The restored v6 address goes through DAD again.
    assert!(
        eventually(|| peer
            .exec("ping", &["-c", "1", "-W", "1", "fd36:1::1"])
            .status
            .success()),
        "peer -> host device over IPv6 after DEL"
    );
    plugin.del(&cid, &cont, &c);
}

#[test]
fn a_failed_add_and_a_gone_netns_leave_the_host_side_as_it_was() {
    if skip_unless_root("host_device::a_failed_add_and_a_gone_netns_leave_the_host_side_as_it_was")
    {
        return;
    }
    let (h, peer) = configured_host();
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd8");
    let cid = unique("iface15");
    let before = host_side(&h);
    let c = hd136(&data, 8);
    // IPAM fails after the move: the device comes back configured.
    let cont = Netns::new("hdc");
    let mut bad = c.clone();
    bad["ipam"]["ranges"] = json!([]);
    plugin.run("ADD", &cid, &cont, &bad).err();
    assert_eq!(host_side(&h), before);
    assert!(!state_file(&cid, "eth0").exists());
    assert!(ping(&peer, "10.136.1.1"));
    // The container's interface name is taken: nothing moves.
    cont.exec_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "hdy0",
        ],
    );
    plugin.run("ADD", &cid, &cont, &c).err();
    assert_eq!(host_side(&h), before);
    cont.exec_ok("ip", &["link", "del", "eth0"]);
    // The container has a link named as the device's host name: the device
    // still goes in as eth0, and back under its name.
    cont.exec_ok(
        "ip",
        &["link", "add", DEV, "type", "veth", "peer", "name", "hdx0"],
    );
    plugin.add(&cid, &cont, &c);
    assert_eq!(link(&cont, "eth0")["ifalias"], DEV);
    plugin.del(&cid, &cont, &c);
    assert_eq!(host_side(&h), before);
    assert!(link(&cont, DEV).is_object());
    // The netns goes away with the device in it (a veth dies with it): DEL
    // succeeds and drops the saved state.
    plugin.add(&cid, &cont, &c);
    assert!(state_file(&cid, "eth0").is_file());
    let path = cont.path();
    drop(cont);
    Invocation::new(ours(), "DEL")
        .attach_at(&cid, &path, "eth0")
        .in_host(&h)
        .config(&c)
        .run()
        .ok();
    assert!(!state_file(&cid, "eth0").exists());
    assert!(data.reservations().is_empty());
}

#[test]
fn gc_drops_the_saved_state_of_invalid_attachments_of_its_network() {
    if skip_unless_root(
        "host_device::gc_drops_the_saved_state_of_invalid_attachments_of_its_network",
    ) {
        return;
    }
    let (h, _peer) = configured_host();
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd9");
    let cont = Netns::new("hdc");
    let (kept, stale) = (unique("iface15"), unique("iface15"));
    let c = hd136(&data, 9);
    plugin.add(&kept, &cont, &c);
    // A file of another network's attachment and a stale one of ours.
    let foreign = state_file(&stale, "net9");
    std::fs::write(&foreign, br#"{"network":"other"}"#).unwrap();
    let ours_stale = state_file(&stale, "eth0");
    std::fs::copy(state_file(&kept, "eth0"), &ours_stale).unwrap();
    let mut gc = c.clone();
    gc["cniVersion"] = json!("1.1.0");
    gc["cni.dev/valid-attachments"] = json!([{"containerID": kept, "ifname": "eth0"}]);
    Invocation::new(ours(), "GC")
        .in_host(&h)
        .config(&gc)
        .run()
        .ok();
    assert!(state_file(&kept, "eth0").is_file());
    assert!(!ours_stale.exists());
    assert!(foreign.exists());
    std::fs::remove_file(&foreign).unwrap();
    plugin.del(&kept, &cont, &c);
    assert!(!state_file(&kept, "eth0").exists());
}

#[test]
fn del_finishes_what_a_killed_del_left() {
    if skip_unless_root("host_device::del_finishes_what_a_killed_del_left") {
        return;
    }
    let (h, peer) = configured_host();
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd10");
    let cont = Netns::new("hdc");
    let cid = unique("iface15");
    let before = host_side(&h);
    let c = hd136(&data, 10);
    plugin.add(&cid, &cont, &c);
    // Where a DEL killed between its rename in the container and the move
    // leaves the device: down, under its host name, the alias still set.
    cont.exec_ok("ip", &["link", "set", "eth0", "down"]);
    cont.exec_ok("ip", &["link", "set", "eth0", "name", DEV]);
    plugin.del(&cid, &cont, &c);
    assert_eq!(host_side(&h), before);
    assert!(container_links(&cont).is_empty());
    assert!(!state_file(&cid, "eth0").exists());
    assert!(ping(&peer, "10.136.1.1"));
}

/// A config on `hdv0` with host-local on 10.151.1.0/24 from .100.
fn hd151(data: &DataDir) -> Value {
    let mut c = hd(data, 0, json!({}));
    c["ipam"]["ranges"] = json!([[{"subnet": "10.151.1.0/24", "rangeStart": "10.151.1.100"}]]);
    c
}

/// What the workload does to its host device: plants a veth named `eth0`
/// with the device's MAC and its host name as alias, up; at index `index`
/// when given, its peer `hdimp1` at index `peer_index` in `peer_ns` (the
/// container when `None`).
fn plant_impostor(
    cont: &Netns,
    mac: &str,
    index: Option<&str>,
    peer_index: &str,
    peer_ns: Option<&Netns>,
) {
    let mut add = vec!["link", "add", "eth0"];
    if let Some(i) = index {
        add.extend(["index", i]);
    }
    add.extend(["address", mac, "type", "veth", "peer", "name", "hdimp1"]);
    add.extend(["index", peer_index]);
    if let Some(ns) = peer_ns {
        add.extend(["netns", ns.name()]);
    }
    cont.exec_ok("ip", &add);
    cont.exec_ok("ip", &["link", "set", "eth0", "alias", DEV, "up"]);
    peer_ns
        .unwrap_or(cont)
        .exec_ok("ip", &["link", "set", "hdimp1", "up"]);
}

/// The planted veth is still in the container as it was planted.
fn assert_impostor_untouched(cont: &Netns, mac: &str) {
    let imp = link(cont, "eth0");
    assert_eq!(imp["linkinfo"]["info_kind"], "veth", "{imp}");
    assert_eq!(imp["address"], mac, "{imp}");
    assert_eq!(imp["ifalias"], DEV, "{imp}");
    assert!(flags(&imp).contains(&"UP".to_string()), "{imp}");
}

#[test]
fn del_leaves_a_planted_impostor_and_returns_the_renamed_device() {
    if skip_unless_root("host_device::del_leaves_a_planted_impostor_and_returns_the_renamed_device")
    {
        return;
    }
    let (h, peer) = configured_host_on("10.151", "fd51");
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd11");
    let cont = Netns::new("hdc");
    let cid = unique("hd11");
    let before = host_side_on(&h, "10.151");
    let c = hd151(&data);
    plugin.add(&cid, &cont, &c);
    let mac = link(&cont, "eth0")["address"].as_str().unwrap().to_string();
    // The workload renames the device away and plants a veth with its
    // name, MAC and alias.
    cont.exec_ok("ip", &["link", "set", "eth0", "down"]);
    cont.exec_ok("ip", &["link", "set", "eth0", "name", "hdreal0"]);
    plant_impostor(&cont, &mac, None, "4000", None);
    let out = plugin.run("DEL", &cid, &cont, &c);
    out.ok();
    // The veth is left in the container as it was, and said to be no
    // device of ours; the real device, found under its new name, is back
    // on the host with its configuration, the only link there besides lo.
    assert_impostor_untouched(&cont, &mac);
    assert!(
        out.stderr
            .contains("\"eth0\" in the container is not the device ADD moved there"),
        "{out:?}"
    );
    assert!(link(&cont, "hdreal0").is_null());
    assert_eq!(host_side_on(&h, "10.151"), before);
    let mut links = h.link_names();
    links.sort();
    assert_eq!(links, [DEV, "lo"]);
    assert!(ping(&peer, "10.151.1.1"), "peer -> host device after DEL");
    assert!(!state_file(&cid, "eth0").exists());
    assert!(data.reservations().is_empty());
}

#[test]
fn del_with_the_device_gone_and_an_impostor_at_its_index_moves_nothing() {
    if skip_unless_root(
        "host_device::del_with_the_device_gone_and_an_impostor_at_its_index_moves_nothing",
    ) {
        return;
    }
    let (h, _peer) = configured_host_on("10.151", "fd51");
    let plugin = HostPlugin::new(ours(), &h);
    let data = DataDir::new("hd12");
    let cont = Netns::new("hdc");
    let hidden = Netns::new("hdz");
    let cid = unique("hd12");
    let c = hd151(&data);
    plugin.add(&cid, &cont, &c);
    let l = link(&cont, "eth0");
    let (mac, index, peer_index) = (
        l["address"].as_str().unwrap(),
        l["ifindex"].to_string(),
        l["link_index"].to_string(),
    );
    // The workload moves the device to a namespace of its own and plants
    // a veth with its name, MAC, alias and index, whose peer has the
    // index of the device's peer (in another namespace of its own).
    cont.exec_ok("ip", &["link", "set", "eth0", "netns", hidden.name()]);
    let other = Netns::new("hdw");
    plant_impostor(&cont, mac, Some(&index), &peer_index, Some(&other));
    let imp = link(&cont, "eth0");
    assert_eq!(
        (imp["ifindex"].to_string(), imp["link_index"].to_string()),
        (index, peer_index)
    );
    let out = plugin.run("DEL", &cid, &cont, &c);
    out.ok();
    // Nothing moved, nothing configured: the host has no link but lo and
    // none of the device's addresses or routes; DEL says why.
    assert_impostor_untouched(&cont, mac);
    assert_eq!(h.link_names(), ["lo"]);
    assert!(
        h.exec_ok("ip", &["-o", "addr", "show"])
            .lines()
            .all(|a| !a.contains("10.151.") && !a.contains("fd51:")),
        "{}",
        h.exec_ok("ip", &["addr", "show"])
    );
    assert_eq!(h.exec_ok("ip", &["route", "show"]).trim(), "");
    for want in [
        "\"eth0\" in the container is not the device ADD moved there (linked into namespace id Some(",
        "is not in the container's namespace any more: nothing to move back",
    ] {
        assert!(out.stderr.contains(want), "{want}: {out:?}");
    }
    assert!(!state_file(&cid, "eth0").exists());
    assert!(data.reservations().is_empty());
    // The device is where the workload put it.
    assert_eq!(container_links(&hidden).len(), 1);
}

#[test]
fn del_releases_the_dhcp_lease_before_the_device_leaves() {
    if skip_unless(
        "host_device::del_releases_the_dhcp_lease_before_the_device_leaves",
        &["dnsmasq"],
    ) {
        return;
    }
    // dnsmasq on 10.151.20.0/24; the "host" holds a macvlan `net1` on its
    // segment: the device. Our dhcp daemon serves the IPAM.
    let lan = Lan::new("hdd", "10.151.20", &[]);
    let h = lan.container("hdd");
    let socket = lan.dir.join("dhcp.sock");
    let daemon = DaemonProc::start(
        &bin("dhcp"),
        &socket,
        &lan.dir.join("daemon.log"),
        &QUICK_TIMING,
    );
    let c = json!({
        "cniVersion": "1.0.0",
        "name": "hdd-net",
        "type": "host-device",
        "device": "net1",
        "ipam": {"type": "dhcp", "daemonSocketPath": socket.display().to_string()},
    });
    let plugin = HostPlugin::new(ours(), &h);
    let cont = Netns::new("hdc");
    let cid = unique("hdd");
    let r = plugin.add(&cid, &cont, &c);
    let addr = r["ips"][0]["address"].as_str().unwrap_or_default();
    let ip = addr.split('/').next().unwrap_or_default().to_string();
    assert!(ip.starts_with("10.151.20."), "{r}");
    wait_for("the lease in dnsmasq's lease file", || {
        lan.leases().contains(&ip)
    });
    // DEL: the daemon releases the lease from the device, still in the
    // container; then the device goes home.
    let out = plugin.run("DEL", &cid, &cont, &c);
    out.ok();
    wait_for("the lease to leave dnsmasq's lease file", || {
        !lan.leases().contains(&ip)
    });
    assert!(
        lan.log().contains(&format!("DHCPRELEASE(srv0) {ip}")),
        "{}\n{}",
        lan.log(),
        daemon.log()
    );
    assert!(link(&h, "net1").is_object() && container_links(&cont).is_empty());
}

/// `DPDKMode` (Go's untagged field, so any case of the key) without a
/// `pciBusID`: nothing is moved, IPAM runs, the result names `CNI_IFNAME`
/// in the sandbox without a MAC; CHECK and DEL leave the device alone.
/// Ours and the Go reference side by side (Debian's v1.1.1 already has the
/// key). Before, rcni ignored the key and moved the device into the
/// container.
#[test]
fn pb_dpdk_mode_without_pci_moves_nothing_like_go() {
    if skip_unless_root("host_device::pb_dpdk_mode_without_pci_moves_nothing_like_go") {
        return;
    }
    let h = Netns::new("pbh");
    h.exec_ok(
        "ip",
        &[
            "link", "add", "pbv0", "type", "veth", "peer", "name", "pbp0",
        ],
    );
    h.exec_ok("ip", &["link", "set", "pbv0", "up"]);
    let mut sides = vec![("ours", ours())];
    match go_bin("host-device") {
        Some(go) => sides.push(("go", go)),
        None => eprintln!("SKIP the Go side: /usr/lib/cni/host-device missing"),
    }
    let mut results = Vec::new();
    for (i, (side, bin)) in sides.into_iter().enumerate() {
        for (j, key) in ["DPDKMode", "dpdkmode", "dpdkMode"].into_iter().enumerate() {
            let data = DataDir::new("pbdpdk");
            let cont = Netns::new("pbc");
            let plugin = HostPlugin::new(bin.clone(), &h);
            let mut extra = json!({"device": "pbv0"});
            extra[key] = json!(true);
            let c = conf("host-device", &data, "1.0.0", Some("10.161.2.0/24"), extra);
            let cid = format!("pb{i}{j}");
            let r = plugin.add(&cid, &cont, &c);
            // v1.9.1 names the interface; Debian's v1.1.1 names none.
            if side == "ours" {
                assert_eq!(
                    r["interfaces"],
                    json!([{"name": "eth0", "sandbox": cont.path().display().to_string()}]),
                    "{side} {key}: {r}"
                );
            }
            assert_eq!(r["ips"][0]["address"], "10.161.2.2/24", "{side} {key}: {r}");
            assert_eq!(r["ips"][0]["interface"], 0, "{side} {key}: {r}");
            assert!(link(&h, "pbv0").is_object(), "{side} {key}: moved");
            assert!(container_links(&cont).is_empty(), "{side} {key}");
            assert_eq!(data.reservations().len(), 1, "{side} {key}");
            let cp = with_prev(&c, &r);
            plugin.run("CHECK", &cid, &cont, &cp).ok();
            plugin.del(&cid, &cont, &cp);
            assert!(data.reservations().is_empty(), "{side} {key}");
            assert!(link(&h, "pbv0").is_object(), "{side} {key}");
            results.push(r["ips"].clone());
        }
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]), "{results:?}");
}
