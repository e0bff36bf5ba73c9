//! The configuration: every key the reference reads (`allocator/config.go`),
//! combined, defaulted and validated the way it does it.
//!
//! Keys are matched as Go's `encoding/json` matches them: exactly, else
//! case-insensitively. Unknown keys are ignored. Every error names the key
//! and the value in its details (`ipam.ranges[0][1].subnet: "10.0.0.0/31"`),
//! while the message keeps the reference's wording.

use crate::range::{Cidr, RangeSet, RawRange, canonical};
use cni_skel::error::code;
// Go's key matching (exact, then case-insensitive; null is absent).
use cni_skel::gojson::field as get;
use cni_skel::{CniError, ParseFor, Route};
use ipnetwork::IpNetwork;
use serde_json::{Map, Value};
use std::net::IpAddr;
use std::path::PathBuf;

/// Where reservations live when `ipam.dataDir` is not given.
pub const DEFAULT_DATA_DIR: &str = "/var/lib/cni/networks";

/// The IPAM configuration after canonicalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpamConfig {
    /// The network name (the store directory's name).
    pub name: String,
    /// `cniVersion` as written.
    pub cni_version: String,
    /// `runtimeConfig.ipRanges`, then the legacy single range, then `ipam.ranges`.
    pub ranges: Vec<RangeSet>,
    /// `ipam.routes`, copied to the result.
    pub routes: Vec<Route>,
    /// `ipam.dataDir`.
    pub data_dir: PathBuf,
    /// `ipam.resolvConf`.
    pub resolv_conf: Option<String>,
    /// Requested addresses: CNI_ARGS `IP`, then `args.cni.ips`, then `runtimeConfig.ips`.
    pub requested: Vec<IpAddr>,
}

impl IpamConfig {
    /// The directory holding this network's reservations.
    pub fn network_dir(&self) -> PathBuf {
        self.data_dir.join(&self.name)
    }
}

/// A config error: code 7, the message, and `key: value` as details.
pub fn invalid(msg: impl Into<String>, key: &str, value: &Value) -> CniError {
    CniError::new(code::INVALID_NETWORK_CONFIG, msg, format!("{key}: {value}"))
}

fn object<'a>(v: &'a Value, key: &str) -> Result<&'a Map<String, Value>, CniError> {
    v.as_object()
        .ok_or_else(|| invalid(format!("{key} must be an object"), key, v))
}

fn array<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>, CniError> {
    v.as_array()
        .ok_or_else(|| invalid(format!("{key} must be an array"), key, v))
}

fn string<'a>(v: &'a Value, key: &str) -> Result<&'a str, CniError> {
    v.as_str()
        .ok_or_else(|| invalid(format!("{key} must be a string"), key, v))
}

/// An optional address (`net.IP` text): empty means absent.
fn opt_ip(m: &Map<String, Value>, key: &str, path: &str) -> Result<Option<IpAddr>, CniError> {
    let Some(v) = get(m, key) else {
        return Ok(None);
    };
    let k = format!("{path}.{key}");
    let s = string(v, &k)?;
    if s.is_empty() {
        return Ok(None);
    }
    s.parse::<IpAddr>()
        .map(|ip| Some(canonical(ip)))
        .map_err(|_| invalid(format!("invalid IP address: {s}"), &k, v))
}

fn cidr(v: &Value, key: &str) -> Result<Cidr, CniError> {
    let s = string(v, key)?;
    Cidr::parse(s).map_err(|e| invalid(e, key, v))
}

fn raw_range(v: &Value, path: &str) -> Result<RawRange, CniError> {
    raw_range_of(object(v, path)?, path)
}

fn raw_range_of(m: &Map<String, Value>, path: &str) -> Result<RawRange, CniError> {
    Ok(RawRange {
        subnet: get(m, "subnet")
            .map(|s| cidr(s, &format!("{path}.subnet")))
            .transpose()?,
        range_start: opt_ip(m, "rangeStart", path)?,
        range_end: opt_ip(m, "rangeEnd", path)?,
        gateway: opt_ip(m, "gateway", path)?,
        origin: path.to_string(),
    })
}

