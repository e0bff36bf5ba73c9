//! The ipvlan network config: every key typed and checked before anything
//! is touched; the parent is found from it once the namespace is open.

use cni_net::{ChildKind, IpvlanMode};
use cni_plugin::link_plugin::{ChildConf, Ctx};
use cni_skel::{CmdArgs, CniError, CniResult};
use serde::Deserialize;

/// The keys ipvlan reads itself (the common ones come typed from the skel).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Raw {
    #[serde(default)]
    master: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    mtu: Option<i64>,
    #[serde(default)]
    link_in_container: Option<bool>,
}

/// A parsed ipvlan config.
#[derive(Debug, Clone)]
pub struct Conf {
    /// `master` as configured (`None`: from the previous result or the
    /// default route), `mtu`, `linkInContainer`, `dns` and IPAM.
    pub child: ChildConf,
    /// `mode`, l2 by default.
    pub mode: IpvlanMode,
    /// `prevResult`, parsed.
    pub prev: Option<CniResult>,
}

/// Parses the config on stdin.
pub fn load(args: &CmdArgs) -> Result<Conf, CniError> {
    load_config(&args.config, &args.conf, || args.prev_result())
}

fn load_config(
    config: &serde_json::Value,
    common: &cni_skel::NetConf,
    prev: impl FnOnce() -> Result<Option<CniResult>, CniError>,
) -> Result<Conf, CniError> {
    let raw: Raw = cni_skel::gojson::from_value(config)
        .map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
    let mode = match raw.mode.as_deref() {
        None | Some("") => IpvlanMode::L2,
        Some(m) => IpvlanMode::parse(m)
            .ok_or_else(|| CniError::invalid_config(format!("unknown ipvlan mode: {m:?}")))?,
    };
    let prev = prev().map_err(|e| {
        CniError::new(
            e.code,
            format!("could not parse prevResult: {}", e.msg),
            e.details,
        )
    })?;
    Ok(Conf {
        child: ChildConf::new(raw.master, raw.mtu, raw.link_in_container, common),
        mode,
        prev,
    })
}

impl Conf {
    /// The parent's name, if the config or the previous result gives one.
    pub fn master_name(&self) -> Result<Option<String>, CniError> {
        if let Some(m) = &self.child.master {
            return Ok(Some(m.clone()));
        }
        match &self.prev {
            None => Ok(None),
            Some(r) if r.interfaces.len() == 1 && !r.interfaces[0].name.is_empty() => {
                Ok(Some(r.interfaces[0].name.clone()))
            }
            Some(_) => Err(CniError::internal(
                "chained master failure. PrevResult lacks a single named interface",
            )),
        }
    }

    /// The parent: configured, the previous result's or the default route's.
    pub fn master(&self, cx: &Ctx) -> Result<cni_net::Link, CniError> {
        self.child.parent_named(cx, self.master_name()?.as_deref())
    }

    /// The link kind with its attributes.
    pub fn kind(&self) -> ChildKind {
        ChildKind::Ipvlan { mode: self.mode }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str) -> Result<Conf, CniError> {
        let (config, common) = cni_skel::conf::parse_full(s.as_bytes())?;
        let prev = cni_skel::conf::field(&config, "prevResult")
            .map(|m| CniResult::parse_prev(m, common.cni_version()))
            .transpose();
        load_config(&config, &common, || prev)
    }

    #[test]
    fn keys_and_defaults() {
        let c = load_str(r#"{"name":"n","cniVersion":"1.0.0"}"#).unwrap();
        assert_eq!(
            (c.mode, c.child.mtu, c.child.link_in_container),
            (IpvlanMode::L2, 0, false)
        );
        assert_eq!(c.master_name().unwrap(), None);
        let c = load_str(
            r#"{"name":"n","Master":"eth1","MODE":"l3s","mtu":1400,"linkInContainer":true}"#,
        )
        .unwrap();
        assert_eq!(c.master_name().unwrap().as_deref(), Some("eth1"));
        assert_eq!(
            (c.mode, c.child.mtu, c.child.link_in_container),
            (IpvlanMode::L3s, 1400, true)
        );
        for (bad, want) in [
            (r#""mode":"l4""#, r#"unknown ipvlan mode: "l4""#),
            (r#""mode":"L2""#, r#"unknown ipvlan mode: "L2""#),
            (r#""mtu":"1400""#, "failed to load netconf"),
            (r#""mtu":1.5"#, "failed to load netconf"),
        ] {
            let e = load_str(&format!(r#"{{"name":"n",{bad}}}"#)).unwrap_err();
            assert!(e.msg.contains(want), "{bad}: {e:?}");
        }
    }

    #[test]
    fn chained_master_from_the_previous_result() {
        let one = r#"{"name":"n","cniVersion":"1.0.0","prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}],"ips":[{"address":"10.0.0.2/24"}]}}"#;
        assert_eq!(
            load_str(one).unwrap().master_name().unwrap().as_deref(),
            Some("eth0")
        );
        for bad in [
            r#"{"name":"n","cniVersion":"1.0.0","prevResult":{"cniVersion":"1.0.0","interfaces":[]}}"#,
            r#"{"name":"n","cniVersion":"1.0.0","prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"a"},{"name":"b"}]}}"#,
            r#"{"name":"n","cniVersion":"1.0.0","prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":""}]}}"#,
        ] {
            assert_eq!(
                load_str(bad).unwrap().master_name().unwrap_err().msg,
                "chained master failure. PrevResult lacks a single named interface"
            );
        }
        let e =
            load_str(r#"{"name":"n","cniVersion":"1.0.0","prevResult":{"cniVersion":"0.2.0"}}"#)
                .unwrap_err();
        assert!(e.msg.starts_with("could not parse prevResult"), "{e:?}");
    }
}
