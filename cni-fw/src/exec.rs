//! Running the netfilter tools with a payload on stdin.

use cni_skel::CniError;
use std::io::Write;
use std::process::{Command, Stdio};

/// True when `program` is an executable file in one of the `PATH` directories.
pub fn on_path(program: &str) -> bool {
    which(program).is_some()
}

/// Where `program` is found on `PATH` (the first executable file of that name).
pub fn which(program: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// What a tool printed when it failed.
#[derive(Debug, Clone)]
pub struct ToolError {
    /// Exit status, or -1 when it could not be started or was killed.
    pub status: i32,
    /// Its stderr.
    pub stderr: String,
}

impl ToolError {
    /// Into a CNI error naming the operation.
    pub fn into_cni(self, what: &str) -> CniError {
        CniError::internal(format!("{what}: {}", self.stderr.trim()))
    }
}

/// Runs `program args` with `stdin`, returning stdout on success.
pub fn run(program: &str, args: &[&str], stdin: &str) -> Result<String, ToolError> {
    log::debug!("{program} {args:?} <<{stdin}");
    let mut child = cni_net::process::die_with_parent(&mut Command::new(program))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ToolError {
            status: -1,
            stderr: format!("cannot run {program}: {e}"),
        })?;
    if let Some(mut pipe) = child.stdin.take() {
        // The payloads are small; a tool that exits early reports its own error.
        let _ = pipe.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| ToolError {
        status: -1,
        stderr: format!("waiting for {program}: {e}"),
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(ToolError {
            status: out.status.code().unwrap_or(-1),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}
