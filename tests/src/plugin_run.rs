//! The one way the tests run a plugin: [`Invocation`], made as a runtime
//! makes it (exactly the given environment plus PATH, the config on a
//! stdin pipe, optionally inside a namespace standing in for the host),
//! waited for within a deadline, its stdout and stderr captured in a
//! [`PluginOutput`] that parses the CNI result or error.

use crate::Netns;
use serde_json::Value;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a run may take unless [`Invocation::timeout`] says otherwise:
/// far above any plugin's own deadline (lock waits, a DHCP lease), so only
/// a hung plugin meets it, and the test then fails instead of hanging.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// [`DEFAULT_TIMEOUT`], or twice the lock deadline a slow machine gives
/// the plugins (RCNI_LOCK_TIMEOUT, seconds: 600 under scripts/vmtest's
/// qemu) when that is longer.
fn default_timeout() -> Duration {
    let lock = std::env::var("RCNI_LOCK_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(Duration::ZERO, |s| Duration::from_secs(s.saturating_mul(2)));
    DEFAULT_TIMEOUT.max(lock)
}

/// One plugin invocation, built up and then run as a runtime would.
#[derive(Debug, Clone)]
pub struct Invocation {
    plugin: PathBuf,
    env: Vec<(OsString, OsString)>,
    host: Option<String>,
    wrapper: Vec<String>,
    stdin: Vec<u8>,
    timeout: Duration,
}

impl Invocation {
    /// An invocation of `plugin` (a path) with `CNI_COMMAND=command`.
    /// `CNI_PATH` defaults to the plugin's directory, where the IPAM
    /// plugins live.
    pub fn new(plugin: impl Into<PathBuf>, command: &str) -> Self {
        let plugin = plugin.into();
        let path = plugin
            .parent()
            .map(Path::as_os_str)
            .unwrap_or_default()
            .to_owned();
        Invocation::bare(plugin)
            .env("CNI_COMMAND", command)
            .env("CNI_PATH", path)
    }

    /// An invocation of `plugin` with nothing in its environment but PATH
    /// (and RCNI_LOCK_TIMEOUT when the test runner has one): the caller
    /// sets every variable, raw bytes included ([`Invocation::envs`]).
    pub fn bare(plugin: impl Into<PathBuf>) -> Self {
        Invocation {
            plugin: plugin.into(),
            env: Vec::new(),
            host: None,
            wrapper: Vec::new(),
            stdin: Vec::new(),
            timeout: default_timeout(),
        }
    }

    /// Sets (or replaces) one environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        let key = key.as_ref();
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Sets each of `vars` in turn ([`Invocation::env`]).
    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        vars.into_iter().fold(self, |inv, (k, v)| inv.env(k, v))
    }

    /// Removes one environment variable.
    pub fn unset(mut self, key: impl AsRef<OsStr>) -> Self {
        let key = key.as_ref();
        self.env.retain(|(k, _)| k != key);
        self
    }

    /// Sets CNI_CONTAINERID, CNI_NETNS and CNI_IFNAME.
    pub fn attach(self, container_id: &str, netns: &Netns, ifname: &str) -> Self {
        self.attach_at(container_id, &netns.path(), ifname)
    }

    /// [`Invocation::attach`] to the namespace at `netns`, which need not
    /// exist any more (DEL after the container's namespace went away).
    pub fn attach_at(self, container_id: &str, netns: &Path, ifname: &str) -> Self {
        self.env("CNI_CONTAINERID", container_id)
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", ifname)
    }

    /// Runs the plugin inside `host` (a namespace standing in for the host),
    /// entered as `ip netns exec` does, without its exec
    /// ([`crate::netns_exec`]).
    pub fn in_host(mut self, host: &Netns) -> Self {
        self.host = Some(host.name().to_string());
        self
    }

    /// Runs the plugin through `wrapper`: a program and its first
    /// arguments (`unshare -m sh -c <script>`), the plugin's path last; the
    /// wrapper gets the plugin's environment and stdin.
    pub fn via(mut self, wrapper: &[&str]) -> Self {
        self.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The config on stdin.
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.stdin = data.into();
        self
    }

    /// The config on stdin, from JSON.
    pub fn config(self, conf: &Value) -> Self {
        self.stdin(conf.to_string())
    }

    /// How long [`Invocation::run`] waits before it kills the plugin
    /// (default [`DEFAULT_TIMEOUT`], longer where RCNI_LOCK_TIMEOUT is).
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    /// The command, its environment cleared but for PATH (and
    /// RCNI_LOCK_TIMEOUT), then ours.
    fn command(&self) -> Command {
        let mut cmd = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&self.plugin);
                c
            }
            None => Command::new(&self.plugin),
        };
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        // The lock deadline a slow machine sets (scripts/vmtest under
        // qemu); a test's own value wins.
        if let Some(t) = std::env::var_os("RCNI_LOCK_TIMEOUT") {
            cmd.env("RCNI_LOCK_TIMEOUT", t);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped());
        cmd
    }

    /// Starts the plugin with its stdout and stderr discarded and its
    /// stdin written (from a thread: a plugin that does not read it must
    /// not block us) and closed; the caller waits for, or kills, the child.
    pub fn spawn(&self) -> Child {
        let mut cmd = self.command();
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = self.start(&mut cmd);
        self.feed(&mut child);
        child
    }

    /// Runs it and waits for it, at most [`Invocation::timeout`]: a plugin
    /// still running then is killed, and its output says so (signal 9, a
    /// line on stderr).
    pub fn run(&self) -> PluginOutput {
        let mut cmd = self.command();
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = self.start(&mut cmd);
        let writer = self.feed(&mut child);
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let (out, timed_out) = match rx.recv_timeout(self.timeout) {
            Ok(out) => (out, false),
            Err(_) => {
                // Still running (the waiter holds the child unreaped, so
                // the pid is still its own).
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let out = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| {
                    panic!(
                        "{} killed after {:?}, but something it started still holds its stdout or stderr",
                        self.plugin.display(),
                        self.timeout
                    )
                });
                (out, true)
            }
        };
        let out = out.unwrap_or_else(|e| panic!("wait for {}: {e}", self.plugin.display()));
        let _ = writer.join();
        let mut out = PluginOutput::from(out);
        if timed_out {
            out.stderr.push_str(&format!(
                "\nrcni-tests: killed after {:?} (Invocation::timeout)\n",
                self.timeout
            ));
        }
        out
    }

    fn start(&self, cmd: &mut Command) -> Child {
        let spawned = match &self.host {
            Some(ns) => crate::netns_exec::spawn_in_netns(ns, cmd),
            None => cmd.spawn(),
        };
        spawned.unwrap_or_else(|e| panic!("spawn {}: {e}", self.plugin.display()))
    }

    fn feed(&self, child: &mut Child) -> std::thread::JoinHandle<()> {
        let mut pipe = child.stdin.take().expect("stdin");
        let data = self.stdin.clone();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        })
    }
}

