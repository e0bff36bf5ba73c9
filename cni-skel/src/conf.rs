//! The common keys of a network config, typed so that a wrong JSON type for
//! any of them is an error for every plugin.

use crate::types::Dns;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The keys every plugin shares. Unknown keys are ignored, as in the reference.
/// Read with [`crate::gojson`] (see [`parse`]), so `ipam` and `dns` must be
/// objects, as the reference requires.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    /// `cniVersion`; missing means 0.1.0.
    #[serde(default)]
    pub cni_version: Option<String>,
    /// Network name.
    #[serde(default)]
    pub name: Option<String>,
    /// Plugin type.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The IPAM section.
    #[serde(default)]
    pub ipam: Option<IpamConf>,
    /// DNS settings.
    #[serde(default)]
    pub dns: Option<Dns>,
    /// Capability arguments from the runtime.
    #[serde(default)]
    pub runtime_config: Option<Map<String, Value>>,
    /// The previous plugin's result in a chain: a JSON object (any other
    /// type is an error), kept as the value [`crate::types::CniResult::parse_prev`]
    /// reads, so that reading it copies nothing.
    #[serde(default, deserialize_with = "object")]
    pub prev_result: Option<Value>,
    /// `args` (e.g. `args.cni.ips`).
    #[serde(default)]
    pub args: Option<Map<String, Value>>,
}

/// An optional JSON object, as a [`Value`]: `null` is `None`, another
/// type the error a `Map` gives.
fn object<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Option::<Map<String, Value>>::deserialize(d).map(|m| m.map(Value::Object))
}

impl NetConf {
    /// `cniVersion`, `0.1.0` when missing or empty.
    pub fn cni_version(&self) -> &str {
        match self.cni_version.as_deref() {
            None | Some("") => "0.1.0",
            Some(v) => v,
        }
    }

    /// The network name (validated non-empty by the skel).
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    /// The IPAM plugin type, if an `ipam` section with a non-empty type is present.
    pub fn ipam_type(&self) -> Option<&str> {
        self.ipam
            .as_ref()
            .and_then(|i| i.kind.as_deref())
            .filter(|t| !t.is_empty())
    }
}

/// The `ipam` section as the delegating plugin sees it: only the type.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IpamConf {
    /// The IPAM plugin's binary name.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

/// One entry of GC's list of attachments to keep.
#[derive(Debug, Clone, Default, Deserialize)]
struct GcAttachment {
    #[serde(rename = "containerID", default)]
    container_id: String,
    #[serde(default)]
    ifname: String,
}

/// The keys GC's valid list may come under.
#[derive(Debug, Default, Deserialize)]
struct GcKeys {
    #[serde(rename = "cni.dev/valid-attachments", default)]
    valid: Option<Vec<GcAttachment>>,
    /// libcni also sends this misspelt key (cni#1101).
    #[serde(rename = "cni.dev/attachments", default)]
    misspelt: Option<Vec<GcAttachment>>,
}

/// The attachments GC must keep, as (container ID, ifname):
/// `cni.dev/valid-attachments` and the misspelt `cni.dev/attachments` that
/// libcni also sends, together, without repeats. Both absent or null means
/// none is valid, as libcni's own GC assumes. A list that is not a list of
/// objects is code 7.
pub fn valid_attachments(stdin: &[u8]) -> Result<Vec<(String, String)>, crate::CniError> {
    let keys: GcKeys = crate::gojson::from_slice(stdin).map_err(|e| {
        crate::CniError::invalid_config(format!("failed to parse the valid attachments: {e}"))
    })?;
    let mut out: Vec<(String, String)> = Vec::new();
    for a in keys.valid.into_iter().chain(keys.misspelt).flatten() {
        let pair = (a.container_id, a.ifname);
        if !out.contains(&pair) {
            out.push(pair);
        }
    }
    Ok(out)
}

/// Parses a full config as the skel does: JSON errors are code 6, a missing
/// or invalid name code 7.
pub fn parse(stdin: &[u8]) -> Result<NetConf, crate::CniError> {
    parse_full(stdin).map(|(_, conf)| conf)
}

