//! The daemon's Service against a real DHCP server (dnsmasq in a private
//! netns), called in-process: the DHCP exchanges, the lease store and the
//! RPC semantics without the socket protocol. Root only; the binary-level
//! tests are in tests/tests/dhcp.rs.

use super::client::Timing;
use super::lease::Store;
use super::service::Daemon;
use crate::rpc::{CmdArgs, Service};
use cni_skel::CniResult;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Root and dnsmasq, or a SKIP line and true.
fn skip(test: &str) -> bool {
    if !nix::unistd::geteuid().is_root()
        || Command::new("dnsmasq").arg("--version").output().is_err()
    {
        eprintln!("SKIP {test}: needs root and dnsmasq");
        return true;
    }
    false
}

/// dnsmasq serving `range` (`first,last`, 2-minute leases on a /24) on
/// `srv0` of netns `srv`, its lease file and log in `dir`; waits a moment
/// for it to listen.
fn dnsmasq(srv: &str, dir: &std::path::Path, range: &str, extra: &[&str]) -> Child {
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            srv,
            "dnsmasq",
            "--no-daemon",
            "--conf-file=/dev/null",
            "--port=0",
            "--user=root",
            "--interface=srv0",
            "--bind-interfaces",
            "--no-ping",
            "--log-dhcp",
        ])
        .args(extra)
        .arg(format!("--dhcp-range={range},255.255.255.0,2m"))
        .arg(format!("--dhcp-leasefile={}", dir.join("leases").display()))
        .arg(format!("--log-facility={}", dir.join("log").display()))
        .arg(format!("--pid-file={}", dir.join("pid").display()))
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    child
}

/// A server netns running dnsmasq on 10.131.<subnet>.0/24 and a client
/// netns with the other end of a veth, `net1`.
struct Segment {
    tag: String,
    dir: PathBuf,
    dnsmasq: Child,
}

impl Segment {
    fn new(subnet: u8) -> Segment {
        Segment::on("dd", "10.131", subnet)
    }

