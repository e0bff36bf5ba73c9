//! The fast path: a cache of who owns what, so that an ADD need not read
//! every reservation file. Correctness never rests on it (below). It is
//! all here: the file's format, when it is trusted, and `Index`, the
//! session's one field for it, which the session asks for candidates and
//! tells of its changes. Deleting this module leaves the reference's way,
//! every session reading everything: the session's `index` field and its
//! calls (`Index::open` in `Session::start`, which then always scans;
//! `will_change`, `claimed`, `removed`, `listed`, `candidates` and `save`,
//! one line each) and [`Store::probe_write`]'s restamp go.
//!
//! # How
//! Knowing who owns what needs the content of every reservation file: the
//! reference reads them all on every ADD, DEL and CHECK, so its ADD grows
//! with the store. This store keeps a cache, the index: a fixed-size
//! header holding the directory's mtime (and inode) as of the last write,
//! whether that stamp settles things and a digest of the directory's
//! names (below), then one line per
//! reservation file, `<hash of content> <address>` (`-` for the hash of an
//! empty or unreadable file), and a removal line, `-` and the removed
//! file's line, for each file removed since the lines were last written
//! whole. It is the file `<CACHE_DIR>/<dev>-<ino>`
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
//! are appended and the header restamped at the end. An owner's
//! candidates are the addresses of its lines, less those its removal
//! lines cancel (counted, so an address taken and given back many times
//! by one attachment costs no read). Before its first
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
//! directory, a crash, no index yet), or the names differ, the session
//! reads every file, as the reference does, and rewrites the index.
//!
//! DEL and GC read every file too, whatever the index says, but where its
//! header was trusted (the stamp matches, and the names where it does not
//! settle) they only append a removal line per file they remove and
//! restamp it, as an ADD appends its line: the whole index is rewritten
//! only when the lines of removed files have grown it past twice its live
//! lines' size and 2 KiB (under steady ADD/DEL churn at n reservations,
//! about once every n/2 + 35 DELs; that DEL costs what every DEL cost
//! before). The crash rule is the ADD's: the stamp is zeroed before the
//! first file goes and written after the lines, so a DEL killed at any
//! point leaves an index the next session will not trust, and rewrites
//! (`kill9_host_local`, `dd_a_del_killed_while_changing_leaves_an_untrusted_index`).
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
//! | 0 | 145k / 69 | 136k / 60 | 124k / 51 | 120k / 48 |
//! | 10 | 150k / 61 | 196k / 100 | 188k / 96 | 177k / 87 |
//! | 250 | 190k / 61 | 1,706k / 1,064 | 1,684k / 1,060 | 1,671k / 1,051 |
//!
//! So it pays on ADD as soon as the directory holds a few reservations
//! (9x fewer instructions and 17x fewer system calls at 250; ADD's cost
//! no longer grows with the store), and costs on an empty directory
//! (+6%, 9 system calls: the cache's directory, file and stamp) and a
//! little on DEL, which reads everything anyway and then appends its
//! removal line and restamps (+4% at 0, +6% at 10, +0.8% at 250; 3 to 9
//! system calls: the index's open, header read and two header writes, the
//! line, the stamp's `stat`, `statfs` and `uname`). Until the removal
//! lines, DEL rewrote the whole index: 137k / 56, 236k / 101 and
//! 2,419k / 1,065 (+15%, +34%, +45% on DEL without the cache), and the
//! header's `format!` padding was 14% of a DEL's instructions (now
//! formatted by hand; with both, ADD went from 159k, 164k and 209k to
//! the figures above). The bench's "host-local ADD /22 1000" row
//! rests on it: 1.26 ms with it, 17.1 ms without (the same build, median
//! of 41 interleaved runs on the 2-core development VM); its "ADD /24
//! empty" row pays for it, 0.348 against 0.324 ms (+7%).

use super::{Known, Stats, Store, Sync, io_err};
use cni_skel::CniError;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::io::Read;
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

/// The length of the index's first line ([`header`]).
pub(super) const HEADER_LEN: usize = INDEX_MAGIC.len() + 21 + 10 + 21 + 2 + 21 + 17 + 1;

/// [`header`]`(None)`, written before every change.
pub(super) const UNTRUSTED_HEADER: &str = "rcni-index v3 00000000000000000000 000000000 00000000000000000000 n 00000000000000000000 0000000000000000\n";

