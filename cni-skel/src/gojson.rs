//! Deserialising config the way the Go plugins' `encoding/json` does.
//!
//! Go matches a JSON key to a struct field by its exact name first and then
//! case-insensitively, and a JSON `null` leaves a field as if it were
//! absent. Runtimes rely on this: containerd (go-cni) sends
//! `runtimeConfig.portMappings` as `{"HostPort":8080,"ContainerPort":80,…}`
//! and `ipRanges` as `[[{"Subnet":…}]]`, which the Go plugins read into
//! fields tagged `hostPort`, `containerPort` and `subnet`.
//!
//! [`from_value`] and [`from_slice`] give any `Deserialize` type those
//! rules, at every depth ([`field`] is the same lookup for config read by
//! hand): a struct's keys are folded onto the field names
//! serde declares for it (renames included), before the derived code sees
//! them. A struct is only read from a JSON object, as in Go (serde alone
//! would also accept an array).

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::{Error, Map, Value};

/// Deserialises `T` from JSON text with Go's key matching.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let v: Value = serde_json::from_slice(bytes)?;
    from_value(&v)
}

/// Deserialises `T` from a JSON value with Go's key matching.
pub fn from_value<'a, T: Deserialize<'a>>(v: &'a Value) -> Result<T, Error> {
    T::deserialize(GoValue(v))
}

/// Looks `key` up in a JSON object as Go matches a struct field: the exact
/// key first, then one equal to it ignoring ASCII case. `null` is absent.
/// For config read by hand rather than through serde.
pub fn field<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    m.get(key)
        .or_else(|| {
            m.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
        .filter(|v| !v.is_null())
}

/// The value serde sees for the struct field `field` (one of `fields`,
/// the struct's) when deserialising `m` with Go's key matching: the same
/// choice among differently cased keys as [`from_value`] makes.
pub fn struct_field<'a>(
    m: &'a Map<String, Value>,
    field: &str,
    fields: &'static [&'static str],
) -> Option<&'a Value> {
    Entries::folded(m, fields)
        .entries
        .into_iter()
        .find(|(k, _)| *k == field)
        .map(|(_, v)| v)
}

/// The field `key` names: itself if declared, else the first declared field
/// equal to it ignoring ASCII case, else `key` unchanged (unknown).
fn field_for<'a>(key: &'a str, fields: &'static [&'static str]) -> &'a str {
    if fields.contains(&key) {
        return key;
    }
    fields
        .iter()
        .find(|f| f.eq_ignore_ascii_case(key))
        .copied()
        .unwrap_or(key)
}

/// A borrowed JSON value deserialised with Go's rules.
#[derive(Clone, Copy)]
struct GoValue<'a>(&'a Value);

