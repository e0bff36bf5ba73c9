//! The static IPAM config: the `ipam` section, CNI_ARGS `IP=`/`GATEWAY=`,
//! `args.cni.ips` and `runtimeConfig.ips`, combined with the reference's
//! precedence (`LoadIPAMConfig` of plugins/ipam/static) and its error texts.
//!
//! Precedence, lowest first:
//! 1. `ipam.addresses`, then the CNI_ARGS `IP` entries appended to them;
//!    each CNI_ARGS `GATEWAY` goes to every CNI_ARGS address whose prefix
//!    holds it (only those: the config's addresses are not parsed yet at
//!    that point in the reference, so they never match);
//! 2. `args.cni.ips` replaces all of that (no gateways);
//! 3. `runtimeConfig.ips` (capability `ips`) replaces everything (no gateways).

use cni_skel::args::CniArgs;
use cni_skel::cidr::{Cidr, canonical};
use cni_skel::version::Version;
use cni_skel::{CniError, Dns, Route};
use ipnetwork::IpNetwork;
use serde::{Deserialize, Deserializer};
use std::net::IpAddr;

/// One address of the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// The address with its prefix length, host bits kept.
    pub address: IpNetwork,
    /// Its gateway, if any (never checked to lie in the prefix, as in the
    /// reference).
    pub gateway: Option<IpAddr>,
}

/// The resolved config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticConf {
    /// Addresses in result order.
    pub addresses: Vec<Address>,
    /// `ipam.routes`, verbatim (duplicates kept).
    pub routes: Vec<Route>,
    /// `ipam.dns`.
    pub dns: Dns,
}

// ---- the JSON, typed as the reference's structs ----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Net {
    #[serde(default)]
    cni_version: Option<String>,
    #[serde(default)]
    ipam: Option<Ipam>,
    #[serde(default)]
    runtime_config: Option<RuntimeConfig>,
    #[serde(default)]
    args: Option<Args>,
}

#[derive(Deserialize)]
struct RuntimeConfig {
    #[serde(default)]
    ips: Option<Vec<NullableString>>,
}

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    cni: Option<ArgsCni>,
}

#[derive(Deserialize)]
struct ArgsCni {
    #[serde(default)]
    ips: Option<Vec<NullableString>>,
}

#[derive(Deserialize)]
struct Ipam {
    #[serde(default, rename = "type")]
    _kind: Option<String>,
    // The reference's untagged `Name string` field: typed, then overwritten
    // by the network name.
    #[serde(default, rename = "Name")]
    _name: Option<String>,
    #[serde(default)]
    routes: Option<Vec<Option<RawRoute>>>,
    #[serde(default)]
    addresses: Option<Vec<RawAddress>>,
    #[serde(default)]
    dns: Option<Dns>,
}

/// One `ipam.addresses` entry. `address` is declared before `Address` so
/// that a differently cased key (`"ADDRESS"`) means `address`, as Go picks
/// the first field that matches ignoring case.
#[derive(Deserialize)]
struct RawAddress {
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    gateway: Option<String>,
    /// The reference's untagged `Address net.IPNet` field, which the exact
    /// key `"Address"` reaches: a string there is a type error in Go. (An
    /// object there would bypass the CIDR check in Go; we refuse any value.)
    #[serde(default, rename = "Address", deserialize_with = "refuse_ipnet")]
    _ipnet: Option<()>,
    /// The reference's untagged `Version string` field.
    #[serde(default, rename = "Version")]
    _version: Option<String>,
}

/// A route as the Go library reads it: `dst` through `net.ParseCIDR`
/// (host bits kept; a bare address is an error), `gw` through `net.ParseIP`.
#[derive(Deserialize)]
struct RawRoute {
    #[serde(default)]
    dst: Option<String>,
    #[serde(default)]
    gw: Option<String>,
    #[serde(default)]
    mtu: Option<u32>,
    #[serde(default)]
    advmss: Option<u32>,
    #[serde(default)]
    priority: Option<u32>,
    #[serde(default)]
    table: Option<u32>,
    #[serde(default)]
    scope: Option<u8>,
}

/// A string in a Go `[]string`, where `null` reads as "".
struct NullableString(String);

impl<'de> Deserialize<'de> for NullableString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(NullableString(
            Option::<String>::deserialize(d)?.unwrap_or_default(),
        ))
    }
}

