use super::index::{
    cache_name, dir_stamp, header, index_line, kernel_has_multigrain_timestamps,
    release_has_multigrain_timestamps, stamp_settles,
};
use super::*;
use crate::allocator::{self as alloc, Store as _};
use crate::range::{Cidr, RangeSet, RawRange};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// A temp directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "rcni-hl-unit-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        TempDir(p)
    }
    fn net(&self) -> PathBuf {
        self.0.join("net")
    }
    /// The cache directory of this test's stores (not /run).
    fn cache(&self) -> PathBuf {
        self.0.join("cache")
    }
    /// A store of `net()`, with its cache in `cache()`, on a kernel whose
    /// stamps always settle (multigrain timestamps), whatever this one does.
    fn store(&self) -> Store {
        self.store_settling(Settled::Yes)
    }
    /// The same on a kernel with coarse timestamps, where a stamp taken
    /// right after a change never settles.
    fn store_coarse(&self) -> Store {
        self.store_settling(Settled::No)
    }
    fn store_settling(&self, settled: Settled) -> Store {
        Store::create(&self.net())
            .unwrap()
            .with_cache_dir(self.cache())
            .assume_settled(settled)
    }
    /// The index file of `net()`.
    fn index(&self) -> PathBuf {
        let m = fs::metadata(self.net()).unwrap();
        self.cache().join(cache_name(m.dev(), m.ino()))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn set24(subnet: &str) -> RangeSet {
    RangeSet::canonicalize(
        &[RawRange {
            subnet: Some(Cidr::parse(subnet).unwrap()),
            range_start: None,
            range_end: None,
            gateway: None,
            origin: "t".into(),
        }],
        "t",
    )
    .unwrap()
}

#[test]
fn create_makes_dir_and_lock_with_reference_modes() {
    let t = TempDir::new("create");
    let s = t.store();
    assert_eq!(s.dir(), t.net());
    let mode = fs::metadata(t.net()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o700, 0o700);
    assert!(t.net().join(LOCK_FILE).is_file());
    assert!(
        Store::open_existing(&t.0.join("missing"))
            .unwrap()
            .is_none()
    );
    assert!(Store::open_existing(&t.net()).unwrap().is_some());
}

#[test]
fn claim_writes_complete_files_and_last_reserved() {
    let t = TempDir::new("claim");
    let s = t.store();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        assert!(ss.reserve("  cid1 ", "eth0", ip("10.0.0.2"), 0).unwrap());
        assert!(!ss.reserve("cid2", "eth0", ip("10.0.0.2"), 0).unwrap());
        assert!(ss.reserve("cid1", "eth1", ip("2001:db8::2"), 1).unwrap());
        assert_eq!(ss.last_reserved_ip(0), Some(ip("10.0.0.2")));
        assert_eq!(ss.last_reserved_ip(1), Some(ip("2001:db8::2")));
        assert_eq!(ss.last_reserved_ip(2), None);
    }
    assert_eq!(fs::read(t.net().join("10.0.0.2")).unwrap(), b"cid1\r\neth0");
    assert_eq!(
        fs::read(t.net().join("2001:db8::2")).unwrap(),
        b"cid1\r\neth1"
    );
    assert_eq!(
        fs::read(t.net().join("last_reserved_ip.0")).unwrap(),
        b"10.0.0.2"
    );
    let mode = fs::metadata(t.net().join("10.0.0.2"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    // every reservation is its own inode, with no other name
    for f in ["10.0.0.2", "2001:db8::2"] {
        assert_eq!(fs::metadata(t.net().join(f)).unwrap().nlink(), 1, "{f}");
    }
    let mode = fs::metadata(t.net().join("last_reserved_ip.0"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    // exactly the Go plugin's files (no temp file, the index is elsewhere)
    assert_eq!(
        names(&t.net()),
        [
            "10.0.0.2",
            "2001:db8::2",
            "last_reserved_ip.0",
            "last_reserved_ip.1",
            "lock"
        ]
    );
}

#[test]
fn a_kept_temp_file_serves_its_owner_only() {
    let t = TempDir::new("kept");
    let s = t.store();
    s.session(Sync::Fast)
        .unwrap()
        .claim("a", "eth0", ip("10.0.0.2"))
        .unwrap();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        assert!(ss.stats().index_used);
        // taken: the temp file waits for the next candidate
        assert!(!ss.claim("b", "eth0", ip("10.0.0.2")).unwrap());
        assert!(matches!(ss.claim_tmp, Some((Tmp::Unnamed(_), _))));
        assert!(ss.claim("b", "eth0", ip("10.0.0.3")).unwrap());
        // another owner's claim does not take a kept file
        assert!(!ss.claim("d", "eth0", ip("10.0.0.3")).unwrap());
        assert!(ss.claim("e", "eth0", ip("10.0.0.4")).unwrap());
    }
    assert_eq!(fs::read(t.net().join("10.0.0.3")).unwrap(), b"b\r\neth0");
    assert_eq!(fs::read(t.net().join("10.0.0.4")).unwrap(), b"e\r\neth0");
    for f in ["10.0.0.3", "10.0.0.4"] {
        assert_eq!(fs::metadata(t.net().join(f)).unwrap().nlink(), 1, "{f}");
    }
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used);
    assert_eq!(ss.owned_by("b", "eth0"), [ip("10.0.0.3")]);
    assert!(ss.owned_by("d", "eth0").is_empty());
    drop(ss);
    assert_eq!(
        names(&t.net()),
        ["10.0.0.2", "10.0.0.3", "10.0.0.4", "lock"]
    );
}

#[test]
fn last_reserved_is_rewritten_in_place_unless_shorter() {
    let t = TempDir::new("lastres");
    let s = t.store();
    let file = t.net().join("last_reserved_ip.0");
    let inode = || fs::metadata(&file).unwrap().ino();
    let mut ss = s.session(Sync::Fast).unwrap();
    // missing: created
    ss.set_last_reserved(0, ip("10.0.0.9")).unwrap();
    assert_eq!(fs::read(&file).unwrap(), b"10.0.0.9");
    let first = inode();
    // as long or longer: the same inode, whole new text
    for next in ["10.0.0.8", "10.0.0.10", "10.0.0.255"] {
        ss.set_last_reserved(0, ip(next)).unwrap();
        assert_eq!(fs::read(&file).unwrap(), next.as_bytes());
        assert_eq!(inode(), first, "{next}");
    }
    // shorter: replaced (a truncate after an in-place write could tear it)
    ss.set_last_reserved(0, ip("10.0.1.0")).unwrap();
    assert_eq!(fs::read(&file).unwrap(), b"10.0.1.0");
    assert_ne!(inode(), first);
    drop(ss);
    assert_eq!(names(&t.net()), ["last_reserved_ip.0", "lock"]);
}

#[test]
fn owned_and_release_follow_the_reference() {
    let t = TempDir::new("release");
    let s = t.store();
    fs::write(t.net().join("10.0.0.5"), "legacy").unwrap();
    fs::write(t.net().join("10.0.0.6"), " legacy\n").unwrap();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        ss.claim("a", "eth0", ip("10.0.0.2")).unwrap();
        ss.claim("a", "eth1", ip("10.0.0.3")).unwrap();
        ss.claim("legacy", "eth0", ip("10.0.0.4")).unwrap();
        assert_eq!(ss.owned_by("a", "eth0"), [ip("10.0.0.2")]);
        assert_eq!(
            ss.owned_by("legacy", "eth9"),
            [ip("10.0.0.5"), ip("10.0.0.6")]
        );
        assert_eq!(
            ss.owned_by("legacy", "eth0"),
            [ip("10.0.0.4"), ip("10.0.0.5"), ip("10.0.0.6")]
        );
        // release (id, ifname) files only when some exist
        assert_eq!(ss.release("legacy", "eth0").unwrap(), [ip("10.0.0.4")]);
        // then the legacy ones
        assert_eq!(
            ss.release("legacy", "eth0").unwrap(),
            [ip("10.0.0.5"), ip("10.0.0.6")]
        );
        assert!(ss.release("legacy", "eth0").unwrap().is_empty());
        assert!(ss.release("unknown", "eth0").unwrap().is_empty());
        assert_eq!(ss.release("a", "eth1").unwrap(), [ip("10.0.0.3")]);
    }
    assert_eq!(names(&t.net()), ["10.0.0.2", "lock"]);
}

#[test]
fn index_makes_the_next_sessions_read_and_list_nothing() {
    let t = TempDir::new("index");
    let s = t.store();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        assert!(!ss.stats().index_used && ss.stats().listed);
        for i in 2..50 {
            ss.claim(&format!("c{i}"), "eth0", ip(&format!("10.0.0.{i}")))
                .unwrap();
        }
    }
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        assert!(ss.stats().index_used);
        assert!(ss.owned_by("nobody", "eth0").is_empty());
        assert_eq!(ss.stats().files_read, 0);
        // a hit is verified by reading exactly that file
        assert_eq!(ss.owned_by("c7", "eth0"), [ip("10.0.0.7")]);
        assert_eq!(ss.stats().files_read, 1);
        // taken is found by link(); free is claimed
        assert!(!ss.claim("x", "eth0", ip("10.0.0.30")).unwrap());
        assert!(ss.claim("x", "eth0", ip("10.0.0.50")).unwrap());
        assert!(!ss.stats().listed);
    }
    {
        // the appended line is found by the next session
        let mut ss = s.session(Sync::Fast).unwrap();
        assert!(ss.stats().index_used);
        assert_eq!(ss.owned_by("x", "eth0"), [ip("10.0.0.50")]);
        assert_eq!(ss.stats().files_read, 1);
    }
    // Full ignores the index
    let ss = s.session(Sync::Full).unwrap();
    assert!(!ss.stats().index_used);
    assert_eq!(ss.stats().files_read, 49);
}

