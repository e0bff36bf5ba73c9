//! The macvlan plugin, exec'd as a runtime does, in private namespaces
//! (tags `mv…`): a private "host" whose veth `mst0` is the parent and
//! whose `peer0` stands for the rest of the segment, and container
//! namespaces. Subnets 10.124.N.0/24 and fd24:124::/64. The same config
//! also runs through the Go reference (/usr/lib/cni/macvlan, v1.1.1,
//! cniVersion 1.0.0) where the kernel state is compared.

#![cfg(test)]

use rcni_tests::host_local_util::DataDir;
use rcni_tests::iface_util::{
    MASTER, PEER, Segment, container_links, eventually, failed_adds_after_ipam_leave_nothing,
    first_ip, link, master_conf, neighbour, ping, with_prev,
};
use rcni_tests::netns_setup::{NOTIFY_OFF, sysctls};
use rcni_tests::{Invocation, Netns, bin, error_msg, go_bin, skip_unless_root};
use serde_json::{Value, json};
use std::path::PathBuf;

fn ours() -> PathBuf {
    bin("macvlan")
}

fn mv(data: &DataDir, n: u8, extra: Value) -> Value {
    master_conf("macvlan", data, Some(n), extra)
}

/// Without IPAM.
fn l2(data: &DataDir, extra: Value) -> Value {
    master_conf("macvlan", data, None, extra)
}

#[test]
fn bridge_mode_containers_reach_each_other_and_the_segment() {
    if skip_unless_root("macvlan::bridge_mode_containers_reach_each_other_and_the_segment") {
        return;
    }
    let seg = Segment::new("mvh", "10.124.1");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("mv1");
    let (a, b) = (Netns::new("mvc"), Netns::new("mvc"));
    // The defaults a moved-in link takes, off: ADD must turn them on.
    sysctls(&a, NOTIFY_OFF);
    let c = mv(&data, 1, json!({"dns": {"nameservers": ["10.124.1.53"]}}));
    let ra = plugin.add("c-a", &a, &c);
    let rb = plugin.add("c-b", &b, &c);

    // Result: one interface, the kernel's MAC, the sandbox, every IP on it,
    // the config's DNS.
    let la = link(&a, "eth0");
    assert_eq!(ra["interfaces"].as_array().unwrap().len(), 1, "{ra}");
    assert_eq!(ra["interfaces"][0]["name"], "eth0");
    assert_eq!(ra["interfaces"][0]["mac"], la["address"]);
    assert_eq!(
        ra["interfaces"][0]["sandbox"],
        a.path().display().to_string()
    );
    assert_eq!(ra["ips"][0]["interface"], 0);
    assert_eq!(ra["dns"]["nameservers"], json!(["10.124.1.53"]));
    // Kernel: a bridge-mode macvlan on mst0 (in the host namespace), up,
    // with the parent's MTU, announcing itself.
    assert_eq!(la["linkinfo"]["info_kind"], "macvlan");
    assert_eq!(la["linkinfo"]["info_data"]["mode"], "bridge");
    assert_eq!(la["mtu"], 1500);
    assert!(la["flags"].as_array().unwrap().contains(&json!("UP")));
    assert_eq!(a.sysctl("net/ipv4/conf/eth0/arp_notify"), "1");
    assert_eq!(a.sysctl("net/ipv6/conf/eth0/ndisc_notify"), "1");
    assert!(seg.host.veths().is_empty() && container_links(&a) == ["eth0"]);

    // The gratuitous ARP sent when eth0 went up reached the segment: peer0
    // (arp_accept=1) learnt the container's MAC without any traffic.
    let (ipa, ipb) = (first_ip(&ra), first_ip(&rb));
    let mac_a = ra["interfaces"][0]["mac"].as_str().unwrap().to_string();
    assert!(
        eventually(|| neighbour(&seg.host, PEER, &ipa).as_deref() == Some(&mac_a)),
        "no gratuitous ARP for {ipa} seen on {PEER}"
    );

    // Traffic: container to container (bridge mode), container to peer.
    assert!(ping(&a, &ipb), "a -> b");
    assert!(ping(&b, &ipa), "b -> a");
    assert!(ping(&a, &seg.peer_ip()), "a -> peer");

    // CHECK passes, then fails on a changed mode, MAC or lost address.
    let ca = with_prev(&c, &ra);
    plugin.run("CHECK", "c-a", &a, &ca).ok();
    let mut vepa = ca.clone();
    vepa["mode"] = json!("vepa");
    let e = plugin.run("CHECK", "c-a", &a, &vepa).err();
    assert_eq!(
        e["msg"],
        "container macvlan mode bridge does not match expected value: vepa"
    );
    let mut wrong_mac = ca.clone();
    wrong_mac["prevResult"]["interfaces"][0]["mac"] = json!("02:00:00:00:00:99");
    let e = plugin.run("CHECK", "c-a", &a, &wrong_mac).err();
    assert!(error_msg(&e).contains("doesn't match container Mac"), "{e}");
    a.exec_ok("ip", &["addr", "flush", "dev", "eth0"]);
    let e = plugin.run("CHECK", "c-a", &a, &ca).err();
    assert!(error_msg(&e).starts_with("Failed to match addr"), "{e}");

    plugin.del("c-a", &a, &with_prev(&c, &ra));
    plugin.del("c-b", &b, &with_prev(&c, &rb));
    assert!(container_links(&a).is_empty() && container_links(&b).is_empty());
    assert!(data.reservations().is_empty());
}

