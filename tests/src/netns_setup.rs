//! Setting up a test's namespaces with few processes. Under scripts/vmtest's
//! VMs an exec costs 25-200 ms (qemu emulates every instruction), so a lab
//! built from thirty `ip` and `sysctl` runs costs seconds there before the
//! test has checked anything: one `ip -batch` per namespace and sysctls
//! written from a thread inside it do the same with one process or none.

use crate::Netns;
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `commands` in `ns` through one `ip -n <ns> -batch -`: each is an
/// `ip` command line without the `ip` and without options (the family
/// follows from the addresses: `route add default via fd00::1`). Panics
/// with ip's message, which names the failing line, when one fails (the
/// rest are not run).
pub fn ip_batch<S: AsRef<str>>(ns: &Netns, commands: &[S]) {
    let mut script = String::new();
    for c in commands {
        script.push_str(c.as_ref());
        script.push('\n');
    }
    let mut child = Command::new("ip")
        .args(["-n", ns.name(), "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ip -batch");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write ip -batch input");
    let out = child.wait_with_output().expect("wait for ip -batch");
    assert!(
        out.status.success(),
        "ip -n {} -batch failed: {}\ninput:\n{script}",
        ns.name(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The announcement defaults a link created in or moved into a namespace
/// takes, off: a test that checks a plugin turned them on sets these first
/// (a new namespace inherits init_net's IPv4 defaults, which the host may
/// have on).
pub const NOTIFY_OFF: &[&str] = &[
    "net.ipv4.conf.default.arp_notify=0",
    "net.ipv6.conf.default.ndisc_notify=0",
];

/// Sets `settings` (`net.ipv4.ip_forward=1`, as `sysctl -w` takes them)
/// inside `ns`, writing /proc/sys from a thread that entered it (the net.*
/// files are those of the opening thread's namespace): no process.
pub fn sysctls(ns: &Netns, settings: &[&str]) {
    ns.run_in(|| {
        for s in settings {
            let (key, value) = s
                .split_once('=')
                .unwrap_or_else(|| panic!("sysctl {s:?}: no '='"));
            let path = format!("/proc/sys/{}", key.replace('.', "/"));
            std::fs::write(&path, value)
                .unwrap_or_else(|e| panic!("write {value} to {path} in {}: {e}", ns.name()));
        }
    });
}
