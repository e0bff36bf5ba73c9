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
    /// Capability arguments from the runtime: an object (any other type is
    /// an error); a plugin reads what it holds from [`crate::CmdArgs::config`].
    #[serde(default)]
    pub runtime_config: Option<Object>,
    /// The previous plugin's result in a chain: an object (any other type
    /// is an error), read by [`crate::CmdArgs::prev_result`] from the
    /// config itself.
    #[serde(default)]
    pub prev_result: Option<Object>,
    /// `args` (e.g. `args.cni.ips`): an object (any other type is an error).
    #[serde(default)]
    pub args: Option<Object>,
}

/// A key whose value is a JSON object, checked as a `Map` would be (the
/// same error for another type) without copying what it holds: the skel
/// keeps the whole parsed config, and a copy of `prevResult` was most of
/// what reading the common keys cost a chained plugin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Object;

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Object, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Object;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Object, A::Error> {
                while m
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Object)
            }
        }
        d.deserialize_map(Visitor)
    }
}

/// The names of [`NetConf`]'s fields, as serde matches keys to them: the
/// keys every plugin's config shares.
pub const FIELDS: &[&str] = &[
    "cniVersion",
    "name",
    "type",
    "ipam",
    "dns",
    "runtimeConfig",
    "prevResult",
    "args",
];

/// The value [`NetConf`]'s field `field` (one of [`FIELDS`]) was read
/// from in `config`, by the same key matching (Go's, [`crate::gojson`]):
/// what a plugin reads of an [`Object`] field.
pub fn field<'a>(config: &'a Value, field: &str) -> Option<&'a Value> {
    crate::gojson::struct_field(config.as_object()?, field, FIELDS)
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
    fn object_keys_are_checked_as_maps_were() {
        for (bad, want) in [
            (
                r#"{"name":"n","prevResult":"x"}"#,
                r#"invalid type: string "x", expected a map"#,
            ),
            (
                r#"{"name":"n","runtimeConfig":3}"#,
                "invalid type: integer `3`, expected a map",
            ),
            (
                r#"{"name":"n","args":[1]}"#,
                "invalid type: sequence, expected a map",
            ),
        ] {
            let e = parse(bad.as_bytes()).unwrap_err();
            assert_eq!(
                e.msg,
                format!("error unmarshall network config: {want}"),
                "{bad}"
            );
        }
        let c = parse(br#"{"name":"n","prevResult":null,"args":{"cni":{"x":[1]}}}"#).unwrap();
        assert_eq!((c.prev_result, c.args), (None, Some(Object)));
    }

    /// NetConf's fields exactly as serde lists them to a deserializer.
    #[test]
    fn fields_are_netconfs() {
        struct Names;
        impl<'de> serde::Deserializer<'de> for Names {
            type Error = serde_json::Error;
            fn deserialize_any<V: serde::de::Visitor<'de>>(
                self,
                _: V,
            ) -> Result<V::Value, Self::Error> {
                Err(serde::de::Error::custom("not a struct"))
            }
            fn deserialize_struct<V: serde::de::Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                Err(serde::de::Error::custom(fields.join(",")))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
                bytes byte_buf option unit unit_struct newtype_struct seq tuple
                tuple_struct map enum identifier ignored_any
            }
        }
        let e = NetConf::deserialize(Names).unwrap_err();
        assert_eq!(e.to_string(), FIELDS.join(","));
    }

    /// What `field` finds is what deserialising the struct reads, among
    /// keys spelt in several cases, null and absent ones.
    #[test]
    fn field_finds_what_the_struct_reads() {
        #[derive(Deserialize)]
        struct Probe {
            #[serde(default, rename = "prevResult")]
            prev: Option<Value>,
            #[serde(default, rename = "runtimeConfig")]
            runtime: Option<Value>,
        }
        for text in [
            r#"{"prevResult":{"a":1}}"#,
            r#"{"PrevResult":{"a":1},"prevresult":{"b":2}}"#,
            r#"{"prevresult":{"b":2},"PREVRESULT":{"c":3}}"#,
            r#"{"prevResult":{"a":1},"PrevResult":{"b":2}}"#,
            r#"{"prevResult":null,"PrevResult":{"b":2}}"#,
            r#"{"PrevResult":null,"prevresult":{"b":2}}"#,
            r#"{"RuntimeConfig":{"x":1},"runtimeConfig":null}"#,
            r#"{"runtimeconfig":{"x":1},"prevResult":{}}"#,
            r#"{}"#,
        ] {
            let v: Value = serde_json::from_str(text).unwrap();
            let p: Probe = crate::gojson::from_value(&v).unwrap();
            assert_eq!(field(&v, "prevResult"), p.prev.as_ref(), "{text}");
            assert_eq!(field(&v, "runtimeConfig"), p.runtime.as_ref(), "{text}");
        }
        assert_eq!(field(&Value::Null, "prevResult"), None);
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
