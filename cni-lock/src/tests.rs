#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown, symlink};

/// A world-writable temp directory standing in for `/run`, removed on drop.
struct Base(PathBuf);

impl Base {
    fn new(tag: &str) -> Base {
        let p = std::env::temp_dir().join(format!("cni-lock-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o1777)).unwrap();
        Base(p)
    }
    fn take(&self, name: &str, timeout: Duration) -> Result<Option<Lock>, CniError> {
        take(&self.0, SUBDIRS, name, timeout)
    }
    fn take_shared(&self, name: &str, timeout: Duration) -> Result<Option<Lock>, CniError> {
        take_as(&self.0, SUBDIRS, name, timeout, Hold::Shared)
    }
    fn dir(&self) -> PathBuf {
        self.0.join("cni-rcni/locks")
    }
    /// Names in the base and its first directory that were moved aside.
    fn aside(&self) -> Vec<String> {
        [self.0.clone(), self.0.join("cni-rcni")]
            .iter()
            .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".untrusted-"))
            .collect()
    }
}

impl Drop for Base {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn root() -> bool {
    geteuid().is_root()
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

const SHORT: Duration = Duration::from_millis(200);

#[test]
fn fresh_directory_and_file_are_private_and_the_lock_excludes() {
    let b = Base::new("fresh");
    let l = b.take("portmap.lock", SHORT).unwrap().unwrap();
    assert_eq!(l.path(), b.dir().join("portmap.lock"));
    assert_eq!(mode(&b.0.join("cni-rcni")), 0o700);
    assert_eq!(mode(&b.dir()), 0o700);
    assert_eq!(mode(l.path()), 0o600);
    // A second open file description is refused while the first holds it.
    let t = Instant::now();
    let e = b.take("portmap.lock", SHORT).unwrap_err();
    let waited = t.elapsed();
    assert!(waited >= SHORT && waited < SHORT * 5, "{waited:?}");
    assert_eq!(e.code, code::TRY_AGAIN_LATER);
    assert!(e.msg.contains(&l.path().display().to_string()), "{e:?}");
    assert!(e.details.contains(TIMEOUT_VAR), "{e:?}");
    drop(l);
    // Released: taken; the named file stays.
    b.take("portmap.lock", SHORT).unwrap().unwrap();
    assert!(b.dir().join("portmap.lock").exists());
}

#[test]
fn a_waiter_gets_the_lock_when_it_is_released() {
    let b = Base::new("wait");
    let l = b.take("firewall.lock", SHORT).unwrap().unwrap();
    let t = Instant::now();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| b.take("firewall.lock", Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(100));
        drop(l);
        let got = waiter.join().unwrap().unwrap().unwrap();
        assert!(got.path().exists());
    });
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

/// Sharers hold the lock together; an exclusive taker waits for the last
/// of them and, holding it, keeps the next sharer out until it is done.
#[test]
fn sharers_exclude_only_an_exclusive_holder() {
    let b = Base::new("shared");
    let one = b.take_shared("portmap.lock", SHORT).unwrap().unwrap();
    let two = b.take_shared("portmap.lock", SHORT).unwrap().unwrap();
    let e = b.take("portmap.lock", SHORT).unwrap_err();
    assert_eq!(e.code, code::TRY_AGAIN_LATER, "{e:?}");
    std::thread::scope(|s| {
        let waiter = s.spawn(|| b.take("portmap.lock", Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(50));
        drop(one);
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "taken while a sharer held it");
        drop(two);
        let held = waiter.join().unwrap().unwrap().unwrap();
        let e = b.take_shared("portmap.lock", SHORT).unwrap_err();
        assert_eq!(e.code, code::TRY_AGAIN_LATER, "{e:?}");
        drop(held);
    });
    b.take_shared("portmap.lock", SHORT).unwrap().unwrap();
}

/// A namespace's lock file stays after its release (the next taker opens
/// the same file), and a waiter gets it when it is released.
#[test]
fn a_namespace_lock_file_stays_and_a_waiter_gets_it() {
    let b = Base::new("netns");
    let name = "netns-4-4026531840.lock";
    let l = b.take(name, SHORT).unwrap().unwrap();
    let path = l.path().to_path_buf();
    let ino = std::fs::metadata(&path).unwrap().ino();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| b.take(name, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(100));
        drop(l);
        let got = waiter.join().unwrap().unwrap().unwrap();
        assert_eq!(got.file.metadata().unwrap().ino(), ino);
    });
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), ino);
}

