//! The CNI vlan plugin: an 802.1Q sub-interface (`vlanId`) of `master`,
//! created straight into the container. Everything but the config and the
//! link kind is `cni_net::link_plugin`.

use cni_net::ChildKind;
use cni_net::link_plugin::{self, Addressing, ChildConf, Ctx, Expect, L3Opts};
use cni_skel::{CmdArgs, CmdResult, CniError, Output, Plugin};
use serde::Deserialize;
use std::process::ExitCode;

/// The largest VLAN id (4095 is reserved).
const MAX_VLAN_ID: i64 = 4094;

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
struct Conf {
    /// `master` (required), `mtu`, `linkInContainer`, `dns` and IPAM (L3
    /// when set; else L2).
    child: ChildConf,
    id: u16,
}

fn load(args: &CmdArgs) -> Result<Conf, CniError> {
    load_bytes(&args.stdin, &args.conf)
}

fn load_bytes(stdin: &[u8], common: &cni_skel::NetConf) -> Result<Conf, CniError> {
    let raw: Raw = cni_skel::gojson::from_slice(stdin)
        .map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
    let child = ChildConf::new(raw.master, raw.mtu, raw.link_in_container, common);
    if child.master.is_none() {
        return Err(CniError::invalid_config(
            r#""master" field is required. It specifies the host interface name to create the VLAN for"#,
        ));
    }
    let id = raw.vlan_id.unwrap_or(0);
    let id = u16::try_from(id)
        .ok()
        .filter(|i| i64::from(*i) <= MAX_VLAN_ID)
        .ok_or_else(|| {
            CniError::invalid_config(format!(
                "invalid VLAN ID {id} (must be between 0 and {MAX_VLAN_ID} inclusive)"
            ))
        })?;
    Ok(Conf { child, id })
}

impl Conf {
    fn kind(&self) -> ChildKind {
        ChildKind::Vlan { id: self.id }
    }
}

struct Vlan;

impl Plugin for Vlan {
    fn about(&self) -> String {
        cni_skel::about("vlan")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        let conf = load(args)?;
        let cx = Ctx::open(args)?;
        let master = conf.child.parent(&cx)?;
        let new = conf.child.new_link(conf.kind(), &master, None)?;
        // Without IPAM: L2 (the reference requires IPAM; PR #1302).
        let addressing = if conf.child.ipam {
            Addressing::Ipam
        } else {
            Addressing::L2
        };
        let opts = L3Opts {
            dns: Some(conf.child.dns.clone()),
            ..L3Opts::default()
        };
        let result = link_plugin::add(args, &cx, &new, addressing, &opts)?;
        Ok(Output::Result(result))
    }

    /// The config checked, but not the parent: DEL works once the parent
    /// is gone (it took the vlan with it; the reference fails there, so
    /// the address is never released).
    fn del(&self, args: &CmdArgs) -> CmdResult {
        let conf = load(args)?;
        link_plugin::del(args, conf.child.ipam)?;
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = load(args)?;
        let cx = Ctx::open(args)?;
        conf.child.parent(&cx)?;
        link_plugin::check(args, &cx, conf.child.ipam, &Expect::child(conf.kind()))?;
        // A configured MTU is compared too, as the reference does.
        if let Some(mtu) = u32::try_from(conf.child.mtu).ok().filter(|m| *m > 0)
            && let Some(l) = cx.ns_nl.link_by_name(&args.ifname)?
            && l.mtu != mtu
        {
            return Err(CniError::internal(format!(
                "Error: Container interface {} has MTU {}, configured {mtu}",
                l.name, l.mtu
            )));
        }
        Ok(Output::Nothing)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        load(args)?;
        link_plugin::gc(args)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        load(args)?.child.status(args)?;
        Ok(Output::Nothing)
    }
}

fn main() -> ExitCode {
    cni_skel::run(&Vlan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str) -> Result<Conf, CniError> {
        let common = cni_skel::conf::parse(s.as_bytes())?;
        load_bytes(s.as_bytes(), &common)
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
}
