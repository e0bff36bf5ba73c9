//! The fast path: a cache of who owns what, so that an ADD need not read
//! every reservation file. Correctness never rests on it (below). It is
//! all here: the file's format, when it is trusted, and the session's
//! side of it ([`Session::start`], `will_change`, `index_candidates`,
//! `list_names`, `save_index`). Deleting it leaves the reference's way,
//! every session reading everything: `start` becomes [`Session::scan`],
//! `will_change` a flag, no candidates, and the session's index fields
//! (`index_path`, `index`, `index_file`, `appended`, `names_digest`,
//! `heal`) and [`Store::probe_write`]'s restamp go.
//!
//! # How
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
//!
//! # What it saves
//! Counted on one ADD and one DEL of a release build, in a network
//! directory holding n reservations (the Go plugin's files, the index warm
//! from the previous command), against the same build with the cache
//! unwritable (a read-only tmpfs on `/run/cni-rcni`: every session reads
//! everything, as without this module). Instructions (callgrind) /
//! system calls (`strace -f -c`):
//!
//! | n | ADD with | ADD without | DEL with | DEL without |
//! |---|---|---|---|---|
//! | 0 | 158k / 72 | 138k / 64 | 136k / 57 | 120k / 50 |
//! | 10 | 166k / 67 | 198k / 104 | 235k / 102 | 179k / 89 |
//! | 250 | 206k / 67 | 1,706k / 1,068 | 2,402k / 1,066 | 1,688k / 1,053 |
//!
//! So it pays on ADD as soon as the directory holds a few reservations
//! (8x fewer instructions and 16x fewer system calls at 250; ADD's cost
//! no longer grows with the store), and costs on an empty directory
//! (+15%, 8 system calls: the cache's directory, file and stamp) and on
//! DEL, which reads everything anyway and then rewrites the index
//! (+31% at 10, +42% at 250). The bench's "host-local ADD /22 1000" row
//! rests on it: 1.26 ms with it, 17.1 ms without (the same build, median
//! of 41 interleaved runs on the 2-core development VM); its "ADD /24
//! empty" row pays for it, 0.348 against 0.324 ms (+7%).

use super::{Known, Session, Store, Sync, io_err, reserved_ips};
use cni_skel::CniError;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where the ownership caches live, one file per network directory: under
/// `/run`, a tmpfs that a reboot clears, like the containers whose
/// addresses they index. Created mode 0700.
pub const CACHE_DIR: &str = "/run/cni-rcni/host-local";
pub(super) const INDEX_MAGIC: &str = "rcni-index v3";
/// The hash field of an empty or unreadable file's index line: not hex,
/// so no owner's hash ever matches it.
pub(super) const NO_OWNER_HASH: &str = "----------------";

/// FNV-1a, 64 bits: stable across runs (the index is on disk).
pub(super) fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The directory's identity and last change: (mtime s, mtime ns, inode).
pub(super) type Stamp = (i64, i64, u64);

pub(super) fn dir_stamp(dir: &Path) -> std::io::Result<Stamp> {
    let m = fs::metadata(dir)?;
    Ok((m.mtime(), m.mtime_nsec(), m.ino()))
}

/// The name of the cache of the directory with device `dev` and inode
/// `ino`: no two directories that exist at the same time share both. (A
/// cache left by a removed directory whose numbers are reused is not
/// trusted: its stamp holds that directory's mtime.)
pub(super) fn cache_name(dev: u64, ino: u64) -> String {
    format!("{dev:x}-{ino:x}")
}

/// The ownership cache of the network directory `dir`, under [`CACHE_DIR`].
pub fn cache_file(dir: &Path) -> std::io::Result<PathBuf> {
    let m = fs::metadata(dir)?;
    Ok(Path::new(CACHE_DIR).join(cache_name(m.dev(), m.ino())))
}

/// What an index header says about the directory, besides its stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settled {
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
pub(super) struct NamesDigest {
    count: u64,
    sum: u64,
}

impl NamesDigest {
    pub(super) fn add(&mut self, name: &[u8]) {
        self.count = self.count.wrapping_add(1);
        self.sum = self.sum.wrapping_add(fnv(name));
    }

    pub(super) fn remove(&mut self, name: &[u8]) {
        self.count = self.count.wrapping_sub(1);
        self.sum = self.sum.wrapping_sub(fnv(name));
    }

