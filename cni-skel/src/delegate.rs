//! Running a delegate plugin (IPAM) the way libcni's `invoke` does: found
//! in `CNI_PATH`, same environment but `CNI_COMMAND`, same stdin bytes.

use crate::env::{CmdArgs, Command};
use crate::error::CniError;
use crate::types::CniResult;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

/// Finds `name` in the `CNI_PATH` directories.
pub fn find_plugin(name: &str, dirs: &[PathBuf]) -> Result<PathBuf, CniError> {
    if name.is_empty() {
        return Err(CniError::internal("no plugin name provided"));
    }
    if name.contains('/') || name == "." || name == ".." {
        return Err(CniError::internal(format!("invalid plugin name: {name}")));
    }
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.metadata().map(|m| m.is_file()).unwrap_or(false))
        .ok_or_else(|| {
            let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            CniError::internal(format!(
                "failed to find plugin {name:?} in path [{}]",
                list.join(" ")
            ))
        })
}

/// Runs `spawn` again while it fails with "text file busy" (ETXTBSY: the
/// binary is still being written), at most 5 retries 1 s apart, as libcni.
pub fn retry_busy<T>(
    path: &Path,
    mut spawn: impl FnMut() -> std::io::Result<T>,
) -> Result<T, CniError> {
    const ETXTBSY: i32 = 26;
    let mut attempt = 0;
    loop {
        match spawn() {
            Err(e) if e.raw_os_error() == Some(ETXTBSY) && attempt < 5 => {
                attempt += 1;
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => {
                return Err(CniError::internal(format!(
                    "failed to exec {}: {e}",
                    path.display()
                )));
            }
            Ok(v) => return Ok(v),
        }
    }
}

/// Runs the delegate `name` with `command` and returns its stdout on success,
/// or its own error (code preserved) on failure.
pub fn exec(name: &str, command: Command, args: &CmdArgs) -> Result<Vec<u8>, CniError> {
    let path = find_plugin(name, &args.path)?;
    let out = retry_busy(&path, || run_once(&path, command, &args.stdin))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(delegate_error(&out))
    }
}

fn run_once(path: &Path, command: Command, stdin: &[u8]) -> std::io::Result<std::process::Output> {
    start_once(path, command, stdin)?.wait_with_output()
}

/// Starts the delegate and hands it all of stdin (then closes it).
fn start_once(path: &Path, command: Command, stdin: &[u8]) -> std::io::Result<Fed> {
    Fed::spawn(
        std::process::Command::new(path)
            .env("CNI_COMMAND", command.as_str())
            .env(crate::env::INVOKER_VAR, std::process::id().to_string()),
        stdin,
    )
}

/// What any pipe holds (`PIPE_BUF`, one page: even a pipe of a user over
/// `pipe-user-pages-soft` has it), so a config this small goes into the
/// new, empty pipe whole without blocking, before the plugin runs and
/// without a thread (every thread a process starts makes its later memory
/// unmaps interrupt the other CPU). A chain's configs are a few KB at most.
pub const PIPE_MIN_CAPACITY: usize = 4096;

/// A plugin process being handed its stdin, as libcni's `exec.Cmd` with a
/// reader: whatever the config's size, neither side waits on the other.
#[derive(Debug)]
pub struct Fed {
    child: Child,
    /// Feeds a config larger than [`PIPE_MIN_CAPACITY`], so a plugin that
    /// writes before it reads (or never reads) cannot dead-lock us.
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Fed {
    /// Spawns `command` with stdin, stdout and stderr piped and hands it all
    /// of `stdin`, then closes it.
    pub fn spawn(command: &mut std::process::Command, stdin: &[u8]) -> std::io::Result<Fed> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        // A plugin that exits without reading closes the pipe: not our error.
        let writer = match child.stdin.take() {
            Some(mut pipe) if stdin.len() <= PIPE_MIN_CAPACITY => {
                let _ = pipe.write_all(stdin);
                None
            }
            Some(mut pipe) => {
                let data = stdin.to_vec();
                Some(std::thread::spawn(move || {
                    let _ = pipe.write_all(&data);
                }))
            }
            None => None,
        };
        Ok(Fed { child, writer })
    }

