//! CNI results in every spec version, and conversion between them.
//!
//! [`CniResult`] is one version-independent result (the 1.1.0 superset).
//! It is parsed from, and printed as, any of the three result families
//! exactly as the Go library prints them: 4-space indent, no trailing
//! newline; struct order for 0.x, sorted keys for 1.x.

use crate::error::{CniError, code};
use crate::version::{Family, Version};
use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::net::IpAddr;

/// DNS settings of a result or a config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dns {
    /// Name servers, in priority order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// The local domain.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    /// resolv.conf options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl Dns {
    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty()
            && self.domain.is_empty()
            && self.search.is_empty()
            && self.options.is_empty()
    }
}

/// An interface a plugin created or configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interface {
    /// Interface name.
    pub name: String,
    /// MAC address, `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    /// MTU (1.1.0); 0 = not reported.
    pub mtu: u32,
    /// The netns path for container interfaces; empty on the host.
    pub sandbox: String,
    /// vhost-user socket path (1.1.0).
    pub socket_path: String,
    /// PCI ID of a device (1.1.0).
    pub pci_id: String,
}

/// One address of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpConfig {
    /// Index into `interfaces`; `None` for IPAM results.
    pub interface: Option<usize>,
    /// Address with the subnet's prefix length, e.g. `10.1.2.2/24`.
    pub address: IpNetwork,
    /// The default gateway of that subnet.
    pub gateway: Option<IpAddr>,
}

/// A route; the fields past `gw` are 1.1.0 additions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Destination.
    #[serde(deserialize_with = "crate::cidr::deserialize_ipnet")]
    pub dst: IpNetwork,
    /// Next hop; `None` means the default gateway of the matching family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
    /// Route MTU; 0 = unset.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtu: u32,
    /// Route advertised MSS; 0 = unset.
    #[serde(default, skip_serializing_if = "is_zero", rename = "advmss")]
    pub adv_mss: u32,
    /// Metric; 0 = unset.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: u32,
    /// Routing table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// Route scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<u8>,
}

impl Route {
    /// A route with only a destination and an optional gateway.
    pub fn new(dst: IpNetwork, gw: Option<IpAddr>) -> Self {
        Route {
            dst,
            gw,
            mtu: 0,
            adv_mss: 0,
            priority: 0,
            table: None,
            scope: None,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn no_routes(r: &&[Route]) -> bool {
    r.is_empty()
}

/// A result of any version, held as the 1.1.0 superset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniResult {
    /// The version the result was parsed in or is meant for.
    pub cni_version: String,
    /// Interfaces (none for IPAM results).
    pub interfaces: Vec<Interface>,
    /// Addresses.
    pub ips: Vec<IpConfig>,
    /// Routes.
    pub routes: Vec<Route>,
    /// DNS.
    pub dns: Dns,
}

// ---- wire formats ----

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Wire1<'a> {
    cni_version: &'a str,
    #[serde(skip_serializing_if = "WireDns1::is_empty")]
    dns: WireDns1<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    interfaces: Vec<WireIface1>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ips: Vec<WireIp1>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<WireRoute1<'a>>,
}

/// DNS with its keys sorted: the Go library prints 1.x results through a
/// map, so nested keys are sorted too.
#[derive(Serialize)]
struct WireDns1<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    domain: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    nameservers: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    options: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    search: &'a [String],
}

impl<'a> WireDns1<'a> {
    fn new(d: &'a Dns) -> Self {
        WireDns1 {
            domain: &d.domain,
            nameservers: &d.nameservers,
            options: &d.options,
            search: &d.search,
        }
    }

    fn is_empty(&self) -> bool {
        self.domain.is_empty()
            && self.nameservers.is_empty()
            && self.options.is_empty()
            && self.search.is_empty()
    }
}

/// Keys in sorted order, as the Go library prints 1.x results.
#[derive(Serialize, Deserialize)]
struct WireIface1 {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    mac: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    mtu: u32,
    name: String,
    #[serde(default, rename = "pciID", skip_serializing_if = "String::is_empty")]
    pci_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    sandbox: String,
    #[serde(
        default,
        rename = "socketPath",
        skip_serializing_if = "String::is_empty"
    )]
    socket_path: String,
}

#[derive(Serialize, Deserialize)]
struct WireIp1 {
    #[serde(deserialize_with = "crate::cidr::deserialize_ipnet")]
    address: IpNetwork,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interface: Option<usize>,
}

/// A route with its keys in sorted order.
#[derive(Serialize)]
struct WireRoute1<'a> {
    #[serde(skip_serializing_if = "is_zero")]
    advmss: u32,
    dst: &'a IpNetwork,
    #[serde(skip_serializing_if = "Option::is_none")]
    gw: &'a Option<IpAddr>,
    #[serde(skip_serializing_if = "is_zero")]
    mtu: u32,
    #[serde(skip_serializing_if = "is_zero")]
    priority: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<u32>,
}

