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

use rcni_tests::dhcp_util::{DaemonProc, Lan, Proc, QUICK_TIMING, client_id_hex, skip, wait_for};
use rcni_tests::tempdir::TempDir;
use rcni_tests::{Invocation, Netns, PluginOutput, bin, go_bin, have_tool, unique};
use serde_json::{Value, json};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The CNI plugin that calls the daemon: ours (tests/tests/dhcp_interop.rs
/// covers our plugin with the Go daemon).
fn plugin() -> PathBuf {
    bin("dhcp")
}

/// Our daemon on `<dir>/dhcp.sock` (short timeouts), killed on drop.
struct Daemon {
    inner: DaemonProc,
    socket: PathBuf,
}

impl Daemon {
    fn start(dir: &Path, extra: &[&str]) -> Daemon {
        let socket = dir.join("dhcp.sock");
        let log = dir.join(format!("daemon-{}.log", unique("l")));
        let mut args = QUICK_TIMING.to_vec();
        args.extend_from_slice(extra);
        Daemon {
            inner: DaemonProc::start(&bin("dhcp"), &socket, &log, &args),
            socket,
        }
    }

    fn log(&self) -> String {
        self.inner.log()
    }

    fn kill(&mut self) {
        let _ = self.inner.proc.0.kill(); // SIGKILL: the socket file stays
        let _ = self.inner.proc.0.wait();
    }
}

/// dnsmasq serving 10.131.<n>.0/24.
fn lan(n: u8) -> Lan {
    Lan::new("dhcpd", &format!("10.131.{n}"), &[])
}

/// Waits until the lease file holds (or no longer holds) `ip`.
fn wait_lease(lan: &Lan, ip: &str, present: bool) {
    wait_for(&format!("{ip} present={present} in the lease file"), || {
        lan.leases().contains(ip) == present
    });
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
    let lan = lan(10);
    let d = Daemon::start(lan.dir.path(), &[]);
    let conf = conf(
        &d,
        json!({"provide": [{"option": "host-name", "value": "dhcpd-host"}]}),
    );
    // Our plugin, then the Go reference's against the same (our) daemon.
    let go = go_bin("dhcp").expect("/usr/lib/cni/dhcp");
    for plugin in [bin("dhcp"), go] {
        let c = lan.container("dhcpd");
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
    wait_lease(lan, ip, true);
    let held = lan.leases();
    // The reference's client id: type 0, then containerID/netName/ifName.
    let cid_hex = client_id_hex("dhcpd-cid-1", "dhcpd-net", "net1");
    assert!(held.contains(&cid_hex), "client id {cid_hex} not in {held}");
    assert!(held.contains("dhcpd-host"), "{held}");
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
    assert_rfc3339_expiry(&d.log());
}

/// The daemon prints a lease's expiry as RFC 3339 UTC
/// (`expiration is 2026-11-27T19:40:00Z`), not as Rust's `SystemTime`
/// debug form.
fn assert_rfc3339_expiry(log: &str) {
    let (_, after) = log
        .split_once("expiration is ")
        .unwrap_or_else(|| panic!("no expiry logged: {log}"));
    let t = after.get(..20).unwrap_or(after).as_bytes();
    let shape = b"dddd-dd-ddTdd:dd:ddZ";
    let ok = t.len() == shape.len()
        && t.iter().zip(shape).all(|(c, s)| {
            if *s == b'd' {
                c.is_ascii_digit()
            } else {
                c == s
            }
        });
    assert!(ok, "expiry not RFC 3339: {after:.60}");
}

#[test]
fn short_lease_is_renewed_at_t1() {
    if skip("short_lease_is_renewed_at_t1") {
        return;
    }
    let lan = lan(11);
    let d = Daemon::start(lan.dir.path(), &[]);
    let c = lan.container("dhcpd");
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
    let lan = lan(12);
    let d = Daemon::start(lan.dir.path(), &[]);
    let conf = conf(&d, json!({}));
    let containers: Vec<Netns> = (0..20).map(|_| lan.container("dhcpd")).collect();
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
    let lan = lan(13);
    let c = lan.container("dhcpd");
    let (addr, conf) = {
        let mut d = Daemon::start(lan.dir.path(), &[]);
        let conf = conf(&d, json!({}));
        let addr = address(&call("ADD", "dhcpd-kill", &c, &conf).ok());
        d.kill();
        (addr, conf)
    };
    assert!(lan.dir.join("dhcp.sock").exists());
    configure(&c, &addr);
    // The stale socket does not keep the new daemon from starting, and it
    // takes the stored lease over.
    let d = Daemon::start(lan.dir.path(), &[]);
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
    let lan = lan(14);
    let d = Daemon::start(lan.dir.path(), &[]);
    let conf = conf(&d, json!({}));
    let c = lan.container("dhcpd");
    call("ADD", "dhcpd-gone", &c, &conf).ok();
    let path = c.path();
    drop(c);
    assert!(!path.exists());
    Invocation::new(plugin(), "DEL")
        .attach_at("dhcpd-gone", &path, "net1")
        .config(&conf)
        .run()
        .ok();
    // The daemon still serves others.
    let c2 = lan.container("dhcpd");
    call("ADD", "dhcpd-gone-2", &c2, &conf).ok();
    call("DEL", "dhcpd-gone-2", &c2, &conf).ok();
}

#[test]
fn daemon_flags_pidfile_and_signals() {
    if skip("daemon_flags_pidfile_and_signals") {
        return;
    }
    let dir = TempDir::new("dhcpd");
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
        .arg(dir.join("x.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Error writing pidfile \"relative.pid\": path not absolute"),
        "{out:?}"
    );
    let pidfile = dir.join("d.pid");
    let d = Daemon::start(
        dir.path(),
        &["-pidfile", pidfile.to_str().unwrap(), "--broadcast"],
    );
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    assert_eq!(pid, d.inner.proc.0.id().to_string());
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
        nix::unistd::Pid::from_raw(d.inner.proc.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = d.inner.proc.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!d.socket.exists());
    assert!(!pidfile.exists());
}

/// `-pidfile` in a directory others can write: a symlink, a second hard
/// link or a FIFO planted at its name is refused (exit 1, nothing written
/// through it), where writing through them let any user have root
/// overwrite a file of their choosing (or hang the daemon's start).
#[test]
fn ld_pidfile_planted_links_are_refused() {
    if skip("ld_pidfile_planted_links_are_refused") {
        return;
    }
    let dir = TempDir::new("ldpid");
    let victim = dir.join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let symlink = dir.join("sym.pid");
    std::os::unix::fs::symlink(&victim, &symlink).unwrap();
    let hardlink = dir.join("hard.pid");
    std::fs::hard_link(&victim, &hardlink).unwrap();
    let fifo = dir.join("fifo.pid");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for (i, planted) in [&symlink, &hardlink, &fifo].into_iter().enumerate() {
        let mut child = Command::new(bin("dhcp"))
            .args(["daemon", "-pidfile"])
            .arg(planted)
            .arg("-socketpath")
            .arg(dir.path().join(format!("d{i}.sock")))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "keep",
            "written through {planted:?}"
        );
        assert_eq!(status.and_then(|s| s.code()), Some(1), "{planted:?}: {err}");
        assert!(err.contains("Error writing pidfile"), "{planted:?}: {err}");
    }
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
    let lan = lan(15);
    let socket = lan.dir.join("activated.sock");
    // systemd-socket-activate listens, and on the first connection execs
    // the daemon with LISTEN_FDS=1 and the socket as fd 3.
    let log = lan.dir.join("activated.log");
    let child = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&socket)
        .arg(bin("dhcp"))
        .args(["daemon", "-leasedir"])
        .arg(lan.dir.join("leases.d"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let _activated = Proc(child);
    wait_for("the activation socket", || socket.exists());
    let c = lan.container("dhcpd");
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
        .arg(lan.dir.join("a.sock"))
        .arg("-l")
        .arg(lan.dir.join("b.sock"))
        .arg(bin("dhcp"))
        .args(["daemon", "-leasedir"])
        .arg(lan.dir.join("leases.d"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the second activation socket", || {
        lan.dir.join("a.sock").exists()
    });
    let _ = UnixStream::connect(lan.dir.join("a.sock"));
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
    let lan = lan(16);
    let d = Daemon::start(lan.dir.path(), &[]);
    let conf = conf(&d, json!({}));
    let (keep, drop_) = (lan.container("dhcpd"), lan.container("dhcpd"));
    let kept = address(&call("ADD", "dhcpd-gc-keep", &keep, &conf).ok());
    let dropped = address(&call("ADD", "dhcpd-gc-drop", &drop_, &conf).ok());
    configure(&drop_, &dropped);
    let mut gc = conf.clone();
    gc["cniVersion"] = json!("1.1.0");
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "dhcpd-gc-keep", "ifname": "net1"}]);
    Invocation::new(plugin(), "GC").config(&gc).run().ok();
    let dropped_ip = dropped.split('/').next().unwrap().to_string();
    wait_lease(&lan, &dropped_ip, false);
    wait_lease(&lan, kept.split('/').next().unwrap(), true);
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
    let lan = lan(17);
    let c = lan.container("dhcpd");
    let mut d = Daemon::start(lan.dir.path(), &[]);
    let conf = conf(&d, json!({}));
    let mut status = conf.clone();
    status["cniVersion"] = json!("1.1.0");
    Invocation::new(plugin(), "STATUS")
        .config(&status)
        .run()
        .ok();
    let addr = address(&call("ADD", "dhcpd-down", &c, &conf).ok());
    configure(&c, &addr);
    d.kill();
    let e = Invocation::new(plugin(), "STATUS")
        .config(&status)
        .run()
        .err();
    assert_eq!(e["code"], 50, "{e}");
    // DEL with the daemon down succeeds; the lease is still stored, so the
    // restarted daemon releases it at the next DEL.
    call("DEL", "dhcpd-down", &c, &conf).ok();
    let d = Daemon::start(lan.dir.path(), &[]);
    call("DEL", "dhcpd-down", &c, &conf).ok();
    let ip = addr.split('/').next().unwrap().to_string();
    wait_for("the release", || !lan.leases().contains(&ip));
    drop(d);
}

