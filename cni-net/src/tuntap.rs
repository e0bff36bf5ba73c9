//! Persistent TAP devices, made the only way the kernel allows: ioctls on
//! `/dev/net/tun` (rtnetlink refuses to create tun/tap links).
//!
//! [`create_persistent_tap`] works in the calling thread's network
//! namespace (the tun file's namespace is the opener's): call it inside
//! [`crate::NetNs::run`] to make the device in a container.

use crate::error::{NetError, libc_errno};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// `IFF_TAP`: an Ethernet device.
const IFF_TAP: i16 = 0x0002;
/// `IFF_NO_PI`: no packet-information header in front of each frame.
const IFF_NO_PI: i16 = 0x1000;
/// `IFF_MULTI_QUEUE`: several file descriptors may attach.
const IFF_MULTI_QUEUE: i16 = 0x0100;
/// `IFF_TUN_EXCL`: fail with EBUSY if the name is taken, instead of
/// attaching to an existing tun/tap device of that name.
const IFF_TUN_EXCL: i16 = 0x8000u16 as i16;

/// What to create.
#[derive(Debug, Clone, Copy)]
pub struct TapOpts<'a> {
    /// The device name (at most 15 bytes).
    pub name: &'a str,
    /// `IFF_MULTI_QUEUE`: the consumer must attach with the same flag.
    pub multi_queue: bool,
    /// The user allowed to attach (`TUNSETOWNER`); `None`: any.
    pub owner: Option<u32>,
    /// The group allowed to attach (`TUNSETGROUP`); `None`: any.
    pub group: Option<u32>,
}

/// `struct ifreq` as TUNSETIFF reads it: the name, then the flags (the
/// rest of the 40-byte union unused).
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: i16,
    _rest: [u8; 22],
}

/// The four ioctls, in the one place that needs `unsafe`.
#[allow(unsafe_code)]
mod ioctl {
    use super::IfReq;
    use nix::libc::c_int;

    nix::ioctl_readwrite_bad!(
        tunsetiff,
        nix::request_code_write!(b'T', 202, std::mem::size_of::<c_int>()),
        IfReq
    );
    nix::ioctl_write_int_bad!(
        tunsetpersist,
        nix::request_code_write!(b'T', 203, std::mem::size_of::<c_int>())
    );
    nix::ioctl_write_int_bad!(
        tunsetowner,
        nix::request_code_write!(b'T', 204, std::mem::size_of::<c_int>())
    );
    nix::ioctl_write_int_bad!(
        tunsetgroup,
        nix::request_code_write!(b'T', 206, std::mem::size_of::<c_int>())
    );

    /// TUNSETIFF on `fd`.
    pub fn set_iff(fd: c_int, req: &mut IfReq) -> nix::Result<()> {
        // SAFETY: `fd` is an open /dev/net/tun descriptor and `req` a valid,
        // exclusively borrowed `struct ifreq` layout (40 bytes) that the
        // kernel reads and writes back within the call.
        unsafe { tunsetiff(fd, req) }.map(drop)
    }

    /// An integer-argument tun ioctl (`TUNSETOWNER`, `TUNSETGROUP`,
    /// `TUNSETPERSIST`) on `fd`. The kernel reads the argument as an
    /// unsigned long, which is why a uid above `i32::MAX` goes through
    /// its bit pattern.
    pub fn set_int(fd: c_int, which: Int, value: u32) -> nix::Result<()> {
        let value = value as c_int;
        // SAFETY: `fd` is an open /dev/net/tun descriptor; these requests
        // take their argument by value and touch no user memory.
        unsafe {
            match which {
                Int::Owner => tunsetowner(fd, value),
                Int::Group => tunsetgroup(fd, value),
                Int::Persist => tunsetpersist(fd, value),
            }
        }
        .map(drop)
    }

    /// The integer-argument requests.
    pub enum Int {
        Owner,
        Group,
        Persist,
    }
}