/// `[[range, ...], ...]` as written, each set with its key path.
fn raw_sets(v: &Value, path: &str) -> Result<Vec<(String, Vec<RawRange>)>, CniError> {
    let mut out = Vec::new();
    for (i, set) in array(v, path)?.iter().enumerate() {
        let set_path = format!("{path}[{i}]");
        let ranges = if set.is_null() {
            Vec::new()
        } else {
            array(set, &set_path)?
                .iter()
                .enumerate()
                .map(|(j, r)| raw_range(r, &format!("{set_path}[{j}]")))
                .collect::<Result<Vec<_>, _>>()?
        };
        out.push((set_path, ranges));
    }
    Ok(out)
}

fn uint(m: &Map<String, Value>, key: &str, path: &str, max: u64) -> Result<Option<u64>, CniError> {
    let Some(v) = get(m, key) else {
        return Ok(None);
    };
    match v.as_u64() {
        Some(n) if n <= max => Ok(Some(n)),
        _ => Err(invalid(
            format!("{path}.{key} must be an integer from 0 to {max}"),
            &format!("{path}.{key}"),
            v,
        )),
    }
}

fn route(v: &Value, path: &str) -> Result<Route, CniError> {
    let m = object(v, path)?;
    let dst_key = format!("{path}.dst");
    let dst_v = get(m, "dst").ok_or_else(|| invalid("route has no dst", &dst_key, &Value::Null))?;
    let dst = cidr(dst_v, &dst_key)?;
    let dst = IpNetwork::new(dst.addr, dst.prefix)
        .map_err(|e| invalid(e.to_string(), &dst_key, dst_v))?;
    let gw = opt_ip(m, "gw", path)?;
    let u32max = u64::from(u32::MAX);
    let small = |n: Option<u64>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    Ok(Route {
        dst,
        gw,
        mtu: small(uint(m, "mtu", path, u32max)?),
        adv_mss: small(uint(m, "advmss", path, u32max)?),
        priority: small(uint(m, "priority", path, u32max)?),
        table: uint(m, "table", path, u32max)?.and_then(|n| u32::try_from(n).ok()),
        scope: uint(m, "scope", path, u64::from(u8::MAX))?.and_then(|n| u8::try_from(n).ok()),
    })
}

/// `ip` or `ip/len` (the reference's `ip.IP`); only the address is used.
/// The empty string is Go's nil IP.
fn requested_ip(v: &Value, key: &str) -> Result<Option<IpAddr>, CniError> {
    let s = string(v, key)?;
    if s.is_empty() {
        return Ok(None);
    }
    let parsed = if s.contains('/') {
        Cidr::parse(s).ok().map(|c| c.addr)
    } else {
        s.parse::<IpAddr>().ok()
    };
    parsed
        .map(|ip| Some(canonical(ip)))
        .ok_or_else(|| invalid(format!("invalid IP address {s}"), key, v))
}

fn requested_list(v: Option<&Value>, key: &str, out: &mut Vec<IpAddr>) -> Result<(), CniError> {
    let Some(v) = v else { return Ok(()) };
    for (i, item) in array(v, key)?.iter().enumerate() {
        let k = format!("{key}[{i}]");
        match requested_ip(item, &k)? {
            Some(ip) => out.push(ip),
            // The reference appends a nil IP and then fails to canonicalise it.
            None => {
                return Err(invalid(
                    "cannot understand ip: IP <nil> not v4 nor v6",
                    &k,
                    item,
                ));
            }
        }
    }
    Ok(())
}

fn range_err(e: crate::range::RangeError, prefix: String) -> CniError {
    CniError::new(
        code::INVALID_NETWORK_CONFIG,
        format!("{prefix}{}", e.msg),
        e.details,
    )
}

/// Loads the config from the plugin's stdin and `CNI_ARGS`, as the
/// reference's `LoadIPAMConfig`.
pub fn load(stdin: &[u8], cni_args: &str) -> Result<IpamConfig, CniError> {
    load_for(stdin, cni_args, ParseFor::Use)
}

/// [`load`] for `mode`: DEL, which releases the attachment's reservations
/// in `<dataDir>/<name>` and reads nothing else, logs refused requested
/// addresses, range sets (skipped), their count and overlaps ([`ParseFor`];
/// the reference's DEL fails on them). Wrong JSON types still fail, except
/// in the ranges and requested addresses.
pub fn load_for(stdin: &[u8], cni_args: &str, mode: ParseFor) -> Result<IpamConfig, CniError> {
    let top: Value = serde_json::from_slice(stdin).map_err(|e| {
        CniError::new(
            code::DECODING_FAILURE,
            format!("error unmarshall network config: {e}"),
            "",
        )
    })?;
    load_value_for(&top, cni_args, mode)
}

