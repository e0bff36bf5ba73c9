//! The portmap configuration: parsed, defaulted and validated in full before
//! any rule is written.

use cni_skel::{CniError, CniResult, ParseFor};
use ipnetwork::IpNetwork;
use serde::Deserialize;
use std::net::IpAddr;

/// The default mark bit that flags traffic for masquerading (Kubernetes uses
/// 14 and 15, Calico 20–31).
pub const DEFAULT_MARK_BIT: u32 = 13;

/// The firewall backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// iptables / ip6tables, table `nat`.
    Iptables,
    /// nftables, tables `ip cni_hostport` and `ip6 cni_hostport`.
    Nftables,
}

impl Backend {
    /// The config spelling.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Iptables => "iptables",
            Backend::Nftables => "nftables",
        }
    }

    fn other(self) -> Backend {
        match self {
            Backend::Iptables => Backend::Nftables,
            Backend::Nftables => Backend::Iptables,
        }
    }
}

/// A transport protocol of a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Proto {
    /// SCTP.
    Sctp,
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Proto {
    /// The lower-case name both iptables and nft use.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Sctp => "sctp",
        }
    }
}

/// One validated port mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Port on the host.
    pub host_port: u16,
    /// Port in the container.
    pub container_port: u16,
    /// Protocol.
    pub proto: Proto,
    /// The host address the mapping is limited to; `None` for all.
    /// `0.0.0.0`/`::` are kept: they select a family but match any address.
    pub host_ip: Option<IpAddr>,
}

impl Mapping {
    /// Whether this mapping applies to a container address of `v6`'s family
    /// (a host IP of the other family excludes it).
    pub fn applies_to(&self, v6: bool) -> bool {
        self.host_ip.is_none_or(|h| h.is_ipv6() == v6)
    }

    /// The destination address to match, if any (unspecified addresses match all).
    pub fn dest(&self) -> Option<IpAddr> {
        self.host_ip.filter(|h| !h.is_unspecified())
    }
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Conf {
    /// Network name.
    pub network: String,
    /// The backend asked for; `None` = choose as the reference does.
    pub backend: Option<Backend>,
    /// Masquerade hairpin and localhost traffic.
    pub snat: bool,
    /// Masquerade traffic from any source, not just the container's subnet.
    pub masq_all: bool,
    /// The iptables mark bit.
    pub mark_bit: u32,
    /// iptables: a chain of the administrator's to jump to instead of ours.
    pub external_set_mark_chain: Option<String>,
    /// Extra match tokens for IPv4.
    pub conditions_v4: Vec<String>,
    /// Extra match tokens for IPv6.
    pub conditions_v6: Vec<String>,
    /// The port mappings.
    pub mappings: Vec<Mapping>,
    /// What the config was parsed for: DEL does not check the backend.
    pub parsed_for: ParseFor,
}

impl Conf {
    /// The conditions for a family.
    pub fn conditions(&self, v6: bool) -> &[String] {
        if v6 {
            &self.conditions_v6
        } else {
            &self.conditions_v4
        }
    }

    /// Checks that the options given suit `backend` (the reference's
    /// `ensureBackend`): iptables-only options with nftables, or conditions
    /// in the other backend's syntax, are errors.
    pub fn check_backend(&self, backend: Backend) -> Result<(), CniError> {
        self.parsed_for.check(self.suits(backend))
    }

