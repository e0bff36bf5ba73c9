//! The tap network config: every key typed and checked before anything
//! is created.

use cni_net::Mac;
use cni_plugin::link_plugin;
use cni_skel::args::CniArgs;
use cni_skel::{CmdArgs, CniError, Dns, ParseFor};
use serde::Deserialize;

/// Smallest MTU the kernel accepts on a tap (ETH_MIN_MTU).
pub const MIN_MTU: i64 = 68;
/// Largest MTU the kernel accepts on a tap (65535 less the Ethernet header).
pub const MAX_MTU: i64 = 65521;

/// The keys tap reads itself (the common ones come typed from the skel).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    multi_queue: Option<bool>,
    #[serde(default)]
    mtu: Option<i64>,
    #[serde(default)]
    mac: Option<String>,
    #[serde(default)]
    owner: Option<u32>,
    #[serde(default)]
    group: Option<u32>,
    #[serde(default)]
    selinux_context: Option<String>,
    #[serde(default)]
    bridge: Option<String>,
    #[serde(default)]
    runtime_config: Option<RuntimeConfig>,
}

#[derive(Debug, Deserialize)]
struct RuntimeConfig {
    #[serde(default)]
    mac: Option<String>,
}

/// A validated tap config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapConf {
    /// `IFF_MULTI_QUEUE`.
    pub multi_queue: bool,
    /// MTU; `None` = the kernel's default (1500).
    pub mtu: Option<u32>,
    /// MAC: `mac`, then CNI_ARGS `MAC`, then `runtimeConfig.mac` (the last
    /// one set wins); `None` = random.
    pub mac: Option<Mac>,
    /// `TUNSETOWNER`.
    pub owner: Option<u32>,
    /// `TUNSETGROUP`.
    pub group: Option<u32>,
    /// `selinuxContext`, if set.
    pub selinux_context: Option<String>,
    /// A bridge in the container to enslave the tap to.
    pub bridge: Option<String>,
    /// The IPAM plugin, if any (none: an L2 tap).
    pub ipam: Option<String>,
    /// The config's `dns`: it replaces IPAM's in the result, even empty.
    pub dns: Dns,
}

fn failed(e: impl std::fmt::Display) -> CniError {
    CniError::invalid_config(format!("failed to load netconf: {e}"))
}

/// Parses and validates the config on stdin and `CNI_ARGS` for the
/// command ([`ParseFor::of`]).
pub fn load(args: &CmdArgs) -> Result<TapConf, CniError> {
    load_for(args, ParseFor::of(args))
}

/// [`load`] for `mode`. With [`ParseFor::Del`] (DEL, and GC and STATUS,
/// which read only the IPAM type) a bad MAC source, an unknown `CNI_ARGS`
/// key or an MTU ADD refuses is logged, so DEL can always clean up (the
/// reference's DEL fails on the first two).
pub fn load_for(args: &CmdArgs, mode: ParseFor) -> Result<TapConf, CniError> {
    load_config(&args.config, &args.conf, &args.args, mode)
}

fn load_config(
    config: &serde_json::Value,
    common: &cni_skel::NetConf,
    cni_args: &str,
    mode: ParseFor,
) -> Result<TapConf, CniError> {
    let raw: Raw = cni_skel::gojson::from_value(config).map_err(failed)?;
    let from_args = if cni_args.is_empty() {
        None
    } else {
        mode.or_else(CniArgs::load(cni_args, &["MAC"]).map(Some), || None)?
            .and_then(|a| a.get("MAC").filter(|m| !m.is_empty()).map(str::to_string))
    };
    build(raw, common, from_args.as_deref(), mode)
}

