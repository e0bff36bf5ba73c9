//! The on-disk store, in the reference's `backend/disk` format, so that the
//! Go plugin and this one can share a network directory:
//!
//! | file | content |
//! |---|---|
//! | `<ip>` | `<containerID>\r\n<ifname>` (legacy files: `<containerID>`) |
//! | `last_reserved_ip.<set>` | the address last handed out from that set |
//! | `lock` | empty; `flock(LOCK_EX)` around every read-modify-write |
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
//! it). ADD makes that file before it takes the lock
//! ([`Store::prepare_claim`]): allocating the inode is the costliest step
//! of a claim, and an unnamed file changes nothing another process sees.
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
//! next session: see the stamp below). Their names are not addresses, so
//! neither the Go plugin nor GC takes them for reservations.
//!
//! # Fast path
//! Knowing who owns what needs the content of every reservation file: the
//! reference reads them all on every ADD, DEL and CHECK, so its ADD grows
//! with the store. This store keeps a cache, the index: a fixed-size
//! header holding the directory's mtime (and inode) as of the last write,
//! whether that stamp settles things and a digest of the directory's
//! names (below), then one line per
//! reservation file, `<hash of content> <address>` (`-` for the hash of an
//! empty or unreadable file). It is the file `<CACHE_DIR>/<dev>-<ino>`
//! (see [`cache_file`]), outside the network directory, which holds only
//! what the Go plugin holds there. When it cannot be read or written (a
//! read-only `/run`, another user), every session reads everything, as the
//! reference does, without an error. The last DEL (a full session that
//! leaves no reservation) removes it.
//!
//! An ADD whose index header matches the directory's current mtime trusts
//! the index: one read of the index, a substring search for the owner's
//! hash, a read of each hit to verify it, then `link` attempts from the
//! round-robin position (`EEXIST` = taken; after a few taken candidates in
//! a row the names are listed once, to skip the rest in memory). New lines
//! are appended and the header restamped at the end. Before its first
//! change a session zeroes the stamp, so a process killed half-way leaves
//! an index that the next session will not trust.
//!
//! A matching mtime proves that nothing changed only if any change after
//! the stamp was taken would have moved it. Kernels before 6.13 stamp
//! changes with a coarse clock (one tick, 1-10 ms), so a reservation made
//! by another writer (the Go plugin, an admin) right after this plugin's
//! last write usually keeps the mtime it stamped. The header therefore
//! says whether its stamp *settles* it ([`stamp_settles`]: multigrain
//! timestamps, 6.13+ on ext4, xfs, btrfs and tmpfs, or a stamp a second
//! old), and holds a digest of the directory's names (how many look like
//! addresses, and the sum of their hashes). If the stamp does not settle
//! it, the ADD also lists the directory (names only, no file read) and
//! trusts the index only if the names add up to the same digest. What that
//! cannot see is a foreign writer removing a reservation and making the
//! same address anew for another owner, both within that tick, on such a
//! kernel.
//!
//! When the stamp does not match (the Go plugin or anyone else changed the
//! directory, a crash, no index yet), or the names differ, or for DEL and
//! GC, the session reads every file, as the reference does, and rewrites
//! the index.
//!
//! Correctness never rests on the index: claims are exclusive (`link`),
//! every hit is verified by reading the file, DEL and GC read everything,
//! and CHECK reads everything before failing. What the index can get wrong
//! is only ADD's "this attachment already has an address" error, and only
//! in the case above.

use crate::allocator;
use cni_skel::CniError;
use cni_skel::error::code;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Name of the lock file, as the reference names it.
pub const LOCK_FILE: &str = "lock";
/// Prefix of the per-set round-robin position files.
pub const LAST_RESERVED_PREFIX: &str = "last_reserved_ip.";
/// Prefix of named temp files (never an address, so never a reservation),
/// made only where `O_TMPFILE` is not supported.
pub const TMP_PREFIX: &str = ".rcni-tmp-";
/// Where the ownership caches live, one file per network directory: under
/// `/run`, a tmpfs that a reboot clears, like the containers whose
/// addresses they index. Created mode 0700.
pub const CACHE_DIR: &str = "/run/cni-rcni/host-local";
/// The ownership cache that earlier versions kept in the network
/// directory; a writing session removes it.
const OLD_INDEX_FILE: &str = ".rcni-index";
const INDEX_MAGIC: &str = "rcni-index v3";
/// The hash field of an empty or unreadable file's index line: not hex,
/// so no owner's hash ever matches it.
const NO_OWNER_HASH: &str = "----------------";
/// Taken candidates in a row after which an ADD lists the directory.
const LIST_AFTER_TAKEN: u32 = 8;

