//! Host-wide locks of the plugins: empty files in a directory only root
//! can enter, taken with `flock` and waited for with a deadline.
//!
//! Plugins that read-modify-write shared state exclude each other with
//! these: portmap's and firewall's netfilter tables ([`named`]), vrf's and
//! sbr's devices, tables and rules in one container namespace ([`netns`]).
//! `flock` needs only a file descriptor opened for reading, so whoever can
//! open a lock file can hold it and stop every such plugin on the node.
//! Hence:
//!
//! - The files live in [`DIR`], mode 0700; each file is 0600 and opened
//!   with `O_NOFOLLOW`. The directories under `/run` are opened one by one
//!   relative to their parent, never through a symlink, and one that is
//!   not a directory of this user closed to others (a symlink, a file, a
//!   directory a user made first on a world-writable `/run`) is moved aside
//!   (`.<name>.untrusted-<pid>-<n>`, logged) and made anew.
//! - A namespace's lock is named by the namespace's device and inode, and
//!   the namespace file itself is never locked: nsfs files are 0444 (any
//!   user can open `/run/netns/<name>`, a container its own
//!   `/proc/self/ns/net`). Such a file stays after its release, as the
//!   named ones do: removing it cost a file's creation and unlinking on
//!   every call (sbr's ADD +15% CPU, DEL +15%, on this machine's /run),
//!   and they cannot pile up, because the kernel gives a new namespace the
//!   lowest free inode number: there are never more files than the most
//!   namespaces the node had at once (empty files, an inode each).
//! - No wait is unbounded: a lock not granted within [`timeout`] (30 s
//!   unless `RCNI_LOCK_TIMEOUT` says otherwise) is a CNI error, code 11
//!   (try again later), naming the file. An uncontended lock is one
//!   `flock(LOCK_NB)`. A contended one is tried again at each close of
//!   the lock file (inotify), which is how a holder releases it, with the
//!   deadline; no thread, no signal. It used to poll `try_lock` with a
//!   backoff (1 ms doubling to 10 ms): in a storm of 50 pods every waiter
//!   woke up to a hundred times a second, competing for the CPU with the
//!   holder, and the lock lay idle between a release and the next poll
//!   (issue 30: the firewall lock's waits were 20 times its holds).
//!   Polling stays as the fallback when no inotify watch can be had.
//!   Once the
//!   file exists, taking a lock and releasing it is four system calls
//!   (`openat2` refusing symlinks, a stat, flock, close) instead of
//!   eighteen walking the path one directory at a time and creating and
//!   removing the file.
//!
//! The timeout is an environment variable, not a config key, because the
//! locks are the node's, shared by every network and plugin that takes
//! them: one value for the node, set where the runtime is started, as
//! `RCNI_LOG` is.

use cni_skel::CniError;
use cni_skel::error::code;
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, OpenHow, ResolveFlag, openat, openat2, renameat};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, geteuid, unlinkat};
use std::fs::{File, TryLockError};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The directory the lock files live in.
pub const DIR: &str = "/run/cni-rcni/locks";
/// The trusted parent of [`DIR`]'s own directories.
const BASE: &str = "/run";
/// [`DIR`] under [`BASE`], one directory at a time.
const SUBDIRS: &[&str] = &["cni-rcni", "locks"];
/// The environment variable that sets the wait, in seconds (a decimal
/// number; 0 tries once).
pub const TIMEOUT_VAR: &str = "RCNI_LOCK_TIMEOUT";
/// The wait when [`TIMEOUT_VAR`] is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(10);
/// How long a watched waiter sleeps at most between two tries (see
/// `wait_until`): a release without a close is rare, a wake-up costs the
/// holder a share of the CPU in a storm.
const WATCHED_PAUSE: Duration = Duration::from_millis(100);
/// Tries at making one directory or file ours before giving up (each lost
/// only to someone replacing it again at once).
const ATTEMPTS: usize = 4;

