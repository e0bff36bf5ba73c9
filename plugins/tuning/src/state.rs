//! The saved values: `<dataDir>/<containerID>_<ifname>.json`, the
//! reference's path and layout (one-space indent, no trailing newline,
//! keys `mac`, `promisc`, `mtu`, `allmulti`, `txQLen`, each present only
//! when that attribute was changed), so that a node can switch between the
//! Go plugin and this one between ADD and DEL.
//!
//! Two keys are ours, and the reference ignores them when it reads the
//! file: `sysctl` (path → original value; the reference never restores
//! sysctls) and `network` (the network the attachment belongs to, which
//! GC needs to stay within its network: the file name does not say it).

use cni_skel::CniError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What an attachment's interface had before tuning changed it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    /// The MAC, lower-case with colons; empty = not changed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// Promiscuous mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promisc: Option<bool>,
    /// The MTU; 0 = not changed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtu: u32,
    /// All-multicast mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allmulti: Option<bool>,
    /// Transmit queue length.
    #[serde(default, rename = "txQLen", skip_serializing_if = "Option::is_none")]
    pub txqlen: Option<u32>,
    /// Sysctls (slash path below `/proc/sys` → value). Ours only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl: BTreeMap<String, String>,
    /// The network this attachment belongs to. Ours only; empty in files
    /// the reference wrote.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub network: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Saved {
    /// Adds what `other` holds and `self` does not: the first saved value
    /// of an attribute is the original, a later ADD must not replace it
    /// with an already tuned one (the reference does).
    pub fn fill_from(&mut self, other: &Saved) {
        if self.mac.is_empty() {
            self.mac.clone_from(&other.mac);
        }
        self.promisc = self.promisc.or(other.promisc);
        if self.mtu == 0 {
            self.mtu = other.mtu;
        }
        self.allmulti = self.allmulti.or(other.allmulti);
        self.txqlen = self.txqlen.or(other.txqlen);
        for (k, v) in &other.sysctl {
            self.sysctl.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }

    /// The file's text, as the reference's `json.MarshalIndent(c, "", " ")`.
    pub fn to_text(&self) -> String {
        let mut out = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        // Strings, numbers and maps of strings always serialise.
        let _ = self.serialize(&mut ser);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// One attachment's file (and the temporary file it is written through).
#[derive(Debug, Clone)]
pub struct StateFile {
    dir: PathBuf,
    path: PathBuf,
    tmp: PathBuf,
}

/// The file name of an attachment's saved values.
pub fn file_name(container_id: &str, ifname: &str) -> String {
    format!("{container_id}_{ifname}.json")
}

/// The temporary name a state file is written under, then renamed from.
fn tmp_name(name: &str) -> String {
    format!(".{name}.tmp")
}

/// The attachment a temporary file is for, if `name` is one.
pub fn tmp_target(name: &str) -> Option<&str> {
    name.strip_prefix('.')?.strip_suffix(".tmp")
}

fn io_err(what: &str, p: &Path, e: std::io::Error) -> CniError {
    CniError::new(
        cni_skel::error::code::IO_FAILURE,
        format!("failed to {what} {}: {e}", p.display()),
        "",
    )
}

impl StateFile {
    /// The file of (container ID, ifname) in `data_dir`. Both are
    /// validated by the skel (no `/`, not `.` or `..`).
    pub fn new(data_dir: &Path, container_id: &str, ifname: &str) -> StateFile {
        let name = file_name(container_id, ifname);
        StateFile {
            dir: data_dir.to_path_buf(),
            path: data_dir.join(&name),
            tmp: data_dir.join(tmp_name(&name)),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved values: `Ok(None)` when there is no file, `Some(Err)`
    /// with the reason when it cannot be parsed.
    pub fn read(&self) -> Result<Option<Result<Saved, String>>, CniError> {
        read_saved(&self.path)
    }

    /// Writes the file: through a temporary file and a rename, so a
    /// reader (or a DEL after a kill) sees the old file or the new one,
    /// never half of one. The directory is made 0700 (the reference makes
    /// every missing parent 0600, which leaves them unusable).
    pub fn write(&self, saved: &Saved) -> Result<(), CniError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| io_err("create backup directory", &self.dir, e))?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&self.tmp)
            .map_err(|e| io_err("create", &self.tmp, e))?;
        f.write_all(saved.to_text().as_bytes())
            .map_err(|e| io_err("write", &self.tmp, e))?;
        drop(f);
        std::fs::rename(&self.tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&self.tmp);
            io_err("save", &self.path, e)
        })
    }

    /// Removes the file (and a temporary one a killed ADD left); already
    /// gone is fine.
    pub fn remove(&self) -> Result<(), CniError> {
        remove_if_present(&self.tmp)?;
        remove_if_present(&self.path)
    }
}