#[test]
fn hostile_requests_leave_the_daemon_serving() {
    if skip("hostile_requests_leave_the_daemon_serving") {
        return;
    }
    let lan = lan(18);
    let d = Daemon::start(lan.dir.path(), &[]);
    let c = lan.container("dhcpd");
    let good = conf(&d, json!({}));
    let long = "x".repeat(300);
    let bad_ipam = [
        json!({"provide": [{"option": "host-name", "value": long}]}),
        json!({"provide": [{"option": "nope", "value": "v"}]}),
        json!({"request": [{"option": "256"}]}),
        json!({"request": [{"option": "-1"}]}),
        json!({"provide": [{"option": "12", "fromArg": "H"}]}),
        json!({"priority": -5}),
        json!({"provide": "not a list"}),
        json!({"request": [{"option": 3}]}),
    ];
    for extra in bad_ipam {
        let conf = conf(&d, extra.clone());
        let out = Invocation::new(plugin(), "ADD")
            .attach("dhcpd-hostile", &c, "net1")
            .env("CNI_ARGS", format!("H={long}"))
            .config(&conf)
            .run();
        let e = out.err();
        assert!(e["msg"].as_str().unwrap_or_default().len() < 2000, "{e}");
    }
    // Attachments that cannot be served: no such netns, no such link, a
    // file that is not a netns, an empty interface name.
    let not_ns = lan.dir.join("not-a-netns");
    std::fs::write(&not_ns, b"x").unwrap();
    for (netns, ifname) in [
        ("/run/netns/dhcpd-does-not-exist".to_string(), "net1"),
        (c.path().display().to_string(), "nosuchlink"),
        (not_ns.display().to_string(), "net1"),
        (c.path().display().to_string(), ""),
    ] {
        let out = Invocation::new(plugin(), "ADD")
            .env("CNI_CONTAINERID", "dhcpd-hostile-2")
            .env("CNI_NETNS", &netns)
            .env("CNI_IFNAME", ifname)
            .config(&good)
            .run();
        assert_ne!(out.code, 0, "{out:?}");
    }
    // Garbage on the socket itself.
    for junk in [
        &b"GET / HTTP/1.0\r\n\r\n"[..],
        b"CONNECT /_goRPC_ HTTP/1.0\n\n\xff\xff\xff\xff",
        b"",
    ] {
        use std::io::Write;
        if let Ok(mut s) = UnixStream::connect(&d.socket) {
            let _ = s.write_all(junk);
        }
    }
    // Still serving, and nothing was leased by the failures.
    let r = call("ADD", "dhcpd-hostile-ok", &c, &good).ok();
    assert!(address(&r).starts_with("10.131.18."), "{r}");
    assert_eq!(lan.leases().lines().count(), 1, "{}", lan.leases());
    call("DEL", "dhcpd-hostile-ok", &c, &good).ok();
}

