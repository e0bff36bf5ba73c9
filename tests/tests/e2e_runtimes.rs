//! End to end with real runtimes: containerd (`ctr run --cni`, and its CRI
//! service driven over gRPC as a kubelet drives it) and Podman
//! (`--network-backend cni`) run a locally built busybox image on a
//! bridge + host-local + portmap + bandwidth network of our plugins; the host fetches a
//! page from busybox httpd in the container (through a host port for CRI
//! and Podman), and after the container goes, the veth, the address
//! reservation and the port rules are gone.
//!
//! Isolation: each runtime runs in a private "host" network namespace
//! (`cte…` for ctr, `ctk…` for CRI, `ctp…` for Podman) and a private mount namespace
//! in which our plugin directory is bind-mounted over `/opt/cni/bin` and
//! `/usr/lib/cni` (where ctr looks), our config directory over
//! `/etc/cni/net.d`, and temporary directories over `/var/lib/cni` and the
//! runtimes' state directories; the runtimes' own roots, states and sockets
//! are in a temporary directory. So the real host's network, files and
//! runtimes are untouched (mount points missing on the host are created
//! for the test and removed after it); everything (containers, daemons,
//! shims, mounts, directories) is removed on drop, also when a test fails.
//!
//! The tests print `SKIP …` and pass when not root, when `RCNI_E2E=1` is
//! not set, when a runtime, busybox-static or (for CRI) python3-grpcio is
//! not installed, or when the runtime cannot start here.

#![cfg(test)]

use rcni_tests::tempdir::TempDir;
use rcni_tests::{Netns, bin};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The page busybox httpd serves.
const PAGE: &str = "hello from rcni e2e\n";

fn skip(test: &str, why: &str) -> bool {
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {why}");
    true
}

/// Common gate: root, RCNI_E2E=1, the tools, a static busybox.
fn gated(test: &str, tools: &[&str]) -> bool {
    if !rcni_tests::is_root() {
        return skip(test, "needs root");
    }
    if std::env::var("RCNI_E2E").as_deref() != Ok("1") {
        return skip(test, "end-to-end runtime tests run with RCNI_E2E=1");
    }
    // The network has masquerade and port mappings.
    let common = ["ip", "nsenter", "unshare", "tar", "sha256sum", "mount"];
    if rcni_tests::skip_without_tools(test, &[tools, &common, rcni_tests::FIREWALL_TOOLS].concat())
    {
        return true;
    }
    let static_busybox = Command::new("ldd")
        .arg("/bin/busybox")
        .output()
        .is_ok_and(|o| {
            !o.status.success()
                || o.stdout.is_empty()
                || String::from_utf8_lossy(&o.stdout).contains("not a dynamic")
        });
    if !Path::new("/bin/busybox").is_file() || !static_busybox {
        return skip(
            test,
            "needs busybox-static (/bin/busybox, statically linked)",
        );
    }
    false
}

fn sh(cmd: &str) -> Output {
    Command::new("sh").args(["-c", cmd]).output().expect("sh")
}

/// The stdout of a command that must have succeeded (`what` names it when
/// it did not).
fn succeeded(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sh_ok(cmd: &str) -> String {
    succeeded(cmd, sh(cmd)).trim().to_string()
}

fn sha256(path: &Path) -> String {
    sh_ok(&format!("sha256sum '{}' | cut -d' ' -f1", path.display()))
}

/// Builds an OCI image archive of a static busybox serving [`PAGE`] with
/// httpd on port 80, named `docker.io/rcni/busybox:e2e`; returns its path.
fn build_image(dir: &Path) -> PathBuf {
    let img = dir.join("image");
    let rootfs = dir.join("rootfs");
    let blobs = img.join("blobs/sha256");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::create_dir_all(rootfs.join("www")).unwrap();
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    for l in ["sh", "httpd", "sleep"] {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(l)).unwrap();
    }
    std::fs::write(rootfs.join("www/index.html"), PAGE).unwrap();
    let layer = dir.join("layer.tar");
    sh_ok(&format!(
        "tar -C '{}' --owner=0 --group=0 --numeric-owner --sort=name -cf '{}' .",
        rootfs.display(),
        layer.display()
    ));
    let blob = |path: &Path| -> (String, u64) {
        let digest = sha256(path);
        std::fs::copy(path, blobs.join(&digest)).unwrap();
        (digest, std::fs::metadata(path).unwrap().len())
    };
    let (layer_digest, layer_size) = blob(&layer);
    let write = |name: &str, v: &Value| -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    };
    let config = write(
        "config.json",
        &json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": ["/bin/httpd", "-f", "-p", "80", "-h", "/www"], "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_digest}")]},
        }),
    );
    let (config_digest, config_size) = blob(&config);
    let manifest = write(
        "manifest.json",
        &json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": format!("sha256:{config_digest}"),
                "size": config_size,
            },
            "layers": [{
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": format!("sha256:{layer_digest}"),
                "size": layer_size,
            }],
        }),
    );
    let (manifest_digest, manifest_size) = blob(&manifest);
    std::fs::write(
        img.join("index.json"),
        json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": format!("sha256:{manifest_digest}"),
                "size": manifest_size,
                "annotations": {
                    "io.containerd.image.name": "docker.io/rcni/busybox:e2e",
                    "org.opencontainers.image.ref.name": "docker.io/rcni/busybox:e2e",
                },
            }],
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(img.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let tar = dir.join("image.tar");
    sh_ok(&format!(
        "tar -C '{}' --owner=0 --group=0 -cf '{}' oci-layout index.json blobs",
        img.display(),
        tar.display()
    ));
    tar
}

