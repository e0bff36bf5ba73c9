//! Network namespaces: open one by path (with the reference's checks) and
//! run code inside it.
//!
//! Netns membership is per thread. [`NetNs::run`] enters the namespace on
//! the calling thread and switches back when the closure returns, panics
//! or not: a guard's `Drop` does it, so an early return can never leave the
//! caller in the wrong namespace. A thread per call (what this module did
//! first) cost 40–80 µs each, a fifth of a loopback ADD; `setns` costs ~1 µs.
//! If switching back ever failed, the process aborts rather than carry on
//! in the container's namespace (the Go plugins' `ns.Do` gives up the OS
//! thread for the same reason).
//!
//! nix wraps `statfs(2)`, `setns(2)` and `unshare(2)`; the one `unsafe`
//! call here is the `getsockopt(2)` of [`NetNs::cookie`], which nix lacks.

use crate::error::{NetError, libc_errno};
use nix::sched::{CloneFlags, setns, unshare};
use nix::sys::statfs::{NSFS_MAGIC, PROC_SUPER_MAGIC, statfs};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The calling thread's own network namespace. (`/proc/self/ns/net` would
/// be the main thread's, which differs on a thread that entered another.)
pub const THREAD_SELF_NS: &str = "/proc/thread-self/ns/net";

/// Opens `path` for reading, close-on-exec, in one system call: musl's
/// `open` (under `File::open`) follows an `O_CLOEXEC` open with an
/// `fcntl(F_SETFD)` for kernels older than 2.6.23, its `openat` does not,
/// and every plugin that enters a namespace opens two of them.
fn open_cloexec(path: &Path) -> std::io::Result<File> {
    use nix::fcntl::{AT_FDCWD, OFlag, openat};
    let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    Ok(File::from(openat(
        AT_FDCWD,
        path,
        flags,
        nix::sys::stat::Mode::empty(),
    )?))
}

/// An open network namespace, kept alive by its file descriptor.
#[derive(Debug)]
pub struct NetNs {
    file: File,
    path: PathBuf,
}

impl NetNs {
    /// Opens the namespace at `path` as the Go reference's `ns.GetNS` does:
    /// the path must be on nsfs or procfs.
    ///
    /// A missing path is [`NetError::NsNotFound`] (DEL treats the namespace as
    /// gone); another file system is [`NetError::NotNetNs`].
    pub fn open(path: impl AsRef<Path>) -> Result<NetNs, NetError> {
        let path = path.as_ref();
        let fs = statfs(path).map_err(|e| {
            if e as i32 == libc_errno::ENOENT {
                NetError::NsNotFound {
                    path: path.to_path_buf(),
                }
            } else {
                NetError::NsStatfs {
                    path: path.to_path_buf(),
                    errno: e as i32,
                }
            }
        })?;
        let kind = fs.filesystem_type();
        if kind != NSFS_MAGIC && kind != PROC_SUPER_MAGIC {
            return Err(NetError::NotNetNs {
                path: path.to_path_buf(),
                // The magic is a 32-bit value; the libc type is signed on
                // some targets, so go through the bit pattern.
                magic: u64::from(kind.0 as u32),
            });
        }
        let file =
            open_cloexec(path).map_err(|e| NetError::io(format!("open {}", path.display()), e))?;
        log::debug!("opened netns {}", path.display());
        Ok(NetNs {
            file,
            path: path.to_path_buf(),
        })
    }

