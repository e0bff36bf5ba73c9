//! The sbr network config: `table`, `gateways` and `addSourceHints`.

use cni_skel::{CmdArgs, CniError, ParseFor};
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The keys sbr reads itself, as sent.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    table: Option<i64>,
    #[serde(default)]
    gateways: Option<Vec<String>>,
    #[serde(default)]
    add_source_hints: Option<bool>,
}

/// The keys sbr reads itself.
#[derive(Debug, Default, PartialEq)]
pub struct Conf {
    /// Only add rules to this table (its routes are someone else's);
    /// 0 = let the kernel choose; `None` = a table per address, chosen
    /// by ADD.
    pub table: Option<u32>,
    /// `gateways` as written; ADD without `table` checks them
    /// ([`Conf::gateways`]), as the reference does, so a bad one fails
    /// only that ADD and never DEL.
    pub gateways: Vec<String>,
    /// Put the subnet routes back into the main table with the address as
    /// their source, so traffic without a chosen source still finds them.
    pub add_source_hints: bool,
}

/// Whether a rule to table `t` is one of `table` mode's: any table
/// without `table`, or with table 0 (the kernel chose it), as the
/// reference's DEL lists them (its filter takes 0 as "every table").
pub fn names(table: Option<u32>, t: u32) -> bool {
    table.is_none_or(|want| want == 0 || want == t)
}

/// The gateways of `gateways`: at most one per family.
#[derive(Debug, Default, PartialEq)]
pub struct Gateways {
    /// Replaces the prevResult's gateway of every IPv4 address.
    pub v4: Option<Ipv4Addr>,
    /// Replaces the prevResult's gateway of every IPv6 address.
    pub v6: Option<Ipv6Addr>,
}

impl Gateways {
    /// The gateway given for IPv4 (`v4`) or IPv6.
    pub fn of(&self, v4: bool) -> Option<IpAddr> {
        match v4 {
            true => self.v4.map(IpAddr::V4),
            false => self.v6.map(IpAddr::V6),
        }
    }
}

fn parse_error(e: serde_json::Error) -> CniError {
    CniError::invalid_config(format!("failed to parse network configuration: {e}"))
}

impl Conf {
    /// The config, `table` checked (for DEL, a refused `table` is the
    /// table whose rules DEL removes, as in the reference: [`ParseFor`]).
    pub fn parse(args: &CmdArgs) -> Result<Conf, CniError> {
        Conf::from_config(&args.config, ParseFor::of(args))
    }

    /// [`Conf::parse`] of a config's text, as the skel hands it over
    /// (parsed once), for tests.
    #[cfg(test)]
    fn from_slice(text: &[u8], mode: ParseFor) -> Result<Conf, CniError> {
        Conf::from_config(&serde_json::from_slice(text).map_err(parse_error)?, mode)
    }

    fn from_config(config: &serde_json::Value, mode: ParseFor) -> Result<Conf, CniError> {
        let c: Raw = cni_skel::gojson::from_value(config).map_err(parse_error)?;
        let table = match c.table {
            None => None,
            // As the reference's netlink sends it: 0 or less is no table
            // (the kernel then gives an IPv4 rule a new empty table of its
            // choosing and refuses an IPv6 one), 253-255 the kernel's
            // tables (rules only: `table` mode never writes routes).
            Some(t) if t <= 0 => Some(0),
            Some(t) => mode.or_else(
                u32::try_from(t).map(Some).map_err(|_| {
                    CniError::invalid_config(format!(
                        "table {t} is not a routing table id (at most 4294967295)"
                    ))
                }),
                // Its rules are those of any table (as for 0): the
                // reference truncates such an id to 32 bits.
                || Some(0),
            )?,
        };
        Ok(Conf {
            table,
            gateways: c.gateways.unwrap_or_default(),
            add_source_hints: c.add_source_hints.unwrap_or(false),
        })
    }