/// [`load_for`] on the config as the skel parsed it (`CmdArgs::config`).
pub fn load_value_for(top: &Value, cni_args: &str, mode: ParseFor) -> Result<IpamConfig, CniError> {
    let top = object(top, "config")?;
    let name = get(top, "name")
        .map(|v| string(v, "name"))
        .transpose()?
        .unwrap_or_default();
    let cni_version = get(top, "cniVersion")
        .map(|v| string(v, "cniVersion"))
        .transpose()?
        .unwrap_or_default();
    let ipam = match get(top, "ipam") {
        None => {
            return Err(CniError::new(
                code::INVALID_NETWORK_CONFIG,
                "IPAM config missing 'ipam' key",
                "",
            ));
        }
        Some(v) => object(v, "ipam")?,
    };
    let runtime = get(top, "runtimeConfig")
        .map(|v| object(v, "runtimeConfig"))
        .transpose()?;
    let args_cni = match get(top, "args") {
        None => None,
        Some(v) => get(object(v, "args")?, "cni")
            .map(|c| object(c, "args.cni"))
            .transpose()?,
    };

    // Typed keys of the ipam section (wrong JSON types are errors even
    // where the value is not used, as with Go's typed decode).
    if let Some(v) = get(ipam, "type") {
        string(v, "ipam.type")?;
    }
    let data_dir = match get(ipam, "dataDir")
        .map(|v| string(v, "ipam.dataDir"))
        .transpose()?
    {
        None | Some("") => PathBuf::from(DEFAULT_DATA_DIR),
        Some(d) => PathBuf::from(d),
    };
    let resolv_conf = get(ipam, "resolvConf")
        .map(|v| string(v, "ipam.resolvConf"))
        .transpose()?
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let mut routes = Vec::new();
    if let Some(v) = get(ipam, "routes") {
        for (i, r) in array(v, "ipam.routes")?.iter().enumerate() {
            routes.push(route(r, &format!("ipam.routes[{i}]"))?);
        }
    }
    // rangeStart/rangeEnd/gateway without a subnet are ignored (but typed).
    let legacy = mode
        .or_else(raw_range_of(ipam, "ipam").map(Some), || None)?
        .filter(|r| r.subnet.is_some());
    let ipam_ranges = mode.or_else(
        get(ipam, "ranges")
            .map(|v| raw_sets(v, "ipam.ranges"))
            .transpose()
            .map(Option::unwrap_or_default),
        Vec::new,
    )?;
    let runtime_ranges = mode.or_else(
        runtime
            .and_then(|r| get(r, "ipRanges"))
            .map(|v| raw_sets(v, "runtimeConfig.ipRanges"))
            .transpose()
            .map(Option::unwrap_or_default),
        Vec::new,
    )?;

    let requested = mode.or_else(requested_ips(cni_args, args_cni, runtime), Vec::new)?;

    // ranges = runtimeConfig.ipRanges ++ [legacy] ++ ipam.ranges
    let mut raw: Vec<(String, Vec<RawRange>)> = runtime_ranges;
    if let Some(l) = legacy {
        raw.push(("ipam".to_string(), vec![l]));
    }
    raw.extend(ipam_ranges);
    mode.check(if raw.is_empty() {
        Err(CniError::new(
            code::INVALID_NETWORK_CONFIG,
            "no IP ranges specified",
            "ipam.subnet, ipam.ranges, runtimeConfig.ipRanges: none given",
        ))
    } else {
        Ok(())
    })?;
    let mut ranges = Vec::with_capacity(raw.len());
    for (i, (origin, set)) in raw.iter().enumerate() {
        let s = RangeSet::canonicalize(set, origin)
            .map_err(|e| range_err(e, format!("invalid range set {i}: ")));
        if let Some(s) = mode.or_else(s.map(Some), || None)? {
            ranges.push(s);
        }
    }
    mode.check(check_range_sets(&ranges, cni_version))?;
    Ok(IpamConfig {
        name: name.to_string(),
        cni_version: cni_version.to_string(),
        ranges,
        routes,
        data_dir,
        resolv_conf,
        requested,
    })
}