/// Our plugins (those of the bridge + host-local + portmap networks and
/// `extra`), copied into `<dir>/bin`; or, when `RCNI_E2E_CNI_BIN_DIR`
/// names a directory, that one as it is (an untarred release, or
/// `/usr/lib/cni` after the .deb is installed: `scripts/dist-test`), so
/// the runtimes exec exactly the files a user installed.
fn plugin_dir(dir: &Path, extra: &[&str]) -> PathBuf {
    if let Some(d) = std::env::var_os("RCNI_E2E_CNI_BIN_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let b = dir.join("bin");
    std::fs::create_dir_all(&b).unwrap();
    for p in ["bridge", "host-local", "portmap", "loopback", "bandwidth"]
        .iter()
        .chain(extra)
    {
        std::fs::copy(bin(p), b.join(p)).unwrap();
    }
    b
}

/// The bridge + host-local + portmap network `name` on `subnet`.
fn conflist(name: &str, bridge: &str, subnet: &str, data_dir: &Path) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": true,
                "ipMasq": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": data_dir.display().to_string(),
                    "ranges": [[{"subnet": subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "bandwidth", "capabilities": {"bandwidth": true}},
        ],
    })
}

/// Mount points the runtimes need that may not exist on this host: created
/// for the test and removed afterwards (only if they were created, and only
/// while empty).
///
/// The tests run in parallel and share these paths, so they are counted:
/// a directory created here is removed when the last test using it is
/// done, never while another test's runtime has a bind mount on it. (Since
/// Linux 3.18 removing a directory that is a mount point in another mount
/// namespace succeeds and detaches that mount: the runtime then recreated
/// `/var/lib/cni` on the real file system and wrote its cache there, which
/// the CRI test saw as "no cached cni-loopback-…" on a machine without
/// `/var/lib/cni`.) Other processes that create these paths (another e2e
/// run) are kept out by the machine-wide e2e lock.
struct MountPoints(Vec<PathBuf>);

/// The directories this process created for its tests, and how many of
/// the running tests use each.
static CREATED_MOUNT_POINTS: std::sync::Mutex<Vec<(PathBuf, usize)>> =
    std::sync::Mutex::new(Vec::new());

impl MountPoints {
    fn ensure(paths: &[&str]) -> MountPoints {
        let mut created = CREATED_MOUNT_POINTS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut ours = Vec::new();
        for p in paths {
            // The path and its ancestors, deepest first, up to one that
            // existed before (and was not made by this process).
            let mut cur = Some(Path::new(p));
            while let Some(c) = cur {
                if let Some(entry) = created.iter_mut().find(|(q, _)| q == c) {
                    entry.1 += 1;
                } else if c.exists() {
                    break;
                } else {
                    created.push((c.to_path_buf(), 1));
                }
                ours.push(c.to_path_buf());
                cur = c.parent();
            }
            std::fs::create_dir_all(p).unwrap();
        }
        MountPoints(ours)
    }
}

impl Drop for MountPoints {
    fn drop(&mut self) {
        let mut created = CREATED_MOUNT_POINTS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Deepest first.
        for p in &self.0 {
            if let Some(i) = created.iter().position(|(q, _)| q == p) {
                created[i].1 -= 1;
                if created[i].1 == 0 {
                    created.remove(i);
                    let _ = std::fs::remove_dir(p);
                }
            }
        }
    }
}

/// A long-lived process inside the private "host" netns and a private
/// mount namespace set up by `mounts` (shell commands); its pid is the
/// handle other commands enter with nsenter. Killed on drop.
struct Holder {
    child: Child,
}