/// The fixed-size first line of the index. A zero stamp means "not to be
/// trusted" (a session is changing the directory, or died doing so).
/// Formatted by hand: with `format!`'s padding, the two headers a DEL
/// writes were 14% of its instructions.
pub(super) fn header(stamp: Option<(Stamp, Settled, NamesDigest)>) -> String {
    let ((s, ns, ino), settled, names) =
        stamp.unwrap_or(((0, 0, 0), Settled::No, NamesDigest::default()));
    let flag = match settled {
        Settled::Yes => 's',
        Settled::No => 'n',
    };
    let mut h = String::with_capacity(HEADER_LEN);
    h.push_str(INDEX_MAGIC);
    for (value, width) in [
        (i128::from(s), 20),
        (i128::from(ns), 9),
        (i128::from(ino), 20),
    ] {
        h.push(' ');
        push_padded(&mut h, value, width, 10);
    }
    h.push(' ');
    h.push(flag);
    h.push(' ');
    push_padded(&mut h, i128::from(names.count), 20, 10);
    h.push(' ');
    push_padded(&mut h, i128::from(names.sum), 16, 16);
    h.push('\n');
    h
}

/// What `{v:0width$}` (radix 10) or `{v:0width$x}` (16) prints, for `v`
/// an `i64` or `u64`.
fn push_padded(out: &mut String, v: i128, width: usize, radix: u64) {
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    let mut rest = u64::try_from(v.unsigned_abs()).unwrap_or(u64::MAX);
    while rest > 0 && at > 0 {
        at -= 1;
        digits[at] = b"0123456789abcdef"[(rest % radix) as usize];
        rest /= radix;
    }
    let digits = digits.get(at..).unwrap_or_default();
    let mut pad = width.saturating_sub(digits.len());
    if v < 0 {
        out.push('-');
        pad = pad.saturating_sub(1);
    }
    out.push_str(ZEROS.get(..pad).unwrap_or(ZEROS));
    out.push_str(std::str::from_utf8(digits).unwrap_or_default());
}

const ZEROS: &str = "00000000000000000000";