fn refuse_ipnet<'de, D: Deserializer<'de>>(_d: D) -> Result<Option<()>, D::Error> {
    Err(serde::de::Error::custom(
        "cannot unmarshal into Go struct field Address.ipam.addresses.Address of type net.IPNet (the key is \"address\")",
    ))
}

// ---- parsing helpers with the reference's texts ----

fn config_error(msg: impl Into<String>) -> CniError {
    CniError::invalid_config(msg)
}

/// `net.IPNet` as the CNI result prints it: an IPv4-mapped address written
/// in IPv6 syntax becomes IPv4, its mask the last 32 bits of the 128-bit one.
fn to_ipnet(c: Cidr) -> IpNetwork {
    let prefix = if c.addr.is_ipv4() && c.mask_bits == 128 {
        c.prefix.saturating_sub(96)
    } else {
        c.prefix
    };
    // The prefix is within the family's bits by construction.
    IpNetwork::new(c.addr, prefix).unwrap_or_else(|_| IpNetwork::from(c.addr))
}

/// Go's `net.ParseIP` for a text field: `""` is nil.
fn parse_ip(s: &str) -> Option<IpAddr> {
    s.parse::<IpAddr>().ok().map(canonical)
}

fn optional_ip(s: Option<String>) -> Result<Option<IpAddr>, CniError> {
    match s.as_deref() {
        None | Some("") => Ok(None),
        Some(t) => parse_ip(t)
            .map(Some)
            .ok_or_else(|| config_error(format!("invalid IP address: {t}"))),
    }
}

fn route(raw: RawRoute) -> Result<Route, CniError> {
    let dst = raw.dst.unwrap_or_default();
    let dst = Cidr::parse(&dst).map_err(config_error)?;
    Ok(Route {
        dst: to_ipnet(dst),
        gw: optional_ip(raw.gw)?,
        mtu: raw.mtu.unwrap_or(0),
        adv_mss: raw.advmss.unwrap_or(0),
        priority: raw.priority.unwrap_or(0),
        table: raw.table,
        scope: raw.scope,
    })
}

/// `ips` entries (args or runtimeConfig): each must be `ip/len`.
fn ips_list(list: &[NullableString]) -> Result<Vec<Address>, CniError> {
    list.iter()
        .map(|NullableString(s)| {
            Cidr::parse(s)
                .map(|c| Address {
                    address: to_ipnet(c),
                    gateway: None,
                })
                .map_err(|_| {
                    config_error(format!(
                        "an entry in the 'ips' field is NOT in CIDR notation, got: '{s}'"
                    ))
                })
        })
        .collect()
}

/// An address entry before validation: config ones keep their text until
/// the end, as in the reference (so the error order is the same).
enum Pending {
    Config {
        text: String,
        gateway: Option<IpAddr>,
    },
    Parsed(Address),
}

/// CNI_ARGS `IP=a/n[,b/m…]` and `GATEWAY=g[,h…]`, appended to `out`.
fn from_cni_args(raw: &str, out: &mut Vec<Pending>) -> Result<(), CniError> {
    if raw.is_empty() {
        return Ok(());
    }
    let args = CniArgs::load(raw, &["IP", "GATEWAY"])?;
    let mut ours: Vec<(Cidr, Option<IpAddr>)> = Vec::new();
    if let Some(ips) = args.get("IP").filter(|s| !s.is_empty()) {
        for item in ips.split(',') {
            let text = item.trim();
            let c = Cidr::parse(text).map_err(|_| {
                config_error(format!(
                    "the 'ip' field is expected to be in CIDR notation, got: '{text}'"
                ))
            })?;
            ours.push((c, None));
        }
    }
    if let Some(gws) = args.get("GATEWAY").filter(|s| !s.is_empty()) {
        for item in gws.split(',') {
            let gw = parse_ip(item.trim())
                .ok_or_else(|| config_error(format!("invalid gateway address: {item}")))?;
            // Later gateways win for an address both hold.
            for (c, slot) in ours.iter_mut() {
                if c.contains(gw) {
                    *slot = Some(gw);
                }
            }
        }
    }
    out.extend(ours.into_iter().map(|(c, gateway)| {
        Pending::Parsed(Address {
            address: to_ipnet(c),
            gateway,
        })
    }));
    Ok(())
}

