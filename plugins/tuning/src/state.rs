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

pub use cni_skel::state::StateFile;

/// Reads and parses an attachment's saved values: `Ok(None)` when there
/// is no file, `Some(Err)` with the reason when it cannot be parsed.
pub fn load(file: &StateFile) -> Result<Option<Result<Saved, String>>, CniError> {
    Ok(file.read()?.map(|bytes| parse(&bytes)))
}

/// Parses one saved-values file.
pub fn parse(bytes: &[u8]) -> Result<Saved, String> {
    cni_skel::gojson::from_slice::<Saved>(bytes).map_err(|e| e.to_string())
}

/// Writes an attachment's saved values.
pub fn save(file: &StateFile, saved: &Saved) -> Result<(), CniError> {
    file.write(saved.to_text().as_bytes())
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
    fn save_load() {
        let dir = std::env::temp_dir().join(format!("tuning-state-{}", std::process::id()));
        let f = StateFile::new(&dir, "cid_1", "eth0");
        assert_eq!(load(&f).unwrap(), None);
        let s = Saved {
            mtu: 1400,
            ..Saved::default()
        };
        save(&f, &s).unwrap();
        assert_eq!(load(&f).unwrap(), Some(Ok(s)));
        std::fs::write(f.path(), b"{").unwrap();
        assert!(matches!(load(&f).unwrap(), Some(Err(_))));
        f.remove().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
