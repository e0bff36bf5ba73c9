//! The tuning config as the reference reads it (every key, the
//! `runtimeConfig`/`args.cni`/`CNI_ARGS` overrides, the allowlist), then
//! validated completely before anything is touched: sysctl keys must stay
//! under `/proc/sys/net`, the MAC must be a usable unicast address, numbers
//! must fit.

use cni_net::Mac;
use cni_skel::{CmdArgs, CniError, ParseFor};
use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

/// Where the saved values go when `dataDir` is not set (the reference's).
pub const DEFAULT_DATA_DIR: &str = "/run/cni/tuning";

/// The reference's sysctl allowlist: one regular expression a line.
pub const ALLOWLIST: &str = "/etc/cni/tuning/allowlist.conf";

type Sysctls = BTreeMap<String, String>;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    data_dir: Option<String>,
    #[serde(default)]
    sysctl: Option<Sysctls>,
    #[serde(default)]
    mac: Option<String>,
    #[serde(default)]
    promisc: Option<bool>,
    #[serde(default)]
    mtu: Option<i64>,
    #[serde(default, rename = "txQLen")]
    tx_qlen: Option<i64>,
    #[serde(default)]
    allmulti: Option<bool>,
    #[serde(default)]
    runtime_config: Option<RawRuntime>,
    #[serde(default)]
    args: Option<RawArgs>,
}

#[derive(Debug, Default, Deserialize)]
struct RawRuntime {
    #[serde(default)]
    mac: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawArgs {
    #[serde(default)]
    cni: Option<RawCniArgs>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCniArgs {
    #[serde(default)]
    sysctl: Option<Sysctls>,
    #[serde(default)]
    mac: Option<String>,
    #[serde(default)]
    promisc: Option<bool>,
    #[serde(default)]
    mtu: Option<i64>,
    #[serde(default)]
    allmulti: Option<bool>,
    #[serde(default, rename = "txQLen")]
    tx_qlen: Option<i64>,
}

/// The config after the overrides, as the reference's `parseConf` leaves
/// it: nothing validated beyond JSON types and `CNI_ARGS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Network name.
    pub network: String,
    /// Where the saved values go.
    pub data_dir: PathBuf,
    /// Sysctls as written (key → value), `args.cni.sysctl` merged in.
    pub sysctl: Sysctls,
    /// The MAC as configured; empty = leave it.
    pub mac: String,
    /// Turn promiscuous mode on (`false` leaves it, as in the reference).
    pub promisc: bool,
    /// 0 = leave it.
    pub mtu: i64,
    /// All-multicast on or off.
    pub allmulti: Option<bool>,
    /// Transmit queue length.
    pub txqlen: Option<i64>,
}

impl Parsed {
    /// True when ADD has nothing to change.
    pub fn is_empty(&self) -> bool {
        self.sysctl.is_empty()
            && self.mac.is_empty()
            && !self.promisc
            && self.mtu == 0
            && self.allmulti.is_none()
            && self.txqlen.is_none()
    }
}

/// One sysctl to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sysctl {
    /// The key as written in the config.
    pub key: String,
    /// Its slash form below `/proc/sys` (`net/ipv4/conf/eth0/rp_filter`).
    pub path: String,
    /// The value, written as given.
    pub value: String,
}

/// A validated config for ADD and CHECK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuning {
    /// Everything as parsed.
    pub parsed: Parsed,
    /// The sysctls, in key order.
    pub sysctls: Vec<Sysctl>,
    /// The MAC to set.
    pub mac: Option<Mac>,
    /// The MTU to set.
    pub mtu: Option<u32>,
    /// The queue length to set.
    pub txqlen: Option<u32>,
}

fn netconf_err(e: impl fmt::Display) -> CniError {
    CniError::invalid_config(format!("failed to load netconf: {e}"))
}

/// The reference's `parseConf`: the JSON, then `CNI_ARGS` `MAC`, then
/// `runtimeConfig.mac`, then `args.cni` (whose `sysctl` merges into the
/// top-level map, which may be absent: the reference panics there).
///
/// For DEL ([`ParseFor`]) a refused `dataDir` is the default one (nothing
/// of ours was saved under it: ADD refused it) and an unknown `CNI_ARGS`
/// key is ignored.
pub fn parse(args: &CmdArgs) -> Result<Parsed, CniError> {
    parse_config(
        &args.config,
        &args.args,
        args.conf.name(),
        ParseFor::of(args),
    )
}