#[test]
fn many_taken_candidates_list_the_names_once() {
    let t = TempDir::new("taken");
    let s = t.store();
    let set = set24("10.8.0.0/24");
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        for i in 2..100 {
            ss.claim(&format!("c{i}"), "eth0", ip(&format!("10.8.0.{i}")))
                .unwrap();
        }
    }
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used);
    // last_reserved is unset: the walk starts at .2 and meets 98 taken addresses
    let c = alloc::get(&set, 0, &mut ss, "new", "eth0", None).unwrap();
    assert_eq!(c.address.to_string(), "10.8.0.100/24");
    assert!(ss.stats().listed);
    assert_eq!(ss.stats().files_read, 0);
}

#[test]
fn foreign_writers_are_seen() {
    let t = TempDir::new("foreign");
    let s = t.store();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        ss.claim("a", "eth0", ip("10.0.0.2")).unwrap();
        ss.claim("b", "eth0", ip("10.0.0.3")).unwrap();
    }
    // The Go plugin adds a file and removes one (without the index).
    fs::write(t.net().join("10.0.0.9"), "go\r\neth0").unwrap();
    fs::remove_file(t.net().join("10.0.0.3")).unwrap();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        assert_eq!(ss.owned_by("go", "eth0"), [ip("10.0.0.9")]);
        assert!(ss.owned_by("b", "eth0").is_empty());
        assert!(ss.claim("c", "eth0", ip("10.0.0.3")).unwrap());
    }
    // Same name re-created with other content (inode may be recycled): the
    // mtime moved, so everything is read again.
    fs::remove_file(t.net().join("10.0.0.2")).unwrap();
    fs::write(t.net().join("10.0.0.2"), "other\r\neth0").unwrap();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        assert!(!ss.stats().index_used);
        assert!(ss.owned_by("a", "eth0").is_empty());
        assert_eq!(ss.owned_by("other", "eth0"), [ip("10.0.0.2")]);
    }
}

