//! The bandwidth config: the four limits, from the top level or from
//! `runtimeConfig.bandwidth`, checked and turned into kernel parameters
//! before anything is touched.

use crate::shaping::{self, Tbf};
use cni_skel::gojson::field;
use cni_skel::{CmdArgs, CniError, ParseFor};
use serde_json::{Map, Value};

/// The four keys, as the reference spells them (matched ignoring case).
const KEYS: [&str; 4] = ["ingressRate", "ingressBurst", "egressRate", "egressBurst"];

/// One direction's limit as configured, in bits per second and bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limit {
    /// Rate, bits per second.
    pub rate: u64,
    /// Burst, bits.
    pub burst: u64,
}

/// A validated config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conf {
    /// The network name (part of the ifb's name).
    pub network: String,
    /// Traffic into the container: a tbf on the host veth.
    pub ingress: Option<Tbf>,
    /// Traffic out of the container: a tbf on the ifb.
    pub egress: Option<Tbf>,
}

impl Conf {
    /// No limit in either direction: the plugin passes the result through.
    pub fn is_unlimited(&self) -> bool {
        self.ingress.is_none() && self.egress.is_none()
    }
}

/// Parses and validates the config on stdin. For DEL, which needs only
/// the network name (the ifb's), a limit ADD refuses is logged and taken
/// as none ([`ParseFor`]); the reference's DEL fails on it.
pub fn load(args: &CmdArgs) -> Result<Conf, CniError> {
    // The skel's config is an object (it refuses any other); `{}` stands
    // for the `Null` of arguments a test built by hand.
    let empty = Map::new();
    let top = args.config.as_object().unwrap_or(&empty);
    parse(top, args.conf.name(), ParseFor::of(args))
}

/// The object the four limits are read from, and the prefix that names
/// its keys in errors.
type Source<'a> = (&'a Map<String, Value>, &'static str);

/// Where the limits come from.
fn source(top: &Map<String, Value>) -> Result<Option<Source<'_>>, CniError> {
    // The reference embeds the four fields in its config struct through a
    // pointer: any of them at the top level, even null or 0, allocates it,
    // and then runtimeConfig is not looked at.
    if top
        .keys()
        .any(|k| KEYS.iter().any(|want| k.eq_ignore_ascii_case(want)))
    {
        return Ok(Some((top, "")));
    }
    let Some(rc) = field(top, "runtimeConfig") else {
        return Ok(None);
    };
    let Some(bw) = rc.as_object().and_then(|rc| field(rc, "bandwidth")) else {
        return Ok(None);
    };
    match bw {
        Value::Object(m) => Ok(Some((m, "runtimeConfig.bandwidth."))),
        other => Err(CniError::invalid_config(format!(
            "failed to parse network configuration: runtimeConfig.bandwidth must be an object, got {other}"
        ))),
    }
}

fn parse(top: &Map<String, Value>, network: &str, mode: ParseFor) -> Result<Conf, CniError> {
    let mut conf = Conf {
        network: network.to_string(),
        ingress: None,
        egress: None,
    };
    let Some((m, prefix)) = source(top)? else {
        return Ok(conf);
    };
    let num = |key: &str| -> Result<u64, CniError> {
        match field(m, key) {
            None => Ok(0),
            Some(v) => v.as_u64().ok_or_else(|| {
                CniError::invalid_config(format!(
                    "failed to parse network configuration: {prefix}{key} must be a whole number from 0 to {}, got {v}",
                    u64::MAX
                ))
            }),
        }
    };
    let ingress = Limit {
        rate: num("ingressRate")?,
        burst: num("ingressBurst")?,
    };
    let egress = Limit {
        rate: num("egressRate")?,
        burst: num("egressBurst")?,
    };
    conf.ingress = mode.or_else(direction(ingress, &format!("{prefix}ingress")), || None)?;
    conf.egress = mode.or_else(direction(egress, &format!("{prefix}egress")), || None)?;
    Ok(conf)
}