fn parse_config(
    config: &serde_json::Value,
    cni_args: &str,
    network: &str,
    mode: ParseFor,
) -> Result<Parsed, CniError> {
    let raw: Raw = cni_skel::gojson::from_value(config).map_err(netconf_err)?;
    let data_dir = PathBuf::from(
        raw.data_dir
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| DEFAULT_DATA_DIR.to_string()),
    );
    // A relative one is relative to the directory the runtime runs the
    // plugin in, as in the reference; a NUL names no file.
    let data_dir = mode.or_else(
        if data_dir.as_os_str().as_encoded_bytes().contains(&0) {
            Err(CniError::invalid_config(format!(
                "dataDir {:?} contains a NUL byte",
                data_dir.display()
            )))
        } else {
            Ok(data_dir)
        },
        || PathBuf::from(DEFAULT_DATA_DIR),
    )?;
    let mut p = Parsed {
        network: network.to_string(),
        data_dir,
        sysctl: raw.sysctl.unwrap_or_default(),
        mac: raw.mac.unwrap_or_default(),
        promisc: raw.promisc.unwrap_or(false),
        mtu: raw.mtu.unwrap_or(0),
        allmulti: raw.allmulti,
        txqlen: raw.tx_qlen,
    };
    if !cni_args.is_empty() {
        let env = mode.or_else(
            cni_skel::args::CniArgs::load(cni_args, &["MAC"]).map(Some),
            || None,
        )?;
        if let Some(mac) = env
            .as_ref()
            .and_then(|e| e.get("MAC"))
            .filter(|m| !m.is_empty())
        {
            p.mac = mac.to_string();
        }
    }
    if let Some(mac) = raw.runtime_config.and_then(|r| r.mac)
        && !mac.is_empty()
    {
        p.mac = mac;
    }
    if let Some(a) = raw.args.and_then(|a| a.cni) {
        p.sysctl.extend(a.sysctl.unwrap_or_default());
        if let Some(v) = a.mac {
            p.mac = v;
        }
        if let Some(v) = a.promisc {
            p.promisc = v;
        }
        if let Some(v) = a.mtu {
            p.mtu = v;
        }
        if a.allmulti.is_some() {
            p.allmulti = a.allmulti;
        }
        if a.tx_qlen.is_some() {
            p.txqlen = a.tx_qlen;
        }
    }
    Ok(p)
}

/// Parses and validates for ADD (`allowlist` = the allowlist's text, if
/// the file exists) and CHECK (no allowlist, as in the reference).
pub fn load(args: &CmdArgs, allowlist: Option<&str>) -> Result<Tuning, CniError> {
    check_duplicate_sysctls(&args.stdin)?;
    let parsed = parse(args)?;
    if let Some(text) = allowlist {
        check_allowlist(&parsed.sysctl, text)?;
    }
    validate(parsed, &args.ifname)
}

/// Reads the allowlist file; `None` when there is none.
pub fn read_allowlist() -> Result<Option<String>, CniError> {
    match std::fs::read_to_string(ALLOWLIST) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CniError::internal(format!("read {ALLOWLIST}: {e}"))),
    }
}

fn validate(parsed: Parsed, ifname: &str) -> Result<Tuning, CniError> {
    let sysctls = parsed
        .sysctl
        .iter()
        .map(|(key, value)| {
            Ok(Sysctl {
                key: key.clone(),
                path: sysctl_path(key, ifname)?,
                value: value.clone(),
            })
        })
        .collect::<Result<Vec<_>, CniError>>()?;
    let mac = match parsed.mac.as_str() {
        "" => None,
        text => Some(parse_unicast_mac(text)?),
    };
    let mtu = match parsed.mtu {
        0 => None,
        m => Some(
            u32::try_from(m)
                .ok()
                .filter(|m| *m <= i32::MAX as u32)
                .ok_or_else(|| {
                    CniError::invalid_config(format!(
                        "invalid mtu {m}: must be 0 (leave it) or a positive number"
                    ))
                })?,
        ),
    };
    let txqlen = match parsed.txqlen {
        None => None,
        Some(q) => Some(u32::try_from(q).map_err(|_| {
            CniError::invalid_config(format!(
                "invalid txQLen {q}: must be between 0 and {}",
                u32::MAX
            ))
        })?),
    };
    Ok(Tuning {
        parsed,
        sysctls,
        mac,
        mtu,
        txqlen,
    })
}

