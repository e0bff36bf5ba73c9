//! The messages of the dhcp exchange over net/rpc: their gob schemas (the
//! ids and names a Go process gives them, so our bytes equal Go's) and the
//! conversions between gob values and our types.
//!
//! Go matches struct fields by name and refuses a stream whose field of a
//! known name has another type, even in a part of the value that is empty.
//! So the schemas below carry exactly the fields of the Go types
//! (`skel.CmdArgs`, `types100.Result`), with
//! the fields newer Go versions added only where their type is certain.

use super::CmdArgs;
use cni_skel::{CniResult, Dns, Interface, IpConfig, Route};
use ipnetwork::IpNetwork;
use netrpc::gob::field::{bytes, int, string, wrong};
use netrpc::gob::{Kind, Ty, TypeDef, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

// Client to server, with the ids of a Go plugin process (`rpc.Request` is
// 65). `NetnsOverride` (a string in newer Go) is not sent: 1.1.1 lacks it
// and no daemon reads it.
pub static CMD_ARGS: TypeDef = TypeDef {
    id: 66,
    name: "CmdArgs",
    kind: Kind::Struct(&[
        ("ContainerID", Ty::String),
        ("Netns", Ty::String),
        ("IfName", Ty::String),
        ("Args", Ty::String),
        ("Path", Ty::String),
        ("StdinData", Ty::Bytes),
    ]),
};

// Server to client, with the ids of a Go daemon process (`rpc.Response`
// is 65; types reached through a pointer have no name there, hence the
// empty ones).
pub static RESULT: TypeDef = TypeDef {
    id: 66,
    name: "Result",
    kind: Kind::Struct(&[
        ("CNIVersion", Ty::String),
        ("Interfaces", Ty::Def(&INTERFACES)),
        ("IPs", Ty::Def(&IP_CONFIGS)),
        ("Routes", Ty::Def(&ROUTES)),
        ("DNS", Ty::Def(&DNS)),
    ]),
};
static INTERFACE: TypeDef = TypeDef {
    id: 67,
    name: "",
    kind: Kind::Struct(&[
        ("Name", Ty::String),
        ("Mac", Ty::String),
        ("Mtu", Ty::Int),
        ("Sandbox", Ty::String),
        ("SocketPath", Ty::String),
        ("PciID", Ty::String),
    ]),
};
static INTERFACES: TypeDef = TypeDef {
    id: 68,
    name: "[]*types100.Interface",
    kind: Kind::Slice(Ty::Def(&INTERFACE)),
};
static IP_CONFIG: TypeDef = TypeDef {
    id: 69,
    name: "",
    kind: Kind::Struct(&[
        ("Interface", Ty::Int),
        ("Address", Ty::Def(&IP_NET)),
        ("Gateway", Ty::Bytes),
    ]),
};
static IP_NET: TypeDef = TypeDef {
    id: 70,
    name: "IPNet",
    kind: Kind::Struct(&[("IP", Ty::Bytes), ("Mask", Ty::Bytes)]),
};
static IP_CONFIGS: TypeDef = TypeDef {
    id: 71,
    name: "[]*types100.IPConfig",
    kind: Kind::Slice(Ty::Def(&IP_CONFIG)),
};
static ROUTE: TypeDef = TypeDef {
    id: 72,
    name: "",
    kind: Kind::Struct(&[
        ("Dst", Ty::Def(&IP_NET)),
        ("GW", Ty::Bytes),
        ("MTU", Ty::Int),
        ("AdvMSS", Ty::Int),
        ("Priority", Ty::Int),
        ("Table", Ty::Int),
        ("Scope", Ty::Int),
    ]),
};
static ROUTES: TypeDef = TypeDef {
    id: 73,
    name: "[]*types.Route",
    kind: Kind::Slice(Ty::Def(&ROUTE)),
};
static DNS: TypeDef = TypeDef {
    id: 74,
    name: "DNS",
    kind: Kind::Struct(&[
        ("Nameservers", Ty::Def(&STRINGS)),
        ("Domain", Ty::String),
        ("Search", Ty::Def(&STRINGS)),
        ("Options", Ty::Def(&STRINGS)),
    ]),
};
static STRINGS: TypeDef = TypeDef {
    id: 75,
    name: "[]string",
    kind: Kind::Slice(Ty::String),
};
/// `struct{}`: Release's reply, and the body Go sends with an error.
pub static EMPTY: TypeDef = TypeDef {
    id: 76,
    name: "",
    kind: Kind::Struct(&[]),
};

// ---- field access with Go's zero for absent fields ----

fn int_as<T: TryFrom<i64>>(v: &Value, name: &str) -> Result<Option<T>, String> {
    match int(v, name)? {
        None => Ok(None),
        Some(i) => T::try_from(i)
            .map(Some)
            .map_err(|_| format!("field {name}: {i} out of range")),
    }
}

fn items<'a>(v: &'a Value, name: &str) -> Result<&'a [Value], String> {
    match v.field(name) {
        None => Ok(&[]),
        Some(Value::Slice(items)) => Ok(items),
        Some(other) => Err(wrong(name, "slice", other)),
    }
}