#[test]
fn untrusted_index_falls_back_to_reading() {
    let t = TempDir::new("corrupt");
    let s = t.store();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        ss.claim("a", "eth0", ip("10.0.0.2")).unwrap();
    }
    let path = t.index();
    let good = fs::read_to_string(&path).unwrap();
    assert!(good.starts_with("rcni-index v3 "), "{good}");
    assert!(s.session(Sync::Fast).unwrap().stats().index_used);
    // a zeroed stamp: a session died while changing the directory
    let zeroed = format!("{}{}", header(None), &good[header(None).len()..]);
    for bad in [
        zeroed.as_str(),
        "",
        "garbage\n",
        "rcni-index v2 1 2 3\n",
        &good.replace("rcni-index v3", "rcni-index v2"),
        &good.replacen(" s ", " x ", 1),
        &good[..20],
    ] {
        fs::write(&path, bad).unwrap();
        let mut ss = s.session(Sync::Fast).unwrap();
        assert!(!ss.stats().index_used, "{bad:?}");
        assert_eq!(ss.owned_by("a", "eth0"), [ip("10.0.0.2")]);
        drop(ss);
        // ... and the full session rewrote it
        assert!(s.session(Sync::Fast).unwrap().stats().index_used, "{bad:?}");
    }
}

#[test]
fn a_session_killed_while_changing_leaves_an_untrusted_index() {
    let t = TempDir::new("killed");
    let s = t.store();
    s.session(Sync::Full)
        .unwrap()
        .claim("z", "eth0", ip("10.0.0.9"))
        .unwrap();
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used);
    ss.claim("a", "eth0", ip("10.0.0.2")).unwrap();
    // as if killed here: the stamp was zeroed before the first change
    let text = fs::read_to_string(t.index()).unwrap();
    assert!(text.starts_with(&header(None)), "{text}");
    std::mem::forget(ss);
    s.unlock(); // what the kernel does for a dead process
    let s2 = t.store();
    let mut ss = s2.session(Sync::Fast).unwrap();
    assert!(!ss.stats().index_used);
    assert_eq!(ss.owned_by("a", "eth0"), [ip("10.0.0.2")]);
}

#[test]
fn stale_temp_files_are_removed_under_the_lock() {
    let t = TempDir::new("stale");
    let s = t.store();
    fs::write(t.net().join(".rcni-tmp-1-1"), "dead\r\neth0").unwrap();
    fs::write(t.net().join(".rcni-tmp-1-2"), "").unwrap();
    // and the index that earlier versions kept here
    fs::write(t.net().join(".rcni-index"), "rcni-index v2 …").unwrap();
    let before = names(&t.net());
    // a reader (CHECK) changes nothing
    let reader = Store::open_for_reading(&t.net())
        .unwrap()
        .unwrap()
        .with_cache_dir(t.cache());
    {
        let mut ss = reader.session(Sync::Full).unwrap();
        assert_eq!(ss.stats().stale_removed, 0);
        assert!(ss.owned_by("dead", "eth0").is_empty());
    }
    assert_eq!(names(&t.net()), before);
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        assert_eq!(ss.stats().stale_removed, 3);
        // temp files are never reservations
        assert!(ss.owned_by("dead", "eth0").is_empty());
    }
    assert_eq!(names(&t.net()), ["lock"]);
}

