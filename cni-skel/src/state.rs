//! Per-attachment state files: `<dir>/<containerID>_<ifname>.json`, what a
//! plugin saves at ADD to put things back at DEL (tuning's original
//! values, host-device's host-side configuration). Written through a
//! temporary file and a rename, so a reader (or a DEL after a kill) sees
//! the old file or the new one, never half of one. GC removes the files
//! of a network's attachments that are no longer valid.
//!
//! The container ID and ifname are validated by the skel (no `/`, not `.`
//! or `..`), so they can be file names. Nothing is read or written through
//! a symlink or anything but a regular file: the temporary file is made
//! anew (`O_CREAT | O_EXCL`, which never follows a link) after whatever
//! had its name is unlinked, and the rename replaces a link at the final
//! name instead of writing through it.

use crate::CniError;
use std::collections::HashSet;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// One attachment's file (and the temporary file it is written through).
#[derive(Debug, Clone)]
pub struct StateFile {
    dir: PathBuf,
    path: PathBuf,
    tmp: PathBuf,
}

/// The file name of an attachment's state.
pub fn file_name(container_id: &str, ifname: &str) -> String {
    format!("{container_id}_{ifname}.json")
}

/// The temporary name a state file is written under, then renamed from.
fn tmp_name(name: &str) -> String {
    format!(".{name}.tmp")
}

/// The attachment a temporary file is for, if `name` is one.
pub fn tmp_target(name: &str) -> Option<&str> {
    name.strip_prefix('.')?.strip_suffix(".tmp")
}

fn io_err(what: &str, p: &Path, e: std::io::Error) -> CniError {
    CniError::new(
        crate::error::code::IO_FAILURE,
        format!("failed to {what} {}: {e}", p.display()),
        "",
    )
}

impl StateFile {
    /// The file of (container ID, ifname) in `dir`.
    pub fn new(dir: &Path, container_id: &str, ifname: &str) -> StateFile {
        StateFile::named(dir, &file_name(container_id, ifname))
    }

    /// The file `name` (a plain file name, e.g. `<hash>.json`) in `dir`,
    /// for state keyed by something other than (container ID, ifname).
    pub fn named(dir: &Path, name: &str) -> StateFile {
        StateFile {
            dir: dir.to_path_buf(),
            path: dir.join(name),
            tmp: dir.join(tmp_name(name)),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes; `Ok(None)` when there is no file. Anything but a
    /// regular file under its name (a symlink, a FIFO) is an error, not
    /// followed or opened.
    pub fn read(&self) -> Result<Option<Vec<u8>>, CniError> {
        match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("read", &self.path, e)),
            Ok(m) if !m.file_type().is_file() => {
                let e = std::io::Error::new(std::io::ErrorKind::InvalidData, "not a regular file");
                return Err(io_err("read", &self.path, e));
            }
            Ok(_) => {}
        }
        match std::fs::read(&self.path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("read", &self.path, e)),
        }
    }

    /// Writes the file (mode 0600) through a temporary file and a rename.
    /// Missing directories are made 0700. The temporary file is created
    /// anew (`O_EXCL`): whatever had its name (a killed ADD's, a symlink)
    /// is unlinked first, never written through. The directory is made and
    /// the name unlinked only when the first create says they need to be
    /// (the common case, an existing directory and no leftover, is one
    /// `open`).
    pub fn write(&self, contents: &[u8]) -> Result<(), CniError> {
        let mut f = match self.create_tmp() {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&self.dir)
                    .map_err(|e| io_err("create backup directory", &self.dir, e))?;
                self.create_tmp()
                    .map_err(|e| io_err("create", &self.tmp, e))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                remove_if_present(&self.tmp)?;
                self.create_tmp()
                    .map_err(|e| io_err("create", &self.tmp, e))?
            }
            Err(e) => return Err(io_err("create", &self.tmp, e)),
        };
        f.write_all(contents)
            .map_err(|e| io_err("write", &self.tmp, e))?;
        drop(f);
        std::fs::rename(&self.tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&self.tmp);
            io_err("save", &self.path, e)
        })
    }

    /// Creates the temporary file, new (`O_CREAT | O_EXCL`, 0600).
    fn create_tmp(&self) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.tmp)
    }

    /// Removes the file (and a temporary one a killed ADD left); already
    /// gone is fine.
    pub fn remove(&self) -> Result<(), CniError> {
        remove_if_present(&self.tmp)?;
        remove_if_present(&self.path)
    }
}

