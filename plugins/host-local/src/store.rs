//! The on-disk store: a network directory in the reference's
//! `backend/disk` format ([`format`]), so that the Go plugin and this one
//! can share it, under the reference's lock (`flock` on its `lock` file,
//! waited for at most `RCNI_LOCK_TIMEOUT`: cni-lock).
//!
//! - [`format`]: the files, their names and contents, read without
//!   following symlinks.
//! - [`tmpfile`]: writes that cannot tear (unnamed temp file, then `link`).
//! - [`index`]: the fast path, a cache of who owns what outside the
//!   directory, and what it saves.
//! - here: [`Store`] (the directory and its lock) and [`Session`] (the
//!   store under its lock: claim, release, GC).
//!
//! Nothing else is ever visible in the directory: the cache lives under
//! [`CACHE_DIR`], and temp files have no name (`O_TMPFILE`).
//!
//! # Crash safety
//! A reservation is written to an unnamed temp file (`O_TMPFILE` in the
//! network directory) first and then linked to its address name (`linkat`
//! from the descriptor, or through `/proc/self/fd` without the privilege
//! for that): `linkat` fails with `EEXIST` when the address
//! is taken, and otherwise makes a *complete* file appear at once, so a
//! process killed at any instant never leaves an empty or partial
//! reservation (the reference's `O_EXCL` + write can: plugins#498), and no
//! temp file ever appears (a killed process's unnamed file is freed with
//! it).
//! `last_reserved_ip.<set>` is overwritten in place by one `pwrite` when
//! the new address is at least as long as the old one (a single write
//! lands whole or not at all), else unlinked and linked anew from an
//! unnamed temp file (see [`Session::set_last_reserved`]).
//!
//! On a file system without `O_TMPFILE` (or without `/proc`) the temp files
//! are named (`.rcni-tmp-<pid>-<n>`), as in earlier versions, and renamed or
//! linked into place. They are only created under the lock, so any temp
//! file seen under the lock belongs to a dead process; the next writing
//! session that lists the directory removes it (after a crash that is the
//! next session: see the stamp in [`index`]). Their names are not addresses, so
//! neither the Go plugin nor GC takes them for reservations.

use crate::allocator;
use cni_skel::CniError;
use cni_skel::error::code;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub mod format;
pub mod index;
pub mod tmpfile;

use format::read_trimmed;
pub use format::{LAST_RESERVED_PREFIX, LOCK_FILE, legacy_key, owner_key, reserved_ips};
pub use index::{CACHE_DIR, cache_file};
use index::{Index, NamesDigest, Settled, looks_like_address};
pub use tmpfile::{TMP_PREFIX, probe_unnamed};
use tmpfile::{Tmp, overwrite_if_not_shorter};

/// The ownership cache that earlier versions kept in the network
/// directory; a writing session removes it.
const OLD_INDEX_FILE: &str = ".rcni-index";
/// Taken candidates in a row after which an ADD lists the directory.
const LIST_AFTER_TAKEN: u32 = 8;

pub(crate) fn io_err(what: impl std::fmt::Display, path: &Path, e: std::io::Error) -> CniError {
    CniError::new(
        code::IO_FAILURE,
        format!("{what} {}: {e}", path.display()),
        "",
    )
}

/// A network directory and its open lock file.
pub struct Store {
    dir: PathBuf,
    /// `None`: a reader of a directory without a lock file (it reads
    /// without locking rather than create one).
    lock: Option<File>,
    /// Where the index lives ([`CACHE_DIR`] unless changed).
    cache_dir: PathBuf,
    /// Writers remove dead processes' temp files and an old in-directory
    /// index; readers (CHECK) change nothing in the directory.
    writer: bool,
    /// Tests: what [`stamp_settles`] would say, fixed (a coarse or a
    /// multigrain kernel), instead of asking the clock.
    settling: Option<Settled>,
}

/// How a session learns who owns what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// Trust the index when its stamp matches the directory.
    Fast,
    /// Read every reservation file.
    Full,
}

