//! The tap plugin, exec'd as a runtime does, on this kernel's tun/tap
//! driver. Every test has a private "host" namespace (`tph…`) where the
//! plugin runs and a container namespace (`tpc…`) where the tap is made;
//! the real host is never touched. Subnets 10.122.N.0/24, fd22:122::/64.
//! There is no Go reference for tap in Debian's 1.1.1: the expectations
//! are the v1.9.1 behaviour (guide, "tap"), minus its bugs.

// Everything here is test code, helpers included.
#![cfg(test)]

use rcni_tests::netns_setup::{NOTIFY_OFF, sysctls};
use rcni_tests::{Invocation, Netns, PluginOutput, bin, skip_unless_root};
use serde_json::{Value, json};

fn host_ns() -> Netns {
    let host = Netns::new("tph");
    host.exec_ok("ip", &["link", "set", "lo", "up"]);
    host
}

fn conf(version: &str, extra: Value) -> Value {
    let mut c = json!({"cniVersion": version, "name": "tp-net", "type": "tap"});
    if let (Some(m), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
    c
}

fn run(cmd: &str, host: &Netns, cont: &Netns, conf: &Value) -> PluginOutput {
    Invocation::new(bin("tap"), cmd)
        .attach("tp-ctr", cont, "eth0")
        .in_host(host)
        .config(conf)
        .run()
}

fn with_prev(conf: &Value, result: &Value) -> Value {
    let mut c = conf.clone();
    c["prevResult"] = result.clone();
    c
}

/// `ip -d -j link show <dev>` in `ns`.
fn details(ns: &Netns, dev: &str) -> Value {
    ns.ip_json(&["-d", "link", "show", dev])[0].clone()
}

fn sysfs(ns: &Netns, dev: &str, attr: &str) -> String {
    ns.exec_ok("cat", &[&format!("/sys/class/net/{dev}/{attr}")])
        .trim()
        .to_string()
}

/// The namespace's tun/tap devices.
fn taps(ns: &Netns) -> Vec<String> {
    ns.ip_json(&["-d", "link", "show"])
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|l| l["linkinfo"]["info_kind"] == "tun")
        .filter_map(|l| l["ifname"].as_str().map(str::to_string))
        .collect()
}

