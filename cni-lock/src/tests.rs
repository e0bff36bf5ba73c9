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
    fn take(&self, name: &str, remove: bool, timeout: Duration) -> Result<Option<Lock>, CniError> {
        take(&self.0, SUBDIRS, name, remove, timeout)
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
    let l = b.take("portmap.lock", false, SHORT).unwrap().unwrap();
    assert_eq!(l.path(), b.dir().join("portmap.lock"));
    assert_eq!(mode(&b.0.join("cni-rcni")), 0o700);
    assert_eq!(mode(&b.dir()), 0o700);
    assert_eq!(mode(l.path()), 0o600);
    // A second open file description is refused while the first holds it.
    let t = Instant::now();
    let e = b.take("portmap.lock", false, SHORT).unwrap_err();
    let waited = t.elapsed();
    assert!(waited >= SHORT && waited < SHORT * 5, "{waited:?}");
    assert_eq!(e.code, code::TRY_AGAIN_LATER);
    assert!(e.msg.contains(&l.path().display().to_string()), "{e:?}");
    assert!(e.details.contains(TIMEOUT_VAR), "{e:?}");
    drop(l);
    // Released: taken at once; the named file stays.
    b.take("portmap.lock", false, Duration::ZERO)
        .unwrap()
        .unwrap();
    assert!(b.dir().join("portmap.lock").exists());
}

#[test]
fn a_waiter_gets_the_lock_when_it_is_released() {
    let b = Base::new("wait");
    let l = b.take("firewall.lock", false, SHORT).unwrap().unwrap();
    let t = Instant::now();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| b.take("firewall.lock", false, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(100));
        drop(l);
        let got = waiter.join().unwrap().unwrap().unwrap();
        assert!(got.path().exists());
    });
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

/// A namespace's lock file goes with its release, and a waiter that got the
/// removed file's lock takes the new file's instead.
#[test]
fn removable_lock_goes_on_release_and_a_waiter_starts_again() {
    let b = Base::new("netns");
    let name = "netns-4-4026531840.lock";
    let l = b.take(name, true, SHORT).unwrap().unwrap();
    let path = l.path().to_path_buf();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| b.take(name, true, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(100));
        drop(l);
        let got = waiter.join().unwrap().unwrap().unwrap();
        // The waiter holds the file now at the name, not the removed one
        // (whose inode number the new file may have got again).
        let now = std::fs::metadata(&path).unwrap().ino();
        assert_eq!(got.file.metadata().unwrap().ino(), now);
        assert_eq!(got.file.metadata().unwrap().nlink(), 1);
        drop(got);
    });
    assert!(!path.exists());
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
        let l = b.take("portmap.lock", false, SHORT).unwrap().unwrap();
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
    b.take("x.lock", false, SHORT).unwrap().unwrap();
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
    b.take("a.lock", false, SHORT).unwrap().unwrap();
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
    assert!(
        std::fs::symlink_metadata(b.0.join("cni-rcni"))
            .unwrap()
            .is_dir()
    );

    let target = b.0.join("target");
    std::fs::write(&target, "keep").unwrap();
    symlink(&target, b.dir().join("b.lock")).unwrap();
    let l = b.take("b.lock", false, SHORT).unwrap().unwrap();
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
    b.take("c.lock", false, SHORT).unwrap().unwrap();
    let p = b.dir().join("c.lock");
    chown(&p, Some(65534), None).unwrap();
    let theirs = File::open(&p).unwrap();
    theirs.lock().unwrap();
    let l = b.take("c.lock", false, SHORT).unwrap().unwrap();
    assert_eq!(std::fs::metadata(l.path()).unwrap().uid(), 0);
    drop(l);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let theirs = File::open(&p).unwrap();
    theirs.lock().unwrap();
    let l = b.take("c.lock", false, SHORT).unwrap().unwrap();
    assert_eq!(mode(l.path()), 0o600);
}

/// No `/run` to make the directory in: no lock, no error (as before).
#[test]
fn no_lock_where_the_directory_cannot_be_made() {
    let missing = std::env::temp_dir().join("cni-lock-missing-base");
    assert!(
        take(&missing, SUBDIRS, "d.lock", false, SHORT)
            .unwrap()
            .is_none()
    );
}

#[test]
fn timeout_from_the_environment() {
    let p = |s: &str| parse_timeout(Some(s.into()));
    assert_eq!(parse_timeout(None).unwrap(), DEFAULT_TIMEOUT);
    assert_eq!(p("").unwrap(), DEFAULT_TIMEOUT);
    assert_eq!(p("2").unwrap(), Duration::from_secs(2));
    assert_eq!(p(" 0.25 ").unwrap(), Duration::from_millis(250));
    assert_eq!(p("0").unwrap(), Duration::ZERO);
    for bad in ["-1", "x", "inf", "NaN", "1e400", "30s"] {
        let e = p(bad).unwrap_err();
        assert_eq!(e.code, code::INVALID_ENV, "{bad}");
        assert!(e.msg.contains(TIMEOUT_VAR), "{e:?}");
    }
}

/// The short way to an existing directory ([`established`]) refuses what
/// the long way would replace: a parent opened to writers after the fact,
/// a tree of ours reached through a symlink.
#[test]
fn the_short_way_refuses_what_the_long_way_replaces() {
    let b = Base::new("short");
    drop(b.take("e.lock", false, SHORT).unwrap().unwrap());
    assert!(established(&b.0, SUBDIRS).is_some());

    std::fs::set_permissions(b.0.join("cni-rcni"), std::fs::Permissions::from_mode(0o775)).unwrap();
    assert!(established(&b.0, SUBDIRS).is_none());
    b.take("e.lock", false, SHORT).unwrap().unwrap();
    assert_eq!(mode(&b.0.join("cni-rcni")), 0o700);
    assert_eq!(b.aside().len(), 1, "{:?}", b.aside());

    // A private tree, but under a symlink: replaced, not used.
    let real = b.0.join("real");
    std::fs::rename(b.0.join("cni-rcni"), &real).unwrap();
    symlink(&real, b.0.join("cni-rcni")).unwrap();
    assert!(established(&b.0, SUBDIRS).is_none());
    b.take("e.lock", false, SHORT).unwrap().unwrap();
    assert!(
        std::fs::symlink_metadata(b.0.join("cni-rcni"))
            .unwrap()
            .is_dir()
    );
}
