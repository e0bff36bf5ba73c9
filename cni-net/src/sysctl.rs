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
use std::path::PathBuf;

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
    std::fs::read_to_string(&p)
        .map(|s| s.trim_end_matches('\n').to_string())
        .map_err(|e| NetError::io(format!("read {}", p.display()), e))
}

/// Writes `value` unless the sysctl already holds it. Returns whether it wrote.
pub fn write(key: &str, value: &str) -> Result<bool, NetError> {
    let current = read(key)?;
    if current.trim() == value.trim() {
        return Ok(false);
    }
    let p = path(key)?;
    log::debug!("sysctl {key} = {value} (was {current})");
    std::fs::write(&p, value.as_bytes())
        .map_err(|e| NetError::io(format!("write {value:?} to {}", p.display()), e))?;
    Ok(true)
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
    }
}