fn is_up(link: &Value) -> bool {
    link["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "UP"))
}

#[test]
fn l2_tap_with_every_key_is_a_bridge_port() {
    if skip_unless_root("tap::l2_tap_with_every_key_is_a_bridge_port") {
        return;
    }
    let (host, cont) = (host_ns(), Netns::new("tpc"));
    cont.exec_ok("ip", &["link", "add", "tpbr0", "type", "bridge"]);
    let c = conf(
        "1.1.0",
        json!({"multiQueue": true, "mtu": 1400, "mac": "02:12:20:00:00:01",
               "owner": 1234, "group": 4321, "bridge": "tpbr0",
               "dns": {"nameservers": ["10.122.1.53"]}}),
    );
    let r = run("ADD", &host, &cont, &c).ok();
    let l = details(&cont, "eth0");
    assert_eq!(l["linkinfo"]["info_kind"], "tun");
    let data = &l["linkinfo"]["info_data"];
    assert_eq!(data["type"], "tap");
    assert_eq!(data["multi_queue"], true);
    assert_eq!(data["pi"], false);
    assert_eq!(data["vnet_hdr"], false);
    assert_eq!(data["persist"], true);
    // IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE (and IFF_PERSIST), as `ip tuntap` makes it.
    assert_eq!(sysfs(&cont, "eth0", "tun_flags"), "0x1902");
    assert_eq!(sysfs(&cont, "eth0", "owner"), "1234");
    assert_eq!(sysfs(&cont, "eth0", "group"), "4321");
    assert_eq!(l["mtu"], 1400);
    assert_eq!(l["address"], "02:12:20:00:00:01");
    assert_eq!(l["master"], "tpbr0");
    assert!(is_up(&l), "{l}");
    // Nothing was created in the host namespace.
    assert_eq!(host.link_names(), ["lo"]);
    assert_eq!(
        r,
        json!({"cniVersion": "1.1.0",
               "interfaces": [{"name": "eth0", "mac": "02:12:20:00:00:01",
                               "sandbox": cont.path().display().to_string()}],
               "dns": {"nameservers": ["10.122.1.53"]}})
    );
    let c2 = with_prev(&c, &r);
    run("CHECK", &host, &cont, &c2).ok();
    run("DEL", &host, &cont, &c2).ok();
    assert!(taps(&cont).is_empty());
    assert_eq!(cont.link_names(), ["lo", "tpbr0"], "the bridge is not ours");
    // DEL again, and with the namespace gone or not given.
    run("DEL", &host, &cont, &c2).ok();
    let gone = Netns::new("tpc");
    let path = gone.path();
    drop(gone);
    Invocation::new(bin("tap"), "DEL")
        .attach_at("tp-ctr", &path, "eth0")
        .in_host(&host)
        .config(&c2)
        .run()
        .ok();
    Invocation::new(bin("tap"), "DEL")
        .env("CNI_CONTAINERID", "tp-ctr")
        .env("CNI_NETNS", "")
        .env("CNI_IFNAME", "eth0")
        .in_host(&host)
        .config(&c2)
        .run()
        .ok();
}

#[test]
fn defaults_make_a_plain_tap_without_owner() {
    if skip_unless_root("tap::defaults_make_a_plain_tap_without_owner") {
        return;
    }
    let (host, cont) = (host_ns(), Netns::new("tpc"));
    let c = conf("1.0.0", json!({}));
    let r = run("ADD", &host, &cont, &c).ok();
    let l = details(&cont, "eth0");
    assert_eq!(l["linkinfo"]["info_data"]["multi_queue"], false);
    assert_eq!(sysfs(&cont, "eth0", "tun_flags"), "0x1802");
    assert_eq!(sysfs(&cont, "eth0", "owner"), "-1");
    assert_eq!(sysfs(&cont, "eth0", "group"), "-1");
    assert_eq!(l["mtu"], 1500);
    assert!(l.get("master").is_none());
    assert_eq!(r["interfaces"][0]["mac"], l["address"]);
    assert!(r.get("ips").is_none());
    run("DEL", &host, &cont, &c).ok();
    assert!(taps(&cont).is_empty());
}

#[test]
fn l3_tap_gets_the_ipam_addresses_and_routes() {
    if skip_unless_root("tap::l3_tap_gets_the_ipam_addresses_and_routes") {
        return;
    }
    let (host, cont) = (host_ns(), Netns::new("tpc"));
    // Off in the container first (a new namespace inherits init_net's
    // default): ADD must turn it on.
    sysctls(&cont, NOTIFY_OFF);
    let c = conf(
        "1.0.0",
        json!({"ipam": {"type": "static",
                        "addresses": [{"address": "10.122.2.5/24", "gateway": "10.122.2.1"},
                                      {"address": "fd22:122::2:5/64"}],
                        "routes": [{"dst": "10.122.20.0/24"}],
                        "dns": {"nameservers": ["10.122.2.99"]}},
               "dns": {"nameservers": ["10.122.2.53"]}}),
    );
    let r = run("ADD", &host, &cont, &c).ok();
    assert_eq!(
        cont.addrs("eth0"),
        ["10.122.2.5/24", "fd22:122::2:5/64"]
            .map(String::from)
            .into()
    );
    let routes = cont.ip_json(&["-4", "route", "show", "10.122.20.0/24"]);
    assert_eq!(routes[0]["gateway"], "10.122.2.1");
    assert_eq!(cont.sysctl("net/ipv4/conf/eth0/arp_notify"), "1");
    assert!(is_up(&details(&cont, "eth0")));
    assert_eq!(r["ips"][0]["interface"], 0);
    assert_eq!(r["ips"][1]["interface"], 0);
    // The config's dns replaces IPAM's.
    assert_eq!(r["dns"], json!({"nameservers": ["10.122.2.53"]}));
    let c2 = with_prev(&c, &r);
    run("CHECK", &host, &cont, &c2).ok();
    // CHECK sees a missing address, a different MAC, and a non-tap.
    cont.exec_ok("ip", &["addr", "del", "10.122.2.5/24", "dev", "eth0"]);
    let e = run("CHECK", &host, &cont, &c2).err();
    assert!(e["msg"].as_str().unwrap().contains("10.122.2.5"), "{e}");
    let mut bad_mac = c2.clone();
    bad_mac["prevResult"]["interfaces"][0]["mac"] = json!("02:00:00:00:00:99");
    let e = run("CHECK", &host, &cont, &bad_mac).err();
    assert!(
        e["msg"]
            .as_str()
            .unwrap()
            .contains("doesn't match container Mac"),
        "{e}"
    );
    run("DEL", &host, &cont, &c2).ok();
    assert!(taps(&cont).is_empty());
    cont.exec_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "tpp0",
        ],
    );
    let mut veth = c2.clone();
    veth["prevResult"]["interfaces"][0]["mac"] = json!("");
    let e = run("CHECK", &host, &cont, &veth).err();
    assert!(
        e["msg"].as_str().unwrap().contains("not of type tun"),
        "{e}"
    );
}