/// Requested addresses, in the reference's order: `CNI_ARGS` `IP`,
/// `args.cni.ips`, `runtimeConfig.ips`.
fn requested_ips(
    cni_args: &str,
    args_cni: Option<&Map<String, Value>>,
    runtime: Option<&Map<String, Value>>,
) -> Result<Vec<IpAddr>, CniError> {
    let mut requested = Vec::new();
    let env = cni_skel::args::CniArgs::load(cni_args, &["IP"])?;
    if let Some(raw) = env.get("IP") {
        let v = Value::String(raw.to_string());
        let ip = requested_ip(&v, "CNI_ARGS IP").map_err(|e| {
            CniError::new(
                code::INTERNAL,
                format!("ARGS: error parsing value of pair \"IP={raw}\": {}", e.msg),
                e.details,
            )
        })?;
        requested.extend(ip);
    }
    requested_list(
        args_cni.and_then(|a| get(a, "ips")),
        "args.cni.ips",
        &mut requested,
    )?;
    requested_list(
        runtime.and_then(|r| get(r, "ips")),
        "runtimeConfig.ips",
        &mut requested,
    )?;
    Ok(requested)
}

/// At most one range set per family before cniVersion 0.3.0, and no two
/// sets overlapping.
fn check_range_sets(ranges: &[RangeSet], cni_version: &str) -> Result<(), CniError> {
    let v4 = ranges.iter().filter(|s| s.is_ipv4()).count();
    let v6 = ranges.len() - v4;
    if (v4 > 1 || v6 > 1)
        && cni_skel::version::Version::parse(cni_version)
            .map(|v| v < cni_skel::version::Version::MULTI_IP)
            .unwrap_or(true)
    {
        return Err(CniError::new(
            code::INVALID_NETWORK_CONFIG,
            format!("CNI version {cni_version} does not support more than 1 address per family"),
            format!("cniVersion: \"{cni_version}\"; {v4} IPv4 and {v6} IPv6 range sets"),
        ));
    }
    for (i, a) in ranges.iter().enumerate() {
        for (j, b) in ranges.iter().enumerate().skip(i + 1) {
            if a.overlaps(b) {
                return Err(CniError::new(
                    code::INVALID_NETWORK_CONFIG,
                    format!("range set {i} overlaps with {j}"),
                    format!("{}: \"{a}\", {}: \"{b}\"", a.origin, b.origin),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load_json(v: Value, args: &str) -> Result<IpamConfig, CniError> {
        load(v.to_string().as_bytes(), args)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn old_style_config() {
        let c = load_json(
            json!({"cniVersion":"0.3.1","name":"mynet","type":"ipvlan","master":"foo0",
                   "ipam":{"type":"host-local","subnet":"10.1.2.0/24"}}),
            "",
        )
        .unwrap();
        assert_eq!(c.name, "mynet");
        assert_eq!(c.cni_version, "0.3.1");
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/cni/networks"));
        assert_eq!(c.ranges.len(), 1);
        let r = &c.ranges[0].ranges[0];
        assert_eq!(
            (r.range_start, r.range_end, r.gateway),
            (ip("10.1.2.1"), ip("10.1.2.254"), ip("10.1.2.1"))
        );
        assert!(c.routes.is_empty() && c.requested.is_empty() && c.resolv_conf.is_none());
    }

    #[test]
    fn new_style_and_mixed_order() {
        let c = load_json(
            json!({"cniVersion":"0.3.1","name":"mynet",
                "runtimeConfig":{"ipRanges":[[{"subnet":"10.9.0.0/24"}]]},
                "ipam":{"type":"host-local","subnet":"10.1.2.0/24","rangeStart":"10.1.2.9","rangeEnd":"10.1.2.12","gateway":"10.1.2.254",
                    "dataDir":"/tmp/x","resolvConf":"/etc/r",
                    "routes":[{"dst":"0.0.0.0/0"},{"dst":"192.168.0.0/16","gw":"10.1.2.5","mtu":1400,"advmss":1300,"priority":7,"table":100,"scope":253}],
                    "ranges":[[{"subnet":"10.2.2.0/24"},{"subnet":"10.3.2.0/24","gateway":"10.3.2.99"}],[{"subnet":"2001:db8:1::/64"}]]}}),
            "",
        )
        .unwrap();
        let origins: Vec<&str> = c.ranges.iter().map(|s| s.origin.as_str()).collect();
        assert_eq!(
            origins,
            [
                "runtimeConfig.ipRanges[0]",
                "ipam",
                "ipam.ranges[0]",
                "ipam.ranges[1]"
            ]
        );
        let legacy = &c.ranges[1].ranges[0];
        assert_eq!(
            (legacy.range_start, legacy.range_end, legacy.gateway),
            (ip("10.1.2.9"), ip("10.1.2.12"), ip("10.1.2.254"))
        );
        assert_eq!(c.ranges[2].ranges[1].gateway, ip("10.3.2.99"));
        assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(c.network_dir(), PathBuf::from("/tmp/x/mynet"));
        assert_eq!(c.resolv_conf.as_deref(), Some("/etc/r"));
        assert_eq!(c.routes.len(), 2);
        let r = &c.routes[1];
        assert_eq!(
            (r.gw, r.mtu, r.adv_mss, r.priority, r.table, r.scope),
            (Some(ip("10.1.2.5")), 1400, 1300, 7, Some(100), Some(253))
        );
    }

    #[test]
    fn requested_ips_from_everywhere() {
        let c = load_json(
            json!({"cniVersion":"0.3.1","name":"n","ipam":{"subnet":"10.1.2.0/24"},
                "args":{"cni":{"ips":["10.1.2.11","10.1.2.12/24"]}},
                "runtimeConfig":{"ips":["10.1.2.13", "2001:db8::5/64"]}}),
            "IP=10.1.2.10/24",
        )
        .unwrap();
        let want: Vec<IpAddr> = [
            "10.1.2.10",
            "10.1.2.11",
            "10.1.2.12",
            "10.1.2.13",
            "2001:db8::5",
        ]
        .iter()
        .map(|s| ip(s))
        .collect();
        assert_eq!(c.requested, want);
        // CNI_ARGS: IP without prefix, unknown keys, IgnoreUnknown, empty IP
        let base = json!({"name":"n","ipam":{"subnet":"10.1.2.0/24"}});
        assert_eq!(
            load_json(base.clone(), "IP=10.1.2.10").unwrap().requested,
            vec![ip("10.1.2.10")]
        );
        assert!(load_json(base.clone(), "IP=").unwrap().requested.is_empty());
        let e = load_json(base.clone(), "IP=10.1.2.10;K8S_POD_NAME=x").unwrap_err();
        assert_eq!(e.msg, r#"ARGS: unknown args ["K8S_POD_NAME=x"]"#);
        assert!(load_json(base.clone(), "IgnoreUnknown=1;IP=10.1.2.10;K8S_POD_NAME=x").is_ok());
        let e = load_json(base.clone(), "IP=banana").unwrap_err();
        assert_eq!(
            e.msg,
            r#"ARGS: error parsing value of pair "IP=banana": invalid IP address banana"#
        );
        let e = load_json(
            json!({"name":"n","ipam":{"subnet":"10.1.2.0/24"},"args":{"cni":{"ips":[""]}}}),
            "",
        )
        .unwrap_err();
        assert_eq!(e.msg, "cannot understand ip: IP <nil> not v4 nor v6");
        assert_eq!(e.details, r#"args.cni.ips[0]: """#);
        let e = load_json(
            json!({"name":"n","ipam":{"subnet":"10.1.2.0/24"},"runtimeConfig":{"ips":["x/1"]}}),
            "",
        )
        .unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str(), e.details.as_str()),
            (
                7,
                "invalid IP address x/1",
                r#"runtimeConfig.ips[0]: "x/1""#
            )
        );
    }

    #[test]
    fn errors_name_key_and_value() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (json!({"name":"n"}), "IPAM config missing 'ipam' key", ""),
            (
                json!({"name":"n","ipam":null}),
                "IPAM config missing 'ipam' key",
                "",
            ),
            (
                json!({"name":"n","ipam":{}}),
                "no IP ranges specified",
                "ipam.subnet, ipam.ranges, runtimeConfig.ipRanges: none given",
            ),
            (
                json!({"name":"n","ipam":{"ranges":[[]]}}),
                "invalid range set 0: empty range set",
                "ipam.ranges[0]: []",
            ),
            (
                json!({"name":"n","ipam":{"subnet":"10.0.0.0/31"}}),
                "invalid range set 0: Network 10.0.0.0/31 too small to allocate from",
                r#"ipam.subnet: "10.0.0.0/31""#,
            ),
            (
                json!({"name":"n","ipam":{"subnet":"10.0.0.1/24"}}),
                "invalid range set 0: Network has host bits set. For a subnet mask of length 24 the network address is 10.0.0.0",
                r#"ipam.subnet: "10.0.0.1/24""#,
            ),
            (
                json!({"name":"n","ipam":{"subnet":"10.0.0.0/24","rangeStart":"10.0.1.5"}}),
                "invalid range set 0: RangeStart 10.0.1.5 not in network 10.0.0.0/24",
                r#"ipam.rangeStart: "10.0.1.5""#,
            ),
            (
                json!({"name":"n","ipam":{"ranges":[[{"subnet":"10.0.0.0/24","rangeEnd":"10.0.1.5"}]]}}),
                "invalid range set 0: RangeEnd 10.0.1.5 not in network 10.0.0.0/24",
                r#"ipam.ranges[0][0].rangeEnd: "10.0.1.5""#,
            ),
            (
                json!({"name":"n","ipam":{"ranges":[[{"subnet":"10.0.0.0/24"},{"subnet":"2001:db8::/64"}]]}}),
                "invalid range set 0: mixed address families",
                r#"ipam.ranges[0][1].subnet: "2001:db8::/64""#,
            ),
            (
                json!({"name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/22"},{"subnet":"10.1.2.0/24"}]]}}),
                "invalid range set 0: subnets 10.1.0.1-10.1.3.254 and 10.1.2.1-10.1.2.254 overlap",
                r#"ipam.ranges[0][0].subnet: "10.1.0.0/22", ipam.ranges[0][1].subnet: "10.1.2.0/24""#,
            ),
            (
                json!({"cniVersion":"1.0.0","name":"n","ipam":{"subnet":"10.1.2.0/24","ranges":[[{"subnet":"10.1.2.0/24"}]]}}),
                "range set 0 overlaps with 1",
                r#"ipam: "10.1.2.1-10.1.2.254", ipam.ranges[0]: "10.1.2.1-10.1.2.254""#,
            ),
            (
                json!({"cniVersion":"0.2.0","name":"n","ipam":{"ranges":[[{"subnet":"10.1.2.0/24"}],[{"subnet":"10.1.3.0/24"}]]}}),
                "CNI version 0.2.0 does not support more than 1 address per family",
                r#"cniVersion: "0.2.0"; 2 IPv4 and 0 IPv6 range sets"#,
            ),
            (
                json!({"name":"n","ipam":{"subnet":"banana"}}),
                "invalid CIDR address: banana",
                r#"ipam.subnet: "banana""#,
            ),
            (
                json!({"name":"n","ipam":{"subnet":"10.0.0.0/24","gateway":"x"}}),
                "invalid IP address: x",
                r#"ipam.gateway: "x""#,
            ),
            (
                json!({"name":"n","ipam":{"subnet":7}}),
                "ipam.subnet must be a string",
                "ipam.subnet: 7",
            ),
            (
                json!({"name":"n","ipam":{"subnet":"10.0.0.0/24","routes":"x"}}),
                "ipam.routes must be an array",
                r#"ipam.routes: "x""#,
            ),
            (
                json!({"name":"n","ipam":{"subnet":"10.0.0.0/24","routes":[{"gw":"10.0.0.1"}]}}),
                "route has no dst",
                "ipam.routes[0].dst: null",
            ),
            (
                json!({"name":"n","ipam":{"subnet":"10.0.0.0/24","routes":[{"dst":"0.0.0.0/0","scope":300}]}}),
                "ipam.routes[0].scope must be an integer from 0 to 255",
                "ipam.routes[0].scope: 300",
            ),
            (
                json!({"name":"n","ipam":{"subnet":"10.0.0.0/24","routes":[{"dst":"0.0.0.0/0","mtu":-1}]}}),
                "ipam.routes[0].mtu must be an integer from 0 to 4294967295",
                "ipam.routes[0].mtu: -1",
            ),
            (
                json!({"name":"n","ipam":{"subnet":"10.0.0.0/24","dataDir":false}}),
                "ipam.dataDir must be a string",
                "ipam.dataDir: false",
            ),
            (
                json!({"name":"n","ipam":{"ranges":[[{"rangeStart":"10.0.0.5"}]]}}),
                "invalid range set 0: IP <nil> not v4 nor v6",
                "ipam.ranges[0][0].subnet: missing",
            ),
            (
                json!({"name":"n","ipam":{"ranges":"x"}}),
                "ipam.ranges must be an array",
                r#"ipam.ranges: "x""#,
            ),
            (
                json!({"name":"n","ipam":{"ranges":[["x"]]}}),
                "ipam.ranges[0][0] must be an object",
                r#"ipam.ranges[0][0]: "x""#,
            ),
            (
                json!({"cniVersion":"1.0.0","name":"n","ipam":{"subnet":"10.0.0.0/24"},"runtimeConfig":{"ipRanges":[[{"subnet":"10.0.0.0/25"}]]}}),
                "range set 0 overlaps with 1",
                r#"runtimeConfig.ipRanges[0]: "10.0.0.1-10.0.0.126", ipam: "10.0.0.1-10.0.0.254""#,
            ),
        ];
        for (conf, msg, details) in cases {
            let e = load_json(conf.clone(), "").unwrap_err();
            assert_eq!(
                (e.msg.as_str(), e.details.as_str()),
                (msg, details),
                "{conf}"
            );
            assert_eq!(e.code, 7, "{conf}");
        }
    }

    #[test]
    fn version_gate_for_many_sets() {
        let two_v4 = json!({"cniVersion":"0.2.0","name":"n","ipam":{"ranges":[[{"subnet":"10.1.2.0/24"}],[{"subnet":"10.1.3.0/24"}]]}});
        assert!(load_json(two_v4.clone(), "").is_err());
        let mut ok = two_v4.clone();
        ok["cniVersion"] = json!("0.3.0");
        assert!(load_json(ok, "").is_ok());
        let mut none = two_v4;
        none.as_object_mut().unwrap().remove("cniVersion");
        assert_eq!(
            load_json(none, "").unwrap_err().msg,
            "CNI version  does not support more than 1 address per family"
        );
        let dual = json!({"cniVersion":"0.2.0","name":"n","ipam":{"ranges":[[{"subnet":"10.1.2.0/24"}],[{"subnet":"2001:db8::/64"}]]}});
        assert!(load_json(dual, "").is_ok());
    }

    #[test]
    fn keys_match_case_insensitively_and_null_is_absent() {
        let c = load_json(json!({"name":"n","IPAM":{"Subnet":"10.1.2.0/24","RANGEEND":"10.1.2.9","gateway":null,"dataDir":""}}), "").unwrap();
        assert_eq!(c.ranges[0].ranges[0].range_end, ip("10.1.2.9"));
        assert_eq!(c.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        // empty strings are Go's nil IP
        let c = load_json(
            json!({"name":"n","ipam":{"subnet":"10.1.2.0/24","rangeStart":"","gateway":""}}),
            "",
        )
        .unwrap();
        assert_eq!(c.ranges[0].ranges[0].range_start, ip("10.1.2.1"));
        // rangeStart without subnet is ignored
        let c = load_json(json!({"name":"n","ipam":{"rangeStart":"10.9.9.9","ranges":[[{"subnet":"10.1.2.0/24"}]]}}), "").unwrap();
        assert_eq!(c.ranges.len(), 1);
    }

    #[test]
    fn del_goes_on_without_refused_ranges() {
        let del = |v: Value, args: &str| load_for(v.to_string().as_bytes(), args, ParseFor::Del);
        for (v, args) in [
            (
                json!({"name":"n","ipam":{"type":"host-local","subnet":"10.161.9.0/33"}}),
                "",
            ),
            (json!({"name":"n","ipam":{"type":"host-local"}}), ""),
            (
                json!({"name":"n","ipam":{"type":"host-local","ranges":[[{"subnet":"10.161.9.0/24"}],[{"subnet":"10.161.9.0/25"}]]}}),
                "",
            ),
            (
                json!({"name":"n","ipam":{"type":"host-local","subnet":"10.161.9.0/24"}}),
                "IP=zz",
            ),
        ] {
            assert!(load_json(v.clone(), args).is_err(), "{v} {args}");
            let c = del(v.clone(), args).unwrap();
            assert_eq!(
                c.network_dir(),
                PathBuf::from(DEFAULT_DATA_DIR).join("n"),
                "{v}"
            );
        }
        let bad = json!({"name":"n","ipam":{"type":"host-local","dataDir":5}});
        assert!(del(bad, "").is_err());
    }
}
