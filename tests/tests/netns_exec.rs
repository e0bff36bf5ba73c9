//! rcni_tests::netns_exec, which every test uses to run plugins and tools
//! in its namespaces: what it gives a program is what `ip netns exec`
//! gives it (the namespace, /sys of that namespace, a private mount
//! namespace, /etc/netns binds), and the child is the program itself.
//! Namespaces are named `vx…`.
//!
//! `exec_costs` (ignored; `-- --ignored --nocapture exec_costs`) prints
//! what an exec costs each way, and a snapshot: scripts/vmtest runs it in
//! the VMs for figures.

#![cfg(test)]

mod common;

use rcni_tests::{Netns, bin, skip_unless, unique};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `ip netns exec <ns> program args...`, for comparison.
fn ip_netns_exec(ns: &Netns, program: &str, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns.name(), program])
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn words(s: &str) -> Vec<String> {
    let mut w: Vec<String> = s.split_whitespace().map(str::to_string).collect();
    w.sort();
    w
}

#[test]
fn sys_class_net_shows_the_namespaces_links() {
    if skip_unless("sys_class_net_shows_the_namespaces_links", &["ip"]) {
        return;
    }
    let ns = Netns::new("vx");
    let (a, b) = (unique("vx"), unique("vx"));
    ns.exec_ok(
        "ip",
        &["link", "add", &a, "type", "veth", "peer", "name", &b],
    );
    let ours = words(&ns.exec_ok("ls", &["/sys/class/net"]));
    assert_eq!(
        ours,
        words(&text(&ip_netns_exec(&ns, "ls", &["/sys/class/net"])))
    );
    let mut want = vec!["lo".to_string(), a.clone(), b];
    want.sort();
    // The bonding module adds a file of its own there in every namespace.
    let links: Vec<String> = ours
        .into_iter()
        .filter(|n| n != "bonding_masters")
        .collect();
    assert_eq!(links, want);
    assert_eq!(ns.link_names(), want);
    // The test's own /sys is untouched.
    assert!(!Path::new("/sys/class/net").join(&a).exists());
}

#[test]
fn sysctls_are_the_namespaces() {
    if skip_unless("sysctls_are_the_namespaces", &["ip", "sh"]) {
        return;
    }
    // A new namespace inherits init_net's IPv4 settings (ip_forward=1 on a
    // host that runs containers): each value is written before it is read.
    let (a, b) = (Netns::new("vx"), Netns::new("vx"));
    let key = "net/ipv4/conf/lo/forwarding";
    let set =
        |ns: &Netns, v: &str| ns.exec_ok("sh", &["-c", &format!("echo {v} > /proc/sys/{key}")]);
    set(&b, "0");
    set(&a, "1");
    assert_eq!((a.sysctl(key).as_str(), b.sysctl(key).as_str()), ("1", "0"));
    set(&b, "1");
    set(&a, "0");
    assert_eq!((a.sysctl(key).as_str(), b.sysctl(key).as_str()), ("0", "1"));
}

/// (device, inode) of a namespace file.
fn ns_id(path: &Path) -> (u64, u64) {
    let m = std::fs::metadata(path).unwrap();
    (m.dev(), m.ino())
}

#[test]
fn the_child_is_the_program_in_the_namespace() {
    if skip_unless("the_child_is_the_program_in_the_namespace", &["ip"]) {
        return;
    }
    let ns = Netns::new("vx");
    let mut child = ns
        .spawn(
            Command::new("sleep")
                .arg("30")
                .stdin(std::process::Stdio::null()),
        )
        .unwrap();
    let proc_dir = PathBuf::from(format!("/proc/{}", child.id()));
    let exe = std::fs::read_link(proc_dir.join("exe"));
    let net = ns_id(&proc_dir.join("ns/net"));
    let mnt = ns_id(&proc_dir.join("ns/mnt"));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(exe.unwrap().file_name().unwrap(), "sleep");
    assert_eq!(net, ns_id(&ns.path()));
    assert_ne!(mnt, ns_id(Path::new("/proc/self/ns/mnt")));
}

