//! `CNI_ARGS`: `K=V;K=V` pairs, parsed the way the reference's `LoadArgs` does.

use crate::error::CniError;

/// Parsed `CNI_ARGS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniArgs {
    pairs: Vec<(String, String)>,
}

impl CniArgs {
    /// Splits `K=V;K=V`. Every pair must have exactly one `=`; an empty
    /// string means no arguments.
    pub fn parse(raw: &str) -> Result<Self, CniError> {
        let mut pairs = Vec::new();
        if raw.is_empty() {
            return Ok(CniArgs { pairs });
        }
        for pair in raw.split(';') {
            let mut kv = pair.split('=');
            match (kv.next(), kv.next(), kv.next()) {
                (Some(k), Some(v), None) => pairs.push((k.to_string(), v.to_string())),
                _ => return Err(CniError::internal(format!("ARGS: invalid pair {pair:?}"))),
            }
        }
        Ok(CniArgs { pairs })
    }

    /// Parses and checks the keys against the ones a plugin knows, as
    /// `LoadArgs` does with a struct: unknown keys are an error unless
    /// `IgnoreUnknown` is true. `IgnoreUnknown` itself is always known.
    pub fn load(raw: &str, known: &[&str]) -> Result<Self, CniError> {
        let args = Self::parse(raw)?;
        let mut ignore_unknown = false;
        let mut unknown = Vec::new();
        for (k, v) in &args.pairs {
            if k == "IgnoreUnknown" {
                ignore_unknown = parse_bool(v).map_err(|e| {
                    CniError::internal(format!(
                        "ARGS: error parsing value of pair \"{k}={v}\": {e}"
                    ))
                })?;
            } else if !known.contains(&k.as_str()) {
                unknown.push(format!("{k}={v}"));
            }
        }
        if !unknown.is_empty() && !ignore_unknown {
            let quoted: Vec<String> = unknown.iter().map(|p| format!("{p:?}")).collect();
            return Err(CniError::internal(format!(
                "ARGS: unknown args [{}]",
                quoted.join(" ")
            )));
        }
        Ok(args)
    }

    /// The value of the last pair with this key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// All pairs in order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }
}

/// The reference's `UnmarshallableBool`: 1/true/0/false in any case.
fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(format!("boolean unmarshal error: invalid input {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs() {
        let a = CniArgs::parse("IP=10.0.0.5;MAC=00:11:22:33:44:55").unwrap();
        assert_eq!(a.get("IP"), Some("10.0.0.5"));
        assert_eq!(a.get("MAC"), Some("00:11:22:33:44:55"));
        assert_eq!(a.get("ip"), None);
        assert!(CniArgs::parse("").unwrap().pairs().is_empty());
    }

    #[test]
    fn malformed_pairs_are_errors() {
        for raw in ["a=b=c", "a", "a=b;", ";", "a=b;c"] {
            let e = CniArgs::parse(raw).unwrap_err();
            assert!(e.msg.starts_with("ARGS: invalid pair"), "{raw}: {}", e.msg);
        }
        assert_eq!(
            CniArgs::parse("x=1;a=b=c").unwrap_err().msg,
            r#"ARGS: invalid pair "a=b=c""#
        );
    }

    #[test]
    fn unknown_keys_need_ignore_unknown() {
        let e = CniArgs::load("IP=1.2.3.4;FOO=bar;K=v", &["IP"]).unwrap_err();
        assert_eq!(e.msg, r#"ARGS: unknown args ["FOO=bar" "K=v"]"#);
        for yes in ["1", "true", "True", "TRUE"] {
            let raw = format!("FOO=bar;IgnoreUnknown={yes};IP=1.2.3.4");
            assert_eq!(
                CniArgs::load(&raw, &["IP"]).unwrap().get("IP"),
                Some("1.2.3.4")
            );
        }
        assert!(CniArgs::load("FOO=bar;IgnoreUnknown=0", &[]).is_err());
        let e = CniArgs::load("IgnoreUnknown=maybe", &[]).unwrap_err();
        assert!(
            e.msg
                .contains("boolean unmarshal error: invalid input maybe"),
            "{}",
            e.msg
        );
    }
}