/// The lock file's flags: a symlink planted in its place is not followed
/// (an error, not a lock on its target) and a FIFO does not block the open.
fn lock_flags() -> i32 {
    (nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits()
}

fn open_existing_lock(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(lock_flags())
        .open(path)
}

fn open_lock(dir: &Path) -> Result<File, CniError> {
    let path = dir.join(LOCK_FILE);
    match open_existing_lock(&path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == ErrorKind::NotFound => OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o750)
            .custom_flags(lock_flags())
            .open(&path)
            .map_err(|e| io_err("failed to create lock file", &path, e)),
        Err(e) => Err(io_err("failed to open lock file", &path, e)),
    }
}

impl Store {
    /// Opens the network directory `dir` for writing, creating it (mode
    /// 0755, parents included) and its lock file as needed.
    pub fn create(dir: &Path) -> Result<Store, CniError> {
        // Every ADD but a network's first finds the lock file: opened, it
        // proves the directory is there (no mkdir, which fails with EEXIST
        // under the parent's lock, and no stat of the directory).
        if let Ok(lock) = open_existing_lock(&dir.join(LOCK_FILE)) {
            return Ok(Store::new(dir, Some(lock), true));
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|e| io_err("failed to create data directory", dir, e))?;
        Ok(Store::new(dir, Some(open_lock(dir)?), true))
    }

    fn new(dir: &Path, lock: Option<File>, writer: bool) -> Store {
        Store {
            dir: dir.to_path_buf(),
            lock,
            cache_dir: PathBuf::from(CACHE_DIR),
            writer,
            settling: None,
        }
    }

    /// Keeps the index under `cache_dir` instead of [`CACHE_DIR`].
    pub fn with_cache_dir(mut self, cache_dir: impl Into<PathBuf>) -> Store {
        self.cache_dir = cache_dir.into();
        self
    }

    /// `None` when `dir` does not exist (or is not a directory).
    fn exists(dir: &Path) -> Result<bool, CniError> {
        match fs::metadata(dir) {
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                Ok(false)
            }
            Err(e) => Err(io_err("failed to open data directory", dir, e)),
            Ok(_) => Ok(true),
        }
    }

    /// Opens an existing network directory for writing (DEL, GC), creating
    /// its lock file if missing; `None` when there is no directory.
    pub fn open_existing(dir: &Path) -> Result<Option<Store>, CniError> {
        if !Store::exists(dir)? {
            return Ok(None);
        }
        Ok(Some(Store::new(dir, Some(open_lock(dir)?), true)))
    }

    /// Opens an existing network directory for reading (CHECK, STATUS):
    /// nothing in it is created or removed, not even a missing lock file.
    /// `None` when there is no directory.
    pub fn open_for_reading(dir: &Path) -> Result<Option<Store>, CniError> {
        if !Store::exists(dir)? {
            return Ok(None);
        }
        let path = dir.join(LOCK_FILE);
        let lock = match open_existing_lock(&path) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(io_err("failed to open lock file", &path, e)),
        };
        Ok(Some(Store::new(dir, lock, false)))
    }

    /// The network directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Takes the directory's lock, waiting at most `RCNI_LOCK_TIMEOUT`
    /// (cni-lock): a lock held longer (a stuck writer) is an error naming
    /// the file, not a hang. The file is the reference's, so Go's
    /// host-local on the same directory is still excluded.
    fn lock(&self) -> Result<(), CniError> {
        match &self.lock {
            Some(l) => cni_lock::wait(l, &self.dir.join(LOCK_FILE)),
            None => Ok(()),
        }
    }

    fn unlock(&self) {
        if let Some(l) = &self.lock
            && let Err(e) = l.unlock()
        {
            log::warn!("cannot unlock {}: {e}", self.dir.display());
        }
    }

    /// Can the directory be written? (STATUS.) Probed with an unnamed file,
    /// which changes nothing in the directory, not even its mtime. Where
    /// `O_TMPFILE` is not supported, with a named temp file under the lock,
    /// restamping a trusted index afterwards.
    pub fn probe_write(&self) -> Result<(), CniError> {
        match probe_unnamed(&self.dir) {
            Some(r) => return r.map_err(|e| io_err("cannot write", &self.dir, e)),
            None => log::debug!("no O_TMPFILE in {}", self.dir.display()),
        }
        self.lock()?;
        let trusted = self.trusted_index();
        let path = self
            .dir
            .join(format!("{TMP_PREFIX}{}-status", std::process::id()));
        let r = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|_| fs::remove_file(&path))
            .map_err(|e| io_err("cannot write", &path, e));
        if let Some(index) = trusted {
            // The temp name changed no reservation: the lines still hold.
            self.restamp(index);
        }
        self.unlock();
        r
    }

    /// Takes the lock and learns who owns what.
    pub fn session(&self, sync: Sync) -> Result<Session<'_>, CniError> {
        self.lock()?;
        let mut s = Session {
            store: self,
            index: Index::default(),
            full: false,
            files: HashMap::new(),
            names: None,
            tmp_seq: 0,
            unnamed_tmp: true,
            claim_tmp: None,
            taken_in_a_row: 0,
            stats: Stats::default(),
        };
        // On error the session's Drop releases the lock.
        s.start(sync)?;
        Ok(s)
    }
}