impl Holder {
    /// Starts `exec_cmd` (which must exec, keeping the pid) after `mounts`.
    fn start(host: &Netns, mounts: &[String], exec_cmd: &str, log: &Path) -> Holder {
        let script = format!("set -e; {}; exec {exec_cmd}", mounts.join("; "));
        let log = std::fs::File::create(log).unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--net={}", host.path().display()))
            .args(["unshare", "-m", "--propagation", "private", "sh", "-c"])
            .arg(script)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn holder");
        Holder { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A command run inside the holder's network and mount namespaces.
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.args(["-t", &self.pid().to_string(), "-m", "-n", program]);
        c
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = kill(pid, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// SIGKILLs every process whose command line mentions `needle` (a path of
/// the test's temp dir): shims and conmons that outlive their daemon.
fn kill_mentioning(needle: &str) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    let me = std::process::id();
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
}

/// Polls `f` until it returns `Some`, for up to `secs` seconds.
fn wait_for<T>(secs: u64, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An HTTP GET of `/` from inside `ns`; the body on a 200.
fn http_get(ns: &Netns, addr: &str) -> Option<String> {
    let addr = addr.to_string();
    ns.run_in(move || {
        let sock: std::net::SocketAddr = addr.parse().ok()?;
        let mut s = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(2)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
        s.write_all(format!("GET / HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .ok()?;
        let mut resp = String::new();
        s.read_to_string(&mut resp).ok()?;
        let (head, body) = resp.split_once("\r\n\r\n")?;
        head.starts_with("HTTP/1.").then_some(())?;
        head.contains(" 200 ").then(|| body.to_string())
    })
}

/// Reserved addresses in a host-local network directory.
fn reservations(dir: &Path) -> Vec<String> {
    rcni_tests::host_local_util::reservations(dir)
        .into_keys()
        .collect()
}

fn nat(ns: &Netns) -> String {
    String::from_utf8_lossy(&ns.exec("iptables-save", &["-t", "nat"]).stdout).into_owned()
}

/// containerd, private: own config, root, state and socket.
struct Containerd {
    holder: Holder,
    sock: String,
    ns: &'static str,
}

impl Containerd {
    fn ctr(&self, args: &[&str]) -> Output {
        self.holder
            .command("ctr")
            .args(["--address", &self.sock, "-n", self.ns])
            .args(args)
            .output()
            .expect("ctr")
    }

    fn ctr_ok(&self, args: &[&str]) -> String {
        succeeded(&format!("ctr {args:?}"), self.ctr(args))
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // Tasks first (their shims exit with them), then the daemon.
        let tasks = self.ctr(&["task", "ls", "-q"]);
        for id in String::from_utf8_lossy(&tasks.stdout).split_whitespace() {
            let _ = self.ctr(&["task", "kill", "-s", "KILL", id]);
            let _ = wait_for(10, || {
                self.ctr(&["task", "delete", id])
                    .status
                    .success()
                    .then_some(())
            });
        }
        let cs = self.ctr(&["container", "ls", "-q"]);
        for id in String::from_utf8_lossy(&cs.stdout).split_whitespace() {
            let _ = self.ctr(&["container", "delete", id]);
        }
        kill_mentioning(&self.sock);
    }
}

/// What both containerd tests start from: a private "host" netns (lo up)
/// and a temp dir holding the test image, our plugins, a bridge +
/// host-local + portmap conflist in `net.d/`, and directories for the
/// reservations (`data/`), libcni's cache (`cache/`) and containerd's root
/// and state.
struct ContainerdSetup {
    host: Netns,
    d: TempDir,
    image: PathBuf,
    plugins: PathBuf,
    data: PathBuf,
    sock: String,
}

impl ContainerdSetup {
    fn new(ns_tag: &str, tmp_tag: &str, net: &str, bridge: &str, subnet: &str) -> Self {
        let host = Netns::new(ns_tag);
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        let d = TempDir::new(tmp_tag);
        let dir = d.path().to_path_buf();
        let image = build_image(&dir);
        let plugins = plugin_dir(&dir, &[]);
        for sub in ["net.d", "cache", "data", "root", "state"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let data = dir.join("data");
        std::fs::write(
            dir.join("net.d/10-rcni.conflist"),
            conflist(net, bridge, subnet, &data).to_string(),
        )
        .unwrap();
        let sock = d.file("containerd.sock");
        ContainerdSetup {
            host,
            d,
            image,
            plugins,
            data,
            sock,
        }
    }

    fn dir(&self) -> &Path {
        self.d.path()
    }

    /// Starts containerd (own root, state and socket, then `extra` TOML)
    /// in the host netns and a mount namespace set up by `mounts`, and
    /// waits up to 20 s for `ready`. `None`, after a SKIP line with the
    /// end of containerd's log, when it does not come up here.
    fn start(
        &self,
        test: &str,
        extra: &str,
        mounts: &[String],
        ns: &'static str,
        mut ready: impl FnMut() -> bool,
    ) -> Option<Containerd> {
        let sock = &self.sock;
        let config = self.dir().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "version = 2\nroot = {:?}\nstate = {:?}\n\
                 [grpc]\n  address = {sock:?}\n[ttrpc]\n  address = \"{sock}.ttrpc\"\n\
                 [debug]\n  address = \"\"\n{extra}",
                self.d.file("root"),
                self.d.file("state"),
            ),
        )
        .unwrap();
        let log = self.dir().join("containerd.log");
        let mut holder = Holder::start(
            &self.host,
            mounts,
            &format!("containerd --config '{}'", config.display()),
            &log,
        );
        if wait_for(20, || (holder.alive() && ready()).then_some(())).is_none() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            skip(
                test,
                &format!(
                    "containerd cannot start here: {}",
                    text.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
                ),
            );
            return None;
        }
        let ctrd = Containerd {
            holder,
            sock: sock.clone(),
            ns,
        };
        ctrd.ctr_ok(&[
            "image",
            "import",
            "--snapshotter",
            "native",
            &self.image.display().to_string(),
        ]);
        Some(ctrd)
    }
}

/// What the containerd tests run.
const CONTAINERD_TOOLS: &[&str] = &[
    "containerd",
    "ctr",
    "containerd-shim-runc-v2",
    "runc",
    "iptables-save",
];

#[test]
fn containerd_ctr_run_cni() {
    const T: &str = "containerd_ctr_run_cni";
    if gated(T, CONTAINERD_TOOLS) {
        return;
    }
    let net = "rcni-e2e";
    let setup = ContainerdSetup::new("cte", "e2e-ctrd", net, "ctebr0", "10.70.60.0/24");
    let (host, dir, data, sock) = (&setup.host, setup.dir(), &setup.data, &setup.sock);
    let p = setup.plugins.display();
    let mounts = vec![
        format!("mount --bind '{p}' /opt/cni/bin"),
        format!("mount --bind '{p}' /usr/lib/cni"),
        format!("mount --bind '{}' /etc/cni/net.d", setup.d.file("net.d")),
        format!("mount --bind '{}' /var/lib/cni", setup.d.file("cache")),
    ];
    let _mount_points = MountPoints::ensure(&[
        "/opt/cni/bin",
        "/usr/lib/cni",
        "/etc/cni/net.d",
        "/var/lib/cni",
    ]);
    let Some(ctrd) = setup.start(
        T,
        "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n",
        &mounts,
        "rcnie2e",
        || Path::new(sock).exists(),
    ) else {
        return;
    };

    // A foreground `ctr run --cni`: it sends DEL when its task ends.
    let run_log = std::fs::File::create(dir.join("ctr-run.log")).unwrap();
    let mut run = ctrd
        .holder
        .command("ctr")
        .args(["--address", sock, "-n", ctrd.ns])
        .args([
            "run",
            "--cni",
            "--rm",
            "--snapshotter",
            "native",
            "docker.io/rcni/busybox:e2e",
            "web",
        ])
        .stdin(Stdio::null())
        .stdout(run_log.try_clone().unwrap())
        .stderr(run_log)
        .spawn()
        .expect("ctr run");
    struct KillOnDrop<'a>(&'a mut Child);
    impl Drop for KillOnDrop<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let run = KillOnDrop(&mut run);

    // The result in libcni's cache (go-cni uses the default /var/lib/cni).
    let record = dir.join(format!("cache/results/{net}-rcnie2e-web-eth0"));
    let cached: Value = wait_for(30, || {
        let v: Value = serde_json::from_slice(&std::fs::read(&record).ok()?).ok()?;
        v["result"]["ips"][0]["address"].as_str()?;
        Some(v)
    })
    .unwrap_or_else(|| {
        panic!(
            "no CNI result cached; ctr run says: {}",
            std::fs::read_to_string(dir.join("ctr-run.log")).unwrap_or_default()
        )
    });
    let cidr = cached["result"]["ips"][0]["address"].as_str().unwrap();
    assert!(cidr.starts_with("10.70.60."), "{cached}");
    let ip = cidr.split('/').next().unwrap().to_string();
    let res_dir = data.join(net);
    assert_eq!(reservations(&res_dir), vec![ip.clone()]);
    assert_eq!(
        std::fs::read_to_string(res_dir.join(&ip)).unwrap(),
        "rcnie2e-web\r\neth0"
    );
    assert_eq!(host.veths().len(), 1, "{:?}", host.link_names());

    // The host fetches the page from httpd in the container.
    let body = wait_for(20, || http_get(host, &format!("{ip}:80")));
    assert_eq!(body.as_deref(), Some(PAGE));

    // Kill the task: ctr sends DEL, the veth and the address go.
    ctrd.ctr_ok(&["task", "kill", "-s", "KILL", "web"]);
    let exited = wait_for(30, || run.0.try_wait().ok().flatten());
    assert!(exited.is_some(), "ctr run did not return after task kill");
    drop(run);
    assert!(
        wait_for(10, || host.veths().is_empty().then_some(())).is_some(),
        "veth left: {:?}",
        host.link_names()
    );
    assert!(reservations(&res_dir).is_empty());
    assert!(!record.exists(), "cache record left");
    assert!(!nat(host).contains(&ip), "rules left:\n{}", nat(host));
}

/// One CRI call through `tests/cri/cri.py` (python3-grpcio): the response
/// as JSON, or the gRPC error text.
fn cri(sock: &str, method: &str, request: &Value) -> Result<Value, String> {
    let out = Command::new("/usr/bin/python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/cri/cri.py"))
        .args([sock, method, &request.to_string()])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{method} response: {e}"))
}

fn cri_ok(sock: &str, method: &str, request: Value) -> Value {
    cri(sock, method, &request).unwrap_or_else(|e| panic!("CRI {method}: {e}"))
}

/// A pod sandbox, stopped and removed on drop (a kubelet's teardown).
struct PodSandbox<'a> {
    sock: &'a str,
    id: String,
}

impl Drop for PodSandbox<'_> {
    fn drop(&mut self) {
        let req = json!({"podSandboxId": self.id});
        let _ = cri(self.sock, "StopPodSandbox", &req);
        let _ = cri(self.sock, "RemovePodSandbox", &req);
    }
}