    /// Waits for the plugin to exit, collecting its stdout and stderr.
    pub fn wait_with_output(self) -> std::io::Result<std::process::Output> {
        let out = self.child.wait_with_output();
        if let Some(writer) = self.writer {
            let _ = writer.join();
        }
        out
    }
}

/// A delegate started by [`start`], running while the caller does other work.
#[derive(Debug)]
pub struct Running {
    child: Fed,
    path: PathBuf,
}

impl Running {
    /// Waits for the delegate: its stdout on success, its own error (code
    /// preserved) on failure, exactly as [`exec`].
    pub fn wait(self) -> Result<Vec<u8>, CniError> {
        match self.child.wait_with_output() {
            Ok(out) if out.status.success() => Ok(out.stdout),
            Ok(out) => Err(delegate_error(&out)),
            Err(e) => Err(CniError::internal(format!(
                "failed to exec {}: {e}",
                self.path.display()
            ))),
        }
    }
}

/// As [`exec`], but returns once the delegate runs (its stdin written), so
/// the caller can work in parallel; finish with [`Running::wait`].
pub fn start(name: &str, command: Command, args: &CmdArgs) -> Result<Running, CniError> {
    let path = find_plugin(name, &args.path)?;
    let child = retry_busy(&path, || start_once(&path, command, &args.stdin))?;
    Ok(Running { child, path })
}

/// An IPAM ADD started by [`ipam_add_start`].
#[derive(Debug)]
pub struct RunningAdd {
    running: Running,
    version: String,
}

impl RunningAdd {
    /// Waits for the IPAM plugin and parses its result, as [`ipam_add`].
    pub fn wait(self) -> Result<CniResult, CniError> {
        let out = self.running.wait()?;
        CniResult::parse(&out, &self.version)
    }
}

/// Starts ADD on the config's IPAM plugin without waiting for it.
pub fn ipam_add_start(args: &CmdArgs) -> Result<RunningAdd, CniError> {
    Ok(RunningAdd {
        running: start(ipam_type(args)?, Command::Add, args)?,
        version: args.cni_version().to_string(),
    })
}

fn delegate_error(out: &std::process::Output) -> CniError {
    if let Ok(e) = serde_json::from_slice::<CniError>(&out.stdout) {
        return e;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.stdout.is_empty() {
        CniError::internal(format!(
            "netplugin failed: {:?}: {}",
            stderr.trim(),
            out.status
        ))
    } else {
        CniError::internal(format!(
            "netplugin failed but error parsing its diagnostic message {:?}: {}",
            String::from_utf8_lossy(&out.stdout),
            out.status
        ))
    }
}

/// ADD on the config's IPAM plugin; returns its result.
pub fn ipam_add(args: &CmdArgs) -> Result<CniResult, CniError> {
    let out = exec(ipam_type(args)?, Command::Add, args)?;
    CniResult::parse(&out, args.cni_version())
}

/// Any other command on the config's IPAM plugin.
pub fn ipam_run(command: Command, args: &CmdArgs) -> Result<(), CniError> {
    exec(ipam_type(args)?, command, args).map(|_| ())
}

/// As [`ipam_run`], but returns once the IPAM plugin runs, so the caller
/// can work in parallel; finish with [`Running::wait`].
pub fn ipam_start(command: Command, args: &CmdArgs) -> Result<Running, CniError> {
    start(ipam_type(args)?, command, args)
}

/// Whether a main plugin's IPAM may use the container's link, which orders
/// IPAM ADD around the link's creation and IPAM DEL around its removal
/// ([`del_ipam_and_link`]). The one place that decides it, for every
/// plugin that puts a link in the container (link_plugin's kinds and
/// host-device, bridge, ptp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpamLink {
    /// The IPAM may use the link (dhcp sends and listens on it), or rcni
    /// does not know it: ADD starts IPAM once the link is in place, the
    /// Go reference's order. Every IPAM type but the two below.
    Needed,
    /// `host-local` and `static` (files and pure computation): IPAM ADD
    /// runs while the link is made, IPAM DEL while it is removed.
    Unused,
}

