//! A LAN with a real DHCP server for the dhcp tests: dnsmasq serving
//! `<prefix>.0/24` in a private "server" netns, a veth into a "segment"
//! netns, and container netns each holding a macvlan `net1` over the
//! segment's end, as a macvlan+dhcp network has them. Everything (dnsmasq,
//! namespaces, files) goes away on drop, also when a test fails.

use crate::tempdir::TempDir;
use crate::{Netns, unique};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Prints a SKIP line and returns true unless the test can run here: it
/// needs root, dnsmasq and the Go reference's dhcp (/usr/lib/cni/dhcp), the
/// other side of every pairing these tests make.
pub fn skip(test: &str) -> bool {
    if crate::skip_unless(test, &["dnsmasq"]) {
        return true;
    }
    if crate::go_bin("dhcp").is_none() {
        eprintln!("SKIP {test}: the Go reference /usr/lib/cni/dhcp is not installed");
        return true;
    }
    false
}

/// A child process killed (and reaped) on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `ok` every 50 ms for up to 20 s; panics naming `what` after that.
/// (A bound on waiting for an event, not a timing assertion.)
pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The DHCP server side.
pub struct Lan {
    /// The server's address, `<prefix>.1`: also the router it hands out.
    pub server_ip: String,
    /// Files: dnsmasq's `leases`, `dnsmasq.log`; free for the test's own.
    pub dir: TempDir,
    segment: Netns,
    _dnsmasq: Proc,
    /// Holds dnsmasq's namespace (and the veth) until the end.
    _server: Netns,
}

impl Lan {
    /// dnsmasq on `<prefix>.1/24` (e.g. "10.132.3") leasing .50-.150 for
    /// 2 minutes with `<prefix>.1` as the router, plus `extra` options
    /// (`--dhcp-option-force=121,...`).
    pub fn new(tag: &str, prefix: &str, extra: &[&str]) -> Lan {
        let server = Netns::new(tag);
        let segment = Netns::new(tag);
        let dir = TempDir::new(tag);
        let server_ip = format!("{prefix}.1");
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
            &["addr", "add", &format!("{server_ip}/24"), "dev", "srv0"],
        );
        server.exec_ok("ip", &["link", "set", "srv0", "up"]);
        server.exec_ok("ip", &["link", "set", "lo", "up"]);
        segment.exec_ok("ip", &["link", "set", "seg0", "up"]);
        let dnsmasq = Command::new("ip")
            .args(["netns", "exec", server.name(), "dnsmasq", "--no-daemon"])
            .args(["--conf-file=/dev/null", "--port=0", "--user=root"])
            .args(["--interface=srv0", "--bind-interfaces", "--no-ping"])
            .args(["--log-dhcp", "--dhcp-authoritative"])
            .arg(format!(
                "--dhcp-range={prefix}.50,{prefix}.150,255.255.255.0,2m"
            ))
            .arg(format!("--dhcp-leasefile={}", dir.file("leases")))
            .arg(format!("--log-facility={}", dir.file("dnsmasq.log")))
            .arg(format!("--pid-file={}", dir.file("dnsmasq.pid")))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dnsmasq");
        let lan = Lan {
            server_ip,
            dir,
            segment,
            _dnsmasq: Proc(dnsmasq),
            _server: server,
        };
        wait_for("dnsmasq to start", || lan.log().contains("DHCP, IP range"));
        lan
    }

    /// dnsmasq's lease file (`expiry mac ip hostname client-id` lines),
    /// read until two reads agree: dnsmasq rewrites it in place, so one
    /// read may catch it half written.
    pub fn leases(&self) -> String {
        let read = || std::fs::read_to_string(self.dir.join("leases")).unwrap_or_default();
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

    /// dnsmasq's log (with `--log-dhcp`).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("dnsmasq.log")).unwrap_or_default()
    }

    /// The "segment" namespace: `seg0`, the veth whose peer is dnsmasq's
    /// `srv0`, is there. Tests that run a link plugin's ADD and DEL run it
    /// here, as the host, with `seg0` (or something bridged to it) as the
    /// parent.
    pub fn segment(&self) -> &Netns {
        &self.segment
    }

    /// A container netns with a macvlan `net1` (down) over the segment.
    pub fn container(&self, tag: &str) -> Netns {
        let c = Netns::new(tag);
        self.plug(&c, tag);
        c
    }

    /// Moves a new macvlan over the segment into `c` as `net1` (down).
    pub fn plug(&self, c: &Netns, tag: &str) {
        let name = unique(tag);
        self.segment.exec_ok(
            "ip",
            &[
                "link", "add", "link", "seg0", "name", &name, "type", "macvlan", "mode", "bridge",
            ],
        );
        self.segment
            .exec_ok("ip", &["link", "set", &name, "netns", c.name()]);
        c.exec_ok("ip", &["link", "set", &name, "name", "net1"]);
    }
}

/// dnsmasq's spelling of the reference's client id for an attachment:
/// type 0, then `containerID/netName/ifName`, as colon-separated hex.
pub fn client_id_hex(container_id: &str, net: &str, ifname: &str) -> String {
    std::iter::once(0u8)
        .chain(format!("{container_id}/{net}/{ifname}").bytes())
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Our daemon's flags for tests: short DHCP timeouts (5 s an exchange,
/// resends up to 8 s apart, 30 s in all), so a failure shows in seconds.
pub const QUICK_TIMING: [&str; 6] = [
    "-timeout",
    "5s",
    "-resendmax",
    "8s",
    "-resendtimeout",
    "30s",
];

/// A dhcp daemon (`<binary> daemon -socketpath <socket> ...`), its stderr
/// in `log`; killed on drop. Waits until the socket accepts connections.
pub struct DaemonProc {
    pub proc: Proc,
    pub log: std::path::PathBuf,
}

impl DaemonProc {
    pub fn start(binary: &Path, socket: &Path, log: &Path, extra: &[&str]) -> DaemonProc {
        let child = Command::new(binary)
            .arg("daemon")
            .arg("-socketpath")
            .arg(socket)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("daemon log"))
            .spawn()
            .expect("dhcp daemon");
        let d = DaemonProc {
            proc: Proc(child),
            log: log.to_path_buf(),
        };
        wait_for("the daemon's socket", || {
            std::os::unix::net::UnixStream::connect(socket).is_ok()
        });
        d
    }

    /// Its stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