fn strings(v: &Value, name: &str) -> Result<Vec<String>, String> {
    items(v, name)?
        .iter()
        .map(|s| match s {
            Value::String(s) => Ok(s.clone()),
            other => Err(wrong(name, "[]string", other)),
        })
        .collect()
}

fn is_struct(v: &Value, name: &str) -> Result<(), String> {
    match v {
        Value::Struct(_) => Ok(()),
        other => Err(wrong(name, "struct", other)),
    }
}

// ---- skel.CmdArgs ----

pub fn cmd_args_to_value(a: &CmdArgs) -> Value {
    Value::Struct(vec![
        ("ContainerID".into(), Value::String(a.container_id.clone())),
        ("Netns".into(), Value::String(a.netns.clone())),
        ("IfName".into(), Value::String(a.if_name.clone())),
        ("Args".into(), Value::String(a.args.clone())),
        ("Path".into(), Value::String(a.path.clone())),
        ("StdinData".into(), Value::Bytes(a.stdin_data.clone())),
    ])
}

pub fn cmd_args_from_value(v: &Value) -> Result<CmdArgs, String> {
    is_struct(v, "CmdArgs")?;
    // A string in the Go versions that have it (CNI_NETNS_OVERRIDE as
    // given); read as the skel reads the variable.
    let netns_override = match v.field("NetnsOverride") {
        None => false,
        Some(Value::String(s)) => matches!(s.to_ascii_lowercase().as_str(), "1" | "true"),
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(wrong("NetnsOverride", "string", other)),
    };
    Ok(CmdArgs {
        container_id: string(v, "ContainerID")?,
        netns: string(v, "Netns")?,
        if_name: string(v, "IfName")?,
        args: string(v, "Args")?,
        path: string(v, "Path")?,
        netns_override,
        stdin_data: bytes(v, "StdinData")?,
    })
}

// ---- types100.Result ----

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn ip_net_to_value(n: &IpNetwork) -> Value {
    let mask = ip_bytes(n.mask());
    Value::Struct(vec![
        ("IP".into(), Value::Bytes(ip_bytes(n.ip()))),
        ("Mask".into(), Value::Bytes(mask)),
    ])
}

/// A `net.IP` as Go reads one: 4 bytes, or 16 (an IPv4 in IPv6 form is
/// IPv4); empty is no address.
fn ip_from_bytes(b: &[u8], name: &str) -> Result<Option<IpAddr>, String> {
    match b.len() {
        0 => Ok(None),
        4 => Ok(Some(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])))),
        16 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(b);
            let v6 = Ipv6Addr::from(o);
            Ok(Some(match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            }))
        }
        n => Err(format!("field {name}: an IP of {n} bytes")),
    }
}

/// A `net.IPNet`: the mask must be a prefix of the address's family (a
/// 16-byte mask with an IPv4 address uses its last 4 bytes, as Go does).
fn ip_net_from_value(v: &Value, name: &str) -> Result<IpNetwork, String> {
    is_struct(v, name)?;
    let Some(ip) = ip_from_bytes(&bytes(v, "IP")?, name)? else {
        return Err(format!("field {name}: no IP"));
    };
    let mask = bytes(v, "Mask")?;
    let mask = match (ip, mask.len()) {
        (IpAddr::V4(_), 16) => &mask[12..],
        (IpAddr::V4(_), 4) | (IpAddr::V6(_), 16) => &mask[..],
        (_, n) => return Err(format!("field {name}: a mask of {n} bytes for {ip}")),
    };
    let ones: u32 = mask.iter().map(|b| b.count_ones()).sum();
    let canonical = mask.iter().enumerate().all(|(i, b)| {
        let want_ones = ones.saturating_sub(8 * i as u32).min(8);
        *b == (0xffu16 << (8 - want_ones)) as u8
    });
    if !canonical {
        return Err(format!("field {name}: mask {mask:02x?} is not a prefix"));
    }
    IpNetwork::new(ip, ones as u8).map_err(|e| format!("field {name}: {e}"))
}