impl IpamLink {
    /// For the config's `ipam.type`.
    pub fn of(args: &CmdArgs) -> IpamLink {
        match ipam_type(args) {
            Ok("host-local" | "static") => IpamLink::Unused,
            _ => IpamLink::Needed,
        }
    }
}

/// DEL's IPAM and link steps. An IPAM that may use the link
/// ([`IpamLink::Needed`]: dhcp sends its DHCPRELEASE from it, and any type
/// rcni does not know) runs its DEL to its end before `remove_link`, as in
/// the Go reference's link plugins. host-local and static
/// ([`IpamLink::Unused`]) never touch the link: their DEL runs while the
/// link is removed, whose deletion is mostly the kernel waiting for RCU
/// grace periods, so the child's run is hidden behind it rather than added
/// to it. Both always run; each one's outcome comes back (IPAM's first)
/// for the caller to report together.
pub fn del_ipam_and_link<T>(
    args: &CmdArgs,
    ipam: bool,
    remove_link: impl FnOnce() -> T,
) -> (Result<(), CniError>, T) {
    if !ipam {
        return (Ok(()), remove_link());
    }
    match IpamLink::of(args) {
        IpamLink::Needed => {
            let ipam = ipam_run(Command::Del, args);
            (ipam, remove_link())
        }
        IpamLink::Unused => {
            let running = ipam_start(Command::Del, args);
            let link = remove_link();
            (running.and_then(|r| r.wait()).map(|_| ()), link)
        }
    }
}