/// Loads the config from stdin and `CNI_ARGS` as the reference's
/// `LoadIPAMConfig` does, in the same order (so the same error wins).
pub fn load(config: &serde_json::Value, cni_args: &str) -> Result<StaticConf, CniError> {
    let net: Net =
        cni_skel::gojson::from_value(config).map_err(|e| config_error(format!("json: {e}")))?;
    let Some(ipam) = net.ipam else {
        return Err(config_error("IPAM config missing 'ipam' key"));
    };
    let routes = ipam
        .routes
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .map(route)
        .collect::<Result<Vec<_>, _>>()?;
    let mut pending = Vec::new();
    for a in ipam.addresses.unwrap_or_default() {
        pending.push(Pending::Config {
            text: a.address.unwrap_or_default(),
            gateway: optional_ip(a.gateway)?,
        });
    }
    from_cni_args(cni_args, &mut pending)?;

    let from_args = net.args.and_then(|a| a.cni).and_then(|c| c.ips);
    if let Some(ips) = from_args.filter(|l| !l.is_empty()) {
        pending = ips_list(&ips)?.into_iter().map(Pending::Parsed).collect();
    }
    let from_runtime = net.runtime_config.and_then(|r| r.ips);
    if let Some(ips) = from_runtime.filter(|l| !l.is_empty()) {
        pending = ips_list(&ips)?.into_iter().map(Pending::Parsed).collect();
    }

    let addresses = pending
        .into_iter()
        .map(|p| match p {
            Pending::Parsed(a) => Ok(a),
            Pending::Config { text, gateway } => Cidr::parse(&text)
                .map(|c| Address {
                    address: to_ipnet(c),
                    gateway,
                })
                .map_err(|_| {
                    config_error(format!(
                        "the 'address' field is expected to be in CIDR notation, got: '{text}'"
                    ))
                }),
        })
        .collect::<Result<Vec<_>, _>>()?;

    let version = net.cni_version.unwrap_or_default();
    let v4 = addresses.iter().filter(|a| a.address.is_ipv4()).count();
    let v6 = addresses.len() - v4;
    if (v4 > 1 || v6 > 1) && !supports_many(&version) {
        return Err(config_error(format!(
            "CNI version {version} does not support more than 1 address per family"
        )));
    }
    Ok(StaticConf {
        addresses,
        routes,
        dns: ipam.dns.unwrap_or_default(),
    })
}

