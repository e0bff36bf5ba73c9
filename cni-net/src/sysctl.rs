//! Network sysctls under `/proc/sys/net`.
//!
//! `/proc/sys/net` resolves against the **calling thread's** network
//! namespace, so for a container call these inside [`crate::NetNs::run`].
//! (Never use `/sys/class/net` for a container: sysfs belongs to the
//! namespace that mounted it.)
//!
//! Keys are slash-separated and start with `net/`: `net/ipv4/ip_forward`,
//! `net/ipv6/conf/br.100/accept_ra`. As in the Go reference, a key is
//! dot-separated (`net.ipv4.ip_forward`) only if a `.` comes before any `/`.

use crate::error::NetError;
use nix::errno::Errno;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The file behind a key, refusing anything outside `/proc/sys/net`.
pub fn path(key: &str) -> Result<PathBuf, NetError> {
    let key = match (key.find('.'), key.find('/')) {
        (Some(dot), Some(slash)) if dot < slash => key.replace('.', "/"),
        (Some(_), None) => key.replace('.', "/"),
        _ => key.to_string(),
    };
    let parts: Vec<&str> = key.split('/').collect();
    let bad = parts.first() != Some(&"net")
        || parts.len() < 2
        || parts
            .iter()
            .any(|p| p.is_empty() || *p == "." || *p == "..");
    if bad {
        return Err(NetError::other(
            format!("sysctl {key}"),
            "not a key under /proc/sys/net",
        ));
    }
    Ok(PathBuf::from("/proc/sys").join(key))
}

/// Reads a sysctl, without the trailing newline.
pub fn read(key: &str) -> Result<String, NetError> {
    let p = path(key)?;
    let mut f = open(&p, false).map_err(|e| NetError::io(format!("read {}", p.display()), e))?;
    read_value(&mut f).map_err(|e| NetError::io(format!("read {}", p.display()), e))
}

/// Opens a sysctl file without following any symbolic link on the way
/// (`openat2` with `RESOLVE_NO_SYMLINKS`; where a seccomp filter hides
/// `openat2`, `O_NOFOLLOW` on the last component), and only if it is on
/// procfs: a key can never reach a file outside `/proc/sys/net`, whatever
/// the mounts or links below `/proc` are.
fn open(p: &Path, write: bool) -> std::io::Result<File> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let mode = if write {
        OFlag::O_RDWR
    } else {
        OFlag::O_RDONLY
    };
    let how = OpenHow::new()
        .flags(mode | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let file = match openat2(nix::fcntl::AT_FDCWD, p, how) {
        Ok(fd) => File::from(fd),
        Err(Errno::ENOSYS | Errno::EPERM) => OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(libc_o_nofollow())
            .open(p)?,
        Err(e) => return Err(e.into()),
    };
    let fs = nix::sys::statfs::fstatfs(&file)?;
    if fs.filesystem_type() != nix::sys::statfs::PROC_SUPER_MAGIC {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a sysctl (not on procfs)",
        ));
    }
    Ok(file)
}

/// `O_NOFOLLOW` as `OpenOptionsExt::custom_flags` takes it.
fn libc_o_nofollow() -> i32 {
    nix::fcntl::OFlag::O_NOFOLLOW.bits()
}