impl<'de> de::Deserializer<'de> for GoValue<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Seq(items.iter())),
            Value::Object(m) => visitor.visit_map(Entries::plain(m)),
            scalar => scalar.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(m) => visitor.visit_map(Entries::folded(m, fields)),
            other => Err(de::Error::invalid_type(unexpected(other), &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.0.deserialize_str(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.0.deserialize_string(visitor)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char
        bytes byte_buf unit unit_struct seq tuple tuple_struct map identifier ignored_any
    }
}

fn unexpected(v: &Value) -> de::Unexpected<'_> {
    match v {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(_) => de::Unexpected::Other("number"),
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

struct Seq<'a>(std::slice::Iter<'a, Value>);

impl<'de> de::SeqAccess<'de> for Seq<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(GoValue(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// An object's entries; for a struct, keys folded onto its fields, and
/// `null`s and case-insensitive repeats of an exact key left out.
struct Entries<'a> {
    entries: Vec<(&'a str, &'a Value)>,
    next: usize,
}

impl<'a> Entries<'a> {
    fn plain(m: &'a Map<String, Value>) -> Self {
        Entries {
            entries: m.iter().map(|(k, v)| (k.as_str(), v)).collect(),
            next: 0,
        }
    }

    fn folded(m: &'a Map<String, Value>, fields: &'static [&'static str]) -> Self {
        let mut entries: Vec<(&'a str, &'a Value)> = Vec::with_capacity(m.len());
        for (k, v) in m.iter().filter(|(_, v)| !v.is_null()) {
            let f = field_for(k, fields);
            // An exact key wins over a differently cased one.
            if f != k && m.contains_key(f) {
                continue;
            }
            // Two spellings of a field not given exactly: keep one, as Go
            // keeps the last it reads.
            match entries.iter_mut().find(|(seen, _)| *seen == f) {
                Some(slot) => slot.1 = v,
                None => entries.push((f, v)),
            }
        }
        Entries { entries, next: 0 }
    }
}

impl<'de> de::MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.entries.get(self.next) {
            Some((k, _)) => seed
                .deserialize(IntoDeserializer::<Error>::into_deserializer(*k))
                .map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (_, v) = self
            .entries
            .get(self.next)
            .ok_or_else(|| <Error as de::Error>::custom("value without a key"))?;
        self.next += 1;
        seed.deserialize(GoValue(v))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len() - self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Mapping {
        host_port: i64,
        #[serde(default)]
        container_port: i64,
        #[serde(default, rename = "hostIP")]
        host_ip: Option<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Runtime {
        #[serde(default)]
        port_mappings: Vec<Mapping>,
        #[serde(default)]
        labels: BTreeMap<String, String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Conf {
        #[serde(default)]
        runtime_config: Option<Runtime>,
        #[serde(default)]
        is_gateway: bool,
    }

    #[test]
    fn go_cni_capitalised_keys_reach_the_fields_at_every_depth() {
        let c: Conf = from_value(&json!({
            "RuntimeConfig": {"PortMappings": [
                {"HostPort": 8080, "ContainerPort": 80, "Protocol": "tcp", "HostIP": ""},
                {"hostport": 1, "CONTAINERPORT": 2},
            ]},
            "isgateway": true,
        }))
        .unwrap();
        let rc = c.runtime_config.unwrap();
        assert_eq!(
            rc.port_mappings,
            vec![
                Mapping {
                    host_port: 8080,
                    container_port: 80,
                    host_ip: Some(String::new())
                },
                Mapping {
                    host_port: 1,
                    container_port: 2,
                    host_ip: None
                },
            ]
        );
        assert!(c.is_gateway);
    }

    #[test]
    fn exact_key_wins_and_map_keys_are_kept() {
        let c: Runtime = from_value(&json!({
            "portMappings": [{"hostPort": 1, "HostPort": 2}],
            "labels": {"Key": "v", "key": "w"},
        }))
        .unwrap();
        assert_eq!(c.port_mappings[0].host_port, 1);
        assert_eq!(c.labels.len(), 2, "map keys are data, not fields");
    }

    #[test]
    fn null_is_absent_and_structs_need_objects() {
        let m: Mapping =
            from_value(&json!({"hostPort": 3, "containerPort": null, "hostIP": null})).unwrap();
        assert_eq!((m.container_port, m.host_ip), (0, None));
        let e = from_value::<Mapping>(&json!([3, 4, null])).unwrap_err();
        assert!(e.to_string().contains("invalid type: sequence"), "{e}");
        let e = from_value::<Mapping>(&json!({"hostPort": "80"})).unwrap_err();
        assert!(e.to_string().contains("invalid type: string"), "{e}");
        assert!(from_value::<Mapping>(&json!({"containerPort": 1})).is_err());
    }

    #[test]
    fn scalars_and_options_behave_as_serde_json() {
        let v: Option<u16> = from_value(&json!(null)).unwrap();
        assert_eq!(v, None);
        assert!(from_value::<u16>(&json!(70000)).is_err());
        let s: Vec<String> = from_value(&json!(["a", "b"])).unwrap();
        assert_eq!(s, ["a", "b"]);
        let any: Value = from_value(&json!({"A": [1, {"b": null}]})).unwrap();
        assert_eq!(any, json!({"A": [1, {"b": null}]}));
    }
}
