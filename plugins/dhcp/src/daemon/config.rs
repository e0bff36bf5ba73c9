//! What the daemon reads from an RPC's arguments: the network config
//! (`name`, `ipam.provide`, `ipam.request`, `ipam.priority`), CNI_ARGS for
//! `fromArg`, and the DHCP client identifier, all as the Go daemon does;
//! and for the plugin side, `ipam.daemonSocketPath`.

use dhcp4::opt;
use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
struct NetConf {
    #[serde(default)]
    name: String,
    ipam: Option<IpamConf>,
}

#[derive(Debug, Deserialize, Default)]
struct IpamConf {
    /// Read by the plugin side (the daemon is that socket).
    #[serde(default, rename = "daemonSocketPath")]
    daemon_socket_path: Option<String>,
    #[serde(default)]
    provide: Option<Vec<ProvideOption>>,
    #[serde(default)]
    request: Option<Vec<RequestOption>>,
    #[serde(default)]
    priority: Option<i64>,
}

#[derive(Debug, Deserialize, Default)]
struct ProvideOption {
    #[serde(default)]
    option: String,
    #[serde(default)]
    value: String,
    #[serde(default, rename = "fromArg")]
    from_arg: String,
}

#[derive(Debug, Deserialize, Default)]
struct RequestOption {
    #[serde(default, rename = "skipDefault")]
    skip_default: bool,
    #[serde(default)]
    option: String,
}

/// What one attachment asks of the DHCP server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Options {
    /// The network name (part of the client id; GC is scoped by it).
    pub net_name: String,
    /// Option 55, in a stable order.
    pub request: Vec<u8>,
    /// Options to send, by code, in a stable order.
    pub provide: Vec<(u8, Vec<u8>)>,
    /// `ipam.priority`: the metric of every returned route.
    pub priority: Option<u32>,
}

/// Parses only the network name, for Release and GC (which, like Go's,
/// must not fail on an option the daemon would refuse in Allocate).
pub fn net_name(stdin: &[u8]) -> Result<String, String> {
    let conf: NetConf =
        cni_skel::gojson::from_slice(stdin).map_err(|e| format!("error parsing netconf: {e}"))?;
    Ok(conf.name)
}

/// For the plugin side: `ipam.daemonSocketPath` (empty when unset), with
/// the rest of the config typed as the daemon reads it, so that a wrong
/// type fails on every command (the reference's plugin parses it too).
pub fn daemon_socket_path(stdin: &[u8]) -> Result<String, String> {
    let conf: NetConf = cni_skel::gojson::from_slice(stdin).map_err(|e| e.to_string())?;
    // The reference dereferences a nil pointer here and crashes.
    let ipam = conf
        .ipam
        .ok_or_else(|| "IPAM config missing 'ipam' key".to_string())?;
    Ok(ipam.daemon_socket_path.unwrap_or_default())
}

/// Parses the config and CNI_ARGS of an Allocate.
pub fn parse(stdin: &[u8], cni_args: &str) -> Result<Options, String> {
    let conf: NetConf =
        cni_skel::gojson::from_slice(stdin).map_err(|e| format!("error parsing netconf: {e}"))?;
    // Go's daemon dereferences a nil IPAM here and crashes; say what is wrong.
    let ipam = conf
        .ipam
        .ok_or_else(|| "IPAM config missing 'ipam' key".to_string())?;

    let args: Vec<(&str, &str)> = cni_args
        .split(';')
        .filter_map(|pair| pair.split_once('='))
        .collect();
    // The last occurrence of a key wins, as Go's map assignment does.
    let arg = |key: &str| args.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| *v);

    let mut provide: Vec<(u8, Vec<u8>)> = Vec::new();
    let mut set = |code: u8, v: &str| match provide.iter_mut().find(|(c, _)| *c == code) {
        Some(slot) => slot.1 = v.as_bytes().to_vec(),
        None => provide.push((code, v.as_bytes().to_vec())),
    };
    for o in ipam.provide.unwrap_or_default() {
        let code = option_code(&o.option)?;
        if !o.value.is_empty() {
            if o.value.len() > 255 {
                return Err(format!(
                    "value too long for option {:?}: {:?}",
                    o.option, o.value
                ));
            }
            set(code, &o.value);
        }
        if let Some(v) = arg(&o.from_arg) {
            if v.len() > 255 {
                return Err(format!(
                    "value too long for option {:?} from CNI_ARGS {:?}: {:?}",
                    o.option, o.from_arg, v
                ));
            }
            set(code, v);
        }
    }

    let mut request: Vec<u8> = Vec::new();
    let mut skip_default = false;
    for o in ipam.request.unwrap_or_default() {
        skip_default |= o.skip_default;
        let code = option_code(&o.option)?;
        if !request.contains(&code) {
            request.push(code);
        }
    }
    if !skip_default {
        for code in [opt::ROUTER, opt::SUBNET_MASK] {
            if !request.contains(&code) {
                request.push(code);
            }
        }
    }

    let priority = match ipam.priority {
        None => None,
        Some(p) => Some(u32::try_from(p).map_err(|_| format!("invalid priority {p}"))?),
    };
    Ok(Options {
        net_name: conf.name,
        request,
        provide,
        priority,
    })
}

