//! The reference's on-disk format (`backend/disk`): what a network
//! directory holds, byte for byte as the Go plugin writes and reads it, so
//! the two can share one.
//!
//! | file | content |
//! |---|---|
//! | `<ip>` | `<containerID>\r\n<ifname>` (legacy files: `<containerID>`) |
//! | `last_reserved_ip.<set>` | the address last handed out from that set |
//! | `lock` | empty; `flock(LOCK_EX)` around every read-modify-write |
//!
//! Contents are compared with surrounding whitespace trimmed, as Go's
//! `strings.TrimSpace` does.

use super::io_err;
use cni_skel::CniError;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Name of the lock file, as the reference names it.
pub const LOCK_FILE: &str = "lock";
/// Prefix of the per-set round-robin position files.
pub const LAST_RESERVED_PREFIX: &str = "last_reserved_ip.";

/// Go's `strings.TrimSpace` for the ASCII whitespace that can occur here.
pub(super) fn trim(b: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = b.iter().position(|c| !ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !ws(c)).map_or(start, |p| p + 1);
    b.get(start..end).unwrap_or_default()
}

/// The content of a reservation file for `(id, ifname)`.
pub fn owner_key(id: &str, ifname: &str) -> Vec<u8> {
    let mut k = trim(id.as_bytes()).to_vec();
    k.extend_from_slice(b"\r\n");
    k.extend_from_slice(ifname.as_bytes());
    k
}

/// The content of a legacy reservation file (container ID only).
pub fn legacy_key(id: &str) -> Vec<u8> {
    trim(id.as_bytes()).to_vec()
}

/// Opens a file of the network directory for reading, never through a
/// symlink (`O_NOFOLLOW`: a link planted there is unreadable, where the
/// reference reads whatever it points to) and never waiting for a writer
/// (`O_NONBLOCK`: a FIFO reads as empty instead of hanging the plugin
/// under the lock).
pub(super) fn open_no_follow(path: &Path) -> std::io::Result<File> {
    use nix::fcntl::OFlag;
    OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
}

/// Reads a reservation file's trimmed content; `None` when unreadable (a
/// symlink included: [`open_no_follow`]).
pub(super) fn read_trimmed(path: &Path) -> Option<Vec<u8>> {
    let mut f = open_no_follow(path).ok()?;
    // One read() for the usual ~80-byte file (open, read, close: three
    // syscalls per file on a full scan); a short read of a regular file
    // is its end.
    let mut small = [0u8; 512];
    let n = f.read(&mut small).ok()?;
    let head = small.get(..n)?;
    if n < small.len() {
        return Some(trim(head).to_vec());
    }
    let mut buf = head.to_vec();
    f.read_to_end(&mut buf).ok()?;
    Some(trim(&buf).to_vec())
}

/// The addresses named in `dir`, from the listing alone. A missing
/// directory holds nothing.
pub fn reserved_ips(dir: &Path) -> Result<Vec<IpAddr>, CniError> {
    let rd = match fs::read_dir(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        r => r.map_err(|e| io_err("failed to list", dir, e))?,
    };
    let mut out = Vec::new();
    for de in rd {
        let de = de.map_err(|e| io_err("failed to list", dir, e))?;
        if let Some(ip) = de
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<IpAddr>().ok())
        {
            out.push(ip.to_canonical());
        }
    }
    Ok(out)
}