#[test]
fn containerd_cri_pod_with_host_port() {
    const T: &str = "containerd_cri_pod_with_host_port";
    if gated(T, CONTAINERD_TOOLS) {
        return;
    }
    let grpc = Command::new("/usr/bin/python3")
        .args(["-c", "import grpc, grpc_tools.protoc"])
        .output();
    if !grpc.is_ok_and(|o| o.status.success()) {
        skip(T, "needs python3-grpcio and python3-grpc-tools");
        return;
    }
    let net = "rcni-cri";
    let setup = ContainerdSetup::new("ctk", "e2e-cri", net, "ctkbr0", "10.70.62.0/24");
    let (host, dir, data, sock) = (&setup.host, setup.dir(), &setup.data, &setup.sock);
    // The CRI service as a kubelet's node would run it, but private: our
    // plugin and config directories, pod netns under containerd's state
    // dir, the test image as the sandbox ("pause") image so that no
    // registry is needed, and no negative OOM scores (no CAP_SYS_RESOURCE).
    let cri_config = format!(
        "[plugins.\"io.containerd.grpc.v1.cri\"]\n\
           sandbox_image = \"docker.io/rcni/busybox:e2e\"\n\
           restrict_oom_score_adj = true\n\
           netns_mounts_under_state_dir = true\n\
         [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\
           snapshotter = \"native\"\n\
         [plugins.\"io.containerd.grpc.v1.cri\".cni]\n\
           bin_dir = {:?}\n  conf_dir = {:?}\n  max_conf_num = 1\n",
        setup.plugins.display().to_string(),
        setup.d.file("net.d"),
    );
    // go-cni caches results in libcni's default /var/lib/cni.
    let mounts = vec![format!(
        "mount --bind '{}' /var/lib/cni",
        setup.d.file("cache")
    )];
    let _mount_points = MountPoints::ensure(&["/var/lib/cni"]);
    let mut version = Value::Null;
    let Some(ctrd) = setup.start(T, &cri_config, &mounts, "k8s.io", || {
        cri(sock, "Version", &json!({}))
            .map(|v| version = v)
            .is_ok()
    }) else {
        return;
    };
    assert_eq!(version["runtimeName"], "containerd", "{version}");

    let host_port = 30080;
    let run = cri_ok(
        sock,
        "RunPodSandbox",
        json!({"config": {
            "metadata": {"name": "web", "uid": "rcni-e2e-uid", "namespace": "rcni"},
            "hostname": "web",
            "portMappings": [{"protocol": "TCP", "containerPort": 80, "hostPort": host_port}],
            "linux": {},
        }}),
    );
    let id = run["podSandboxId"]
        .as_str()
        .expect("sandbox id")
        .to_string();
    let pod = PodSandbox {
        sock,
        id: id.clone(),
    };
    let by_id = json!({"podSandboxId": id});

    // The pod's IP, as PodSandboxStatus reports it, came from host-local.
    let status = cri_ok(
        sock,
        "PodSandboxStatus",
        json!({"podSandboxId": id, "verbose": true}),
    );
    assert_eq!(status["status"]["state"], "SANDBOX_READY", "{status}");
    let ip = status["status"]["network"]["ip"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(ip.starts_with("10.70.62."), "{status}");
    let res_dir = data.join(net);
    assert_eq!(reservations(&res_dir), vec![ip.clone()]);
    assert_eq!(
        std::fs::read_to_string(res_dir.join(&ip)).unwrap(),
        format!("{id}\r\neth0")
    );
    assert_eq!(host.veths().len(), 1, "{:?}", host.link_names());

    // Loopback ran: its result is cached, and lo is up in the pod's netns.
    let info: Value =
        serde_json::from_str(status["info"]["info"].as_str().unwrap_or("{}")).unwrap();
    let netns = info["runtimeSpec"]["linux"]["namespaces"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["type"] == "network"))
        .and_then(|n| n["path"].as_str())
        .unwrap_or_else(|| panic!("no pod netns in {info}"))
        .to_string();
    let cache = dir.join("cache/results");
    for record in [format!("cni-loopback-{id}-lo"), format!("{net}-{id}-eth0")] {
        assert!(cache.join(&record).is_file(), "no cached {record}");
    }
    let lo = ctrd
        .holder
        .command("nsenter")
        .arg(format!("--net={netns}"))
        .args(["ip", "-j", "addr", "show", "lo"])
        .output()
        .unwrap();
    let lo: Value = serde_json::from_slice(&lo.stdout).unwrap_or_default();
    assert!(
        lo[0]["flags"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "UP")),
        "lo not up: {lo}"
    );
    assert_eq!(lo[0]["addr_info"][0]["local"], "127.0.0.1", "{lo}");

    // Reachable through the host port (on localhost and on the bridge's
    // address) and directly.
    for addr in [
        format!("127.0.0.1:{host_port}"),
        format!("10.70.62.1:{host_port}"),
        format!("{ip}:80"),
    ] {
        let body = wait_for(20, || http_get(host, &addr));
        assert_eq!(body.as_deref(), Some(PAGE), "GET http://{addr}/");
    }
    assert!(nat(host).contains(&format!("--dport {host_port}")));

    // StopPodSandbox tears the network down: veth, address, rules, cache.
    cri_ok(sock, "StopPodSandbox", by_id.clone());
    assert!(
        host.veths().is_empty(),
        "veth left: {:?}",
        host.link_names()
    );
    assert!(reservations(&res_dir).is_empty());
    assert!(!nat(host).contains(&ip), "rules left:\n{}", nat(host));
    assert!(!nat(host).contains(&format!("--dport {host_port}")));
    let left: Vec<_> = std::fs::read_dir(&cache)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "cache records left: {left:?}");
    let stopped = cri_ok(sock, "PodSandboxStatus", by_id.clone());
    assert_eq!(stopped["status"]["state"], "SANDBOX_NOTREADY", "{stopped}");

    // A second stop is a no-op (kubelet repeats it); then the pod goes.
    cri_ok(sock, "StopPodSandbox", by_id.clone());
    cri_ok(sock, "RemovePodSandbox", by_id);
    drop(pod);

    // A pod with bandwidth annotations: containerd turns them into
    // runtimeConfig.bandwidth (burst: 2^32 - 1 bits), our bandwidth plugin
    // puts a tbf on the host veth and one on an ifb; stopping the pod
    // removes the ifb.
    let run = cri_ok(
        sock,
        "RunPodSandbox",
        json!({"config": {
            "metadata": {"name": "shaped", "uid": "rcni-e2e-uid-bw", "namespace": "rcni"},
            "hostname": "shaped",
            "annotations": {
                "kubernetes.io/ingress-bandwidth": "1M",
                "kubernetes.io/egress-bandwidth": "2M",
            },
            "linux": {},
        }}),
    );
    let id = run["podSandboxId"]
        .as_str()
        .expect("sandbox id")
        .to_string();
    let shaped = PodSandbox {
        sock,
        id: id.clone(),
    };
    let by_id = json!({"podSandboxId": id});
    let veths = host.veths();
    assert_eq!(veths.len(), 1, "{:?}", host.link_names());
    let tbf = |dev: &str| -> Value {
        let q: Value =
            serde_json::from_str(&host.exec_ok("tc", &["-j", "qdisc", "show", "dev", dev]))
                .unwrap();
        q.as_array()
            .and_then(|a| a.iter().find(|q| q["kind"] == "tbf"))
            .map(|q| q["options"].clone())
            .unwrap_or_else(|| panic!("no tbf on {dev}: {q}"))
    };
    // 1 Mbit/s: 125000 bytes/s; the bucket saturated (see the plugin's README).
    let ingress = tbf(&veths[0]);
    assert_eq!(
        (&ingress["rate"], &ingress["burst"]),
        (&json!(125_000), &json!(34_359_738))
    );
    let ifbs = |host: &Netns| -> Vec<String> {
        host.ip_json(&["link", "show", "type", "ifb"])
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|l| l["ifname"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let ifb = ifbs(host);
    assert_eq!(ifb.len(), 1, "{:?}", host.link_names());
    assert!(ifb[0].starts_with("bwp"), "{ifb:?}");
    assert_eq!(tbf(&ifb[0])["rate"], json!(250_000));
    cri_ok(sock, "StopPodSandbox", by_id.clone());
    assert!(ifbs(host).is_empty(), "ifb left: {:?}", host.link_names());
    assert!(
        host.veths().is_empty(),
        "veth left: {:?}",
        host.link_names()
    );
    cri_ok(sock, "RemovePodSandbox", by_id);
    drop(shaped);
    let list = cri_ok(sock, "ListPodSandbox", json!({}));
    assert_eq!(list["items"], json!([]), "{list}");
}

/// This process's hard limit on processes, at most 4096: Podman's default
/// ulimits must not raise it (no CAP_SYS_RESOURCE here).
fn nproc_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max processes"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        })
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(4096)
        .min(4096)
}