#[test]
fn gc_keeps_valid_attachments_only() {
    let t = TempDir::new("gc");
    let s = t.store();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        ss.reserve("keep", "eth0", ip("10.0.0.2"), 0).unwrap();
        ss.reserve("keep", "eth1", ip("10.0.0.3"), 0).unwrap();
        ss.reserve("gone", "eth0", ip("10.0.0.4"), 0).unwrap();
    }
    fs::write(t.net().join("10.0.0.5"), "").unwrap();
    fs::write(t.net().join("10.0.0.6"), "keep").unwrap(); // legacy, id still valid
    fs::write(t.net().join("10.0.0.7"), "old").unwrap(); // legacy, id gone
    fs::write(t.net().join("10.0.0.8"), [0xff, 0xfe]).unwrap();
    fs::write(t.net().join("notes"), "keep me").unwrap();
    {
        let mut ss = s.session(Sync::Full).unwrap();
        let valid = vec![("keep".to_string(), "eth0".to_string())];
        let mut gone = ss.gc(&valid).unwrap();
        gone.sort();
        let want: Vec<IpAddr> = ["10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.7", "10.0.0.8"]
            .iter()
            .map(|s| ip(s))
            .collect();
        assert_eq!(gone, want);
    }
    assert_eq!(
        names(&t.net()),
        [
            "10.0.0.2",
            "10.0.0.6",
            "last_reserved_ip.0",
            "lock",
            "notes"
        ]
    );
    // an empty list releases everything
    let mut ss = s.session(Sync::Full).unwrap();
    assert_eq!(ss.gc(&[]).unwrap().len(), 2);
    drop(ss);
    assert_eq!(names(&t.net()), ["last_reserved_ip.0", "lock", "notes"]);
    // nothing is reserved any more: the index is gone too
    assert!(!t.index().exists());
}

#[test]
fn reserved_ips_lists_names_only() {
    let t = TempDir::new("list");
    assert!(reserved_ips(&t.net()).unwrap().is_empty());
    let s = t.store();
    s.probe_write().unwrap();
    fs::write(t.net().join("10.0.0.5"), "x").unwrap();
    fs::write(t.net().join("::ffff:10.0.0.6"), "x").unwrap();
    fs::write(t.net().join("last_reserved_ip.0"), "10.0.0.5").unwrap();
    let mut v = reserved_ips(&t.net()).unwrap();
    v.sort();
    assert_eq!(v, [ip("10.0.0.5"), ip("10.0.0.6")]);
}