/// What a session had to do (for tests, benchmarks and `RCNI_LOG=debug`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// The index was trusted.
    pub index_used: bool,
    /// The directory was listed.
    pub listed: bool,
    /// Reservation files read.
    pub files_read: usize,
    /// Stale temp files removed.
    pub stale_removed: usize,
}

/// A reservation file this session knows the content of.
#[derive(Debug, Clone)]
struct Known {
    name: String,
    /// Trimmed content; `None` when the file could not be read.
    content: Option<Vec<u8>>,
}

/// The store under its lock. Dropping it removes its temp file, brings the
/// index up to date if the directory changed, and releases the lock.
pub struct Session<'a> {
    store: &'a Store,
    /// The cache of who owns what ([`index`]).
    index: Index,
    /// Every reservation file was read (the index was not trusted, or
    /// for DEL and GC).
    full: bool,
    /// Fast: files this session read, made or removed (`None` = removed).
    /// Full: every reservation file.
    files: HashMap<IpAddr, Option<Known>>,
    /// Every address with a file, when the directory was listed.
    names: Option<HashSet<IpAddr>>,
    tmp_seq: u32,
    /// `O_TMPFILE` has not failed yet in this directory.
    unnamed_tmp: bool,
    /// The temp file holding the content of the reservation being made,
    /// reused while candidates turn out taken: (file, content).
    claim_tmp: Option<(Tmp, Vec<u8>)>,
    taken_in_a_row: u32,
    stats: Stats,
}