fn ipam_type(args: &CmdArgs) -> Result<&str, CniError> {
    Ok(args
        .conf
        .ipam
        .as_ref()
        .and_then(|i| i.kind.as_deref())
        .unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcni_test_support::FakePlugin;

    fn args(dirs: &[&str]) -> CmdArgs {
        CmdArgs {
            command: Command::Add,
            container_id: "c".into(),
            netns: None,
            ifname: "eth0".into(),
            args: String::new(),
            path: dirs.iter().map(PathBuf::from).collect(),
            netns_override: false,
            stdin: b"{}".to_vec(),
            config: serde_json::json!({}),
            conf: crate::conf::NetConf::default(),
            invoker: None,
        }
    }

    fn with_ipam(mut a: CmdArgs, kind: &str) -> CmdArgs {
        a.conf.ipam = Some(crate::conf::IpamConf {
            kind: Some(kind.into()),
        });
        a
    }

    #[test]
    fn only_ipam_types_known_to_need_no_link_run_beside_it() {
        let a = || args(&["/nonexistent"]);
        for kind in ["host-local", "static"] {
            assert_eq!(IpamLink::of(&with_ipam(a(), kind)), IpamLink::Unused);
        }
        for kind in ["dhcp", "whereabouts", "Host-local", "host-local2", ""] {
            let a = with_ipam(a(), kind);
            assert_eq!(IpamLink::of(&a), IpamLink::Needed, "{kind}");
        }
        assert_eq!(IpamLink::of(&a()), IpamLink::Needed);
    }

    /// A fake IPAM plugin `name` that sleeps 0.3 s, then creates `done`
    /// beside itself.
    fn fake_ipam(name: &str) -> FakePlugin {
        FakePlugin::new(
            "cni-skel-delorder",
            name,
            "sleep 0.3\n: > \"${0%/*}/done\"\n",
        )
    }

    #[test]
    fn del_finishes_an_ipam_del_that_may_need_the_link_before_removing_it() {
        for kind in ["dhcp", "whereabouts"] {
            let fake = fake_ipam(kind);
            let dir = fake.dir();
            let a = with_ipam(args(&[dir.to_str().unwrap()]), kind);
            let (ipam, saw_done) = del_ipam_and_link(&a, true, || dir.join("done").exists());
            ipam.unwrap();
            assert!(saw_done, "{kind}: IPAM DEL had finished");
            // Without IPAM only the link step runs.
            let (ipam, ran) = del_ipam_and_link(&a, false, || true);
            assert!(ipam.is_ok() && ran);
        }
        // An IPAM DEL that fails still lets the link go; both outcomes return.
        for kind in ["dhcp", "host-local"] {
            let a = with_ipam(args(&["/nonexistent"]), kind);
            let (ipam, ran) = del_ipam_and_link(&a, true, || true);
            assert!(ipam.unwrap_err().msg.starts_with("failed to find plugin"));
            assert!(ran);
        }
    }

    #[test]
    fn del_runs_an_ipam_del_that_needs_no_link_beside_the_removal_and_waits_for_it() {
        for kind in ["host-local", "static"] {
            let fake = fake_ipam(kind);
            let dir = fake.dir();
            let a = with_ipam(args(&[dir.to_str().unwrap()]), kind);
            // The fake sleeps 0.3 s: the link step runs meanwhile, and the
            // IPAM DEL has finished when the call returns.
            let (ipam, saw_done) = del_ipam_and_link(&a, true, || dir.join("done").exists());
            ipam.unwrap();
            assert!(!saw_done, "{kind}: the link step waited for IPAM DEL");
            assert!(
                dir.join("done").exists(),
                "{kind}: IPAM DEL had not finished"
            );
        }
        // Its failure comes back as its own error, beside the link's outcome.
        let fake = FakePlugin::new(
            "cni-skel-delfail",
            "host-local",
            "echo '{\"code\":11,\"msg\":\"df_nope\"}'\nexit 1\n",
        );
        let dir = fake.dir();
        let a = with_ipam(args(&[dir.to_str().unwrap()]), "host-local");
        let (ipam, ran) = del_ipam_and_link(&a, true, || true);
        let e = ipam.unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (11, "df_nope"));
        assert!(ran);
    }

    /// A delegate that writes more than a pipe holds before it reads a
    /// config larger than a pipe holds: both come through, where writing
    /// the whole config before reading its answer dead-locked.
    #[test]
    fn a_delegate_that_answers_before_reading_a_large_config_does_not_dead_lock() {
        let fake = FakePlugin::new(
            "cni-skel-bigstdin",
            "chatty",
            "head -c 200000 /dev/zero\nwc -c >&2\n",
        );
        let mut a = args(&[fake.dir().to_str().unwrap()]);
        a.stdin = vec![b' '; 1 << 20];
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(run_once(&fake.dir().join("chatty"), Command::Add, &a.stdin));
        });
        let out = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the delegate and we waited on each other")
            .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout.len(), 200_000);
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), "1048576");
    }

    #[test]
    fn start_then_wait() {
        let a = args(&["/nonexistent", "/bin", "/usr/bin"]);
        // `cat` echoes stdin: the delegate got all of it and stdout comes back.
        assert_eq!(
            start("cat", Command::Add, &a).unwrap().wait().unwrap(),
            b"{}"
        );
        let e = start("false", Command::Add, &a)
            .unwrap()
            .wait()
            .unwrap_err();
        assert!(e.msg.starts_with("netplugin failed: \"\""), "{e:?}");
        let e = start("no-such-plugin", Command::Add, &a).unwrap_err();
        assert!(
            e.msg
                .starts_with("failed to find plugin \"no-such-plugin\"")
        );
        assert_eq!(
            start("", Command::Add, &a).unwrap_err().msg,
            "no plugin name provided"
        );
    }
}