#[test]
fn a_taken_name_is_refused_and_nothing_is_adopted() {
    if skip_unless_root("tap::a_taken_name_is_refused_and_nothing_is_adopted") {
        return;
    }
    let (host, cont) = (host_ns(), Netns::new("tpc"));
    cont.exec_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "tpp0",
        ],
    );
    let before = cont.link_names();
    let c = conf(
        "1.0.0",
        json!({"ipam": {"type": "static",
        "addresses": [{"address": "10.122.3.5/24"}]}}),
    );
    let e = run("ADD", &host, &cont, &c).err();
    assert!(e["msg"].as_str().unwrap().contains("already exists"), "{e}");
    assert_eq!(cont.link_names(), before);
    assert_eq!(details(&cont, "eth0")["linkinfo"]["info_kind"], "veth");
    assert!(taps(&cont).is_empty());
    // The runtime's DEL after that failed ADD leaves the veth alone too.
    run("DEL", &host, &cont, &c).ok();
    assert_eq!(cont.link_names(), before);
    // An existing tap of that name is not attached to either.
    cont.exec_ok("ip", &["link", "del", "eth0"]);
    cont.exec_ok("ip", &["tuntap", "add", "mode", "tap", "name", "eth0"]);
    let index = details(&cont, "eth0")["ifindex"].clone();
    run("ADD", &host, &cont, &c).err();
    assert_eq!(details(&cont, "eth0")["ifindex"], index);
    assert!(cont.addrs("eth0").is_empty());
}