/// Removes a file; one that is not there is not an error.
pub fn remove_if_present(path: &Path) -> Result<(), CniError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err("remove", path, e)),
        _ => Ok(()),
    }
}

/// GC of a state directory: removes the files (and temporary files a
/// killed ADD left) of attachments not in `valid` (container ID, ifname)
/// for which `belongs` (given the file's path) says the file is this
/// network's. Only regular files are considered (`belongs` never opens a
/// symlink). A missing directory holds nothing.
pub fn gc(
    dir: &Path,
    valid: &[(String, String)],
    belongs: impl Fn(&Path) -> bool,
) -> Result<(), CniError> {
    let keep: HashSet<String> = valid
        .iter()
        .map(|(cid, ifname)| file_name(cid, ifname))
        .collect();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("list", dir, e)),
    };
    let mut errors = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let attachment = tmp_target(&name).unwrap_or(&name);
        if !attachment.ends_with(".json")
            || keep.contains(attachment)
            || !entry.file_type().is_ok_and(|t| t.is_file())
        {
            continue;
        }
        let path = entry.path();
        if belongs(&path)
            && let Err(e) = remove_if_present(&path)
        {
            errors.push(e.msg);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(CniError::internal(errors.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_remove_gc() {
        let dir = std::env::temp_dir().join(format!("cni-skel-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let nested = dir.join("a/b");
        let f = StateFile::new(&nested, "cid_1", "eth0");
        assert_eq!(f.path(), nested.join("cid_1_eth0.json"));
        assert_eq!(f.read().unwrap(), None);
        f.write(b"{\"mtu\":1400}").unwrap();
        assert_eq!(f.read().unwrap().unwrap(), b"{\"mtu\":1400}");
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(f.path()), 0o600);
        assert_eq!(mode(&nested), 0o700);
        assert_eq!(mode(&dir.join("a")), 0o700);
        // A killed ADD's temporary file is replaced, not written through.
        let tmp = nested.join(".cid_1_eth0.json.tmp");
        std::fs::write(&tmp, b"killed").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        f.write(b"{}").unwrap();
        assert_eq!(f.read().unwrap().unwrap(), b"{}");
        assert_eq!(mode(f.path()), 0o600);
        assert!(!tmp.exists());
        assert_eq!(tmp_target(".cid_1_eth0.json.tmp"), Some("cid_1_eth0.json"));
        assert_eq!(tmp_target("cid_1_eth0.json"), None);
        f.remove().unwrap();
        f.remove().unwrap();
        assert_eq!(f.read().unwrap(), None);

        // GC: valid ones stay, others go when they belong to the network.
        let keep = StateFile::new(&nested, "c1", "eth0");
        let stale = StateFile::new(&nested, "c2", "eth0");
        let foreign = StateFile::new(&nested, "c3", "eth0");
        keep.write(b"mine").unwrap();
        stale.write(b"mine").unwrap();
        foreign.write(b"other").unwrap();
        std::fs::write(nested.join(".c4_eth0.json.tmp"), b"mine").unwrap();
        let valid = vec![("c1".to_string(), "eth0".to_string())];
        gc(&nested, &valid, |p| std::fs::read(p).unwrap() == b"mine").unwrap();
        assert!(keep.read().unwrap().is_some());
        assert!(stale.read().unwrap().is_none());
        assert!(foreign.read().unwrap().is_some());
        assert!(!nested.join(".c4_eth0.json.tmp").exists());
        gc(&dir.join("missing"), &valid, |_| true).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn symlinks_are_never_followed() {
        use std::os::unix::fs::symlink;
        let dir = std::env::temp_dir().join(format!("cni-skel-state-ln-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let f = StateFile::new(&dir, "c1", "eth0");
        // A link under the temporary name and one under the final name:
        // the write goes to a file of its own and replaces the link.
        symlink(&victim, dir.join(".c1_eth0.json.tmp")).unwrap();
        symlink(&victim, f.path()).unwrap();
        let e = f.read().unwrap_err();
        assert!(e.msg.contains("not a regular file"), "{e:?}");
        f.write(b"mine").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(f.path()).unwrap().is_file());
        assert_eq!(f.read().unwrap().unwrap(), b"mine");
        // GC hands `belongs` only regular files.
        let link = dir.join("c2_eth0.json");
        symlink(&victim, &link).unwrap();
        gc(&dir, &[], |p| {
            assert!(std::fs::symlink_metadata(p).unwrap().is_file(), "{p:?}");
            true
        })
        .unwrap();
        assert!(f.read().unwrap().is_none());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
