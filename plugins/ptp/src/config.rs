//! The ptp network config: every key typed and range-checked before
//! anything is touched.

use cni_fw::masq::Backend;
use cni_skel::{CmdArgs, CniError, Dns, ParseFor};
use serde::Deserialize;

/// IPv6 needs at least this MTU on a link.
pub const MIN_MTU_V6: u32 = 1280;

/// The keys ptp reads itself (the common ones come typed from the skel).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    ip_masq: Option<bool>,
    #[serde(default)]
    ip_masq_backend: Option<String>,
    #[serde(default)]
    mtu: Option<i64>,
}

/// A validated ptp config.
#[derive(Debug, Clone)]
pub struct PtpConf {
    /// Network name.
    pub name: String,
    /// Masquerade the container's addresses.
    pub ip_masq: bool,
    /// `ipMasqBackend`, `None` = automatic.
    pub backend: Option<Backend>,
    /// Veth MTU; `None` = kernel default.
    pub mtu: Option<u32>,
    /// `dns`, when any field is set.
    pub dns: Option<Dns>,
}

/// Parses and validates the config on stdin (leniently for DEL:
/// [`ParseFor`]).
pub fn load(args: &CmdArgs) -> Result<PtpConf, CniError> {
    load_config(&args.config, &args.conf, ParseFor::of(args))
}

fn load_config(
    config: &serde_json::Value,
    common: &cni_skel::NetConf,
    mode: ParseFor,
) -> Result<PtpConf, CniError> {
    let raw: Raw = cni_skel::gojson::from_value(config)
        .map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
    if common.ipam_type().is_none() {
        return Err(CniError::invalid_config(
            "ptp requires an IPAM plugin: \"ipam\" must be an object with a non-empty \"type\" (no plugin name provided)",
        ));
    }
    let backend = mode.or_else(Backend::parse(raw.ip_masq_backend.as_deref()), || None)?;
    let mtu = mode.or_else(
        cni_net::veth_mtu(raw.mtu.unwrap_or(0)).map_err(CniError::invalid_config),
        || None,
    )?;
    Ok(PtpConf {
        name: common.name().to_string(),
        ip_masq: raw.ip_masq.unwrap_or(false),
        backend,
        mtu,
        dns: common.dns.clone().filter(|d| !d.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str) -> Result<PtpConf, CniError> {
        let (config, common) = cni_skel::conf::parse_full(s.as_bytes())?;
        load_config(&config, &common, ParseFor::Use)
    }

    const IPAM: &str = r#""ipam":{"type":"host-local","subnet":"10.0.0.0/24"}"#;

    #[test]
    fn defaults_and_values() {
        let c = load_str(&format!(r#"{{"name":"n",{IPAM}}}"#)).unwrap();
        assert!(!c.ip_masq && c.backend.is_none() && c.mtu.is_none() && c.dns.is_none());
        let c = load_str(&format!(
            r#"{{"name":"n",{IPAM},"ipMasq":true,"ipMasqBackend":"nftables","mtu":1400,"dns":{{"nameservers":["1.1.1.1"]}}}}"#
        ))
        .unwrap();
        assert!(c.ip_masq);
        assert_eq!(c.backend, Some(Backend::Nftables));
        assert_eq!(c.mtu, Some(1400));
        assert_eq!(c.dns.unwrap().nameservers, vec!["1.1.1.1"]);
        let c = load_str(&format!(
            r#"{{"name":"n",{IPAM},"mtu":0,"ipMasq":null,"dns":{{}}}}"#
        ))
        .unwrap();
        assert!(c.mtu.is_none() && !c.ip_masq && c.dns.is_none());
        // 0 or less: the kernel default, as in the reference.
        let c = load_str(&format!(r#"{{"name":"n",{IPAM},"mtu":-1}}"#)).unwrap();
        assert!(c.mtu.is_none());
    }

    #[test]
    fn rejects_bad_keys() {
        for (bad, want) in [
            (r#""mtu":67"#, "invalid MTU 67"),
            (r#""mtu":65536"#, "invalid MTU 65536"),
            (r#""mtu":4294968796"#, "invalid MTU 4294968796"),
            (r#""mtu":"1500""#, "failed to load netconf"),
            (r#""mtu":1500.5"#, "failed to load netconf"),
            (r#""ipMasq":"yes""#, "failed to load netconf"),
            (r#""ipMasqBackend":"pf""#, "unknown ipmasq backend"),
            (r#""ipMasqBackend":1"#, "failed to load netconf"),
        ] {
            let e = load_str(&format!(r#"{{"name":"n",{IPAM},{bad}}}"#)).unwrap_err();
            assert!(e.msg.contains(want), "{bad}: {e:?}");
        }
        for bad in [
            r#"{"name":"n"}"#,
            r#"{"name":"n","ipam":{}}"#,
            r#"{"name":"n","ipam":{"type":""}}"#,
        ] {
            let e = load_str(bad).unwrap_err();
            assert!(e.msg.contains("requires an IPAM plugin"), "{bad}: {e:?}");
        }
    }

    #[test]
    fn del_goes_on_without_refused_values() {
        let parsed = |s: &str| cni_skel::conf::parse_full(s.as_bytes()).unwrap();
        for (kv, ok) in [
            (r#""mtu":67"#, true),
            (r#""mtu":70000"#, true),
            (r#""ipMasqBackend":"x""#, true),
            (r#""mtu":"1""#, false),
        ] {
            let s = format!(r#"{{"name":"n",{IPAM},{kv}}}"#);
            let (config, common) = parsed(&s);
            let c = load_config(&config, &common, ParseFor::Del);
            assert_eq!(c.is_ok(), ok, "{kv}");
            assert!(
                load_config(&config, &common, ParseFor::Use).is_err(),
                "{kv}"
            );
            if let Ok(c) = c {
                assert!(c.mtu.is_none() && c.backend.is_none(), "{kv}");
            }
        }
    }
}
