//! Records of the firewalld sources each attachment was given, so that DEL
//! without `prevResult` and GC can take them out again. firewalld has no
//! place to tag a source with its owner (the iptables backend's
//! `CNI-FW-ATTACHMENTS` chain has no firewalld equivalent), so each
//! attachment gets a small file, `/run/cni/firewall/<attachment key>.json`:
//!
//! ```json
//! {"network":"podman","containerID":"…","ifname":"eth0",
//!  "sources":[{"zone":"trusted","source":"10.88.0.2/32"}]}
//! ```
//!
//! The key's first half is the network's (as in the iptables records), so
//! GC finds its network's files by name. `/run`, because the sources are
//! firewalld runtime state: a reboot drops both. ADD writes the file
//! before it adds the sources (a killed ADD leaves a record of sources
//! that may not exist, which DEL removes without complaint, never a source
//! without a record). Files are written through a temporary file and a
//! rename, under the plugin's lock.

use cni_skel::CniError;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where the records live.
pub const DIR: &str = "/run/cni/firewall";

/// One attachment's sources.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Network name.
    pub network: String,
    /// Container ID.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// Container interface name.
    pub ifname: String,
    /// The sources and their zones (a repeated ADD may have named another
    /// zone).
    pub sources: Vec<ZoneSource>,
}

/// One source of one zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneSource {
    /// The zone.
    pub zone: String,
    /// The source, as given to firewalld (`10.88.0.2/32`).
    pub source: String,
}

fn io_err(what: &str, p: &Path, e: std::io::Error) -> CniError {
    CniError::new(
        cni_skel::error::code::IO_FAILURE,
        format!("failed to {what} {}: {e}", p.display()),
        "",
    )
}

/// The record files in one directory.
#[derive(Debug, Clone)]
pub struct Records {
    dir: PathBuf,
}

impl Default for Records {
    fn default() -> Self {
        Records::new(Path::new(DIR))
    }
}

impl Records {
    /// The records in `dir`.
    pub fn new(dir: &Path) -> Records {
        Records {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The record of attachment `key`; `None` when there is none or it
    /// cannot be read (a file that is not ours is left alone).
    pub fn read(&self, key: &str) -> Option<Record> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the record of `key` atomically.
    pub fn write(&self, key: &str, record: &Record) -> Result<(), CniError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| io_err("create directory", &self.dir, e))?;
        let path = self.path(key);
        let tmp = self.dir.join(format!(".{key}.tmp"));
        let text = serde_json::to_vec(record)
            .map_err(|e| CniError::internal(format!("encode firewalld record: {e}")))?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io_err("create", &tmp, e))?;
        f.write_all(&text).map_err(|e| io_err("write", &tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io_err("save", &path, e)
        })
    }

    /// Removes the record of `key`; one already gone is fine.
    pub fn remove(&self, key: &str) -> Result<(), CniError> {
        for p in [self.dir.join(format!(".{key}.tmp")), self.path(key)] {
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_err("remove", &p, e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Every readable record whose key starts with `prefix`: (key, record).
    pub fn all(&self, prefix: &str) -> Vec<(String, Record)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let key = name.strip_suffix(".json")?;
                if !key.starts_with(prefix) {
                    return None;
                }
                Some((key.to_string(), self.read(key)?))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_list_remove() {
        let dir = std::env::temp_dir().join(format!("rcni-fw-sources-{}", std::process::id()));
        let recs = Records::new(&dir);
        assert_eq!(recs.read("aa-1"), None);
        assert!(recs.all("").is_empty());
        let r = Record {
            network: "net".into(),
            container_id: "c1".into(),
            ifname: "eth0".into(),
            sources: vec![ZoneSource {
                zone: "trusted".into(),
                source: "10.1.0.2/32".into(),
            }],
        };
        recs.write("aa-1", &r).unwrap();
        recs.write("bb-2", &Record::default()).unwrap();
        std::fs::write(dir.join("aa-junk.json"), b"not json").unwrap();
        assert_eq!(recs.read("aa-1"), Some(r.clone()));
        assert_eq!(recs.all("aa-"), vec![("aa-1".to_string(), r)]);
        assert_eq!(recs.all("").len(), 2);
        recs.remove("aa-1").unwrap();
        recs.remove("aa-1").unwrap();
        assert_eq!(recs.read("aa-1"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