#[test]
fn failures_leave_no_tap_behind() {
    if skip_unless_root("tap::failures_leave_no_tap_behind") {
        return;
    }
    let (host, cont) = (host_ns(), Netns::new("tpc"));
    let bad_ipam = json!({"type": "static", "addresses": [{"address": "10.122.4.5"}]});
    let cases = [
        (
            "1.0.0",
            json!({"mac": "zz"}),
            "invalid args zz for MAC addr",
        ),
        // The kernel refuses a multicast MAC once the tap exists.
        (
            "1.0.0",
            json!({"mac": "01:00:5e:00:00:01"}),
            "failed to set MAC",
        ),
        (
            "1.0.0",
            json!({"bridge": "tp-nobr"}),
            "failed to get bridge tp-nobr: Link not found",
        ),
        ("1.0.0", json!({"bridge": "lo"}), "as a port of bridge lo"),
        ("1.0.0", json!({"mtu": 65522}), "invalid MTU 65522"),
        ("1.0.0", json!({"mtu": 67}), "invalid MTU 67"),
        (
            "1.0.0",
            json!({"ipam": bad_ipam}),
            "the 'address' field is expected",
        ),
        (
            "1.0.0",
            json!({"ipam": {"type": "tp-no-such-ipam"}}),
            "failed to find plugin",
        ),
        // No addresses at all: an IPAM result without IPs.
        (
            "1.0.0",
            json!({"ipam": {"type": "static"}}),
            "IPAM plugin returned missing IP config",
        ),
        // An L2 result cannot be printed as 0.2.0.
        ("0.2.0", json!({}), "cannot convert: no valid IP addresses"),
        // selinuxContext: pa_selinux_context_as_go (fails only where no
        // LSM takes the label).
        (
            "1.0.0",
            json!({"multiQueue": "yes"}),
            "failed to load netconf",
        ),
        ("1.0.0", json!({"owner": -1}), "failed to load netconf"),
    ];
    for (version, extra, want) in cases {
        let c = conf(version, extra.clone());
        let e = run("ADD", &host, &cont, &c).err();
        let msg = e["msg"].as_str().unwrap().to_lowercase();
        assert!(msg.contains(&want.to_lowercase()), "{extra}: {e}");
        assert_eq!(cont.link_names(), ["lo"], "{extra}");
        assert_eq!(host.link_names(), ["lo"], "{extra}");
    }
    // CNI_ARGS: MAC wins over the config, runtimeConfig over both; other
    // keys need IgnoreUnknown.
    let c = conf("1.0.0", json!({"mac": "02:12:20:00:00:01"}));
    let out = Invocation::new(bin("tap"), "ADD")
        .attach("tp-ctr", &cont, "eth0")
        .env("CNI_ARGS", "K8S_POD_NAME=p")
        .in_host(&host)
        .config(&c)
        .run();
    assert!(out.err()["msg"].as_str().unwrap().contains("unknown args"));
    let mut c = c;
    let add = |c: &Value| {
        Invocation::new(bin("tap"), "ADD")
            .attach("tp-ctr", &cont, "eth0")
            .env(
                "CNI_ARGS",
                "IgnoreUnknown=1;K8S_POD_NAME=p;MAC=02:12:20:00:00:02",
            )
            .in_host(&host)
            .config(c)
            .run()
            .ok()
    };
    assert_eq!(add(&c)["interfaces"][0]["mac"], "02:12:20:00:00:02");
    run("DEL", &host, &cont, &c).ok();
    c["runtimeConfig"] = json!({"mac": "02:12:20:00:00:03"});
    assert_eq!(add(&c)["interfaces"][0]["mac"], "02:12:20:00:00:03");
    // DEL does not trip over CNI_ARGS it does not know.
    Invocation::new(bin("tap"), "DEL")
        .attach("tp-ctr", &cont, "eth0")
        .env("CNI_ARGS", "K8S_POD_NAME=p")
        .in_host(&host)
        .config(&c)
        .run()
        .ok();
    assert!(taps(&cont).is_empty());
}

#[test]
fn status_and_gc_go_to_ipam() {
    let c = conf("1.1.0", json!({"ipam": {"type": "static"}}));
    for cmd in ["STATUS", "GC"] {
        let out = Invocation::new(bin("tap"), cmd).config(&c).run();
        assert_eq!(out.ok(), Value::Null, "{cmd}");
        // Without the IPAM plugin, both say so.
        let out = Invocation::new(bin("tap"), cmd)
            .env("CNI_PATH", "/nonexistent")
            .config(&c)
            .run();
        assert!(
            out.err()["msg"]
                .as_str()
                .unwrap()
                .contains("failed to find plugin"),
            "{cmd}"
        );
    }
    // L2: nothing to ask.
    let c = conf("1.1.0", json!({}));
    for cmd in ["STATUS", "GC"] {
        let out = Invocation::new(bin("tap"), cmd)
            .env("CNI_PATH", "/nonexistent")
            .config(&c)
            .run();
        assert_eq!(out.ok(), Value::Null, "{cmd}");
    }
}