/// As [`parse`], with the whole config as parsed (a JSON object), which
/// the skel keeps in [`crate::CmdArgs::config`] so that a plugin reads its
/// own keys from it (with [`crate::gojson::from_value`]) instead of parsing
/// the text again.
pub fn parse_full(stdin: &[u8]) -> Result<(Value, NetConf), crate::CniError> {
    use crate::error::{CniError, code};
    let decode = |e: serde_json::Error| {
        CniError::new(
            code::DECODING_FAILURE,
            format!("error unmarshall network config: {e}"),
            "",
        )
    };
    let map: Map<String, Value> = serde_json::from_slice(stdin).map_err(decode)?;
    let config = Value::Object(map);
    let conf: NetConf = crate::gojson::from_value(&config).map_err(decode)?;
    match conf.name.as_deref() {
        None | Some("") => Err(CniError::new(
            code::INVALID_NETWORK_CONFIG,
            "missing network name",
            "",
        )),
        Some(n) if !crate::env::valid_name(n) => Err(CniError::new(
            code::INVALID_NETWORK_CONFIG,
            "invalid characters found in network name",
            n,
        )),
        Some(_) => Ok((config, conf)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_keys_are_typed() {
        let ok = parse(br#"{"cniVersion":"1.0.0","name":"n","type":"bridge","ipam":{"type":"host-local","x":1},"extra":[1]}"#).unwrap();
        assert_eq!(ok.cni_version(), "1.0.0");
        assert_eq!(ok.ipam_type(), Some("host-local"));
        for bad in [
            r#"{"name":1}"#,
            r#"{"name":"n","cniVersion":1}"#,
            r#"{"name":"n","type":[]}"#,
            r#"{"name":"n","prevResult":"x"}"#,
            r#"{"name":"n","ipam":"x"}"#,
            r#"{"name":"n","ipam":{"type":5}}"#,
            r#"{"name":"n","dns":[]}"#,
            r#"{"name":"n","runtimeConfig":3}"#,
            "",
            "[]",
        ] {
            assert_eq!(parse(bad.as_bytes()).unwrap_err().code, 6, "{bad}");
        }
    }

    #[test]
    fn gc_valid_attachments_from_both_keys() {
        let v = valid_attachments(
            br#"{"name":"n","cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"},{"containerID":"a","ifname":"eth0"}],"cni.dev/attachments":[{"ContainerID":"b","IfName":"net1"}]}"#,
        )
        .unwrap();
        assert_eq!(
            v,
            vec![("a".into(), "eth0".into()), ("b".into(), "net1".into())]
        );
        for none in [
            r#"{"name":"n"}"#,
            r#"{"cni.dev/valid-attachments":null,"cni.dev/attachments":null}"#,
            r#"{"cni.dev/valid-attachments":[]}"#,
        ] {
            assert!(
                valid_attachments(none.as_bytes()).unwrap().is_empty(),
                "{none}"
            );
        }
        let partial = valid_attachments(br#"{"cni.dev/valid-attachments":[{"ifname":"x"}]}"#);
        assert_eq!(partial.unwrap(), vec![(String::new(), "x".into())]);
        for bad in [
            r#"{"cni.dev/valid-attachments":{"a":1}}"#,
            r#"{"cni.dev/attachments":5}"#,
            r#"{"cni.dev/valid-attachments":[["a","eth0"]]}"#,
            r#"{"cni.dev/valid-attachments":[{"containerID":5}]}"#,
        ] {
            assert_eq!(
                valid_attachments(bad.as_bytes()).unwrap_err().code,
                7,
                "{bad}"
            );
        }
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(parse(br#"{}"#).unwrap_err().msg, "missing network name");
        let e = parse(br#"{"name":"bad name"}"#).unwrap_err();
        assert_eq!((e.code, e.details.as_str()), (7, "bad name"));
        assert_eq!(parse(br#"{"name":"../etc"}"#).unwrap_err().code, 7);
        assert_eq!(parse(br#"{"name":"n"}"#).unwrap().cni_version(), "0.1.0");
    }
}
