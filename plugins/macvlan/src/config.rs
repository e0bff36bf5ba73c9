//! The macvlan network config: every key of the reference (v1.9.1), typed
//! and checked before anything is touched.

use cni_net::{ChildKind, MacvlanMode};
use cni_plugin::link_plugin::ChildConf;
use cni_skel::{CmdArgs, CniError, ParseFor};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
struct RuntimeConfig {
    #[serde(default)]
    mac: Option<String>,
}

/// The keys macvlan reads itself (the common ones come typed from the skel).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    master: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    mtu: Option<i64>,
    #[serde(default)]
    mac: Option<String>,
    #[serde(default)]
    bcqueuelen: Option<u32>,
    #[serde(default)]
    link_in_container: Option<bool>,
    #[serde(default)]
    runtime_config: Option<RuntimeConfig>,
}

/// A parsed macvlan config. The parent-dependent checks (its existence,
/// the MTU range) happen once the parent is looked up.
#[derive(Debug, Clone)]
pub struct Conf {
    /// `master` (`None` = the interface of the default route), `mtu`,
    /// `linkInContainer`, `dns` and IPAM (L3 when set; else L2).
    pub child: ChildConf,
    /// `mode`, bridge by default.
    pub mode: MacvlanMode,
    /// `mac`.
    pub mac: Option<String>,
    /// `runtimeConfig.mac` (capability `mac`).
    pub runtime_mac: Option<String>,
    /// `bcqueuelen` (0 = kernel default).
    pub bc_queue_len: u32,
}

impl Conf {
    /// The link kind with its attributes.
    pub fn kind(&self) -> ChildKind {
        ChildKind::Macvlan {
            mode: self.mode,
            bc_queue_len: self.bc_queue_len,
        }
    }
}

/// Parses the config on stdin (for DEL, which does not read it, an
/// unknown `mode` is only logged, as the reference's DEL ignores it:
/// [`ParseFor`]).
pub fn load(args: &CmdArgs) -> Result<Conf, CniError> {
    load_config(&args.config, &args.conf, ParseFor::of(args))
}

fn load_config(
    config: &serde_json::Value,
    common: &cni_skel::NetConf,
    mode_for: ParseFor,
) -> Result<Conf, CniError> {
    let raw: Raw = cni_skel::gojson::from_value(config)
        .map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
    let mode = match raw.mode.as_deref() {
        None | Some("") => MacvlanMode::Bridge,
        Some(m) => mode_for.or_else(
            MacvlanMode::parse(m)
                .ok_or_else(|| CniError::invalid_config(format!("unknown macvlan mode: {m:?}"))),
            || MacvlanMode::Bridge,
        )?,
    };
    Ok(Conf {
        child: ChildConf::new(raw.master, raw.mtu, raw.link_in_container, common),
        mode,
        mac: raw.mac,
        runtime_mac: raw.runtime_config.and_then(|r| r.mac),
        bc_queue_len: raw.bcqueuelen.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str) -> Result<Conf, CniError> {
        let (config, common) = cni_skel::conf::parse_full(s.as_bytes())?;
        load_config(&config, &common, ParseFor::Use)
    }

    #[test]
    fn defaults() {
        let c = load_str(r#"{"name":"n","type":"macvlan"}"#).unwrap();
        assert_eq!(c.child.master, None);
        assert_eq!(c.mode, MacvlanMode::Bridge);
        assert_eq!((c.child.mtu, c.bc_queue_len), (0, 0));
        assert!(!c.child.link_in_container && !c.child.ipam && c.mac.is_none());
        let c = load_str(r#"{"name":"n","master":"","mode":""}"#).unwrap();
        assert_eq!((c.child.master, c.mode), (None, MacvlanMode::Bridge));
    }

    #[test]
    fn every_key_and_go_key_matching() {
        let c = load_str(
            r#"{"name":"n","MASTER":"eth1","Mode":"vepa","mtu":1400,"mac":"02:00:00:00:00:01",
                "bcqueuelen":100,"linkincontainer":true,"ipam":{"type":"host-local"},
                "dns":{"nameservers":["10.0.0.1"]},"RuntimeConfig":{"MAC":"02:00:00:00:00:02"}}"#,
        )
        .unwrap();
        assert_eq!(c.child.master.as_deref(), Some("eth1"));
        assert_eq!(c.mode, MacvlanMode::Vepa);
        assert_eq!((c.child.mtu, c.bc_queue_len), (1400, 100));
        assert!(c.child.link_in_container && c.child.ipam);
        assert_eq!(c.runtime_mac.as_deref(), Some("02:00:00:00:00:02"));
        assert_eq!(c.child.dns.nameservers, ["10.0.0.1"]);
        for m in ["bridge", "private", "vepa", "passthru"] {
            let c = load_str(&format!(r#"{{"name":"n","mode":"{m}"}}"#)).unwrap();
            assert_eq!(c.mode.name(), m);
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for (bad, want) in [
            (r#""mode":"PRIVATE""#, r#"unknown macvlan mode: "PRIVATE""#),
            (r#""mode":"source""#, r#"unknown macvlan mode: "source""#),
            (r#""mtu":1400.0"#, "failed to load netconf"),
            (r#""mtu":"1400""#, "failed to load netconf"),
            (r#""bcqueuelen":-1"#, "failed to load netconf"),
            (r#""bcqueuelen":4294967296"#, "failed to load netconf"),
            (r#""master":1"#, "failed to load netconf"),
            (r#""linkInContainer":"yes""#, "failed to load netconf"),
            (r#""runtimeConfig":{"mac":1}"#, "failed to load netconf"),
        ] {
            let e = load_str(&format!(r#"{{"name":"n",{bad}}}"#)).unwrap_err();
            assert!(e.msg.contains(want), "{bad}: {e:?}");
        }
    }

    #[test]
    fn del_goes_on_without_an_unknown_mode() {
        let s = r#"{"name":"n","master":"eth1","mode":"bogus"}"#;
        let (config, common) = cni_skel::conf::parse_full(s.as_bytes()).unwrap();
        assert!(load_str(s).is_err());
        let c = load_config(&config, &common, ParseFor::Del).unwrap();
        assert_eq!(c.mode, MacvlanMode::Bridge);
    }
}
