//! `selinuxContext`: the tap made with that SELinux label, as the reference
//! makes it.
//!
//! The kernel labels a tun/tap device with the label of the task that
//! creates it (`selinux_tun_dev_alloc_security` takes `current_sid()`), so
//! the reference writes the context to `/proc/thread-self/attr/exec` and
//! runs `ip tuntap add` from that thread: `ip` runs under the context and
//! the device gets it. We do the same, from a thread of its own that
//! enters the container's namespace, writes the exec label, runs `ip`,
//! clears the label (a zero-length write, as go-selinux's) and ends, so the
//! label can never reach another exec of the plugin (IPAM's); the
//! reference leaves it set on a thread Go may reuse. A dynamic transition
//! of our own thread (`attr/current`) would need `dyntransition` rights
//! and, in a multi-threaded process, a bounded type: policies written for
//! the reference allow the exec transition, so that is the one we use.
//! Without SELinux the write fails and ADD fails with the reference's
//! error before anything is made.

use cni_net::NetNs;
use cni_net::tuntap::TapOpts;
use cni_plugin::NetResult;
use cni_skel::CniError;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The calling thread's exec label.
pub const EXEC_ATTR: &str = "/proc/thread-self/attr/exec";

/// How long `ip tuntap add` may take (one ioctl).
const IP_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the exec label goes: the proc file, or a recorder in tests.
pub trait ExecAttr {
    /// One write of `val` (empty: clear the label).
    fn write(&self, val: &[u8]) -> std::io::Result<()>;
}

/// `/proc/thread-self/attr/exec`, opened for each write (the kernel takes
/// only a write at offset 0).
pub struct ProcExecAttr;

impl ExecAttr for ProcExecAttr {
    fn write(&self, val: &[u8]) -> std::io::Result<()> {
        // A proc file nobody can replace; std opens it close-on-exec.
        let mut f = std::fs::OpenOptions::new().write(true).open(EXEC_ATTR)?;
        // `write`, not `write_all`: an empty value must still reach the
        // kernel as one zero-length write, which clears the label.
        let n = f.write(val)?;
        if n != val.len() {
            return Err(std::io::Error::from(std::io::ErrorKind::WriteZero));
        }
        Ok(())
    }
}

/// Go's `*PathError` text for a failed write of the exec label:
/// `write /proc/thread-self/attr/exec: invalid argument`.
fn write_error(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    let mut chars = text.chars();
    let reason: String = chars
        .next()
        .map(|f| f.to_lowercase().chain(chars).collect())
        .unwrap_or_default();
    format!("write {EXEC_ATTR}: {reason}")
}

/// Runs `f` with the exec label set to `ctx` and clears it after, also
/// when `f` fails. A failed set is the reference's error (`failed set
/// socket label: …`) and `f` does not run; a failed clear fails the call.
pub fn with_exec_label<T>(
    attr: &dyn ExecAttr,
    ctx: &str,
    f: impl FnOnce() -> Result<T, CniError>,
) -> Result<T, CniError> {
    attr.write(ctx.as_bytes())
        .map_err(|e| CniError::internal(format!("failed set socket label: {}", write_error(&e))))?;
    let r = f();
    match attr.write(b"") {
        Ok(()) => r,
        Err(e) => {
            let cleared = CniError::internal(format!(
                "failed to clear the exec label: {}",
                write_error(&e)
            ));
            match r {
                Ok(_) => Err(cleared),
                Err(first) => {
                    log::error!("{}", cleared.msg);
                    Err(first)
                }
            }
        }
    }
}

/// Whether the label can be set at all, tried on a thread of its own
/// (cleared, and gone with the thread): ADD fails with the reference's
/// error before IPAM runs or anything is made, as the reference's does.
pub fn check_settable(ctx: &str) -> Result<(), CniError> {
    on_own_thread(|| with_exec_label(&ProcExecAttr, ctx, || Ok(())))
}

/// `ip tuntap add` as the reference runs it.
pub fn ip_tuntap_args(opts: &TapOpts<'_>) -> Vec<String> {
    let mut a: Vec<String> = ["tuntap", "add", "mode", "tap", "name", opts.name]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if opts.multi_queue {
        a.push("multi_queue".into());
    }
    if let Some(u) = opts.owner {
        a.extend(["user".into(), u.to_string()]);
    }
    if let Some(g) = opts.group {
        a.extend(["group".into(), g.to_string()]);
    }
    a
}