pub fn result_to_value(r: &CniResult) -> Value {
    let interfaces = r
        .interfaces
        .iter()
        .map(|i| {
            Value::Struct(vec![
                ("Name".into(), Value::String(i.name.clone())),
                ("Mac".into(), Value::String(i.mac.clone())),
                ("Mtu".into(), Value::Int(i64::from(i.mtu))),
                ("Sandbox".into(), Value::String(i.sandbox.clone())),
                ("SocketPath".into(), Value::String(i.socket_path.clone())),
                ("PciID".into(), Value::String(i.pci_id.clone())),
            ])
        })
        .collect();
    let ips = r
        .ips
        .iter()
        .map(|ip| {
            let mut f = Vec::new();
            if let Some(i) = ip.interface {
                f.push(("Interface".into(), Value::Int(i as i64)));
            }
            f.push(("Address".into(), ip_net_to_value(&ip.address)));
            if let Some(gw) = ip.gateway {
                f.push(("Gateway".into(), Value::Bytes(ip_bytes(gw))));
            }
            Value::Struct(f)
        })
        .collect();
    let routes = r
        .routes
        .iter()
        .map(|rt| {
            let mut f = vec![("Dst".into(), ip_net_to_value(&rt.dst))];
            if let Some(gw) = rt.gw {
                f.push(("GW".into(), Value::Bytes(ip_bytes(gw))));
            }
            f.push(("MTU".into(), Value::Int(i64::from(rt.mtu))));
            f.push(("AdvMSS".into(), Value::Int(i64::from(rt.adv_mss))));
            f.push(("Priority".into(), Value::Int(i64::from(rt.priority))));
            if let Some(t) = rt.table {
                f.push(("Table".into(), Value::Int(i64::from(t))));
            }
            if let Some(s) = rt.scope {
                f.push(("Scope".into(), Value::Int(i64::from(s))));
            }
            Value::Struct(f)
        })
        .collect();
    let list = |v: &[String]| Value::Slice(v.iter().cloned().map(Value::String).collect());
    let dns = Value::Struct(vec![
        ("Nameservers".into(), list(&r.dns.nameservers)),
        ("Domain".into(), Value::String(r.dns.domain.clone())),
        ("Search".into(), list(&r.dns.search)),
        ("Options".into(), list(&r.dns.options)),
    ]);
    Value::Struct(vec![
        ("CNIVersion".into(), Value::String(r.cni_version.clone())),
        ("Interfaces".into(), Value::Slice(interfaces)),
        ("IPs".into(), Value::Slice(ips)),
        ("Routes".into(), Value::Slice(routes)),
        ("DNS".into(), dns),
    ])
}

pub fn result_from_value(v: &Value) -> Result<CniResult, String> {
    is_struct(v, "Result")?;
    let mut interfaces = Vec::new();
    for i in items(v, "Interfaces")? {
        is_struct(i, "Interfaces")?;
        interfaces.push(Interface {
            name: string(i, "Name")?,
            mac: string(i, "Mac")?,
            mtu: int_as(i, "Mtu")?.unwrap_or(0),
            sandbox: string(i, "Sandbox")?,
            socket_path: string(i, "SocketPath")?,
            pci_id: string(i, "PciID")?,
        });
    }
    let mut ips = Vec::new();
    for ip in items(v, "IPs")? {
        is_struct(ip, "IPs")?;
        let address = match ip.field("Address") {
            Some(a) => ip_net_from_value(a, "Address")?,
            None => return Err("an IP config without an address".into()),
        };
        ips.push(IpConfig {
            interface: int_as(ip, "Interface")?,
            address,
            gateway: ip_from_bytes(&bytes(ip, "Gateway")?, "Gateway")?,
        });
    }
    let mut routes = Vec::new();
    for rt in items(v, "Routes")? {
        is_struct(rt, "Routes")?;
        let dst = match rt.field("Dst") {
            Some(d) => ip_net_from_value(d, "Dst")?,
            None => return Err("a route without a destination".into()),
        };
        let mut route = Route::new(dst, ip_from_bytes(&bytes(rt, "GW")?, "GW")?);
        route.mtu = int_as(rt, "MTU")?.unwrap_or(0);
        route.adv_mss = int_as(rt, "AdvMSS")?.unwrap_or(0);
        route.priority = int_as(rt, "Priority")?.unwrap_or(0);
        route.table = int_as(rt, "Table")?;
        route.scope = int_as(rt, "Scope")?;
        routes.push(route);
    }
    let dns = match v.field("DNS") {
        None => Dns::default(),
        Some(d) => {
            is_struct(d, "DNS")?;
            Dns {
                nameservers: strings(d, "Nameservers")?,
                domain: string(d, "Domain")?,
                search: strings(d, "Search")?,
                options: strings(d, "Options")?,
            }
        }
    };
    Ok(CniResult {
        cni_version: string(v, "CNIVersion")?,
        interfaces,
        ips,
        routes,
        dns,
    })
}
