//! The vrf network config: `vrfname` and `table`, validated before
//! anything is touched.

use cni_skel::{CmdArgs, CniError, ParseFor};
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

fn load_error(e: serde_json::Error) -> CniError {
    CniError::invalid_config(format!("failed to load netconf: {e}"))
}

impl Conf {
    /// Parses the config on stdin (leniently for DEL: [`ParseFor`]).
    pub fn parse(args: &CmdArgs) -> Result<Conf, CniError> {
        Conf::from_config(&args.config, ParseFor::of(args))
    }

    /// [`Conf::parse`] of a config's text, as the skel hands it over
    /// (parsed once), for tests.
    #[cfg(test)]
    fn from_json(text: &[u8], mode: ParseFor) -> Result<Conf, CniError> {
        Conf::from_config(&serde_json::from_slice(text).map_err(load_error)?, mode)
    }

    fn from_config(config: &serde_json::Value, mode: ParseFor) -> Result<Conf, CniError> {
        let c: RawConf = cni_skel::gojson::from_value(config).map_err(load_error)?;
        let vrfname = c.vrfname.unwrap_or_default();
        if vrfname.is_empty() {
            return Err(CniError::invalid_config(
                "configuration is expected to have a valid vrf name",
            ));
        }
        // What the kernel accepts as a device name (dev_valid_name). For
        // DEL a name the kernel refuses names no VRF: empty, DEL finds none.
        let vrfname = mode.or_else(
            if vrfname.len() > cni_net::MAX_IFNAME_LEN
                || vrfname == "."
                || vrfname == ".."
                || vrfname
                    .chars()
                    .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
            {
                Err(CniError::invalid_config(format!(
                    "vrfname {vrfname:?} is not a valid interface name"
                )))
            } else {
                Ok(vrfname)
            },
            String::new,
        )?;
        let table = match c.table {
            // 0 (unspec) = pick one, as in the reference.
            None | Some(0) => None,
            // default, main, local: a VRF there would capture the
            // namespace's own routing (DEL does not read the table).
            Some(t) if is_reserved_table(t) => mode.or_else(
                Err(CniError::invalid_config(format!(
                    "table {t} is one of the kernel's own (253 default, 254 main, 255 local)"
                ))),
                || None,
            )?,
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
        let c = Conf::from_json(br#"{"vrfname":"red","table":1001}"#, ParseFor::Use).unwrap();
        assert_eq!(
            c,
            Conf {
                vrfname: "red".into(),
                table: Some(1001)
            }
        );
        // Go's decoder: keys match ignoring case; 0 means "pick one".
        let c = Conf::from_json(br#"{"VRFName":"red","Table":0}"#, ParseFor::Use).unwrap();
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
            assert!(
                Conf::from_json(bad.as_bytes(), ParseFor::Use).is_err(),
                "{bad}"
            );
        }
        let e = Conf::from_json(b"{}", ParseFor::Use).unwrap_err();
        assert_eq!(e.msg, "configuration is expected to have a valid vrf name");
    }

    #[test]
    fn del_goes_on_without_refused_values() {
        let c = Conf::from_json(br#"{"vrfname":"red","table":254}"#, ParseFor::Del).unwrap();
        assert_eq!((c.vrfname.as_str(), c.table), ("red", None));
        let c = Conf::from_json(br#"{"vrfname":"a/b"}"#, ParseFor::Del).unwrap();
        assert_eq!(c.vrfname, "");
        // A wrong type or no name at all still fails, as in the reference.
        assert!(Conf::from_json(br#"{"vrfname":"red","table":"1"}"#, ParseFor::Del).is_err());
        assert!(Conf::from_json(br#"{}"#, ParseFor::Del).is_err());
    }
}