/// Opens `/dev/net/tun` and binds it to the tap `name` with `flags`
/// (TUNSETIFF): creates the device, or attaches to an existing one unless
/// `IFF_TUN_EXCL` is set (then a taken name is EEXIST).
fn open_tap(op: &str, name: &str, flags: i16) -> Result<File, NetError> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() > crate::MAX_IFNAME_LEN || bytes.contains(&0) {
        return Err(NetError::other(op, "invalid interface name"));
    }
    let tun = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| NetError::io(format!("{op}: open /dev/net/tun"), e))?;
    let mut req = IfReq {
        name: [0; 16],
        flags,
        _rest: [0; 22],
    };
    req.name[..bytes.len()].copy_from_slice(bytes);
    ioctl::set_iff(tun.as_raw_fd(), &mut req).map_err(|e| {
        // EBUSY is the kernel's answer to IFF_TUN_EXCL on a taken name. To
        // an attach it means the device's one queue is held by another file
        // (as while its creator has not yet closed it), and stays EBUSY.
        let errno = if e as i32 == libc_errno::EBUSY && flags & IFF_TUN_EXCL != 0 {
            libc_errno::EEXIST
        } else {
            e as i32
        };
        NetError::errno(op, errno)
    })?;
    Ok(tun)
}

/// The TUNSETIFF flags of a tap: no packet-information header, and
/// `IFF_MULTI_QUEUE` if asked.
fn tap_flags(multi_queue: bool) -> i16 {
    let mq = if multi_queue { IFF_MULTI_QUEUE } else { 0 };
    IFF_TAP | IFF_NO_PI | mq
}

/// Creates a persistent TAP device (`IFF_TAP|IFF_NO_PI`, plus
/// `IFF_MULTI_QUEUE` if asked) in the calling thread's namespace, down,
/// with the kernel's default MTU and a random MAC.
///
/// A name already taken is an error ([`NetError::is_exists`]): nothing
/// existing is attached to or modified. Persistence is set last, so a
/// failure before it leaves nothing behind (closing the file removes a
/// non-persistent device).
pub fn create_persistent_tap(opts: &TapOpts<'_>) -> Result<(), NetError> {
    let op = format!("create tap {}", opts.name);
    let tun = open_tap(&op, opts.name, tap_flags(opts.multi_queue) | IFF_TUN_EXCL)?;
    let fd = tun.as_raw_fd();
    if let Some(uid) = opts.owner {
        ioctl::set_int(fd, ioctl::Int::Owner, uid)
            .map_err(|e| NetError::errno(format!("{op}: set owner {uid}"), e as i32))?;
    }
    if let Some(gid) = opts.group {
        ioctl::set_int(fd, ioctl::Int::Group, gid)
            .map_err(|e| NetError::errno(format!("{op}: set group {gid}"), e as i32))?;
    }
    ioctl::set_int(fd, ioctl::Int::Persist, 1)
        .map_err(|e| NetError::errno(format!("{op}: set persistent"), e as i32))?;
    drop(tun);
    log::debug!("{op}: done");
    Ok(())
}

/// Attaches to the existing TAP device `name` in the calling thread's
/// namespace, as a VM or a DPDK process does: the file reads and writes
/// Ethernet frames. `multi_queue` must match the device's, or the kernel
/// answers EINVAL. (Used by the tests to pass traffic through a tap.)
pub fn attach_tap(name: &str, multi_queue: bool) -> Result<File, NetError> {
    open_tap(
        &format!("attach to tap {name}"),
        name,
        tap_flags(multi_queue),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::skip_unless_root;
    use crate::{NetNs, Netlink};

    #[test]
    fn ifreq_is_the_kernel_size() {
        assert_eq!(std::mem::size_of::<IfReq>(), 40);
    }

    #[test]
    fn names_are_checked_before_the_kernel() {
        for bad in ["", "0123456789abcdef", "a\0b"] {
            let e = create_persistent_tap(&TapOpts {
                name: bad,
                multi_queue: false,
                owner: None,
                group: None,
            })
            .unwrap_err();
            assert!(e.to_string().contains("invalid interface name"), "{e}");
        }
    }

    #[test]
    fn creates_a_persistent_tap_once() {
        if skip_unless_root("tuntap::creates_a_persistent_tap_once") {
            return;
        }
        let ns = NetNs::new_anonymous().unwrap();
        let opts = TapOpts {
            name: "tap0",
            multi_queue: true,
            owner: Some(1234),
            group: Some(4321),
        };
        ns.run(|| create_persistent_tap(&opts)).unwrap().unwrap();
        let nl = Netlink::for_ns(&ns).unwrap();
        let link = nl.must_link("tap0").unwrap();
        assert_eq!(link.kind, "tun");
        assert!(!link.up);
        // The same name again: refused, the existing device untouched.
        let e = ns
            .run(|| create_persistent_tap(&opts))
            .unwrap()
            .unwrap_err();
        assert!(e.is_exists(), "{e}");
        assert_eq!(nl.must_link("tap0").unwrap().index, link.index);
    }
}