/// Whether results of `version` hold more than one address per family
/// (0.3.0 and later; an unparsable version does not).
fn supports_many(version: &str) -> bool {
    Version::parse(version).is_ok_and(|v| v >= Version::MULTI_IP)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(conf: &str, args: &str) -> Result<StaticConf, CniError> {
        load(&serde_json::from_str(conf).unwrap(), args)
    }

    fn addrs(c: &StaticConf) -> Vec<String> {
        c.addresses
            .iter()
            .map(|a| match a.gateway {
                Some(g) => format!("{} gw {g}", a.address),
                None => a.address.to_string(),
            })
            .collect()
    }

    fn err(conf: &str, args: &str) -> String {
        load_str(conf, args).unwrap_err().msg
    }

    const BASE: &str = r#"{"cniVersion":"1.0.0","name":"n","ipam":{"type":"static","addresses":[{"address":"10.10.0.1/24","gateway":"10.10.0.254"},{"address":"3ffe:ffff:0:01ff::1/64","gateway":"3ffe:ffff:0::1"}],"routes":[{"dst":"0.0.0.0/0"},{"dst":"192.168.0.0/16","gw":"10.10.5.1"},{"dst":"3ffe:ffff:0:01ff::1/64"}],"dns":{"nameservers":["8.8.8.8"],"domain":"example.com","search":["example.com"]}}}"#;

    #[test]
    fn config_addresses_routes_and_dns() {
        let c = load_str(BASE, "").unwrap();
        assert_eq!(
            addrs(&c),
            [
                "10.10.0.1/24 gw 10.10.0.254",
                "3ffe:ffff:0:1ff::1/64 gw 3ffe:ffff::1"
            ]
        );
        let routes: Vec<String> = c
            .routes
            .iter()
            .map(|r| format!("{} {:?}", r.dst, r.gw))
            .collect();
        assert_eq!(
            routes,
            [
                "0.0.0.0/0 None",
                "192.168.0.0/16 Some(10.10.5.1)",
                // Host bits are kept, as types.IPNet keeps them.
                "3ffe:ffff:0:1ff::1/64 None",
            ]
        );
        assert_eq!(c.dns.nameservers, ["8.8.8.8"]);
        assert_eq!(c.dns.domain, "example.com");
    }

    #[test]
    fn keys_match_as_go_does() {
        let c = load_str(
            r#"{"name":"n","cniVersion":"0.4.0","IPAM":{"TYPE":"static","ADDRESSES":[{"ADDRESS":"10.0.0.5/24","Gateway":"10.0.0.1"}],"Routes":[{"DST":"0.0.0.0/0"},{"dst":"0.0.0.0/0"}]}}"#,
            "",
        )
        .unwrap();
        assert_eq!(addrs(&c), ["10.0.0.5/24 gw 10.0.0.1"]);
        assert_eq!(c.routes.len(), 2, "duplicates (ECMP) are kept");
        // The exact key "Address" is the untagged net.IPNet field.
        let e = err(
            r#"{"name":"n","ipam":{"addresses":[{"Address":"10.0.0.5/24"}]}}"#,
            "",
        );
        assert!(
            e.contains("Address.ipam.addresses.Address of type net.IPNet"),
            "{e}"
        );
        for bad in [
            r#"{"ipam":{"addresses":[{"address":5}]}}"#,
            r#"{"ipam":{"addresses":{"address":"10.0.0.5/24"}}}"#,
            r#"{"ipam":{"addresses":[{"address":"10.0.0.5/24","gateway":5}]}}"#,
            r#"{"ipam":{"name":5}}"#,
            r#"{"ipam":{"routes":[{"dst":"0.0.0.0/0","mtu":-1}]}}"#,
            r#"{"ipam":{"dns":{"nameservers":"8.8.8.8"}}}"#,
            r#"{"ipam":{},"runtimeConfig":{"ips":"10.0.0.1/8"}}"#,
            r#"{"ipam":{},"args":{"cni":{"ips":[5]}}}"#,
            r#"{"ipam":"static"}"#,
        ] {
            let e = load_str(bad, "").unwrap_err();
            assert!(e.msg.starts_with("json: "), "{bad}: {e:?}");
            assert_eq!(e.code, 7, "{bad}");
        }
    }

    #[test]
    fn reference_error_texts() {
        assert_eq!(err(r#"{"name":"n"}"#, ""), "IPAM config missing 'ipam' key");
        assert_eq!(
            err(r#"{"name":"n","ipam":null}"#, ""),
            "IPAM config missing 'ipam' key"
        );
        assert_eq!(
            err(r#"{"ipam":{"addresses":[{"address":"10.0.0.5"}]}}"#, ""),
            "the 'address' field is expected to be in CIDR notation, got: '10.0.0.5'"
        );
        assert_eq!(
            err(r#"{"ipam":{"addresses":[{"gateway":"10.0.0.1"}]}}"#, ""),
            "the 'address' field is expected to be in CIDR notation, got: ''"
        );
        assert_eq!(
            err(
                r#"{"ipam":{"addresses":[{"address":"10.0.0.5/24","gateway":"zz"}]}}"#,
                ""
            ),
            "invalid IP address: zz"
        );
        assert_eq!(
            err(r#"{"ipam":{}}"#, "IP=10.1.0.5"),
            "the 'ip' field is expected to be in CIDR notation, got: '10.1.0.5'"
        );
        assert_eq!(
            err(r#"{"ipam":{}}"#, "GATEWAY= zz"),
            "invalid gateway address:  zz"
        );
        assert_eq!(
            err(r#"{"ipam":{}}"#, "FOO=1"),
            r#"ARGS: unknown args ["FOO=1"]"#
        );
        assert_eq!(
            err(r#"{"ipam":{},"args":{"cni":{"ips":["10.9.0.1"]}}}"#, ""),
            "an entry in the 'ips' field is NOT in CIDR notation, got: '10.9.0.1'"
        );
        assert_eq!(
            err(r#"{"ipam":{},"runtimeConfig":{"ips":[null]}}"#, ""),
            "an entry in the 'ips' field is NOT in CIDR notation, got: ''"
        );
        assert_eq!(
            err(r#"{"ipam":{"routes":[{"dst":"10.0.0.0"}]}}"#, ""),
            "invalid CIDR address: 10.0.0.0"
        );
        assert_eq!(
            err(r#"{"ipam":{"routes":[{"dst":"10.0.0.0/8","gw":"x"}]}}"#, ""),
            "invalid IP address: x"
        );
    }

    #[test]
    fn cni_args_append_and_gateways_go_to_their_prefix() {
        let c = load_str(
            r#"{"cniVersion":"1.0.0","ipam":{"addresses":[{"address":"10.0.0.5/24"}]}}"#,
            "IP=10.1.0.5/24, 10.2.0.5/16 ,fd00::5/64;GATEWAY=10.1.0.1,10.2.9.9,10.0.0.1,10.1.0.2,fd00::1",
        )
        .unwrap();
        assert_eq!(
            addrs(&c),
            [
                // Config addresses never get a CNI_ARGS gateway.
                "10.0.0.5/24",
                "10.1.0.5/24 gw 10.1.0.2",
                "10.2.0.5/16 gw 10.2.9.9",
                "fd00::5/64 gw fd00::1",
            ]
        );
        let c = load_str(r#"{"ipam":{}}"#, "IgnoreUnknown=1;K8S_POD_NAME=x;IP=").unwrap();
        assert!(c.addresses.is_empty());
    }

    #[test]
    fn precedence_runtime_over_args_over_config() {
        let all = r#"{"cniVersion":"1.0.0","ipam":{"addresses":[{"address":"10.0.0.5/24","gateway":"10.0.0.1"}],"routes":[{"dst":"0.0.0.0/0"}]},"args":{"cni":{"ips":["10.9.0.1/8","fd09::1/64"]}},"runtimeConfig":{"ips":["10.8.0.1/8"]}}"#;
        let c = load_str(all, "IP=10.1.0.5/24;GATEWAY=10.1.0.1").unwrap();
        assert_eq!(addrs(&c), ["10.8.0.1/8"]);
        assert_eq!(c.routes.len(), 1, "routes are kept");
        let args_only = all.replace(
            r#""runtimeConfig":{"ips":["10.8.0.1/8"]}"#,
            r#""runtimeConfig":{"ips":[]}"#,
        );
        let c = load_str(&args_only, "IP=10.1.0.5/24").unwrap();
        assert_eq!(addrs(&c), ["10.9.0.1/8", "fd09::1/64"]);
        // Empty lists do not replace anything.
        let c = load_str(
            r#"{"ipam":{"addresses":[{"address":"10.0.0.5/24"}]},"args":{"cni":{"ips":[]}},"runtimeConfig":{}}"#,
            "",
        )
        .unwrap();
        assert_eq!(addrs(&c), ["10.0.0.5/24"]);
        // A replaced source is still validated first, in the reference's order.
        assert!(
            err(
                r#"{"ipam":{},"runtimeConfig":{"ips":["10.8.0.1/8"]}}"#,
                "IP=bad"
            )
            .contains("'ip' field")
        );
        // ...but a bad config address no longer matters once replaced.
        let c = load_str(
            r#"{"ipam":{"addresses":[{"address":"bad"}]},"runtimeConfig":{"ips":["10.8.0.1/8"]}}"#,
            "",
        )
        .unwrap();
        assert_eq!(addrs(&c), ["10.8.0.1/8"]);
    }

    #[test]
    fn one_address_per_family_before_0_3_0() {
        let two = |v: &str| {
            format!(
                r#"{{"cniVersion":"{v}","ipam":{{"addresses":[{{"address":"10.0.0.5/24"}},{{"address":"10.0.0.6/24"}}]}}}}"#
            )
        };
        for v in ["0.1.0", "0.2.0"] {
            assert_eq!(
                err(&two(v), ""),
                format!("CNI version {v} does not support more than 1 address per family")
            );
        }
        for v in ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
            assert_eq!(load_str(&two(v), "").unwrap().addresses.len(), 2, "{v}");
        }
        assert!(
            load_str(
                r#"{"cniVersion":"0.2.0","ipam":{"addresses":[{"address":"10.0.0.5/24"},{"address":"fd00::5/64"}]}}"#,
                ""
            )
            .is_ok()
        );
    }

    #[test]
    fn mapped_addresses_become_ipv4() {
        let c = load_str(
            r#"{"cniVersion":"1.0.0","ipam":{"addresses":[{"address":"::ffff:10.0.0.5/120","gateway":"::ffff:10.0.0.1"}]}}"#,
            "",
        )
        .unwrap();
        assert_eq!(addrs(&c), ["10.0.0.5/24 gw 10.0.0.1"]);
    }
}