    /// dnsmasq on `<net>.<subnet>.0/24`, namespaces named `<prefix>...`.
    fn on(prefix: &str, net: &str, subnet: u8) -> Segment {
        let tag = format!("{prefix}{}{subnet}", std::process::id() % 100000);
        let dir = std::env::temp_dir().join(format!("dhcpd-live-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (srv, ctr) = (format!("{tag}s"), format!("{tag}c"));
        ip(&["netns", "add", &srv]);
        ip(&["netns", "add", &ctr]);
        ip(&[
            "-n", &srv, "link", "add", "srv0", "type", "veth", "peer", "name", "net1", "netns",
            &ctr,
        ]);
        ip(&[
            "-n",
            &srv,
            "addr",
            "add",
            &format!("{net}.{subnet}.1/24"),
            "dev",
            "srv0",
        ]);
        ip(&["-n", &srv, "link", "set", "srv0", "up"]);
        ip(&["-n", &srv, "link", "set", "lo", "up"]);
        let dnsmasq = dnsmasq(
            &srv,
            &dir,
            &format!("{net}.{subnet}.50,{net}.{subnet}.150"),
            &[],
        );
        Segment { tag, dir, dnsmasq }
    }

    /// The client's netns name.
    fn client(&self) -> String {
        format!("{}c", self.tag)
    }

    fn netns(&self) -> String {
        format!("/run/netns/{}", self.client())
    }

    /// Puts the leased address on the client's `net1`, as the main plugin
    /// would after the daemon answered.
    fn configure(&self, result: &CniResult) {
        let addr = result.ips[0].address.to_string();
        ip(&["-n", &self.client(), "addr", "add", &addr, "dev", "net1"]);
    }

    /// Stops dnsmasq and starts it again on `range` with `extra` options
    /// and no leases.
    fn restart_dnsmasq(&mut self, range: &str, extra: &[&str]) {
        let _ = self.dnsmasq.kill();
        let _ = self.dnsmasq.wait();
        let _ = std::fs::remove_file(self.dir.join("leases"));
        self.dnsmasq = dnsmasq(&format!("{}s", self.tag), &self.dir, range, extra);
    }

    fn leases(&self) -> String {
        std::fs::read_to_string(self.dir.join("leases")).unwrap_or_default()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        let _ = self.dnsmasq.kill();
        let _ = self.dnsmasq.wait();
        for ns in [format!("{}s", self.tag), self.client()] {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn args(seg: &Segment, cid: &str) -> CmdArgs {
    CmdArgs {
        container_id: cid.into(),
        netns: seg.netns(),
        if_name: "net1".into(),
        args: String::new(),
        path: "/opt/cni/bin".into(),
        netns_override: false,
        stdin_data: br#"{"cniVersion":"1.0.0","name":"dhcpd-live","type":"macvlan","ipam":{"type":"dhcp","provide":[{"option":"host-name","value":"live-host"}]}}"#.to_vec(),
    }
}

/// A daemon whose maintenance (renewals, expiry) runs on a thread of its own.
fn maintained_daemon(seg: &Segment) -> Arc<Daemon> {
    let d = daemon(seg);
    let m = Arc::clone(&d);
    std::thread::spawn(move || m.maintain());
    d
}

fn daemon(seg: &Segment) -> Arc<Daemon> {
    Daemon::new(
        Store::new(seg.dir.join("store")),
        String::new(),
        Timing {
            timeout: Duration::from_secs(3),
            resend_max: Duration::from_secs(4),
            resend_timeout: Duration::from_secs(10),
        },
    )
}

#[test]
fn live_acquire_reuse_release_readopt() {
    if skip("live_acquire_reuse_release_readopt") {
        return;
    }
    let seg = Segment::new(201);
    let d = daemon(&seg);
    let a = args(&seg, "live-cid-1");
    let r = d.allocate(&a).unwrap();
    let addr = r.ips[0].address.ip().to_string();
    assert!(addr.starts_with("10.131.201."), "{r:?}");
    assert!(seg.leases().contains(&addr), "{}", seg.leases());
    assert!(seg.leases().contains("live-host"), "{}", seg.leases());
    // A second Allocate (CHECK) answers from the lease, no new one.
    assert_eq!(d.allocate(&a).unwrap(), r);
    assert_eq!(seg.leases().lines().count(), 1);
    // A second daemon on the same store takes the lease over.
    let d2 = daemon(&seg);
    d2.adopt_stored();
    assert_eq!(d2.lease_count(), 1);
    // Configure the address as the main plugin would, then release.
    seg.configure(&r);
    d2.release(&a).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !seg.leases().contains(&addr),
        "lease still there: {}\n{}",
        seg.leases(),
        seg.log()
    );
    assert!(seg.log().contains("DHCPRELEASE"), "{}", seg.log());
    // Releasing again is fine.
    d2.release(&a).unwrap();
}

#[test]
fn live_renewal_at_t1_and_netns_gone() {
    if skip("live_renewal_at_t1_and_netns_gone") {
        return;
    }
    let seg = Segment::new(202);
    let d = maintained_daemon(&seg);
    let a = args(&seg, "live-cid-2");
    let r = d.allocate(&a).unwrap();
    seg.configure(&r);
    // dnsmasq's shortest lease is 2 minutes: move the clock past T1 (60 s)
    // rather than wait (tests/tests/dhcp.rs waits for a real one).
    let acks = || seg.log().matches("DHCPACK(srv0)").count();
    assert_eq!(acks(), 1);
    d.age_leases(61);
    wait_until("the renewal", || acks() >= 2);
    assert!(acks() >= 2, "no renewal seen:\n{}", seg.log());
    // The renewal was a unicast REQUEST from the leased address (no broadcast answer).
    let tail = seg
        .log()
        .rsplit("DHCPREQUEST")
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(!tail.contains("broadcast response"), "{tail}");
    // DEL after the container's netns is gone still succeeds.
    ip(&["netns", "del", &seg.client()]);
    assert_eq!(d.lease_count(), 1);
    d.release(&a).unwrap();
    assert_eq!(d.lease_count(), 0);
    d.stop();
}

#[test]
fn live_gc_releases_only_invalid_attachments_of_the_network() {
    if skip("live_gc_releases_only_invalid_attachments_of_the_network") {
        return;
    }
    // Two attachments (container ids) on the same interface: two leases.
    let seg = Segment::new(203);
    let d = daemon(&seg);
    let a1 = args(&seg, "gc-keep");
    let a2 = args(&seg, "gc-drop");
    let r1 = d.allocate(&a1).unwrap();
    let r2 = d.allocate(&a2).unwrap();
    let ip2 = r2.ips[0].address.ip().to_string();
    seg.configure(&r2);
    assert_eq!(d.lease_count(), 2);
    let gc = CmdArgs {
        stdin_data:
            br#"{"cniVersion":"1.1.0","name":"dhcpd-live","type":"macvlan","ipam":{"type":"dhcp"},
            "cni.dev/valid-attachments":[{"containerID":"gc-keep","ifname":"net1"}]}"#
                .to_vec(),
        ..CmdArgs::default()
    };
    d.gc(&gc).unwrap();
    assert_eq!(d.lease_count(), 1);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!seg.leases().contains(&ip2), "{}", seg.leases());
    assert!(seg.leases().contains(&r1.ips[0].address.ip().to_string()));
    // Another network's GC leaves this network's lease alone.
    let other = CmdArgs {
        stdin_data: br#"{"cniVersion":"1.1.0","name":"other","cni.dev/valid-attachments":[]}"#
            .to_vec(),
        ..CmdArgs::default()
    };
    d.gc(&other).unwrap();
    assert_eq!(d.lease_count(), 1);
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn link_up(seg: &Segment) -> bool {
    let out = Command::new("ip")
        .args(["-n", &seg.client(), "-o", "link", "show", "net1"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains(",UP")
}

#[test]
fn live_lease_expiry_is_reported_to_check() {
    if skip("live_lease_expiry_is_reported_to_check") {
        return;
    }
    let mut seg = Segment::new(204);
    let d = maintained_daemon(&seg);
    let a = args(&seg, "live-expire");
    let r = d.allocate(&a).unwrap();
    seg.configure(&r);
    assert!(link_up(&seg));
    // The server goes away; the lease's whole life passes.
    let _ = seg.dnsmasq.kill();
    let _ = seg.dnsmasq.wait();
    d.age_leases(10_000);
    wait_until("the lease to be lost", || d.allocate(&a).is_err());
    let e = d.allocate(&a).unwrap_err();
    assert!(e.contains("expired"), "{e}");
    assert!(!link_up(&seg), "the interface stays up after expiry");
    // DEL forgets it; a new ADD would start afresh.
    d.release(&a).unwrap();
    assert_eq!(d.lease_count(), 0);
    d.stop();
}

#[test]
fn live_nak_at_renewal_loses_the_lease() {
    if skip("live_nak_at_renewal_loses_the_lease") {
        return;
    }
    let mut seg = Segment::new(205);
    let d = maintained_daemon(&seg);
    let a = args(&seg, "live-nak");
    let r = d.allocate(&a).unwrap();
    seg.configure(&r);
    // The server restarts with another range: the address is no longer
    // its to give, and an authoritative server says so (DHCPNAK).
    seg.restart_dnsmasq("10.131.205.200,10.131.205.210", &["--dhcp-authoritative"]);
    d.age_leases(61); // past T1 (60 s of a 2 m lease), before T2
    wait_until("the NAK", || d.allocate(&a).is_err());
    let e = d.allocate(&a).unwrap_err();
    assert!(e.contains("refused"), "{e}");
    assert!(seg.log().contains("DHCPNAK"), "{}", seg.log());
    d.release(&a).unwrap();
    d.stop();
}

#[test]
fn live_rebinding_after_t2_keeps_the_address() {
    if skip("live_rebinding_after_t2_keeps_the_address") {
        return;
    }
    let seg = Segment::new(206);
    let d = maintained_daemon(&seg);
    let a = args(&seg, "live-rebind");
    let r = d.allocate(&a).unwrap();
    seg.configure(&r);
    let acks = || seg.log().matches("DHCPACK(srv0)").count();
    assert_eq!(acks(), 1);
    d.age_leases(110); // past T2 (105 s of a 2 m lease), before expiry
    wait_until("the rebinding ACK", || acks() >= 2);
    // Rebinding is a broadcast REQUEST for the same address (no server id).
    let log = seg.log();
    let request = log.rsplit("DHCPREQUEST(srv0)").next().unwrap_or_default();
    assert!(
        request.starts_with(&format!(" {}", r.ips[0].address.ip())),
        "{log}"
    );
    wait_until("the lease to be bound again", || d.allocate(&a).is_ok());
    assert_eq!(d.allocate(&a).unwrap(), r);
    d.release(&a).unwrap();
    d.stop();
}

/// The runtime deleted the container's netns and another namespace now
/// has its path, with a link of the same name, up. At expiry the daemon
/// must not set that link DOWN: it drops the lease instead (the netns
/// cookie differs, whatever the inode number, which the kernel reuses).
#[test]
fn d4_live_expiry_leaves_a_replaced_netns_alone() {
    if skip("d4_live_expiry_leaves_a_replaced_netns_alone") {
        return;
    }
    let seg = Segment::on("d4", "10.154", 1);
    let d = maintained_daemon(&seg);
    let a = args(&seg, "d4-replaced");
    let r = d.allocate(&a).unwrap();
    seg.configure(&r);
    let stored = || std::fs::read_dir(seg.dir.join("store")).map_or(0, |d| d.count());
    assert_eq!(stored(), 1);
    let ctr = seg.client();
    let ino = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(seg.netns()).map(|m| m.ino()).ok()
    };
    let old = ino();
    ip(&["netns", "del", &ctr]);
    // The kernel frees a namespace's inode number a moment after its
    // death and gives it to the next one: wait for that (bounded) so that
    // the path names a new namespace with the old (dev, inode).
    for _ in 0..50 {
        ip(&["netns", "add", &ctr]);
        if ino() == old {
            break;
        }
        ip(&["netns", "del", &ctr]);
        std::thread::sleep(Duration::from_millis(100));
    }
    if ino() != old {
        eprintln!("the kernel did not reuse inode {old:?}: a new one at the path");
        ip(&["netns", "add", &ctr]);
    }
    ip(&[
        "-n", &ctr, "link", "add", "net1", "type", "veth", "peer", "name", "d4peer",
    ]);
    ip(&["-n", &ctr, "link", "set", "net1", "up"]);
    assert!(link_up(&seg));
    d.age_leases(10_000);
    wait_until("the daemon to act on the expired lease", || {
        d.lease_count() == 0 || !link_up(&seg)
    });
    assert!(link_up(&seg), "the new namespace's net1 was set DOWN");
    assert_eq!(d.lease_count(), 0);
    assert_eq!(stored(), 0, "the dropped lease stays stored");
    d.release(&a).unwrap();
    d.stop();
}