    /// The digest of the names in `dir`, from one listing (no `stat`, no
    /// allocation per name).
    pub(super) fn of_listing(dir: &Path) -> std::io::Result<NamesDigest> {
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
pub(super) fn looks_like_address(name: &[u8]) -> bool {
    name.first().is_some_and(|c| *c != b'.')
        && name
            .iter()
            .all(|c| c.is_ascii_hexdigit() || *c == b'.' || *c == b':')
}

/// The fixed-size first line of the index. A zero stamp means "not to be
/// trusted" (a session is changing the directory, or died doing so).
pub(super) fn header(stamp: Option<(Stamp, Settled, NamesDigest)>) -> String {
    let ((s, ns, ino), settled, names) =
        stamp.unwrap_or(((0, 0, 0), Settled::No, NamesDigest::default()));
    let flag = match settled {
        Settled::Yes => 's',
        Settled::No => 'n',
    };
    let (count, sum) = (names.count, names.sum);
    format!("{INDEX_MAGIC} {s:020} {ns:09} {ino:020} {flag} {count:020} {sum:016x}\n")
}

pub(super) fn parse_header(text: &str) -> Option<(Stamp, Settled, NamesDigest)> {
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
pub(super) fn stamp_settles(dir: &Path, stamp: Stamp) -> Settled {
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
pub(super) fn kernel_has_multigrain_timestamps() -> bool {
    nix::sys::utsname::uname()
        .is_ok_and(|uts| release_has_multigrain_timestamps(&uts.release().to_string_lossy()))
}

/// Whether a kernel release (`uname -r`: "6.1.0-28-amd64") is 6.13 or later.
pub(super) fn release_has_multigrain_timestamps(release: &str) -> bool {
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
pub(super) fn index_line(content: Option<&[u8]>, name: &str) -> String {
    match content.filter(|c| !c.is_empty()) {
        Some(c) => format!("{:016x} {name}\n", fnv(c)),
        None => format!("{NO_OWNER_HASH} {name}\n"),
    }
}

/// An index that was trusted before a change that touches no reservation
/// (STATUS's named probe file), to be restamped after it.
pub(super) struct Trusted {
    path: PathBuf,
    settled: Settled,
    names: NamesDigest,
}

/// The store's side of the index.
impl Store {
    /// Tests: decide [`Settled`] as `settled` rather than by the clock.
    #[cfg(test)]
    pub(super) fn assume_settled(mut self, settled: Settled) -> Store {
        self.settling = Some(settled);
        self
    }

    /// Whether the directory's mtime `stamp`, just read, settles whether
    /// it changed later ([`stamp_settles`]).
    pub(super) fn settles(&self, stamp: Stamp) -> Settled {
        self.settling
            .unwrap_or_else(|| stamp_settles(&self.dir, stamp))
    }

    /// The index, if its stamp is the directory's now.
    pub(super) fn trusted_index(&self) -> Option<Trusted> {
        let index_path = fs::metadata(&self.dir)
            .map(|m| self.cache_dir.join(cache_name(m.dev(), m.ino())))
            .ok();
        let before = dir_stamp(&self.dir).ok();
        // The trusted index's header: whether its stamp settled things.
        let (settled, names) = index_path.as_ref().and_then(|p| {
            fs::read(p)
                .ok()
                .and_then(|b| parse_header(&String::from_utf8_lossy(&b)))
                .filter(|(s, ..)| Some(*s) == before)
                .map(|(_, settled, names)| (settled, names))
        })?;
        Some(Trusted {
            path: index_path?,
            settled,
            names,
        })
    }

    /// Stamps `index` with the directory's mtime after a change that left
    /// every reservation as it was; an unsettled stamp stays unsettled (the
    /// names are compared).
    pub(super) fn restamp(&self, index: Trusted) {
        let restamp = OpenOptions::new()
            .write(true)
            .open(&index.path)
            .and_then(|f| {
                let stamp = dir_stamp(&self.dir)?;
                let settled = match index.settled {
                    Settled::Yes => self.settles(stamp),
                    Settled::No => Settled::No,
                };
                f.write_all_at(header(Some((stamp, settled, index.names))).as_bytes(), 0)
            });
        if let Err(e) = restamp {
            log::debug!("cannot restamp {}: {e}", index.path.display());
        }
    }
}

/// The session's side of the index: where it is kept and how it is
/// brought up to date.
impl Session<'_> {
    pub(super) fn start(&mut self, sync: Sync) -> Result<(), CniError> {
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

    /// Lists the names only (a fast session meeting many taken candidates).
    pub(super) fn list_names(&mut self) {
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
    pub(super) fn will_change(&mut self) {
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

    /// The addresses the index names for the owner text `key` (by its
    /// hash): candidates, each to be verified by reading its file.
    pub(super) fn index_candidates(&self, key: &[u8]) -> Vec<IpAddr> {
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
        candidates
    }

    /// Opens (creates) the index file, and the cache directory (0700) if
    /// missing.
    pub(super) fn open_index(&self) -> std::io::Result<File> {
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

    /// Brings the index up to date: a full session rewrites it, a fast one
    /// appends its new lines; then the stamp is set to the directory's
    /// mtime after every change. A full session that leaves no reservation
    /// (the last DEL) removes it instead: nothing of the network stays
    /// behind (the next ADD lists the near-empty directory and writes a
    /// new one).
    pub(super) fn save_index(&mut self) -> std::io::Result<()> {
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