/// The whole value from the start of an open sysctl file. A sysctl read
/// hands out its value in one piece, so a read that leaves room in the
/// buffer has it all (saving the second, empty read and the `fstat` that
/// `read_to_string` spends; these files are opened on every ADD).
fn read_value(f: &mut File) -> std::io::Result<String> {
    let mut buf = [0u8; 128];
    let n = f.read(&mut buf)?;
    let mut bytes = buf[..n].to_vec();
    if n == buf.len() {
        f.read_to_end(&mut bytes)?;
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok(text.trim_end_matches('\n').to_string())
}

/// Writes `value` unless the sysctl already holds it. Returns whether it wrote.
///
/// One open for both ([`hold`], then [`Held::set`]): read, then (if
/// different) write at offset 0 (with `kernel.sysctl_writes_strict`, the
/// default, a write elsewhere is ignored). Where the file cannot be opened
/// for writing (a read-only `/proc/sys`), an equal value is still success,
/// as it needs no write.
pub fn write(key: &str, value: &str) -> Result<bool, NetError> {
    hold(key)?.set(value)
}

/// A sysctl opened once to read its value and later write a new one: what
/// [`read`] then [`write`] do with one open (and one read) instead of two.
/// Where the file cannot be opened for writing (a read-only `/proc/sys`),
/// it is read, and [`Held::set`] of an equal value is still success.
#[derive(Debug)]
pub struct Held {
    path: PathBuf,
    file: Option<File>,
    denied: Option<std::io::Error>,
    value: String,
}

/// Opens the sysctl behind `key` for reading and writing, and reads it.
/// Fails as [`read`] would.
pub fn hold(key: &str) -> Result<Held, NetError> {
    let p = path(key)?;
    let read_err = |e| NetError::io(format!("read {}", p.display()), e);
    let (mut f, writable, denied) = match open(&p, true) {
        Ok(f) => (f, true, None),
        Err(e)
            if matches!(
                e.raw_os_error().map(Errno::from_raw),
                Some(Errno::EROFS | Errno::EACCES)
            ) =>
        {
            (open(&p, false).map_err(read_err)?, false, Some(e))
        }
        Err(e) => return Err(read_err(e)),
    };
    let value = read_value(&mut f).map_err(read_err)?;
    Ok(Held {
        file: writable.then_some(f),
        path: p,
        denied,
        value,
    })
}

impl Held {
    /// The value it had when opened (or last set), without the newline.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Writes `value` unless the sysctl holds it already (as [`write`]):
    /// whether it wrote.
    pub fn set(&mut self, value: &str) -> Result<bool, NetError> {
        if self.value.trim() == value.trim() {
            return Ok(false);
        }
        let write_err = |e| NetError::io(format!("write {value:?} to {}", self.path.display()), e);
        let Some(f) = &self.file else {
            let e = self
                .denied
                .take()
                .unwrap_or_else(|| std::io::ErrorKind::PermissionDenied.into());
            return Err(write_err(e));
        };
        log::debug!(
            "sysctl {} = {value} (was {})",
            self.path.display(),
            self.value
        );
        f.write_all_at(value.as_bytes(), 0).map_err(write_err)?;
        self.value = value.to_string();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NetNs;
    use crate::testutil::skip_unless_root;

    #[test]
    fn key_paths() {
        assert_eq!(
            path("net/ipv4/ip_forward").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/ip_forward")
        );
        assert_eq!(
            path("net.ipv4.ip_forward").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/ip_forward")
        );
        assert_eq!(
            path("net/ipv6/conf/br.100/accept_ra").unwrap(),
            PathBuf::from("/proc/sys/net/ipv6/conf/br.100/accept_ra")
        );
        for bad in [
            "",
            "net",
            "kernel/hostname",
            "net/../kernel/x",
            "net//x",
            "/net/x",
            "net/./x",
        ] {
            assert!(path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn open_refuses_symlinks_and_other_file_systems() {
        let dir = std::env::temp_dir().join(format!("cni-net-sysctl-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("plain");
        std::fs::write(&plain, "1").unwrap();
        let e = open(&plain, false).unwrap_err();
        assert!(e.to_string().contains("not on procfs"), "{e}");
        let file_link = dir.join("file-link");
        std::os::unix::fs::symlink("/proc/sys/net/ipv4/ip_forward", &file_link).unwrap();
        assert!(open(&file_link, false).is_err());
        let dir_link = dir.join("dir-link");
        std::os::unix::fs::symlink("/proc/sys/net", &dir_link).unwrap();
        assert!(open(&dir_link.join("ipv4/ip_forward"), false).is_err());
        assert!(open(Path::new("/proc/sys/net/ipv4/ip_forward"), false).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn read_write_in_private_netns() {
        if skip_unless_root("sysctl::read_write_in_private_netns") {
            return;
        }
        let host_before = read("net/ipv4/ip_forward").unwrap();
        let ns = NetNs::new_anonymous().unwrap();
        let (before, wrote, again, after) = ns
            .run(|| {
                let before = read("net/ipv4/ip_forward").unwrap();
                let wrote = write("net/ipv4/ip_forward", "1").unwrap();
                let again = write("net/ipv4/ip_forward", "1").unwrap();
                (before, wrote, again, read("net.ipv4.ip_forward").unwrap())
            })
            .unwrap();
        assert_eq!(after, "1");
        assert_eq!(wrote, before != "1");
        assert!(!again, "an unchanged value is not written");
        // The namespace's own value, not ours.
        assert_eq!(read("net/ipv4/ip_forward").unwrap(), host_before);
        let e = ns
            .run(|| read("net/ipv4/conf/nosuchdev/forwarding"))
            .unwrap()
            .unwrap_err();
        assert!(e.is_not_found(), "{e}");
        assert!(
            e.to_string()
                .starts_with("read /proc/sys/net/ipv4/conf/nosuchdev/forwarding: "),
            "{e}"
        );
        // Not writable (mode 0444): an equal value needs no write and
        // succeeds, another one is an error naming the write.
        let key = "net/ipv4/tcp_available_congestion_control";
        let (same, other) = ns
            .run(|| {
                let current = read(key).unwrap();
                (write(key, &current), write(key, "rcni-no-such"))
            })
            .unwrap();
        assert!(!same.unwrap());
        let e = other.unwrap_err().to_string();
        assert!(e.starts_with("write \"rcni-no-such\" to /proc/sys/"), "{e}");
    }

    #[test]
    fn held_sysctls_read_and_write_as_read_and_write_do() {
        if skip_unless_root("sysctl::held_sysctls_read_and_write_as_read_and_write_do") {
            return;
        }
        let ns = NetNs::new_anonymous().unwrap();
        ns.run(|| {
            let key = "net/ipv4/conf/lo/rp_filter";
            let mut h = hold(key).unwrap();
            assert_eq!(h.value(), read(key).unwrap());
            let other = if h.value() == "2" { "1" } else { "2" };
            assert!(h.set(other).unwrap());
            assert_eq!(read(key).unwrap(), other);
            assert_eq!(h.value(), other);
            assert!(!h.set(other).unwrap(), "an unchanged value is not written");
            // Missing: the error read gives.
            let e = hold("net/ipv4/conf/nosuchdev/forwarding").unwrap_err();
            assert!(e.is_not_found(), "{e}");
            assert_eq!(
                e.to_string(),
                read("net/ipv4/conf/nosuchdev/forwarding")
                    .unwrap_err()
                    .to_string()
            );
            // Not writable (0444): read; an equal value is success, another
            // the error write gives.
            let key = "net/ipv4/tcp_available_congestion_control";
            let mut h = hold(key).unwrap();
            let current = h.value().to_string();
            assert_eq!(current, read(key).unwrap());
            assert!(!h.set(&current).unwrap());
            assert_eq!(
                h.set("rcni-no-such").unwrap_err().to_string(),
                write(key, "rcni-no-such").unwrap_err().to_string()
            );
        })
        .unwrap();
    }
}
