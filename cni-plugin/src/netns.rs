//! Opening the container's namespace: with the reference's error text
//! ([`open`], [`open_if_present`], [`open_required`]), or also under its
//! host-wide lock ([`open_locked`], [`open_locked_if_present`]).

use crate::NetResult;
use cni_net::NetNs;
use cni_skel::{CmdArgs, CniError};
use std::ops::Deref;
use std::path::Path;

/// `CNI_NETNS` opened, or the reference's error naming it:
/// `failed to open netns "<path>": <why>`.
pub fn open(path: &Path) -> Result<NetNs, CniError> {
    // Through open_if_present: one call of NetNs::open in a plugin's
    // binary (two kept it out of line, and vrf a page larger).
    open_if_present(path)?.ok_or_else(|| gone(path))
}

/// [`open`]'s error for a path that does not exist.
fn gone(path: &Path) -> CniError {
    let e = cni_net::NetError::NsNotFound {
        path: path.to_path_buf(),
    };
    open_failed(path, e)
}

/// [`open`], with a namespace that is gone as `None` (DEL).
pub fn open_if_present(path: &Path) -> Result<Option<NetNs>, CniError> {
    NetNs::open_if_present(path).map_err(|e| open_failed(path, e))
}

/// [`open`] of `CNI_NETNS`, which must be given (`CNI_NETNS is required`).
pub fn open_required(args: &CmdArgs) -> Result<NetNs, CniError> {
    let path = args
        .netns
        .as_deref()
        .ok_or_else(|| CniError::internal("CNI_NETNS is required"))?;
    open(path)
}

fn open_failed(path: &Path, e: cni_net::NetError) -> CniError {
    CniError::internal(format!("failed to open netns {:?}: {e}", path.display()))
}

/// An open namespace and its `cni_lock::netns` lock, released when this
/// is dropped (after the namespace's file is closed).
#[derive(Debug)]
pub struct LockedNetNs {
    ns: NetNs,
    // Held for its flock, released when dropped.
    #[allow(dead_code)]
    lock: Option<cni_lock::Lock>,
}

impl Deref for LockedNetNs {
    type Target = NetNs;

    fn deref(&self) -> &NetNs {
        &self.ns
    }
}

/// [`open_if_present`], then locked until the handle is dropped:
/// plugins that change shared state inside one container namespace
/// (sbr's tables, vrf's devices) exclude each other. The lock is
/// `cni_lock::netns` of the namespace's device and inode, a file only
/// root can open; never the namespace file itself, which any user can
/// open (`/run/netns/<name>` is 0444) and a container can too (its own
/// `/proc/self/ns/net`), and so hold forever. (Go's vrf and sbr flock
/// the namespace file: ours no longer exclude theirs.) A lock not
/// granted within `RCNI_LOCK_TIMEOUT` is an error naming the lock file.
pub fn open_locked_if_present(path: &Path) -> Result<Option<LockedNetNs>, CniError> {
    let Some(ns) = open_if_present(path)? else {
        return Ok(None);
    };
    let (dev, ino) = ns.stat_id().cni()?;
    let lock = cni_lock::netns(dev, ino)?;
    Ok(Some(LockedNetNs { ns, lock }))
}

/// [`open_locked_if_present`] of a namespace that must be there: one that
/// is gone is [`open`]'s error.
pub fn open_locked(path: &Path) -> Result<LockedNetNs, CniError> {
    open_locked_if_present(path)?.ok_or_else(|| gone(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_namespace_is_none() {
        assert!(
            open_locked_if_present(Path::new("/nonexistent/netns"))
                .unwrap()
                .is_none()
        );
        let e = open_locked(Path::new("/nonexistent/netns")).unwrap_err();
        assert!(
            e.msg
                .starts_with(r#"failed to open netns "/nonexistent/netns": "#),
            "{e:?}"
        );
    }
}
