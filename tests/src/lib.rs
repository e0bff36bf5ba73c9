//! Harness for the root-privileged integration tests: network namespaces
//! that clean up after themselves, and plugin invocations made exactly as a
//! runtime makes them (environment + config on stdin).
//!
//! Each test names its namespaces, links and subnets after itself so the
//! tests can run in parallel.

// This crate is test code: failing loudly is its job.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

pub mod tempdir;

pub mod host_local_util;

pub mod iface_util;

pub mod dhcp_util;

pub mod chain_util;

pub mod fw_tools;

pub mod netns_exec;

pub mod netns_setup;

pub mod plugin_run;

pub use plugin_run::{Invocation, PluginOutput, error_msg};

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Standard base64 (Go's `[]byte` in JSON), decoded; `None` if malformed.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

pub use rcni_test_support::{is_root, kernel_feature_present, skip_without_kernel_feature};

/// True when an LSM takes exec labels (`/proc/self/attr/current` is
/// readable: the uml VM, SELinux on without policy), so tap's
/// `selinuxContext` succeeds as the reference's does; false where the
/// kernel refuses every label (this machine).
pub fn lsm_takes_exec_labels() -> bool {
    std::fs::read("/proc/self/attr/current").is_ok()
}

/// Prints a visible skip line and returns true when the test cannot run
/// here: it needs root (network namespaces) and `ip` (iproute2), which every
/// test that makes a namespace runs.
pub fn skip_unless_root(test: &str) -> bool {
    if !is_root() {
        // Straight to stderr: libtest captures eprintln! of passing tests.
        let _ = writeln!(
            std::io::stderr(),
            "SKIP {test}: needs root (network namespaces)"
        );
        return true;
    }
    skip_without_tools(test, &["ip"])
}

/// The netfilter tools the plugins run for masquerade, MAC spoof check and
/// portmap (both backends), and the tests run to look at the rules.
pub const FIREWALL_TOOLS: &[&str] = &[
    "nft",
    "iptables",
    "iptables-save",
    "iptables-restore",
    "ip6tables",
    "ip6tables-save",
    "ip6tables-restore",
];

/// Whether `program` is found in PATH (as `execvp` would find it).
pub fn have_tool(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Prints a visible skip line naming the missing programs and returns true
/// when one of `tools` is not in PATH (`scripts/test-deps` installs the
/// packages that have them).
pub fn skip_without_tools(test: &str, tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have_tool(t)).collect();
    if missing.is_empty() {
        return false;
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {test}: needs {} (not in PATH; scripts/test-deps installs the packages)",
        missing.join(", ")
    );
    true
}

/// `skip_unless_root`, then `skip_without_tools`: the usual guard of a
/// test that also runs `tools`.
pub fn skip_unless(test: &str, tools: &[&str]) -> bool {
    skip_unless_root(test) || skip_without_tools(test, tools)
}

/// The directory holding the workspace's built binaries (`target/<profile>`).
pub fn bin_dir() -> PathBuf {
    if let Ok(d) = std::env::var("RCNI_BIN_DIR") {
        return PathBuf::from(d);
    }
    // The test executable lives in target/<profile>/deps/.
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

/// Path of one of our plugin binaries; fails with a hint when not built.
pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.is_file(),
        "{} is not built: run `cargo build --workspace --bins` first (scripts/test does)",
        p.display()
    );
    p
}

/// Where Debian's build of the Go reference plugins lives.
pub const GO_DIR: &str = "/usr/lib/cni";

/// Path of a Go reference plugin, if installed.
pub fn go_bin(name: &str) -> Option<PathBuf> {
    let p = Path::new(GO_DIR).join(name);
    p.is_file().then_some(p)
}

/// A name unique to this test and process, at most 15 bytes when `tag` is
/// at most 6 bytes: fits interface names.
pub fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{tag}{:x}{n:x}", std::process::id() & 0xffff)
}