fn build(
    raw: Raw,
    common: &cni_skel::NetConf,
    cni_args_mac: Option<&str>,
    mode: ParseFor,
) -> Result<TapConf, CniError> {
    let mtu = mode.or_else(
        match raw.mtu {
            None | Some(0) => Ok(None),
            Some(m) if (MIN_MTU..=MAX_MTU).contains(&m) => Ok(u32::try_from(m).ok()),
            Some(m) => Err(CniError::invalid_config(format!(
                "invalid MTU {m}: must be 0 (the kernel's default) or between {MIN_MTU} and {MAX_MTU}"
            ))),
        },
        || None,
    )?;
    let runtime_mac = raw.runtime_config.and_then(|r| r.mac);
    let mac = mode.or_else(
        link_plugin::requested_mac(raw.mac.as_deref(), cni_args_mac, runtime_mac.as_deref()),
        || None,
    )?;
    Ok(TapConf {
        multi_queue: raw.multi_queue.unwrap_or(false),
        mtu,
        mac,
        owner: raw.owner,
        group: raw.group,
        selinux_context: raw.selinux_context.filter(|s| !s.is_empty()),
        bridge: raw.bridge.filter(|s| !s.is_empty()),
        ipam: common.ipam_type().map(str::to_string),
        dns: common.dns.clone().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str, cni_args: &str) -> Result<TapConf, CniError> {
        let (config, common) = cni_skel::conf::parse_full(s.as_bytes())?;
        load_config(&config, &common, cni_args, ParseFor::Use)
    }

    #[test]
    fn defaults_and_values() {
        let c = load_str(r#"{"name":"n","type":"tap"}"#, "").unwrap();
        assert_eq!(
            c,
            TapConf {
                multi_queue: false,
                mtu: None,
                mac: None,
                owner: None,
                group: None,
                selinux_context: None,
                bridge: None,
                ipam: None,
                dns: Dns::default(),
            }
        );
        let c = load_str(
            r#"{"name":"n","type":"tap","multiQueue":true,"mtu":9000,"mac":"02:00:00:00:00:01","owner":0,"group":4294967295,"bridge":"br0","ipam":{"type":"static"},"dns":{"nameservers":["10.0.0.53"]},"selinuxcontext":""}"#,
            "",
        )
        .unwrap();
        assert!(c.multi_queue);
        assert_eq!(c.mtu, Some(9000));
        assert_eq!(c.mac.unwrap().to_string(), "02:00:00:00:00:01");
        assert_eq!((c.owner, c.group), (Some(0), Some(u32::MAX)));
        assert_eq!(c.bridge.as_deref(), Some("br0"));
        assert_eq!(c.ipam.as_deref(), Some("static"));
        assert_eq!(c.dns.nameservers, ["10.0.0.53"]);
        assert_eq!(c.selinux_context, None);
        // The cni.dev page's spelling reaches the field too.
        let c = load_str(r#"{"name":"n","SelinuxContext":"x_t"}"#, "").unwrap();
        assert_eq!(c.selinux_context.as_deref(), Some("x_t"));
    }

    #[test]
    fn mac_precedence_runtime_over_args_over_conf() {
        let conf =
            r#"{"name":"n","mac":"02:00:00:00:00:01","runtimeConfig":{"mac":"02:00:00:00:00:03"}}"#;
        let mac = |c: &str, a: &str| load_str(c, a).unwrap().mac.unwrap().to_string();
        assert_eq!(mac(conf, "MAC=02:00:00:00:00:02"), "02:00:00:00:00:03");
        let no_rt = r#"{"name":"n","mac":"02:00:00:00:00:01"}"#;
        assert_eq!(
            mac(no_rt, "IgnoreUnknown=1;MAC=02:00:00:00:00:02;X=y"),
            "02:00:00:00:00:02"
        );
        assert_eq!(mac(no_rt, "MAC="), "02:00:00:00:00:01");
        assert_eq!(mac(no_rt, ""), "02:00:00:00:00:01");
    }

    #[test]
    fn rejects_bad_values() {
        for (conf, args, want) in [
            (r#"{"name":"n","mtu":67}"#, "", "invalid MTU 67"),
            (r#"{"name":"n","mtu":65522}"#, "", "invalid MTU 65522"),
            (r#"{"name":"n","mtu":-1}"#, "", "invalid MTU -1"),
            (r#"{"name":"n","mtu":"1500"}"#, "", "failed to load netconf"),
            (
                r#"{"name":"n","multiQueue":"yes"}"#,
                "",
                "failed to load netconf",
            ),
            (r#"{"name":"n","owner":-1}"#, "", "failed to load netconf"),
            (
                r#"{"name":"n","group":4294967296}"#,
                "",
                "failed to load netconf",
            ),
            (r#"{"name":"n","bridge":5}"#, "", "failed to load netconf"),
            (
                r#"{"name":"n","runtimeConfig":{"mac":5}}"#,
                "",
                "failed to load netconf",
            ),
            (
                r#"{"name":"n","mac":"zz"}"#,
                "",
                "invalid args zz for MAC addr: address zz: invalid MAC address",
            ),
            (
                r#"{"name":"n"}"#,
                "K8S_POD_NAME=x",
                r#"ARGS: unknown args ["K8S_POD_NAME=x"]"#,
            ),
        ] {
            let e = load_str(conf, args).unwrap_err();
            assert!(e.msg.contains(want), "{conf} {args}: {e:?}");
        }
    }

    #[test]
    fn del_ignores_refused_values() {
        let s = r#"{"name":"n","mac":"zz","mtu":-1,"ipam":{"type":"static"}}"#;
        let (config, common) = cni_skel::conf::parse_full(s.as_bytes()).unwrap();
        let args = CmdArgs {
            command: cni_skel::Command::Del,
            container_id: "c".into(),
            netns: None,
            ifname: "eth0".into(),
            args: "K8S_POD_NAME=x".into(),
            path: Vec::new(),
            netns_override: false,
            stdin: s.as_bytes().to_vec(),
            config,
            conf: common,
            invoker: None,
        };
        let c = load(&args).unwrap();
        assert_eq!(
            (c.mac, c.mtu, c.ipam.as_deref()),
            (None, None, Some("static"))
        );
        assert!(load_for(&args, ParseFor::Use).is_err());
    }
}
