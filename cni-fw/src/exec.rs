//! Running the netfilter tools with a payload on stdin.

use cni_skel::CniError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// True when `program` is an executable file in one of the `PATH` directories.
pub fn on_path(program: &str) -> bool {
    which(program).is_some()
}

/// Where `program` is found on `PATH` (the first executable file of that name).
pub fn which(program: &str) -> Option<PathBuf> {
    let [found] = which_each([program]);
    found
}

/// [`which`] of each of `programs`, in one walk of `PATH`.
///
/// The candidates are built in one buffer rather than a `PathBuf` per
/// directory (`split_paths` and `join`): the iptables tools' lookups were
/// a tenth of a firewall DEL's instructions.
pub fn which_each<const N: usize>(programs: [&str; N]) -> [Option<PathBuf>; N] {
    use std::os::unix::ffi::OsStrExt;
    let path = std::env::var_os("PATH");
    let dirs = path
        .as_deref()
        .map_or(b"/usr/sbin:/usr/bin:/sbin:/bin".as_slice(), |p| {
            p.as_bytes()
        });
    search(dirs, programs)
}

/// [`which_each`] in `dirs`, a `PATH` value.
fn search<const N: usize>(dirs: &[u8], programs: [&str; N]) -> [Option<PathBuf>; N] {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let mut found = [const { None }; N];
    let mut candidate = Vec::new();
    for dir in dirs.split(|&b| b == b':') {
        for (program, slot) in programs.iter().zip(&mut found) {
            if slot.is_some() {
                continue;
            }
            candidate.clear();
            // An empty entry is the current directory, as for `split_paths`.
            candidate.extend_from_slice(if dir.is_empty() { b"." } else { dir });
            candidate.push(b'/');
            candidate.extend_from_slice(program.as_bytes());
            let file = Path::new(OsStr::from_bytes(&candidate));
            if file
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            {
                *slot = Some(file.to_path_buf());
            }
        }
        if found.iter().all(Option::is_some) {
            break;
        }
    }
    found
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::search;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn each_program_is_the_first_executable_file_of_its_name() {
        let root = std::env::temp_dir().join(format!("rcni-which-{}", std::process::id()));
        let (a, b) = (root.join("a"), root.join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d).unwrap();
        }
        let file = |path: std::path::PathBuf, mode: u32| {
            std::fs::write(&path, "").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        file(a.join("save"), 0o644); // not executable: skipped
        file(b.join("save"), 0o755);
        file(a.join("restore"), 0o755);
        file(b.join("restore"), 0o755); // the first one wins
        std::fs::create_dir(a.join("dir")).unwrap(); // a directory is no program
        let dirs = format!("{}::{}", a.display(), b.display());
        let [save, restore, dir, none] =
            search(dirs.as_bytes(), ["save", "restore", "dir", "none"]);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(save, Some(b.join("save")));
        assert_eq!(restore, Some(a.join("restore")));
        assert_eq!(dir, None);
        assert_eq!(none, None);
    }
}