/// A user who made the directories first on a world-writable `/run` and
/// holds a lock file in them: the plugin moves them aside and locks its own.
#[test]
fn directories_a_user_made_first_are_moved_aside() {
    if !root() {
        return;
    }
    for hostile in ["cni-rcni", "cni-rcni/locks"] {
        let b = Base::new("hostile");
        std::fs::create_dir_all(b.0.join(hostile)).unwrap();
        let d = b.0.join(hostile);
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        chown(&d, Some(65534), Some(65534)).unwrap();
        let planted = b.0.join(hostile).join("portmap.lock");
        let theirs = File::create(&planted).unwrap();
        theirs.lock().unwrap();
        let l = b.take("portmap.lock", SHORT).unwrap().unwrap();
        assert_eq!(std::fs::metadata(b.dir()).unwrap().uid(), 0);
        assert_eq!(mode(&b.dir()), 0o700);
        assert_eq!(mode(l.path()), 0o600);
        assert_eq!(b.aside().len(), 1, "{hostile}: {:?}", b.aside());
    }
}

/// Root's own directories with modes open to others are not trusted either
/// (anyone could have put a file there while they were open).
#[test]
fn an_open_lock_directory_is_moved_aside() {
    let b = Base::new("open");
    std::fs::create_dir_all(b.dir()).unwrap();
    std::fs::set_permissions(b.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(b.0.join("cni-rcni"), std::fs::Permissions::from_mode(0o755)).unwrap();
    b.take("x.lock", SHORT).unwrap().unwrap();
    assert_eq!(mode(&b.dir()), 0o700);
    // The parent, closed to writers, is kept as it is.
    assert_eq!(mode(&b.0.join("cni-rcni")), 0o755);
    assert_eq!(b.aside().len(), 1, "{:?}", b.aside());
}

/// Symlinks are never followed: not for a directory, not for the file.
#[test]
fn symlinks_are_replaced_not_followed() {
    let b = Base::new("symlink");
    let elsewhere = b.0.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, b.0.join("cni-rcni")).unwrap();
    b.take("a.lock", SHORT).unwrap().unwrap();
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
    assert!(
        std::fs::symlink_metadata(b.0.join("cni-rcni"))
            .unwrap()
            .is_dir()
    );

    let target = b.0.join("target");
    std::fs::write(&target, "keep").unwrap();
    symlink(&target, b.dir().join("b.lock")).unwrap();
    let l = b.take("b.lock", SHORT).unwrap().unwrap();
    assert!(std::fs::symlink_metadata(l.path()).unwrap().is_file());
    assert_eq!(mode(l.path()), 0o600);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert_eq!(mode(&target), 0o644);
}

/// A lock file another user owns, or open to others, is replaced.
#[test]
fn a_foreign_lock_file_is_replaced() {
    if !root() {
        return;
    }
    let b = Base::new("file");
    b.take("c.lock", SHORT).unwrap().unwrap();
    let p = b.dir().join("c.lock");
    chown(&p, Some(65534), None).unwrap();
    let theirs = File::open(&p).unwrap();
    theirs.lock().unwrap();
    let l = b.take("c.lock", SHORT).unwrap().unwrap();
    assert_eq!(std::fs::metadata(l.path()).unwrap().uid(), 0);
    drop(l);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let theirs = File::open(&p).unwrap();
    theirs.lock().unwrap();
    let l = b.take("c.lock", SHORT).unwrap().unwrap();
    assert_eq!(mode(l.path()), 0o600);
}