pub(super) fn parse_header(text: &str) -> Option<(Stamp, Settled, NamesDigest)> {
    let line = text.get(..HEADER_LEN)?;
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
    let mut line = String::with_capacity(NO_OWNER_HASH.len() + name.len() + 2);
    match content.filter(|c| !c.is_empty()) {
        Some(c) => push_padded(&mut line, i128::from(fnv(c)), 16, 16),
        None => line.push_str(NO_OWNER_HASH),
    }
    line.push(' ');
    line.push_str(name);
    line.push('\n');
    line
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

/// A session's index: what it trusted of the file, and what it will
/// write there. The session asks it for candidates ([`Index::candidates`])
/// and tells it of each change ([`Index::will_change`] before the first,
/// [`Index::claimed`], [`Index::removed`], [`Index::listed`]); it brings
/// the file up to date when the session ends ([`Index::save`]).
#[derive(Debug, Default)]
pub(super) struct Index {
    /// The index file, under the store's cache directory.
    path: PathBuf,
    /// The file, open from the start when it exists (read and write where
    /// allowed), else once the directory changes.
    file: Option<File>,
    /// Fast sessions: the trusted text, whose lines give the candidates.
    text: Option<String>,
    /// A full session: what the header said when its stamp matched
    /// (whether it settled things, the names), to be checked against the
    /// listing ([`Index::listed`]).
    header: Option<(Settled, NamesDigest)>,
    /// The file's lines name every reservation file (and perhaps stale
    /// ones of released addresses): appending this session's lines and a
    /// new stamp brings it up to date. Otherwise it is rewritten.
    lines_hold: bool,
    /// The directory's names, as of the trusted header or the last
    /// listing, and this session's changes since.
    names: NamesDigest,
    /// Lines of this session's claims, to append.
    appended: Vec<(IpAddr, String)>,
    /// The stamp is zeroed: the directory is being changed.
    changed: bool,
}

/// Lines of released addresses an index may carry before a full session
/// rewrites it: its size may grow to twice its live lines' and this much.
const STALE_SLACK: u64 = 2048;

impl Index {
    /// Opens `store`'s index and says what it can be trusted with; `None`
    /// text (not [`Index::trusted`]) when the session must read everything.
    pub(super) fn open(store: &Store, sync: Sync, stats: &mut Stats) -> Result<Index, CniError> {
        let dir = &store.dir;
        let m = fs::metadata(dir).map_err(|e| io_err("failed to stat", dir, e))?;
        let stamp: Stamp = (m.mtime(), m.mtime_nsec(), m.ino());
        let mut index = Index {
            path: store.cache_dir.join(cache_name(m.dev(), m.ino())),
            ..Index::default()
        };
        let file = match OpenOptions::new().read(true).write(true).open(&index.path) {
            Err(e) if e.kind() != ErrorKind::NotFound => File::open(&index.path),
            r => r,
        };
        let Ok(file) = file else {
            return Ok(index);
        };
        // A fast session reads the lines; a full one only the header.
        let mut bytes = Vec::new();
        let read = match sync {
            Sync::Fast => (&file).read_to_end(&mut bytes).map(|_| ()),
            Sync::Full => {
                bytes.resize(HEADER_LEN, 0);
                file.read_exact_at(&mut bytes, 0)
            }
        };
        let text = read.ok().and_then(|()| String::from_utf8(bytes).ok());
        let trusted = text
            .as_deref()
            .and_then(parse_header)
            .filter(|(s, ..)| *s == stamp);
        index.file = Some(file);
        match (sync, trusted) {
            (Sync::Fast, Some((_, settled, names))) => {
                // An unsettled stamp may have missed a change made within its
                // tick: trusted only if the directory's names are still those
                // the index was written for (one listing, no file read).
                if settled == Settled::No {
                    stats.listed = true;
                    match NamesDigest::of_listing(dir) {
                        Ok(listed) if listed == names => {}
                        Ok(_) => return Ok(index),
                        Err(e) => return Err(io_err("failed to list", dir, e)),
                    }
                }
                index.text = text;
                index.names = names;
                index.lines_hold = true;
                stats.index_used = true;
            }
            (Sync::Full, Some((_, settled, names))) => index.header = Some((settled, names)),
            (_, None) => {}
        }
        Ok(index)
    }

    /// True when the session may trust the index's lines for candidates
    /// rather than reading every file.
    pub(super) fn trusted(&self) -> bool {
        self.text.is_some()
    }

    /// The session listed the directory and read every file (`digest`: its
    /// names): a full session's lines hold if its header said what the
    /// directory holds.
    pub(super) fn listed(&mut self, digest: NamesDigest) {
        if let Some((settled, names)) = self.header.take() {
            self.lines_hold = settled == Settled::Yes || names == digest;
        }
        self.text = None;
        self.names = digest;
    }

    /// The session made the reservation file `name` of `ip` for `key`.
    pub(super) fn claimed(&mut self, ip: IpAddr, name: &str, key: &[u8]) {
        self.names.add(name.as_bytes());
        self.appended.push((ip, index_line(Some(key), name)));
    }

    /// The session removed the reservation file `name` of `ip`, whose
    /// content it knew (`Some`) or not. A line this session would have
    /// appended for it goes; otherwise a removal line (`-` and the file's
    /// line) will cancel the file's line. Unknown content leaves the line a
    /// stale candidate (each is verified by reading its file).
    pub(super) fn removed(&mut self, ip: IpAddr, name: &str, content: Option<Option<&[u8]>>) {
        self.names.remove(name.as_bytes());
        let mine = self
            .appended
            .iter()
            .position(|(a, line)| *a == ip && !line.starts_with('-'));
        match (mine, content) {
            (Some(at), _) => {
                self.appended.remove(at);
            }
            (None, Some(content)) => {
                let line = format!("-{}", index_line(content, name));
                self.appended.push((ip, line));
            }
            (None, None) => {}
        }
    }

    /// Called before the first change to the directory: zero the index
    /// stamp, so that a crash from here on makes the next session read
    /// everything.
    pub(super) fn will_change(&mut self, cache_dir: &Path) {
        if self.changed {
            return;
        }
        self.changed = true;
        if self.file.is_none() {
            match self.create(cache_dir) {
                Ok(f) => self.file = Some(f),
                // The slow path for every session from here on: no error.
                Err(e) => log::debug!("cannot open {}: {e}", self.path.display()),
            }
        }
        if let Some(f) = &self.file
            && let Err(e) = f.write_all_at(UNTRUSTED_HEADER.as_bytes(), 0)
        {
            log::debug!("cannot write {}: {e}", self.path.display());
        }
    }

    /// The addresses the index names for the owner text `key` (by its
    /// hash), less those its removal lines cancel: candidates, each to be
    /// verified by reading its file.
    pub(super) fn candidates(&self, key: &[u8]) -> Vec<IpAddr> {
        let Some(text) = &self.text else {
            return Vec::new();
        };
        let needle = format!("{:016x} ", fnv(key));
        // (address, its lines less its removal lines)
        let mut held: Vec<(IpAddr, i32)> = Vec::new();
        for (at, _) in text.match_indices(needle.as_str()) {
            // A line starts after a newline; a removal line after a `-`.
            let count = match text.as_bytes().get(at.wrapping_sub(1)) {
                Some(b'\n') => 1,
                Some(b'-') if text.as_bytes().get(at.wrapping_sub(2)) == Some(&b'\n') => -1,
                _ => continue,
            };
            let rest = text.get(at + needle.len()..).unwrap_or_default();
            // A line without its newline is torn: not trusted.
            if let Some((name, _)) = rest.split_once('\n')
                && let Ok(ip) = name.parse::<IpAddr>()
            {
                let ip = ip.to_canonical();
                match held.iter_mut().find(|(a, _)| *a == ip) {
                    Some((_, n)) => *n += count,
                    None => held.push((ip, count)),
                }
            }
        }
        held.into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(ip, _)| ip)
            .collect()
    }

    /// Creates the index file, and the cache directory (0700) if missing.
    fn create(&self, cache_dir: &Path) -> std::io::Result<File> {
        let open = || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&self.path)
        };
        match open() {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(cache_dir)?;
                open()
            }
            r => r,
        }
    }

    /// Brings the index up to date when the session ends; `files` are the
    /// session's known files (every reservation file when `full`).
    ///
    /// Where the lines hold, this session's new lines are appended (a DEL
    /// appends nothing) and the stamp is set to the directory's mtime
    /// after every change. A full session rewrites the lines when they did
    /// not hold, or when released addresses' stale lines have made the file
    /// more than twice its live lines' size (and [`STALE_SLACK`]); one
    /// that leaves no reservation (the last DEL) removes the index instead:
    /// nothing of the network stays behind (the next ADD lists the
    /// near-empty directory and writes a new one).
    pub(super) fn save(
        &mut self,
        store: &Store,
        files: &HashMap<IpAddr, Option<Known>>,
        full: bool,
    ) -> std::io::Result<()> {
        if !self.changed && self.lines_hold {
            return Ok(());
        }
        if full && !files.values().any(Option::is_some) {
            self.file = None;
            return match fs::remove_file(&self.path) {
                Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        self.will_change(&store.cache_dir);
        let Some(f) = self.file.take() else {
            return Ok(());
        };
        // The file's length: a fast session read it whole.
        let size = |text: &Option<String>| match text {
            Some(t) => Ok(t.len() as u64),
            None => f.metadata().map(|m| m.len()),
        };
        let mut len = None;
        let rewrite = full
            && (!self.lines_hold || {
                let lines: u64 = files.values().flatten().map(|k| line_len(&k.name)).sum();
                let l = size(&self.text)?;
                len = Some(l);
                l > HEADER_LEN as u64 + 2 * lines + STALE_SLACK
            });
        if rewrite {
            let mut lines: Vec<(&IpAddr, &Known)> = files
                .iter()
                .filter_map(|(ip, k)| k.as_ref().map(|k| (ip, k)))
                .collect();
            lines.sort_by_key(|(ip, _)| **ip);
            let mut text = UNTRUSTED_HEADER.to_string();
            for (_, k) in lines {
                text.push_str(&index_line(k.content.as_deref(), &k.name));
            }
            // Overwrite, then cut: truncating to zero first would make
            // ext4 flush the file on close (auto_da_alloc).
            f.write_all_at(text.as_bytes(), 0)?;
            f.set_len(text.len() as u64)?;
        } else if self.lines_hold {
            let lines: String = self
                .appended
                .iter()
                .map(|(_, line)| line.as_str())
                .collect();
            if !lines.is_empty() {
                let mut at = match len {
                    Some(l) => l,
                    None => size(&self.text)?,
                };
                // Never glue a line to a torn one. (Only a fast session
                // knows the text; a trusted stamp was written after the
                // last append was whole, so a full session's file ends
                // with a newline.)
                if self.text.as_deref().is_some_and(|t| !t.ends_with('\n')) {
                    f.write_all_at(b"\n", at)?;
                    at += 1;
                }
                f.write_all_at(lines.as_bytes(), at)?;
            }
        } else {
            // A fast session's lines always hold (else it read everything).
            return Ok(());
        }
        let stamp = dir_stamp(&store.dir)?;
        let settled = store.settles(stamp);
        f.write_all_at(header(Some((stamp, settled, self.names))).as_bytes(), 0)
    }

    /// The index file (for the session's log).
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

/// The length of a reservation file's index line.
fn line_len(name: &str) -> u64 {
    (NO_OWNER_HASH.len() + 1 + name.len() + 1) as u64
}