/// A key's file below `/proc/sys`, as the reference derives it: every `.`
/// becomes `/` (so a key can also be written with slashes), then the first
/// `IFNAME` becomes the interface name. The path must stay below
/// `/proc/sys/net`: leading slashes are dropped (the reference joins the
/// key onto `/proc/sys`), and an empty, `.` or `..` component is refused
/// (`net.ipv4..x` is what `..` becomes), as is anything outside `net/`.
pub fn sysctl_path(key: &str, ifname: &str) -> Result<String, CniError> {
    let slashed = key.replace('.', "/").replacen("IFNAME", ifname, 1);
    let invalid = || CniError::invalid_config(format!("invalid net sysctl key: {slashed:?}"));
    let rel = slashed.trim_start_matches('/');
    if rel.contains('\0') || rel.contains('\n') {
        return Err(invalid());
    }
    cni_net::sysctl::path(rel).map_err(|_| invalid())?;
    Ok(rel.to_string())
}

/// `net.ParseMAC`'s forms: `aa:bb:cc:dd:ee:ff`, `aa-bb-…`, `aabb.ccdd.eeff`,
/// of 6, 8 or 20 bytes. `None` when malformed.
pub fn parse_go_mac(s: &str) -> Option<Vec<u8>> {
    if s.len() < 14 {
        return None;
    }
    let bytes = s.as_bytes();
    let hex = |pair: &[u8]| {
        std::str::from_utf8(pair)
            .ok()
            .filter(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
            .and_then(|p| u8::from_str_radix(p, 16).ok())
    };
    let sep = bytes[2];
    let out: Vec<u8> = if sep == b':' || sep == b'-' {
        if !(s.len() + 1).is_multiple_of(3) {
            return None;
        }
        let n = (s.len() + 1) / 3;
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            let at = 3 * i;
            if i + 1 < n && bytes[at + 2] != sep {
                return None;
            }
            v.push(hex(&bytes[at..at + 2])?);
        }
        v
    } else if bytes[4] == b'.' {
        if !(s.len() + 1).is_multiple_of(5) {
            return None;
        }
        let n = 2 * (s.len() + 1) / 5;
        let mut v = Vec::with_capacity(n);
        for i in (0..n).step_by(2) {
            let at = 5 * (i / 2);
            if i + 2 < n && bytes[at + 4] != b'.' {
                return None;
            }
            v.push(hex(&bytes[at..at + 2])?);
            v.push(hex(&bytes[at + 2..at + 4])?);
        }
        v
    } else {
        return None;
    };
    matches!(out.len(), 6 | 8 | 20).then_some(out)
}

/// A MAC to set on an Ethernet-like link: Go's forms, 6 bytes, not
/// multicast (the kernel would refuse it after the sysctls were written)
/// and not all zeros.
pub fn parse_unicast_mac(text: &str) -> Result<Mac, CniError> {
    let err =
        |why: String| CniError::invalid_config(format!("invalid args {text} for MAC addr: {why}"));
    let bytes =
        parse_go_mac(text).ok_or_else(|| err(format!("address {text}: invalid MAC address")))?;
    let mac: [u8; 6] = bytes.as_slice().try_into().map_err(|_| {
        err(format!(
            "address {text}: only 6-byte (Ethernet) addresses can be set"
        ))
    })?;
    if mac[0] & 1 == 1 {
        return Err(err(format!("{text} is a multicast address")));
    }
    if mac == [0; 6] {
        return Err(err(format!("{text} is the all-zero address")));
    }
    Ok(Mac(mac))
}

