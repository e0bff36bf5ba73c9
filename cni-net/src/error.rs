//! The error type of every `cni-net` operation.
//!
//! Messages name the operation and the object, then the kernel's answer:
//! `create veth vethab12cd34 <-> eth0: File exists (os error 17)`.
//! The netns errors reproduce the Go reference's texts exactly, because
//! runtimes and tests match on them.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// What went wrong in a namespace, netlink or sysctl operation.
#[derive(Debug)]
#[non_exhaustive]
pub enum NetError {
    /// The netns path does not exist. DEL treats this as "already gone".
    /// Prints `failed to Statfs "<p>": no such file or directory`.
    NsNotFound {
        /// The path that was given.
        path: PathBuf,
    },
    /// `statfs` on the netns path failed for another reason.
    /// Prints `failed to Statfs "<p>": <reason>`.
    NsStatfs {
        /// The path that was given.
        path: PathBuf,
        /// The errno from `statfs(2)`.
        errno: i32,
    },
    /// The path exists but is not on nsfs or procfs.
    /// Prints `unknown FS magic on "<p>": <hex>`.
    NotNetNs {
        /// The path that was given.
        path: PathBuf,
        /// The file system's magic number.
        magic: u64,
    },
    /// A system call or netlink request failed with an errno.
    Os {
        /// The operation and its object, e.g. `set lo up`.
        op: String,
        /// The error; its `raw_os_error()` is the errno.
        source: io::Error,
        /// The kernel's own explanation (netlink extended ACK), if it sent
        /// one: "Unknown device type", "Nexthop has invalid gateway".
        kernel: Option<String>,
    },
    /// Anything without an errno: a bad argument, an unexpected reply.
    Other {
        /// The operation and its object.
        op: String,
        /// What went wrong.
        msg: String,
    },
}

impl NetError {
    /// An error from an errno.
    pub fn errno(op: impl Into<String>, errno: i32) -> NetError {
        NetError::kernel(op, errno, None)
    }

    /// An errno from a netlink answer, with the kernel's extended-ACK text.
    pub fn kernel(op: impl Into<String>, errno: i32, text: Option<String>) -> NetError {
        NetError::Os {
            op: op.into(),
            source: io::Error::from_raw_os_error(errno),
            kernel: text,
        }
    }

    /// An error from an `io::Error`.
    pub fn io(op: impl Into<String>, source: io::Error) -> NetError {
        NetError::Os {
            op: op.into(),
            source,
            kernel: None,
        }
    }

    /// An error without an errno.
    pub fn other(op: impl Into<String>, msg: impl Into<String>) -> NetError {
        NetError::Other {
            op: op.into(),
            msg: msg.into(),
        }
    }

    /// The errno behind this error, if there is one (ENOENT for [`NetError::NsNotFound`]).
    pub fn raw_errno(&self) -> Option<i32> {
        match self {
            NetError::NsNotFound { .. } => Some(libc_errno::ENOENT),
            NetError::NsStatfs { errno, .. } => Some(*errno),
            NetError::Os { source, .. } => source.raw_os_error(),
            NetError::NotNetNs { .. } | NetError::Other { .. } => None,
        }
    }

    /// The kernel's reason alone, spelled as Go prints an errno (`file
    /// exists`, `no such device`); the whole text when there is no errno.
    /// For messages that name the operation themselves, as the reference's do.
    pub fn reason(&self) -> String {
        match self {
            NetError::Os { source, .. } => match source.raw_os_error() {
                Some(n) => go_errno_text(n),
                None => source.to_string(),
            },
            NetError::Other { msg, .. } => msg.clone(),
            other => other.to_string(),
        }
    }

    /// True when the netns path does not exist.
    pub fn is_ns_not_found(&self) -> bool {
        matches!(self, NetError::NsNotFound { .. })
    }

    /// True when the kernel said the object already exists (EEXIST).
    pub fn is_exists(&self) -> bool {
        matches!(self, NetError::Os { .. }) && self.raw_errno() == Some(libc_errno::EEXIST)
    }

    /// True when the object (link, address, route, netns path) does not
    /// exist: ENODEV, ENOENT, ESRCH or EADDRNOTAVAIL.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self.raw_errno(),
            Some(
                libc_errno::ENODEV
                    | libc_errno::ENOENT
                    | libc_errno::ESRCH
                    | libc_errno::EADDRNOTAVAIL
            )
        )
    }
}

/// The errno values this crate matches on (Linux, all architectures).
pub(crate) mod libc_errno {
    use nix::errno::Errno;
    pub const ENOENT: i32 = Errno::ENOENT as i32;
    pub const ESRCH: i32 = Errno::ESRCH as i32;
    pub const EEXIST: i32 = Errno::EEXIST as i32;
    pub const EBUSY: i32 = Errno::EBUSY as i32;
    pub const ENODEV: i32 = Errno::ENODEV as i32;
    pub const EADDRNOTAVAIL: i32 = Errno::EADDRNOTAVAIL as i32;
}

/// Go's spelling of an errno: `strerror` with a lower-case first letter
/// (`no such file or directory`, `permission denied`).
pub(crate) fn go_errno_text(errno: i32) -> String {
    let text = nix::errno::Errno::from_raw(errno).desc();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => format!("errno {errno}"),
    }
}

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::NsNotFound { path } => write!(
                f,
                "failed to Statfs {:?}: {}",
                path.display().to_string(),
                go_errno_text(libc_errno::ENOENT)
            ),
            NetError::NsStatfs { path, errno } => write!(
                f,
                "failed to Statfs {:?}: {}",
                path.display().to_string(),
                go_errno_text(*errno)
            ),
            NetError::NotNetNs { path, magic } => {
                write!(
                    f,
                    "unknown FS magic on {:?}: {magic:x}",
                    path.display().to_string()
                )
            }
            NetError::Os {
                op,
                source,
                kernel: None,
            } => write!(f, "{op}: {source}"),
            NetError::Os {
                op,
                source,
                kernel: Some(text),
            } => write!(f, "{op}: {source} ({text})"),
            NetError::Other { op, msg } => write!(f, "{op}: {msg}"),
        }
    }
}

impl std::error::Error for NetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NetError::Os { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        let e = NetError::NsNotFound { path: "/x".into() };
        assert_eq!(
            e.to_string(),
            r#"failed to Statfs "/x": no such file or directory"#
        );
        assert!(e.is_ns_not_found() && e.is_not_found());
        let e = NetError::NsStatfs {
            path: "/y".into(),
            errno: Errno::EACCES as i32,
        };
        assert_eq!(e.to_string(), r#"failed to Statfs "/y": permission denied"#);
        let e = NetError::NotNetNs {
            path: "/tmp/f".into(),
            magic: 0x0102_1994,
        };
        assert_eq!(e.to_string(), r#"unknown FS magic on "/tmp/f": 1021994"#);
        let e = NetError::errno("create veth vethab12cd34 <-> eth0", libc_errno::EEXIST);
        assert_eq!(
            e.to_string(),
            "create veth vethab12cd34 <-> eth0: File exists (os error 17)"
        );
        assert!(e.is_exists() && !e.is_not_found());
        assert!(NetError::errno("del link", libc_errno::ENODEV).is_not_found());
        assert_eq!(NetError::other("parse mac", "bad").raw_errno(), None);
        let e = NetError::kernel("create link x", 95, Some("Unknown device type".into()));
        assert_eq!(
            e.to_string(),
            "create link x: Operation not supported (os error 95) (Unknown device type)"
        );
        assert_eq!(e.raw_errno(), Some(95));
    }

    use nix::errno::Errno;
}
