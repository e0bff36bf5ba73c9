//! The common keys of a network config, typed so that a wrong JSON type for
//! any of them is an error for every plugin.

use crate::types::Dns;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The keys every plugin shares. Unknown keys are ignored, as in the reference.
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
    #[serde(default, deserialize_with = "object")]
    pub ipam: Option<IpamConf>,
    /// DNS settings.
    #[serde(default, deserialize_with = "object")]
    pub dns: Option<Dns>,
    /// Capability arguments from the runtime.
    #[serde(default)]
    pub runtime_config: Option<Map<String, Value>>,
    /// The previous plugin's result in a chain.
    #[serde(default)]
    pub prev_result: Option<Map<String, Value>>,
    /// `args` (e.g. `args.cni.ips`).
    #[serde(default)]
    pub args: Option<Map<String, Value>>,
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

/// Deserialises a struct only from a JSON object (serde would also take an
/// array for a struct, which the reference refuses).
pub fn object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::de::Error;
    let m: Option<Map<String, Value>> = Option::deserialize(d)?;
    m.map(|m| crate::gojson::from_value(&Value::Object(m)).map_err(D::Error::custom))
        .transpose()
}

/// The `ipam` section as the delegating plugin sees it: only the type.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IpamConf {
    /// The IPAM plugin's binary name.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

/// Parses a full config as the skel does: JSON errors are code 6, a missing
/// or invalid name code 7.
pub fn parse(stdin: &[u8]) -> Result<NetConf, crate::CniError> {
    use crate::error::{CniError, code};
    let decode = |e: serde_json::Error| {
        CniError::new(
            code::DECODING_FAILURE,
            format!("error unmarshall network config: {e}"),
            "",
        )
    };
    let map: Map<String, Value> = serde_json::from_slice(stdin).map_err(decode)?;
    let conf: NetConf = crate::gojson::from_value(&Value::Object(map)).map_err(decode)?;
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
        Some(_) => Ok(conf),
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
    fn names_are_checked() {
        assert_eq!(parse(br#"{}"#).unwrap_err().msg, "missing network name");
        let e = parse(br#"{"name":"bad name"}"#).unwrap_err();
        assert_eq!((e.code, e.details.as_str()), (7, "bad name"));
        assert_eq!(parse(br#"{"name":"../etc"}"#).unwrap_err().code, 7);
        assert_eq!(parse(br#"{"name":"n"}"#).unwrap().cni_version(), "0.1.0");
    }
}
