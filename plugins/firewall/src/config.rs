//! The firewall configuration, parsed and validated in full before any rule
//! is touched.

use cni_skel::{CniError, CniResult, ParseFor};
use serde::Deserialize;
use std::net::IpAddr;

/// The admin chain when `iptablesAdminChainName` is unset.
pub const DEFAULT_ADMIN_CHAIN: &str = "CNI-ADMIN";
/// The firewalld zone when `firewalldZone` is unset.
pub const DEFAULT_ZONE: &str = "trusted";

/// Which firewall to program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// firewalld when it serves this network namespace, else iptables (the
    /// reference's choice, also for any unknown `backend` value).
    Auto,
    /// iptables / ip6tables, table `filter`.
    Iptables,
    /// firewalld's zone sources over D-Bus.
    Firewalld,
}

/// `ingressPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngressPolicy {
    /// No isolation (`""` or `open`).
    Open,
    /// Only containers of the same bridge may connect (`same-bridge`).
    SameBridge,
    /// No forwarded connection into the bridge at all (`isolated`).
    Isolated,
}

impl IngressPolicy {
    /// The config spelling of the isolating policies.
    pub fn name(self) -> &'static str {
        match self {
            IngressPolicy::Open => "open",
            IngressPolicy::SameBridge => "same-bridge",
            IngressPolicy::Isolated => "isolated",
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Conf {
    /// Network name.
    pub network: String,
    /// The backend asked for.
    pub backend: BackendChoice,
    /// The chain operators put their own rules in, jumped to first.
    pub admin_chain: String,
    /// The firewalld zone container addresses are put in.
    pub zone: String,
    /// `ingressPolicy` as given: validated by [`Conf::ingress_policy`], which
    /// only ADD and CHECK need (a DEL never fails on it).
    pub ingress_policy: String,
}

impl Conf {
    /// The ingress policy, or the reference's error for an unknown one.
    pub fn ingress_policy(&self) -> Result<IngressPolicy, CniError> {
        match self.ingress_policy.as_str() {
            "" | "open" => Ok(IngressPolicy::Open),
            "same-bridge" => Ok(IngressPolicy::SameBridge),
            "isolated" => Ok(IngressPolicy::Isolated),
            other => Err(CniError::invalid_config(format!(
                "unknown ingress policy: {}",
                cni_fw::hash::go_quote(other)
            ))),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    iptables_admin_chain_name: Option<String>,
    #[serde(default)]
    firewalld_zone: Option<String>,
    #[serde(default)]
    ingress_policy: Option<String>,
}

/// The chain names the plugin itself uses or iptables reserves: an admin
/// chain of one of these names would loop, could not be created, or (the
/// records' and the isolation chains, which the reference takes) would
/// send every forwarded packet through rcni's state or bridge isolation.
const RESERVED_CHAINS: &[&str] = &[
    "INPUT",
    "FORWARD",
    "OUTPUT",
    "ACCEPT",
    "DROP",
    "RETURN",
    "QUEUE",
    "REJECT",
    crate::ipt::FORWARD_CHAIN,
    crate::ipt::RECORDS_CHAIN,
    crate::ipt::STAGE1_CHAIN,
    crate::ipt::STAGE2_CHAIN,
];

fn valid_chain_name(name: &str) -> bool {
    cni_fw::iptables::is_chain_word(name) && !RESERVED_CHAINS.contains(&name)
}

/// Parses and validates the config (not `prevResult`) for `mode`: DEL,
/// which finds the attachment's rules by its records and addresses, logs
/// a refused admin chain name and goes on with the default.
pub fn parse(config: &serde_json::Value, mode: ParseFor) -> Result<Conf, CniError> {
    let raw: Raw = cni_skel::gojson::from_value(config)
        .map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
    let backend = match raw.backend.as_deref() {
        Some("iptables") => BackendChoice::Iptables,
        Some("firewalld") => BackendChoice::Firewalld,
        _ => BackendChoice::Auto,
    };
    let admin_chain = match raw.iptables_admin_chain_name {
        None => DEFAULT_ADMIN_CHAIN.to_string(),
        Some(s) if s.is_empty() => DEFAULT_ADMIN_CHAIN.to_string(),
        Some(s) if valid_chain_name(&s) => s,
        Some(s) => mode.or_else(
            Err(CniError::invalid_config(format!(
                "invalid iptablesAdminChainName {s:?}: must be an iptables chain name of 1-28 bytes without white space, control characters, quotes or backslashes, not starting with '-' or '!', and not one of the built-in or the plugin's own chains"
            ))),
            || DEFAULT_ADMIN_CHAIN.to_string(),
        )?,
    };
    let zone = match raw.firewalld_zone {
        Some(z) if !z.is_empty() => z,
        _ => DEFAULT_ZONE.to_string(),
    };
    Ok(Conf {
        network: raw.name.unwrap_or_default(),
        backend,
        admin_chain,
        zone,
        ingress_policy: raw.ingress_policy.unwrap_or_default(),
    })
}

/// The addresses the rules are for: every address of `prevResult`, as a
/// host address (IPv4-mapped IPv6 addresses count as IPv4, as in the
/// reference), without repeats.
pub fn container_ips(prev: &CniResult) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for ip in &prev.ips {
        let a = ip.address.ip().to_canonical();
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// The bridge the isolation rules name: the first interface of
/// `prevResult`, where the bridge plugin puts its bridge. Validated, since
/// it is written into iptables rules: a Linux interface name that iptables
/// matches literally (no `+` wildcard, no quoting needed).
pub fn bridge_name(prev: &CniResult, policy: IngressPolicy) -> Result<String, CniError> {
    let Some(first) = prev.interfaces.first() else {
        return Err(CniError::invalid_config(format!(
            "interface needs to be set for ingress policy {}, make sure to chain \"firewall\" plugin with \"bridge\"",
            cni_fw::hash::go_quote(policy.name())
        )));
    };
    let name = &first.name;
    if name.is_empty() {
        return Err(CniError::invalid_config("got empty bridge name"));
    }
    // An interface name (the kernel's: no '/' or ':') that iptables-restore
    // reads as one word, and without '+', which iptables reads as a
    // wildcard.
    // 15: IFNAMSIZ less the NUL.
    let ok = name.len() <= 15
        && name != "."
        && name != ".."
        && cni_fw::iptables::is_chain_word(name)
        && !name.contains(['/', ':', '+']);
    if !ok {
        return Err(CniError::invalid_config(format!(
            "invalid bridge name {name:?} in prevResult: must be an interface name of 1-15 bytes without white space, control characters, quotes, backslashes, '/', ':' or '+', not starting with '-' or '!'"
        )));
    }
    Ok(name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As the skel hands it over: the text parsed once.
    fn parse(text: &[u8], mode: ParseFor) -> Result<Conf, CniError> {
        super::parse(&serde_json::from_slice(text).unwrap(), mode)
    }

    fn conf(extra: &str) -> Result<Conf, CniError> {
        parse(
            format!(r#"{{"cniVersion":"1.0.0","name":"n","type":"firewall"{extra}}}"#).as_bytes(),
            ParseFor::Use,
        )
    }

    #[test]
    fn defaults() {
        let c = conf("").unwrap();
        assert_eq!(c.backend, BackendChoice::Auto);
        assert_eq!(c.admin_chain, "CNI-ADMIN");
        assert_eq!(c.zone, "trusted");
        assert_eq!(c.ingress_policy().unwrap(), IngressPolicy::Open);
    }

    #[test]
    fn keys() {
        let c = conf(
            r#","backend":"firewalld","iptablesAdminChainName":"MY-ADMIN","firewalldZone":"public","ingressPolicy":"isolated""#,
        )
        .unwrap();
        assert_eq!(c.backend, BackendChoice::Firewalld);
        assert_eq!(c.admin_chain, "MY-ADMIN");
        assert_eq!(c.zone, "public");
        assert_eq!(c.ingress_policy().unwrap(), IngressPolicy::Isolated);
        // As in the reference, an unknown backend means "choose".
        assert_eq!(
            conf(r#","backend":"nftables""#).unwrap().backend,
            BackendChoice::Auto
        );
        // Go's decoder matches keys case-insensitively.
        assert_eq!(
            conf(r#","INGRESSPOLICY":"same-bridge""#)
                .unwrap()
                .ingress_policy()
                .unwrap(),
            IngressPolicy::SameBridge
        );
    }

    #[test]
    fn bad_values() {
        assert_eq!(
            conf(r#","ingressPolicy":"closed""#)
                .unwrap()
                .ingress_policy()
                .unwrap_err()
                .msg,
            r#"unknown ingress policy: "closed""#
        );
        for bad in [
            "FORWARD",
            "CNI-FORWARD",
            "ACCEPT",
            "-j",
            "a b",
            "x\"y",
            "x'y",
            "x\\y",
            "a\u{a0}b",
            "a\u{1}b",
            "CNI-FW-ATTACHMENTS",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ123",
        ] {
            let json = serde_json::to_string(bad).unwrap();
            let e = conf(&format!(r#","iptablesAdminChainName":{json}"#)).unwrap_err();
            assert!(e.msg.contains("iptablesAdminChainName"), "{bad}: {}", e.msg);
        }
        // What the reference's iptables takes, and iptables-restore reads
        // as one word.
        for good in ["a#b", "PÄR-ADM", "x%y.z"] {
            let c = conf(&format!(r#","iptablesAdminChainName":{good:?}"#)).unwrap();
            assert_eq!(c.admin_chain, good);
        }
        assert!(
            conf(r#","firewalldZone":7"#)
                .unwrap_err()
                .msg
                .starts_with("failed to load netconf: ")
        );
    }

    fn prev(json: &str) -> CniResult {
        CniResult::parse(json.as_bytes(), "1.0.0").unwrap()
    }

    #[test]
    fn ips_and_bridge() {
        let p = prev(
            r#"{"cniVersion":"1.0.0","interfaces":[{"name":"cni0"}],"ips":[{"address":"10.1.0.2/24"},{"address":"::ffff:10.1.0.3/120"},{"address":"10.1.0.2/16"},{"address":"fd00::2/64"}]}"#,
        );
        let ips: Vec<String> = container_ips(&p).iter().map(|i| i.to_string()).collect();
        assert_eq!(ips, ["10.1.0.2", "10.1.0.3", "fd00::2"]);
        assert_eq!(bridge_name(&p, IngressPolicy::SameBridge).unwrap(), "cni0");
        let none = prev(r#"{"cniVersion":"1.0.0","ips":[{"address":"10.1.0.2/24"}]}"#);
        assert!(
            bridge_name(&none, IngressPolicy::SameBridge)
                .unwrap_err()
                .msg
                .starts_with("interface needs to be set for ingress policy \"same-bridge\"")
        );
        // What the reference passes to iptables as it is: any name iptables
        // reads as an interface, one word to iptables-restore.
        for good in ["par#br", "brü0", "br-x!", "br@0.1"] {
            let p = prev(&format!(
                r#"{{"cniVersion":"1.0.0","interfaces":[{{"name":{good:?}}}]}}"#
            ));
            assert_eq!(bridge_name(&p, IngressPolicy::Isolated).unwrap(), good);
        }
        for bad in [
            "br+",
            "br+x",
            "a b",
            "x\"",
            "0123456789abcdef",
            "br\n",
            "a/b",
            "a:b",
            "-br",
            "a\\b",
        ] {
            let p = prev(&format!(
                r#"{{"cniVersion":"1.0.0","interfaces":[{{"name":{bad:?}}}]}}"#
            ));
            assert!(bridge_name(&p, IngressPolicy::Isolated).is_err(), "{bad}");
        }
    }

    #[test]
    fn del_goes_on_without_a_refused_admin_chain() {
        let s = br#"{"name":"n","type":"firewall","iptablesAdminChainName":"pb bad chain"}"#;
        assert!(parse(s, ParseFor::Use).is_err());
        assert_eq!(
            parse(s, ParseFor::Del).unwrap().admin_chain,
            DEFAULT_ADMIN_CHAIN
        );
        let s = br#"{"name":"n","type":"firewall","iptablesAdminChainName":5}"#;
        assert!(parse(s, ParseFor::Del).is_err());
    }
}
