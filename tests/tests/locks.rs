//! The plugins' host-wide locks (issue 25): no user but root can hold them,
//! and none is waited for forever.
//!
//! portmap and firewall run in a private "host" namespace (`lkh…`) and a
//! private mount namespace whose `/run` is a fresh tmpfs (so the node's
//! real locks are never touched and each run starts clean), beside a
//! holder started first: `nobody`, which locks whatever lock file it can
//! open (the old `/run/cni-<plugin>.lock`, 0644 as the old plugins left it,
//! and the new one), once with `/run` as on Debian (0755) and once
//! world-writable (1777) with the directories made by `nobody` first; or
//! root holding the plugin's own lock and never letting go, with a short
//! `RCNI_LOCK_TIMEOUT`. sbr and vrf run against a container (`lkc…`)
//! whose namespace file `nobody` holds the flock of; and with root
//! holding the namespace's lock file. Every plugin runs under `timeout`,
//! so the old hang is a failure, not a stuck test. Subnets 10.152.0.0/16.
//!
//! portmap and firewall need netfilter (scripts/vmtest: qemu); vrf needs
//! a kernel with VRFs (user-mode-linux), and skips here.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::iface_util::skip_unless_kind;
use rcni_tests::{
    FIREWALL_TOOLS, Invocation, Netns, PluginOutput, bin, skip_unless, skip_unless_root,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The lock directory, as the plugins make it.
const DIR: &str = "/run/cni-rcni/locks";
/// How long a plugin may run before the test calls it hung.
const HUNG: &str = "60";
/// `setpriv` to `nobody`, as a command prefix.
const NOBODY: &str = "setpriv --reuid=65534 --regid=65534 --clear-groups";

/// The holder, run as `$LK_AS`: for each path, makes its directory (and
/// with `LK_HOSTILE=1` opens it to all, as a user who made it first would),
/// the file if it can, then opens and flocks it if it can; lists what it
/// holds in `$1/held`, says `$1/ready`, and sleeps holding them.
const HOLDER: &str = r#"
umask 077
d=$1; shift; n=3
for p; do
    mkdir -p "${p%/*}" 2>/dev/null && [ "$LK_HOSTILE" = 1 ] && chmod 0777 "${p%/*}"
    [ -e "$p" ] || ( : > "$p" ) 2>/dev/null
    if [ -r "$p" ] && eval "exec $n<\"\$p\"" && flock -n $n; then echo "$p" >> "$d/held"; fi
    n=$((n+1))
done
: > "$d/ready"
exec sleep 120
"#;

/// The wrapper of portmap and firewall: `/run` becomes a fresh tmpfs of mode
/// `$LK_RUN_MODE` (with `$LK_OLD`, the old lock file as the old plugins
/// left it, 0644), the holder starts and gets ready, then the plugin runs
/// under `timeout`; its time, the lock directory's entries and anything
/// moved aside are reported on stderr (`lk-…` lines) before the holder is
/// stopped.
const SCRIPT: &str = r#"
set -eu
mount -t tmpfs -o mode="$LK_RUN_MODE" lk-run /run
if [ -n "$LK_OLD" ]; then : > "$LK_OLD"; chmod 0644 "$LK_OLD"; fi
d=$(mktemp -d /tmp/rcni-lk.XXXXXX)
chmod 0777 "$d"
$LK_AS sh -c "$LK_HOLDER" holder "$d" $LK_PATHS </dev/null >/dev/null 2>&1 &
hp=$!
i=0
while [ ! -e "$d/ready" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
[ -e "$d/ready" ] || echo "lk-not-ready" >&2
[ ! -e "$d/held" ] || sed 's/^/lk-held /' "$d/held" >&2
set +e
t0=$(date +%s%N)
timeout "$LK_HUNG" "$0"
rc=$?
echo "lk-took-ms $(( ($(date +%s%N) - t0) / 1000000 ))" >&2
for p in /run/cni-rcni /run/cni-rcni/locks /run/cni-rcni/locks/*; do
    [ ! -e "$p" ] || stat -c 'lk-stat %a %u %n' "$p" >&2
done
ls -a /run /run/cni-rcni 2>/dev/null | grep untrusted | sed 's/^/lk-aside /' >&2
kill $hp
wait $hp 2>/dev/null
rm -rf "$d"
exit $rc
"#;

/// Who holds what while the plugin runs.
struct Hold<'a> {
    /// `/run`'s mode in the private mount namespace.
    run_mode: &'a str,
    /// The holder's `setpriv` prefix (empty: root).
    as_user: &'a str,
    paths: Vec<String>,
    hostile: bool,
    /// The old lock file to make first (0644), or empty.
    old: String,
}

/// What the wrapped run saw.
struct Seen {
    out: PluginOutput,
    held: Vec<String>,
    /// `mode uid path` of the lock directory's entries.
    stat: Vec<String>,
    aside: Vec<String>,
    /// The plugin's own run (not the script's set-up).
    took: Duration,
}

fn lines(stderr: &str, prefix: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(str::to_string)
        .collect()
}

/// Runs `inv` in `host` through [`SCRIPT`] with `hold`.
fn run_held(inv: Invocation, host: &Netns, hold: &Hold) -> Seen {
    let net = format!("--net={}", host.path().display());
    let inv = inv
        .env("LK_RUN_MODE", hold.run_mode)
        .env("LK_AS", hold.as_user)
        .env("LK_PATHS", hold.paths.join(" "))
        .env("LK_HOSTILE", if hold.hostile { "1" } else { "0" })
        .env("LK_OLD", &hold.old)
        .env("LK_HOLDER", HOLDER)
        .env("LK_HUNG", HUNG)
        .via(&[
            "nsenter",
            &net,
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            SCRIPT,
        ]);
    let out = inv.run();
    assert!(!out.stderr.contains("lk-not-ready"), "{}", out.stderr);
    let ms = lines(&out.stderr, "lk-took-ms ");
    let took = Duration::from_millis(ms.first().and_then(|m| m.parse().ok()).unwrap_or(u64::MAX));
    Seen {
        held: lines(&out.stderr, "lk-held "),
        stat: lines(&out.stderr, "lk-stat "),
        aside: lines(&out.stderr, "lk-aside "),
        out,
        took,
    }
}

/// A "host" with a bridge on 10.152.`k`.1/24, a container address .2 in a
/// prevResult, and the container's namespace.
struct World {
    host: Netns,
    ctr: Netns,
    prev: Value,
}

fn world(k: u8) -> World {
    let host = Netns::new("lkh");
    let ctr = Netns::new("lkc");
    host.exec_ok("ip", &["link", "add", "lkbr", "type", "bridge"]);
    host.exec_ok(
        "ip",
        &["addr", "add", &format!("10.152.{k}.1/24"), "dev", "lkbr"],
    );
    host.exec_ok("ip", &["link", "set", "lkbr", "up"]);
    let prev = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": ctr.path().display().to_string()}],
        "ips": [{"interface": 0, "address": format!("10.152.{k}.2/24")}]});
    World { host, ctr, prev }
}

/// The config of `plugin` (portmap or firewall) on top of `prev`.
fn conf(plugin: &str, prev: &Value) -> Value {
    let mut c = json!({"cniVersion": "1.0.0", "name": "lknet", "type": plugin, "prevResult": prev});
    match plugin {
        "portmap" => {
            c["runtimeConfig"] = json!({"portMappings": [{"hostPort": 18080, "containerPort": 80, "protocol": "tcp"}]});
        }
        _ => c["backend"] = json!("iptables"),
    }
    c
}

fn invocation(plugin: &str, cmd: &str, w: &World, cid: &str) -> Invocation {
    Invocation::new(bin(plugin), cmd)
        .attach(cid, &w.ctr, "eth0")
        .config(&conf(plugin, &w.prev))
}

fn old_path(plugin: &str) -> String {
    format!("/run/cni-{plugin}.lock")
}

fn new_path(plugin: &str) -> String {
    format!("{DIR}/{plugin}.lock")
}

/// `nobody` holds every lock file it can open (the old one, which the old
/// plugins left 0644): ADD and DEL complete, and `nobody` held nothing of
/// the new lock, a 0600 file in a 0700 directory of root's.
fn unprivileged_holder(plugin: &str, k: u8) {
    let w = world(k);
    let hold = Hold {
        run_mode: "0755",
        as_user: NOBODY,
        paths: vec![old_path(plugin), new_path(plugin)],
        hostile: false,
        old: old_path(plugin),
    };
    for cmd in ["ADD", "DEL"] {
        let seen = run_held(invocation(plugin, cmd, &w, "lkcid"), &w.host, &hold);
        assert_eq!(seen.out.code, 0, "{plugin} {cmd}: {:?}", seen.out);
        assert_eq!(seen.held, [old_path(plugin)], "{plugin} {cmd}");
        assert_eq!(
            seen.stat,
            [
                "700 0 /run/cni-rcni".to_string(),
                format!("700 0 {DIR}"),
                format!("600 0 {}", new_path(plugin)),
            ],
            "{plugin} {cmd}"
        );
    }
}

/// On a world-writable `/run`, `nobody` makes the lock directories (0777)
/// and the lock files first, and holds them: the plugin moves them aside,
/// makes its own, and the ADD completes.
fn hostile_directories(plugin: &str, k: u8) {
    let w = world(k);
    let hold = Hold {
        run_mode: "1777",
        as_user: NOBODY,
        paths: vec![old_path(plugin), new_path(plugin)],
        hostile: true,
        old: String::new(),
    };
    let seen = run_held(invocation(plugin, "ADD", &w, "lkcid"), &w.host, &hold);
    assert_eq!(seen.out.code, 0, "{plugin}: {:?}", seen.out);
    assert_eq!(seen.held, [old_path(plugin), new_path(plugin)], "{plugin}");
    assert_eq!(seen.aside.len(), 1, "{plugin}: {:?}", seen.out.stderr);
    assert!(
        seen.aside[0].starts_with(".cni-rcni.untrusted-"),
        "{:?}",
        seen.aside
    );
    assert!(
        seen.stat.contains(&format!("700 0 {DIR}")),
        "{plugin}: {:?}",
        seen.stat
    );
}

/// Root holds the plugin's lock and never lets go: the ADD fails within
/// the deadline (`RCNI_LOCK_TIMEOUT=1`) with code 11 naming the file.
fn root_holder_times_out(plugin: &str, k: u8) {
    let w = world(k);
    let hold = Hold {
        run_mode: "0755",
        as_user: "",
        paths: vec![new_path(plugin)],
        hostile: false,
        old: String::new(),
    };
    let inv = invocation(plugin, "ADD", &w, "lkcid").env("RCNI_LOCK_TIMEOUT", "1");
    let seen = run_held(inv, &w.host, &hold);
    assert_eq!(seen.held, [new_path(plugin)], "{plugin}");
    let e = seen.out.err();
    assert_eq!(e["code"], 11, "{plugin}: {e}");
    let msg = e["msg"].as_str().unwrap();
    assert!(msg.contains(&new_path(plugin)), "{plugin}: {msg}");
    assert!(msg.contains("timed out after 1s"), "{plugin}: {msg}");
    // Not hung: a plugin run costs seconds under qemu's emulation.
    assert!(
        seen.took >= Duration::from_secs(1) && seen.took < Duration::from_secs(30),
        "{plugin}: {:?}",
        seen.took
    );
    // Nothing was written before the lock.
    let saved = w.host.exec_ok("iptables-save", &[]);
    assert!(!saved.contains("lkcid"), "{plugin}: {saved}");
}

fn skip(test: &str) -> bool {
    skip_unless(test, FIREWALL_TOOLS)
        || skip_unless(test, &["setpriv", "nsenter", "unshare", "flock"])
}

#[test]
fn lk_portmap_unprivileged_holder() {
    if !skip("lk_portmap_unprivileged_holder") {
        unprivileged_holder("portmap", 1);
    }
}

#[test]
fn lk_portmap_hostile_directories() {
    if !skip("lk_portmap_hostile_directories") {
        hostile_directories("portmap", 2);
    }
}

#[test]
fn lk_portmap_root_holder_times_out() {
    if !skip("lk_portmap_root_holder_times_out") {
        root_holder_times_out("portmap", 3);
    }
}

#[test]
fn lk_firewall_unprivileged_holder() {
    if !skip("lk_firewall_unprivileged_holder") {
        unprivileged_holder("firewall", 4);
    }
}

#[test]
fn lk_firewall_hostile_directories() {
    if !skip("lk_firewall_hostile_directories") {
        hostile_directories("firewall", 5);
    }
}

#[test]
fn lk_firewall_root_holder_times_out() {
    if !skip("lk_firewall_root_holder_times_out") {
        root_holder_times_out("firewall", 6);
    }
}

// --- vrf and sbr: the namespace's lock ------------------------------------

/// A container with `eth0` (10.152.`k`.2/24) wired to a peer at .1, a
/// default route through it, and the prevResult a main plugin gives.
struct Ctr {
    ns: Netns,
    _peer: Netns,
    prev: Value,
}

fn ctr(k: u8) -> Ctr {
    let ns = Netns::new("lkc");
    let peer = Netns::new("lkp");
    ns.wire_to(
        "eth0",
        &[format!("10.152.{k}.2/24")],
        &peer,
        "p0",
        &[format!("10.152.{k}.1/24")],
    );
    ns.exec_ok("ip", &["link", "set", "lo", "up"]);
    ns.exec_ok(
        "ip",
        &["route", "add", "default", "via", &format!("10.152.{k}.1")],
    );
    let prev = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": ns.path().display().to_string()}],
        "ips": [{"interface": 0, "address": format!("10.152.{k}.2/24"), "gateway": format!("10.152.{k}.1")}]});
    Ctr {
        ns,
        _peer: peer,
        prev,
    }
}

fn ns_conf(plugin: &str, prev: &Value) -> Value {
    let mut c = json!({"cniVersion": "1.0.0", "name": "lknet", "type": plugin, "prevResult": prev});
    if plugin == "vrf" {
        c["vrfname"] = json!("lkvrf");
    }
    c
}

/// `plugin` `cmd` on `c`, under `timeout`.
fn ns_run(
    plugin: &str,
    cmd: &str,
    c: &Ctr,
    extra_env: &[(&str, &str)],
) -> (PluginOutput, Duration) {
    let mut inv = Invocation::new(bin(plugin), cmd)
        .attach("lkcid", &c.ns, "eth0")
        .config(&ns_conf(plugin, &c.prev))
        .via(&["timeout", HUNG]);
    for (k, v) in extra_env {
        inv = inv.env(k, v);
    }
    let t = Instant::now();
    let out = inv.run();
    (out, t.elapsed())
}

/// A process started in the background, killed on drop.
struct Bg(std::process::Child);

impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `sh -c script` (as `prefix` says: `setpriv …` or nothing; the
/// script ends in an `exec`, so the child is the process holding the lock)
/// and waits until it has created `ready`.
fn holding(prefix: &str, script: &str, ready: &std::path::Path) -> Bg {
    let mut cmd = std::process::Command::new("sh");
    let full = format!("exec {prefix} sh -c '{script}'");
    cmd.args(["-c", &full])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    let mut bg = Bg(cmd.spawn().unwrap());
    let t = Instant::now();
    while !ready.exists() {
        // Execs cost up to a second each under qemu's emulation.
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "holder not ready: {full}"
        );
        if let Some(status) = bg.0.try_wait().unwrap() {
            panic!("holder exited ({status}): {full}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bg
}

/// `nobody` holds the flock of the container's namespace file (0444, any
/// user can open it): ADD, CHECK and DEL complete all the same.
fn nsfs_holder(plugin: &str, k: u8) {
    let c = ctr(k);
    let ready = std::env::temp_dir().join(format!("rcni-lk-ready-{}", rcni_tests::unique("lk")));
    let _ = std::fs::remove_file(&ready);
    let script = format!(
        "exec 3<{}; flock -x 3; touch {}; exec sleep 120",
        c.ns.path().display(),
        ready.display()
    );
    // The ready file is in the temp dir, which nobody can write to.
    let _holder = holding(NOBODY, &script, &ready);
    for cmd in ["ADD", "CHECK", "DEL"] {
        let (out, took) = ns_run(plugin, cmd, &c, &[]);
        assert_eq!(out.code, 0, "{plugin} {cmd} ({took:?}): {out:?}");
    }
    let _ = std::fs::remove_file(&ready);
}

/// Root holds the namespace's lock file and never lets go: the ADD fails
/// within the deadline with code 11 naming the file.
fn netns_lock_times_out(plugin: &str, k: u8) {
    use std::os::unix::fs::MetadataExt;
    let c = ctr(k);
    let m = std::fs::metadata(c.ns.path()).unwrap();
    let lock = format!("{DIR}/netns-{}-{}.lock", m.dev(), m.ino());
    let ready = std::env::temp_dir().join(format!("rcni-lk-ready-{}", rcni_tests::unique("lk")));
    let _ = std::fs::remove_file(&ready);
    let script = format!(
        "umask 077; mkdir -p {DIR}; exec 3>>{lock}; flock -x 3; touch {}; exec sleep 120",
        ready.display()
    );
    let holder = holding("", &script, &ready);
    let (out, took) = ns_run(plugin, "ADD", &c, &[("RCNI_LOCK_TIMEOUT", "1")]);
    drop(holder);
    let _ = std::fs::remove_file(&ready);
    let _ = std::fs::remove_file(&lock);
    let e = out.err();
    assert_eq!(e["code"], 11, "{plugin}: {e}");
    assert!(e["msg"].as_str().unwrap().contains(&lock), "{plugin}: {e}");
    assert!(
        e["msg"].as_str().unwrap().contains("timed out after 1s"),
        "{plugin}: {e}"
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(30),
        "{plugin}: {took:?}"
    );
}

#[test]
fn lk_sbr_nsfs_holder_does_not_block() {
    if !skip_unless_root("lk_sbr_nsfs_holder_does_not_block")
        && !skip_unless("lk_sbr_nsfs_holder_does_not_block", &["setpriv", "flock"])
    {
        nsfs_holder("sbr", 7);
    }
}

#[test]
fn lk_sbr_netns_lock_times_out() {
    if !skip_unless_root("lk_sbr_netns_lock_times_out") {
        netns_lock_times_out("sbr", 8);
    }
}

#[test]
fn lk_vrf_nsfs_holder_does_not_block() {
    if !skip_unless_kind("lk_vrf_nsfs_holder_does_not_block", "vrf") {
        nsfs_holder("vrf", 9);
    }
}

#[test]
fn lk_vrf_netns_lock_times_out() {
    if !skip_unless_kind("lk_vrf_netns_lock_times_out", "vrf") {
        netns_lock_times_out("vrf", 10);
    }
}
