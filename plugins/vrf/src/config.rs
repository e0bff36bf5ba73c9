//! The vrf network config: `vrfname` and `table`, validated before
//! anything is touched.

use cni_skel::{CmdArgs, CniError};
use serde::Deserialize;

/// The keys vrf reads itself.
#[derive(Debug, Default, Deserialize)]
struct RawConf {
    #[serde(default)]
    vrfname: Option<String>,
    #[serde(default)]
    table: Option<u32>,
}

/// The plugin's keys, validated.
#[derive(Debug, PartialEq, Eq)]
pub struct Conf {
    /// The VRF's device name.
    pub vrfname: String,
    /// The table of a VRF made by this plugin; `None` = the first free one.
    pub table: Option<u32>,
}

impl Conf {
    /// Parses the config on stdin.
    pub fn parse(args: &CmdArgs) -> Result<Conf, CniError> {
        Conf::from_json(&args.stdin)
    }

    fn from_json(stdin: &[u8]) -> Result<Conf, CniError> {
        let c: RawConf = cni_skel::gojson::from_slice(stdin)
            .map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
        let vrfname = c.vrfname.unwrap_or_default();
        if vrfname.is_empty() {
            return Err(CniError::invalid_config(
                "configuration is expected to have a valid vrf name",
            ));
        }
        // What the kernel accepts as a device name (dev_valid_name).
        if vrfname.len() > cni_net::MAX_IFNAME_LEN
            || vrfname == "."
            || vrfname == ".."
            || vrfname
                .chars()
                .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            return Err(CniError::invalid_config(format!(
                "vrfname {vrfname:?} is not a valid interface name"
            )));
        }
        let table = match c.table {
            // 0 (unspec) = pick one, as in the reference.
            None | Some(0) => None,
            // default, main, local: a VRF there would capture the
            // namespace's own routing.
            Some(t) if is_reserved_table(t) => {
                return Err(CniError::invalid_config(format!(
                    "table {t} is one of the kernel's own (253 default, 254 main, 255 local)"
                )));
            }
            Some(t) => Some(t),
        };
        Ok(Conf { vrfname, table })
    }
}

/// Is `t` one of the kernel's own tables (default, main, local)?
pub fn is_reserved_table(t: u32) -> bool {
    (253..=255).contains(&t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_keys() {
        let c = Conf::from_json(br#"{"vrfname":"red","table":1001}"#).unwrap();
        assert_eq!(
            c,
            Conf {
                vrfname: "red".into(),
                table: Some(1001)
            }
        );
        // Go's decoder: keys match ignoring case; 0 means "pick one".
        let c = Conf::from_json(br#"{"VRFName":"red","Table":0}"#).unwrap();
        assert_eq!(c.table, None);
        for bad in [
            r#"{}"#,
            r#"{"vrfname":""}"#,
            r#"{"vrfname":"a-name-far-too-long"}"#,
            r#"{"vrfname":"a/b"}"#,
            r#"{"vrfname":"a b"}"#,
            r#"{"vrfname":".."}"#,
            r#"{"vrfname":"red","table":254}"#,
            r#"{"vrfname":"red","table":-1}"#,
            r#"{"vrfname":"red","table":4294967296}"#,
            r#"{"vrfname":"red","table":"100"}"#,
            r#"{"vrfname":7}"#,
            r#"[]"#,
        ] {
            assert!(Conf::from_json(bad.as_bytes()).is_err(), "{bad}");
        }
        let e = Conf::from_json(b"{}").unwrap_err();
        assert_eq!(e.msg, "configuration is expected to have a valid vrf name");
    }
}