    /// `gateways` checked as the reference checks them, with its texts: at
    /// most two, each an address (Go's `net.ParseIP`: no prefix, no zone;
    /// an IPv4-mapped IPv6 address is IPv4), at most one per family.
    pub fn gateways(&self) -> Result<Gateways, CniError> {
        if self.gateways.len() > 2 {
            return Err(CniError::invalid_config(
                "gateways list cannot contain more than 2 entries (one IPv4, one IPv6)",
            ));
        }
        let mut g = Gateways::default();
        for s in &self.gateways {
            let ip: IpAddr = s.parse().map_err(|_| {
                CniError::invalid_config(format!("invalid static gateway IP address: {s}"))
            })?;
            let ip = match ip {
                IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
                v4 => v4,
            };
            let twice = |family: &str, first: &dyn std::fmt::Display| {
                CniError::invalid_config(format!(
                    "gateways list contains multiple {family} addresses: {first} and {s}"
                ))
            };
            match ip {
                IpAddr::V4(a) => match g.v4 {
                    Some(first) => return Err(twice("IPv4", &first)),
                    None => g.v4 = Some(a),
                },
                IpAddr::V6(a) => match g.v6 {
                    Some(first) => return Err(twice("IPv6", &first)),
                    None => g.v6 = Some(a),
                },
            }
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(json: &str) -> Result<Conf, CniError> {
        Conf::from_slice(json.as_bytes(), ParseFor::Use)
    }

    fn gateways(list: &[&str]) -> Result<Gateways, String> {
        let c = Conf {
            gateways: list.iter().map(|s| s.to_string()).collect(),
            ..Conf::default()
        };
        c.gateways().map_err(|e| e.msg)
    }

    #[test]
    fn keys_parse_as_go_reads_them() {
        let c = parse(
            r#"{"name":"n","type":"sbr","gateways":["10.160.0.1","fd60::1"],"addSourceHints":true}"#,
        )
        .unwrap();
        assert_eq!(c.gateways, ["10.160.0.1", "fd60::1"]);
        assert!(c.add_source_hints);
        assert_eq!(c.table, None);
        // Go's decoder: any case, and null is absent.
        let c = parse(r#"{"GATEWAYS":["10.160.0.1"],"addsourcehints":true}"#).unwrap();
        assert_eq!(c.gateways, ["10.160.0.1"]);
        assert!(c.add_source_hints);
        let c = parse(r#"{"gateways":null,"addSourceHints":null,"table":null}"#).unwrap();
        assert_eq!(c, Conf::default());
        // Wrong types fail the whole config, as json.Unmarshal does.
        for bad in [
            r#"{"gateways":"10.160.0.1"}"#,
            r#"{"gateways":[1]}"#,
            r#"{"addSourceHints":"true"}"#,
            r#"{"addSourceHints":1}"#,
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.code, 7, "{bad}");
            assert!(
                e.msg.starts_with("failed to parse network configuration"),
                "{bad}: {}",
                e.msg
            );
        }
    }

    #[test]
    fn gateways_one_per_family() {
        assert_eq!(gateways(&[]), Ok(Gateways::default()));
        assert_eq!(
            gateways(&["fd60::1", "10.160.0.1"]),
            Ok(Gateways {
                v4: Some(Ipv4Addr::new(10, 160, 0, 1)),
                v6: Some("fd60::1".parse().unwrap()),
            })
        );
        // Go's To4() takes an IPv4-mapped address as IPv4.
        assert_eq!(
            gateways(&["::ffff:10.160.0.1"]),
            Ok(Gateways {
                v4: Some(Ipv4Addr::new(10, 160, 0, 1)),
                v6: None,
            })
        );
        assert_eq!(
            gateways(&["10.160.0.1", "fd60::1", "10.160.0.2"]).unwrap_err(),
            "gateways list cannot contain more than 2 entries (one IPv4, one IPv6)"
        );
        assert_eq!(
            gateways(&["10.160.0.1", "10.160.0.254"]).unwrap_err(),
            "gateways list contains multiple IPv4 addresses: 10.160.0.1 and 10.160.0.254"
        );
        assert_eq!(
            gateways(&["10.160.0.1", "::ffff:10.160.0.9"]).unwrap_err(),
            "gateways list contains multiple IPv4 addresses: 10.160.0.1 and ::ffff:10.160.0.9"
        );
        assert_eq!(
            gateways(&["fd60::1", "fd60::2"]).unwrap_err(),
            "gateways list contains multiple IPv6 addresses: fd60::1 and fd60::2"
        );
        for bad in [
            "",
            "10.160.0.1/24",
            "fe80::1%eth0",
            "gateway",
            "10.160.0.300",
            "[fd60::1]",
        ] {
            assert_eq!(
                gateways(&[bad]).unwrap_err(),
                format!("invalid static gateway IP address: {bad}")
            );
        }
    }

    #[test]
    fn the_gateway_of_a_family() {
        let g = gateways(&["10.160.0.254"]).unwrap();
        assert_eq!(g.of(true), "10.160.0.254".parse().ok());
        assert_eq!(g.of(false), None);
    }

    #[test]
    fn tables_as_the_reference_sends_them() {
        let t = |j: &str, mode| Conf::from_slice(j.as_bytes(), mode).map(|c| c.table);
        for mode in [ParseFor::Use, ParseFor::Del] {
            assert_eq!(t(r#"{"table":0}"#, mode).unwrap(), Some(0));
            assert_eq!(t(r#"{"table":-5}"#, mode).unwrap(), Some(0));
            assert_eq!(t(r#"{"table":254}"#, mode).unwrap(), Some(254));
            assert_eq!(t(r#"{"table":100}"#, mode).unwrap(), Some(100));
            assert_eq!(t(r#"{"table":4294967295}"#, mode).unwrap(), Some(u32::MAX));
            assert!(t(r#"{"table":"100"}"#, mode).is_err());
        }
        assert!(t(r#"{"table":4294967296}"#, ParseFor::Use).is_err());
        assert_eq!(
            t(r#"{"table":4294967296}"#, ParseFor::Del).unwrap(),
            Some(0)
        );
    }

    #[test]
    fn table_zero_names_every_table() {
        assert!(names(None, 7) && names(Some(0), 7) && names(Some(7), 7));
        assert!(!names(Some(8), 7));
    }
}
