//! Executing a plugin binary as libcni's `invoke.RawExec` does: the
//! runtime's environment plus the `CNI_*` variables, the config on stdin,
//! stdout captured; a failure's stdout parsed as the plugin's error.

use cni_skel::CniError;
use cni_skel::delegate::Fed;
use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitStatus};

/// The `CNI_*` variables of one invocation.
#[derive(Debug, Clone, Default)]
pub struct InvokeArgs {
    /// `CNI_COMMAND`.
    pub command: String,
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_NETNS`.
    pub netns: String,
    /// `CNI_ARGS`, already joined.
    pub args: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_PATH`, already joined.
    pub path: String,
}

impl InvokeArgs {
    fn env(&self) -> [(&'static str, &str); 6] {
        [
            ("CNI_COMMAND", &self.command),
            ("CNI_CONTAINERID", &self.container_id),
            ("CNI_NETNS", &self.netns),
            ("CNI_ARGS", &self.args),
            ("CNI_IFNAME", &self.ifname),
            ("CNI_PATH", &self.path),
        ]
    }
}

/// `K=V;K=V`, as libcni builds `CNI_ARGS`.
pub fn join_args(args: &[(String, String)]) -> String {
    args.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// Go's `exec.ExitError` text: `exit status 3` / `signal: 9`.
fn status_text(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("signal: {s}"),
        (None, None) => status.to_string(),
    }
}

/// Runs `plugin` and returns its stdout on success. On failure the
/// plugin's own error (its code preserved), else a code-0 error describing
/// the exit, as libcni's `pluginErr`. Plugin stderr is passed on to ours.
pub fn exec_plugin(plugin: &Path, stdin: &[u8], args: &InvokeArgs) -> Result<Vec<u8>, CniError> {
    let out = cni_skel::delegate::retry_busy(plugin, || run_once(plugin, stdin, args))?;
    if !out.stderr.is_empty() {
        let _ = std::io::stderr().lock().write_all(&out.stderr);
    }
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(plugin_error(out.status, &out.stdout, &out.stderr))
    }
}

fn run_once(
    plugin: &Path,
    stdin: &[u8],
    args: &InvokeArgs,
) -> std::io::Result<std::process::Output> {
    Fed::spawn(Command::new(plugin).envs(args.env()), stdin)?.wait_with_output()
}

/// libcni's `pluginErr`: the plugin's error JSON, or a description of the
/// failure with code 0 (Go's zero `types.Error`).
fn plugin_error(status: ExitStatus, stdout: &[u8], stderr: &[u8]) -> CniError {
    let status = status_text(status);
    if stdout.is_empty() {
        if stderr.is_empty() {
            return CniError::new(
                0,
                format!("netplugin failed with no error message: {status}"),
                "",
            );
        }
        return CniError::new(
            0,
            format!(
                "netplugin failed: {:?}: {status}",
                String::from_utf8_lossy(stderr)
            ),
            "",
        );
    }
    #[derive(serde::Deserialize)]
    struct Wire {
        #[serde(default)]
        code: u32,
        #[serde(default)]
        msg: String,
        #[serde(default)]
        details: String,
    }
    match serde_json::from_slice::<Wire>(stdout) {
        Ok(w) => CniError::new(w.code, w.msg, w.details),
        Err(e) => CniError::new(
            0,
            format!(
                "netplugin failed but error parsing its diagnostic message {:?}: {e}",
                String::from_utf8_lossy(stdout)
            ),
            "",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cni_skel::delegate::PIPE_MIN_CAPACITY;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn errors_like_libcni() {
        let st = ExitStatus::from_raw(1 << 8);
        let e = plugin_error(
            st,
            br#"{"cniVersion":"1.0.0","code":7,"msg":"m","details":"d"}"#,
            b"",
        );
        assert_eq!((e.code, e.msg.as_str(), e.details.as_str()), (7, "m", "d"));
        let e = plugin_error(st, b"", b"");
        assert_eq!(
            e.msg,
            "netplugin failed with no error message: exit status 1"
        );
        let e = plugin_error(st, b"", b"boom");
        assert_eq!(e.msg, "netplugin failed: \"boom\": exit status 1");
        let e = plugin_error(ExitStatus::from_raw(9), b"junk", b"");
        assert!(
            e.msg.starts_with(
                "netplugin failed but error parsing its diagnostic message \"junk\": "
            ),
            "{}",
            e.msg
        );
        assert_eq!(e.code, 0);
    }

    /// `cat` writes what it reads: a config larger than a pipe holds
    /// (fed from a thread) and a small one (written before the wait) both
    /// come back whole, neither side waiting on the other.
    #[test]
    fn stdin_of_any_size_reaches_the_plugin() {
        let cat = Path::new("/bin/cat");
        for len in [0, 1, PIPE_MIN_CAPACITY, PIPE_MIN_CAPACITY + 1, 1 << 20] {
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let out = exec_plugin(cat, &data, &InvokeArgs::default()).unwrap();
            assert!(out == data, "{len} bytes");
        }
    }

    #[test]
    fn args_join() {
        assert_eq!(join_args(&[]), "");
        assert_eq!(
            join_args(&[("A".into(), "1".into()), ("B".into(), "2".into())]),
            "A=1;B=2"
        );
    }
}