/// Overwrites the regular file `path` with `data` in one `pwrite` at offset
/// 0, if it exists and holds no more than `data.len()` bytes (so nothing of
/// the old text can remain). `false` when that cannot be done; the caller
/// then replaces the file. A symlink is not followed (`O_NOFOLLOW`): the
/// caller replaces it with a file of its own rather than write wherever it
/// points.
fn overwrite_if_not_shorter(path: &Path, data: &[u8]) -> bool {
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

fn io_err(what: impl std::fmt::Display, path: &Path, e: std::io::Error) -> CniError {
    CniError::new(
        code::IO_FAILURE,
        format!("{what} {}: {e}", path.display()),
        "",
    )
}

/// Go's `strings.TrimSpace` for the ASCII whitespace that can occur here.
fn trim(b: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = b.iter().position(|c| !ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !ws(c)).map_or(start, |p| p + 1);
    b.get(start..end).unwrap_or_default()
}

/// The content of a reservation file for `(id, ifname)`.
pub fn owner_key(id: &str, ifname: &str) -> Vec<u8> {
    let mut k = trim(id.as_bytes()).to_vec();
    k.extend_from_slice(b"\r\n");
    k.extend_from_slice(ifname.as_bytes());
    k
}

/// The content of a legacy reservation file (container ID only).
pub fn legacy_key(id: &str) -> Vec<u8> {
    trim(id.as_bytes()).to_vec()
}

/// FNV-1a, 64 bits: stable across runs (the index is on disk).
fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The directory's identity and last change: (mtime s, mtime ns, inode).
type Stamp = (i64, i64, u64);

fn dir_stamp(dir: &Path) -> std::io::Result<Stamp> {
    let m = fs::metadata(dir)?;
    Ok((m.mtime(), m.mtime_nsec(), m.ino()))
}

/// The name of the cache of the directory with device `dev` and inode
/// `ino`: no two directories that exist at the same time share both. (A
/// cache left by a removed directory whose numbers are reused is not
/// trusted: its stamp holds that directory's mtime.)
fn cache_name(dev: u64, ino: u64) -> String {
    format!("{dev:x}-{ino:x}")
}

/// The ownership cache of the network directory `dir`, under [`CACHE_DIR`].
pub fn cache_file(dir: &Path) -> std::io::Result<PathBuf> {
    let m = fs::metadata(dir)?;
    Ok(Path::new(CACHE_DIR).join(cache_name(m.dev(), m.ino())))
}

/// Errors of `open(O_TMPFILE)` that mean "not supported here" (the file
/// system, or a kernel older than 3.11, which fails with `EISDIR`).
fn tmpfile_unsupported(e: &std::io::Error) -> bool {
    matches!(
        nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0)),
        nix::errno::Errno::EOPNOTSUPP | nix::errno::Errno::EISDIR | nix::errno::Errno::EINVAL
    )
}

/// A new file with no name in `dir` (`O_TMPFILE`), mode 0600, holding `data`.
fn unnamed_file(dir: &Path, data: &[u8]) -> std::io::Result<File> {
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
fn link_unnamed(f: &File, target: &Path) -> std::io::Result<()> {
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

/// What an index header says about the directory, besides its stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    /// Any later change to the directory moves its mtime away from the
    /// stamp: a matching stamp proves that nothing changed.
    Yes,
    /// The stamp was taken within the mtime's granularity of its change:
    /// a change right after it may have kept the same mtime, so a matching
    /// stamp also needs the directory's names to match the index.
    No,
}

/// What the names of a directory's reservation files add up to: how many
/// names look like addresses ([`looks_like_address`]), and the wrapping sum
/// of their hashes. Order-free, so a listing is checked against it in one
/// pass, with no parsing and no set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct NamesDigest {
    count: u64,
    sum: u64,
}

