//! Reading host link attributes from `/sys/class/net` without the RTNL
//! lock.
//!
//! Right after a port is added to a bridge with many ports, the kernel
//! holds the RTNL lock for milliseconds (link-state and IPv6 work for the
//! new port); a netlink lookup of the bridge waits for it, a sysfs read
//! does not. sysfs belongs to the namespace that mounted it, so a value is
//! only trusted when the device's `ifindex` there matches the one netlink
//! gave: otherwise callers fall back to netlink. Never use this for a
//! container's links.

use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::Mode;
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;

/// One attribute of the device directory `dir`, without the newline;
/// `None` when unreadable or longer than any attribute read here.
fn read_attr(dir: &OwnedFd, attr: &str) -> Option<String> {
    let fd = openat(dir, attr, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()).ok()?;
    let mut buf = [0u8; 128];
    // sysfs hands out an attribute whole in one read.
    let n = File::from(fd).read(&mut buf).ok()?;
    if n == buf.len() {
        return None;
    }
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    Some(text.trim_end_matches('\n').to_string())
}

/// Reads the attributes `names` of the link `name`, if
/// `/sys/class/net/<name>` exists and is the device with index `index`.
///
/// The device directory is opened once and the attributes read relative to
/// it: the open directory stays that device's even if it is renamed, and
/// reads fail once it is deleted, so one `ifindex` check covers them all
/// (and each read skips the walk through `/sys/class/net`'s symlink).
fn link_attrs<const N: usize>(name: &str, index: u32, names: [&str; N]) -> Option<[String; N]> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    let dir = open(
        &Path::new("/sys/class/net").join(name),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let ifindex: u32 = read_attr(&dir, "ifindex")?.parse().ok()?;
    if ifindex != index {
        return None;
    }
    let mut out: [String; N] = std::array::from_fn(|_| String::new());
    for (slot, attr) in out.iter_mut().zip(names) {
        *slot = read_attr(&dir, attr)?;
    }
    Some(out)
}

/// The MAC (`aa:bb:..`) of the host link `name` with index `index`.
pub fn link_mac(name: &str, index: u32) -> Option<String> {
    link_attrs(name, index, ["address"]).map(|[mac]| mac)
}

/// The operational state (`up`, `down`, `lowerlayerdown` …, as sysfs
/// spells it) and the MAC of the host link `name` with index `index`.
pub fn link_operstate_mac(name: &str, index: u32) -> Option<(String, String)> {
    link_attrs(name, index, ["operstate", "address"]).map(|[st, mac]| (st, mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lo_or_nothing() {
        // `lo` is index 1 in every namespace; a wrong index is refused.
        if let Some(mac) = link_mac("lo", 1) {
            assert_eq!(mac, "00:00:00:00:00:00");
        }
        assert_eq!(link_mac("lo", 999_999), None);
        if let Some((st, _)) = link_operstate_mac("lo", 1) {
            assert!(!st.is_empty());
        }
        assert_eq!(link_mac("../lo", 1), None);
        assert_eq!(link_mac("", 1), None);
    }
}