    fn suits(&self, backend: Backend) -> Result<(), CniError> {
        let wrong = backend.other();
        let mut opts = Vec::new();
        if self.external_set_mark_chain.is_some() && wrong == Backend::Iptables {
            opts.push("externalSetMarkChain");
        }
        if conditions_backend(&self.conditions_v4) == Some(wrong) {
            opts.push("conditionsV4");
        }
        if conditions_backend(&self.conditions_v6) == Some(wrong) {
            opts.push("conditionsV6");
        }
        if opts.is_empty() {
            return Ok(());
        }
        Err(CniError::invalid_config(format!(
            "{} backend was requested but configuration contains {}-specific options [{}]",
            backend.name(),
            wrong.name(),
            opts.join(" ")
        )))
    }
}

/// Which backend a list of conditions is written for: iptables matches
/// start with `-` or `!`, nft expressions never do.
fn conditions_backend(conditions: &[String]) -> Option<Backend> {
    let first = conditions.first()?;
    match first.chars().next()? {
        '-' | '!' => Some(Backend::Iptables),
        _ => Some(Backend::Nftables),
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
    snat: Option<bool>,
    #[serde(default, rename = "conditionsV4")]
    conditions_v4: Option<Vec<String>>,
    #[serde(default, rename = "conditionsV6")]
    conditions_v6: Option<Vec<String>>,
    #[serde(default)]
    masq_all: Option<bool>,
    #[serde(default)]
    mark_masq_bit: Option<i64>,
    #[serde(default)]
    external_set_mark_chain: Option<String>,
    #[serde(default)]
    runtime_config: Option<RawRuntime>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRuntime {
    #[serde(default)]
    port_mappings: Option<Vec<RawMapping>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMapping {
    #[serde(default)]
    host_port: i64,
    #[serde(default)]
    container_port: i64,
    #[serde(default)]
    protocol: String,
    #[serde(default, rename = "hostIP")]
    host_ip: Option<String>,
}

fn bad(msg: impl Into<String>) -> CniError {
    CniError::invalid_config(msg)
}

/// Parses and validates the whole config (not `prevResult`).
pub fn parse(config: &serde_json::Value) -> Result<Conf, CniError> {
    parse_for(config, ParseFor::Use)
}

/// [`parse`] of a config's text, as the skel hands it over (parsed once),
/// for tests.
#[cfg(test)]
pub(crate) fn parse_text(text: &[u8]) -> Result<Conf, CniError> {
    let config = serde_json::from_slice(text)
        .map_err(|e| bad(format!("failed to parse network configuration: {e}")))?;
    parse(&config)
}

/// [`parse`] for `mode`: for DEL, which removes the attachment's chains by
/// its container ID (and flushes the UDP mappings' conntrack entries), a
/// refused value is logged and its default (a refused mapping: none) used.
pub fn parse_for(config: &serde_json::Value, mode: ParseFor) -> Result<Conf, CniError> {
    let raw: Raw = cni_skel::gojson::from_value(config)
        .map_err(|e| bad(format!("failed to parse network configuration: {e}")))?;
    mode.check(
        if raw.mark_masq_bit.is_some() && raw.external_set_mark_chain.is_some() {
            Err(bad("Cannot specify externalSetMarkChain and markMasqBit"))
        } else {
            Ok(())
        },
    )?;
    let mark_bit = match raw.mark_masq_bit {
        None => DEFAULT_MARK_BIT,
        Some(b) => mode.or_else(
            u32::try_from(b)
                .ok()
                .filter(|b| *b <= 31)
                .ok_or_else(|| bad("MasqMarkBit must be between 0 and 31")),
            || DEFAULT_MARK_BIT,
        )?,
    };
    let backend = mode.or_else(
        match raw.backend.as_deref() {
            None => Ok(None),
            Some("iptables") => Ok(Some(Backend::Iptables)),
            Some("nftables") => Ok(Some(Backend::Nftables)),
            Some(other) => Err(bad(format!("unrecognized backend {other:?}"))),
        },
        || None,
    )?;
    let conditions_v4 = nonempty_conditions(raw.conditions_v4);
    let conditions_v6 = nonempty_conditions(raw.conditions_v6);
    let external_set_mark_chain = match raw.external_set_mark_chain {
        None => None,
        Some(chain) => {
            mode.or_else(
                if cni_fw::iptables::is_chain_word(&chain) {
                    Ok(Some(chain))
                } else {
                    Err(bad(format!(
                        "invalid externalSetMarkChain {chain:?}: must be an iptables chain name (1-28 bytes without white space, control characters, quotes or backslashes, not starting with '-' or '!')"
                    )))
                },
                || None,
            )?
        }
    };
    let mut conf = Conf {
        network: raw.name.unwrap_or_default(),
        backend,
        snat: raw.snat.unwrap_or(true),
        masq_all: raw.masq_all.unwrap_or(false),
        mark_bit,
        external_set_mark_chain,
        conditions_v4,
        conditions_v6,
        mappings: Vec::new(),
        parsed_for: mode,
    };
    if let Some(b) = backend {
        conf.check_backend(b)?;
    }
    for (key, conds) in [
        ("conditionsV4", &mut conf.conditions_v4),
        ("conditionsV6", &mut conf.conditions_v6),
    ] {
        // Tokens go into an iptables-restore line or an nft script: nothing
        // may end the line, or (nft) start a new command or comment out
        // the rest; iptables-restore reads ';' and '#' in a word as text.
        let forbidden: &[char] = match conditions_backend(conds) {
            Some(Backend::Iptables) => &['\n', '\r', '\0'],
            _ => &['\n', '\r', '\0', ';', '#'],
        };
        let checked = match conds.iter().find(|t| t.is_empty() || t.contains(forbidden)) {
            Some(t) => Err(bad(format!(
                "invalid {key} token {t:?}: tokens must be non-empty and must not contain newlines, nor ';' or '#' in nft syntax"
            ))),
            None => Ok(std::mem::take(conds)),
        };
        *conds = mode.or_else(checked, Vec::new)?;
    }
    let raw_maps = raw
        .runtime_config
        .and_then(|r| r.port_mappings)
        .unwrap_or_default();
    for m in raw_maps {
        if let Some(m) = mode.or_else(mapping(m).map(Some), || None)? {
            conf.mappings.push(m);
        }
    }
    Ok(conf)
}

fn nonempty_conditions(c: Option<Vec<String>>) -> Vec<String> {
    match c {
        // The reference treats a list whose first token is empty as no conditions.
        Some(v) if v.first().is_some_and(|f| !f.is_empty()) => v,
        _ => Vec::new(),
    }
}

fn port(n: i64, what: &str) -> Result<u16, CniError> {
    u16::try_from(n)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| bad(format!("Invalid {what} port number: {n} (must be 1-65535)")))
}

fn mapping(m: RawMapping) -> Result<Mapping, CniError> {
    let container_port = port(m.container_port, "container")?;
    let host_port = port(m.host_port, "host")?;
    let proto = match m.protocol.to_ascii_lowercase().as_str() {
        "tcp" => Proto::Tcp,
        "udp" => Proto::Udp,
        "sctp" => Proto::Sctp,
        _ => {
            return Err(bad(format!(
                "Invalid protocol {:?} for host port {host_port}: must be tcp, udp or sctp",
                m.protocol
            )));
        }
    };
    let host_ip = match m.host_ip.as_deref() {
        None | Some("") => None,
        Some(s) => Some(
            s.parse::<IpAddr>()
                .map(|ip| ip.to_canonical())
                .map_err(|_| {
                    bad(format!(
                        "Invalid hostIP {s:?} for host port {host_port}: not an IP address"
                    ))
                })?,
        ),
    };
    Ok(Mapping {
        host_port,
        container_port,
        proto,
        host_ip,
    })
}

/// The container's addresses, as the reference picks them from `prevResult`:
/// the first IPv4 and the first IPv6 address that belong to `ifname` in the
/// sandbox, or to no known interface.
pub fn container_addrs(prev: &CniResult, ifname: &str) -> (Option<IpNetwork>, Option<IpNetwork>) {
    let mut v4 = None;
    let mut v6 = None;
    for ip in &prev.ips {
        let slot = if ip.address.is_ipv4() {
            &mut v4
        } else {
            &mut v6
        };
        if slot.is_some() {
            continue;
        }
        if let Some(iface) = ip.interface.and_then(|i| prev.interfaces.get(i))
            && (iface.name != ifname || iface.sandbox.is_empty())
        {
            continue;
        }
        *slot = Some(ip.address);
    }
    (v4, v6)
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::parse_text as parse;

    fn parse_for(text: &[u8], mode: ParseFor) -> Result<Conf, CniError> {
        super::parse_for(&serde_json::from_slice(text).unwrap(), mode)
    }

    fn conf(extra: &str) -> Result<Conf, CniError> {
        parse(format!(r#"{{"cniVersion":"1.0.0","name":"n","type":"portmap"{extra}}}"#).as_bytes())
    }

    fn maps(m: &str) -> Result<Conf, CniError> {
        conf(&format!(r#","runtimeConfig":{{"portMappings":[{m}]}}"#))
    }

    #[test]
    fn defaults() {
        let c = conf("").unwrap();
        assert!(c.snat && !c.masq_all);
        assert_eq!(c.mark_bit, 13);
        assert_eq!(c.backend, None);
        assert!(c.mappings.is_empty());
    }

    #[test]
    fn mappings_are_validated() {
        let c = maps(
            r#"{"hostPort":8080,"containerPort":80,"protocol":"TCP","hostIP":"::ffff:10.0.0.1"}"#,
        )
        .unwrap();
        assert_eq!(
            c.mappings,
            vec![Mapping {
                host_port: 8080,
                container_port: 80,
                proto: Proto::Tcp,
                host_ip: Some("10.0.0.1".parse().unwrap())
            }]
        );
        for (m, msg) in [
            (
                r#"{"hostPort":0,"containerPort":80,"protocol":"tcp"}"#,
                "Invalid host port number: 0",
            ),
            (
                r#"{"hostPort":70000,"containerPort":80,"protocol":"tcp"}"#,
                "Invalid host port number: 70000",
            ),
            (
                r#"{"hostPort":80,"containerPort":-1,"protocol":"tcp"}"#,
                "Invalid container port number: -1",
            ),
            (
                r#"{"hostPort":80,"containerPort":65536,"protocol":"tcp"}"#,
                "Invalid container port number: 65536",
            ),
            (
                r#"{"hostPort":80,"containerPort":80,"protocol":"icmp"}"#,
                "Invalid protocol \"icmp\"",
            ),
            (
                r#"{"hostPort":80,"containerPort":80}"#,
                "Invalid protocol \"\"",
            ),
            (
                r#"{"hostPort":80,"containerPort":80,"protocol":"udp","hostIP":"nope"}"#,
                "Invalid hostIP \"nope\"",
            ),
        ] {
            let e = maps(m).unwrap_err();
            assert!(e.msg.starts_with(msg), "{m}: {}", e.msg);
            assert_eq!(e.code, 7);
        }
        // An empty hostIP means none; 0.0.0.0 selects IPv4 only but matches any address.
        let c = maps(r#"{"hostPort":1,"containerPort":2,"protocol":"udp","hostIP":""},{"hostPort":3,"containerPort":4,"protocol":"sctp","hostIP":"0.0.0.0"}"#).unwrap();
        assert_eq!(c.mappings[0].host_ip, None);
        assert!(c.mappings[1].applies_to(false) && !c.mappings[1].applies_to(true));
        assert_eq!(c.mappings[1].dest(), None);
    }

    #[test]
    fn go_cni_capitalised_mappings() {
        // containerd (go-cni) sends its PortMapping struct untagged; Go's
        // encoding/json matches the keys case-insensitively, and so do we.
        let c = maps(
            r#"{"HostPort":8080,"ContainerPort":80,"Protocol":"tcp","HostIP":""},{"HostPort":53,"ContainerPort":5353,"Protocol":"udp","HostIP":"10.0.0.1"}"#,
        )
        .unwrap();
        assert_eq!(
            c.mappings,
            vec![
                Mapping {
                    host_port: 8080,
                    container_port: 80,
                    proto: Proto::Tcp,
                    host_ip: None
                },
                Mapping {
                    host_port: 53,
                    container_port: 5353,
                    proto: Proto::Udp,
                    host_ip: Some("10.0.0.1".parse().unwrap())
                },
            ]
        );
    }

    #[test]
    fn backend_options() {
        assert_eq!(
            conf(r#","backend":"pf""#).unwrap_err().msg,
            "unrecognized backend \"pf\""
        );
        assert_eq!(
            conf(r#","backend":"nftables""#).unwrap().backend,
            Some(Backend::Nftables)
        );
        assert_eq!(
            conf(r#","backend":"nftables","externalSetMarkChain":"X""#)
                .unwrap_err()
                .msg,
            "nftables backend was requested but configuration contains iptables-specific options [externalSetMarkChain]"
        );
        assert_eq!(
            conf(r#","backend":"iptables","conditionsV4":["ip","saddr","1.2.3.4"],"conditionsV6":["ip6","saddr","::1"]"#)
                .unwrap_err()
                .msg,
            "iptables backend was requested but configuration contains nftables-specific options [conditionsV4 conditionsV6]"
        );
        let c = conf(r#","conditionsV4":["-s","1.2.3.4"]"#).unwrap();
        assert!(c.check_backend(Backend::Iptables).is_ok());
        assert!(c.check_backend(Backend::Nftables).is_err());
        assert!(conf(r#","conditionsV4":["-s","1.2.3.4\n-A X"]"#).is_err());
        // ';' and '#' are text to iptables-restore, not to nft.
        assert!(conf(r##","conditionsV4":["-m","comment","--comment","a;#b"]"##).is_ok());
        assert!(conf(r##","conditionsV4":["ip","saddr","1.2.3.4","#"]"##).is_err());
        assert!(
            conf(r#","backend":"nftables","conditionsV4":["ip saddr 1.2.3.4 ; flush ruleset"]"#)
                .is_err()
        );
        // An empty first token means "no conditions".
        assert!(
            conf(r#","conditionsV4":[""]"#)
                .unwrap()
                .conditions_v4
                .is_empty()
        );
    }

    #[test]
    fn mark_bits() {
        assert_eq!(conf(r#","markMasqBit":0"#).unwrap().mark_bit, 0);
        assert_eq!(conf(r#","markMasqBit":31"#).unwrap().mark_bit, 31);
        for b in ["32", "-1"] {
            assert_eq!(
                conf(&format!(r#","markMasqBit":{b}"#)).unwrap_err().msg,
                "MasqMarkBit must be between 0 and 31"
            );
        }
        assert_eq!(
            conf(r#","markMasqBit":13,"externalSetMarkChain":"X""#)
                .unwrap_err()
                .msg,
            "Cannot specify externalSetMarkChain and markMasqBit"
        );
        assert!(conf(r#","externalSetMarkChain":"bad name""#).is_err());
        assert!(conf(r#","externalSetMarkChain":"KUBE-MARK-MASQ""#).is_ok());
        // What the reference's iptables takes, one word to iptables-restore.
        assert!(conf(r##","externalSetMarkChain":"PÄR#MARK""##).is_ok());
        for bad in [r#""-x""#, r#""a\"b""#, r#""a\\b""#] {
            assert!(
                conf(&format!(r#","externalSetMarkChain":{bad}"#)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn picks_addresses_like_the_reference() {
        let prev = CniResult::parse(
            br#"{"cniVersion":"1.0.0","interfaces":[{"name":"br0"},{"name":"eth0","sandbox":"/x"},{"name":"eth1","sandbox":"/x"}],
            "ips":[{"interface":0,"address":"10.0.0.1/24"},{"interface":2,"address":"10.0.1.2/24"},
                   {"interface":1,"address":"10.0.0.2/24"},{"interface":1,"address":"fd00::2/64"},{"interface":1,"address":"10.0.0.3/24"}]}"#,
            "1.0.0",
        )
        .unwrap();
        let (v4, v6) = container_addrs(&prev, "eth0");
        assert_eq!(v4.unwrap().to_string(), "10.0.0.2/24");
        assert_eq!(v6.unwrap().to_string(), "fd00::2/64");
        // No interface, or an index out of range: taken.
        let ipam = CniResult::parse(
            br#"{"cniVersion":"1.0.0","ips":[{"interface":7,"address":"10.0.0.9/24"}]}"#,
            "1.0.0",
        )
        .unwrap();
        assert_eq!(
            container_addrs(&ipam, "eth0").0.unwrap().to_string(),
            "10.0.0.9/24"
        );
    }

    #[test]
    fn del_goes_on_without_refused_values() {
        let del = |extra: &str| {
            parse_for(
                format!(r#"{{"name":"n","type":"portmap"{extra}}}"#).as_bytes(),
                ParseFor::Del,
            )
        };
        for extra in [
            r#","backend":"bogus""#,
            r#","externalSetMarkChain":"pb bad""#,
            r#","markMasqBit":40"#,
            r#","conditionsV4":["a;b"]"#,
            r#","backend":"nftables","conditionsV4":["-s","1.2.3.4"]"#,
            r#","runtimeConfig":{"portMappings":[{"hostPort":0,"containerPort":80,"protocol":"tcp"},{"hostPort":8080,"containerPort":80,"protocol":"udp"}]}"#,
        ] {
            assert!(conf(extra).is_err(), "{extra}");
            let c = del(extra).unwrap();
            assert!(c.check_backend(Backend::Nftables).is_ok(), "{extra}");
            assert_eq!(c.mark_bit, DEFAULT_MARK_BIT, "{extra}");
            assert!(c.external_set_mark_chain.is_none(), "{extra}");
        }
        let c = del(r#","runtimeConfig":{"portMappings":[{"hostPort":0,"containerPort":80,"protocol":"tcp"},{"hostPort":8080,"containerPort":80,"protocol":"udp"}]}"#).unwrap();
        assert_eq!(c.mappings.len(), 1);
        assert!(
            del(r#","conditionsV4":["a;b"]"#)
                .unwrap()
                .conditions_v4
                .is_empty()
        );
        let both = r#","markMasqBit":3,"externalSetMarkChain":"X""#;
        assert!(conf(both).is_err() && del(both).is_ok());
        assert!(del(r#","snat":"yes""#).is_err());
    }
}