#[test]
fn mounts_stay_in_the_programs_mount_namespace() {
    if skip_unless("mounts_stay_in_the_programs_mount_namespace", &["ip", "sh"]) {
        return;
    }
    let ns = Netns::new("vx");
    let dir = rcni_tests::tempdir::TempDir::new("vx");
    let d = dir.path().display().to_string();
    let script = format!("mount -t tmpfs vx {d} && touch {d}/inside && ls {d}");
    assert_eq!(ns.exec_ok("sh", &["-c", &script]).trim(), "inside");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mountinfo.contains(&d), "{mountinfo}");
}

/// The mount points, their file systems and propagation as a program sees
/// them, sorted (mount ids and device numbers differ between runs), but
/// the namespaces' own under /run/netns, which tests running alongside add
/// and remove.
fn mount_view(out: &Output) -> Vec<String> {
    let mut v: Vec<String> = text(out)
        .lines()
        .filter(|l| !l.contains(" /run/netns/"))
        .map(|l| {
            let (pre, post) = l.split_once(" - ").unwrap();
            let pre: Vec<&str> = pre.split(' ').collect();
            let fstype = post.split(' ').next().unwrap();
            // mount point, optional fields (propagation) and file system
            format!("{} {} {fstype}", pre[4], pre[6..].join(","))
                .replace(|c: char| c.is_ascii_digit(), "")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_same_mounts_as_ip_netns_exec() {
    if skip_unless("the_same_mounts_as_ip_netns_exec", &["ip", "cat"]) {
        return;
    }
    let ns = Netns::new("vx");
    let ours = ns.exec("cat", &["/proc/self/mountinfo"]);
    let ip = ip_netns_exec(&ns, "cat", &["/proc/self/mountinfo"]);
    assert_eq!(mount_view(&ours), mount_view(&ip));
}

/// `/etc/netns/<name>`, removed on drop (with `/etc/netns` when this made it).
struct EtcNetns {
    dir: PathBuf,
    made_parent: bool,
}

impl Drop for EtcNetns {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if self.made_parent {
            let _ = std::fs::remove_dir("/etc/netns");
        }
    }
}

#[test]
fn etc_netns_files_are_bound_over_etc() {
    if skip_unless("etc_netns_files_are_bound_over_etc", &["ip", "cat"]) {
        return;
    }
    let ns = Netns::new("vx");
    let made_parent = !Path::new("/etc/netns").exists();
    let etc = EtcNetns {
        dir: Path::new("/etc/netns").join(ns.name()),
        made_parent,
    };
    std::fs::create_dir_all(&etc.dir).unwrap();
    let hosts = format!("10.144.0.1 {}\n", ns.name());
    std::fs::write(etc.dir.join("hosts"), &hosts).unwrap();
    assert_eq!(ns.exec_ok("cat", &["/etc/hosts"]), hosts);
    assert_eq!(text(&ip_netns_exec(&ns, "cat", &["/etc/hosts"])), hosts);
    assert_ne!(std::fs::read_to_string("/etc/hosts").unwrap(), hosts);
}

#[test]
fn snapshot_sees_links_addresses_qdiscs_and_rules() {
    if skip_unless(
        "snapshot_sees_links_addresses_qdiscs_and_rules",
        &["ip", "tc", "nft"],
    ) {
        return;
    }
    let ns = Netns::new("vx");
    let before = common::snapshot(&ns);
    let (a, b) = (unique("vx"), unique("vx"));
    ns.exec_ok(
        "ip",
        &["link", "add", &a, "type", "veth", "peer", "name", &b],
    );
    ns.exec_ok("ip", &["addr", "add", "10.144.0.1/24", "dev", &a]);
    ns.exec_ok(
        "tc",
        &[
            "qdisc", "add", "dev", &a, "root", "tbf", "rate", "1mbit", "burst", "32kbit",
            "latency", "400ms",
        ],
    );
    // The bridge family: the one both kernels' nf_tables have.
    ns.exec_ok("nft", &["add", "table", "bridge", "vxsnap"]);
    let d = common::diff(&before, &common::snapshot(&ns));
    for want in [
        format!("+link {a} "),
        format!("+link {b} "),
        format!("+addr {a} 10.144.0.1/24"),
        "+qdisc tbf ".to_string(),
        "+rule table bridge vxsnap".to_string(),
    ] {
        assert!(d.iter().any(|l| l.starts_with(&want)), "{want}: {d:#?}");
    }
    assert!(d.iter().all(|l| l.starts_with('+')), "{d:#?}");
}

/// Median of `runs` timings of `f`, in milliseconds.
fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    t.sort();
    t[runs / 2].as_secs_f64() * 1e3
}

#[test]
#[ignore = "prints figures; run with --ignored --nocapture"]
fn exec_costs() {
    if skip_unless("exec_costs", &["ip", "true"]) {
        return;
    }
    let runs: usize = std::env::var("RCNI_EXEC_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let ns = Netns::new("vx");
    let plugin = bin("loopback");
    let plugin = plugin.to_str().unwrap();
    let version = |out: Output| assert!(out.status.success() && !out.stdout.is_empty());
    let via_ip = |program: &str| {
        Command::new("ip")
            .args(["netns", "exec", ns.name(), program])
            .env("CNI_COMMAND", "VERSION")
            .output()
            .unwrap()
    };
    let direct = |program: &str| {
        ns.output(Command::new(program).env("CNI_COMMAND", "VERSION"))
            .unwrap()
    };
    let rows = [
        (
            "/bin/true, no namespace",
            median_ms(runs, || succeeded(Command::new("true").output().unwrap())),
        ),
        (
            "ip netns exec NS /bin/true",
            median_ms(runs, || succeeded(via_ip("true"))),
        ),
        (
            "netns_exec /bin/true",
            median_ms(runs, || succeeded(direct("true"))),
        ),
        (
            "ip netns exec NS loopback VERSION",
            median_ms(runs, || version(via_ip(plugin))),
        ),
        (
            "netns_exec loopback VERSION",
            median_ms(runs, || version(direct(plugin))),
        ),
        (
            "the tools of snapshot() in one `ip netns exec NS sh -c` (as before)",
            median_ms(runs, || succeeded(via_ip_sh(&ns, OLD_SNAPSHOT_SCRIPT))),
        ),
        (
            "ip -j addr show (netns_exec)",
            median_ms(runs, || succeeded(ns.exec("ip", &["-j", "addr", "show"]))),
        ),
        (
            "nft list ruleset (netns_exec)",
            median_ms(runs, || drop(ns.exec("nft", &["list", "ruleset"]))),
        ),
        (
            "iptables-save (netns_exec)",
            median_ms(runs, || drop(ns.exec("iptables-save", &[]))),
        ),
        (
            "tc qdisc show (netns_exec)",
            median_ms(runs, || succeeded(ns.exec("tc", &["qdisc", "show"]))),
        ),
        (
            "snapshot()",
            median_ms(runs, || {
                assert!(!common::snapshot(&ns).is_empty());
            }),
        ),
    ];
    for (what, ms) in rows {
        common::say(&format!("exec cost: {what}: {ms:.2} ms (median of {runs})"));
    }
}

/// What snapshot() ran before it ran each tool straight in the namespace.
const OLD_SNAPSHOT_SCRIPT: &str = "ip -j addr show; echo '@@ipt'; iptables-save 2>/dev/null; \
    echo '@@ip6t'; ip6tables-save 2>/dev/null; echo '@@nft'; \
    nft list ruleset 2>/dev/null; echo '@@tc'; tc qdisc show 2>/dev/null";

fn via_ip_sh(ns: &Netns, script: &str) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns.name(), "sh", "-c", script])
        .output()
        .unwrap()
}

/// The program exited 0.
fn succeeded(out: Output) {
    assert!(out.status.success());
}