/// Frames read from `f` (non-blocking) until one satisfies `want` or 5 s
/// pass.
fn read_frame(f: &mut std::fs::File, want: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    use std::io::Read;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut buf = vec![0u8; 2048];
    while std::time::Instant::now() < deadline {
        match f.read(&mut buf) {
            Ok(n) if want(&buf[..n]) => return Some(buf[..n].to_vec()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("read tap: {e}"),
        }
    }
    None
}

/// An Ethernet ARP frame: `op` 1 request, 2 reply.
fn arp(op: u8, dst: [u8; 6], sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend(dst);
    f.extend(sha);
    f.extend([0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, op]);
    f.extend(sha);
    f.extend(spa);
    f.extend(tha);
    f.extend(tpa);
    f
}

fn mac_bytes(s: &str) -> [u8; 6] {
    let v: Vec<u8> = s
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect();
    v.try_into().unwrap()
}

#[test]
fn a_process_attached_to_the_tap_exchanges_frames_with_the_container() {
    if skip_unless_root("tap::a_process_attached_to_the_tap_exchanges_frames_with_the_container") {
        return;
    }
    let (host, cont) = (host_ns(), Netns::new("tpc"));
    let c = conf(
        "1.0.0",
        json!({"multiQueue": true, "ipam": {"type": "static",
               "addresses": [{"address": "10.122.5.5/24"}]}}),
    );
    let r = run("ADD", &host, &cont, &c).ok();
    let tap_mac = mac_bytes(r["interfaces"][0]["mac"].as_str().unwrap());
    // A consumer must open it with the same multi-queue flag.
    let (attached, mismatched) = cont.run_in(|| {
        (
            cni_net::tuntap::attach_tap("eth0", true),
            cni_net::tuntap::attach_tap("eth0", false),
        )
    });
    assert!(mismatched.is_err(), "attached without IFF_MULTI_QUEUE");
    let mut f = attached.unwrap();
    nix::fcntl::fcntl(
        &f,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .unwrap();
    // Attached: the carrier is on.
    assert_eq!(details(&cont, "eth0")["operstate"], "UP");
    // The container asks for 10.122.5.9: the request comes out of the tap.
    let mut ping = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            cont.name(),
            "ping",
            "-c",
            "3",
            "-i",
            "0.5",
            "-W",
            "1",
            "10.122.5.9",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let peer = [0x02, 0x12, 0x20, 0, 0, 0x09];
    let request = read_frame(&mut f, |fr| {
        fr.len() >= 42 && fr[12..14] == [0x08, 0x06] && fr[21] == 1 && fr[38..42] == [10, 122, 5, 9]
    });
    let request = request.expect("no ARP request for 10.122.5.9 on the tap");
    assert_eq!(request[6..12], tap_mac, "sent from the tap's MAC");
    // The answer written into the tap reaches the container's ARP table.
    let reply = arp(2, tap_mac, peer, [10, 122, 5, 9], tap_mac, [10, 122, 5, 5]);
    use std::io::Write;
    f.write_all(&reply).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n = cont.ip_json(&["neigh", "show", "10.122.5.9", "dev", "eth0"]);
        if n[0]["lladdr"] == "02:12:20:00:00:09" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ARP reply not learnt: {n}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = ping.wait();
    drop(f);
    run("DEL", &host, &cont, &with_prev(&c, &r)).ok();
    assert!(taps(&cont).is_empty());
}

/// A tap no process has attached has no carrier, so its IPv6 addresses stay
/// tentative (DAD waits for the carrier): ADD with an IPv6 gateway must not
/// wait for them, as the reference since v1.9.0 (372953df). Before, ADD
/// failed after 5 s with "still tentative".
#[test]
fn pb_ipv6_gateway_on_a_tap_without_carrier_adds_at_once() {
    if skip_unless_root("tap::pb_ipv6_gateway_on_a_tap_without_carrier_adds_at_once") {
        return;
    }
    let host = Netns::new("pbh");
    host.exec_ok("ip", &["link", "set", "lo", "up"]);
    let cont = Netns::new("pbc");
    let data = rcni_tests::host_local_util::DataDir::new("pbtap");
    let mut c = data.conf(
        "1.1.0",
        json!({"ranges": [[{"subnet": "fd00:161:1::/64", "gateway": "fd00:161:1::1"}]],
               "routes": [{"dst": "::/0"}]}),
    );
    c["type"] = json!("tap");
    let started = std::time::Instant::now();
    let r = run("ADD", &host, &cont, &c).ok();
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(3),
        "ADD took {took:?}"
    );
    // The carrier goes when the plugin closes the tap, but `ip` shows
    // NO-CARRIER from the operstate, which the kernel's linkwatch updates
    // up to a second later (a lost carrier is not an urgent event).
    let no_carrier = || {
        details(&cont, "eth0")["flags"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "NO-CARRIER"))
    };
    assert!(
        rcni_tests::iface_util::eventually(no_carrier),
        "{}",
        details(&cont, "eth0")
    );
    let routes = cont.ip_json(&["-6", "route", "show", "default"]);
    assert_eq!(routes[0]["gateway"], "fd00:161:1::1", "{routes}");
    assert_eq!(r["ips"][0]["gateway"], "fd00:161:1::1");
    run("DEL", &host, &cont, &with_prev(&c, &r)).ok();
    assert!(taps(&cont).is_empty());
    assert!(data.reservations().is_empty());
}