/// What a plugin run printed and how it ended.
#[derive(Debug, Clone)]
pub struct PluginOutput {
    /// Exit status (-1 when killed by a signal).
    pub code: i32,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// stdout, lossily decoded.
    pub stdout: String,
    /// stderr, lossily decoded.
    pub stderr: String,
}

impl From<std::process::Output> for PluginOutput {
    fn from(out: std::process::Output) -> Self {
        PluginOutput {
            code: out.status.code().unwrap_or(-1),
            signal: out.status.signal(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl PluginOutput {
    /// stdout parsed as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {:?} / stderr {:?}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts success and returns the parsed stdout (Null when empty).
    pub fn ok(&self) -> Value {
        assert_eq!(self.code, 0, "plugin failed: {self:?}");
        if self.stdout.trim().is_empty() {
            Value::Null
        } else {
            self.json()
        }
    }

    /// Asserts a CNI error (exit 1, error JSON) and returns it.
    pub fn err(&self) -> Value {
        assert_eq!(self.code, 1, "expected a failure: {self:?}");
        if let Some(problem) = self.error_json_problem() {
            panic!("{problem} / stderr {:?}", self.stderr);
        }
        self.json()
    }

    /// Why this is not a clean CNI error: exit 1, `{code, msg}` on stdout,
    /// no panic of any kind.
    pub fn not_clean_error(&self) -> Option<String> {
        if let Some(p) = self.panic() {
            return Some(p);
        }
        if self.code != 1 {
            return Some(format!("exit {} (want 1)", self.code));
        }
        self.error_json_problem()
    }

    /// A panic, a signal or the skel's panic-hook message.
    pub fn panic(&self) -> Option<String> {
        if let Some(s) = self.signal {
            return Some(format!("killed by signal {s}"));
        }
        if self.stderr.contains("panicked") {
            return Some(format!("panicked: {}", self.stderr.trim()));
        }
        if self.stdout.contains("internal error: ") {
            return Some(format!("panic hook answered: {}", self.stdout.trim()));
        }
        None
    }

    /// Why stdout is not a CNI error object, if it is not.
    pub fn error_json_problem(&self) -> Option<String> {
        match serde_json::from_str::<Value>(&self.stdout) {
            Ok(v) if v["code"].is_u64() && v["msg"].is_string() => None,
            Ok(v) => Some(format!("not a CNI error: {v}")),
            Err(e) => Some(format!("stdout is not JSON ({e}): {:?}", self.stdout)),
        }
    }
}

/// The `msg` of a CNI error (`PluginOutput::err`), empty when it has none.
pub fn error_msg(e: &Value) -> &str {
    e["msg"].as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tr_runs_with_exactly_the_given_environment_and_stdin() {
        let out = Invocation::new("/usr/bin/env", "VERSION")
            .env("CNI_ARGS", "a=b")
            .unset("CNI_PATH")
            .run();
        let mut vars: Vec<&str> = out
            .stdout
            .lines()
            .map(|l| l.split('=').next().unwrap())
            .collect();
        vars.sort();
        let mut want = vec!["CNI_ARGS", "CNI_COMMAND", "PATH"];
        if std::env::var_os("RCNI_LOCK_TIMEOUT").is_some() {
            want.push("RCNI_LOCK_TIMEOUT");
            want.sort();
        }
        assert_eq!(vars, want, "{out:?}");
        let out = Invocation::bare("/bin/cat")
            .config(&serde_json::json!({"a": 1}))
            .run();
        assert_eq!((out.code, out.stdout.as_str()), (0, r#"{"a":1}"#));
    }

    #[test]
    fn tr_a_hung_plugin_is_killed_at_the_deadline() {
        let t = std::time::Instant::now();
        let out = Invocation::bare("/bin/true")
            .via(&["sh", "-c", "exec sleep 60"])
            .timeout(Duration::from_millis(200))
            .run();
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        assert_eq!((out.code, out.signal), (-1, Some(9)), "{out:?}");
        assert!(out.stderr.contains("killed after 200ms"), "{out:?}");
        assert_eq!(out.panic().as_deref(), Some("killed by signal 9"));
    }
}