#[test]
fn modes_and_bcqueuelen() {
    if skip_unless_root("macvlan::modes_and_bcqueuelen") {
        return;
    }
    let seg = Segment::new("mvh", "10.124.2");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("mv2");
    for mode in ["bridge", "private", "vepa", "passthru"] {
        let cont = Netns::new("mvc");
        let c = l2(&data, json!({"mode": mode, "bcqueuelen": 100}));
        let r = plugin.add("c-m", &cont, &c);
        assert!(r["ips"].as_array().is_none_or(Vec::is_empty), "{r}");
        let l = link(&cont, "eth0");
        assert_eq!(l["linkinfo"]["info_data"]["mode"], mode);
        assert_eq!(l["linkinfo"]["info_data"]["bcqueuelen"], 100);
        plugin.check("c-m", &cont, &c, &r).ok();
        plugin.del("c-m", &cont, &c);
        assert!(container_links(&cont).is_empty());
    }
    // passthru takes the whole parent: a second child is refused, and
    // nothing is left of it.
    let (a, b) = (Netns::new("mvc"), Netns::new("mvc"));
    let c = l2(&data, json!({"mode": "passthru"}));
    plugin.add("c-p1", &a, &c);
    let e = plugin.run("ADD", "c-p2", &b, &c).err();
    assert!(error_msg(&e).starts_with("failed to create macvlan"), "{e}");
    assert!(container_links(&b).is_empty() && seg.host.veths().is_empty());
    plugin.del("c-p1", &a, &c);
    // Modes are case-sensitive, and `source` is not offered.
    for bad in ["PRIVATE", "source"] {
        let e = plugin
            .run("ADD", "c-x", &b, &l2(&data, json!({"mode": bad})))
            .err();
        assert_eq!(e["msg"], format!("unknown macvlan mode: {bad:?}"));
    }
}