/// `selinuxContext`. Where no LSM takes the label (this machine), ADD
/// fails as the reference's does (go-selinux writes the context to the
/// thread's `attr/exec`; the kernel refuses it), before IPAM runs and before
/// anything is made: no tap, no lease. Where one takes it (the uml VM:
/// SELinux on, no policy loaded, any context maps to the kernel's), ADD
/// makes the tap through `ip` under that exec label, with its keys, and DEL
/// removes it; the label itself is not readable back (SKIP).
#[test]
fn pa_selinux_context_as_go() {
    if skip_unless_root("tap::pa_selinux_context_as_go") {
        return;
    }
    let (host, cont) = (Netns::new("path"), Netns::new("patc"));
    host.exec_ok("ip", &["link", "set", "lo", "up"]);
    let data_dir = std::env::temp_dir().join(rcni_tests::unique("pasel"));
    let c = conf(
        "1.0.0",
        json!({
            "selinuxContext": "system_u:system_r:container_t:s0:c1,c2",
            "multiQueue": true,
            "mtu": 1400,
            "ipam": {"type": "host-local", "subnet": "10.160.40.0/24",
                     "dataDir": data_dir.display().to_string()},
        }),
    );
    let out = run("ADD", &host, &cont, &c);
    if !rcni_tests::lsm_takes_exec_labels() {
        let e = out.err();
        assert_eq!(e["code"], 999, "{e}");
        assert_eq!(
            e["msg"],
            "failed set socket label: write /proc/thread-self/attr/exec: invalid argument"
        );
        assert_eq!(cont.link_names(), ["lo"]);
        assert!(!data_dir.exists(), "IPAM ran: {}", data_dir.display());
    } else {
        let r = out.ok();
        assert_eq!(r["ips"][0]["address"], "10.160.40.2/24", "{r}");
        assert_eq!(taps(&cont), ["eth0"]);
        let d = details(&cont, "eth0");
        assert_eq!(d["mtu"], 1400, "{d}");
        assert_eq!(d["linkinfo"]["info_data"]["multi_queue"], true, "{d}");
        eprintln!("SKIP pa_selinux_context_as_go: the tap's label is not readable back");
    }
    // DEL of that config is fine, and leaves nothing.
    run("DEL", &host, &cont, &c).ok();
    assert_eq!(cont.link_names(), ["lo"]);
    let _ = std::fs::remove_dir_all(&data_dir);
}