#[test]
fn threads_never_share_an_address() {
    let t = TempDir::new("threads");
    let dir = t.net();
    let cache = t.cache();
    let set = set24("10.7.0.0/24");
    let got: Vec<IpAddr> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..8)
            .map(|th| {
                let dir = dir.clone();
                let cache = cache.clone();
                let set = set.clone();
                sc.spawn(move || {
                    // one Store per thread: its own lock fd, as separate processes
                    let store = Store::create(&dir).unwrap().with_cache_dir(cache);
                    (0..25)
                        .map(|i| {
                            let mut ss = store.session(Sync::Fast).unwrap();
                            let c =
                                alloc::get(&set, 0, &mut ss, &format!("t{th}-{i}"), "eth0", None)
                                    .unwrap();
                            c.address.ip()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut sorted = got.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 200);
    let files = names(&dir)
        .iter()
        .filter(|n| n.parse::<IpAddr>().is_ok())
        .count();
    assert_eq!(files, 200);
}

#[test]
fn released_again_in_the_same_session_leaves_no_index_line() {
    let t = TempDir::new("rollback");
    let s = t.store();
    s.session(Sync::Full)
        .unwrap()
        .claim("z", "eth0", ip("10.0.0.9"))
        .unwrap();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        assert!(ss.stats().index_used);
        assert!(ss.reserve("a", "eth0", ip("10.0.0.2"), 0).unwrap());
        assert!(ss.reserve("a", "eth0", ip("10.0.0.3"), 1).unwrap());
        ss.unreserve(&[ip("10.0.0.2")]).unwrap();
    }
    let text = fs::read_to_string(t.index()).unwrap();
    assert!(
        !text.contains(" 10.0.0.2\n") && text.contains(" 10.0.0.3\n"),
        "{text}"
    );
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used);
    assert_eq!(ss.owned_by("a", "eth0"), [ip("10.0.0.3")]);
}

#[test]
fn no_temp_file_is_ever_visible() {
    let t = TempDir::new("unnamed");
    let s = t.store();
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.claim("a", "eth0", ip("10.0.0.2")).unwrap());
    // taken (by a file this session has not seen): the claim's temp file
    // is kept for the next candidate, unnamed
    fs::write(t.net().join("10.0.0.3"), "go\r\neth0").unwrap();
    assert!(!ss.claim("b", "eth0", ip("10.0.0.3")).unwrap());
    assert!(matches!(ss.claim_tmp, Some((Tmp::Unnamed(_), _))));
    assert_eq!(names(&t.net()), ["10.0.0.2", "10.0.0.3", "lock"]);
    // a shorter last_reserved_ip replaces the file through an unnamed one
    ss.set_last_reserved(0, ip("10.0.0.255")).unwrap();
    ss.set_last_reserved(0, ip("10.0.1.0")).unwrap();
    assert_eq!(
        fs::read(t.net().join("last_reserved_ip.0")).unwrap(),
        b"10.0.1.0"
    );
    assert!(ss.claim("b", "eth0", ip("10.0.0.4")).unwrap());
    drop(ss);
    assert_eq!(
        names(&t.net()),
        [
            "10.0.0.2",
            "10.0.0.3",
            "10.0.0.4",
            "last_reserved_ip.0",
            "lock"
        ]
    );
    assert_eq!(fs::read(t.net().join("10.0.0.4")).unwrap(), b"b\r\neth0");
    assert_eq!(fs::read(t.net().join("10.0.0.2")).unwrap(), b"a\r\neth0");
}

#[test]
fn without_a_writable_cache_every_session_reads_everything() {
    let t = TempDir::new("nocache");
    fs::create_dir_all(&t.0).unwrap();
    // the cache directory's place is taken by a file: nothing can be written
    fs::write(t.cache(), "").unwrap();
    let s = t.store();
    for i in 2..6 {
        let mut ss = s.session(Sync::Fast).unwrap();
        assert!(!ss.stats().index_used && ss.stats().listed);
        assert!(ss.owned_by(&format!("c{i}"), "eth0").is_empty());
        assert!(
            ss.reserve(&format!("c{i}"), "eth0", ip(&format!("10.0.0.{i}")), 0)
                .unwrap()
        );
    }
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(!ss.stats().index_used);
    assert_eq!(ss.owned_by("c3", "eth0"), [ip("10.0.0.3")]);
    assert_eq!(ss.release("c3", "eth0").unwrap(), [ip("10.0.0.3")]);
    drop(ss);
    assert_eq!(
        names(&t.net()),
        [
            "10.0.0.2",
            "10.0.0.4",
            "10.0.0.5",
            "last_reserved_ip.0",
            "lock"
        ]
    );
}

#[test]
fn each_network_directory_has_its_own_cache() {
    let t = TempDir::new("keys");
    let a = t.store();
    let b_dir = t.0.join("other");
    let b = Store::create(&b_dir).unwrap().with_cache_dir(t.cache());
    a.session(Sync::Fast)
        .unwrap()
        .claim("x", "eth0", ip("10.0.0.2"))
        .unwrap();
    b.session(Sync::Fast)
        .unwrap()
        .claim("x", "eth0", ip("10.0.0.2"))
        .unwrap();
    assert_eq!(names(&t.cache()).len(), 2);
    assert_ne!(cache_file(&t.net()).unwrap(), cache_file(&b_dir).unwrap());
    // both are trusted afterwards
    assert!(a.session(Sync::Fast).unwrap().stats().index_used);
    assert!(b.session(Sync::Fast).unwrap().stats().index_used);
}

#[test]
fn without_o_tmpfile_named_temp_files_are_used_and_removed() {
    let t = TempDir::new("named");
    let s = t.store();
    let mut ss = s.session(Sync::Fast).unwrap();
    ss.unnamed_tmp = false; // as on a file system without O_TMPFILE
    fs::write(t.net().join("10.0.0.2"), "go\r\neth0").unwrap();
    assert!(!ss.claim("a", "eth0", ip("10.0.0.2")).unwrap());
    assert!(matches!(ss.claim_tmp, Some((Tmp::Named(_), _))));
    assert!(ss.claim("a", "eth0", ip("10.0.0.3")).unwrap());
    ss.set_last_reserved(0, ip("10.0.0.255")).unwrap();
    ss.set_last_reserved(0, ip("10.0.1.0")).unwrap();
    drop(ss);
    assert_eq!(
        names(&t.net()),
        ["10.0.0.2", "10.0.0.3", "last_reserved_ip.0", "lock"]
    );
    assert_eq!(fs::read(t.net().join("10.0.0.3")).unwrap(), b"a\r\neth0");
    assert_eq!(
        fs::read(t.net().join("last_reserved_ip.0")).unwrap(),
        b"10.0.1.0"
    );
}

/// Field `n` of the index header of `t`'s store (0: "rcni-index").
fn header_field(t: &TempDir, n: usize) -> String {
    let text = fs::read_to_string(t.index()).unwrap();
    text.split_ascii_whitespace().nth(n).unwrap().to_string()
}

/// Sets the mtime of `dir` to `(s, ns)`.
fn set_mtime(dir: &Path, (s, ns): (i64, i64)) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::new(s as u64, ns as u32);
    File::open(dir)
        .unwrap()
        .set_times(fs::FileTimes::new().set_modified(t))
        .unwrap();
}

fn mtime(dir: &Path) -> (i64, i64) {
    let m = fs::metadata(dir).unwrap();
    (m.mtime(), m.mtime_nsec())
}

