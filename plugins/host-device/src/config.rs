//! The host-device network config (v1.9.1 keys) and which device it names.

use crate::sysfs::{DeviceId, Sysfs};
use cni_skel::{CmdArgs, CniError, Dns, ParseFor};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
struct RuntimeConfig {
    #[serde(default, rename = "deviceID")]
    device_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Raw {
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    hwaddr: Option<String>,
    #[serde(default)]
    kernelpath: Option<String>,
    #[serde(default, rename = "pciBusID")]
    pci_bus_id: Option<String>,
    /// Go's `DPDKMode` field has no JSON tag: its key is the field name,
    /// matched case-insensitively (`dpdkMode`, `dpdkmode` …).
    #[serde(default, rename = "DPDKMode")]
    dpdk_mode: Option<bool>,
    #[serde(default, rename = "runtimeConfig")]
    runtime_config: Option<RuntimeConfig>,
}

/// How the device is named, in the reference's order of precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// `device`: a netdev name.
    Name(String),
    /// `hwaddr`: the first link with this MAC.
    Mac(String),
    /// `kernelpath`: the netdev under `/sys/devices/...`.
    KernelPath(String),
    /// `pciBusID` (or a PCI `deviceID`).
    Pci(String),
    /// An auxiliary `deviceID`.
    Auxiliary(String),
}

/// A parsed host-device config.
#[derive(Debug, Clone)]
pub struct Conf {
    /// The device.
    pub selector: Selector,
    /// The PCI function (`pciBusID` or a PCI `deviceID`), whichever key
    /// names the device: its driver decides DPDK mode, as in the reference.
    pub pci: Option<String>,
    /// `DPDKMode`, which counts only without a PCI function.
    pub dpdk_mode: bool,
    /// `ipam.type` is set.
    pub ipam: bool,
    /// `dns`, which replaces IPAM's in the result.
    pub dns: Dns,
}

/// Parses the config on stdin and resolves `deviceID` against sysfs. DEL
/// ([`ParseFor`]), which finds the device by what ADD saved, goes on
/// without a `deviceID` that is gone and with a `kernelpath` outside
/// `/sys/devices/`.
pub fn load(args: &CmdArgs, sys: &Sysfs) -> Result<Conf, CniError> {
    load_config(&args.config, &args.conf, sys, ParseFor::of(args))
}

