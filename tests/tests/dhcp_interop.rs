//! The dhcp plugin and daemon of each implementation against the other's,
//! over the reference's net/rpc protocol, with a real DHCP server (dnsmasq,
//! see `rcni_tests::dhcp_util`): our plugin with the Go reference's daemon
//! (`/usr/lib/cni/dhcp daemon`, Debian 1.1.1), as a node has it when
//! `/opt/cni/bin` was replaced while the Go daemon kept running; the Go
//! plugin and ours sharing our daemon; a lease taken through the Go daemon
//! found again through ours (same client id) after the switch; and the
//! plugin's behaviour when no daemon runs at all.

#![cfg(test)]

use rcni_tests::dhcp_util::{DaemonProc, Lan, QUICK_TIMING, client_id_hex, skip, wait_for};
use rcni_tests::{Invocation, Netns, PluginOutput, bin, go_bin, skip_unless_root};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const TAG: &str = "dhcprpc";
const NET: &str = "dhcprpc-net";

fn conf(version: &str, socket: &Path) -> Value {
    json!({
        "cniVersion": version,
        "name": NET,
        "type": "macvlan",
        "ipam": {"type": "dhcp", "daemonSocketPath": socket.display().to_string()}
    })
}

fn call(plugin: &Path, cmd: &str, cid: &str, c: &Netns, conf: &Value) -> PluginOutput {
    Invocation::new(plugin, cmd)
        .attach(cid, c, "net1")
        .config(conf)
        .run()
}

/// GC and STATUS take no attachment.
fn call_net(plugin: &Path, cmd: &str, conf: &Value) -> PluginOutput {
    Invocation::new(plugin, cmd).config(conf).run()
}

fn go_daemon(lan: &Lan) -> (DaemonProc, PathBuf) {
    let socket = lan.dir.join("go.sock");
    let d = DaemonProc::start(
        &go_bin("dhcp").unwrap(),
        &socket,
        &lan.dir.join("go-daemon.log"),
        &[],
    );
    (d, socket)
}

/// Our daemon on `socket`, with short DHCP timeouts.
fn our_daemon(lan: &Lan, socket: &Path) -> DaemonProc {
    DaemonProc::start(
        &bin("dhcp"),
        socket,
        &lan.dir.join("our-daemon.log"),
        &QUICK_TIMING,
    )
}

/// Puts the leased address on net1, as the main plugin would.
fn configure(c: &Netns, addr: &str) {
    c.exec_ok("ip", &["addr", "add", addr, "dev", "net1"]);
}

fn address(result: &Value) -> String {
    result["ips"][0]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("no address in {result}"))
        .to_string()
}

#[test]
fn our_plugin_with_go_daemon_add_check_del() {
    if skip("our_plugin_with_go_daemon_add_check_del") {
        return;
    }
    let lan = Lan::new(TAG, "10.132.1", &[]);
    let (daemon, socket) = go_daemon(&lan);
    let (ours, go) = (bin("dhcp"), go_bin("dhcp").unwrap());
    let c = lan.container(TAG);
    let conf = conf("1.0.0", &socket);

    let r = call(&ours, "ADD", "dhcprpc-c1", &c, &conf).ok();
    let addr = address(&r);
    assert!(
        addr.starts_with("10.132.1.") && addr.ends_with("/24"),
        "{r}"
    );
    assert_eq!(
        r,
        json!({
            "cniVersion": "1.0.0",
            "ips": [{"address": addr, "gateway": "10.132.1.1"}],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.132.1.1"}]
        })
    );
    let ip = addr.split('/').next().unwrap().to_string();
    let leases = lan.leases();
    assert!(leases.contains(&ip), "{leases}");
    let id = client_id_hex("dhcprpc-c1", NET, "net1");
    assert!(leases.contains(&id), "client id {id} not in {leases}");

    // The Go plugin, same daemon, another attachment: the same result but
    // for the address (and the empty "dns" its library prints).
    let c2 = lan.container(TAG);
    let mut g = call(&go, "ADD", "dhcprpc-c2", &c2, &conf).ok();
    assert_eq!(g["dns"], json!({}), "{g}");
    g.as_object_mut().unwrap().remove("dns");
    let go_addr = address(&g);
    assert_ne!(go_addr, addr);
    g["ips"][0]["address"] = json!(addr);
    assert_eq!(g, r);

    call(&ours, "CHECK", "dhcprpc-c1", &c, &conf).ok();

    call(&ours, "DEL", "dhcprpc-c1", &c, &conf).ok();
    wait_for("the lease to leave dnsmasq's lease file", || {
        !lan.leases().contains(&format!(" {ip} "))
    });
    assert!(daemon.log().contains("releasing lease"), "{}", daemon.log());
    // DEL again, and DEL of an attachment never added: success.
    call(&ours, "DEL", "dhcprpc-c1", &c, &conf).ok();
    call(&ours, "DEL", "dhcprpc-none", &c, &conf).ok();
    call(&go, "DEL", "dhcprpc-c2", &c2, &conf).ok();
}