/// The race of kernels before 6.13 (coarse timestamps), made
/// deterministic: a foreign writer (the Go plugin, an admin) creates a
/// reservation right after an ADD, within the same clock tick, so the
/// directory's mtime does not move. Here the mtime is put back by hand.
#[test]
fn a_reservation_made_within_the_stamps_tick_is_seen() {
    let t = TempDir::new("tick");
    let s = t.store_coarse();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        ss.reserve("a", "eth0", ip("10.0.0.2"), 0).unwrap();
    }
    assert_eq!(header_field(&t, 5), "n");
    let before = mtime(&t.net());
    fs::write(t.net().join("10.0.0.9"), "foreign\r\neth0").unwrap();
    set_mtime(&t.net(), before);
    assert_eq!(mtime(&t.net()), before);
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        // the names differ from the index's: everything is read
        assert!(!ss.stats().index_used && ss.stats().listed);
        assert_eq!(ss.owned_by("foreign", "eth0"), [ip("10.0.0.9")]);
        assert!(alloc::get(&set24("10.0.0.0/24"), 0, &mut ss, "foreign", "eth0", None).is_err());
    }
    // and the index now names it
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used);
    assert_eq!(ss.owned_by("foreign", "eth0"), [ip("10.0.0.9")]);
    drop(ss);

    // What trusting the stamp alone (the rule before) would do: miss it.
    let t = TempDir::new("tick-stamp-only");
    let s = t.store();
    s.session(Sync::Fast)
        .unwrap()
        .reserve("a", "eth0", ip("10.0.0.2"), 0)
        .unwrap();
    let before = mtime(&t.net());
    fs::write(t.net().join("10.0.0.9"), "foreign\r\neth0").unwrap();
    set_mtime(&t.net(), before);
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used);
    assert!(ss.owned_by("foreign", "eth0").is_empty());
}

#[test]
fn an_unsettled_index_costs_a_listing_and_no_reads() {
    let t = TempDir::new("unsettled");
    let s = t.store_coarse();
    fs::write(t.net().join("10.0.0.40"), "").unwrap(); // empty (a crash of the Go plugin)
    fs::write(t.net().join("10.0.0.41"), [0xff, 0xfe]).unwrap();
    fs::write(t.net().join("notes"), "not a reservation").unwrap();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        for i in 2..30 {
            ss.claim(&format!("c{i}"), "eth0", ip(&format!("10.0.0.{i}")))
                .unwrap();
        }
    }
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used && ss.stats().listed);
    assert!(ss.owned_by("nobody", "eth0").is_empty());
    assert_eq!(ss.owned_by("c7", "eth0"), [ip("10.0.0.7")]);
    assert_eq!(ss.stats().files_read, 1);
    assert!(!ss.claim("x", "eth0", ip("10.0.0.40")).unwrap());
    assert!(ss.claim("x", "eth0", ip("10.0.0.30")).unwrap());
    drop(ss);
    // a removed file is a difference too
    let before = mtime(&t.net());
    fs::remove_file(t.net().join("10.0.0.5")).unwrap();
    set_mtime(&t.net(), before);
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(!ss.stats().index_used);
    assert!(ss.owned_by("c5", "eth0").is_empty());
    assert_eq!(ss.stats().files_read, 30);
    drop(ss);
    // so is a file renamed (as many names, other ones), and a name that
    // is not an address but looks like one is counted, not a difference
    let before = mtime(&t.net());
    fs::rename(t.net().join("10.0.0.6"), t.net().join("10.0.0.60")).unwrap();
    fs::write(t.net().join("beef"), "").unwrap();
    set_mtime(&t.net(), before);
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(!ss.stats().index_used);
    assert_eq!(ss.owned_by("c6", "eth0"), [ip("10.0.0.60")]);
    drop(ss);
    let ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used && ss.stats().files_read == 0);
    drop(ss);
    // a full session that finds the names as indexed leaves the index be
    let text = fs::read_to_string(t.index()).unwrap();
    drop(s.session(Sync::Full).unwrap());
    assert_eq!(fs::read_to_string(t.index()).unwrap(), text);
}

#[test]
fn stamps_settle_when_no_later_change_can_keep_the_mtime() {
    use nix::sys::statfs::{BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, FsType, TMPFS_MAGIC};
    const XFS_SUPER_MAGIC: FsType = FsType(0x5846_5342);
    let t = TempDir::new("settle");
    let s = t.store_settling(Settled::No);
    let dir = s.dir().to_path_buf();
    let local = [
        EXT4_SUPER_MAGIC,
        XFS_SUPER_MAGIC,
        BTRFS_SUPER_MAGIC,
        TMPFS_MAGIC,
    ]
    .contains(&nix::sys::statfs::statfs(&dir).unwrap().filesystem_type());
    let coarse = |d: i64| {
        let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE).unwrap();
        (now.tv_sec() + d, now.tv_nsec())
    };
    let settles = |m: (i64, i64)| {
        set_mtime(&dir, m);
        stamp_settles(&dir, dir_stamp(&dir).unwrap())
    };
    let multigrain = local && kernel_has_multigrain_timestamps();
    let yes_if = |c: bool| if c { Settled::Yes } else { Settled::No };
    // changed in this very tick: settled by multigrain timestamps only
    assert_eq!(settles(coarse(0)), yes_if(multigrain));
    // a file system that keeps seconds only cannot tell within a second
    let (now_s, _) = coarse(0);
    assert_eq!(settles((now_s, 0)), Settled::No);
    // a second or more ago: a later change gets a later time
    assert_eq!(settles(coarse(-2)), yes_if(local));
}