/// Reads and parses one saved-values file.
pub fn read_saved(path: &Path) -> Result<Option<Result<Saved, String>>, CniError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(
            cni_skel::gojson::from_slice::<Saved>(&bytes).map_err(|e| e.to_string()),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("read", path, e)),
    }
}

/// Removes a file; one that is not there is not an error.
pub fn remove_if_present(path: &Path) -> Result<(), CniError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err("remove", path, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_matches_the_reference() {
        assert_eq!(Saved::default().to_text(), "{}");
        let s = Saved {
            mac: "c2:11:22:33:44:55".into(),
            promisc: Some(false),
            mtu: 1500,
            allmulti: Some(true),
            txqlen: Some(1000),
            ..Saved::default()
        };
        assert_eq!(
            s.to_text(),
            "{\n \"mac\": \"c2:11:22:33:44:55\",\n \"promisc\": false,\n \"mtu\": 1500,\n \"allmulti\": true,\n \"txQLen\": 1000\n}"
        );
        let s = Saved {
            mtu: 9000,
            sysctl: [("net/ipv4/conf/eth0/rp_filter".to_string(), "2".to_string())]
                .into_iter()
                .collect(),
            network: "podman".into(),
            ..Saved::default()
        };
        assert_eq!(
            s.to_text(),
            "{\n \"mtu\": 9000,\n \"sysctl\": {\n  \"net/ipv4/conf/eth0/rp_filter\": \"2\"\n },\n \"network\": \"podman\"\n}"
        );
    }

    #[test]
    fn reads_what_the_reference_writes() {
        let go = "{\n \"mac\": \"0a:58:0a:01:02:03\",\n \"mtu\": 1500,\n \"txQLen\": 1000\n}";
        let s: Saved = cni_skel::gojson::from_slice(go.as_bytes()).unwrap();
        assert_eq!(
            s,
            Saved {
                mac: "0a:58:0a:01:02:03".into(),
                mtu: 1500,
                txqlen: Some(1000),
                ..Saved::default()
            }
        );
        assert!(cni_skel::gojson::from_slice::<Saved>(b"{\"mtu\":\"x\"}").is_err());
    }

    #[test]
    fn the_first_saved_value_wins() {
        let mut first = Saved {
            mtu: 1500,
            sysctl: [("a".to_string(), "0".to_string())].into_iter().collect(),
            ..Saved::default()
        };
        first.fill_from(&Saved {
            mtu: 9000,
            mac: "02:00:00:00:00:01".into(),
            promisc: Some(false),
            sysctl: [
                ("a".to_string(), "1".to_string()),
                ("b".to_string(), "1".to_string()),
            ]
            .into_iter()
            .collect(),
            ..Saved::default()
        });
        assert_eq!(first.mtu, 1500);
        assert_eq!(first.mac, "02:00:00:00:00:01");
        assert_eq!(first.promisc, Some(false));
        assert_eq!(first.sysctl["a"], "0");
        assert_eq!(first.sysctl["b"], "1");
    }

    #[test]
    fn write_read_remove() {
        let dir = std::env::temp_dir().join(format!("tuning-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let nested = dir.join("a/b");
        let f = StateFile::new(&nested, "cid_1", "eth0");
        assert_eq!(f.path(), nested.join("cid_1_eth0.json"));
        assert_eq!(f.read().unwrap(), None);
        let s = Saved {
            mtu: 1400,
            ..Saved::default()
        };
        f.write(&s).unwrap();
        assert_eq!(f.read().unwrap(), Some(Ok(s)));
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(f.path()), 0o600);
        assert_eq!(mode(&nested), 0o700);
        assert_eq!(mode(&dir.join("a")), 0o700);
        assert_eq!(tmp_target(".cid_1_eth0.json.tmp"), Some("cid_1_eth0.json"));
        assert_eq!(tmp_target("cid_1_eth0.json"), None);
        std::fs::write(f.path(), b"{").unwrap();
        assert!(matches!(f.read().unwrap(), Some(Err(_))));
        f.remove().unwrap();
        f.remove().unwrap();
        assert_eq!(f.read().unwrap(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