/// A bind mount removed on drop.
struct BindMount(PathBuf);

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn hostprefix_applies_to_the_socket_and_every_netns() {
    if skip("hostprefix_applies_to_the_socket_and_every_netns") {
        return;
    }
    let lan = lan(19);
    let c = lan.container("dhcpd");
    // The daemon sees the host's root under <prefix>, as in a container
    // with the host's / mounted at /host: the netns file is there only.
    let prefix = lan.dir.join("host");
    let ns_in_prefix = prefix.join(c.path().strip_prefix("/").unwrap());
    std::fs::create_dir_all(ns_in_prefix.parent().unwrap()).unwrap();
    std::fs::write(&ns_in_prefix, b"").unwrap();
    let status = Command::new("mount")
        .arg("--bind")
        .arg(c.path())
        .arg(&ns_in_prefix)
        .status()
        .unwrap();
    assert!(status.success());
    let _mount = BindMount(ns_in_prefix.clone());
    let log = lan.dir.join("prefixed.log");
    let d = DaemonProc::start(
        &bin("dhcp"),
        &prefix.join("dhcp.sock"),
        &log,
        &[
            "-hostprefix",
            prefix.to_str().unwrap(),
            "-socketpath",
            "/dhcp.sock",
        ],
    );
    let conf = json!({"cniVersion": "1.0.0", "name": "dhcpd-net", "type": "macvlan",
        "ipam": {"type": "dhcp", "daemonSocketPath": prefix.join("dhcp.sock").display().to_string()}});
    let r = call("ADD", "dhcpd-prefix", &c, &conf).ok();
    assert!(address(&r).starts_with("10.131.19."), "{r}\n{}", d.log());
    call("DEL", "dhcpd-prefix", &c, &conf).ok();
    // The leases were stored beside the prefixed socket.
    assert!(prefix.join("dhcp-leases").is_dir());
}