#[test]
fn multigrain_timestamps_come_with_6_13() {
    for (release, want) in [
        ("6.1.0-28-amd64", false),
        ("5.15.0-91-generic", false),
        ("6.12.9", false),
        ("6.13.0", true),
        ("6.18.0-rc2+", true),
        ("7.0", true),
        ("10.1", true),
        ("6", false),
        ("", false),
    ] {
        assert_eq!(
            release_has_multigrain_timestamps(release),
            want,
            "{release}"
        );
    }
}

#[test]
fn hs_symlinked_files_are_not_read_through() {
    let t = TempDir::new("symlink");
    let s = t.store();
    let outside = t.0.join("outside");
    fs::write(&outside, "victim\r\neth0").unwrap();
    let hint = t.0.join("hint");
    fs::write(&hint, "10.0.0.50").unwrap();
    std::os::unix::fs::symlink(&outside, t.net().join("10.0.0.9")).unwrap();
    std::os::unix::fs::symlink(&hint, t.net().join("last_reserved_ip.0")).unwrap();
    for sync in [Sync::Fast, Sync::Full] {
        let mut ss = s.session(sync).unwrap();
        assert!(ss.owned_by("victim", "eth0").is_empty(), "{sync:?}");
        assert_eq!(ss.last_reserved(0), None, "{sync:?}");
        // still a taken address
        assert!(!ss.claim("x", "eth0", ip("10.0.0.9")).unwrap(), "{sync:?}");
        assert!(ss.release("victim", "eth0").unwrap().is_empty());
    }
    let mut ss = s.session(Sync::Full).unwrap();
    assert_eq!(ss.gc(&[]).unwrap(), [ip("10.0.0.9")]);
    drop(ss);
    assert!(fs::symlink_metadata(t.net().join("10.0.0.9")).is_err());
    assert_eq!(fs::read_to_string(&outside).unwrap(), "victim\r\neth0");
    assert_eq!(fs::read_to_string(&hint).unwrap(), "10.0.0.50");
}

/// The index's lines, without its header.
fn index_lines(t: &TempDir) -> String {
    let text = fs::read_to_string(t.index()).unwrap();
    text[header(None).len()..].to_string()
}

#[test]
fn dd_del_appends_a_removal_line_and_restamps_the_index() {
    let t = TempDir::new("dd-del");
    let s = t.store();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        for i in 2..12 {
            ss.claim(&format!("c{i}"), "eth0", ip(&format!("10.0.0.{i}")))
                .unwrap();
        }
    }
    let lines = index_lines(&t);
    {
        // DEL: every file read, one removed, no line written.
        let mut ss = s.session(Sync::Full).unwrap();
        assert_eq!(ss.stats().files_read, 10);
        assert_eq!(ss.release("c5", "eth0").unwrap(), [ip("10.0.0.5")]);
    }
    // One removal line appended, nothing rewritten.
    let removal = format!(
        "-{}",
        index_line(Some(&owner_key("c5", "eth0")), "10.0.0.5")
    );
    assert_eq!(index_lines(&t), format!("{lines}{removal}"));
    // The restamped index is trusted; the removal line cancels the
    // released address's line: no candidate, no file read.
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used && !ss.stats().listed);
    assert!(ss.owned_by("c5", "eth0").is_empty());
    assert_eq!(ss.stats().files_read, 0);
    assert_eq!(ss.owned_by("c6", "eth0"), [ip("10.0.0.6")]);
    // The address is free again, and its new owner's line is appended.
    assert!(ss.claim("n", "eth0", ip("10.0.0.5")).unwrap());
    drop(ss);
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used);
    assert_eq!(ss.owned_by("n", "eth0"), [ip("10.0.0.5")]);
    assert!(ss.owned_by("c5", "eth0").is_empty());
}