#[test]
fn our_plugin_with_go_daemon_classless_routes_in_every_version() {
    if skip("our_plugin_with_go_daemon_classless_routes_in_every_version") {
        return;
    }
    // Option 121 sent whether asked or not (the 1.1.1 daemon does not ask).
    let lan = Lan::new(
        TAG,
        "10.132.2",
        &["--dhcp-option-force=121,10.132.200.0/24,10.132.2.3,0.0.0.0/0,10.132.2.1"],
    );
    let (_daemon, socket) = go_daemon(&lan);
    let ours = bin("dhcp");
    let c = lan.container(TAG);
    let routes = json!([
        {"dst": "10.132.200.0/24", "gw": "10.132.2.3"},
        {"dst": "0.0.0.0/0", "gw": "10.132.2.1"}
    ]);
    for (n, version) in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"].iter().enumerate() {
        let cid = format!("dhcprpc-v{n}");
        let conf = conf(version, &socket);
        let r = call(&ours, "ADD", &cid, &c, &conf).ok();
        assert_eq!(r["cniVersion"], *version, "{r}");
        assert_eq!(r["routes"], routes, "{r}");
        assert_eq!(r["ips"][0]["gateway"], "10.132.2.1", "{r}");
        if version.starts_with("0.") {
            assert_eq!(r["ips"][0]["version"], "4", "{r}");
        }
        call(&ours, "DEL", &cid, &c, &conf).ok();
    }
    // 0.2.0 has its own layout: ip4 with the routes inside.
    let conf = conf("0.2.0", &socket);
    let r = call(&ours, "ADD", "dhcprpc-v020", &c, &conf).ok();
    assert!(
        r["ip4"]["ip"].as_str().unwrap().starts_with("10.132.2."),
        "{r}"
    );
    assert_eq!(r["ip4"]["routes"], routes, "{r}");
    call(&ours, "DEL", "dhcprpc-v020", &c, &conf).ok();
}

#[test]
fn gc_and_status_with_go_daemon() {
    if skip("gc_and_status_with_go_daemon") {
        return;
    }
    let lan = Lan::new(TAG, "10.132.3", &[]);
    let (_daemon, socket) = go_daemon(&lan);
    let ours = bin("dhcp");
    let c = lan.container(TAG);
    let conf = conf("1.1.0", &socket);
    let r = call(&ours, "ADD", "dhcprpc-gc", &c, &conf).ok();
    let ip = address(&r).split('/').next().unwrap().to_string();

    call_net(&ours, "STATUS", &conf).ok();
    // The Go daemon has no DHCP.GC: GC succeeds and the lease stays.
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([]);
    call_net(&ours, "GC", &gc).ok();
    assert!(lan.leases().contains(&ip), "{}", lan.leases());
    // A malformed list is the plugin's own error.
    gc["cni.dev/valid-attachments"] = json!({"containerID": 1});
    assert_eq!(call_net(&ours, "GC", &gc).err()["code"], 7);
    call(&ours, "DEL", "dhcprpc-gc", &c, &conf).ok();
}

#[test]
fn daemon_not_running() {
    if skip("daemon_not_running") {
        return;
    }
    let lan = Lan::new(TAG, "10.132.4", &[]);
    let ours = bin("dhcp");
    let c = lan.container(TAG);

    // No socket file at all.
    let absent = conf("1.1.0", &lan.dir.join("absent.sock"));
    let e = call(&ours, "ADD", "dhcprpc-down", &c, &absent).err();
    assert_eq!(e["code"], 999);
    let msg = e["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("error dialing DHCP daemon: dial unix ")
            && msg.contains("connect: no such file or directory")
            && msg.contains("dhcp daemon")
            && msg.contains("systemctl start cni-dhcp.socket"),
        "{msg}"
    );
    assert_eq!(
        call(&ours, "CHECK", "dhcprpc-down", &c, &absent).err()["code"],
        999
    );
    // DEL and GC succeed (the reference's DEL fails here).
    call(&ours, "DEL", "dhcprpc-down", &c, &absent).ok();
    call_net(&ours, "GC", &absent).ok();
    let e = call_net(&ours, "STATUS", &absent).err();
    assert_eq!(e["code"], 50, "{e}");

    // A daemon killed after ADD leaves its socket file: refused.
    let (mut daemon, socket) = go_daemon(&lan);
    let killed = conf("1.1.0", &socket);
    call(&ours, "ADD", "dhcprpc-kill", &c, &killed).ok();
    daemon.proc.0.kill().unwrap();
    daemon.proc.0.wait().unwrap();
    assert!(socket.exists(), "the 1.1.1 daemon leaves its socket");
    call(&ours, "DEL", "dhcprpc-kill", &c, &killed).ok();
    let e = call_net(&ours, "STATUS", &killed).err();
    assert_eq!(e["code"], 50, "{e}");
    assert!(
        e["msg"].as_str().unwrap().contains("connection refused"),
        "{e}"
    );
    let e = call(&ours, "ADD", "dhcprpc-kill2", &c, &killed).err();
    assert!(
        e["msg"].as_str().unwrap().contains("connection refused"),
        "{e}"
    );
}