/// Creates the tap in `ns` labelled `ctx`: `ip tuntap add` run under that
/// exec label from a thread of its own in the namespace. `ip` sets
/// `IFF_TUN_EXCL`: a name already taken is an error and nothing existing
/// is touched.
pub fn create_labelled_tap(ns: &NetNs, opts: &TapOpts<'_>, ctx: &str) -> Result<(), CniError> {
    create_labelled_tap_with(&ProcExecAttr, ns, opts, ctx)
}

fn create_labelled_tap_with(
    attr: &(dyn ExecAttr + Sync),
    ns: &NetNs,
    opts: &TapOpts<'_>,
    ctx: &str,
) -> Result<(), CniError> {
    let args = ip_tuntap_args(opts);
    on_own_thread(|| {
        ns.run(|| with_exec_label(attr, ctx, || run_ip(&args)))
            .cni()?
    })
}

fn on_own_thread<T: Send>(f: impl FnOnce() -> Result<T, CniError> + Send) -> Result<T, CniError> {
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|_| Err(CniError::internal("the labelling thread failed")))
    })
}

/// Runs `ip <args>`, waiting at most [`IP_TIMEOUT`]; its output goes into
/// the error as the reference's (`failed to run command <output>: exit
/// status N`).
fn run_ip(args: &[String]) -> Result<(), CniError> {
    let mut cmd = Command::new("ip");
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cni_net::process::die_with_parent(&mut cmd)
        .spawn()
        .map_err(|e| CniError::internal(format!("failed to run command ip: {e}")))?;
    let deadline = Instant::now() + IP_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CniError::internal(format!(
                    "failed to run command ip: no answer in {} s",
                    IP_TIMEOUT.as_secs()
                )));
            }
            Err(e) => return Err(CniError::internal(format!("failed to run command ip: {e}"))),
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut output = String::new();
    for pipe in [
        child.stdout.take().map(|p| Box::new(p) as Box<dyn Read>),
        child.stderr.take().map(|p| Box::new(p) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let _ = pipe.take(4096).read_to_string(&mut output);
    }
    let code = status
        .code()
        .map_or_else(|| "signal".to_string(), |c| c.to_string());
    Err(CniError::internal(format!(
        "failed to run command {}: exit status {code}",
        output.trim_end()
    )))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Mutex;

    /// Records every write, with the writing thread's network namespace
    /// and thread id; fails the writes whose index is in `fail`.
    #[derive(Default)]
    struct Recorder {
        writes: Mutex<Vec<Vec<u8>>>,
        whence: Mutex<Vec<(String, std::thread::ThreadId)>>,
        fail: Vec<usize>,
    }

    impl Recorder {
        fn writes(&self) -> Vec<Vec<u8>> {
            self.writes.lock().unwrap().clone()
        }
    }

    impl ExecAttr for Recorder {
        fn write(&self, val: &[u8]) -> std::io::Result<()> {
            let ns = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
            self.whence
                .lock()
                .unwrap()
                .push((ns.display().to_string(), std::thread::current().id()));
            let mut w = self.writes.lock().unwrap();
            let n = w.len();
            w.push(val.to_vec());
            match self.fail.contains(&n) {
                true => Err(std::io::Error::from_raw_os_error(22)),
                false => Ok(()),
            }
        }
    }

    #[test]
    fn the_label_is_set_around_the_creation_and_cleared() {
        let rec = Recorder::default();
        let r = with_exec_label(&rec, "system_u:system_r:container_t:s0", || {
            // While the tap is made, the label is set and not yet cleared.
            assert_eq!(rec.writes().len(), 1);
            Ok(7)
        });
        assert_eq!(r.unwrap(), 7);
        assert_eq!(
            rec.writes(),
            [b"system_u:system_r:container_t:s0".to_vec(), Vec::new()]
        );
    }

    #[test]
    fn cleared_also_when_the_creation_fails() {
        let rec = Recorder::default();
        let r: Result<(), _> =
            with_exec_label(&rec, "x_t", || Err(CniError::internal("ip failed")));
        assert_eq!(r.unwrap_err().msg, "ip failed");
        assert_eq!(rec.writes(), [b"x_t".to_vec(), Vec::new()]);
    }

    #[test]
    fn a_failed_set_runs_nothing_with_the_references_error() {
        let rec = Recorder {
            fail: vec![0],
            ..Recorder::default()
        };
        let mut ran = false;
        let r = with_exec_label(&rec, "x_t", || {
            ran = true;
            Ok(())
        });
        assert!(!ran);
        assert_eq!(
            r.unwrap_err().msg,
            "failed set socket label: write /proc/thread-self/attr/exec: invalid argument"
        );
        assert_eq!(rec.writes().len(), 1);
    }

    #[test]
    fn a_failed_clear_fails_the_call() {
        let rec = Recorder {
            fail: vec![1],
            ..Recorder::default()
        };
        let r = with_exec_label(&rec, "x_t", || Ok(()));
        assert!(
            r.unwrap_err()
                .msg
                .starts_with("failed to clear the exec label"),
            "cleared"
        );
        // The creation's own error wins over the clear's.
        let rec = Recorder {
            fail: vec![1],
            ..Recorder::default()
        };
        let r: Result<(), _> = with_exec_label(&rec, "x_t", || Err(CniError::internal("first")));
        assert_eq!(r.unwrap_err().msg, "first");
    }

    #[test]
    fn ip_runs_as_the_reference_runs_it() {
        let opts = TapOpts {
            name: "pa0",
            multi_queue: true,
            owner: Some(0),
            group: Some(4294967295),
        };
        assert_eq!(
            ip_tuntap_args(&opts).join(" "),
            "tuntap add mode tap name pa0 multi_queue user 0 group 4294967295"
        );
        let plain = TapOpts {
            name: "pa0",
            multi_queue: false,
            owner: None,
            group: None,
        };
        assert_eq!(
            ip_tuntap_args(&plain).join(" "),
            "tuntap add mode tap name pa0"
        );
    }

    /// The whole mechanism but the label (a recorder stands for the proc
    /// file): on a thread of its own, inside the container's namespace, the
    /// label is set, `ip tuntap add` makes the tap there as asked, the
    /// label is cleared; a taken name fails with `ip`'s output and leaves
    /// the existing device alone.
    #[test]
    fn ip_makes_the_tap_in_the_namespace_between_set_and_clear() {
        if !nix_root() {
            println!("SKIP ip_makes_the_tap_in_the_namespace_between_set_and_clear: needs root");
            return;
        }
        let name = format!("pasel{:x}", std::process::id() & 0xffff);
        let ip = |a: &[&str]| {
            let o = Command::new("ip").args(a).output().unwrap();
            assert!(o.status.success(), "ip {a:?}: {o:?}");
            String::from_utf8(o.stdout).unwrap()
        };
        ip(&["netns", "add", &name]);
        let ns = NetNs::open(format!("/run/netns/{name}")).unwrap();
        let rec = Recorder::default();
        let opts = TapOpts {
            name: "patap0",
            multi_queue: true,
            owner: Some(0),
            group: Some(0),
        };
        let made = create_labelled_tap_with(&rec, &ns, &opts, "system_u:system_r:pa_t:s0");
        let again = create_labelled_tap_with(&rec, &ns, &opts, "system_u:system_r:pa_t:s0");
        let link = ip(&["-n", &name, "-d", "link", "show", "patap0"]);
        let host_ns = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        ip(&["netns", "del", &name]);
        made.unwrap();
        assert!(
            link.contains("tun type tap")
                && link.contains("multi_queue")
                && link.contains("persist on"),
            "{link}"
        );
        let e = again.unwrap_err().msg;
        assert!(
            e.contains("Device or resource busy") && e.ends_with("exit status 1"),
            "{e}"
        );
        let ctx = b"system_u:system_r:pa_t:s0".to_vec();
        assert_eq!(rec.writes(), [ctx.clone(), Vec::new(), ctx, Vec::new()]);
        let whence = rec.whence.lock().unwrap().clone();
        for (ns, thread) in &whence {
            assert_ne!(
                *ns,
                host_ns.display().to_string(),
                "written outside the namespace"
            );
            assert_ne!(
                *thread,
                std::thread::current().id(),
                "written on the caller's thread"
            );
        }
        // Set and clear on the same thread, each creation on its own.
        assert_eq!(whence[0].1, whence[1].1);
        assert_ne!(whence[1].1, whence[2].1);
        // The kernel gives no way to read a tap's label back; with SELinux
        // off there is no label to read either.
        println!("SKIP the tap's SELinux label itself: not readable, and SELinux is off here");
    }

    fn nix_root() -> bool {
        std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    }

    /// The real file: without an LSM (this machine), the write fails with
    /// the reference's text.
    #[test]
    fn the_proc_file_on_this_kernel() {
        // No LSM answers /proc/self/attr/current here (EINVAL).
        let no_lsm = std::fs::read("/proc/self/attr/current").is_err();
        let r = check_settable("system_u:system_r:container_t:s0");
        if !no_lsm {
            // Whether the policy allows this context is the policy's call.
            println!("SKIP the_proc_file_on_this_kernel: an LSM is on; check_settable gave {r:?}");
        } else {
            assert_eq!(
                r.unwrap_err().msg,
                "failed set socket label: write /proc/thread-self/attr/exec: invalid argument"
            );
        }
    }
}