/// The reference refuses a `sysctl` object with a key written twice
/// (`duplicated sysctl keys are not allowed`); a JSON parser that keeps
/// the last value would hide it, so the raw text is walked.
pub fn check_duplicate_sysctls(stdin: &[u8]) -> Result<(), CniError> {
    struct Top;
    impl<'de> Deserialize<'de> for Top {
        fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Top, D::Error> {
            d.deserialize_any(TopVisitor)
        }
    }
    struct TopVisitor;
    impl<'de> Visitor<'de> for TopVisitor {
        type Value = Top;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a network config object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Top, A::Error> {
            // One set for every `sysctl` key spelling, as the reference's
            // global map. Ordered: a hash set's keys would cost a
            // getrandom(2) call, for a handful of keys.
            let mut seen = BTreeSet::new();
            while let Some(sysctl) = m.next_key_seed(IsSysctl)? {
                if sysctl {
                    m.next_value_seed(Keys(&mut seen))?;
                } else {
                    m.next_value::<IgnoredAny>()?;
                }
            }
            Ok(Top)
        }
    }
    /// Whether a top-level key is a spelling of `sysctl`, read without a
    /// copy of the key (the parser hands over the text, unescaped).
    struct IsSysctl;
    impl<'de> de::DeserializeSeed<'de> for IsSysctl {
        type Value = bool;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
            d.deserialize_str(self)
        }
    }
    impl<'de> Visitor<'de> for IsSysctl {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a key")
        }
        fn visit_str<E>(self, k: &str) -> Result<bool, E> {
            Ok(k.eq_ignore_ascii_case("sysctl"))
        }
    }
    struct Keys<'a>(&'a mut BTreeSet<String>);
    impl<'de> de::DeserializeSeed<'de> for Keys<'_> {
        type Value = ();
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a sysctl map")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            while let Some(k) = m.next_key::<String>()? {
                if !self.0.insert(k) {
                    return Err(de::Error::custom("duplicated sysctl keys are not allowed"));
                }
                m.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
        // Other types are reported by the typed parse that follows.
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
            while s.next_element::<IgnoredAny>()?.is_some() {}
            Ok(())
        }
    }
    match serde_json::from_slice::<Top>(stdin) {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().starts_with("duplicated sysctl keys") => Err(
            CniError::invalid_config("duplicated sysctl keys are not allowed"),
        ),
        // Malformed JSON is reported by the parse that follows.
        Err(_) => Ok(()),
    }
}