    /// [`NetNs::open`], with a namespace that is gone
    /// ([`NetError::NsNotFound`]) as `None`: what DEL finds when the
    /// runtime removed it first, or calls DEL twice.
    pub fn open_if_present(path: impl AsRef<Path>) -> Result<Option<NetNs>, NetError> {
        match NetNs::open(path) {
            Ok(ns) => Ok(Some(ns)),
            Err(e) if e.is_ns_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The calling thread's network namespace.
    pub fn current() -> Result<NetNs, NetError> {
        NetNs::open(THREAD_SELF_NS)
    }

    /// Creates a new, empty network namespace (only `lo`, down) that lives as
    /// long as the returned handle, with no name in `/run/netns`. Needs
    /// CAP_SYS_ADMIN. Meant for tests: nothing is left behind.
    pub fn new_anonymous() -> Result<NetNs, NetError> {
        let spawned = std::thread::Builder::new()
            .name("netns-new".into())
            .spawn(|| {
                unshare(CloneFlags::CLONE_NEWNET)
                    .map_err(|e| NetError::errno("unshare(CLONE_NEWNET)", e as i32))?;
                NetNs::current()
            })
            .map_err(|e| NetError::io("spawn netns thread", e))?;
        match spawned.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    /// The path this namespace was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when both handles refer to the same namespace.
    pub fn is_same(&self, other: &NetNs) -> bool {
        match (self.file.metadata(), other.file.metadata()) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    /// The namespace's identity (device and inode of its nsfs file): equal
    /// for two handles of one namespace, also across processes.
    pub fn id(&self) -> Option<(u64, u64)> {
        self.stat_id().ok()
    }

    /// [`NetNs::id`], or why the namespace's file could not be read
    /// (`stat <path>: …`).
    pub fn stat_id(&self) -> Result<(u64, u64), NetError> {
        let meta = self
            .file
            .metadata()
            .map_err(|e| NetError::io(format!("stat {}", self.path.display()), e))?;
        Ok((meta.dev(), meta.ino()))
    }

    /// The kernel's cookie of this namespace (`SO_NETNS_COOKIE`, Linux
    /// 5.14+), read from a socket made inside it: a number given to each
    /// network namespace at creation and never given to another until the
    /// machine reboots. [`NetNs::id`] alone cannot tell a namespace from a
    /// later one at the same path: the kernel hands a dead namespace's inode
    /// number to the next one it creates (`ip netns del x; ip netns add x`
    /// gets the same inode within a second). `None` on a kernel without it.
    pub fn cookie(&self) -> Result<Option<u64>, NetError> {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
        let sock = self
            .run(|| {
                socket(
                    AddressFamily::Unix,
                    SockType::Datagram,
                    SockFlag::SOCK_CLOEXEC,
                    None,
                )
            })?
            .map_err(|e| NetError::errno("socket(AF_UNIX) in the netns", e as i32))?;
        match netns_cookie(&sock) {
            Ok(c) => Ok(Some(c)),
            Err(nix::libc::ENOPROTOOPT) => Ok(None),
            Err(e) => Err(NetError::errno("getsockopt(SO_NETNS_COOKIE)", e)),
        }
    }

    /// Runs `f` inside this namespace, on the calling thread, and returns
    /// its value; the thread is back in its own namespace afterwards.
    ///
    /// Use it for anything resolved against the calling thread's netns:
    /// `/proc/sys/net` ([`crate::sysctl`]), sockets (a socket stays in the
    /// namespace it was created in). Threads and processes started inside
    /// `f` start in this namespace. Fails only when the namespace cannot be
    /// entered (or the current one not opened to come back to).
    pub fn run<F, R>(&self, f: F) -> Result<R, NetError>
    where
        F: FnOnce() -> R,
    {
        let home = open_cloexec(Path::new(THREAD_SELF_NS))
            .map_err(|e| NetError::io(format!("open {THREAD_SELF_NS}"), e))?;
        setns(&self.file, CloneFlags::CLONE_NEWNET).map_err(|e| {
            NetError::errno(
                format!("enter netns {:?}", self.path.display().to_string()),
                e as i32,
            )
        })?;
        let back = ReturnHome(home);
        let value = f();
        drop(back);
        Ok(value)
    }
}

/// `SO_NETNS_COOKIE` (asm-generic; sparc numbers it differently).
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_NETNS_COOKIE: nix::libc::c_int = 71;
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_NETNS_COOKIE: nix::libc::c_int = 0x50;

/// `getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE)`, or the errno.
#[allow(unsafe_code)]
fn netns_cookie(sock: &std::os::fd::OwnedFd) -> Result<u64, i32> {
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as nix::libc::socklen_t;
    // SAFETY: `cookie` and `len` are live locals the kernel writes at most
    // `len` (8) bytes and one socklen_t into; the fd is open for the call.
    let r = unsafe {
        nix::libc::getsockopt(
            sock.as_raw_fd(),
            nix::libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&raw mut cookie).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(nix::errno::Errno::last_raw());
    }
    if len as usize != std::mem::size_of::<u64>() {
        return Err(nix::libc::EINVAL);
    }
    Ok(cookie)
}

/// Switches the calling thread back into the namespace it holds when
/// dropped.
struct ReturnHome(File);

impl Drop for ReturnHome {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.0, CloneFlags::CLONE_NEWNET) {
            // Going on would configure the container's namespace as if it
            // were the host's (or the reverse): stop here.
            log::error!("cannot return to the original network namespace: {e}; aborting");
            std::process::abort();
        }
    }
}

impl AsFd for NetNs {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl AsRawFd for NetNs {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::skip_unless_root;

    #[test]
    fn cookie_tells_a_namespace_from_a_later_one() {
        if skip_unless_root("cookie_tells_a_namespace_from_a_later_one") {
            return;
        }
        let me = NetNs::current().unwrap();
        let Some(mine) = me.cookie().unwrap() else {
            eprintln!("SKIP: this kernel has no SO_NETNS_COOKIE");
            return;
        };
        assert_eq!(NetNs::current().unwrap().cookie().unwrap(), Some(mine));
        let a = NetNs::new_anonymous().unwrap();
        let ca = a.cookie().unwrap().unwrap();
        drop(a);
        let b = NetNs::new_anonymous().unwrap();
        let cb = b.cookie().unwrap().unwrap();
        assert!(ca != mine && cb != mine && ca != cb, "{mine} {ca} {cb}");
    }

    #[test]
    fn open_missing_path() {
        let e = NetNs::open("/nonexistent/netns").unwrap_err();
        assert!(e.is_ns_not_found());
        assert_eq!(
            e.to_string(),
            r#"failed to Statfs "/nonexistent/netns": no such file or directory"#
        );
        assert!(
            NetNs::open_if_present("/nonexistent/netns")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn open_regular_file() {
        let dir = std::env::temp_dir().join(format!("cni-net-notns-{}", std::process::id()));
        std::fs::write(&dir, b"x").unwrap();
        let e = NetNs::open(&dir).unwrap_err();
        let present = NetNs::open_if_present(&dir).map(|ns| ns.is_some());
        let _ = std::fs::remove_file(&dir);
        assert!(
            matches!(present, Err(NetError::NotNetNs { .. })),
            "{present:?}"
        );
        assert!(matches!(e, NetError::NotNetNs { .. }), "{e:?}");
        assert!(e.to_string().starts_with(&format!(
            "unknown FS magic on {:?}: ",
            dir.display().to_string()
        )));
        assert!(!e.is_ns_not_found());
    }

    #[test]
    fn current_and_run() {
        let me = NetNs::current().unwrap();
        assert!(me.is_same(&NetNs::current().unwrap()));
        // setns(2) needs CAP_SYS_ADMIN, even into our own namespace.
        match me.run(|| 41 + 1) {
            Ok(v) => assert_eq!(v, 42),
            Err(e) => {
                assert!(!crate::testutil::is_root(), "{e}");
                assert_eq!(
                    e.to_string(),
                    r#"enter netns "/proc/thread-self/ns/net": Operation not permitted (os error 1)"#
                );
            }
        }
    }

    #[test]
    fn anonymous_namespaces_are_distinct() {
        if skip_unless_root("netns::anonymous_namespaces_are_distinct") {
            return;
        }
        let a = NetNs::new_anonymous().unwrap();
        let b = NetNs::new_anonymous().unwrap();
        let me = NetNs::current().unwrap();
        assert!(!a.is_same(&b) && !a.is_same(&me));
        // Inside `a`, `a` is the thread's own namespace; after, ours again.
        let inside = a.run(|| NetNs::current().unwrap()).unwrap();
        assert!(inside.is_same(&a));
        assert!(NetNs::current().unwrap().is_same(&me));
        // Nested: back to `a`, then to ours.
        let (in_b, back_in_a) = a
            .run(|| {
                let in_b = b.run(|| NetNs::current().unwrap()).unwrap();
                (in_b, NetNs::current().unwrap())
            })
            .unwrap();
        assert!(in_b.is_same(&b) && back_in_a.is_same(&a));
        assert!(NetNs::current().unwrap().is_same(&me));
    }

    #[test]
    fn run_returns_home_when_the_closure_panics() {
        if skip_unless_root("netns::run_returns_home_when_the_closure_panics") {
            return;
        }
        let a = NetNs::new_anonymous().unwrap();
        let me = NetNs::current().unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            a.run(|| panic!("inside")).unwrap();
        }));
        assert!(caught.is_err());
        assert!(NetNs::current().unwrap().is_same(&me));
    }
}