/// Podman in the holder's namespaces, with private storage and config.
struct Podman {
    holder: Holder,
    dir: PathBuf,
    /// Removed after the holder (fields drop in order).
    _mount_points: MountPoints,
}

impl Podman {
    fn podman(&self, args: &[&str]) -> Output {
        let d = &self.dir;
        self.holder
            .command("podman")
            .env("CONTAINERS_CONF", d.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", d.join("storage.conf"))
            .env("CONTAINERS_REGISTRIES_CONF", d.join("registries.conf"))
            .args([
                "--network-backend",
                "cni",
                "--cgroup-manager",
                "cgroupfs",
                "--events-backend",
                "file",
                "--storage-driver",
                "vfs",
            ])
            .args(["--root", &d.join("storage").display().to_string()])
            .args(["--runroot", &d.join("runroot").display().to_string()])
            .args(["--tmpdir", &d.join("tmp").display().to_string()])
            .args(["--cni-config-dir", &d.join("net.d").display().to_string()])
            .args(args)
            .output()
            .expect("podman")
    }

    fn podman_ok(&self, args: &[&str]) -> String {
        succeeded(&format!("podman {args:?}"), self.podman(args))
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.podman(&["rm", "-af", "-t", "0"]);
        kill_mentioning(&self.dir.display().to_string());
    }
}

/// What a Podman test starts from: a private "host" netns (lo up), a temp
/// dir with the test image, our plugins (and `extra`), the network configs
/// `nets(temp dir)` (file name, conflist) in `net.d/`, private storage and config
/// (`default_network` = the first of `nets`), and Podman's state, the CNI
/// cache (`cache/`, host-local's default dataDir below it) and `/run/cni`
/// (`run-cni/`, tuning's default dataDir below it) bind-mounted from the
/// temp dir. `None`, after a SKIP line, when Podman cannot run here.
fn podman_setup(
    test: &str,
    ns_tag: &str,
    tmp_tag: &str,
    extra: &[&str],
    nets: &dyn Fn(&Path) -> Vec<(&'static str, Value)>,
) -> Option<(Netns, TempDir, PathBuf, Podman)> {
    let host = Netns::new(ns_tag);
    host.exec_ok("ip", &["link", "set", "lo", "up"]);
    let d = TempDir::new(tmp_tag);
    let dir = d.path().to_path_buf();
    let image = build_image(&dir);
    let plugins = plugin_dir(&dir, extra);
    for sub in [
        "net.d",
        "cache",
        "data",
        "storage",
        "runroot",
        "tmp",
        "run-libpod",
        "run-containers",
        "run-cni",
        "netns",
        "var-lib-containers",
    ] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let nets = nets(&dir);
    for (file, conf) in &nets {
        std::fs::write(dir.join("net.d").join(file), conf.to_string()).unwrap();
    }
    let net = nets[0].1["name"].as_str().unwrap_or_default();
    let p = plugins.display();
    std::fs::write(
        dir.join("containers.conf"),
        format!(
            "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc={nproc}:{nproc}\"]\n\
             [network]\nnetwork_backend = \"cni\"\ncni_plugin_dirs = [\"{p}\"]\n\
             network_config_dir = \"{}\"\ndefault_network = \"{net}\"\n\
             [engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n\
             events_logfile_path = \"{}\"\nruntime = \"runc\"\n",
            d.file("net.d"),
            d.file("events.log"),
            nproc = nproc_limit(),
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("storage.conf"),
        format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
            d.file("storage"),
            d.file("runroot"),
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("registries.conf"),
        "unqualified-search-registries = []\n",
    )
    .unwrap();
    let mounts = vec![
        format!("mount --bind '{p}' /opt/cni/bin"),
        format!("mount --bind '{p}' /usr/lib/cni"),
        format!("mount --bind '{}' /etc/cni/net.d", d.file("net.d")),
        format!("mount --bind '{}' /var/lib/cni", d.file("cache")),
        format!("mount --bind '{}' /run/libpod", d.file("run-libpod")),
        format!(
            "mount --bind '{}' /run/containers",
            d.file("run-containers")
        ),
        format!("mount --bind '{}' /run/cni", d.file("run-cni")),
        format!("mount --bind '{}' /run/netns", d.file("netns")),
        format!(
            "mount --bind '{}' /var/lib/containers",
            d.file("var-lib-containers")
        ),
    ];
    let mount_points = MountPoints::ensure(&[
        "/opt/cni/bin",
        "/usr/lib/cni",
        "/etc/cni/net.d",
        "/var/lib/cni",
        "/run/libpod",
        "/run/containers",
        "/run/cni",
        "/run/netns",
        "/var/lib/containers",
    ]);
    let log = dir.join("holder.log");
    let mut holder = Holder::start(&host, &mounts, "sleep 100000", &log);
    if wait_for(5, || {
        let mi = std::fs::read_to_string(format!("/proc/{}/mountinfo", holder.pid())).ok()?;
        mi.contains(" /run/netns ").then_some(())
    })
    .is_none()
        || !holder.alive()
    {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        skip(
            test,
            &format!("cannot set up the private namespaces: {text}"),
        );
        return None;
    }
    let pm = Podman {
        holder,
        dir: dir.clone(),
        _mount_points: mount_points,
    };
    let info = pm.podman(&["info", "--format", "json"]);
    if !info.status.success() {
        skip(
            test,
            &format!(
                "podman cannot start here: {}",
                String::from_utf8_lossy(&info.stderr).trim()
            ),
        );
        return None;
    }
    pm.podman_ok(&["load", "-i", &image.display().to_string()]);
    Some((host, d, dir, pm))
}

#[test]
fn podman_cni_backend_run_with_port() {
    const T: &str = "podman_cni_backend_run_with_port";
    if gated(T, &["podman", "conmon", "runc", "iptables-save"]) {
        return;
    }
    let net = "rcni-e2e";
    let nets = |dir: &Path| {
        let data = dir.join("data");
        vec![(
            "10-rcni.conflist",
            conflist(net, "ctpbr0", "10.70.61.0/24", &data),
        )]
    };
    let Some((host, _d, dir, pm)) = podman_setup(T, "ctp", "e2e-podman", &[], &nets) else {
        return;
    };
    let data = dir.join("data");
    let hport = "18090";
    let id = pm
        .podman_ok(&[
            "run",
            "-d",
            "--name",
            "rcni-web",
            "--network",
            net,
            "-p",
            &format!("{hport}:80"),
            "docker.io/rcni/busybox:e2e",
        ])
        .trim()
        .to_string();
    let inspect: Value = serde_json::from_str(&pm.podman_ok(&["inspect", &id])).unwrap();
    let ip = inspect[0]["NetworkSettings"]["Networks"][net]["IPAddress"]
        .as_str()
        .unwrap_or_else(|| panic!("no address in {inspect}"))
        .to_string();
    assert!(ip.starts_with("10.70.61."), "{ip}");
    let res_dir = data.join(net);
    assert_eq!(reservations(&res_dir), vec![ip.clone()]);
    assert_eq!(host.veths().len(), 1, "{:?}", host.link_names());
    assert!(nat(&host).contains(&format!("--to-destination {ip}:80")));

    let body = wait_for(20, || http_get(&host, &format!("{ip}:80")));
    assert_eq!(body.as_deref(), Some(PAGE), "container address");
    let body = wait_for(20, || http_get(&host, &format!("127.0.0.1:{hport}")));
    assert_eq!(body.as_deref(), Some(PAGE), "127.0.0.1:{hport}");

    pm.podman_ok(&["rm", "-f", "-t", "0", &id]);
    assert!(
        wait_for(10, || host.veths().is_empty().then_some(())).is_some(),
        "veth left: {:?}",
        host.link_names()
    );
    assert!(reservations(&res_dir).is_empty());
    let rules = nat(&host);
    assert!(!rules.contains(&ip), "rules left:\n{rules}");
    assert!(!rules.contains(hport), "rules left:\n{rules}");
}

/// Debian's `/etc/cni/net.d/87-podman-bridge.conflist` (bridge with
/// host-local, ipMasq and hairpin mode, portmap, firewall, an empty
/// tuning), with its own name, bridge and subnet.
fn debian_podman_conflist(name: &str, bridge: &str, subnet: &str, gateway: &str) -> Value {
    json!({
        "cniVersion": "0.4.0",
        "name": name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "ranges": [[{"subnet": subnet, "gateway": gateway}]],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "firewall"},
            {"type": "tuning"},
        ],
    })
}

fn filter(ns: &Netns) -> String {
    String::from_utf8_lossy(&ns.exec("iptables-save", &["-t", "filter"]).stdout).into_owned()
}

/// Issue 13: Podman's own networks on our plugins alone (bridge,
/// host-local, portmap, firewall, tuning in `cni_plugin_dirs`): (a) the
/// conflist Debian ships, (b) one made by `podman network create`. On
/// each, `podman run -d -p HOSTPORT:8080` gets an address, the page
/// answers on the address and through the host port, the firewall's
/// FORWARD rules name the address; `podman rm -f` leaves no veth, no
/// reservation, no firewall or portmap rule and no tuning file.
#[test]
fn podman_default_network_chain() {
    const T: &str = "podman_default_network_chain";
    if gated(T, &["podman", "conmon", "runc", "iptables-save"]) {
        return;
    }
    let shipped = "rcni-podman-deb";
    let nets = |_: &Path| {
        vec![(
            "87-podman-bridge.conflist",
            debian_podman_conflist(shipped, "ctqbr0", "10.120.200.0/24", "10.120.200.1"),
        )]
    };
    let Some((host, _d, dir, pm)) =
        podman_setup(T, "ctq", "e2e-podman13", &["firewall", "tuning"], &nets)
    else {
        return;
    };
    let created = "rcni-podman-new";
    pm.podman_ok(&[
        "network",
        "create",
        "--disable-dns",
        "--subnet",
        "10.120.201.0/24",
        created,
    ]);
    let made: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("net.d").join(format!("{created}.conflist"))).unwrap(),
    )
    .unwrap();
    let types: Vec<&str> = made["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["type"].as_str())
        .collect();
    assert_eq!(types, ["bridge", "portmap", "firewall", "tuning"], "{made}");

    for (net, prefix, hport) in [
        (shipped, "10.120.200.", "18100"),
        (created, "10.120.201.", "18101"),
    ] {
        let id = pm
            .podman_ok(&[
                "run",
                "-d",
                "--network",
                net,
                "-p",
                &format!("{hport}:8080"),
                "docker.io/rcni/busybox:e2e",
                "/bin/httpd",
                "-f",
                "-p",
                "8080",
                "-h",
                "/www",
            ])
            .trim()
            .to_string();
        let inspect: Value = serde_json::from_str(&pm.podman_ok(&["inspect", &id])).unwrap();
        let ip = inspect[0]["NetworkSettings"]["Networks"][net]["IPAddress"]
            .as_str()
            .unwrap_or_else(|| panic!("{net}: no address in {inspect}"))
            .to_string();
        assert!(ip.starts_with(prefix), "{net}: {ip}");
        // host-local's default dataDir, below the private /var/lib/cni.
        let res_dir = dir.join("cache/networks").join(net);
        assert_eq!(reservations(&res_dir), vec![ip.clone()], "{net}");
        assert_eq!(host.veths().len(), 1, "{net}: {:?}", host.link_names());
        assert!(
            nat(&host).contains(&format!("--to-destination {ip}:8080")),
            "{net}"
        );
        let rules = filter(&host);
        assert!(
            rules.contains(&format!("-A CNI-FORWARD -d {ip}/32")),
            "{net}: no firewall rule for {ip}:\n{rules}"
        );

        let body = wait_for(20, || http_get(&host, &format!("{ip}:8080")));
        assert_eq!(body.as_deref(), Some(PAGE), "{net}: container address");
        let body = wait_for(20, || http_get(&host, &format!("127.0.0.1:{hport}")));
        assert_eq!(body.as_deref(), Some(PAGE), "{net}: 127.0.0.1:{hport}");

        pm.podman_ok(&["rm", "-f", "-t", "0", &id]);
        assert!(
            wait_for(10, || host.veths().is_empty().then_some(())).is_some(),
            "{net}: veth left: {:?}",
            host.link_names()
        );
        assert!(reservations(&res_dir).is_empty(), "{net}");
        let rules = nat(&host);
        assert!(!rules.contains(&ip), "{net}: nat rules left:\n{rules}");
        assert!(!rules.contains(hport), "{net}: nat rules left:\n{rules}");
        let rules = filter(&host);
        assert!(!rules.contains(&ip), "{net}: filter rules left:\n{rules}");
        // tuning's default dataDir, below the private /run/cni.
        let tuning_files: Vec<_> = std::fs::read_dir(dir.join("run-cni/tuning"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(tuning_files.is_empty(), "{net}: {tuning_files:?}");
    }
}