/// Checks one direction (keys `<dir>Rate`, `<dir>Burst`) and computes its
/// tbf; `None` when both are 0 (no limit that way).
fn direction(l: Limit, dir: &str) -> Result<Option<Tbf>, CniError> {
    let (rate, burst) = (format!("{dir}Rate"), format!("{dir}Burst"));
    let bad = |msg: String| Err(CniError::invalid_config(msg));
    match (l.rate, l.burst) {
        (0, 0) => return Ok(None),
        (r, 0) => {
            return bad(format!(
                "{rate} is {r} but {burst} is not set: if rate is set, burst must also be set"
            ));
        }
        (0, b) => {
            return bad(format!(
                "{burst} is {b} but {rate} is not set: if burst is set, rate must also be set"
            ));
        }
        _ => {}
    }
    if l.burst / 8 >= u64::from(u32::MAX) {
        return bad(format!(
            "{burst} is {}: burst cannot be more than 4GB (at most {} bits, the kernel counts bytes in 32 bits)",
            l.burst,
            shaping::MAX_BURST_BITS
        ));
    }
    if l.rate < 8 {
        return bad(format!(
            "{rate} is {}: the smallest rate the kernel can shape to is 8 bits (one byte) per second",
            l.rate
        ));
    }
    if l.burst < 8 {
        return bad(format!(
            "{burst} is {}: the smallest burst is 8 bits (one byte)",
            l.burst
        ));
    }
    match shaping::tbf(l.rate, l.burst) {
        Ok(t) => Ok(Some(t)),
        Err(shaping::TooBig::Limit(bytes)) => bad(format!(
            "{rate} {}: 25 ms at this rate ({bytes} bytes, the queue limit without the burst) do not fit the kernel's 32-bit limit",
            l.rate
        )),
        Err(shaping::TooBig::BurstBelowOneByte) => bad(format!(
            "{burst} {} is too small for {rate} {}: the kernel's token bucket would hold less than one byte",
            l.burst, l.rate
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Conf, CniError> {
        let top: Map<String, Value> = serde_json::from_str(s).unwrap();
        parse(&top, "net", ParseFor::Use)
    }

    fn rates(c: &Conf) -> (Option<u64>, Option<u64>) {
        (c.ingress.map(|t| t.rate), c.egress.map(|t| t.rate))
    }

    #[test]
    fn top_level_and_runtime_config() {
        let c =
            p(r#"{"ingressRate":8000,"ingressBurst":800,"egressRate":16000,"egressBurst":1600}"#)
                .unwrap();
        assert_eq!(rates(&c), (Some(1000), Some(2000)));
        // Keys match ignoring case, as Go's decoder does.
        let c = p(r#"{"IngressRate":8000,"INGRESSBURST":800}"#).unwrap();
        assert_eq!(rates(&c), (Some(1000), None));
        let c =
            p(r#"{"runtimeConfig":{"bandwidth":{"egressRate":8000,"egressBurst":80}}}"#).unwrap();
        assert_eq!(rates(&c), (None, Some(1000)));
        let c =
            p(r#"{"RuntimeConfig":{"Bandwidth":{"EgressRate":8000,"egressburst":80}}}"#).unwrap();
        assert_eq!(rates(&c), (None, Some(1000)));
    }

    #[test]
    fn top_level_wins_even_when_zero_or_null() {
        let rc = r#""runtimeConfig":{"bandwidth":{"ingressRate":8000,"ingressBurst":800}}"#;
        for top in [
            r#""egressRate":0"#,
            r#""ingressRate":null"#,
            r#""egressburst":0"#,
        ] {
            let c = p(&format!("{{{top},{rc}}}")).unwrap();
            assert!(c.is_unlimited(), "{top}");
        }
        let c = p(&format!(r#"{{"egressRate":8000,"egressBurst":8,{rc}}}"#)).unwrap();
        assert_eq!(rates(&c), (None, Some(1000)));
    }

    #[test]
    fn nothing_set() {
        for s in [
            "{}",
            r#"{"runtimeConfig":{}}"#,
            r#"{"runtimeConfig":{"bandwidth":null}}"#,
            r#"{"runtimeConfig":{"bandwidth":{}}}"#,
            r#"{"runtimeConfig":{"bandwidth":{"ingressRate":0,"ingressBurst":0}}}"#,
            r#"{"runtimeConfig":{"portMappings":[]}}"#,
        ] {
            assert!(p(s).unwrap().is_unlimited(), "{s}");
        }
    }

    #[test]
    fn kubernetes_defaults_are_accepted() {
        // containerd: burst = MaxUint32 bits; CRI-O: MaxUint32*8-1 bits.
        for burst in [u64::from(u32::MAX), u64::from(u32::MAX) * 8 - 1] {
            let c = p(&format!(r#"{{"runtimeConfig":{{"bandwidth":{{"ingressRate":1000000,"ingressBurst":{burst},"egressRate":1000000,"egressBurst":{burst}}}}}}}"#)).unwrap();
            assert_eq!(rates(&c), (Some(125_000), Some(125_000)));
        }
    }

    #[test]
    fn errors_name_the_key() {
        for (s, want) in [
            (
                r#"{"ingressRate":8000}"#,
                "ingressRate is 8000 but ingressBurst is not set: if rate is set, burst must also be set",
            ),
            (
                r#"{"egressBurst":8000}"#,
                "egressBurst is 8000 but egressRate is not set: if burst is set, rate must also be set",
            ),
            (
                r#"{"runtimeConfig":{"bandwidth":{"egressRate":1}}}"#,
                "runtimeConfig.bandwidth.egressRate is 1 but runtimeConfig.bandwidth.egressBurst",
            ),
            (
                r#"{"ingressRate":8000,"ingressBurst":34359738360}"#,
                "ingressBurst is 34359738360: burst cannot be more than 4GB",
            ),
            (
                r#"{"egressRate":7,"egressBurst":8}"#,
                "egressRate is 7: the smallest rate",
            ),
            (
                r#"{"egressRate":8,"egressBurst":7}"#,
                "egressBurst is 7: the smallest burst",
            ),
            (
                r#"{"ingressRate":-1,"ingressBurst":8}"#,
                "ingressRate must be a whole number from 0 to 18446744073709551615, got -1",
            ),
            (
                r#"{"ingressRate":1.5,"ingressBurst":8}"#,
                "ingressRate must be a whole number",
            ),
            (
                r#"{"ingressRate":"8000","ingressBurst":8}"#,
                "ingressRate must be a whole number",
            ),
            (
                r#"{"ingressRate":18446744073709551616,"ingressBurst":8}"#,
                "ingressRate must be a whole number",
            ),
            (
                r#"{"runtimeConfig":{"bandwidth":{"egressBurst":[]}}}"#,
                "runtimeConfig.bandwidth.egressBurst must be a whole number",
            ),
            (
                r#"{"runtimeConfig":{"bandwidth":7}}"#,
                "runtimeConfig.bandwidth must be an object",
            ),
            // 25 ms above ~1.37 Tbit/s overflow the 32-bit limit.
            (
                r#"{"ingressRate":18446744073709551615,"ingressBurst":800}"#,
                "ingressRate 18446744073709551615: 25 ms at this rate",
            ),
            (
                r#"{"egressRate":1400000000000,"egressBurst":8}"#,
                "egressRate 1400000000000: 25 ms at this rate",
            ),
            // 1 byte at 3 bytes/s: the kernel's bucket rounds down to 0 bytes.
            (
                r#"{"egressRate":24,"egressBurst":8}"#,
                "egressBurst 8 is too small for egressRate 24",
            ),
        ] {
            let e = p(s).unwrap_err();
            assert_eq!(e.code, 7, "{s}");
            assert!(e.msg.contains(want), "{s}: {}", e.msg);
        }
    }

    #[test]
    fn ingress_is_checked_before_egress() {
        let e = p(r#"{"ingressRate":8,"egressBurst":8}"#).unwrap_err();
        assert!(e.msg.starts_with("ingressRate"), "{}", e.msg);
    }

    #[test]
    fn del_goes_on_without_refused_limits() {
        let top: Map<String, Value> =
            serde_json::from_str(r#"{"ingressRate":100,"egressRate":8000,"egressBurst":80000}"#)
                .unwrap();
        assert!(parse(&top, "net", ParseFor::Use).is_err());
        let c = parse(&top, "net", ParseFor::Del).unwrap();
        assert!(c.ingress.is_none() && c.egress.is_some());
        let top: Map<String, Value> = serde_json::from_str(r#"{"ingressRate":-1}"#).unwrap();
        assert!(parse(&top, "net", ParseFor::Del).is_err());
    }
}
