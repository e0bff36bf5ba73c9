//! Records of the firewalld sources each attachment was given, so that DEL
//! without `prevResult` and GC can take them out again. firewalld has no
//! place to tag a source with its owner (the iptables backend's
//! `CNI-FW-ATTACHMENTS` chain has no firewalld equivalent), so each
//! attachment gets a small state file (`cni_skel::state`),
//! `/run/cni/firewall/<network hash>/<containerID>_<ifname>.json`:
//!
//! ```json
//! {"network":"podman","containerID":"…","ifname":"eth0",
//!  "sources":[{"zone":"trusted","source":"10.88.0.2/32"}]}
//! ```
//!
//! One directory per network (named by the hash of its name, which may
//! hold any character), so GC lists its own network's files. `/run`,
//! because the sources are firewalld runtime state: a reboot drops both.
//! ADD writes the file before it adds the sources (a killed ADD leaves a
//! record of sources that may not exist, which DEL removes without
//! complaint, never a source without a record). Files are written through
//! a temporary file and a rename, under the plugin's lock.

use crate::ipt::Attachment;
use cni_skel::CniError;
use cni_skel::state::StateFile;
use serde::{Deserialize, Serialize};
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

impl Record {
    /// True when this is the record of `att`.
    pub fn is_of(&self, att: &Attachment<'_>) -> bool {
        self.network == att.network
            && self.container_id == att.container_id
            && self.ifname == att.ifname
    }
}

/// One source of one zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneSource {
    /// The zone.
    pub zone: String,
    /// The source, as given to firewalld (`10.88.0.2/32`).
    pub source: String,
}

/// The record files under one directory.
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
    /// The records under `dir`.
    pub fn new(dir: &Path) -> Records {
        Records {
            dir: dir.to_path_buf(),
        }
    }

    fn network_dir(&self, network: &str) -> PathBuf {
        let hash = cni_fw::hash::network_key_prefix(network);
        self.dir.join(hash.trim_end_matches('-'))
    }

    fn file(&self, att: &Attachment<'_>) -> StateFile {
        StateFile::new(&self.network_dir(att.network), att.container_id, att.ifname)
    }

    /// The record of `att`; `None` when there is none or it cannot be
    /// read (a file that is not ours is left alone).
    pub fn read(&self, att: &Attachment<'_>) -> Option<Record> {
        let bytes = self.file(att).read().ok()??;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the record of `att` atomically.
    pub fn write(&self, att: &Attachment<'_>, record: &Record) -> Result<(), CniError> {
        let text = serde_json::to_vec(record)
            .map_err(|e| CniError::internal(format!("encode firewalld record: {e}")))?;
        self.file(att).write(&text)
    }

    /// Removes the record of `att`; one already gone is fine. The
    /// network's directory goes with its last record (under the plugin's
    /// lock, so no ADD is writing into it).
    pub fn remove(&self, att: &Attachment<'_>) -> Result<(), CniError> {
        self.file(att).remove()?;
        let _ = std::fs::remove_dir(self.network_dir(att.network));
        Ok(())
    }

    /// Every readable record of `network`, or of every network.
    pub fn all(&self, network: Option<&str>) -> Vec<Record> {
        let dirs: Vec<PathBuf> = match network {
            Some(n) => vec![self.network_dir(n)],
            None => std::fs::read_dir(&self.dir)
                .map(|d| d.flatten().map(|e| e.path()).collect())
                .unwrap_or_default(),
        };
        let mut out = Vec::new();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') || !name.ends_with(".json") {
                    continue;
                }
                if let Some(r) = std::fs::read(e.path())
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
                {
                    out.push(r);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_list_remove() {
        let dir = std::env::temp_dir().join(format!("rcni-fw-sources-{}", std::process::id()));
        let recs = Records::new(&dir);
        let att = |network, container_id| Attachment {
            network,
            container_id,
            ifname: "eth0",
        };
        let (a, b, c) = (att("net", "c1"), att("net", "c2"), att("n/2", "c1"));
        assert_eq!(recs.read(&a), None);
        assert!(recs.all(None).is_empty());
        let r = Record {
            network: "net".into(),
            container_id: "c1".into(),
            ifname: "eth0".into(),
            sources: vec![ZoneSource {
                zone: "trusted".into(),
                source: "10.1.0.2/32".into(),
            }],
        };
        recs.write(&a, &r).unwrap();
        assert!(r.is_of(&a) && !r.is_of(&b));
        recs.write(&c, &Record::default()).unwrap();
        std::fs::write(recs.network_dir("net").join("junk.json"), b"not json").unwrap();
        assert_eq!(recs.read(&a), Some(r.clone()));
        assert_eq!(recs.all(Some("net")), vec![r]);
        assert_eq!(recs.all(None).len(), 2);
        recs.remove(&a).unwrap();
        recs.remove(&a).unwrap();
        assert_eq!(recs.read(&a), None);
        assert!(!recs.network_dir("net").exists() || recs.all(Some("net")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
