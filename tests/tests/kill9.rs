//! ADD killed with SIGKILL at random moments, for host-local, bridge, ptp,
//! portmap, firewall, tap, tuning and macvlan: afterwards DEL of the attachment must
//! leave no veth, no reservation and no rule (compared with the private host
//! namespace before the ADD, tags `kx…`, subnets 10.80.1x.0/24), tuning's
//! DEL must put every attribute and sysctl of the container's interface
//! back and remove its saved-values file, no reservation file may be empty
//! or torn at any point we look, and the next ADD must work.
//!
//! 20 kills per plugin by default, in the VMs too (see `runs`);
//! `RCNI_KILL_RUNS=100` for the full run. The kill moments are
//! uniform over a window from the plugin's exec that adapts to the runs
//! (`KillWindow`), so few runs end before their kill.
//! Half the runs DEL at once, racing the killed plugin's orphaned children
//! (IPAM, iptables-restore, nft); the others wait for them to finish.
//! Prints `kill9: <plugin> <runs> runs, <k> killed mid-ADD, <l> leaks, ...`.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{cni_env, diff, say, snapshot};
use rcni_tests::host_local_util;
use rcni_tests::tempdir::TempDir;
use rcni_tests::{FIREWALL_TOOLS, Invocation, Netns, PluginOutput, bin, skip_unless, unique};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