#[test]
fn config_errors_as_the_reference() {
    if skip_unless_root("config_errors_as_the_reference") {
        return;
    }
    let ours = bin("dhcp");
    let c = Netns::new(TAG);
    // No ipam: the reference crashes on a nil pointer; we answer.
    let e = call(
        &ours,
        "ADD",
        "dhcprpc-cfg",
        &c,
        &json!({"cniVersion": "1.0.0", "name": NET, "type": "macvlan"}),
    )
    .err();
    assert_eq!(e["code"], 999);
    assert_eq!(
        e["msg"],
        "error obtaining socketPath: error parsing socket path conf: IPAM config missing 'ipam' key"
    );
    // A wrong type fails every command, DEL included, as in the reference.
    let bad = json!({"cniVersion": "1.0.0", "name": NET, "ipam": {"type": "dhcp", "daemonSocketPath": 7}});
    for cmd in ["ADD", "DEL", "CHECK"] {
        let e = call(&ours, cmd, "dhcprpc-cfg", &c, &bad).err();
        assert!(
            e["msg"]
                .as_str()
                .unwrap()
                .starts_with("error obtaining socketPath: error parsing socket path conf: "),
            "{cmd}: {e}"
        );
    }
}

#[test]
fn go_and_our_plugin_share_our_daemon() {
    if skip("go_and_our_plugin_share_our_daemon") {
        return;
    }
    let lan = Lan::new(TAG, "10.132.5", &[]);
    let socket = lan.dir.join("dhcp.sock");
    let _daemon = our_daemon(&lan, &socket);
    let (ours, go) = (bin("dhcp"), go_bin("dhcp").unwrap());
    let conf = conf("1.0.0", &socket);
    let (c1, c2) = (lan.container(TAG), lan.container(TAG));

    let r = call(&ours, "ADD", "dhcprpc-o1", &c1, &conf).ok();
    let mut g = call(&go, "ADD", "dhcprpc-g1", &c2, &conf).ok();
    let (ip_ours, ip_go) = (address(&r), address(&g));
    assert_ne!(ip_ours, ip_go);
    // The same lease shape through either plugin (the Go library prints
    // an empty "dns").
    assert_eq!(g.as_object_mut().unwrap().remove("dns"), Some(json!({})));
    g["ips"][0]["address"] = json!(ip_ours);
    assert_eq!(g, r);
    assert_eq!(r["ips"][0]["gateway"], "10.132.5.1", "{r}");
    let id = client_id_hex("dhcprpc-g1", NET, "net1");
    wait_for("the Go plugin's lease in the lease file", || {
        lan.leases().contains(&id)
    });

    // Each plugin CHECKs and DELs the other's attachment (the address on
    // the link first, as the main plugin puts it: our daemon releases from
    // the leased address).
    call(&go, "CHECK", "dhcprpc-o1", &c1, &conf).ok();
    call(&ours, "CHECK", "dhcprpc-g1", &c2, &conf).ok();
    configure(&c1, &ip_ours);
    configure(&c2, &ip_go);
    call(&ours, "DEL", "dhcprpc-g1", &c2, &conf).ok();
    call(&go, "DEL", "dhcprpc-o1", &c1, &conf).ok();
    for ip in [&ip_ours, &ip_go] {
        let ip = ip.split('/').next().unwrap().to_string();
        wait_for("the released lease to leave the lease file", || {
            !lan.leases().contains(&format!(" {ip} "))
        });
    }
}

#[test]
fn lease_survives_switch_from_go_daemon_to_ours() {
    if skip("lease_survives_switch_from_go_daemon_to_ours") {
        return;
    }
    let lan = Lan::new(TAG, "10.132.6", &[]);
    let ours = bin("dhcp");
    let (mut go_daemon, socket) = go_daemon(&lan);
    let conf = conf("1.0.0", &socket);
    let c = lan.container(TAG);
    let before = address(&call(&ours, "ADD", "dhcprpc-sw", &c, &conf).ok());

    // The node switches daemons on the same socket path: the Go daemon
    // stops (1.1.1 leaves its socket file behind) and ours starts there.
    go_daemon.proc.0.kill().unwrap();
    go_daemon.proc.0.wait().unwrap();
    assert!(socket.exists());
    let daemon = our_daemon(&lan, &socket);
    // Our daemon never saw the lease. CHECK, like ADD, is an Allocate: it
    // acquires one, and gets the same address: the server keys the lease
    // on the client id, which both daemons build alike.
    call(&ours, "CHECK", "dhcprpc-sw", &c, &conf).ok();
    let after = address(&call(&ours, "ADD", "dhcprpc-sw", &c, &conf).ok());
    assert_eq!(after, before);
    let leases = lan.leases();
    assert_eq!(leases.lines().count(), 1, "{leases}");
    configure(&c, &after);
    call(&ours, "DEL", "dhcprpc-sw", &c, &conf).ok();
    let ip = after.split('/').next().unwrap().to_string();
    wait_for("the lease to leave the lease file", || {
        !lan.leases().contains(&format!(" {ip} "))
    });
    drop(daemon);
}