impl<'a> From<&'a Route> for WireRoute1<'a> {
    fn from(r: &'a Route) -> Self {
        WireRoute1 {
            advmss: r.adv_mss,
            dst: &r.dst,
            gw: &r.gw,
            mtu: r.mtu,
            priority: r.priority,
            scope: r.scope,
            table: r.table,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire1In {
    #[serde(default)]
    dns: Option<Dns>,
    #[serde(default)]
    interfaces: Option<Vec<WireIface1>>,
    #[serde(default)]
    ips: Option<Vec<WireIp1>>,
    #[serde(default)]
    routes: Option<Vec<Route>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Wire04<'a> {
    cni_version: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    interfaces: Vec<WireIface04<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ips: Vec<WireIp04>,
    #[serde(skip_serializing_if = "no_routes")]
    routes: &'a [Route],
    dns: &'a Dns,
}

#[derive(Serialize, Deserialize)]
struct WireIface04<'a> {
    name: std::borrow::Cow<'a, str>,
    #[serde(default, skip_serializing_if = "str::is_empty")]
    mac: std::borrow::Cow<'a, str>,
    #[serde(default, skip_serializing_if = "str::is_empty")]
    sandbox: std::borrow::Cow<'a, str>,
}

#[derive(Serialize, Deserialize)]
struct WireIp04 {
    #[serde(default)]
    version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interface: Option<usize>,
    #[serde(deserialize_with = "crate::cidr::deserialize_ipnet")]
    address: IpNetwork,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
}

impl From<WireIp1> for IpConfig {
    fn from(i: WireIp1) -> Self {
        IpConfig {
            interface: i.interface,
            address: i.address,
            gateway: i.gateway,
        }
    }
}

impl From<WireIp04> for IpConfig {
    fn from(i: WireIp04) -> Self {
        IpConfig {
            interface: i.interface,
            address: i.address,
            gateway: i.gateway,
        }
    }
}

#[derive(Deserialize)]
struct Wire04In {
    #[serde(default)]
    interfaces: Option<Vec<WireIface04<'static>>>,
    #[serde(default)]
    ips: Option<Vec<WireIp04>>,
    #[serde(default)]
    routes: Option<Vec<Route>>,
    #[serde(default)]
    dns: Option<Dns>,
}

#[derive(Serialize, Deserialize)]
struct WireIp02 {
    #[serde(deserialize_with = "crate::cidr::deserialize_ipnet")]
    ip: IpNetwork,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    routes: Vec<WireRoute02>,
}

#[derive(Serialize, Deserialize)]
struct WireRoute02 {
    #[serde(deserialize_with = "crate::cidr::deserialize_ipnet")]
    dst: IpNetwork,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gw: Option<IpAddr>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Wire02<'a> {
    cni_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip4: Option<WireIp02>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip6: Option<WireIp02>,
    dns: &'a Dns,
}

#[derive(Deserialize)]
struct Wire02In {
    #[serde(default)]
    ip4: Option<WireIp02>,
    #[serde(default)]
    ip6: Option<WireIp02>,
    #[serde(default)]
    dns: Option<Dns>,
}

/// Serialises with the Go library's `MarshalIndent(v, "", "    ")` layout.
pub(crate) fn to_pretty_json<T: Serialize>(value: &T) -> String {
    let mut out = Vec::with_capacity(256);
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    // Serialising plain data structs into a Vec cannot fail.
    if value.serialize(&mut ser).is_err() {
        return String::from("{}");
    }
    String::from_utf8(out).unwrap_or_default()
}

fn decode_err(e: impl std::fmt::Display) -> CniError {
    CniError::new(
        code::DECODING_FAILURE,
        format!("failed to parse result: {e}"),
        "",
    )
}

fn result_version(value: &Value, default: &str) -> Result<String, CniError> {
    match value.get("cniVersion") {
        None | Some(Value::Null) => Ok(default.to_string()),
        Some(Value::String(s)) if s.is_empty() => Ok(default.to_string()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(decode_err(format!(
            "cniVersion must be a string, not {other}"
        ))),
    }
}

impl CniResult {
    /// Parses a plugin's result, choosing the format by the result's own
    /// `cniVersion` (or `default_version` when it has none), as libcni does
    /// with a delegate's output.
    pub fn parse(bytes: &[u8], default_version: &str) -> Result<CniResult, CniError> {
        let value: Value = serde_json::from_slice(bytes).map_err(decode_err)?;
        let version = result_version(&value, default_version)?;
        let family = Version::parse(&version)?.family();
        Self::from_value(&value, &version, family)
    }

    /// Parses a `prevResult` in the family of the config's version, as the
    /// reference's `ParsePrevResult` does: a result of another family is an error.
    pub fn parse_prev(value: &Value, config_version: &str) -> Result<CniResult, CniError> {
        let family = Version::parse(config_version)?.family();
        let version = result_version(value, config_version)?;
        if !family.versions().contains(&version.as_str()) {
            return Err(CniError::new(
                code::DECODING_FAILURE,
                format!(
                    "result type supports [{}] but unmarshalled CNIVersion is {version:?}",
                    family.versions().join(" ")
                ),
                "",
            ));
        }
        Self::from_value(value, &version, family)
    }

    fn from_value(value: &Value, version: &str, family: Family) -> Result<CniResult, CniError> {
        let mut r = CniResult {
            cni_version: version.to_string(),
            ..Default::default()
        };
        match family {
            Family::V1 => {
                let w: Wire1In = crate::gojson::from_value(value).map_err(decode_err)?;
                r.interfaces = w
                    .interfaces
                    .unwrap_or_default()
                    .into_iter()
                    .map(|i| Interface {
                        name: i.name,
                        mac: i.mac,
                        mtu: i.mtu,
                        sandbox: i.sandbox,
                        socket_path: i.socket_path,
                        pci_id: i.pci_id,
                    })
                    .collect();
                r.ips = w
                    .ips
                    .unwrap_or_default()
                    .into_iter()
                    .map(IpConfig::from)
                    .collect();
                r.routes = w.routes.unwrap_or_default();
                r.dns = w.dns.unwrap_or_default();
            }
            Family::V04 => {
                let w: Wire04In = crate::gojson::from_value(value).map_err(decode_err)?;
                r.interfaces = w
                    .interfaces
                    .unwrap_or_default()
                    .into_iter()
                    .map(|i| Interface {
                        name: i.name.into_owned(),
                        mac: i.mac.into_owned(),
                        sandbox: i.sandbox.into_owned(),
                        ..Default::default()
                    })
                    .collect();
                r.ips = w
                    .ips
                    .unwrap_or_default()
                    .into_iter()
                    .map(IpConfig::from)
                    .collect();
                r.routes = w.routes.unwrap_or_default();
                r.dns = w.dns.unwrap_or_default();
            }
            Family::V02 => {
                let w: Wire02In = crate::gojson::from_value(value).map_err(decode_err)?;
                for ip in [w.ip4, w.ip6].into_iter().flatten() {
                    r.ips.push(IpConfig {
                        interface: None,
                        address: ip.ip,
                        gateway: ip.gateway,
                    });
                    r.routes
                        .extend(ip.routes.into_iter().map(|rt| Route::new(rt.dst, rt.gw)));
                }
                r.dns = w.dns.unwrap_or_default();
            }
        }
        Ok(r)
    }

    /// Prints the result in `version`'s format, converting as the Go library
    /// does (`GetAsVersion`), with `cniVersion` set to `version`.
    pub fn to_json(&self, version: &str) -> Result<String, CniError> {
        let family = Version::parse(version)?.family();
        match family {
            Family::V1 => Ok(to_pretty_json(&Wire1 {
                cni_version: version,
                dns: WireDns1::new(&self.dns),
                interfaces: self
                    .interfaces
                    .iter()
                    .map(|i| WireIface1 {
                        mac: i.mac.clone(),
                        mtu: i.mtu,
                        name: i.name.clone(),
                        pci_id: i.pci_id.clone(),
                        sandbox: i.sandbox.clone(),
                        socket_path: i.socket_path.clone(),
                    })
                    .collect(),
                ips: self
                    .ips
                    .iter()
                    .map(|i| WireIp1 {
                        address: i.address,
                        gateway: i.gateway,
                        interface: i.interface,
                    })
                    .collect(),
                routes: self.routes.iter().map(WireRoute1::from).collect(),
            })),
            Family::V04 => Ok(to_pretty_json(&Wire04 {
                cni_version: version,
                interfaces: self
                    .interfaces
                    .iter()
                    .map(|i| WireIface04 {
                        name: i.name.as_str().into(),
                        mac: i.mac.as_str().into(),
                        sandbox: i.sandbox.as_str().into(),
                    })
                    .collect(),
                ips: self
                    .ips
                    .iter()
                    .map(|i| WireIp04 {
                        version: if i.address.is_ipv4() { "4" } else { "6" }.to_string(),
                        interface: i.interface,
                        address: i.address,
                        gateway: i.gateway,
                    })
                    .collect(),
                routes: &self.routes,
                dns: &self.dns,
            })),
            Family::V02 => {
                let first = |v4: bool| {
                    self.ips
                        .iter()
                        .find(|i| i.address.is_ipv4() == v4)
                        .map(|i| WireIp02 {
                            ip: i.address,
                            gateway: i.gateway,
                            routes: self
                                .routes
                                .iter()
                                .filter(|r| r.dst.is_ipv4() == v4)
                                .map(|r| WireRoute02 {
                                    dst: r.dst,
                                    gw: r.gw,
                                })
                                .collect(),
                        })
                };
                let (ip4, ip6) = (first(true), first(false));
                if ip4.is_none() && ip6.is_none() {
                    return Err(CniError::internal("cannot convert: no valid IP addresses"));
                }
                Ok(to_pretty_json(&Wire02 {
                    cni_version: version,
                    ip4,
                    ip6,
                    dns: &self.dns,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests;