/// No `/run` to make the directory in: no lock, no error (as before).
#[test]
fn no_lock_where_the_directory_cannot_be_made() {
    let missing = std::env::temp_dir().join("cni-lock-missing-base");
    assert!(take(&missing, SUBDIRS, "d.lock", SHORT).unwrap().is_none());
}

#[test]
fn timeout_from_the_environment() {
    let p = |s: &str| parse_timeout(Some(s.into()));
    assert_eq!(parse_timeout(None).unwrap(), DEFAULT_TIMEOUT);
    assert_eq!(p("").unwrap(), DEFAULT_TIMEOUT);
    assert_eq!(p("2").unwrap(), Duration::from_secs(2));
    assert_eq!(p(" 0.25 ").unwrap(), Duration::from_millis(250));
    assert_eq!(p("0").unwrap(), Duration::ZERO);
    assert_eq!(p(".5").unwrap(), Duration::from_millis(500));
    assert_eq!(p("600.").unwrap(), Duration::from_secs(600));
    assert_eq!(p("1.0000000019").unwrap(), Duration::new(1, 1));
    for bad in [
        "-1",
        "x",
        "inf",
        "NaN",
        "1e400",
        "30s",
        ".",
        "1.2.3",
        "+1",
        "99999999999999999999",
    ] {
        let e = p(bad).unwrap_err();
        assert_eq!(e.code, code::INVALID_ENV, "{bad}");
        assert!(e.msg.contains(TIMEOUT_VAR), "{e:?}");
    }
}

/// The short ways, to an existing directory ([`established`]) and to an
/// existing lock file ([`existing_file`]), refuse what the long way would
/// replace: a parent directory opened to writers after the fact (a lock
/// file not yet made then takes the long way, which moves it aside), a
/// tree of ours reached through a symlink, a file not closed to others.
#[test]
fn the_short_ways_refuse_what_the_long_way_replaces() {
    let b = Base::new("short");
    drop(b.take("e.lock", SHORT).unwrap().unwrap());
    assert!(established(&b.0, SUBDIRS).is_some());
    assert!(existing_file(&b.dir().join("e.lock")).is_some());
    assert!(existing_file(&b.dir().join("new.lock")).is_none());

    std::fs::set_permissions(b.0.join("cni-rcni"), std::fs::Permissions::from_mode(0o775)).unwrap();
    assert!(established(&b.0, SUBDIRS).is_none());
    b.take("f.lock", SHORT).unwrap().unwrap();
    assert_eq!(mode(&b.0.join("cni-rcni")), 0o700);
    assert_eq!(b.aside().len(), 1, "{:?}", b.aside());

    // A private tree, but under a symlink: replaced, not used.
    drop(b.take("e.lock", SHORT).unwrap().unwrap());
    let real = b.0.join("real");
    std::fs::rename(b.0.join("cni-rcni"), &real).unwrap();
    symlink(&real, b.0.join("cni-rcni")).unwrap();
    assert!(established(&b.0, SUBDIRS).is_none());
    assert!(existing_file(&b.dir().join("e.lock")).is_none());
    b.take("e.lock", SHORT).unwrap().unwrap();
    assert!(
        std::fs::symlink_metadata(b.0.join("cni-rcni"))
            .unwrap()
            .is_dir()
    );

    // A lock file opened to others is not taken as it is.
    let e = b.dir().join("e.lock");
    std::fs::set_permissions(&e, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(existing_file(&e).is_none());
    b.take("e.lock", SHORT).unwrap().unwrap();
    assert_eq!(mode(&e), 0o600);
}

/// A holder that unlocks and keeps its file open (the Go host-local's
/// `Unlock` before its `Close`) wakes no close watch: the waiter gets the
/// lock all the same, at its next try.
#[test]
fn a_release_without_a_close_is_seen_too() {
    let b = Base::new("unlock");
    let l = b.take("host-local.lock", SHORT).unwrap().unwrap();
    let holder = File::open(l.path()).unwrap();
    drop(l);
    holder.lock().unwrap();
    let t = Instant::now();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| b.take("host-local.lock", Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(100));
        holder.unlock().unwrap();
        assert!(waiter.join().unwrap().unwrap().is_some());
    });
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(holder);
}
