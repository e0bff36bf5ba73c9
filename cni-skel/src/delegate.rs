//! Running a delegate plugin (IPAM) the way libcni's `invoke` does: found
//! in `CNI_PATH`, same environment but `CNI_COMMAND`, same stdin bytes.

use crate::env::{CmdArgs, Command};
use crate::error::CniError;
use crate::types::CniResult;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
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

/// Runs the delegate `name` with `command` and returns its stdout on success,
/// or its own error (code preserved) on failure.
pub fn exec(name: &str, command: Command, args: &CmdArgs) -> Result<Vec<u8>, CniError> {
    let path = find_plugin(name, &args.path)?;
    let mut attempt = 0;
    loop {
        match run_once(&path, command, &args.stdin) {
            // "text file busy": the binary is still being written; libcni retries.
            Err(e) if e.raw_os_error() == Some(26) && attempt < 5 => {
                attempt += 1;
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => {
                return Err(CniError::internal(format!(
                    "failed to exec {}: {e}",
                    path.display()
                )));
            }
            Ok(out) if out.status.success() => return Ok(out.stdout),
            Ok(out) => return Err(delegate_error(&out)),
        }
    }
}

fn run_once(path: &Path, command: Command, stdin: &[u8]) -> std::io::Result<std::process::Output> {
    let mut child = std::process::Command::new(path)
        .env("CNI_COMMAND", command.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut pipe) = child.stdin.take() {
        // A delegate that exits without reading stdin closes the pipe: not our error.
        let _ = pipe.write_all(stdin);
    }
    child.wait_with_output()
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

fn ipam_type(args: &CmdArgs) -> Result<&str, CniError> {
    Ok(args
        .conf
        .ipam
        .as_ref()
        .and_then(|i| i.kind.as_deref())
        .unwrap_or(""))
}