impl Session<'_> {
    fn path(&self, name: impl AsRef<OsStr>) -> PathBuf {
        self.store.dir.join(name.as_ref())
    }

    /// What this session had to do so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Learns who owns what: from the index when `sync` allows and it is
    /// trusted, else by reading every file.
    fn start(&mut self, sync: Sync) -> Result<(), CniError> {
        self.index = Index::open(self.store, sync, &mut self.stats)?;
        if self.index.trusted() {
            return Ok(());
        }
        self.scan()
    }

    /// Called before the first change to the directory (the index stamp
    /// is zeroed).
    fn will_change(&mut self) {
        self.index.will_change(&self.store.cache_dir);
    }

    /// Lists the directory and reads every reservation file; a writer
    /// removes stale temp files (any temp file seen under the lock is a dead
    /// process's) and an index left there by an earlier version.
    fn scan(&mut self) -> Result<(), CniError> {
        let dir = self.store.dir.clone();
        let mut names = HashSet::new();
        let mut stale = Vec::new();
        let rd = fs::read_dir(&dir).map_err(|e| io_err("failed to list", &dir, e))?;
        let mut digest = NamesDigest::default();
        for de in rd {
            let de = de.map_err(|e| io_err("failed to list", &dir, e))?;
            let name = de.file_name();
            if looks_like_address(name.as_encoded_bytes()) {
                digest.add(name.as_encoded_bytes());
            }
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(TMP_PREFIX) || name == OLD_INDEX_FILE {
                if self.store.writer {
                    stale.push(name.to_string());
                }
                continue;
            }
            let Ok(ip) = name.parse::<IpAddr>() else {
                continue;
            };
            let ip = ip.to_canonical();
            self.stats.files_read += 1;
            let known = Known {
                name: name.to_string(),
                content: read_trimmed(&dir.join(name)),
            };
            names.insert(ip);
            self.files.insert(ip, Some(known));
        }
        self.stats.listed = true;
        self.full = true;
        self.names = Some(names);
        self.index.listed(digest);
        for name in stale {
            self.will_change();
            match fs::remove_file(dir.join(&name)) {
                Ok(()) => {
                    log::debug!("removed stale temp file {name}");
                    self.stats.stale_removed += 1;
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => log::warn!("cannot remove stale temp file {name}: {e}"),
            }
        }
        Ok(())
    }

    /// Lists the names only (a fast session meeting many taken candidates).
    fn list_names(&mut self) {
        match reserved_ips(&self.store.dir) {
            Ok(ips) => {
                self.stats.listed = true;
                self.names = Some(ips.into_iter().collect());
            }
            Err(e) => log::debug!("cannot list: {}", e.msg),
        }
    }

    /// The content of `ip`'s file, reading it if this session has not.
    fn content_of(&mut self, ip: IpAddr) -> Option<Vec<u8>> {
        if let Some(known) = self.files.get(&ip) {
            return known.as_ref().and_then(|k| k.content.clone());
        }
        let name = ip.to_string();
        let path = self.path(&name);
        let content = read_trimmed(&path);
        self.stats.files_read += 1;
        // A stale index line: the file is gone.
        let gone = content.is_none() && fs::symlink_metadata(&path).is_err();
        let known = (!gone).then(|| Known {
            name,
            content: content.clone(),
        });
        self.files.insert(ip, known);
        content
    }

    /// The addresses whose file content equals `key`, verified by reading.
    fn matching(&mut self, key: &[u8]) -> Vec<IpAddr> {
        let mut candidates = self.index.candidates(key);
        candidates.extend(
            self.files
                .iter()
                .filter(|(_, k)| {
                    k.as_ref()
                        .is_some_and(|k| k.content.as_deref() == Some(key))
                })
                .map(|(ip, _)| *ip),
        );
        candidates.sort();
        candidates.dedup();
        candidates
            .into_iter()
            .filter(|ip| self.content_of(*ip).as_deref() == Some(key))
            .collect()
    }

    /// The reference's `GetByID`: addresses held by `(id, ifname)` or by a
    /// legacy `id`-only file.
    pub fn owned_by(&mut self, id: &str, ifname: &str) -> Vec<IpAddr> {
        let mut ips = self.matching(&owner_key(id, ifname));
        ips.extend(self.matching(&legacy_key(id)));
        ips.sort();
        ips.dedup();
        ips
    }

    /// Creates the file for `ip` owned by `(id, ifname)` atomically;
    /// `Ok(false)` when the address is taken.
    pub fn claim(&mut self, id: &str, ifname: &str, ip: IpAddr) -> Result<bool, CniError> {
        let ip = ip.to_canonical();
        let known_taken = matches!(self.files.get(&ip), Some(Some(_)))
            || (self.names.as_ref().is_some_and(|n| n.contains(&ip))
                && !matches!(self.files.get(&ip), Some(None)));
        if known_taken {
            return Ok(false);
        }
        let key = owner_key(id, ifname);
        if self.claim_tmp.as_ref().is_some_and(|(_, k)| *k != key) {
            self.drop_claim_tmp();
        }
        let tmp = match self.claim_tmp.take() {
            Some((t, _)) => t,
            None => self.new_tmp(&key)?,
        };
        let name = ip.to_string();
        let target = self.path(&name);
        let (tmp, linked) = self.link_tmp(tmp, &key, &target);
        self.claim_tmp = Some((tmp, key.clone()));
        match linked {
            Ok(()) => {
                // The temp name is spent: each reservation gets its own inode.
                self.drop_claim_tmp();
                self.index.claimed(ip, &name, &key);
                self.taken_in_a_row = 0;
                if let Some(n) = &mut self.names {
                    n.insert(ip);
                }
                self.files.insert(
                    ip,
                    Some(Known {
                        name,
                        content: Some(key),
                    }),
                );
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                if let Some(n) = &mut self.names {
                    n.insert(ip);
                }
                self.files.remove(&ip);
                self.taken_in_a_row += 1;
                if self.names.is_none() && self.taken_in_a_row >= LIST_AFTER_TAKEN {
                    self.list_names();
                }
                Ok(false)
            }
            Err(e) => Err(io_err("failed to reserve", &target, e)),
        }
    }

    /// The last address reserved from set `set`; `None` when missing or
    /// unreadable (a symlink included: [`open_no_follow`]).
    pub fn last_reserved(&self, set: usize) -> Option<IpAddr> {
        let data = read_trimmed(&self.path(format!("{LAST_RESERVED_PREFIX}{set}")))?;
        std::str::from_utf8(&data)
            .ok()?
            .parse::<IpAddr>()
            .ok()
            .map(|ip| ip.to_canonical())
    }

    /// Records `ip` as set `set`'s last reserved address.
    ///
    /// Usually in place: when the file exists and the new text is at least
    /// as long as the old, one `pwrite` at offset 0 replaces it whole (a
    /// single small write to a regular file is never cut short by a kill),
    /// with no inode created or freed. Round robin mostly moves to longer
    /// or equal texts; a shorter one (a wrap, `10.0.0.255` to `10.0.1.0`)
    /// would need a truncate after the write, and a kill between the two
    /// would leave the old text's tail, so it takes the slow path. This
    /// fast path pays: `scripts/bench host-local` of this build against the
    /// same build always taking the slow path (RCNI_REF_DIR, one hold,
    /// interleaved, ext4): ADD on the empty /24 0.77 against 1.07 ms, on
    /// the /22 holding 1000 0.73 against 1.54 ms (medians; the same
    /// instructions within 0.3%, one system call fewer: the kernel's
    /// work on a new inode is the difference).
    ///
    /// The slow path: a temp file, unlink the old file, link the temp file
    /// in its place (an unnamed one; a named one is renamed). Unlinked
    /// first because renaming over an existing file makes ext4
    /// (`auto_da_alloc`) start writeback of the new one, measured at
    /// 0.3–0.5 ms per ADD here. The file is only a round-robin hint, so a
    /// crash in between costs nothing but the hint (the allocator then
    /// starts at the range's start, as when the file is missing); it never
    /// leaves a torn address.
    pub fn set_last_reserved(&mut self, set: usize, ip: IpAddr) -> Result<(), CniError> {
        let text = ip.to_string();
        let target = self.path(format!("{LAST_RESERVED_PREFIX}{set}"));
        if overwrite_if_not_shorter(&target, text.as_bytes()) {
            return Ok(());
        }
        let tmp = self.new_tmp(text.as_bytes())?;
        if let Err(e) = fs::remove_file(&target)
            && e.kind() != ErrorKind::NotFound
        {
            log::debug!("cannot unlink {}: {e}; replacing it", target.display());
        }
        let name = match tmp {
            Tmp::Named(name) => name,
            unnamed => match self.link_tmp(unnamed, text.as_bytes(), &target) {
                (tmp, Ok(())) => {
                    self.drop_tmp(tmp);
                    return Ok(());
                }
                // Taken again (a foreign writer): rename a named file over it.
                (Tmp::Named(name), Err(_)) => name,
                (Tmp::Unnamed(_), Err(_)) => self.write_tmp(text.as_bytes())?,
            },
        };
        fs::rename(self.path(&name), &target).map_err(|e| {
            let _ = fs::remove_file(self.path(&name));
            io_err("failed to write", &target, e)
        })
    }

    /// Removes the file of `ip`; a file already gone is fine.
    fn remove(&mut self, ip: IpAddr) -> Result<(), CniError> {
        self.will_change();
        // The file's name and, when this session read it, its content.
        let (name, content) = match self.files.get(&ip) {
            Some(Some(k)) => (k.name.clone(), Some(k.content.clone())),
            _ => (ip.to_string(), None),
        };
        let path = self.path(&name);
        match fs::remove_file(&path) {
            Ok(()) => {
                let content = content.as_ref().map(Option::as_deref);
                self.index.removed(ip, &name, content);
            }
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            Err(err) => return Err(io_err("failed to release", &path, err)),
        }
        if self.full {
            self.files.remove(&ip);
        } else {
            self.files.insert(ip, None);
        }
        if let Some(n) = &mut self.names {
            n.remove(&ip);
        }
        Ok(())
    }

    fn remove_all(&mut self, ips: &[IpAddr]) -> Result<(), CniError> {
        let mut errs = Vec::new();
        for ip in ips {
            if let Err(e) = self.remove(*ip) {
                errs.push(e.msg);
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(CniError::new(code::IO_FAILURE, errs.join("; "), ""))
        }
    }

    /// The reference's `ReleaseByID`: removes every file of `(id, ifname)`;
    /// when there is none, every legacy file holding only `id`. Returns the
    /// addresses released.
    pub fn release(&mut self, id: &str, ifname: &str) -> Result<Vec<IpAddr>, CniError> {
        let mut ips = self.matching(&owner_key(id, ifname));
        if ips.is_empty() {
            ips = self.matching(&legacy_key(id));
        }
        self.remove_all(&ips)?;
        Ok(ips)
    }

    /// Removes every reservation not held by one of `valid` (legacy files
    /// are kept when their container ID is valid), including empty and
    /// unreadable files. Needs a full session. Returns the addresses released.
    pub fn gc(&mut self, valid: &[(String, String)]) -> Result<Vec<IpAddr>, CniError> {
        if !self.full {
            self.files.clear();
            self.scan()?;
        }
        let mut keep: HashSet<Vec<u8>> = HashSet::with_capacity(valid.len() * 2);
        for (id, ifname) in valid {
            keep.insert(owner_key(id, ifname));
            keep.insert(legacy_key(id));
        }
        let mut drop: Vec<IpAddr> = self
            .files
            .iter()
            .filter(|(_, k)| {
                !k.as_ref()
                    .and_then(|k| k.content.as_ref())
                    .is_some_and(|c| !c.is_empty() && keep.contains(c))
            })
            .map(|(ip, _)| *ip)
            .collect();
        drop.sort();
        self.remove_all(&drop)?;
        Ok(drop)
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.drop_claim_tmp();
        if let Err(e) = self.index.save(self.store, &self.files, self.full) {
            log::debug!("cannot write {}: {e}", self.index.path().display());
        }
        log::debug!(
            "{}: index used: {}, listed: {}, files read: {}, stale temp files removed: {}",
            self.store.dir.display(),
            self.stats.index_used,
            self.stats.listed,
            self.stats.files_read,
            self.stats.stale_removed
        );
        self.store.unlock();
    }
}

impl allocator::Store for Session<'_> {
    fn reserve(
        &mut self,
        id: &str,
        ifname: &str,
        ip: IpAddr,
        set: usize,
    ) -> Result<bool, CniError> {
        if !self.claim(id, ifname, ip)? {
            return Ok(false);
        }
        if let Err(e) = self.set_last_reserved(set, ip) {
            // Do not keep an address the caller will not know it holds.
            let _ = self.remove(ip.to_canonical());
            return Err(e);
        }
        Ok(true)
    }

    fn last_reserved_ip(&mut self, set: usize) -> Option<IpAddr> {
        self.last_reserved(set)
    }

    fn owned(&mut self, id: &str, ifname: &str) -> Result<Vec<IpAddr>, CniError> {
        Ok(self.owned_by(id, ifname))
    }

    fn unreserve(&mut self, ips: &[IpAddr]) -> Result<(), CniError> {
        self.remove_all(ips)
    }
}

#[cfg(test)]
mod tests;
