//! Network configurations: `.conflist` lists and single-plugin `.conf`
//! files, loaded as libcni (cni:libcni/conf.go) loads them.

use cni_skel::CniError;
use cni_skel::error::code;
use cni_skel::version::{self, Version};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// A network configuration list: the plugins run in order on ADD.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfigList {
    /// Network name, injected into every plugin's config.
    pub name: String,
    /// The spec version used with every plugin: `cniVersion`, or the
    /// highest of `cniVersions` (and `cniVersion`) not above 1.1.0.
    pub cni_version: String,
    /// Skip CHECK.
    pub disable_check: bool,
    /// Skip GC.
    pub disable_gc: bool,
    /// Do not load extra plugins from `<dir>/<name>/*.conf`.
    pub load_only_inlined_plugins: bool,
    /// The plugin configs, each a JSON object with a non-empty `type`.
    pub plugins: Vec<Value>,
    /// The bytes the list was loaded from (stored in the result cache).
    pub bytes: Vec<u8>,
}

fn parse_err(msg: impl std::fmt::Display) -> CniError {
    CniError::invalid_config(format!("error parsing configuration list: {msg}"))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks one plugin config as libcni's `NetworkPluginConfFromBytes` does:
/// an object with a non-empty string `type`; typed common keys.
pub fn check_plugin_conf(conf: &Value) -> Result<(), CniError> {
    let err = |m: String| CniError::invalid_config(format!("error parsing configuration: {m}"));
    let Some(obj) = conf.as_object() else {
        return Err(err(format!("expected an object, not {}", type_name(conf))));
    };
    for key in ["type", "name", "cniVersion"] {
        match obj.get(key) {
            None | Some(Value::String(_)) => {}
            Some(other) => {
                return Err(err(format!(
                    "{key} must be a string, not {}",
                    type_name(other)
                )));
            }
        }
    }
    if obj
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        return Err(err("missing 'type'".into()));
    }
    if let Some(caps) = obj.get("capabilities") {
        let ok = caps
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_boolean));
        if !ok && !caps.is_null() {
            return Err(err("capabilities must be an object of booleans".into()));
        }
    }
    Ok(())
}

