//! Helpers for the host-local tests: a temp data directory removed on drop,
//! configs, invocations of host-local (ours or Go's) without a netns, and
//! reading the store back.

use crate::{Invocation, PluginOutput};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A `CNI_NETNS` value for ADD/CHECK: host-local never opens it.
pub const NO_NETNS: &str = "/var/run/netns/rcni-host-local-none";

/// A data directory (`ipam.dataDir`) of one test, removed on drop, with a
/// network name unique to the test.
pub struct DataDir {
    root: PathBuf,
    name: String,
}

impl DataDir {
    /// A fresh, not yet existing directory under the temp dir.
    pub fn new(tag: &str) -> DataDir {
        let name = crate::unique(tag);
        let root = std::env::temp_dir().join(format!("rcni-hl-{name}"));
        let _ = std::fs::remove_dir_all(&root);
        DataDir { root, name }
    }

    /// `ipam.dataDir`.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The network name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `<dataDir>/<name>`, where the reservations are.
    pub fn net_dir(&self) -> PathBuf {
        self.root.join(&self.name)
    }

    /// A config of `version` whose `ipam` is `ipam` plus `type` and `dataDir`.
    pub fn conf(&self, version: &str, ipam: Value) -> Value {
        let mut ipam = ipam;
        if let Some(m) = ipam.as_object_mut() {
            m.entry("type").or_insert(json!("host-local"));
            m.entry("dataDir")
                .or_insert(json!(self.root.display().to_string()));
        }
        json!({"cniVersion": version, "name": self.name, "type": "bridge", "ipam": ipam})
    }

    /// Reservations on disk: address name -> content.
    pub fn reservations(&self) -> BTreeMap<String, String> {
        reservations(&self.net_dir())
    }

    /// Every file name in the network directory, sorted.
    pub fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.net_dir())
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        // The networks' caches in /run, when reservations were left.
        for e in std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Ok(cache) = host_local::store::cache_file(&e.path()) {
                let _ = std::fs::remove_file(cache);
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Names in a network directory that the Go plugin would not have there
/// (anything but `<ip>`, `lock` and `last_reserved_ip.<n>`), sorted.
pub fn not_go_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !is_go_file(n))
        .collect();
    v.sort();
    v
}

/// Whether the Go plugin keeps a file of this name in a network directory.
pub fn is_go_file(name: &str) -> bool {
    name == "lock"
        || name.parse::<std::net::IpAddr>().is_ok()
        || name
            .strip_prefix("last_reserved_ip.")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Reservations (files named by an address) in `dir`: name -> content.
pub fn reservations(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            if name.parse::<std::net::IpAddr>().is_ok() {
                let content = std::fs::read(e.path()).unwrap_or_default();
                out.insert(name, String::from_utf8_lossy(&content).into_owned());
            }
        }
    }
    out
}

/// Our host-local binary.
pub fn ours() -> PathBuf {
    crate::bin("host-local")
}

/// An invocation of `plugin` for one attachment (no netns needed).
pub fn invocation(
    plugin: &Path,
    command: &str,
    conf: &Value,
    cid: &str,
    ifname: &str,
) -> Invocation {
    let mut inv = Invocation::new(plugin, command).config(conf);
    if !cid.is_empty() {
        inv = inv.env("CNI_CONTAINERID", cid);
    }
    if !ifname.is_empty() {
        inv = inv.env("CNI_IFNAME", ifname);
    }
    if matches!(command, "ADD" | "CHECK") {
        inv = inv.env("CNI_NETNS", NO_NETNS);
    }
    inv
}

/// Runs one command of `plugin` for `(cid, ifname)`.
pub fn run(plugin: &Path, command: &str, conf: &Value, cid: &str, ifname: &str) -> PluginOutput {
    invocation(plugin, command, conf, cid, ifname).run()
}

/// ADD with our plugin.
pub fn add(conf: &Value, cid: &str, ifname: &str) -> PluginOutput {
    run(&ours(), "ADD", conf, cid, ifname)
}

/// DEL with our plugin.
pub fn del(conf: &Value, cid: &str, ifname: &str) -> PluginOutput {
    run(&ours(), "DEL", conf, cid, ifname)
}

/// CHECK with our plugin.
pub fn check(conf: &Value, cid: &str, ifname: &str) -> PluginOutput {
    run(&ours(), "CHECK", conf, cid, ifname)
}

/// GC with our plugin (no container env, as libcni sends it).
pub fn gc(conf: &Value) -> PluginOutput {
    run(&ours(), "GC", conf, "", "")
}

/// STATUS with our plugin.
pub fn status(conf: &Value) -> PluginOutput {
    run(&ours(), "STATUS", conf, "", "")
}

/// The addresses of a result of any version, as `ip/len` strings.
pub fn result_ips(result: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(ips) = result["ips"].as_array() {
        out.extend(
            ips.iter()
                .filter_map(|i| i["address"].as_str().map(str::to_string)),
        );
    }
    for k in ["ip4", "ip6"] {
        if let Some(s) = result[k]["ip"].as_str() {
            out.push(s.to_string());
        }
    }
    out
}

/// Starts an ADD of our plugin without waiting (for the kill test).
pub fn spawn_add(conf: &Value, cid: &str, ifname: &str) -> Child {
    let mut child = Command::new(ours())
        .env_clear()
        .env("CNI_COMMAND", "ADD")
        .env("CNI_PATH", crate::bin_dir())
        .env("CNI_CONTAINERID", cid)
        .env("CNI_NETNS", NO_NETNS)
        .env("CNI_IFNAME", ifname)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn host-local");
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        // The config is small: it fits the pipe buffer, so this cannot block.
        let _ = stdin.write_all(conf.to_string().as_bytes());
    }
    child
}

/// A small PRNG (xorshift64*) for tests that need random moments.
pub struct Rng(u64);

impl Rng {
    /// Seeded from the clock; the seed is printed so a failure can be replayed.
    pub fn from_time(test: &str) -> Rng {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
        let seed = std::env::var("RCNI_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(seed);
        eprintln!("{test}: RCNI_SEED={seed}");
        Rng(seed)
    }

    /// The next value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}