/// A held lock: released when dropped.
#[derive(Debug)]
pub struct Lock {
    // Held for its flock, released when it closes.
    #[allow(dead_code)]
    file: File,
    path: PathBuf,
}

impl Lock {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        log::debug!("released {}", self.path.display());
    }
}

/// The node-wide lock `<DIR>/<name>.lock` (`name`: `portmap`, `firewall`).
///
/// `None` when [`DIR`] cannot be made at all (a read-only `/run`, a plugin
/// run by another user than root): then there is no one to exclude that
/// could be excluded, and the plugin goes on unlocked, logging it.
pub fn named(name: &str) -> Result<Option<Lock>, CniError> {
    take(
        Path::new(BASE),
        SUBDIRS,
        &format!("{name}.lock"),
        timeout()?,
    )
}

/// [`named`] taken shared (`flock(LOCK_SH)`): held at once by any number
/// of sharers, excluded by and excluding one [`named`] holder. For work
/// that commutes with every other sharer's and must only not interleave
/// with an exclusive holder's read-modify-write: a DEL that deletes its
/// own rules by kernel handle in one nf_tables transaction, beside the
/// text paths that rewrite whole chains (issue 30's DEL storm, where
/// every pod's DEL waited for the exclusive lock in turn). An exclusive
/// waiter is woken by each sharer's release, as by a holder's.
pub fn named_shared(name: &str) -> Result<Option<Lock>, CniError> {
    take_as(
        Path::new(BASE),
        SUBDIRS,
        &format!("{name}.lock"),
        timeout()?,
        Hold::Shared,
    )
}

/// The lock of the network namespace with device `dev` and inode `ino`
/// (`<DIR>/netns-<dev>-<ino>.lock`). `None` as for
/// [`named`].
pub fn netns(dev: u64, ino: u64) -> Result<Option<Lock>, CniError> {
    take(
        Path::new(BASE),
        SUBDIRS,
        &format!("netns-{dev}-{ino}.lock"),
        timeout()?,
    )
}

/// Takes the exclusive `flock` on `file` (the lock file at `path`, kept
/// where the caller must keep it), waiting at most [`timeout`].
pub fn wait(file: &File, path: &Path) -> Result<(), CniError> {
    wait_until(file, path, timeout()?, Hold::Exclusive)
}

/// How a lock is held: `flock`'s `LOCK_EX` or `LOCK_SH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    Exclusive,
    Shared,
}

/// How long a lock is waited for: [`TIMEOUT_VAR`] seconds, else
/// [`DEFAULT_TIMEOUT`]. A value that is not a number of seconds is an
/// error (code 4) rather than a silent default.
pub fn timeout() -> Result<Duration, CniError> {
    parse_timeout(std::env::var_os(TIMEOUT_VAR))
}

fn parse_timeout(raw: Option<std::ffi::OsString>) -> Result<Duration, CniError> {
    let Some(raw) = raw.filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_TIMEOUT);
    };
    raw.to_str()
        .and_then(|s| decimal_seconds(s.trim()))
        .ok_or_else(|| {
            CniError::new(
                code::INVALID_ENV,
                format!("{TIMEOUT_VAR}={raw:?} is not a number of seconds"),
                "",
            )
        })
}

/// `<digits>[.<digits>]` seconds, to the nanosecond (further digits are
/// dropped). Written out rather than through `f64`: float parsing would
/// add its tables to every plugin that takes a lock.
fn decimal_seconds(s: &str) -> Option<Duration> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if secs.is_empty() && frac.is_empty() || !digits(secs) || !digits(frac) {
        return None;
    }
    let secs = if secs.is_empty() {
        0
    } else {
        secs.parse().ok()?
    };
    let nanos = frac
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(9)
        .fold(0u32, |n, b| n * 10 + u32::from(b - b'0'));
    Some(Duration::new(secs, nanos))
}

/// Why the lock directory could not be had.
enum DirError {
    /// The system refused to make it (read-only, permission): no lock.
    Unusable(String),
    /// It could not be made ours: an error.
    Untrusted(String),
}

