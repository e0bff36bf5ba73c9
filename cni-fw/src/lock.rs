//! A host-wide lock serialising the read-modify-write of a netfilter table
//! (`iptables-save`, then an `iptables-restore` computed from it) among
//! concurrent plugin invocations.

/// Takes the exclusive flock on `path` (created if missing), held until the
/// returned file is dropped. Failing to lock (a read-only `/run`, say) is
/// not fatal: the transaction is still atomic, only a concurrent
/// invocation could then add a shared rule twice.
pub fn hold(path: &str) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ok()?;
    match f.lock() {
        Ok(()) => Some(f),
        Err(e) => {
            log::debug!("lock {path}: {e}");
            None
        }
    }
}