impl NamesDigest {
    fn add(&mut self, name: &[u8]) {
        self.count = self.count.wrapping_add(1);
        self.sum = self.sum.wrapping_add(fnv(name));
    }

    fn remove(&mut self, name: &[u8]) {
        self.count = self.count.wrapping_sub(1);
        self.sum = self.sum.wrapping_sub(fnv(name));
    }

    /// The digest of the names in `dir`, from one listing (no `stat`, no
    /// allocation per name).
    fn of_listing(dir: &Path) -> std::io::Result<NamesDigest> {
        use nix::fcntl::OFlag;
        let mut d = nix::dir::Dir::open(
            dir,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        let mut digest = NamesDigest::default();
        for entry in d.iter() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if looks_like_address(name) {
                digest.add(name);
            }
        }
        Ok(digest)
    }
}

/// Whether a directory entry's name may be an address: only hex digits,
/// dots and colons, not starting with a dot (`.`, `..`). Cheaper than
/// parsing; [`NamesDigest`] counts these names, whether they parse or
/// not, the same way on every path.
fn looks_like_address(name: &[u8]) -> bool {
    name.first().is_some_and(|c| *c != b'.')
        && name
            .iter()
            .all(|c| c.is_ascii_hexdigit() || *c == b'.' || *c == b':')
}

/// The fixed-size first line of the index. A zero stamp means "not to be
/// trusted" (a session is changing the directory, or died doing so).
fn header(stamp: Option<(Stamp, Settled, NamesDigest)>) -> String {
    let ((s, ns, ino), settled, names) =
        stamp.unwrap_or(((0, 0, 0), Settled::No, NamesDigest::default()));
    let flag = match settled {
        Settled::Yes => 's',
        Settled::No => 'n',
    };
    let (count, sum) = (names.count, names.sum);
    format!("{INDEX_MAGIC} {s:020} {ns:09} {ino:020} {flag} {count:020} {sum:016x}\n")
}

fn parse_header(text: &str) -> Option<(Stamp, Settled, NamesDigest)> {
    let line = text.get(..header(None).len())?;
    let rest = line.strip_prefix(INDEX_MAGIC)?.strip_suffix('\n')?;
    let mut f = rest.split_ascii_whitespace();
    let stamp: Stamp = (
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
    );
    let settled = match f.next()? {
        "s" => Settled::Yes,
        "n" => Settled::No,
        _ => return None,
    };
    let names = NamesDigest {
        count: f.next()?.parse().ok()?,
        sum: u64::from_str_radix(f.next()?, 16).ok()?,
    };
    (stamp != (0, 0, 0)).then_some((stamp, settled, names))
}

/// Whether the directory `dir`, whose mtime is `stamp`'s and was just read
/// (`stat`), will show any later change as a new mtime.
///
/// A kernel stamps a change with its coarse clock (`CLOCK_REALTIME_COARSE`,
/// one tick: 1-10 ms), cut to the file system's granularity. Before 6.13
/// two changes within one tick get the same mtime, and a change made right
/// after this session's last one usually is within its tick. Since 6.13
/// ext4, xfs, btrfs and tmpfs have multigrain timestamps: once the times
/// have been read (`stat`), the next change gets a fine-grained, later one.
///
/// So the stamp settles the question on one of those file systems (local:
/// their times come from this kernel's clock, unlike NFS's) when
/// - the kernel is 6.13 or later and the mtime has nanoseconds (the file
///   system keeps more than seconds), or
/// - the coarse clock is a second or more past the mtime: a later change
///   gets a later time, whatever the kernel and granularity.
///
/// Otherwise (older kernels, right after a change; other file systems) the
/// next session compares the names too.
fn stamp_settles(dir: &Path, stamp: Stamp) -> Settled {
    use nix::sys::statfs::{BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, FsType, TMPFS_MAGIC};
    // nix leaves XFS_SUPER_MAGIC out on musl.
    const XFS_SUPER_MAGIC: FsType = FsType(0x5846_5342);
    let multigrain_fs = nix::sys::statfs::statfs(dir).is_ok_and(|s| {
        [
            EXT4_SUPER_MAGIC,
            XFS_SUPER_MAGIC,
            BTRFS_SUPER_MAGIC,
            TMPFS_MAGIC,
        ]
        .contains(&s.filesystem_type())
    });
    if !multigrain_fs {
        return Settled::No;
    }
    let (mtime_s, mtime_ns, _) = stamp;
    if mtime_ns != 0 && kernel_has_multigrain_timestamps() {
        return Settled::Yes;
    }
    let Ok(now) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE) else {
        return Settled::No;
    };
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    if ns(now.tv_sec(), now.tv_nsec()) - ns(mtime_s, mtime_ns) >= 1_000_000_000 {
        Settled::Yes
    } else {
        Settled::No
    }
}