/// Deletes the container's netns and makes another namespace at the same
/// path (`ip netns del` + `add`, the name a runtime may reuse), holding a
/// link of the same name on the same LAN, UP, with an address in the
/// subnet: everything the daemon would need to act there.
fn replace_netns(lan: &Lan, c: &Netns, addr: &str) {
    rcni_tests::run_ok("ip", &["netns", "del", c.name()]);
    rcni_tests::run_ok("ip", &["netns", "add", c.name()]);
    lan.plug(c, "d4");
    c.exec_ok("ip", &["addr", "add", addr, "dev", "net1"]);
    c.exec_ok("ip", &["link", "set", "net1", "up"]);
}

fn net1_up(c: &Netns) -> bool {
    c.exec_ok("ip", &["-o", "link", "show", "net1"])
        .contains(",UP")
}

/// The daemon finds a lease's namespace again by its path. When the path
/// names another namespace now (a runtime reused the name, or
/// `/proc/<pid>/ns/net` after PID reuse), DEL and a restarted daemon skip
/// that lease with a log line: no DHCPRELEASE from the stranger's link,
/// no renewal adopted there, its link left UP.
#[test]
fn d4_replaced_netns_is_skipped_by_del_and_restart() {
    if skip("d4_replaced_netns_is_skipped_by_del_and_restart") {
        return;
    }
    let lan = Lan::new("d4", "10.154.2", &[]);
    let a = lan.container("d4");
    let b = lan.container("d4");
    let (ip_a, ip_b, conf) = {
        let mut d = Daemon::start(lan.dir.path(), &[]);
        let conf = conf(&d, json!({}));
        let addr_a = address(&call("ADD", "d4-repl-a", &a, &conf).ok());
        let addr_b = address(&call("ADD", "d4-repl-b", &b, &conf).ok());
        configure(&a, &addr_a);
        configure(&b, &addr_b);
        let ip = |s: &str| s.split('/').next().unwrap().to_string();

        // DEL after the path was given to another namespace.
        replace_netns(&lan, &a, "10.154.2.200/24");
        call("DEL", "d4-repl-a", &a, &conf).ok();
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            d.log().contains("names another namespace now"),
            "{}",
            d.log()
        );
        assert!(
            !lan.log()
                .contains(&format!("DHCPRELEASE(srv0) {}", ip(&addr_a))),
            "released from the other namespace:\n{}",
            lan.log()
        );
        assert!(net1_up(&a));
        d.kill();
        (ip(&addr_a), ip(&addr_b), conf)
    };

    // A daemon restarted after B's path was given to another namespace.
    replace_netns(&lan, &b, "10.154.2.201/24");
    let d = Daemon::start(lan.dir.path(), &[]);
    let log = d.log();
    assert!(!log.contains("re-adopted stored lease"), "{log}");
    assert!(
        log.contains("names another namespace now") && log.contains("stored lease dropped"),
        "{log}"
    );
    call("DEL", "d4-repl-b", &b, &conf).ok();
    std::thread::sleep(Duration::from_millis(300));
    assert!(net1_up(&b));
    for ip in [&ip_a, &ip_b] {
        assert!(
            !lan.log().contains(&format!("DHCPRELEASE(srv0) {ip}")),
            "{}",
            lan.log()
        );
    }
}