fn take(
    base: &Path,
    subdirs: &[&str],
    name: &str,
    timeout: Duration,
) -> Result<Option<Lock>, CniError> {
    take_as(base, subdirs, name, timeout, Hold::Exclusive)
}

fn take_as(
    base: &Path,
    subdirs: &[&str],
    name: &str,
    timeout: Duration,
    mode: Hold,
) -> Result<Option<Lock>, CniError> {
    let mut path = base.to_path_buf();
    subdirs.iter().for_each(|d| path.push(d));
    path.push(name);
    if let Some(file) = existing_file(&path) {
        return hold(file, path, timeout, mode).map(Some);
    }
    let dir = match private_dir(base, subdirs) {
        Ok(d) => d,
        Err(DirError::Unusable(why)) => {
            log::debug!("no lock {}: {why}", path.display());
            return Ok(None);
        }
        Err(DirError::Untrusted(why)) => return Err(CniError::new(code::IO_FAILURE, why, "")),
    };
    // Nothing removes or renames a lock file of ours in a directory only
    // we can write, so the file opened is the one every taker locks.
    let file = open_file(&dir, name, &path)?;
    hold(file, path, timeout, mode).map(Some)
}

/// Opens `base/subdirs…`, making each directory (0700) that is missing and
/// replacing each that is not ours.
fn private_dir(base: &Path, subdirs: &[&str]) -> Result<OwnedFd, DirError> {
    if let Some(dir) = established(base, subdirs) {
        return Ok(dir);
    }
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut dir = openat(AT_FDCWD, base, flags, Mode::empty())
        .map_err(|e| DirError::Unusable(format!("open {}: {e}", base.display())))?;
    let mut path = base.to_path_buf();
    for (i, name) in subdirs.iter().enumerate() {
        path.push(name);
        // The lock directory itself is closed to all; the ones above it
        // (shared with other state of ours) only to writers.
        let closed = if i + 1 == subdirs.len() { 0o077 } else { 0o022 };
        dir = child_dir(&dir, name, &path, closed)?;
    }
    Ok(dir)
}

/// The lock directory as every call after the first finds it, in three
/// system calls instead of nine: `openat2` of the whole path refusing any
/// symlink on the way, then the same checks [`private_dir`] makes, on the
/// directory and (through `..`, its real parent) on each above it up to
/// `base`. `None` (take the long way) for anything else, a kernel without
/// `openat2` included.
fn established(base: &Path, subdirs: &[&str]) -> Option<OwnedFd> {
    let mut path = base.to_path_buf();
    subdirs.iter().for_each(|d| path.push(d));
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let dir = openat2(AT_FDCWD, &path, how).ok()?;
    let leaf = fstat(&dir).ok()?;
    if foreign(&leaf, SFlag::S_IFDIR, 0o077).is_some() {
        return None;
    }
    let mut up = String::new();
    for _ in 1..subdirs.len() {
        up.push_str("../");
        let st = fstatat(&dir, up.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        if foreign(&st, SFlag::S_IFDIR, 0o022).is_some() {
            return None;
        }
    }
    Some(dir)
}

/// Why `st` is not a directory or file of ours whose mode has none of
/// the `closed` bits, if it is not.
fn foreign(st: &FileStat, kind: SFlag, closed: u32) -> Option<String> {
    let mode = st.st_mode & 0o7777;
    if st.st_mode & SFlag::S_IFMT.bits() != kind.bits() {
        Some("not a directory".to_string())
    } else if st.st_uid != euid() {
        Some(format!("owned by uid {}", st.st_uid))
    } else if mode & closed != 0 {
        Some(format!("mode {mode:04o}"))
    } else {
        None
    }
}

fn child_dir(parent: &OwnedFd, name: &str, path: &Path, closed: u32) -> Result<OwnedFd, DirError> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let unusable =
        |what: &str, e: Errno| DirError::Unusable(format!("{what} {}: {e}", path.display()));
    for _ in 0..ATTEMPTS {
        let why = match openat(parent, name, flags, Mode::empty()) {
            Ok(fd) => {
                let st = fstat(&fd).map_err(|e| unusable("stat", e))?;
                match foreign(&st, SFlag::S_IFDIR, closed) {
                    None => return Ok(fd),
                    Some(why) => why,
                }
            }
            Err(Errno::ENOENT) => {
                match mkdirat(parent, name, Mode::from_bits_truncate(0o700)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(unusable("create", e)),
                }
                continue;
            }
            // A symlink (O_NOFOLLOW) or anything else but a directory.
            Err(Errno::ELOOP | Errno::ENOTDIR) => "not a directory".to_string(),
            Err(e) => return Err(unusable("open", e)),
        };
        move_aside(parent, name, path, &why)?;
    }
    Err(DirError::Untrusted(format!(
        "{} is replaced as soon as it is made ours",
        path.display()
    )))
}

