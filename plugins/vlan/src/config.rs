//! The vlan network config: every key typed and checked before anything
//! is touched.

use cni_net::ChildKind;
use cni_plugin::link_plugin::ChildConf;
use cni_skel::{CmdArgs, CniError, ParseFor};
use serde::Deserialize;

/// The largest VLAN id (4095 is reserved).
const MAX_VLAN_ID: i64 = 4094;

/// The keys vlan reads itself (the common ones come typed from the skel).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    master: Option<String>,
    #[serde(default, rename = "vlanId")]
    vlan_id: Option<i64>,
    #[serde(default)]
    mtu: Option<i64>,
    #[serde(default)]
    link_in_container: Option<bool>,
}

/// A parsed vlan config.
#[derive(Debug, Clone)]
pub struct Conf {
    /// `master` (required), `mtu`, `linkInContainer`, `dns` and IPAM (L3
    /// when set; else L2).
    pub child: ChildConf,
    /// `vlanId`, 0 to 4094.
    pub id: u16,
}

/// Parses the config on stdin. DEL, which deletes `CNI_IFNAME` in the
/// container and reads neither, only logs a missing `master` or a VLAN ID
/// ADD refuses ([`ParseFor`]).
pub fn load(args: &CmdArgs) -> Result<Conf, CniError> {
    load_config(&args.config, &args.conf, ParseFor::of(args))
}

fn load_config(
    config: &serde_json::Value,
    common: &cni_skel::NetConf,
    mode: ParseFor,
) -> Result<Conf, CniError> {
    let raw: Raw = cni_skel::gojson::from_value(config)
        .map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
    let child = ChildConf::new(raw.master, raw.mtu, raw.link_in_container, common);
    mode.check(match child.master {
        Some(_) => Ok(()),
        None => Err(CniError::invalid_config(
            r#""master" field is required. It specifies the host interface name to create the VLAN for"#,
        )),
    })?;
    let id = raw.vlan_id.unwrap_or(0);
    let id = mode.or_else(
        u16::try_from(id)
            .ok()
            .filter(|i| i64::from(*i) <= MAX_VLAN_ID)
            .ok_or_else(|| {
                CniError::invalid_config(format!(
                    "invalid VLAN ID {id} (must be between 0 and {MAX_VLAN_ID} inclusive)"
                ))
            }),
        || 0,
    )?;
    Ok(Conf { child, id })
}

impl Conf {
    /// The link kind with its attributes.
    pub fn kind(&self) -> ChildKind {
        ChildKind::Vlan { id: self.id }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str) -> Result<Conf, CniError> {
        let (config, common) = cni_skel::conf::parse_full(s.as_bytes())?;
        load_config(&config, &common, ParseFor::Use)
    }

    #[test]
    fn ids_zero_to_4094() {
        for (id, ok) in [
            (0, true),
            (1, true),
            (4094, true),
            (4095, false),
            (5000, false),
            (-1, false),
        ] {
            let r = load_str(&format!(r#"{{"name":"n","master":"eth0","vlanId":{id}}}"#));
            match r {
                Ok(c) => assert!(ok && i64::from(c.id) == id, "{id}"),
                Err(e) => {
                    assert!(!ok, "{id}: {e:?}");
                    assert_eq!(
                        e.msg,
                        format!("invalid VLAN ID {id} (must be between 0 and 4094 inclusive)")
                    );
                }
            }
        }
        let c = load_str(r#"{"name":"n","master":"eth0"}"#).unwrap();
        assert_eq!(c.id, 0);
        for bad in [r#""vlanId":"10""#, r#""vlanId":10.0"#, r#""mtu":"1500""#] {
            let e = load_str(&format!(r#"{{"name":"n","master":"eth0",{bad}}}"#)).unwrap_err();
            assert!(e.msg.starts_with("failed to load netconf"), "{bad}: {e:?}");
        }
    }

    #[test]
    fn master_is_required() {
        for c in [r#"{"name":"n"}"#, r#"{"name":"n","master":""}"#] {
            assert_eq!(
                load_str(c).unwrap_err().msg,
                r#""master" field is required. It specifies the host interface name to create the VLAN for"#
            );
        }
        let c =
            load_str(r#"{"name":"n","MASTER":"eth1","VLANID":7,"linkincontainer":true}"#).unwrap();
        assert_eq!(
            (c.child.master.as_deref(), c.id, c.child.link_in_container),
            (Some("eth1"), 7, true)
        );
    }

    #[test]
    fn del_goes_on_without_refused_values() {
        for s in [
            r#"{"name":"n","master":"eth0","vlanId":4095}"#,
            r#"{"name":"n","master":"eth0","vlanId":-1}"#,
            r#"{"name":"n","vlanId":5}"#,
        ] {
            let (config, common) = cni_skel::conf::parse_full(s.as_bytes()).unwrap();
            assert!(load_str(s).is_err(), "{s}");
            assert!(load_config(&config, &common, ParseFor::Del).is_ok(), "{s}");
        }
    }
}