/// Whether the running kernel is 6.13 or later (multigrain timestamps).
fn kernel_has_multigrain_timestamps() -> bool {
    nix::sys::utsname::uname()
        .is_ok_and(|uts| release_has_multigrain_timestamps(&uts.release().to_string_lossy()))
}

/// Whether a kernel release (`uname -r`: "6.1.0-28-amd64") is 6.13 or later.
fn release_has_multigrain_timestamps(release: &str) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    matches!(
        (parts.next().flatten(), parts.next().flatten()),
        (Some(major), Some(minor)) if (major, minor) >= (6, 13)
    )
}

/// An index line: the hash of the file's trimmed content and its name.
/// Empty and unreadable files get a line too (a hash no owner can match),
/// so that the lines name every reservation file.
fn index_line(content: Option<&[u8]>, name: &str) -> String {
    match content.filter(|c| !c.is_empty()) {
        Some(c) => format!("{:016x} {name}\n", fnv(c)),
        None => format!("{NO_OWNER_HASH} {name}\n"),
    }
}

/// Opens a file of the network directory for reading, never through a
/// symlink (`O_NOFOLLOW`: a link planted there is unreadable, where the
/// reference reads whatever it points to) and never waiting for a writer
/// (`O_NONBLOCK`: a FIFO reads as empty instead of hanging the plugin
/// under the lock).
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    use nix::fcntl::OFlag;
    OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
}

/// Reads a reservation file's trimmed content; `None` when unreadable (a
/// symlink included: [`open_no_follow`]).
fn read_trimmed(path: &Path) -> Option<Vec<u8>> {
    let mut f = open_no_follow(path).ok()?;
    // One read() for the usual ~80-byte file (open, read, close: three
    // syscalls per file on a full scan); a short read of a regular file
    // is its end.
    let mut small = [0u8; 512];
    let n = f.read(&mut small).ok()?;
    let head = small.get(..n)?;
    if n < small.len() {
        return Some(trim(head).to_vec());
    }
    let mut buf = head.to_vec();
    f.read_to_end(&mut buf).ok()?;
    Some(trim(&buf).to_vec())
}

/// The addresses named in `dir`, from the listing alone. A missing
/// directory holds nothing.
pub fn reserved_ips(dir: &Path) -> Result<Vec<IpAddr>, CniError> {
    let rd = match fs::read_dir(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        r => r.map_err(|e| io_err("failed to list", dir, e))?,
    };
    let mut out = Vec::new();
    for de in rd {
        let de = de.map_err(|e| io_err("failed to list", dir, e))?;
        if let Some(ip) = de
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<IpAddr>().ok())
        {
            out.push(ip.to_canonical());
        }
    }
    Ok(out)
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

fn open_lock(dir: &Path) -> Result<File, CniError> {
    let path = dir.join(LOCK_FILE);
    match File::open(&path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == ErrorKind::NotFound => OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o750)
            .open(&path)
            .map_err(|e| io_err("failed to create lock file", &path, e)),
        Err(e) => Err(io_err("failed to open lock file", &path, e)),
    }
}