impl NetworkConfigList {
    /// Parses a `.conflist`. Plugins are optional here (a file may take them
    /// from `<dir>/<name>/*.conf`, see [`NetworkConfigList::from_file`]),
    /// but an explicit `plugins` key must hold at least one.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CniError> {
        let raw: Map<String, Value> = serde_json::from_slice(bytes).map_err(|e| {
            CniError::new(
                code::DECODING_FAILURE,
                format!("error parsing configuration list: {e}"),
                "",
            )
        })?;
        let name = match raw.get("name") {
            None => return Err(parse_err("no name")),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(parse_err(format!("invalid name type {}", type_name(other))));
            }
        };
        let mut cni_version = match raw.get("cniVersion") {
            None => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(parse_err(format!(
                    "invalid cniVersion type {}",
                    type_name(other)
                )));
            }
        };
        if let Some(raw_versions) = raw.get("cniVersions") {
            cni_version = pick_version(raw_versions, &cni_version)?;
        }
        let read_bool = |key: &str| -> Result<bool, CniError> {
            match raw.get(key) {
                None => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(Value::String(s)) => match s.to_lowercase().as_str() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    other => Err(parse_err(format!("invalid value {other:?} for {key}"))),
                },
                Some(other) => Err(parse_err(format!(
                    "invalid type {} for {key}",
                    type_name(other)
                ))),
            }
        };
        let mut list = NetworkConfigList {
            name,
            cni_version,
            disable_check: read_bool("disableCheck")?,
            disable_gc: read_bool("disableGC")?,
            load_only_inlined_plugins: read_bool("loadOnlyInlinedPlugins")?,
            plugins: Vec::new(),
            bytes: bytes.to_vec(),
        };
        match raw.get("plugins") {
            None if list.load_only_inlined_plugins => Err(parse_err(
                "`loadOnlyInlinedPlugins` is true, and no 'plugins' key",
            )),
            None => Ok(list),
            Some(Value::Array(plugins)) if plugins.is_empty() => {
                Err(parse_err("no plugins in list"))
            }
            Some(Value::Array(plugins)) => {
                for (i, p) in plugins.iter().enumerate() {
                    check_plugin_conf(p)
                        .map_err(|e| e.context(format!("failed to parse plugin config {i}")))?;
                }
                list.plugins = plugins.clone();
                Ok(list)
            }
            Some(other) => Err(parse_err(format!(
                "invalid 'plugins' type {}",
                type_name(other)
            ))),
        }
    }

    /// Parses a single plugin config (`.conf`) and turns it into a list of
    /// one, as libcni's `ConfListFromConf` does.
    pub fn from_conf_bytes(bytes: &[u8]) -> Result<Self, CniError> {
        let conf: Value = serde_json::from_slice(bytes).map_err(|e| {
            CniError::new(
                code::DECODING_FAILURE,
                format!("error parsing configuration: {e}"),
                "",
            )
        })?;
        check_plugin_conf(&conf)?;
        let field = |k: &str| {
            conf.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let mut wrapper = Map::new();
        wrapper.insert("name".into(), Value::String(field("name")));
        wrapper.insert("cniVersion".into(), Value::String(field("cniVersion")));
        wrapper.insert("plugins".into(), Value::Array(vec![conf]));
        let list_bytes =
            serde_json::to_vec(&wrapper).map_err(|e| CniError::internal(e.to_string()))?;
        Self::from_bytes(&list_bytes)
    }

    /// Loads a file. A `.conflist` (or any file with a `plugins` key) is a
    /// list, and unless `loadOnlyInlinedPlugins` is set, gets the plugins of
    /// `<dir>/<name>/*.conf` appended in name order; anything else is a
    /// single plugin config.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, CniError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| {
            CniError::new(
                code::IO_FAILURE,
                format!("error reading {}: {e}", path.display()),
                "",
            )
        })?;
        let is_list = path.extension().is_some_and(|e| e == "conflist")
            || serde_json::from_slice::<Map<String, Value>>(&bytes)
                .is_ok_and(|m| m.contains_key("plugins"));
        if !is_list {
            return Self::from_conf_bytes(&bytes);
        }
        let mut list = Self::from_bytes(&bytes)?;
        if !list.load_only_inlined_plugins {
            let dir = path.parent().unwrap_or(Path::new(".")).join(&list.name);
            for file in conf_files(&dir, &["conf"])? {
                let b = std::fs::read(&file).map_err(|e| {
                    CniError::new(
                        code::IO_FAILURE,
                        format!("error reading {}: {e}", file.display()),
                        "",
                    )
                })?;
                let conf: Value = serde_json::from_slice(&b).map_err(|e| {
                    CniError::new(
                        code::DECODING_FAILURE,
                        format!("error parsing configuration: {e}"),
                        file.display().to_string(),
                    )
                })?;
                check_plugin_conf(&conf)?;
                list.plugins.push(conf);
            }
        }
        if list.plugins.is_empty() {
            return Err(CniError::invalid_config("no plugin configs found"));
        }
        Ok(list)
    }

    /// The `type` of plugin `i`.
    pub fn plugin_type(&self, i: usize) -> &str {
        self.plugins
            .get(i)
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// The highest of `cniVersions` and `cniVersion` that is not newer than
/// what this library speaks.
fn pick_version(raw: &Value, cni_version: &str) -> Result<String, CniError> {
    let Some(items) = raw.as_array() else {
        return Err(parse_err(format!(
            "invalid type for cniVersions: {}",
            type_name(raw)
        )));
    };
    let current = Version::parse(version::CURRENT)?;
    let mut candidates: Vec<(Version, String)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(v) = item.as_str() else {
            return Err(parse_err(format!(
                "invalid type for cniVersions index {i}: {}",
                type_name(item)
            )));
        };
        let parsed = Version::parse(v).map_err(|e| {
            parse_err(format!(
                "invalid cniVersions entry {v} at index {i}: {}",
                e.msg
            ))
        })?;
        if parsed <= current {
            candidates.push((parsed, v.to_string()));
        }
    }
    if !cni_version.is_empty() {
        let parsed = Version::parse(cni_version)
            .map_err(|e| parse_err(format!("invalid cniVersion {cni_version}: {}", e.msg)))?;
        if parsed <= current {
            candidates.push((parsed, cni_version.to_string()));
        }
    }
    Ok(candidates
        .into_iter()
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, s)| s)
        .unwrap_or_else(|| cni_version.to_string()))
}