/// Renames the untrusted entry `parent/name` out of the way, for the
/// administrator to look at.
fn move_aside(parent: &OwnedFd, name: &str, path: &Path, why: &str) -> Result<(), DirError> {
    let aside = format!(
        ".{name}.untrusted-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    match renameat(parent, name, parent, aside.as_str()) {
        Ok(()) | Err(Errno::ENOENT) => {
            log::warn!(
                "{} was not ours ({why}): moved aside to {aside}",
                path.display()
            );
            Ok(())
        }
        Err(e) => Err(DirError::Untrusted(format!(
            "{} is not ours ({why}) and cannot be moved aside: {e}",
            path.display()
        ))),
    }
}

/// The effective uid, asked of the kernel once per process.
fn euid() -> u32 {
    static EUID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *EUID.get_or_init(|| geteuid().as_raw())
}

/// Opens (creates, 0600) the lock file `name` in `dir`, replacing an entry
/// that is not a file of ours closed to others.
fn open_file(dir: &OwnedFd, name: &str, path: &Path) -> Result<File, CniError> {
    let flags = OFlag::O_RDONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let failed = |what: &str, e: Errno| {
        CniError::new(
            code::IO_FAILURE,
            format!("failed to {what} lock file {}: {e}", path.display()),
            "",
        )
    };
    for _ in 0..ATTEMPTS {
        let why = match openat(dir, name, flags, Mode::from_bits_truncate(0o600)) {
            Ok(fd) => {
                let st = fstat(&fd).map_err(|e| failed("stat", e))?;
                match foreign(&st, SFlag::S_IFREG, 0o077) {
                    None => return Ok(File::from(fd)),
                    Some(why) => why,
                }
            }
            Err(Errno::ELOOP) => "a symlink".to_string(),
            Err(e) => return Err(failed("open", e)),
        };
        log::warn!("{} was not ours ({why}): replacing it", path.display());
        match unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(failed("replace", e)),
        }
    }
    Err(CniError::new(
        code::IO_FAILURE,
        format!("lock file {} keeps being replaced", path.display()),
        "",
    ))
}

/// Waits for the lock on `file` (at `path`) and holds it.
fn hold(file: File, path: PathBuf, timeout: Duration, mode: Hold) -> Result<Lock, CniError> {
    wait_until(&file, &path, timeout, mode)?;
    log::debug!("holding {} ({mode:?})", path.display());
    Ok(Lock { file, path })
}

/// The lock file as every call after its first finds it, in two system
/// calls: `openat2` of the whole path, refusing any symlink on the way and
/// creating nothing, then the check that it is a file of ours closed to
/// others. Such a file was made by [`open_file`] in a directory
/// [`private_dir`] made ours: only we can write there, nothing removes it,
/// and its one name is reachable only through that directory (so no one
/// else can link it elsewhere). `None` (take the long way) for anything
/// else, a kernel without `openat2` included.
fn existing_file(path: &Path) -> Option<File> {
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = openat2(AT_FDCWD, path, how).ok()?;
    let st = fstat(&fd).ok()?;
    foreign(&st, SFlag::S_IFREG, 0o077)
        .is_none()
        .then(|| File::from(fd))
}

