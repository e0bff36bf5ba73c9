//! The bridge plugin's configuration: every key typed and range-checked
//! before anything is touched.

use cni_fw::Backend;
use cni_net::{MAX_IFNAME_LEN, Mac};
use cni_skel::{CmdArgs, CniError, ParseFor};
use serde::Deserialize;
use serde_json::Value;

/// The bridge used when `bridge` is not given.
pub const DEFAULT_BRIDGE: &str = "cni0";

/// One `vlanTrunk` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trunk {
    /// First VLAN of a range.
    #[serde(default, rename = "minID")]
    pub min_id: Option<i64>,
    /// Last VLAN of a range.
    #[serde(default, rename = "maxID")]
    pub max_id: Option<i64>,
    /// A single VLAN.
    #[serde(default)]
    pub id: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct MacHolder {
    #[serde(default)]
    mac: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ArgsSection {
    #[serde(default)]
    cni: Option<MacHolder>,
}

/// The config as written; `null` counts as absent, as with Go's decoder.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    bridge: Option<String>,
    #[serde(default, rename = "isGateway")]
    is_gw: Option<bool>,
    #[serde(default, rename = "isDefaultGateway")]
    is_default_gw: Option<bool>,
    #[serde(default)]
    force_address: Option<bool>,
    #[serde(default)]
    ip_masq: Option<bool>,
    #[serde(default)]
    ip_masq_backend: Option<String>,
    #[serde(default)]
    mtu: Option<i64>,
    #[serde(default)]
    hairpin_mode: Option<bool>,
    #[serde(default)]
    promisc_mode: Option<bool>,
    #[serde(default)]
    vlan: Option<i64>,
    #[serde(default)]
    vlan_trunk: Option<Vec<Trunk>>,
    #[serde(default)]
    preserve_default_vlan: Option<bool>,
    #[serde(default, rename = "macspoofchk")]
    mac_spoof_chk: Option<bool>,
    #[serde(default, rename = "enabledad")]
    enable_dad: Option<bool>,
    #[serde(default)]
    disable_container_interface: Option<bool>,
    #[serde(default)]
    port_isolation: Option<bool>,
    #[serde(default)]
    args: Option<ArgsSection>,
    #[serde(default)]
    runtime_config: Option<MacHolder>,
}

/// The validated configuration.
#[derive(Debug, Clone, Default)]
pub struct Conf {
    /// Network name.
    pub network: String,
    /// Bridge name.
    pub bridge: String,
    /// Put the gateway address on the bridge.
    pub is_gw: bool,
    /// Add default routes via the gateway (implies `is_gw`).
    pub is_default_gw: bool,
    /// Replace a conflicting bridge address.
    pub force_address: bool,
    /// Masquerade container traffic.
    pub ip_masq: bool,
    /// `ipMasqBackend`, unresolved.
    pub ip_masq_backend: Option<Backend>,
    /// MTU of the bridge (at creation) and the veth pair.
    pub mtu: Option<u32>,
    /// Hairpin on the host port.
    pub hairpin: bool,
    /// Promiscuous bridge.
    pub promisc: bool,
    /// Access VLAN (0 = none).
    pub vlan: u16,
    /// Whether `vlanTrunk` was given (even empty): turns on VLAN filtering.
    pub trunk_given: bool,
    /// Trunk VLANs, sorted and unique.
    pub trunk: Vec<u16>,
    /// Keep the port's existing VLANs.
    pub preserve_default_vlan: bool,
    /// nftables MAC spoof check.
    pub mac_spoof_chk: bool,
    /// IPv6 DAD in the container.
    pub enable_dad: bool,
    /// Leave the container interface down (L2 only).
    pub disable_container_interface: bool,
    /// Isolated host port.
    pub port_isolation: bool,
    /// The container MAC (runtimeConfig > args > CNI_ARGS).
    pub mac: Option<Mac>,
    /// An IPAM plugin is configured (L3 mode).
    pub layer3: bool,
}