#[test]
fn dd_stale_lines_are_compacted_by_a_full_session() {
    let t = TempDir::new("dd-compact");
    let s = t.store();
    s.session(Sync::Fast)
        .unwrap()
        .claim("keep", "eth0", ip("10.0.0.2"))
        .unwrap();
    // ADD and DEL in turn: each appends a line.
    let mut most = 0;
    for i in 0..200 {
        let owner = format!("c{i}");
        assert!(
            s.session(Sync::Fast)
                .unwrap()
                .claim(&owner, "eth0", ip("10.0.0.3"))
                .unwrap()
        );
        let mut ss = s.session(Sync::Full).unwrap();
        assert_eq!(ss.release(&owner, "eth0").unwrap(), [ip("10.0.0.3")]);
        drop(ss);
        let len = fs::metadata(t.index()).unwrap().len();
        most = most.max(len);
    }
    // Bounded: at most twice the live lines and the slack, plus the last
    // ADD's line; and compacted down to the one live line at times.
    let live = index_line(Some(&owner_key("keep", "eth0")), "10.0.0.2").len() as u64;
    let head = header(None).len() as u64;
    assert!(most <= head + 2 * live + 2048 + 64, "{most}");
    assert!(
        most > head + 2 * live,
        "removed files' lines were kept: {most}"
    );
    // Whatever the state, the index agrees with the files.
    let mut ss = s.session(Sync::Fast).unwrap();
    assert!(ss.stats().index_used);
    assert_eq!(ss.owned_by("keep", "eth0"), [ip("10.0.0.2")]);
    assert!(ss.owned_by("c199", "eth0").is_empty());
}

#[test]
fn dd_a_del_killed_while_changing_leaves_an_untrusted_index() {
    let t = TempDir::new("dd-killed-del");
    let s = t.store();
    {
        let mut ss = s.session(Sync::Fast).unwrap();
        ss.claim("a", "eth0", ip("10.0.0.2")).unwrap();
        ss.claim("b", "eth0", ip("10.0.0.3")).unwrap();
    }
    let mut ss = s.session(Sync::Full).unwrap();
    ss.release("a", "eth0").unwrap();
    // as if killed here: the stamp was zeroed before the file went
    assert!(
        fs::read_to_string(t.index())
            .unwrap()
            .starts_with(&header(None))
    );
    std::mem::forget(ss);
    s.unlock(); // what the kernel does for a dead process
    let s2 = t.store();
    let mut ss = s2.session(Sync::Fast).unwrap();
    assert!(!ss.stats().index_used);
    assert!(ss.owned_by("a", "eth0").is_empty());
    assert_eq!(ss.owned_by("b", "eth0"), [ip("10.0.0.3")]);
    drop(ss);
    // ... and that session rewrote it, without the released address
    assert!(!index_lines(&t).contains(" 10.0.0.2\n"));
    assert!(s2.session(Sync::Fast).unwrap().stats().index_used);
}

#[test]
fn dd_headers_and_lines_are_printed_as_format_prints_them() {
    use super::index::HEADER_LEN;
    let digest = |names: &[&str]| {
        let mut d = NamesDigest::default();
        for n in names {
            d.add(n.as_bytes());
        }
        d
    };
    let d = digest(&["10.0.0.2", "fd00::5"]);
    for (stamp, settled) in [
        ((0, 0, 0), Settled::No),
        ((1_764_300_000, 123_456_789, 4_242), Settled::Yes),
        ((-5, 999_999_999, u64::MAX), Settled::No),
        ((i64::MAX, i64::MIN, 1), Settled::Yes),
    ] {
        let h = header(Some((stamp, settled, d)));
        let (s, ns, ino) = stamp;
        let flag = if settled == Settled::Yes { 's' } else { 'n' };
        let count = 2u64;
        let mut sum = 0u64;
        for n in ["10.0.0.2", "fd00::5"] {
            sum = sum.wrapping_add(super::index::fnv(n.as_bytes()));
        }
        assert_eq!(
            h,
            format!("rcni-index v3 {s:020} {ns:09} {ino:020} {flag} {count:020} {sum:016x}\n")
        );
        if s >= 0 && ns >= 0 {
            assert_eq!(h.len(), HEADER_LEN);
        }
    }
    assert_eq!(header(None).len(), HEADER_LEN);
    assert_eq!(header(None), super::index::UNTRUSTED_HEADER);
    assert_eq!(
        index_line(Some(b"a\r\neth0"), "10.0.0.2"),
        format!("{:016x} 10.0.0.2\n", super::index::fnv(b"a\r\neth0"))
    );
    assert_eq!(
        index_line(Some(b"x"), "::1"),
        format!("{:016x} ::1\n", super::index::fnv(b"x"))
    );
    assert_eq!(index_line(None, "10.0.0.3"), "---------------- 10.0.0.3\n");
}

#[test]
fn dd_an_attachment_added_and_deleted_again_and_again_has_no_stale_candidate() {
    let t = TempDir::new("dd-again");
    let s = t.store();
    s.session(Sync::Fast)
        .unwrap()
        .claim("other", "eth0", ip("10.0.0.2"))
        .unwrap();
    for i in 3..20 {
        let mut ss = s.session(Sync::Fast).unwrap();
        // each ADD finds the earlier ones cancelled: nothing to read
        assert!(ss.stats().index_used);
        assert!(ss.owned_by("again", "eth0").is_empty());
        assert_eq!(ss.stats().files_read, 0, "ADD {i}");
        assert!(
            ss.claim("again", "eth0", ip(&format!("10.0.0.{i}")))
                .unwrap()
        );
        drop(ss);
        let mut ss = s.session(Sync::Full).unwrap();
        assert_eq!(ss.release("again", "eth0").unwrap().len(), 1);
    }
}
