//! Writes that cannot tear: a file's whole content is written to a file
//! without a name (`O_TMPFILE` in the network directory), which is then
//! linked to its name (`linkat`): the name appears with its complete
//! content, or not at all, and `EEXIST` says the name was taken. A process
//! killed at any moment leaves no partial file and no temp file (the
//! kernel frees an unnamed file with the process). Where `O_TMPFILE` is
//! not supported, temp files have names ([`TMP_PREFIX`]) and are made
//! under the lock only. And the one in-place write: a `pwrite` of text at
//! least as long as what it replaces ([`overwrite_if_not_shorter`]).

use super::{Session, io_err};
use cni_skel::CniError;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Prefix of named temp files (never an address, so never a reservation),
/// made only where `O_TMPFILE` is not supported.
pub const TMP_PREFIX: &str = ".rcni-tmp-";

/// Overwrites the regular file `path` with `data` in one `pwrite` at offset
/// 0, if it exists and holds no more than `data.len()` bytes (so nothing of
/// the old text can remain). `false` when that cannot be done; the caller
/// then replaces the file. A symlink is not followed (`O_NOFOLLOW`): the
/// caller replaces it with a file of its own rather than write wherever it
/// points.
pub(super) fn overwrite_if_not_shorter(path: &Path, data: &[u8]) -> bool {
    let Ok(f) = OpenOptions::new()
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
    else {
        return false;
    };
    match f.metadata() {
        Ok(m) if m.is_file() && m.len() <= data.len() as u64 => {}
        _ => return false,
    }
    // One write call: a partial count is only possible on a full disk, and
    // then the slow path fails too, or leaves a valid file.
    matches!(f.write_at(data, 0), Ok(n) if n == data.len())
}

/// Errors of `open(O_TMPFILE)` that mean "not supported here" (the file
/// system, or a kernel older than 3.11, which fails with `EISDIR`).
pub(super) fn tmpfile_unsupported(e: &std::io::Error) -> bool {
    matches!(
        nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0)),
        nix::errno::Errno::EOPNOTSUPP | nix::errno::Errno::EISDIR | nix::errno::Errno::EINVAL
    )
}

/// A new file with no name in `dir` (`O_TMPFILE`), mode 0600, holding `data`.
pub(super) fn unnamed_file(dir: &Path, data: &[u8]) -> std::io::Result<File> {
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_TMPFILE.bits())
        .mode(0o600)
        .open(dir)?;
    f.write_all(data)?;
    Ok(f)
}

/// Gives the unnamed file `f` the name `target` (`EEXIST` when taken).
/// Straight from the descriptor (`AT_EMPTY_PATH`) where that is allowed
/// (`CAP_DAC_READ_SEARCH`: root, as runtimes run plugins), else through
/// `/proc/self/fd`, which needs no privilege but costs a walk through
/// procfs.
pub(super) fn link_unnamed(f: &File, target: &Path) -> std::io::Result<()> {
    use nix::errno::Errno;
    use nix::fcntl::{AT_FDCWD, AtFlags};
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    static EMPTY_PATH_REFUSED: AtomicBool = AtomicBool::new(false);
    if !EMPTY_PATH_REFUSED.load(Ordering::Relaxed) {
        match nix::unistd::linkat(f, "", AT_FDCWD, target, AtFlags::AT_EMPTY_PATH) {
            // Without the capability the kernel answers ENOENT.
            Err(Errno::ENOENT | Errno::EPERM | Errno::EINVAL) => {
                EMPTY_PATH_REFUSED.store(true, Ordering::Relaxed);
            }
            r => return r.map_err(std::io::Error::from),
        }
    }
    let fd_path = format!("/proc/self/fd/{}", f.as_raw_fd());
    nix::unistd::linkat(
        AT_FDCWD,
        fd_path.as_str(),
        AT_FDCWD,
        target,
        AtFlags::AT_SYMLINK_FOLLOW,
    )
    .map_err(std::io::Error::from)
}