/// A rogue DHCP server on `srv0` (10.154.3.1) of `server`: it offers
/// 10.154.3.50 and ACKs every REQUEST with a 1-second lease and T1 = T2 =
/// 0, counting the REQUESTs. Stops when `stop` is set.
fn rogue_server(
    server: &Netns,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use dhcp4::{BOOTREPLY, BOOTREQUEST, CLIENT_PORT, Message, MessageType, SERVER_PORT, opt};
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::sync::atomic::Ordering;
    let opts = cni_net::udp::UdpOpts {
        broadcast: true,
        transparent: false,
    };
    let sock = server
        .run_in(|| {
            cni_net::udp::bound_to_device(
                "srv0",
                SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SERVER_PORT),
                opts,
            )
        })
        .expect("rogue server socket");
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    std::thread::spawn(move || {
        let me = Ipv4Addr::new(10, 154, 3, 1);
        let mut buf = [0u8; 1500];
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, _)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let Some(m) = Message::decode(&buf[..n]) else {
                continue;
            };
            let kind = match m.message_type() {
                _ if m.op != BOOTREQUEST => continue,
                Some(MessageType::Discover) => MessageType::Offer,
                Some(MessageType::Request) => {
                    requests.fetch_add(1, Ordering::Relaxed);
                    MessageType::Ack
                }
                _ => continue,
            };
            let mut reply = Message::request(kind, m.xid, m.chaddr);
            reply.op = BOOTREPLY;
            reply.yiaddr = Ipv4Addr::new(10, 154, 3, 50);
            reply.set_option(opt::SERVER_ID, me.octets().to_vec());
            reply.set_option(opt::SUBNET_MASK, vec![255, 255, 255, 0]);
            reply.set_option(opt::ROUTER, me.octets().to_vec());
            reply.set_option(opt::LEASE_TIME, 1u32.to_be_bytes().to_vec());
            reply.set_option(opt::RENEWAL_TIME, 0u32.to_be_bytes().to_vec());
            reply.set_option(opt::REBINDING_TIME, 0u32.to_be_bytes().to_vec());
            let to = SocketAddrV4::new(Ipv4Addr::BROADCAST, CLIENT_PORT);
            let _ = sock.send_to(&reply.encode(), to);
        }
    })
}

/// A server that answers T1 = 0 with 1-second leases drove the daemon
/// into renewing as fast as it answered (the Go daemon does too). The
/// daemon schedules by a lease of at least 60 s and a T1 of at least
/// 15 s: in the seconds after ADD it sends no renewal at all.
#[test]
fn d4_rogue_server_t1_zero_gets_no_renew_storm() {
    if rcni_tests::skip_unless_root("d4_rogue_server_t1_zero_gets_no_renew_storm") {
        return;
    }
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let server = Netns::new("d4");
    let c = Netns::new("d4");
    server.wire_to("srv0", &["10.154.3.1/24".into()], &c, "net1", &[]);
    let requests = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let rogue = rogue_server(&server, Arc::clone(&requests), Arc::clone(&stop));
    let dir = TempDir::new("d4");
    let d = Daemon::start(dir.path(), &[]);
    let conf = conf(&d, json!({}));
    let r = call("ADD", "d4-rogue", &c, &conf).ok();
    assert_eq!(address(&r), "10.154.3.50/24", "{r}");
    configure(&c, "10.154.3.50/24");
    let acquired = requests.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(5));
    let renewals = requests.load(Ordering::Relaxed) - acquired;
    call("DEL", "d4-rogue", &c, &conf).ok();
    stop.store(true, Ordering::Relaxed);
    rogue.join().unwrap();
    assert!(
        renewals <= 1,
        "{renewals} renewals in 5 s after a T1 = 0 lease:\n{}",
        d.log().lines().take(20).collect::<Vec<_>>().join("\n")
    );
    assert!(net1_up(&c));
}