/// The files in `dir` with one of `extensions`, sorted; none if `dir` is missing.
pub fn conf_files(dir: &Path, extensions: &[&str]) -> Result<Vec<PathBuf>, CniError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!("failed to read {}: {e}", dir.display()),
                "",
            ));
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| extensions.contains(&e))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Finds the network `name` in `dir`, as libcni's `LoadNetworkConf`:
/// `.conflist` files first, then single `.conf`/`.json` configs (upgraded
/// to a list of one).
pub fn load_network_conf(dir: impl AsRef<Path>, name: &str) -> Result<NetworkConfigList, CniError> {
    let dir = dir.as_ref();
    let not_found = || {
        CniError::invalid_config(format!(
            "no net configuration with name {name:?} in {}",
            dir.display()
        ))
    };
    let lists = conf_files(dir, &["conflist"])?;
    for file in &lists {
        let list = NetworkConfigList::from_file(file)?;
        if list.name == name {
            return Ok(list);
        }
    }
    let singles = conf_files(dir, &["conf", "json"])?;
    if singles.is_empty() {
        if lists.is_empty() {
            return Err(CniError::invalid_config(format!(
                "no net configurations found in {}",
                dir.display()
            )));
        }
        return Err(not_found());
    }
    for file in &singles {
        let bytes = std::fs::read(file).map_err(|e| {
            CniError::new(
                code::IO_FAILURE,
                format!("error reading {}: {e}", file.display()),
                "",
            )
        })?;
        let list = NetworkConfigList::from_conf_bytes(&bytes)?;
        if list.name == name {
            return Ok(list);
        }
    }
    Err(not_found())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_list() {
        let l = NetworkConfigList::from_bytes(
            br#"{"name":"n","cniVersion":"1.0.0","disableCheck":"TRUE","disableGC":true,
                "plugins":[{"type":"bridge","ipam":{}},{"type":"portmap","capabilities":{"portMappings":true}}]}"#,
        )
        .unwrap();
        assert_eq!(l.name, "n");
        assert_eq!(l.cni_version, "1.0.0");
        assert!(l.disable_check && l.disable_gc && !l.load_only_inlined_plugins);
        assert_eq!(l.plugins.len(), 2);
        assert_eq!(l.plugin_type(1), "portmap");
        assert_eq!(l.plugin_type(5), "");
    }

    #[test]
    fn list_errors() {
        for (bad, want) in [
            (r#"{"plugins":[{"type":"x"}]}"#, "no name"),
            (r#"{"name":1}"#, "invalid name type"),
            (r#"{"name":"n","cniVersion":1}"#, "invalid cniVersion type"),
            (r#"{"name":"n","plugins":[]}"#, "no plugins in list"),
            (r#"{"name":"n","plugins":{}}"#, "invalid 'plugins' type"),
            (r#"{"name":"n","plugins":[{"x":1}]}"#, "missing 'type'"),
            (r#"{"name":"n","plugins":[{"type":""}]}"#, "missing 'type'"),
            (
                r#"{"name":"n","plugins":[{"type":"a","capabilities":{"x":1}}]}"#,
                "capabilities",
            ),
            (
                r#"{"name":"n","disableCheck":"yes","plugins":[{"type":"a"}]}"#,
                "invalid value \"yes\" for disableCheck",
            ),
            (
                r#"{"name":"n","disableGC":1,"plugins":[{"type":"a"}]}"#,
                "invalid type number for disableGC",
            ),
            (
                r#"{"name":"n","loadOnlyInlinedPlugins":true}"#,
                "no 'plugins' key",
            ),
            (
                r#"{"name":"n","cniVersions":["x"],"plugins":[{"type":"a"}]}"#,
                "invalid cniVersions entry x",
            ),
        ] {
            let e = NetworkConfigList::from_bytes(bad.as_bytes()).unwrap_err();
            assert!(e.msg.contains(want), "{bad}: {}", e.msg);
            assert_eq!(e.code, 7, "{bad}");
        }
        assert_eq!(NetworkConfigList::from_bytes(b"{").unwrap_err().code, 6);
    }

    #[test]
    fn cni_versions_pick_the_highest_supported() {
        let l = NetworkConfigList::from_bytes(
            br#"{"name":"n","cniVersion":"0.4.0","cniVersions":["1.0.0","9.0.0","0.3.1"],"plugins":[{"type":"a"}]}"#,
        )
        .unwrap();
        assert_eq!(l.cni_version, "1.0.0");
        let l = NetworkConfigList::from_bytes(
            br#"{"name":"n","cniVersions":["9.0.0"],"plugins":[{"type":"a"}]}"#,
        )
        .unwrap();
        assert_eq!(l.cni_version, "");
        let l = NetworkConfigList::from_bytes(
            br#"{"name":"n","cniVersion":"1.1.0","cniVersions":["0.3.1"],"plugins":[{"type":"a"}]}"#,
        )
        .unwrap();
        assert_eq!(l.cni_version, "1.1.0");
    }

    #[test]
    fn single_conf_becomes_a_list() {
        let l = NetworkConfigList::from_conf_bytes(
            br#"{"cniVersion":"0.4.0","name":"one","type":"bridge","bridge":"br0"}"#,
        )
        .unwrap();
        assert_eq!((l.name.as_str(), l.cni_version.as_str()), ("one", "0.4.0"));
        assert_eq!(l.plugins.len(), 1);
        assert_eq!(l.plugins[0]["bridge"], "br0");
        assert!(NetworkConfigList::from_conf_bytes(br#"{"name":"x"}"#).is_err());
    }

    #[test]
    fn files_and_directories() {
        let dir = std::env::temp_dir().join(format!("cni-runtime-conf-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("net2")).unwrap();
        std::fs::write(
            dir.join("10-a.conflist"),
            r#"{"name":"net1","cniVersion":"1.0.0","plugins":[{"type":"a"}]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("20-b.conflist"),
            r#"{"name":"net2","cniVersion":"1.0.0"}"#,
        )
        .unwrap();
        std::fs::write(dir.join("net2").join("1.conf"), r#"{"type":"extra1"}"#).unwrap();
        std::fs::write(dir.join("net2").join("2.conf"), r#"{"type":"extra2"}"#).unwrap();
        std::fs::write(
            dir.join("30-c.conf"),
            r#"{"name":"net3","cniVersion":"0.3.1","type":"c"}"#,
        )
        .unwrap();

        assert_eq!(load_network_conf(&dir, "net1").unwrap().plugin_type(0), "a");
        let n2 = load_network_conf(&dir, "net2").unwrap();
        assert_eq!((n2.plugin_type(0), n2.plugin_type(1)), ("extra1", "extra2"));
        let n3 = load_network_conf(&dir, "net3").unwrap();
        assert_eq!((n3.plugin_type(0), n3.cni_version.as_str()), ("c", "0.3.1"));
        let e = load_network_conf(&dir, "nope").unwrap_err();
        assert!(
            e.msg.starts_with("no net configuration with name \"nope\""),
            "{}",
            e.msg
        );
        let e = load_network_conf(dir.join("missing"), "x").unwrap_err();
        assert!(
            e.msg.starts_with("no net configurations found"),
            "{}",
            e.msg
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