/// Whether `dir` can be written, changing nothing in it: an unnamed file
/// is made and dropped. `None` when `O_TMPFILE` is not supported there.
pub fn probe_unnamed(dir: &Path) -> Option<std::io::Result<()>> {
    match unnamed_file(dir, b"") {
        Ok(_) => Some(Ok(())),
        Err(e) if tmpfile_unsupported(&e) => None,
        Err(e) => Some(Err(e)),
    }
}

/// A temp file holding what is to be linked into place.
pub(super) enum Tmp {
    /// `O_TMPFILE`: no name, freed when closed unless linked.
    Unnamed(File),
    /// A named temp file in the network directory (no `O_TMPFILE` there).
    Named(String),
}

/// The session's temp files.
impl Session<'_> {
    pub(super) fn next_tmp(&mut self) -> String {
        self.tmp_seq += 1;
        format!("{TMP_PREFIX}{}-{}", std::process::id(), self.tmp_seq)
    }

    /// Writes `data` to a new temp file (0600): unnamed where `O_TMPFILE`
    /// works, else named.
    pub(super) fn new_tmp(&mut self, data: &[u8]) -> Result<Tmp, CniError> {
        self.will_change();
        if self.unnamed_tmp {
            match unnamed_file(&self.store.dir, data) {
                Ok(f) => return Ok(Tmp::Unnamed(f)),
                Err(e) if tmpfile_unsupported(&e) => {
                    log::debug!("no O_TMPFILE in {}: {e}", self.store.dir.display());
                    self.unnamed_tmp = false;
                }
                Err(e) => return Err(io_err("failed to create a file in", &self.store.dir, e)),
            }
        }
        self.write_tmp(data).map(Tmp::Named)
    }

    /// Links `tmp` to `target`: `EEXIST` when taken. An unnamed file that
    /// cannot be linked other than for `EEXIST` (no `/proc`) is replaced by
    /// a named one for the rest of the session.
    pub(super) fn link_tmp(
        &mut self,
        tmp: Tmp,
        data: &[u8],
        target: &Path,
    ) -> (Tmp, std::io::Result<()>) {
        match tmp {
            Tmp::Named(n) => {
                let r = fs::hard_link(self.path(&n), target);
                (Tmp::Named(n), r)
            }
            Tmp::Unnamed(f) => match link_unnamed(&f, target) {
                Err(e) if e.kind() != ErrorKind::AlreadyExists => {
                    log::debug!("cannot link an O_TMPFILE file: {e}");
                    self.unnamed_tmp = false;
                    match self.write_tmp(data) {
                        Ok(n) => {
                            let r = fs::hard_link(self.path(&n), target);
                            (Tmp::Named(n), r)
                        }
                        Err(err) => (Tmp::Unnamed(f), Err(std::io::Error::other(err.msg))),
                    }
                }
                r => (Tmp::Unnamed(f), r),
            },
        }
    }

    /// Writes `data` to a new named temp file (0600); returns its name.
    pub(super) fn write_tmp(&mut self, data: &[u8]) -> Result<String, CniError> {
        self.will_change();
        let name = self.next_tmp();
        let path = self.path(&name);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io_err("failed to create", &path, e))?;
        f.write_all(data).map_err(|e| {
            let _ = fs::remove_file(&path);
            io_err("failed to write", &path, e)
        })?;
        Ok(name)
    }

    pub(super) fn drop_claim_tmp(&mut self) {
        if let Some((tmp, _)) = self.claim_tmp.take() {
            self.drop_tmp(tmp);
        }
    }

    /// Closes an unnamed temp file (freeing it unless linked), removes a
    /// named one.
    pub(super) fn drop_tmp(&self, tmp: Tmp) {
        if let Tmp::Named(name) = tmp
            && let Err(e) = fs::remove_file(self.path(&name))
        {
            log::warn!("cannot remove temp file {name}: {e}");
        }
    }
}