impl Store {
    /// Opens the network directory `dir` for writing, creating it (mode
    /// 0755, parents included) and its lock file as needed.
    pub fn create(dir: &Path) -> Result<Store, CniError> {
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

    /// Tests: decide [`Settled`] as `settled` rather than by the clock.
    #[cfg(test)]
    fn assume_settled(mut self, settled: Settled) -> Store {
        self.settling = Some(settled);
        self
    }

    /// Whether the directory's mtime `stamp`, just read, settles whether
    /// it changed later ([`stamp_settles`]).
    fn settles(&self, stamp: Stamp) -> Settled {
        self.settling
            .unwrap_or_else(|| stamp_settles(&self.dir, stamp))
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
        let lock = match File::open(&path) {
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
        let index_path = fs::metadata(&self.dir)
            .map(|m| self.cache_dir.join(cache_name(m.dev(), m.ino())))
            .ok();
        let before = dir_stamp(&self.dir).ok();
        // The trusted index's header: whether its stamp settled things.
        let trusted = index_path.as_ref().and_then(|p| {
            fs::read(p)
                .ok()
                .and_then(|b| parse_header(&String::from_utf8_lossy(&b)))
                .filter(|(s, ..)| Some(*s) == before)
                .map(|(_, settled, names)| (settled, names))
        });
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
        if let (Some(index_path), Some((settled, names))) = (index_path, trusted) {
            // The temp name changed no reservation: the lines still hold, and
            // an unsettled stamp stays unsettled (the names are compared).
            let restamp = OpenOptions::new()
                .write(true)
                .open(&index_path)
                .and_then(|f| {
                    let stamp = dir_stamp(&self.dir)?;
                    let settled = match settled {
                        Settled::Yes => self.settles(stamp),
                        Settled::No => Settled::No,
                    };
                    f.write_all_at(header(Some((stamp, settled, names))).as_bytes(), 0)
                });
            if let Err(e) = restamp {
                log::debug!("cannot restamp {}: {e}", index_path.display());
            }
        }
        self.unlock();
        r
    }

    /// The file of a reservation for `(id, ifname)`, made before the lock
    /// is taken: an unnamed file (`O_TMPFILE`) changes nothing that another
    /// process can see, and making it (allocating an inode) is the costliest
    /// step of a claim, so concurrent ADDs do it in parallel rather than one
    /// at a time under the lock. `None` where unnamed files cannot be made
    /// (the session then makes its temp file itself, as before).
    pub fn prepare_claim(&self, id: &str, ifname: &str) -> Option<PreparedClaim> {
        let key = owner_key(id, ifname);
        match unnamed_file(&self.dir, &key) {
            Ok(file) => Some(PreparedClaim { file, key }),
            Err(e) => {
                log::debug!("no unnamed file in {}: {e}", self.dir.display());
                None
            }
        }
    }

    /// Takes the lock and learns who owns what.
    pub fn session(&self, sync: Sync) -> Result<Session<'_>, CniError> {
        self.lock()?;
        let mut s = Session {
            store: self,
            index_path: PathBuf::new(),
            index: None,
            files: HashMap::new(),
            names: None,
            names_digest: NamesDigest::default(),
            appended: Vec::new(),
            changed: false,
            heal: false,
            index_file: None,
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

/// An unnamed file holding a reservation's content, made before the lock
/// ([`Store::prepare_claim`]); [`Session::adopt_claim`] hands it to the
/// session. Dropped unused, it is freed and leaves no trace.
pub struct PreparedClaim {
    file: File,
    key: Vec<u8>,
}

/// A temp file holding what is to be linked into place.
enum Tmp {
    /// `O_TMPFILE`: no name, freed when closed unless linked.
    Unnamed(File),
    /// A named temp file in the network directory (no `O_TMPFILE` there).
    Named(String),
}

/// The store under its lock. Dropping it removes its temp file, brings the
/// index up to date if the directory changed, and releases the lock.
pub struct Session<'a> {
    store: &'a Store,
    /// The index file, under the store's cache directory.
    index_path: PathBuf,
    /// The trusted index text (fast sessions).
    index: Option<String>,
    /// Fast: files this session read, made or removed (`None` = removed).
    /// Full: every reservation file.
    files: HashMap<IpAddr, Option<Known>>,
    /// Every address with a file, when the directory was listed.
    names: Option<HashSet<IpAddr>>,
    /// The directory's names, as of the last listing or the trusted index,
    /// and this session's changes since.
    names_digest: NamesDigest,
    /// Index lines to append (fast sessions).
    appended: Vec<(IpAddr, String)>,
    /// The directory was changed (and the index stamp zeroed).
    changed: bool,
    /// A full session found the index untrusted: rewrite it even if
    /// nothing changes.
    heal: bool,
    index_file: Option<File>,
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

    /// True when the session reads everything rather than trusting the index.
    fn full(&self) -> bool {
        self.index.is_none()
    }

    fn start(&mut self, sync: Sync) -> Result<(), CniError> {
        let dir = self.store.dir.clone();
        let m = fs::metadata(&dir).map_err(|e| io_err("failed to stat", &dir, e))?;
        let stamp: Stamp = (m.mtime(), m.mtime_nsec(), m.ino());
        self.index_path = self.store.cache_dir.join(cache_name(m.dev(), m.ino()));
        let trusted = fs::read(&self.index_path)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|text| match parse_header(&text) {
                Some((s, settled, names)) if s == stamp => Some((text, settled, names)),
                _ => None,
            });
        match (sync, trusted) {
            (Sync::Fast, Some((text, settled, names))) => {
                // An unsettled stamp may have missed a change made within its
                // tick: trusted only if the directory's names are still those
                // the index was written for (one listing, no file read).
                if settled == Settled::No {
                    self.stats.listed = true;
                    match NamesDigest::of_listing(&dir) {
                        Ok(listed) if listed == names => {}
                        Ok(_) => {
                            self.heal = true;
                            return self.scan();
                        }
                        Err(e) => return Err(io_err("failed to list", &dir, e)),
                    }
                }
                self.index = Some(text);
                self.names_digest = names;
                self.stats.index_used = true;
                Ok(())
            }
            (Sync::Full, Some((_, settled, names))) => {
                self.scan()?;
                self.heal = settled == Settled::No && self.names_digest != names;
                Ok(())
            }
            (_, None) => {
                self.heal = true;
                self.scan()
            }
        }
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
        self.names = Some(names);
        self.names_digest = digest;
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

    /// Called before the first change to the directory: zero the index
    /// stamp, so that a crash from here on makes the next session read
    /// everything.
    fn will_change(&mut self) {
        if self.changed {
            return;
        }
        self.changed = true;
        match self.open_index() {
            Ok(f) => {
                if let Err(e) = f.write_all_at(header(None).as_bytes(), 0) {
                    log::debug!("cannot write {}: {e}", self.index_path.display());
                }
                self.index_file = Some(f);
            }
            // The slow path for every session from here on: no error.
            Err(e) => log::debug!("cannot open {}: {e}", self.index_path.display()),
        }
    }

    /// Opens (creates) the index file, and the cache directory (0700) if
    /// missing.
    fn open_index(&self) -> std::io::Result<File> {
        let open = || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&self.index_path)
        };
        match open() {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&self.store.cache_dir)?;
                open()
            }
            r => r,
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
        let mut candidates: Vec<IpAddr> = Vec::new();
        if let Some(text) = &self.index {
            let needle = format!("\n{:016x} ", fnv(key));
            for (at, _) in text.match_indices(&needle) {
                let rest = text.get(at + needle.len()..).unwrap_or_default();
                // A line without its newline is torn: not trusted.
                if let Some((name, _)) = rest.split_once('\n')
                    && let Ok(ip) = name.parse::<IpAddr>()
                {
                    candidates.push(ip.to_canonical());
                }
            }
        }
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

    fn next_tmp(&mut self) -> String {
        self.tmp_seq += 1;
        format!("{TMP_PREFIX}{}-{}", std::process::id(), self.tmp_seq)
    }

    /// Writes `data` to a new temp file (0600): unnamed where `O_TMPFILE`
    /// works, else named.
    fn new_tmp(&mut self, data: &[u8]) -> Result<Tmp, CniError> {
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
    fn link_tmp(&mut self, tmp: Tmp, data: &[u8], target: &Path) -> (Tmp, std::io::Result<()>) {
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
    fn write_tmp(&mut self, data: &[u8]) -> Result<String, CniError> {
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

    /// Lets the next [`Session::claim`] for the prepared claim's owner link
    /// its file instead of making one under the lock.
    pub fn adopt_claim(&mut self, prepared: PreparedClaim) {
        self.drop_claim_tmp();
        self.claim_tmp = Some((Tmp::Unnamed(prepared.file), prepared.key));
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
        // A prepared file was made before the session: the stamp is
        // zeroed here, before the directory changes.
        self.will_change();
        let (tmp, linked) = self.link_tmp(tmp, &key, &target);
        self.claim_tmp = Some((tmp, key.clone()));
        match linked {
            Ok(()) => {
                // The temp name is spent: each reservation gets its own inode.
                self.drop_claim_tmp();
                self.names_digest.add(name.as_bytes());
                self.taken_in_a_row = 0;
                if !self.full() {
                    self.appended.push((ip, index_line(Some(&key), &name)));
                }
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

    fn drop_claim_tmp(&mut self) {
        if let Some((tmp, _)) = self.claim_tmp.take() {
            self.drop_tmp(tmp);
        }
    }

    /// Closes an unnamed temp file (freeing it unless linked), removes a
    /// named one.
    fn drop_tmp(&self, tmp: Tmp) {
        if let Tmp::Named(name) = tmp
            && let Err(e) = fs::remove_file(self.path(&name))
        {
            log::warn!("cannot remove temp file {name}: {e}");
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
    /// would leave the old text's tail, so it takes the slow path.
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
        let path = self.path(ip.to_string());
        let path = match self.files.get(&ip) {
            Some(Some(k)) => self.path(&k.name),
            _ => path,
        };
        match fs::remove_file(&path) {
            Ok(()) => {
                if let Some(name) = path.file_name() {
                    self.names_digest.remove(name.as_encoded_bytes());
                }
            }
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            Err(err) => return Err(io_err("failed to release", &path, err)),
        }
        if self.full() {
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
        if !self.full() {
            self.index = None;
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

    /// Brings the index up to date: a full session rewrites it, a fast one
    /// appends its new lines; then the stamp is set to the directory's
    /// mtime after every change. A full session that leaves no reservation
    /// (the last DEL) removes it instead: nothing of the network stays
    /// behind (the next ADD lists the near-empty directory and writes a
    /// new one).
    fn save_index(&mut self) -> std::io::Result<()> {
        if self.full() && !self.files.values().any(Option::is_some) {
            self.index_file = None;
            return match fs::remove_file(&self.index_path) {
                Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        if self.index_file.is_none() {
            self.will_change();
        }
        let Some(f) = self.index_file.take() else {
            return Ok(());
        };
        if self.full() {
            let mut lines: Vec<(&IpAddr, &Known)> = self
                .files
                .iter()
                .filter_map(|(ip, k)| k.as_ref().map(|k| (ip, k)))
                .collect();
            lines.sort_by_key(|(ip, _)| **ip);
            let mut text = header(None);
            for (_, k) in lines {
                text.push_str(&index_line(k.content.as_deref(), &k.name));
            }
            // Overwrite, then cut: truncating to zero first would make
            // ext4 flush the file on close (auto_da_alloc).
            f.write_all_at(text.as_bytes(), 0)?;
            f.set_len(text.len() as u64)?;
        } else {
            // Lines of addresses released again in this session (a failed
            // ADD) are left out.
            let lines: String = self
                .appended
                .iter()
                .filter(|(ip, _)| matches!(self.files.get(ip), Some(Some(_))))
                .map(|(_, line)| line.as_str())
                .collect();
            if !lines.is_empty() {
                let mut at = f.metadata()?.len();
                // Never glue a line to a torn one.
                if self.index.as_deref().is_some_and(|t| !t.ends_with('\n')) {
                    f.write_all_at(b"\n", at)?;
                    at += 1;
                }
                f.write_all_at(lines.as_bytes(), at)?;
            }
        }
        let stamp = dir_stamp(&self.store.dir)?;
        let settled = self.store.settles(stamp);
        f.write_all_at(
            header(Some((stamp, settled, self.names_digest))).as_bytes(),
            0,
        )
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.drop_claim_tmp();
        if (self.changed || self.heal)
            && let Err(e) = self.save_index()
        {
            log::debug!("cannot write {}: {e}", self.index_path.display());
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
