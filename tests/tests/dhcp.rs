//! The dhcp daemon (`dhcp daemon`) against a real DHCP server: dnsmasq
//! serving 10.131.N.0/24 in a private "server" netns, a veth into a
//! "segment" netns, and macvlans over the segment's end moved into
//! container netns (one per attachment), as a macvlan+dhcp network has
//! them. The daemon runs with `-socketpath` under a temporary directory;
//! the plugin side is ours, and in one test also the Go reference's
//! (Debian 1.1.1, which speaks the same net/rpc protocol). Checks are on dnsmasq's lease file and log:
//! the lease is there after ADD, renewed at T1, gone after DEL.
//!
//! Everything is removed on drop (daemon, dnsmasq, namespaces, files),
//! also when a test fails.

#![cfg(test)]

use rcni_tests::{
    Invocation, Netns, PluginOutput, bin, go_bin, have_tool, skip_unless_root, unique,
};
use serde_json::{Value, json};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The CNI plugin that calls the daemon: ours (tests/tests/dhcp_interop.rs
/// covers our plugin with the Go daemon).
fn plugin() -> PathBuf {
    bin("dhcp")
}

fn skip(test: &str) -> bool {
    if skip_unless_root(test) {
        return true;
    }
    for tool in ["dnsmasq", "ip"] {
        if !have_tool(tool) {
            eprintln!("SKIP {test}: {tool} is not installed (scripts/test-deps installs it)");
            return true;
        }
    }
    if go_bin("dhcp").is_none() {
        eprintln!("SKIP {test}: the Go reference /usr/lib/cni/dhcp is not installed");
        return true;
    }
    false
}

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let p = std::env::temp_dir().join(unique("dhcpd-t"));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A killed-on-drop child process.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The DHCP server side: a server netns running dnsmasq, and a segment
/// netns whose `seg0` (the veth's other end) is the macvlans' parent.
struct Lan {
    /// Holds dnsmasq's namespace (and the veth) until the end.
    _server: Netns,
    segment: Netns,
    dir: TempDir,
    _dnsmasq: Proc,
}

impl Lan {
    fn new(subnet: u8) -> Lan {
        let server = Netns::new("dhcpd");
        let segment = Netns::new("dhcpd");
        let dir = TempDir::new();
        server.exec_ok(
            "ip",
            &[
                "link",
                "add",
                "srv0",
                "type",
                "veth",
                "peer",
                "name",
                "seg0",
                "netns",
                segment.name(),
            ],
        );
        server.exec_ok(
            "ip",
            &[
                "addr",
                "add",
                &format!("10.131.{subnet}.1/24"),
                "dev",
                "srv0",
            ],
        );
        server.exec_ok("ip", &["link", "set", "srv0", "up"]);
        server.exec_ok("ip", &["link", "set", "lo", "up"]);
        segment.exec_ok("ip", &["link", "set", "seg0", "up"]);
        let dnsmasq = Command::new("ip")
            .args(["netns", "exec", server.name(), "dnsmasq", "--no-daemon"])
            .args([
                "--conf-file=/dev/null",
                "--port=0",
                "--user=root",
                "--interface=srv0",
            ])
            .args([
                "--bind-interfaces",
                "--no-ping",
                "--log-dhcp",
                "--dhcp-authoritative",
            ])
            .arg(format!(
                "--dhcp-range=10.131.{subnet}.50,10.131.{subnet}.150,255.255.255.0,2m"
            ))
            .arg(format!(
                "--dhcp-leasefile={}",
                dir.0.join("leases").display()
            ))
            .arg(format!(
                "--log-facility={}",
                dir.0.join("dnsmasq.log").display()
            ))
            .arg(format!(
                "--pid-file={}",
                dir.0.join("dnsmasq.pid").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dnsmasq");
        let lan = Lan {
            _server: server,
            segment,
            dir,
            _dnsmasq: Proc(dnsmasq),
        };
        wait_for("dnsmasq to start", || lan.log().contains("DHCP, IP range"));
        lan
    }

    /// dnsmasq's lease file, read until two reads agree (dnsmasq rewrites
    /// it in place).
    fn leases(&self) -> String {
        let read = || std::fs::read_to_string(self.dir.0.join("leases")).unwrap_or_default();
        let mut last = read();
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let now = read();
            if now == last {
                return now;
            }
            last = now;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("dnsmasq.log")).unwrap_or_default()
    }

    /// Waits until dnsmasq's lease file holds (or no longer holds) `ip`:
    /// dnsmasq rewrites the file in place, so one read may catch it
    /// half written.
    fn wait_lease(&self, ip: &str, present: bool) {
        wait_for(&format!("{ip} present={present} in the lease file"), || {
            self.leases().contains(ip) == present
        });
    }

    /// A container netns with a macvlan `net1` over the segment.
    fn container(&self) -> Netns {
        let c = Netns::new("dhcpd");
        let name = unique("dhcpm");
        self.segment.exec_ok(
            "ip",
            &[
                "link", "add", "link", "seg0", "name", &name, "type", "macvlan", "mode", "bridge",
            ],
        );
        self.segment
            .exec_ok("ip", &["link", "set", &name, "netns", c.name()]);
        c.exec_ok("ip", &["link", "set", &name, "name", "net1"]);
        c
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Our daemon, listening on `<dir>/dhcp.sock`; SIGKILLed on drop.
struct Daemon {
    proc: Proc,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    fn start(dir: &Path, extra: &[&str]) -> Daemon {
        let socket = dir.join("dhcp.sock");
        let log = dir.join(format!("daemon-{}.log", unique("l")));
        let child = Command::new(bin("dhcp"))
            .arg("daemon")
            .arg("-socketpath")
            .arg(&socket)
            .args([
                "-timeout",
                "5s",
                "-resendmax",
                "8s",
                "-resendtimeout",
                "30s",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("dhcp daemon");
        let d = Daemon {
            proc: Proc(child),
            socket,
            log,
        };
        wait_for("the daemon's socket", || {
            UnixStream::connect(&d.socket).is_ok()
        });
        d
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn conf(d: &Daemon, extra_ipam: Value) -> Value {
    let mut ipam = json!({"type": "dhcp", "daemonSocketPath": d.socket.display().to_string()});
    if let (Some(m), Some(e)) = (ipam.as_object_mut(), extra_ipam.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
    json!({"cniVersion": "1.0.0", "name": "dhcpd-net", "type": "macvlan", "ipam": ipam})
}

fn call(cmd: &str, cid: &str, c: &Netns, conf: &Value) -> PluginOutput {
    call_with(&plugin(), cmd, cid, c, conf)
}

fn call_with(plugin: &Path, cmd: &str, cid: &str, c: &Netns, conf: &Value) -> PluginOutput {
    Invocation::new(plugin, cmd)
        .attach(cid, c, "net1")
        .config(conf)
        .run()
}

fn address(result: &Value) -> String {
    result["ips"][0]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("no address in {result}"))
        .to_string()
}

/// Puts the leased address on net1, as the main plugin would.
fn configure(c: &Netns, addr: &str) {
    c.exec_ok("ip", &["addr", "add", addr, "dev", "net1"]);
}

#[test]
fn add_gets_a_lease_del_releases_it() {
    if skip("add_gets_a_lease_del_releases_it") {
        return;
    }
    let lan = Lan::new(10);
    let d = Daemon::start(&lan.dir.0, &[]);
    let conf = conf(
        &d,
        json!({"provide": [{"option": "host-name", "value": "dhcpd-host"}]}),
    );
    // Our plugin, then the Go reference's against the same (our) daemon.
    let go = go_bin("dhcp").expect("/usr/lib/cni/dhcp");
    for plugin in [bin("dhcp"), go] {
        let c = lan.container();
        add_check_del(&lan, &d, &plugin, &c, &conf);
    }
}

fn add_check_del(lan: &Lan, d: &Daemon, plugin: &Path, c: &Netns, conf: &Value) {
    let call = |cmd: &str, cid: &str, c: &Netns, conf: &Value| call_with(plugin, cmd, cid, c, conf);
    let r = call("ADD", "dhcpd-cid-1", c, conf).ok();
    let addr = address(&r);
    assert!(
        addr.starts_with("10.131.10.") && addr.ends_with("/24"),
        "{r}"
    );
    assert_eq!(r["ips"][0]["gateway"], "10.131.10.1");
    assert_eq!(
        r["routes"],
        json!([{"dst": "0.0.0.0/0", "gw": "10.131.10.1"}])
    );
    let ip = addr.split('/').next().unwrap();
    lan.wait_lease(ip, true);
    let leases = lan.leases();
    // The reference's client id: type 0, then containerID/netName/ifName.
    let cid_hex: String = b"\0dhcpd-cid-1/dhcpd-net/net1"
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    assert!(
        leases.contains(&cid_hex),
        "client id {cid_hex} not in {leases}"
    );
    assert!(leases.contains("dhcpd-host"), "{leases}");
    // CHECK asks again: the same lease, no second one.
    call("CHECK", "dhcpd-cid-1", c, conf).ok();
    assert_eq!(lan.leases().lines().count(), 1, "{}", lan.leases());

    configure(c, &addr);
    call("DEL", "dhcpd-cid-1", c, conf).ok();
    wait_for("the lease to leave dnsmasq's lease file", || {
        !lan.leases().contains(ip)
    });
    assert!(
        lan.log().contains(&format!("DHCPRELEASE(srv0) {ip}")),
        "{}",
        lan.log()
    );
    // DEL again, and DEL of an attachment never added: success.
    call("DEL", "dhcpd-cid-1", c, conf).ok();
    call("DEL", "dhcpd-nope", c, conf).ok();
    assert!(d.log().contains("releasing lease"), "{}", d.log());
}

#[test]
fn short_lease_is_renewed_at_t1() {
    if skip("short_lease_is_renewed_at_t1") {
        return;
    }
    let lan = Lan::new(11);
    let d = Daemon::start(&lan.dir.0, &[]);
    let c = lan.container();
    let conf = conf(&d, json!({}));
    let addr = address(&call("ADD", "dhcpd-renew", &c, &conf).ok());
    configure(&c, &addr);
    let ip = addr.split('/').next().unwrap().to_string();
    // dnsmasq's shortest lease is 2 minutes, so T1 is 60 s away.
    let deadline = Instant::now() + Duration::from_secs(100);
    let acks = || lan.log().matches(&format!("DHCPACK(srv0) {ip}")).count();
    while acks() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(acks() >= 2, "no renewal:\n{}\n{}", lan.log(), d.log());
    assert!(d.log().contains("lease renewed"), "{}", d.log());
    // A renewal is unicast from the leased address: dnsmasq logs the
    // REQUEST with the client's address and answers it unicast.
    let renewal = lan
        .log()
        .rsplit(&format!("DHCPREQUEST(srv0) {ip}"))
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(!renewal.contains("broadcast response"), "{renewal}");
    call("DEL", "dhcpd-renew", &c, &conf).ok();
    wait_for("the release", || !lan.leases().contains(&ip));
}

#[test]
fn twenty_concurrent_attachments_get_distinct_leases() {
    if skip("twenty_concurrent_attachments_get_distinct_leases") {
        return;
    }
    let lan = Lan::new(12);
    let d = Daemon::start(&lan.dir.0, &[]);
    let conf = conf(&d, json!({}));
    let containers: Vec<Netns> = (0..20).map(|_| lan.container()).collect();
    let addrs: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = containers
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let conf = &conf;
                s.spawn(move || address(&call("ADD", &format!("dhcpd-many-{i}"), c, conf).ok()))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: std::collections::BTreeSet<_> = addrs.iter().collect();
    assert_eq!(distinct.len(), 20, "{addrs:?}");
    assert_eq!(lan.leases().lines().count(), 20, "{}", lan.leases());
    for (i, (c, a)) in containers.iter().zip(&addrs).enumerate() {
        configure(c, a);
        call("DEL", &format!("dhcpd-many-{i}"), c, &conf).ok();
    }
    wait_for("all 20 releases", || lan.leases().trim().is_empty());
}

#[test]
fn daemon_killed_and_restarted_later_del_releases() {
    if skip("daemon_killed_and_restarted_later_del_releases") {
        return;
    }
    let lan = Lan::new(13);
    let c = lan.container();
    let (addr, conf) = {
        let mut d = Daemon::start(&lan.dir.0, &[]);
        let conf = conf(&d, json!({}));
        let addr = address(&call("ADD", "dhcpd-kill", &c, &conf).ok());
        let _ = d.proc.0.kill(); // SIGKILL: socket file left behind
        let _ = d.proc.0.wait();
        (addr, conf)
    };
    assert!(lan.dir.0.join("dhcp.sock").exists());
    configure(&c, &addr);
    // The stale socket does not keep the new daemon from starting, and it
    // takes the stored lease over.
    let d = Daemon::start(&lan.dir.0, &[]);
    assert!(d.log().contains("re-adopted stored lease"), "{}", d.log());
    // The same lease is answered, not a new one.
    let again = call("CHECK", "dhcpd-kill", &c, &conf);
    again.ok();
    assert_eq!(lan.leases().lines().count(), 1);
    let ip = addr.split('/').next().unwrap().to_string();
    call("DEL", "dhcpd-kill", &c, &conf).ok();
    wait_for("the release after the restart", || {
        !lan.leases().contains(&ip)
    });
}

#[test]
fn container_netns_gone_del_still_succeeds() {
    if skip("container_netns_gone_del_still_succeeds") {
        return;
    }
    let lan = Lan::new(14);
    let d = Daemon::start(&lan.dir.0, &[]);
    let conf = conf(&d, json!({}));
    let c = lan.container();
    call("ADD", "dhcpd-gone", &c, &conf).ok();
    let path = c.path();
    drop(c);
    assert!(!path.exists());
    Invocation::new(plugin(), "DEL")
        .env("CNI_CONTAINERID", "dhcpd-gone")
        .env("CNI_NETNS", path.display().to_string())
        .env("CNI_IFNAME", "net1")
        .config(&conf)
        .run()
        .ok();
    // The daemon still serves others.
    let c2 = lan.container();
    call("ADD", "dhcpd-gone-2", &c2, &conf).ok();
    call("DEL", "dhcpd-gone-2", &c2, &conf).ok();
}

#[test]
fn daemon_flags_pidfile_and_signals() {
    if skip("daemon_flags_pidfile_and_signals") {
        return;
    }
    let dir = TempDir::new();
    let out = Command::new(bin("dhcp"))
        .args(["daemon", "-nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("flag provided but not defined: -nope")
    );
    let out = Command::new(bin("dhcp"))
        .args(["daemon", "-pidfile", "relative.pid", "-socketpath"])
        .arg(dir.0.join("x.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Error writing pidfile \"relative.pid\": path not absolute"),
        "{out:?}"
    );
    let pidfile = dir.0.join("d.pid");
    let d = Daemon::start(
        &dir.0,
        &["-pidfile", pidfile.to_str().unwrap(), "--broadcast"],
    );
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    assert_eq!(pid, d.proc.0.id().to_string());
    // A second daemon on the same live socket refuses to start.
    let out = Command::new(bin("dhcp"))
        .args(["daemon", "-socketpath"])
        .arg(&d.socket)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("address already in use"));
    // SIGTERM: socket and pidfile removed, exit 0.
    let mut d = d;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.proc.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = d.proc.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!d.socket.exists());
    assert!(!pidfile.exists());
}

#[test]
fn socket_activation_as_systemd_passes_it() {
    if skip("socket_activation_as_systemd_passes_it") {
        return;
    }
    if !have_tool("systemd-socket-activate") {
        eprintln!("SKIP socket_activation_as_systemd_passes_it: systemd-socket-activate missing");
        return;
    }
    let lan = Lan::new(15);
    let socket = lan.dir.0.join("activated.sock");
    // systemd-socket-activate listens, and on the first connection execs
    // the daemon with LISTEN_FDS=1 and the socket as fd 3.
    let log = lan.dir.0.join("activated.log");
    let child = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&socket)
        .arg(bin("dhcp"))
        .args(["daemon", "-leasedir"])
        .arg(lan.dir.0.join("leases.d"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let _activated = Proc(child);
    wait_for("the activation socket", || socket.exists());
    let c = lan.container();
    let conf = json!({"cniVersion": "1.0.0", "name": "dhcpd-net", "type": "macvlan",
        "ipam": {"type": "dhcp", "daemonSocketPath": socket.display().to_string()}});
    let r = call("ADD", "dhcpd-act", &c, &conf).ok();
    assert!(address(&r).starts_with("10.131.15."), "{r}");
    call("DEL", "dhcpd-act", &c, &conf).ok();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!text.contains("removing stale socket"), "{text}");

    // Two sockets passed: the reference's error.
    let two = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(lan.dir.0.join("a.sock"))
        .arg("-l")
        .arg(lan.dir.0.join("b.sock"))
        .arg(bin("dhcp"))
        .args(["daemon", "-leasedir"])
        .arg(lan.dir.0.join("leases.d"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the second activation socket", || {
        lan.dir.0.join("a.sock").exists()
    });
    let _ = UnixStream::connect(lan.dir.0.join("a.sock"));
    let out = two.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Error getting listener: Too many (2) FDs passed through socket activation"),
        "{out:?}"
    );
}

#[test]
fn gc_releases_leases_not_in_valid_attachments() {
    if skip("gc_releases_leases_not_in_valid_attachments") {
        return;
    }
    let lan = Lan::new(16);
    let d = Daemon::start(&lan.dir.0, &[]);
    let conf = conf(&d, json!({}));
    let (keep, drop_) = (lan.container(), lan.container());
    let kept = address(&call("ADD", "dhcpd-gc-keep", &keep, &conf).ok());
    let dropped = address(&call("ADD", "dhcpd-gc-drop", &drop_, &conf).ok());
    configure(&drop_, &dropped);
    let mut gc = conf.clone();
    gc["cniVersion"] = json!("1.1.0");
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "dhcpd-gc-keep", "ifname": "net1"}]);
    Invocation::new(plugin(), "GC").config(&gc).run().ok();
    let dropped_ip = dropped.split('/').next().unwrap().to_string();
    lan.wait_lease(&dropped_ip, false);
    lan.wait_lease(kept.split('/').next().unwrap(), true);
    // The kept one is still held: CHECK answers; the dropped one's CHECK
    // acquires anew (the daemon forgot it), so it is not asserted here.
    call("CHECK", "dhcpd-gc-keep", &keep, &conf).ok();
    assert!(
        d.log().contains("not a valid attachment any more (GC)"),
        "{}",
        d.log()
    );
    call("DEL", "dhcpd-gc-keep", &keep, &conf).ok();
}

#[test]
fn status_and_del_with_the_daemon_down() {
    if skip("status_and_del_with_the_daemon_down") {
        return;
    }
    let lan = Lan::new(17);
    let c = lan.container();
    let mut d = Daemon::start(&lan.dir.0, &[]);
    let conf = conf(&d, json!({}));
    let mut status = conf.clone();
    status["cniVersion"] = json!("1.1.0");
    Invocation::new(plugin(), "STATUS")
        .config(&status)
        .run()
        .ok();
    let addr = address(&call("ADD", "dhcpd-down", &c, &conf).ok());
    configure(&c, &addr);
    let _ = d.proc.0.kill();
    let _ = d.proc.0.wait();
    let e = Invocation::new(plugin(), "STATUS")
        .config(&status)
        .run()
        .err();
    assert_eq!(e["code"], 50, "{e}");
    // DEL with the daemon down succeeds; the lease is still stored, so the
    // restarted daemon releases it at the next DEL.
    call("DEL", "dhcpd-down", &c, &conf).ok();
    let d = Daemon::start(&lan.dir.0, &[]);
    call("DEL", "dhcpd-down", &c, &conf).ok();
    let ip = addr.split('/').next().unwrap().to_string();
    wait_for("the release", || !lan.leases().contains(&ip));
    drop(d);
}