/// Every key (as written) must match one of the allowlist's expressions,
/// unanchored as Go's `regexp.MatchString`.
pub fn check_allowlist(sysctl: &Sysctls, text: &str) -> Result<(), CniError> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let res = lines
        .iter()
        .map(|l| {
            crate::regex::Regex::new(l)
                .map_err(|e| CniError::invalid_config(format!("allowlist {ALLOWLIST}: {l:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for key in sysctl.keys() {
        if !res.iter().any(|re| re.is_match(key)) {
            return Err(CniError::invalid_config(format!(
                "Sysctl {key} is not allowed. Only the following sysctls are allowed: [{}]",
                lines.join(" ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str, cni_args: &str) -> Result<Parsed, CniError> {
        parse_as(s, cni_args, ParseFor::Use)
    }

    /// As the skel hands it over: the text parsed once.
    fn parse_as(s: &str, cni_args: &str, mode: ParseFor) -> Result<Parsed, CniError> {
        parse_config(&serde_json::from_str(s).unwrap(), cni_args, "n", mode)
    }

    #[test]
    fn defaults_and_overrides() {
        let p = parse_str(r#"{"name":"n","type":"tuning"}"#, "").unwrap();
        assert!(p.is_empty());
        assert_eq!(p.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        let p = parse_str(
            r#"{"dataDir":"/d","sysctl":{"a":"1","b":"2"},"mac":"02:00:00:00:00:01","promisc":true,"mtu":1400,"txQLen":10,"allmulti":false}"#,
            "",
        )
        .unwrap();
        assert_eq!(p.data_dir, PathBuf::from("/d"));
        assert_eq!(
            (p.mac.as_str(), p.promisc, p.mtu, p.txqlen, p.allmulti),
            ("02:00:00:00:00:01", true, 1400, Some(10), Some(false))
        );
        // MAC: args.cni > runtimeConfig > CNI_ARGS > top level.
        let base = r#""mac":"02:00:00:00:00:01""#;
        let p = parse_str(&format!("{{{base}}}"), "MAC=02:00:00:00:00:02").unwrap();
        assert_eq!(p.mac, "02:00:00:00:00:02");
        let p = parse_str(
            &format!(r#"{{{base},"runtimeConfig":{{"mac":"02:00:00:00:00:03"}}}}"#),
            "MAC=02:00:00:00:00:02",
        )
        .unwrap();
        assert_eq!(p.mac, "02:00:00:00:00:03");
        let p = parse_str(
            &format!(
                r#"{{{base},"runtimeConfig":{{"mac":"02:00:00:00:00:03"}},"args":{{"cni":{{"mac":"02:00:00:00:00:04","mtu":9000,"promisc":true,"allmulti":true,"txQLen":5,"sysctl":{{"b":"3","c":"4"}}}}}}}}"#
            ),
            "MAC=02:00:00:00:00:02",
        )
        .unwrap();
        assert_eq!(
            (p.mac.as_str(), p.mtu, p.promisc, p.allmulti, p.txqlen),
            ("02:00:00:00:00:04", 9000, true, Some(true), Some(5))
        );
        // args.cni.sysctl without a top-level sysctl (a panic in the reference).
        let p = parse_str(r#"{"args":{"cni":{"sysctl":{"x":"1"}}}}"#, "").unwrap();
        assert_eq!(p.sysctl.get("x").map(String::as_str), Some("1"));
        let p = parse_str(
            r#"{"sysctl":{"a":"1","b":"2"},"args":{"cni":{"sysctl":{"b":"3"}}}}"#,
            "",
        )
        .unwrap();
        assert_eq!(p.sysctl.get("b").map(String::as_str), Some("3"));
        assert_eq!(p.sysctl.len(), 2);
        // Keys match case-insensitively, as in Go.
        let p = parse_str(r#"{"MTU":1300,"TxQlen":7,"Sysctl":{"k":"v"}}"#, "").unwrap();
        assert_eq!((p.mtu, p.txqlen, p.sysctl.len()), (1300, Some(7), 1));
    }

    #[test]
    fn bad_types_and_args() {
        for bad in [
            r#"{"mtu":"1500"}"#,
            r#"{"mtu":1500.5}"#,
            r#"{"sysctl":{"a":1}}"#,
            r#"{"sysctl":[]}"#,
            r#"{"promisc":"yes"}"#,
            r#"{"allmulti":1}"#,
            r#"{"txQLen":"5"}"#,
            r#"{"mac":5}"#,
            r#"{"args":{"cni":{"mtu":"x"}}}"#,
            r#"{"runtimeConfig":{"mac":7}}"#,
        ] {
            let e = parse_str(bad, "").unwrap_err();
            assert!(
                e.msg.starts_with("failed to load netconf: "),
                "{bad}: {e:?}"
            );
        }
        // Relative to the runtime's directory, as in the reference.
        for rel in ["run/x", "../x", "x"] {
            let p = parse_str(&format!(r#"{{"dataDir":"{rel}"}}"#), "").unwrap();
            assert_eq!(p.data_dir, PathBuf::from(rel));
        }
        let e = parse_str(r#"{"dataDir":"/a\u0000b"}"#, "").unwrap_err();
        assert!(e.msg.contains("NUL"), "{e:?}");
        let e = parse_str("{}", "FOO=bar").unwrap_err();
        assert_eq!(e.msg, r#"ARGS: unknown args ["FOO=bar"]"#);
        assert!(parse_str("{}", "FOO=bar;IgnoreUnknown=1").is_ok());
        assert!(parse_str("{}", "a=b=c").is_err());
    }

    #[test]
    fn sysctl_keys() {
        for (key, want) in [
            (
                "net.ipv4.conf.IFNAME.rp_filter",
                "net/ipv4/conf/eth0.5/rp_filter",
            ),
            (
                "net/ipv4/conf/IFNAME/rp_filter",
                "net/ipv4/conf/eth0.5/rp_filter",
            ),
            ("net.core.somaxconn", "net/core/somaxconn"),
            ("/net/ipv4/ip_forward", "net/ipv4/ip_forward"),
            ("net.IFNAME.IFNAME", "net/eth0.5/IFNAME"),
        ] {
            assert_eq!(sysctl_path(key, "eth0.5").unwrap(), want, "{key}");
        }
        for bad in [
            "kernel.hostname",
            "net",
            "net.",
            "net..ipv4",
            "net/../kernel/hostname",
            "net.ipv4.conf.../../kernel",
            "/proc/sys/net/ipv4/ip_forward",
            "/etc/passwd",
            "",
            "netfilter.x",
            "net/ipv4/\u{0}",
        ] {
            let e = sysctl_path(bad, "eth0").unwrap_err();
            assert!(
                e.msg.starts_with("invalid net sysctl key: "),
                "{bad}: {e:?}"
            );
        }
        assert_eq!(
            sysctl_path("kernel.x", "e").unwrap_err().msg,
            r#"invalid net sysctl key: "kernel/x""#
        );
    }

    #[test]
    fn go_mac_forms() {
        let six = Some(vec![0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(parse_go_mac("02:11:22:33:44:55"), six);
        assert_eq!(parse_go_mac("02-11-22-33-44-55"), six);
        assert_eq!(parse_go_mac("0211.2233.4455"), six);
        assert_eq!(
            parse_go_mac("02:11:22:33:44:55:66:77").map(|v| v.len()),
            Some(8)
        );
        assert_eq!(
            parse_go_mac("00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01")
                .map(|v| v.len()),
            Some(20)
        );
        for bad in [
            "",
            "02:11:22:33:44",
            "02:11:22:33:44:5",
            "02:11:22:33:44:555",
            "02:11-22:33:44:55",
            "zz:11:22:33:44:55",
            "02:11:22:33:44:55:66",
            "0211.2233.445",
            "+2:11:22:33:44:55",
        ] {
            assert_eq!(parse_go_mac(bad), None, "{bad}");
        }
        assert_eq!(
            parse_unicast_mac("C2:11:22:33:44:55").unwrap().to_string(),
            "c2:11:22:33:44:55"
        );
        for (bad, why) in [
            ("01:00:5e:00:00:01", "multicast"),
            ("ff:ff:ff:ff:ff:ff", "multicast"),
            ("00:00:00:00:00:00", "all-zero"),
            ("02:11:22:33:44:55:66:77", "only 6-byte"),
            ("nope", "invalid MAC address"),
        ] {
            let e = parse_unicast_mac(bad).unwrap_err();
            assert!(
                e.msg
                    .starts_with(&format!("invalid args {bad} for MAC addr: "))
                    && e.msg.contains(why),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn numbers_are_range_checked() {
        let v = |s: &str| validate(parse_str(s, "").unwrap(), "eth0");
        assert_eq!(v(r#"{"mtu":9000,"txQLen":0}"#).unwrap().mtu, Some(9000));
        assert_eq!(v(r#"{"txQLen":0}"#).unwrap().txqlen, Some(0));
        assert!(
            v(r#"{"mtu":-1}"#)
                .unwrap_err()
                .msg
                .contains("invalid mtu -1")
        );
        assert!(v(r#"{"mtu":4294967296}"#).is_err());
        assert!(
            v(r#"{"txQLen":-1}"#)
                .unwrap_err()
                .msg
                .contains("invalid txQLen")
        );
        assert!(v(r#"{"txQLen":4294967296}"#).is_err());
    }

    #[test]
    fn duplicate_sysctl_keys() {
        assert!(check_duplicate_sysctls(br#"{"sysctl":{"a":"1","b":"2"}}"#).is_ok());
        assert!(check_duplicate_sysctls(br#"{"sysctl":null,"x":[1,{"a":2}]}"#).is_ok());
        for dup in [
            r#"{"sysctl":{"a":"1","a":"2"}}"#,
            r#"{"sysctl":{"a":"1"},"Sysctl":{"a":"2"}}"#,
            // A key written with escapes is the key it spells.
            r#"{"sysctl":{"a":"1"},"\u0053ysctl":{"\u0061":"2"}}"#,
        ] {
            assert_eq!(
                check_duplicate_sysctls(dup.as_bytes()).unwrap_err().msg,
                "duplicated sysctl keys are not allowed"
            );
        }
        // Dot and slash spellings are different keys here, as in the reference.
        assert!(check_duplicate_sysctls(br#"{"sysctl":{"a.b":"1","a/b":"2"}}"#).is_ok());
        // Garbage is left to the real parse.
        assert!(check_duplicate_sysctls(b"{").is_ok());
        assert!(check_duplicate_sysctls(br#"{"sysctl":5}"#).is_ok());
    }

    #[test]
    fn allowlist() {
        let s: Sysctls = [(
            "net.ipv4.conf.IFNAME.rp_filter".to_string(),
            "1".to_string(),
        )]
        .into_iter()
        .collect();
        assert!(check_allowlist(&s, "^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]*$\n").is_ok());
        // Unanchored, as Go's MatchString.
        assert!(check_allowlist(&s, "\n  rp_filter  \n\n").is_ok());
        let e = check_allowlist(&s, "^net\\.core\\..*$\nsomaxconn").unwrap_err();
        assert_eq!(
            e.msg,
            "Sysctl net.ipv4.conf.IFNAME.rp_filter is not allowed. Only the following sysctls are allowed: [^net\\.core\\..*$ somaxconn]"
        );
        assert!(check_allowlist(&s, "(").is_err());
        assert!(check_allowlist(&Sysctls::new(), "").is_ok());
    }

    #[test]
    fn del_goes_on_without_refused_values() {
        let del = |s: &str, a: &str| parse_as(s, a, ParseFor::Del);
        let p = del(r#"{"dataDir":"/a\u0000b"}"#, "FOO=1").unwrap();
        assert_eq!(p.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert!(parse_str(r#"{"dataDir":"/a\u0000b"}"#, "").is_err());
        assert!(parse_str("{}", "FOO=1").is_err());
        assert!(del(r#"{"mtu":"1500"}"#, "").is_err());
    }
}