fn lock_failed(path: &Path, e: std::io::Error) -> CniError {
    CniError::new(
        code::IO_FAILURE,
        format!("failed to lock {}: {e}", path.display()),
        "",
    )
}

/// Takes the lock on `file` at once when it is free; else waits until
/// `timeout` has passed for a close of the lock file (inotify's
/// `IN_CLOSE`, watched through the descriptor, so on the file locked
/// whatever its name is now), and tries again at each: a holder's release
/// is the close of its descriptor, by its drop or at its process's end.
/// Every [`WATCHED_PAUSE`] it tries anyway, for a holder that unlocks
/// before it closes (the Go host-local's `Unlock`, then `Close`). Polling
/// with a backoff when no watch can be had.
///
/// The clock is read only when the lock is contended: where the clock is
/// a system call (no vDSO, as under user-mode-linux) an uncontended lock
/// does not pay for it. No thread: a blocking `flock` on a thread of its
/// own, with the caller waiting on a channel with the deadline, woke as
/// fast, but its thread's code and thread-local storage (a mapping of its
/// own in every run under musl) made each plugin that locks 41-53 KB
/// larger.
fn wait_until(file: &File, path: &Path, timeout: Duration, mode: Hold) -> Result<(), CniError> {
    if taken(file, path, mode)? {
        return Ok(());
    }
    let start = Instant::now();
    // Watched before the next try: a close between the two is not lost.
    let watch = closes_of(file);
    if watch.is_none() {
        log::debug!("no inotify watch on {}; polling", path.display());
    }
    let mut backoff = Duration::from_millis(1);
    while !taken(file, path, mode)? {
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(timed_out(path, timeout));
        }
        let left = timeout - waited;
        match &watch {
            Some(watch) => next_close(watch, left.min(WATCHED_PAUSE))
                .map_err(|e| lock_failed(path, e.into()))?,
            None => {
                std::thread::sleep(backoff.min(left));
                backoff = (backoff * 2).min(MAX_PAUSE);
            }
        }
    }
    Ok(())
}

/// One `try_lock` (or `try_lock_shared`) of `file`: whether it is now
/// held.
fn taken(file: &File, path: &Path, mode: Hold) -> Result<bool, CniError> {
    let tried = match mode {
        Hold::Exclusive => file.try_lock(),
        Hold::Shared => file.try_lock_shared(),
    };
    match tried {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(lock_failed(path, e)),
    }
}

/// Sleeps until `watch` reports a close or `pause` has passed. The events
/// only wake the waiter (they are read and dropped): the lock is what is
/// tried after.
fn next_close(watch: &Inotify, pause: Duration) -> Result<(), Errno> {
    let ms = u16::try_from(pause.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(watch.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(ms.max(1))) {
        Ok(_) => {
            drop(watch.read_events());
            Ok(())
        }
        Err(Errno::EINTR) => Ok(()),
        Err(e) => Err(e),
    }
}

/// An inotify instance told of every close of `file`'s inode (through
/// `/proc/self/fd`, so it is the open file's, not whatever its path names
/// now). `None` where inotify cannot be had (the per-user limit of
/// instances reached, no /proc).
fn closes_of(file: &File) -> Option<Inotify> {
    let watch = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok()?;
    let fd = format!("/proc/self/fd/{}", file.as_raw_fd());
    watch.add_watch(fd.as_str(), AddWatchFlags::IN_CLOSE).ok()?;
    Some(watch)
}

fn timed_out(path: &Path, timeout: Duration) -> CniError {
    CniError::new(
        code::TRY_AGAIN_LATER,
        format!(
            "timed out after {:?} waiting for the lock {}",
            timeout,
            path.display()
        ),
        format!("another process holds it; {TIMEOUT_VAR} sets the wait in seconds"),
    )
}

#[cfg(test)]
mod tests;