impl Conf {
    /// Turns on VLAN filtering on a new bridge.
    pub fn vlan_filtering(&self) -> bool {
        self.vlan != 0 || self.trunk_given
    }
}

fn err(msg: impl Into<String>) -> CniError {
    CniError::internal(msg)
}

/// The reference's `collectVlanTrunk`, with its messages.
pub fn collect_trunk(trunk: &[Trunk]) -> Result<Vec<u16>, CniError> {
    let valid = |v: i64| (1..=4094).contains(&v);
    let mut out = Vec::new();
    for t in trunk {
        match (t.min_id, t.max_id) {
            (Some(min), Some(max)) => {
                if !valid(min) {
                    return Err(err("incorrect trunk minID parameter"));
                }
                if !valid(max) {
                    return Err(err("incorrect trunk maxID parameter"));
                }
                if max < min {
                    return Err(err("minID is greater than maxID in trunk parameter"));
                }
                out.extend((min..=max).filter_map(|v| u16::try_from(v).ok()));
            }
            (None, Some(_)) => {
                return Err(err(
                    "minID and maxID should be configured simultaneously, minID is missing",
                ));
            }
            (Some(_), None) => {
                return Err(err(
                    "minID and maxID should be configured simultaneously, maxID is missing",
                ));
            }
            (None, None) => {}
        }
        if let Some(id) = t.id {
            if !valid(id) {
                return Err(err("incorrect trunk id parameter"));
            }
            out.extend(u16::try_from(id).ok());
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// A bridge name the kernel will take.
fn check_ifname(key: &str, name: &str) -> Result<(), CniError> {
    let bad = name.is_empty()
        || name.len() > MAX_IFNAME_LEN
        || name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace());
    if bad {
        return Err(err(format!(
            "invalid {key} {name:?}: must be 1 to {MAX_IFNAME_LEN} bytes without '/', ':' or whitespace"
        )));
    }
    Ok(())
}

fn parse_mac(source: &str, s: &str) -> Result<Mac, CniError> {
    let mac: Mac = s
        .parse()
        .map_err(|_| err(format!("invalid MAC address {s:?} in {source}")))?;
    if mac.0[0] & 1 == 1 {
        return Err(err(format!(
            "invalid MAC address {s:?} in {source}: a multicast address cannot be assigned"
        )));
    }
    if mac.0 == [0; 6] {
        return Err(err(format!(
            "invalid MAC address {s:?} in {source}: the zero address cannot be assigned"
        )));
    }
    Ok(mac)
}

/// Parses and validates the config of one invocation (leniently for DEL:
/// [`ParseFor`]).
pub fn load(args: &CmdArgs) -> Result<Conf, CniError> {
    load_value_for(
        &args.config,
        &args.args,
        args.conf.ipam_type().is_some(),
        ParseFor::of(args),
    )
    .map(|mut c| {
        c.network = args.conf.name().to_string();
        c
    })
}

/// [`load`] on an already parsed config and raw `CNI_ARGS`.
pub fn load_value(v: Value, cni_args: &str, layer3: bool) -> Result<Conf, CniError> {
    load_value_for(&v, cni_args, layer3, ParseFor::Use)
}

/// [`load_value`] for `mode`: for DEL, which reads only the IPAM type,
/// `ipMasq` and `macspoofchk`, every refused value gets its default.
pub fn load_value_for(
    v: &Value,
    cni_args: &str,
    layer3: bool,
    mode: ParseFor,
) -> Result<Conf, CniError> {
    let raw: Raw =
        cni_skel::gojson::from_value(v).map_err(|e| err(format!("failed to load netconf: {e}")))?;
    let bridge = raw.bridge.unwrap_or_else(|| DEFAULT_BRIDGE.to_string());
    mode.check(check_ifname("bridge name", &bridge))?;
    let vlan = raw.vlan.unwrap_or(0);
    let vlan = mode.or_else(
        if (0..=4094).contains(&vlan) {
            Ok(vlan)
        } else {
            Err(err(format!(
                "invalid VLAN ID {vlan} (must be between 0 and 4094)"
            )))
        },
        || 0,
    )?;
    let trunk = mode.or_else(
        collect_trunk(raw.vlan_trunk.as_deref().unwrap_or_default()),
        Vec::new,
    )?;
    let mtu = mode.or_else(cni_net::veth_mtu(raw.mtu.unwrap_or(0)).map_err(err), || {
        None
    })?;
    let ip_masq_backend = mode.or_else(Backend::parse(raw.ip_masq_backend.as_deref()), || None)?;
    let mac = mode.or_else(
        container_mac(cni_args, raw.args, raw.runtime_config),
        || None,
    )?;
    let is_default_gw = raw.is_default_gw.unwrap_or(false);
    let conf = Conf {
        network: String::new(),
        bridge,
        is_gw: raw.is_gw.unwrap_or(false) || is_default_gw,
        is_default_gw,
        force_address: raw.force_address.unwrap_or(false),
        ip_masq: raw.ip_masq.unwrap_or(false),
        ip_masq_backend,
        mtu,
        hairpin: raw.hairpin_mode.unwrap_or(false),
        promisc: raw.promisc_mode.unwrap_or(false),
        vlan: u16::try_from(vlan).unwrap_or(0),
        trunk_given: raw.vlan_trunk.is_some(),
        trunk,
        preserve_default_vlan: raw.preserve_default_vlan.unwrap_or(false),
        mac_spoof_chk: raw.mac_spoof_chk.unwrap_or(false),
        enable_dad: raw.enable_dad.unwrap_or(false),
        disable_container_interface: raw.disable_container_interface.unwrap_or(false),
        port_isolation: raw.port_isolation.unwrap_or(false),
        mac,
        layer3,
    };
    mode.check(check_combinations(&conf))?;
    Ok(conf)
}

/// The container MAC: `runtimeConfig.mac` over `args.cni.mac` over
/// `CNI_ARGS` `MAC`.
fn container_mac(
    cni_args: &str,
    args: Option<ArgsSection>,
    runtime_config: Option<MacHolder>,
) -> Result<Option<Mac>, CniError> {
    let mut mac = None;
    if !cni_args.is_empty() {
        let parsed = cni_skel::args::CniArgs::load(cni_args, &["MAC"])?;
        if let Some(m) = parsed.get("MAC").filter(|m| !m.is_empty()) {
            mac = Some(parse_mac("CNI_ARGS", m)?);
        }
    }
    if let Some(m) = args
        .and_then(|a| a.cni)
        .and_then(|c| c.mac)
        .filter(|m| !m.is_empty())
    {
        mac = Some(parse_mac("args.cni.mac", &m)?);
    }
    if let Some(m) = runtime_config.and_then(|r| r.mac).filter(|m| !m.is_empty()) {
        mac = Some(parse_mac("runtimeConfig.mac", &m)?);
    }
    Ok(mac)
}

/// Keys that cannot go together.
fn check_combinations(conf: &Conf) -> Result<(), CniError> {
    if conf.layer3 && conf.disable_container_interface {
        return Err(err(
            "cannot use IPAM when DisableContainerInterface flag is set",
        ));
    }
    if conf.vlan != 0 && conf.is_gw && conf.layer3 {
        // The VLAN gateway interface is named `<bridge>.<vlan>`.
        let gw_name = format!("{}.{}", conf.bridge, conf.vlan);
        if gw_name.len() > MAX_IFNAME_LEN {
            return Err(err(format!(
                "bridge name {:?} too long for the VLAN gateway interface {gw_name:?} (at most {MAX_IFNAME_LEN} bytes)",
                conf.bridge
            )));
        }
    }
    if conf.hairpin && conf.promisc {
        return Err(err(
            "cannot set hairpin mode and promiscuous mode at the same time",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load(v: Value) -> Result<Conf, CniError> {
        load_value(v, "", true)
    }

    fn msg(v: Value) -> String {
        load(v).unwrap_err().msg
    }

    #[test]
    fn defaults() {
        let c = load(json!({"name": "n"})).unwrap();
        assert_eq!(c.bridge, "cni0");
        assert!(!c.is_gw && !c.ip_masq && !c.hairpin && !c.vlan_filtering());
        assert_eq!(c.mtu, None);
        assert_eq!(c.mac, None);
        assert!(!c.preserve_default_vlan);
        // null is "not given", as with Go's decoder.
        let c = load(json!({"isGateway": null, "mtu": null, "bridge": null})).unwrap();
        assert_eq!(c.bridge, "cni0");
    }

    #[test]
    fn default_gateway_implies_gateway() {
        let c = load(json!({"isDefaultGateway": true})).unwrap();
        assert!(c.is_gw && c.is_default_gw);
    }

    #[test]
    fn types_are_checked() {
        for bad in [
            json!({"isGateway": "yes"}),
            json!({"mtu": "1500"}),
            json!({"mtu": 1.5}),
            json!({"vlan": "1"}),
            json!({"vlanTrunk": {"id": 1}}),
            json!({"vlanTrunk": [{"id": "1"}]}),
            json!({"bridge": 5}),
            json!({"hairpinMode": 1}),
            json!({"runtimeConfig": {"mac": 5}}),
            json!({"args": {"cni": {"mac": []}}}),
            json!({"ipMasqBackend": true}),
        ] {
            let e = load(bad.clone()).unwrap_err();
            assert!(
                e.msg.starts_with("failed to load netconf"),
                "{bad}: {}",
                e.msg
            );
        }
    }

    #[test]
    fn ranges_are_checked() {
        assert_eq!(
            msg(json!({"vlan": 5000})),
            "invalid VLAN ID 5000 (must be between 0 and 4094)"
        );
        assert_eq!(
            msg(json!({"vlan": -1})),
            "invalid VLAN ID -1 (must be between 0 and 4094)"
        );
        assert!(msg(json!({"mtu": 4294968796u64})).starts_with("invalid MTU 4294968796"));
        assert!(msg(json!({"mtu": 65536})).starts_with("invalid MTU 65536"));
        // 0 or less: the kernel default, as in the reference.
        assert_eq!(load(json!({"mtu": -1})).unwrap().mtu, None);
        assert!(msg(json!({"mtu": 67})).starts_with("invalid MTU 67"));
        assert_eq!(load(json!({"mtu": 9000})).unwrap().mtu, Some(9000));
        assert!(
            msg(json!({"bridge": "a-very-long-bridge-name"})).starts_with("invalid bridge name")
        );
        assert!(msg(json!({"bridge": ""})).starts_with("invalid bridge name"));
        assert!(msg(json!({"bridge": "a/b"})).starts_with("invalid bridge name"));
        assert_eq!(
            load(json!({"bridge": "123456789012345"})).unwrap().bridge,
            "123456789012345"
        );
        assert_eq!(
            msg(json!({"ipMasqBackend": "pf"})),
            "unknown ipmasq backend \"pf\""
        );
    }

    #[test]
    fn trunks() {
        let c = load(json!({"vlanTrunk": [{"minID": 10, "maxID": 12}, {"id": 11}, {"id": 3}]}))
            .unwrap();
        assert_eq!(c.trunk, vec![3, 10, 11, 12]);
        assert!(c.vlan_filtering());
        let c = load(json!({"vlanTrunk": []})).unwrap();
        assert!(c.trunk.is_empty() && c.vlan_filtering());
        for (t, m) in [
            (
                json!([{"minID": 0, "maxID": 5}]),
                "incorrect trunk minID parameter",
            ),
            (
                json!([{"minID": 1, "maxID": 4095}]),
                "incorrect trunk maxID parameter",
            ),
            (
                json!([{"minID": 5, "maxID": 4}]),
                "minID is greater than maxID in trunk parameter",
            ),
            (
                json!([{"maxID": 4}]),
                "minID and maxID should be configured simultaneously, minID is missing",
            ),
            (
                json!([{"minID": 4}]),
                "minID and maxID should be configured simultaneously, maxID is missing",
            ),
            (json!([{"id": 0}]), "incorrect trunk id parameter"),
            (json!([{"id": 4095}]), "incorrect trunk id parameter"),
        ] {
            assert_eq!(msg(json!({"vlanTrunk": t})), m);
        }
        assert_eq!(load(json!({"vlan": 7})).unwrap().vlan, 7);
    }

    #[test]
    fn vlan_gateway_name_must_fit() {
        let v = json!({"bridge": "123456789012", "vlan": 100, "isGateway": true});
        assert!(msg(v).contains("too long for the VLAN gateway interface"));
        let v = json!({"bridge": "12345678901", "vlan": 100, "isGateway": true});
        assert!(load(v).is_ok());
        let v = json!({"bridge": "123456789012", "vlan": 100});
        assert!(load(v).is_ok());
    }

    #[test]
    fn exclusive_flags() {
        assert_eq!(
            msg(json!({"hairpinMode": true, "promiscMode": true})),
            "cannot set hairpin mode and promiscuous mode at the same time"
        );
        assert_eq!(
            msg(json!({"disableContainerInterface": true})),
            "cannot use IPAM when DisableContainerInterface flag is set"
        );
        assert!(
            load_value(json!({"disableContainerInterface": true}), "", false)
                .unwrap()
                .disable_container_interface
        );
    }

    #[test]
    fn mac_precedence() {
        let a = "MAC=02:00:00:00:00:01";
        let m = |s: &str| Some(s.parse::<Mac>().unwrap());
        assert_eq!(
            load_value(json!({}), a, true).unwrap().mac,
            m("02:00:00:00:00:01")
        );
        let v = json!({"args": {"cni": {"mac": "02:00:00:00:00:02"}}});
        assert_eq!(load_value(v, a, true).unwrap().mac, m("02:00:00:00:00:02"));
        let v = json!({"args": {"cni": {"mac": "02:00:00:00:00:02"}}, "runtimeConfig": {"mac": "02:00:00:00:00:03"}});
        assert_eq!(load_value(v, a, true).unwrap().mac, m("02:00:00:00:00:03"));
        // Unknown CNI_ARGS keys need IgnoreUnknown, as in the reference.
        assert!(load_value(json!({}), "FOO=1", true).is_err());
        assert_eq!(
            load_value(
                json!({}),
                "FOO=1;IgnoreUnknown=1;MAC=02:00:00:00:00:04",
                true
            )
            .unwrap()
            .mac,
            m("02:00:00:00:00:04")
        );
        for bad in [
            "zz:00:00:00:00:01",
            "02:00:00:00:00",
            "01:00:5e:00:00:01",
            "00:00:00:00:00:00",
        ] {
            let v = json!({"runtimeConfig": {"mac": bad}});
            assert!(
                load_value(v, "", true)
                    .unwrap_err()
                    .msg
                    .starts_with("invalid MAC address"),
                "{bad}"
            );
        }
    }

    #[test]
    fn del_goes_on_without_refused_values() {
        for v in [
            json!({"mtu": 70000}),
            json!({"vlan": 5000}),
            json!({"vlanTrunk": [{"id": 5000}]}),
            json!({"bridge": "a/b"}),
            json!({"hairpinMode": true, "promiscMode": true}),
            json!({"runtimeConfig": {"mac": "zz"}}),
            json!({"ipMasqBackend": "bogus", "ipMasq": true}),
            json!({"disableContainerInterface": true}),
        ] {
            assert!(load(v.clone()).is_err(), "{v}");
            let c = load_value_for(&v, "FOO=1", true, ParseFor::Del).unwrap();
            assert!(c.mtu.is_none() && c.mac.is_none() && c.vlan == 0, "{v}");
            assert_eq!(c.ip_masq, v.get("ipMasq").is_some(), "{v}");
        }
        assert!(load_value_for(&json!({"mtu": "1"}), "", true, ParseFor::Del).is_err());
    }
}
