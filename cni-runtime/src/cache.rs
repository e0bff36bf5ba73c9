//! libcni's result cache: `<cache dir>/results/<network>-<containerID>-<ifname>`
//! holding a `cniCacheV1` record (cni:libcni/api.go `cachedInfo`), so that
//! DEL, CHECK and GC can find an attachment's result and arguments.

use cni_skel::CniError;
use cni_skel::error::code;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The `kind` of current cache records.
pub const CACHE_V1: &str = "cniCacheV1";

/// One cache record, field for field libcni's `cachedInfo`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CachedInfo {
    /// Always [`CACHE_V1`].
    pub kind: String,
    /// The container ID.
    #[serde(rename = "containerId")]
    pub container_id: String,
    /// The network config list bytes (base64 in the JSON, as Go's `[]byte`).
    #[serde(with = "bytes_b64")]
    pub config: Vec<u8>,
    /// The interface name.
    #[serde(rename = "ifName")]
    pub if_name: String,
    /// The network name.
    #[serde(rename = "networkName")]
    pub network_name: String,
    /// The netns path.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub netns: String,
    /// `CNI_ARGS` pairs.
    #[serde(rename = "cniArgs", default, skip_serializing_if = "Option::is_none")]
    pub cni_args: Option<Vec<(String, String)>>,
    /// The capability arguments.
    #[serde(
        rename = "capabilityArgs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub capability_args: Option<Map<String, Value>>,
    /// The final result of ADD, in its own version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Map<String, Value>>,
}

mod bytes_b64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        use serde::de::Error;
        match Option::<String>::deserialize(d)? {
            None => Ok(Vec::new()),
            Some(s) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|_| D::Error::custom("illegal base64 data"))
            }
        }
    }
}

/// The cache file of one attachment. All three parts must be non-empty.
pub fn cache_file(
    dir: &Path,
    network: &str,
    container_id: &str,
    ifname: &str,
) -> Result<PathBuf, CniError> {
    if network.is_empty() || container_id.is_empty() || ifname.is_empty() {
        return Err(CniError::internal(format!(
            "cache file path requires network name ({network:?}), container ID ({container_id:?}), and interface name ({ifname:?})"
        )));
    }
    Ok(dir
        .join("results")
        .join(format!("{network}-{container_id}-{ifname}")))
}

/// Writes a record (directory 0700, file 0600, replaced atomically).
pub fn write(path: &Path, info: &CachedInfo) -> Result<(), CniError> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let io =
        |e: std::io::Error| CniError::new(code::IO_FAILURE, format!("{}: {e}", path.display()), "");
    let data = serde_json::to_vec(info).map_err(|e| CniError::internal(e.to_string()))?;
    if let Some(parent) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(io)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&data)?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// What a cache file holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Cached {
    /// A `cniCacheV1` record.
    V1(Box<CachedInfo>),
    /// A pre-record cache file: the bare result.
    Legacy(Value),
}

/// Reads a cache file; `Ok(None)` when it cannot be read (libcni ignores
/// read errors: the attachment may simply not be cached).
pub fn read(path: &Path) -> Result<Option<Cached>, CniError> {
    let Ok(bytes) = std::fs::read(path) else {
        return Ok(None);
    };
    match serde_json::from_slice::<CachedInfo>(&bytes) {
        Ok(info) if info.kind == CACHE_V1 => Ok(Some(Cached::V1(Box::new(info)))),
        _ => serde_json::from_slice::<Value>(&bytes)
            .map(|v| Some(Cached::Legacy(v)))
            .map_err(|e| {
                CniError::new(
                    code::DECODING_FAILURE,
                    format!("failed to parse cached result {}: {e}", path.display()),
                    "",
                )
            }),
    }
}

/// All `cniCacheV1` records under `dir/results`, in file name order,
/// optionally only those of one container. Unreadable files are skipped.
pub fn attachments(dir: &Path, container_id: &str) -> Result<Vec<CachedInfo>, CniError> {
    let results = dir.join("results");
    let entries = match std::fs::read_dir(&results) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!("{}: {e}", results.display()),
                "",
            ));
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        if !container_id.is_empty() {
            let part = format!("-{container_id}-");
            match name.find(&part) {
                Some(pos) if pos > 0 && pos + part.len() < name.len() => {}
                _ => continue,
            }
        }
        let Ok(bytes) = std::fs::read(results.join(&name)) else {
            continue;
        };
        let Ok(info) = serde_json::from_slice::<CachedInfo>(&bytes) else {
            continue;
        };
        if info.kind != CACHE_V1
            || (!container_id.is_empty() && info.container_id != container_id)
            || info.if_name.is_empty()
            || info.network_name.is_empty()
        {
            continue;
        }
        out.push(info);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_layout_matches_libcni() {
        let info = CachedInfo {
            kind: CACHE_V1.into(),
            container_id: "c1".into(),
            config: b"{}".to_vec(),
            if_name: "eth0".into(),
            network_name: "net".into(),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&info).unwrap(),
            r#"{"kind":"cniCacheV1","containerId":"c1","config":"e30=","ifName":"eth0","networkName":"net"}"#
        );
        let full = CachedInfo {
            netns: "/run/netns/x".into(),
            cni_args: Some(vec![("K".into(), "V".into())]),
            capability_args: Some(serde_json::from_str(r#"{"mac":"aa"}"#).unwrap()),
            result: Some(serde_json::from_str(r#"{"cniVersion":"1.0.0"}"#).unwrap()),
            ..info
        };
        let text = serde_json::to_string(&full).unwrap();
        assert!(text.ends_with(
            r#""netns":"/run/netns/x","cniArgs":[["K","V"]],"capabilityArgs":{"mac":"aa"},"result":{"cniVersion":"1.0.0"}}"#
        ), "{text}");
        let back: CachedInfo = serde_json::from_str(&text).unwrap();
        assert_eq!(back, full);
    }

    #[test]
    fn paths_and_listing() {
        let dir = std::env::temp_dir().join(format!("cni-runtime-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(cache_file(&dir, "", "c", "eth0").is_err());
        assert!(attachments(&dir, "").unwrap().is_empty());
        let p = cache_file(&dir, "net", "c1", "eth0").unwrap();
        assert_eq!(p, dir.join("results/net-c1-eth0"));
        assert_eq!(read(&p).unwrap(), None);
        let info = CachedInfo {
            kind: CACHE_V1.into(),
            container_id: "c1".into(),
            if_name: "eth0".into(),
            network_name: "net".into(),
            ..Default::default()
        };
        write(&p, &info).unwrap();
        write(
            &cache_file(&dir, "net", "c2", "eth0").unwrap(),
            &CachedInfo {
                container_id: "c2".into(),
                ..info.clone()
            },
        )
        .unwrap();
        std::fs::write(dir.join("results/net-c3-eth0"), r#"{"cniVersion":"0.3.1"}"#).unwrap();
        assert_eq!(read(&p).unwrap(), Some(Cached::V1(Box::new(info.clone()))));
        assert!(matches!(
            read(&dir.join("results/net-c3-eth0")).unwrap(),
            Some(Cached::Legacy(_))
        ));
        assert_eq!(attachments(&dir, "").unwrap().len(), 2);
        assert_eq!(attachments(&dir, "c2").unwrap()[0].container_id, "c2");
        assert!(attachments(&dir, "c3").unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