/// A named network namespace (`ip netns add`), deleted on drop.
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates `/run/netns/<name>` with `lo` down, as a new namespace has it.
    pub fn new(tag: &str) -> Netns {
        let name = unique(tag);
        run_ok("ip", &["netns", "add", &name]);
        Netns { name }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path a runtime passes as `CNI_NETNS`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }

    /// Runs a command inside the namespace (as `ip netns exec` would:
    /// [`netns_exec`]) and returns its output.
    pub fn exec(&self, program: &str, args: &[&str]) -> std::process::Output {
        self.output(Command::new(program).args(args))
            .unwrap_or_else(|e| panic!("{program} {args:?} in {}: {e}", self.name))
    }

    /// [`Command::output`] of `cmd` run inside the namespace as `ip netns
    /// exec` runs a program (stdin from /dev/null, stdout and stderr
    /// captured).
    pub fn output(&self, cmd: &mut Command) -> std::io::Result<std::process::Output> {
        netns_exec::output_in_netns(&self.name, cmd)
    }

    /// Spawns `cmd` inside the namespace as `ip netns exec` would (its
    /// stdio as `cmd` says); the child's pid is the program's.
    pub fn spawn(&self, cmd: &mut Command) -> std::io::Result<std::process::Child> {
        netns_exec::spawn_in_netns(&self.name, cmd)
    }

    /// Runs a command inside the namespace; panics with its stderr on failure.
    pub fn exec_ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.exec(program, args);
        assert!(
            out.status.success(),
            "{program} {args:?} in {} failed: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ip -j <args>` inside the namespace, parsed.
    pub fn ip_json(&self, args: &[&str]) -> Value {
        let mut full = vec!["-j"];
        full.extend_from_slice(args);
        let text = self.exec_ok("ip", &full);
        serde_json::from_str(if text.trim().is_empty() { "[]" } else { &text })
            .expect("ip -j output")
    }

    /// Runs `f` on a thread that has entered the namespace and returns what
    /// it returns (a panic in `f` is re-raised here). Processes the thread
    /// starts begin life in the namespace, which is how a test runs plugins
    /// through cni-runtime in its private "host" without changing the
    /// namespace of the test itself. The thread ends with `f`.
    pub fn run_in<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        std::thread::scope(|s| {
            let thread = s.spawn(|| {
                let file = std::fs::File::open(self.path())
                    .unwrap_or_else(|e| panic!("open {}: {e}", self.path().display()));
                nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                    .unwrap_or_else(|e| panic!("setns {}: {e}", self.name));
                f()
            });
            match thread.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// The names of the namespace's links, sorted. Read from
    /// /proc/thread-self/net/dev on a thread in the namespace: no exec (an
    /// exec of `ip` costs 30-75 ms under user-mode-linux).
    pub fn link_names(&self) -> Vec<String> {
        let dev = self.run_in(|| std::fs::read_to_string("/proc/thread-self/net/dev"));
        let dev = dev.unwrap_or_else(|e| panic!("/proc/thread-self/net/dev in {}: {e}", self.name));
        // Two header lines, then "  <name>: <counters>" (names hold no ':').
        let mut names: Vec<String> = dev
            .lines()
            .skip(2)
            .filter_map(|l| l.split_once(':'))
            .map(|(name, _)| name.trim().to_string())
            .collect();
        names.sort();
        names
    }

    /// The namespace's links whose name starts with `veth` (the host ends
    /// of the plugins' veth pairs), sorted.
    pub fn veths(&self) -> Vec<String> {
        self.link_names()
            .into_iter()
            .filter(|n| n.starts_with("veth"))
            .collect()
    }

    /// The global addresses (`addr/prefix`) of one link, sorted.
    pub fn addrs(&self, dev: &str) -> std::collections::BTreeSet<String> {
        self.ip_json(&["addr", "show", "dev", dev])[0]["addr_info"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|a| a["scope"] == "global")
            .map(|a| {
                format!(
                    "{}/{}",
                    a["local"].as_str().unwrap_or_default(),
                    a["prefixlen"]
                )
            })
            .collect()
    }

    /// A veth from `ifname` here to `peer_if` in `peer`, both ends up,
    /// each with its addresses (`addr/prefix`; IPv6 ones without DAD, so
    /// they are usable at once).
    pub fn wire_to(
        &self,
        ifname: &str,
        addrs: &[String],
        peer: &Netns,
        peer_if: &str,
        peer_addrs: &[String],
    ) {
        self.exec_ok(
            "ip",
            &[
                "link", "add", ifname, "type", "veth", "peer", "name", peer_if, "netns", &peer.name,
            ],
        );
        for (ns, dev, addrs) in [(self, ifname, addrs), (peer, peer_if, peer_addrs)] {
            for addr in addrs {
                let mut args = vec!["addr", "add", addr.as_str(), "dev", dev];
                if addr.contains(':') {
                    args.push("nodad");
                }
                ns.exec_ok("ip", &args);
            }
            ns.exec_ok("ip", &["link", "set", dev, "up"]);
        }
    }

    /// The routes of one table (`ip <family> route show table <table>`),
    /// as sorted text lines; empty when the table does not exist (a v6
    /// table that never held a route).
    pub fn routes(&self, family: &str, table: &str) -> Vec<String> {
        let out = self.exec("ip", &[family, "route", "show", "table", table]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || err.contains("does not exist"),
            "{err}"
        );
        let mut routes: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .collect();
        routes.sort();
        routes
    }

    /// Reads a sysctl (`net/ipv4/ip_forward` style) inside the namespace
    /// (on a thread in it: the net sysctls are those of the reader's
    /// namespace; no exec).
    pub fn sysctl(&self, key: &str) -> String {
        let path = format!("/proc/sys/{key}");
        self.run_in(|| std::fs::read_to_string(&path))
            .unwrap_or_else(|e| panic!("{path} in {}: {e}", self.name))
            .trim()
            .to_string()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Runs a host command and panics with its stderr if it fails.
pub fn run_ok(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