fn load_config(
    config: &serde_json::Value,
    common: &cni_skel::NetConf,
    sys: &Sysfs,
    mode: ParseFor,
) -> Result<Conf, CniError> {
    let raw: Raw = cni_skel::gojson::from_value(config)
        .map_err(|e| CniError::invalid_config(format!("failed to load netconf: {e}")))?;
    let set = |v: Option<String>| v.filter(|s| !s.is_empty());
    let mut pci = set(raw.pci_bus_id);
    let mut aux = None;
    if let Some(id) = set(raw.runtime_config.and_then(|r| r.device_id)) {
        match mode.or_else(
            sys.device_id(&id)
                .map(Some)
                .map_err(CniError::invalid_config),
            || None,
        )? {
            Some(DeviceId::Pci(p)) => pci = Some(p),
            Some(DeviceId::Auxiliary(a)) => aux = Some(a),
            None => {}
        }
    }
    let selector = if let Some(d) = set(raw.device) {
        Selector::Name(d)
    } else if let Some(m) = set(raw.hwaddr) {
        Selector::Mac(m)
    } else if let Some(k) = set(raw.kernelpath) {
        mode.check(if k.starts_with("/sys/devices/") {
            Ok(())
        } else {
            Err(CniError::invalid_config(format!(
                "kernel device path {k:?} must be absolute and begin with /sys/devices/"
            )))
        })?;
        Selector::KernelPath(k)
    } else if let Some(p) = pci.clone() {
        Selector::Pci(p)
    } else if let Some(a) = aux {
        Selector::Auxiliary(a)
    } else {
        // DEL never looks the device up (a `deviceID` whose VF is gone
        // leaves nothing here): it goes on with no name.
        mode.or_else(
            Err(CniError::invalid_config(
                r#"specify either "device", "hwaddr", "kernelpath" or "pciBusID""#,
            )),
            || Selector::Name(String::new()),
        )?
    };
    Ok(Conf {
        selector,
        pci,
        dpdk_mode: raw.dpdk_mode.unwrap_or(false),
        ipam: common.ipam_type().is_some(),
        dns: common.dns.clone().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str) -> Result<Conf, CniError> {
        let (config, common) = cni_skel::conf::parse_full(s.as_bytes())?;
        load_config(&config, &common, &Sysfs::default(), ParseFor::Use)
    }

    #[test]
    fn selectors_in_order() {
        let sel = |s: &str| load_str(s).unwrap().selector;
        assert_eq!(
            sel(r#"{"name":"n","device":"eth1","hwaddr":"02:00:00:00:00:01"}"#),
            Selector::Name("eth1".into())
        );
        assert_eq!(
            sel(r#"{"name":"n","hwaddr":"02:00:00:00:00:01","kernelpath":"/sys/devices/x"}"#),
            Selector::Mac("02:00:00:00:00:01".into())
        );
        assert_eq!(
            sel(r#"{"name":"n","kernelpath":"/sys/devices/x","pciBusID":"0000:01:00.0"}"#),
            Selector::KernelPath("/sys/devices/x".into())
        );
        assert_eq!(
            sel(r#"{"name":"n","PCIBUSID":"0000:01:00.0"}"#),
            Selector::Pci("0000:01:00.0".into())
        );
    }

    #[test]
    fn errors() {
        for (bad, want) in [
            (
                r#"{"name":"n"}"#,
                r#"specify either "device", "hwaddr", "kernelpath" or "pciBusID""#,
            ),
            (r#"{"name":"n","device":""}"#, r#"specify either"#),
            (
                r#"{"name":"n","kernelpath":"/tmp/x"}"#,
                r#"kernel device path "/tmp/x" must be absolute and begin with /sys/devices/"#,
            ),
            (r#"{"name":"n","device":5}"#, "failed to load netconf"),
            (
                r#"{"name":"n","runtimeConfig":{"deviceID":1}}"#,
                "failed to load netconf",
            ),
            (
                r#"{"name":"n","device":"x","runtimeConfig":{"deviceID":"nope"}}"#,
                "runtime config DeviceID nope not found or unsupported",
            ),
        ] {
            let e = load_str(bad).unwrap_err();
            assert!(e.msg.contains(want), "{bad}: {e:?}");
        }
    }

    #[test]
    fn dpdk_mode_is_go_field_name_in_any_case() {
        let conf = |s: &str| load_str(s).unwrap();
        for key in ["DPDKMode", "dpdkmode", "dpdkMode", "DpdkMode"] {
            let c = conf(&format!(r#"{{"name":"n","device":"eth1","{key}":true}}"#));
            assert!(c.dpdk_mode, "{key}");
            assert_eq!(c.pci, None);
        }
        for s in [
            r#"{"name":"n","device":"eth1"}"#,
            r#"{"name":"n","device":"eth1","DPDKMode":false}"#,
            r#"{"name":"n","device":"eth1","DPDKMode":null}"#,
        ] {
            assert!(!conf(s).dpdk_mode, "{s}");
        }
        // The PCI function is kept whichever key names the device: its
        // driver decides DPDK mode then, `DPDKMode` does not.
        let c = conf(r#"{"name":"n","device":"eth1","pciBusID":"0000:01:00.0","DPDKMode":true}"#);
        assert_eq!(c.selector, Selector::Name("eth1".into()));
        assert_eq!(c.pci.as_deref(), Some("0000:01:00.0"));
        // A key alone names no device; a non-boolean is refused as in Go.
        let e = load_str(r#"{"name":"n","DPDKMode":true}"#).unwrap_err();
        assert!(e.msg.contains("specify either"), "{e:?}");
        let e = load_str(r#"{"name":"n","device":"eth1","DPDKMode":"true"}"#).unwrap_err();
        assert!(e.msg.contains("failed to load netconf"), "{e:?}");
    }

    #[test]
    fn del_goes_on_without_refused_values() {
        let del = |s: &str| {
            let (config, common) = cni_skel::conf::parse_full(s.as_bytes()).unwrap();
            load_config(&config, &common, &Sysfs::default(), ParseFor::Del)
        };
        let c = del(r#"{"name":"n","kernelpath":"/tmp/x"}"#).unwrap();
        assert_eq!(c.selector, Selector::KernelPath("/tmp/x".into()));
        let c = del(r#"{"name":"n","runtimeConfig":{"deviceID":"pb-gone"}}"#).unwrap();
        assert_eq!((c.selector, c.pci), (Selector::Name(String::new()), None));
        assert!(load_str(r#"{"name":"n","runtimeConfig":{"deviceID":"pb-gone"}}"#).is_err());
        assert!(del(r#"{"name":"n","device":5}"#).is_err());
    }
}