#[test]
fn l2_without_ipam() {
    if skip_unless_root("macvlan::l2_without_ipam") {
        return;
    }
    let seg = Segment::new("mvh", "10.124.3");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("mv3");
    let cont = Netns::new("mvc");
    sysctls(&cont, NOTIFY_OFF);
    let c = l2(&data, json!({}));
    let r = plugin.add("c-l2", &cont, &c);
    assert_eq!(r["interfaces"][0]["name"], "eth0");
    assert!(
        r.get("ips")
            .is_none_or(|v| v.as_array().is_some_and(Vec::is_empty)),
        "{r}"
    );
    let l = link(&cont, "eth0");
    assert!(l["flags"].as_array().unwrap().contains(&json!("UP")));
    assert!(cont.addrs("eth0").is_empty());
    // No announcement sysctls on the L2 path, as the reference.
    assert_eq!(cont.sysctl("net/ipv4/conf/eth0/arp_notify"), "0");
    plugin.check("c-l2", &cont, &c, &r).ok();
    plugin.del("c-l2", &cont, &c);
    assert!(container_links(&cont).is_empty());

    // 0.2.0 cannot carry a result without IPs: an error, and no link left
    // (the reference leaves it up in the container).
    let mut old = c.clone();
    old["cniVersion"] = json!("0.2.0");
    let e = plugin.run("ADD", "c-old", &cont, &old).err();
    assert_eq!(e["msg"], "cannot convert: no valid IP addresses");
    assert!(container_links(&cont).is_empty());
}

#[test]
fn mtu_follows_and_is_bounded_by_the_parent() {
    if skip_unless_root("macvlan::mtu_follows_and_is_bounded_by_the_parent") {
        return;
    }
    let seg = Segment::new("mvh", "10.124.4");
    let plugin = seg.plugin(ours());
    seg.host
        .exec_ok("ip", &["link", "set", MASTER, "mtu", "1400"]);
    let data = DataDir::new("mv4");
    let cont = Netns::new("mvc");
    for (mtu, want) in [(0, 1400), (1300, 1300), (1400, 1400)] {
        let c = l2(&data, json!({"mtu": mtu}));
        plugin.add("c-mtu", &cont, &c);
        assert_eq!(link(&cont, "eth0")["mtu"], want, "mtu {mtu}");
        plugin.del("c-mtu", &cont, &c);
    }
    for bad in [1401, 9000, -1] {
        let c = mv(&data, 4, json!({"mtu": bad}));
        let e = plugin.run("ADD", "c-mtu", &cont, &c).err();
        assert_eq!(
            e["msg"],
            format!("invalid MTU {bad}, must be [0, master MTU(1400)]")
        );
        assert!(container_links(&cont).is_empty());
        assert!(
            data.reservations().is_empty(),
            "IPAM ran before the MTU check"
        );
    }
    for bad in [json!(1400.0), json!("1400")] {
        let c = l2(&data, json!({"mtu": bad}));
        let e = plugin.run("ADD", "c-mtu", &cont, &c).err();
        assert!(error_msg(&e).starts_with("failed to load netconf"), "{e}");
    }
}