/// xorshift64*: reproducible with the seed printed in the summary.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = std::env::var("RCNI_KILL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
                    ^ u64::from(std::process::id())
            });
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Kills per plugin: `RCNI_KILL_RUNS`, else 20, on the host and in both of
/// scripts/vmtest's VMs. Under qemu, where each run's dozen execs cost
/// 80-200 ms, 20 kills of bridge, ptp, portmap and firewall took 106 s of
/// one VM once snapshot() read links over netlink (111 s of CPU before):
/// the qemu VMs finish well before the user-mode-linux ones all the same.
fn runs() -> usize {
    std::env::var("RCNI_KILL_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

type Env = Vec<(OsString, OsString)>;

/// Pids of processes whose environment holds `CNI_CONTAINERID=<cid>`: the
/// plugin and what it started (IPAM, iptables-restore, nft).
fn processes_of(cid: &str) -> Vec<u32> {
    let needle = format!("CNI_CONTAINERID={cid}\0");
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(env) = std::fs::read(e.path().join("environ"))
            && env.windows(needle.len()).any(|w| w == needle.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids
}

/// Waits (up to 10 s) until nothing of `cid` runs; returns whether any did.
fn wait_orphans(cid: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = false;
    loop {
        if processes_of(cid).is_empty() {
            return seen;
        }
        seen = true;
        assert!(
            Instant::now() < deadline,
            "processes of {cid} still running"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reservation files that are empty or not `<id>\r\n<ifname>` of a known
/// attachment (the store writes complete files atomically).
fn torn_files(net_dir: &Path, cids: &[String]) -> Vec<String> {
    let mut bad = Vec::new();
    for e in std::fs::read_dir(net_dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.parse::<std::net::IpAddr>().is_err() {
            continue;
        }
        let data = match std::fs::read_to_string(e.path()) {
            Ok(d) => d,
            // Gone between listing and reading (an orphaned IPAM child
            // giving its address back, see host-local's invoker check):
            // removed whole, not torn.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => String::new(),
        };
        let ok = cids.iter().any(|c| data == format!("{c}\r\neth0"));
        if !ok {
            bad.push(format!("{name}: {data:?}"));
        }
    }
    bad
}

/// What is left in the network directory after the DEL but `lock` and
/// `last_reserved_ip.<n>` (exactly the Go plugin's files after its last
/// DEL): reservations, and anything the Go plugin would not have there.
fn leftover_files(net_dir: &Path) -> Vec<String> {
    std::fs::read_dir(net_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // For tuning (its dataDir): its saved values and their temp files.
        .filter(|n| !host_local_util::is_go_file(n) || n.parse::<std::net::IpAddr>().is_ok())
        .collect()
}

/// `net.x.y = value` of every readable file directly under `dirs`
/// (directories under /proc/sys), as `sysctl -a` prints them: the calling
/// thread's network namespace's values.
fn sysctls(dirs: &[&str]) -> Vec<String> {
    let mut lines = Vec::new();
    for dir in dirs {
        let key = dir.trim_start_matches("/proc/sys/").replace('/', ".");
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if let Ok(value) = std::fs::read_to_string(e.path()) {
                let name = e.file_name().to_string_lossy().into_owned();
                lines.push(format!("{key}.{name} = {}", value.trim_end()));
            }
        }
    }
    lines
}

struct Lab {
    plugin: &'static str,
    host: Netns,
    container: Netns,
    _tmp: TempDir,
    net_dir: std::path::PathBuf,
    /// The config of run `i`.
    conf: Box<dyn Fn(usize) -> Value>,
}

impl Lab {
    fn env(&self, cmd: &str, cid: &str) -> Env {
        cni_env(
            cmd,
            cid,
            &self.container.path().display().to_string(),
            "eth0",
        )
    }

    /// The container's link names (read in-process); for tuning, which
    /// changes the container's interface and sysctls, each link with what
    /// `ip -j link show` says of it (flags such as PROMISC and ALLMULTI,
    /// MTU, MAC, txqlen, qdisc) and the sysctls of `net.core` and
    /// `net.ipv4.conf.eth0` (read in-process): one exec, the costly part
    /// in a VM.
    fn container_state(&self) -> Vec<String> {
        if self.plugin != "tuning" {
            return self.container.link_names();
        }
        let mut state: Vec<String> = self
            .container
            .ip_json(&["link", "show"])
            .as_array()
            .into_iter()
            .flatten()
            .map(|link| {
                let mut link = link.clone();
                // Carrier flags follow the peer, not the plugin.
                if let Some(flags) = link["flags"].as_array_mut() {
                    flags.retain(|f| {
                        !matches!(f.as_str(), Some("LOWER_UP" | "NO-CARRIER" | "M-DOWN"))
                    });
                }
                format!("link {link}")
            })
            .collect();
        state.extend(
            self.container
                .run_in(|| sysctls(&["/proc/sys/net/core", "/proc/sys/net/ipv4/conf/eth0"])),
        );
        state.sort();
        state
    }

    /// The plugin's `cmd` in the host namespace, as a runtime makes it.
    /// Its `spawn` returns once the plugin is exec'd (no `ip` exec in front
    /// of it, which costs 30-75 ms under user-mode-linux), so a kill moment
    /// counts from there.
    fn invocation(&self, cmd: &str, cid: &str, conf: &Value) -> Invocation {
        Invocation::bare(bin(self.plugin))
            .in_host(&self.host)
            .envs(self.env(cmd, cid))
            .config(conf)
    }

    fn run(&self, cmd: &str, cid: &str, conf: &Value) -> PluginOutput {
        self.invocation(cmd, cid, conf).run()
    }
}

fn lab(plugin: &'static str, n: u8) -> Lab {
    let host = Netns::new("kxh");
    host.exec_ok("ip", &["link", "set", "lo", "up"]);
    let container = Netns::new("kxc");
    let tmp = TempDir::new(&format!("kx-{plugin}"));
    let name = unique("kxn");
    let data = tmp.file("data");
    let net_dir = tmp.join("data").join(&name);
    let ipam = json!({
        "type": "host-local", "dataDir": data,
        "ranges": [[{"subnet": format!("10.80.{n}.0/24")}]],
    });
    let conf: Box<dyn Fn(usize) -> Value> = match plugin {
        "host-local" => Box::new(
            move |_| json!({"cniVersion": "1.0.0", "name": name, "type": "host-local", "ipam": ipam}),
        ),
        "bridge" => {
            let br = unique("kxb");
            Box::new(move |_| {
                json!({"cniVersion": "1.0.0", "name": name, "type": "bridge", "bridge": br,
                       "isGateway": true, "ipMasq": true, "ipam": ipam})
            })
        }
        "ptp" => Box::new(
            move |_| json!({"cniVersion": "1.0.0", "name": name, "type": "ptp", "ipMasq": true, "ipam": ipam}),
        ),
        "portmap" => {
            host.exec_ok(
                "ip",
                &[
                    "link", "add", "kxd0", "type", "veth", "peer", "name", "kxd1",
                ],
            );
            host.exec_ok(
                "ip",
                &["addr", "add", &format!("10.80.{n}.1/24"), "dev", "kxd0"],
            );
            host.exec_ok("ip", &["link", "set", "kxd0", "up"]);
            host.exec_ok("ip", &["link", "set", "kxd1", "up"]);
            let sandbox = container.path().display().to_string();
            Box::new(move |i| {
                json!({"cniVersion": "1.0.0", "name": name, "type": "portmap",
                       "backend": if i.is_multiple_of(2) { "iptables" } else { "nftables" },
                       "runtimeConfig": {"portMappings": [
                           {"hostPort": 18080, "containerPort": 80, "protocol": "tcp"},
                           {"hostPort": 18081, "containerPort": 81, "protocol": "udp"}]},
                       "prevResult": {"cniVersion": "1.0.0",
                           "interfaces": [{"name": "eth0", "sandbox": sandbox}],
                           "ips": [{"interface": 0, "address": format!("10.80.{n}.2/24")}]}})
            })
        }
        "firewall" => {
            let sandbox = container.path().display().to_string();
            Box::new(move |i| {
                json!({"cniVersion": "1.0.0", "name": name, "type": "firewall", "backend": "iptables",
                       "ingressPolicy": if i.is_multiple_of(2) { "same-bridge" } else { "open" },
                       "prevResult": {"cniVersion": "1.0.0",
                           "interfaces": [{"name": "kxfwbr"}, {"name": "eth0", "sandbox": sandbox}],
                           "ips": [{"interface": 1, "address": format!("10.80.{n}.2/24")},
                                   {"interface": 1, "address": format!("fd80:{n}::2/64")}]}})
            })
        }
        "macvlan" => {
            host.exec_ok(
                "ip",
                &[
                    "link", "add", "kxm0", "type", "veth", "peer", "name", "kxm1",
                ],
            );
            host.exec_ok("ip", &["link", "set", "kxm0", "up"]);
            Box::new(move |i| {
                json!({"cniVersion": "1.0.0", "name": name, "type": "macvlan", "master": "kxm0",
                       "mode": if i.is_multiple_of(2) { "bridge" } else { "vepa" }, "ipam": ipam})
            })
        }
        "tap" => Box::new(move |i| {
            json!({"cniVersion": "1.0.0", "name": name, "type": "tap", "owner": 0, "group": 0,
                   "multiQueue": i.is_multiple_of(2), "mtu": 1400, "ipam": ipam})
        }),
        "tuning" => {
            container.exec_ok(
                "ip",
                &[
                    "link", "add", "eth0", "type", "veth", "peer", "name", "kxp0",
                ],
            );
            let sandbox = container.path().display().to_string();
            let dir = net_dir.display().to_string();
            Box::new(move |_| {
                json!({"cniVersion": "1.0.0", "name": name, "type": "tuning", "dataDir": dir,
                       "mac": "02:11:22:33:44:55", "mtu": 1400, "promisc": true,
                       "allmulti": true, "txQLen": 77,
                       "sysctl": {"net.core.somaxconn": "333",
                                  "net.ipv4.conf.IFNAME.rp_filter": "2"},
                       "prevResult": {"cniVersion": "1.0.0",
                           "interfaces": [{"name": "eth0", "sandbox": sandbox}],
                           "ips": [{"interface": 0, "address": format!("10.80.{n}.2/24")}]}})
            })
        }
        _ => unreachable!(),
    };
    Lab {
        plugin,
        host,
        container,
        _tmp: tmp,
        net_dir,
        conf,
    }
}

fn kill9(plugin: &'static str, n: u8) {
    let test = format!("kill9_{plugin}");
    // All but host-local set up masquerade or port mappings.
    let tools = if plugin == "host-local" {
        &[][..]
    } else {
        FIREWALL_TOOLS
    };
    if skip_unless(&test, tools) {
        return;
    }
    let lab = lab(plugin, n);
    let mut rng = Rng::new();
    let seed = rng.0;
    // Warm-up (both portmap backends): what stays after DEL is the baseline,
    // and the undisturbed ADDs (not the first ones, which create the shared
    // things) time the plugin from exec to exit, where the kill moments lie.
    let warm = format!("kx{n}w");
    let mut timed = Vec::new();
    for i in 0..WARM_UP_RUNS {
        let conf = (lab.conf)(i);
        let mut child = lab.invocation("ADD", &warm, &conf).spawn();
        let execd = Instant::now();
        let status = child.wait().unwrap();
        if i >= 2 {
            timed.push(execd.elapsed());
        }
        assert!(status.success(), "{plugin} warm-up ADD failed");
        let out = lab.run("DEL", &warm, &conf);
        assert_eq!(out.code, 0, "{plugin} DEL: {out:?}");
    }
    timed.sort();
    let mut window = KillWindow::new(timed[timed.len() / 2]);
    let baseline = snapshot(&lab.host);
    let container_links = lab.container_state();
    let (mut killed, mut leaks, mut torn, mut readd_failures, mut orphans) = (0, 0, 0, 0, 0);
    let mut problems: Vec<String> = Vec::new();
    let mut spent = Phases::default();
    // Runs until `wanted` ADDs were killed (at most 6 times as many runs).
    let wanted = runs();
    let mut total = 0;
    for i in 0..wanted * 6 {
        if killed >= wanted {
            break;
        }
        total += 1;
        let conf = (lab.conf)(i);
        let cid = format!("kx{n}-{i}");
        let delay = window.pick(&mut rng);
        let t = Instant::now();
        let mut child = lab.invocation("ADD", &cid, &conf).spawn();
        // The moment is measured from the plugin's exec (`start` returns
        // after it).
        std::thread::sleep(delay);
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        let hit = status.signal() == Some(9);
        killed += usize::from(hit);
        window.adapt(hit);
        spent.kill += t.elapsed();
        // Half the runs DEL at once, as a runtime does, racing whatever the
        // killed plugin had started (IPAM, iptables-restore); the others
        // wait for those first.
        let racing = i % 2 == 1;
        let t = Instant::now();
        if !racing && wait_orphans(&cid) {
            orphans += 1;
        }
        let bad = torn_files(&lab.net_dir, std::slice::from_ref(&cid));
        if !bad.is_empty() {
            torn += 1;
            problems.push(format!("run {i}: torn reservations {bad:?}"));
        }
        // No temp file or cache is ever visible in host-local's network
        // directory, not even after a kill.
        let foreign = if plugin == "tuning" {
            Vec::new()
        } else {
            host_local_util::not_go_files(&lab.net_dir)
        };
        if !foreign.is_empty() {
            problems.push(format!(
                "run {i}: after the kill, not the Go plugin's files: {foreign:?}"
            ));
        }
        spent.files += t.elapsed();
        // The runtime's DEL after a failed ADD.
        let t = Instant::now();
        let out = lab.run("DEL", &cid, &conf);
        if out.code != 0 {
            problems.push(format!("run {i}: DEL failed: {out:?}"));
        }
        spent.del += t.elapsed();
        let t = Instant::now();
        if racing && wait_orphans(&cid) {
            orphans += 1;
        }
        spent.files += t.elapsed();
        let mut leaked = Vec::new();
        let t = Instant::now();
        let d = diff(&baseline, &snapshot(&lab.host));
        if !d.is_empty() {
            leaked.push(format!("host: {d:?}"));
        }
        spent.host_state += t.elapsed();
        let t = Instant::now();
        let links = lab.container_state();
        if links != container_links {
            leaked.push(format!("container {:?}", diff(&container_links, &links)));
        }
        spent.container_state += t.elapsed();
        let files = leftover_files(&lab.net_dir);
        if !files.is_empty() {
            leaked.push(format!("files {files:?}"));
        }
        if !leaked.is_empty() {
            leaks += 1;
            problems.push(format!(
                "run {i} (killed after {delay:?}): {}",
                leaked.join("; ")
            ));
        }
        // The next ADD works (and is undone).
        let t = Instant::now();
        let next = format!("kx{n}n{i}");
        let out = lab.run("ADD", &next, &conf);
        if out.code != 0 {
            readd_failures += 1;
            problems.push(format!("run {i}: next ADD failed: {out:?}"));
        }
        lab.run("DEL", &next, &conf);
        spent.next += t.elapsed();
    }
    say(&format!(
        "kill9: {plugin} {total} runs, {killed} killed mid-ADD (final window {window}, seed {seed}), \
         {orphans} with orphaned children, {leaks} leaks, {torn} torn files, {readd_failures} failed next ADDs; \
         {spent}"
    ));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Undisturbed ADDs (and DELs) before the kills; all but the first two
/// time the ADD.
const WARM_UP_RUNS: usize = 5;

/// Where the kill moments lie: uniformly between the plugin's exec and
/// `width` after it. It starts at the median undisturbed ADD and adapts to
/// what the runs show: narrower after an ADD that finished before its kill,
/// a little wider after a kill, so that about one run in five finishes
/// (the kills reach the ADD's very end) and few runs are spent without a
/// kill. A single warm-up time would not do: on a loaded machine or in a VM
/// a plugin's run time varies several-fold from run to run.
struct KillWindow {
    width: Duration,
    widest: Duration,
}

impl KillWindow {
    fn new(median: Duration) -> KillWindow {
        KillWindow {
            width: median,
            widest: median * 2,
        }
    }

    fn pick(&self, rng: &mut Rng) -> Duration {
        Duration::from_micros(rng.below(self.width.as_micros() as u64 + 1))
    }

    fn adapt(&mut self, killed: bool) {
        self.width = if killed {
            (self.width * 21 / 20).min(self.widest)
        } else {
            self.width * 4 / 5
        };
    }
}

impl std::fmt::Display for KillWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} us", self.width.as_micros())
    }
}

/// Where a plugin's kill runs spent their (wall) time, for the summary: in
/// a VM every exec costs tens of milliseconds, and these say which part to
/// make cheaper.
#[derive(Default)]
struct Phases {
    /// Spawn, the wait before the kill, the kill and the reaping.
    kill: Duration,
    /// Waiting for orphaned children, reading the network directory.
    files: Duration,
    /// The DEL after the kill.
    del: Duration,
    /// The host namespace's snapshot.
    host_state: Duration,
    /// The container's links (and tuning's attributes and sysctls).
    container_state: Duration,
    /// The next ADD and its DEL.
    next: Duration,
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |d: Duration| d.as_secs_f64();
        write!(
            f,
            "seconds in kills {:.1}, orphans+files {:.1}, DEL {:.1}, host snapshot {:.1}, \
             container state {:.1}, next ADD+DEL {:.1}",
            s(self.kill),
            s(self.files),
            s(self.del),
            s(self.host_state),
            s(self.container_state),
            s(self.next)
        )
    }
}

#[test]
fn kill9_host_local() {
    kill9("host-local", 11);
}

#[test]
fn kill9_bridge() {
    kill9("bridge", 12);
}

#[test]
fn kill9_ptp() {
    kill9("ptp", 13);
}

#[test]
fn kill9_portmap() {
    kill9("portmap", 14);
}

#[test]
fn kill9_firewall() {
    kill9("firewall", 35);
}

#[test]
fn kill9_tap() {
    kill9("tap", 33);
}

#[test]
fn kill9_tuning() {
    kill9("tuning", 15);
}

#[test]
fn kill9_macvlan() {
    kill9("macvlan", 34);
}