/// An option's name (the reference's table) or decimal code 0-255.
pub fn option_code(name: &str) -> Result<u8, String> {
    let code = match name {
        "dhcp-client-identifier" => opt::CLIENT_ID,
        "subnet-mask" => opt::SUBNET_MASK,
        "routers" => opt::ROUTER,
        "host-name" => opt::HOST_NAME,
        "user-class" => opt::USER_CLASS,
        "vendor-class-identifier" => opt::VENDOR_CLASS_ID,
        _ => go_parse_u8(name).map_err(|e| {
            format!("Can not parse option {name:?}: Can not parse option: strconv.ParseUint: parsing {name:?}: {e}")
        })?,
    };
    Ok(code)
}

/// Go's `strconv.ParseUint(s, 10, 8)` errors.
fn go_parse_u8(s: &str) -> Result<u8, &'static str> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid syntax");
    }
    s.parse::<u8>().map_err(|_| "value out of range")
}

/// The reference's client id: `containerID/netName/ifName`, cut to 254
/// bytes (Go slices bytes, so a cut may split a UTF-8 sequence; so do we).
pub fn client_id(container_id: &str, net_name: &str, if_name: &str) -> Vec<u8> {
    let mut id = format!("{container_id}/{net_name}/{if_name}").into_bytes();
    id.truncate(254);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_provide() {
        let o = parse(
            br#"{"name":"n","ipam":{"type":"dhcp","provide":[{"option":"host-name","value":"h1"},{"option":"60","fromArg":"VC"}],"request":[{"option":"121"}]}}"#,
            "IgnoreUnknown=1;VC=vendor;x",
        )
        .unwrap();
        assert_eq!(o.net_name, "n");
        assert_eq!(o.request, vec![121, 3, 1]);
        assert_eq!(
            o.provide,
            vec![(12, b"h1".to_vec()), (60, b"vendor".to_vec())]
        );
    }

    #[test]
    fn skip_default() {
        let o = parse(
            br#"{"name":"n","ipam":{"request":[{"option":"6","skipDefault":true}]}}"#,
            "",
        )
        .unwrap();
        assert_eq!(o.request, vec![6]);
    }

    #[test]
    fn errors_as_go() {
        let e = parse(
            br#"{"name":"n","ipam":{"request":[{"option":"bogus"}]}}"#,
            "",
        )
        .unwrap_err();
        assert_eq!(
            e,
            r#"Can not parse option "bogus": Can not parse option: strconv.ParseUint: parsing "bogus": invalid syntax"#
        );
        let e = parse(br#"{"name":"n","ipam":{"request":[{"option":"256"}]}}"#, "").unwrap_err();
        assert!(e.ends_with("value out of range"), "{e}");
        let long = "x".repeat(256);
        let conf =
            format!(r#"{{"name":"n","ipam":{{"provide":[{{"option":"12","value":"{long}"}}]}}}}"#);
        let e = parse(conf.as_bytes(), "").unwrap_err();
        assert!(
            e.starts_with(r#"value too long for option "12": "xxx"#),
            "{e}"
        );
        assert!(parse(br#"{"name":"n"}"#, "").is_err());
        assert!(
            parse(b"[", "")
                .unwrap_err()
                .starts_with("error parsing netconf: ")
        );
    }

    #[test]
    fn client_id_cut() {
        assert_eq!(client_id("c", "n", "eth0"), b"c/n/eth0");
        assert_eq!(client_id(&"a".repeat(300), "n", "eth0").len(), 254);
    }
}