#[test]
fn mac_from_config_cni_args_and_runtime_config() {
    if skip_unless_root("macvlan::mac_from_config_cni_args_and_runtime_config") {
        return;
    }
    let seg = Segment::new("mvh", "10.124.5");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("mv5");
    let cont = Netns::new("mvc");
    let (conf_mac, args_mac, rt_mac) = (
        "02:24:00:00:00:01",
        "02:24:00:00:00:02",
        "02:24:00:00:00:03",
    );
    let cases = [
        (json!({"mac": conf_mac}), None, conf_mac),
        (json!({"mac": conf_mac}), Some(args_mac), args_mac),
        (
            json!({"mac": conf_mac, "runtimeConfig": {"mac": rt_mac}}),
            Some(args_mac),
            rt_mac,
        ),
        (json!({"RuntimeConfig": {"mac": rt_mac}}), None, rt_mac),
    ];
    for (extra, args, want) in cases {
        let c = mv(&data, 5, extra);
        let mut inv = Invocation::new(ours(), "ADD")
            .attach("c-mac", &cont, "eth0")
            .in_host(&seg.host)
            .config(&c);
        if let Some(m) = args {
            inv = inv.env(
                "CNI_ARGS",
                format!("IgnoreUnknown=1;K8S_POD_NAME=x;MAC={m}"),
            );
        }
        let r = inv.run().ok();
        assert_eq!(r["interfaces"][0]["mac"], want);
        assert_eq!(link(&cont, "eth0")["address"], want);
        plugin.del("c-mac", &cont, &c);
    }
    // A bad MAC, or an unknown CNI_ARGS key without IgnoreUnknown: errors
    // before anything is made.
    let c = mv(&data, 5, json!({"mac": "zz"}));
    let e = plugin.run("ADD", "c-mac", &cont, &c).err();
    assert_eq!(
        e["msg"],
        "invalid args zz for MAC addr: address zz: invalid MAC address"
    );
    let e = Invocation::new(ours(), "ADD")
        .attach("c-mac", &cont, "eth0")
        .in_host(&seg.host)
        .env("CNI_ARGS", "K8S_POD_NAME=x")
        .config(&mv(&data, 5, json!({})))
        .run()
        .err();
    assert_eq!(e["msg"], r#"ARGS: unknown args ["K8S_POD_NAME=x"]"#);
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
}

#[test]
fn failures_undo_everything() {
    if skip_unless_root("macvlan::failures_undo_everything") {
        return;
    }
    let seg = Segment::new("mvh", "10.124.6");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("mv6");
    let cont = Netns::new("mvc");
    // CNI_IFNAME taken in the container: error, no temporary link, the
    // address released.
    cont.exec_ok(
        "ip",
        &["link", "add", "eth0", "type", "veth", "peer", "name", "x0"],
    );
    let c = mv(&data, 6, json!({}));
    let e = plugin.run("ADD", "c-f", &cont, &c).err();
    assert!(error_msg(&e).contains("file exists"), "{e}");
    assert_eq!(container_links(&cont), ["eth0", "x0"]);
    assert!(data.reservations().is_empty());
    cont.exec_ok("ip", &["link", "del", "eth0"]);
    // IPAM fails: no link left (the reference leaves eth0 behind).
    let mut bad_ipam = c.clone();
    bad_ipam["ipam"]["ranges"] = json!([]);
    let e = plugin.run("ADD", "c-f", &cont, &bad_ipam).err();
    assert!(error_msg(&e).contains("no IP ranges"), "{e}");
    assert!(container_links(&cont).is_empty());
    // A route IPAM asks for cannot be added: the address is released and
    // the link deleted.
    let mut bad_route = c.clone();
    bad_route["ipam"]["routes"] = json!([{"dst": "192.0.2.0/24", "gw": "198.51.100.1"}]);
    let e = plugin.run("ADD", "c-f", &cont, &bad_route).err();
    assert!(error_msg(&e).starts_with("failed to add route"), "{e}");
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
    // Missing master, missing netns.
    let wrong = mv(&data, 6, json!({"master": "nope0"}));
    let e = plugin.run("ADD", "c-f", &cont, &wrong).err();
    assert_eq!(
        e["msg"],
        r#"failed to lookup master "nope0": Link not found"#
    );
    let e = Invocation::new(ours(), "ADD")
        .attach("c-f", &cont, "eth0")
        .env("CNI_NETNS", "/run/netns/mv-no-such-ns")
        .in_host(&seg.host)
        .config(&c)
        .run()
        .err();
    assert!(
        error_msg(&e).starts_with(r#"failed to open netns "/run/netns/mv-no-such-ns""#),
        "{e}"
    );
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
    assert!(seg.host.veths().is_empty());
}

/// IPAM starts before the namespace is opened and the parent looked up
/// (commit 7c60be7): an ADD failing on those (or on the MTU) gives its
/// address back and makes no link (tags `ei_`, 10.203.1.0/24).
#[test]
fn ei_failed_add_after_ipam_started_leaves_nothing() {
    if skip_unless_root("macvlan::ei_failed_add_after_ipam_started_leaves_nothing") {
        return;
    }
    failed_adds_after_ipam_leave_nothing("macvlan", "ei_mv", "10.203.1", json!({}));
}

#[test]
fn del_is_idempotent() {
    if skip_unless_root("macvlan::del_is_idempotent") {
        return;
    }
    let seg = Segment::new("mvh", "10.124.7");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("mv7");
    let c = mv(&data, 7, json!({}));
    // Twice; with the netns gone; with CNI_NETNS empty (IPAM still released).
    let cont = Netns::new("mvc");
    plugin.add("c-d", &cont, &c);
    plugin.del("c-d", &cont, &c);
    plugin.del("c-d", &cont, &c);
    plugin.del_after_netns_gone("mvc", "c-g", &c);
    plugin.add("c-e", &cont, &c);
    Invocation::new(ours(), "DEL")
        .env("CNI_CONTAINERID", "c-e")
        .env("CNI_IFNAME", "eth0")
        .in_host(&seg.host)
        .config(&c)
        .run()
        .ok();
    plugin.del("c-e", &cont, &c);
    // The parent gone takes the macvlan with it; DEL still succeeds and
    // releases the address (1.1.1 failed here: `Link not found`).
    plugin.add("c-m", &cont, &c);
    seg.host.exec_ok("ip", &["link", "del", MASTER]);
    assert!(container_links(&cont).is_empty());
    plugin.del("c-m", &cont, &c);
    assert!(data.reservations().is_empty());
}

#[test]
fn default_master_and_link_in_container() {
    if skip_unless_root("macvlan::default_master_and_link_in_container") {
        return;
    }
    let seg = Segment::new("mvh", "10.124.8");
    let plugin = seg.plugin(ours());
    let data = DataDir::new("mv8");
    let cont = Netns::new("mvc");
    // No master and no default route.
    let mut c = mv(&data, 8, json!({}));
    c.as_object_mut().unwrap().remove("master");
    let e = plugin.run("ADD", "c-dm", &cont, &c).err();
    assert_eq!(e["msg"], "no default route interface found");
    // The default route's interface.
    seg.host
        .exec_ok("ip", &["addr", "add", "10.124.8.250/24", "dev", MASTER]);
    seg.host.exec_ok(
        "ip",
        &[
            "route",
            "add",
            "default",
            "via",
            "10.124.8.254",
            "dev",
            MASTER,
        ],
    );
    plugin.add("c-dm", &cont, &c);
    let l = link(&cont, "eth0");
    let master = link(&seg.host, MASTER);
    assert_eq!(l["link_index"], master["ifindex"]);
    plugin.del("c-dm", &cont, &c);

    // linkInContainer: the parent is a link in the container itself.
    cont.exec_ok(
        "ip",
        &["link", "add", "cm0", "type", "veth", "peer", "name", "cm1"],
    );
    cont.exec_ok("ip", &["link", "set", "cm0", "up"]);
    let c = mv(&data, 8, json!({"master": "cm0", "linkInContainer": true}));
    let r = plugin.add("c-lic", &cont, &c);
    let l = link(&cont, "eth0");
    assert_eq!(l["link"], "cm0");
    assert_eq!(l["linkinfo"]["info_kind"], "macvlan");
    plugin.check("c-lic", &cont, &c, &r).ok();
    plugin.del("c-lic", &cont, &c);
    assert_eq!(link(&cont, "eth0"), Value::Null);
    // Without linkInContainer the same master is looked up on the host.
    let wrong = mv(&data, 8, json!({"master": "cm0"}));
    let e = plugin.run("ADD", "c-lic", &cont, &wrong).err();
    assert_eq!(e["msg"], r#"failed to lookup master "cm0": Link not found"#);
    assert!(data.reservations().is_empty());
}

#[test]
fn ipv6_and_kernel_state_like_go() {
    if skip_unless_root("macvlan::ipv6_and_kernel_state_like_go") {
        return;
    }
    // Dual stack: a v6 address, ndisc_notify, traffic to the peer over v6.
    let seg = Segment::new("mvh", "10.124.9");
    let plugin = seg.plugin(ours());
    seg.host.exec_ok(
        "ip",
        &["addr", "add", "fd24:124::fe/64", "dev", PEER, "nodad"],
    );
    let data = DataDir::new("mv9");
    let cont = Netns::new("mvc");
    let mut c = mv(&data, 9, json!({}));
    c["ipam"]["ranges"] = json!([[{"subnet": "10.124.9.0/24"}], [{"subnet": "fd24:124::/64"}]]);
    c["ipam"]["routes"] = json!([{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]);
    let r = plugin.add("c-6", &cont, &c);
    assert_eq!(r["ips"].as_array().unwrap().len(), 2, "{r}");
    assert!(ping(&cont, "fd24:124::fe"), "v6 to the peer");
    assert!(ping(&cont, &seg.peer_ip()), "v4 to the peer");
    let state = |ns: &Netns| -> Vec<String> {
        let l = link(ns, "eth0");
        let mut s = vec![
            format!("kind {}", l["linkinfo"]["info_kind"]),
            format!("mode {}", l["linkinfo"]["info_data"]["mode"]),
            format!("mtu {}", l["mtu"]),
        ];
        s.extend(ns.addrs("eth0"));
        for fam in ["-4", "-6"] {
            for rt in ns
                .ip_json(&[fam, "route", "show", "dev", "eth0"])
                .as_array()
                .unwrap()
            {
                if rt["dst"].as_str().is_some_and(|d| d.starts_with("fe80")) {
                    continue;
                }
                s.push(format!("route {} via {}", rt["dst"], rt["gateway"]));
            }
        }
        s
    };
    let ours_state = state(&cont);
    plugin.del("c-6", &cont, &c);

    let Some(go) = go_bin("macvlan") else {
        eprintln!("SKIP macvlan Go comparison: /usr/lib/cni/macvlan missing");
        return;
    };
    let go_data = DataDir::new("mv9");
    let mut gc = c.clone();
    gc["name"] = json!(go_data.name());
    gc["ipam"]["dataDir"] = json!(go_data.path().display().to_string());
    let gcont = Netns::new("mvc");
    let go = seg.plugin(go);
    let gr = go.add("c-6", &gcont, &gc);
    assert_eq!(
        gr["ips"], r["ips"],
        "same addresses from a fresh host-local"
    );
    assert_eq!(state(&gcont), ours_state, "kernel state: ours vs Go");
    go.del("c-6", &gcont, &gc);
}

#[test]
fn a_host_link_named_like_cni_ifname_is_no_obstacle() {
    if skip_unless_root("macvlan::a_host_link_named_like_cni_ifname_is_no_obstacle") {
        return;
    }
    // Kernels before about 6.14 look a new link's name up in the
    // requesting namespace too: there the plugin falls back to a temporary
    // name and renames in the container (scripts/vmtest runs this on 6.1).
    let seg = Segment::new("mvh", "10.124.10");
    let plugin = seg.plugin(ours());
    seg.host.exec_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "mvx0",
        ],
    );
    let data = DataDir::new("mv10");
    let cont = Netns::new("mvc");
    let c = mv(&data, 10, json!({}));
    let r = plugin.add("c-n", &cont, &c);
    assert_eq!(container_links(&cont), ["eth0"]);
    assert_eq!(link(&cont, "eth0")["linkinfo"]["info_kind"], "macvlan");
    assert_eq!(link(&seg.host, "eth0")["linkinfo"]["info_kind"], "veth");
    assert!(
        seg.host.veths().is_empty(),
        "no temporary link left on the host"
    );
    plugin.check("c-n", &cont, &c, &r).ok();
    plugin.del("c-n", &cont, &c);
    assert!(container_links(&cont).is_empty() && data.reservations().is_empty());
}
