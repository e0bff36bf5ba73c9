//! `ipam.resolvConf`: a resolv.conf file turned into the result's `dns`,
//! as the reference's `dns.go` reads it.

use cni_skel::error::code;
use cni_skel::{CniError, Dns};

/// Parses resolv.conf text: `nameserver` (first field), `domain` (the last
/// one wins), `search` and `options` (all fields, appended). Lines starting
/// with `#` or `;` and lines with fewer than two fields are skipped.
pub fn parse(text: &str) -> Dns {
    let mut dns = Dns::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(key), Some(first)) = (fields.next(), fields.next()) else {
            continue;
        };
        match key {
            "nameserver" => dns.nameservers.push(first.to_string()),
            "domain" => dns.domain = first.to_string(),
            "search" => {
                dns.search.push(first.to_string());
                dns.search.extend(fields.map(str::to_string));
            }
            "options" => {
                dns.options.push(first.to_string());
                dns.options.extend(fields.map(str::to_string));
            }
            _ => {}
        }
    }
    dns
}

/// Reads and parses `path`; a read error fails the ADD (code 5).
pub fn parse_file(path: &str) -> Result<Dns, CniError> {
    let bytes = std::fs::read(path).map_err(|e| {
        CniError::new(
            code::IO_FAILURE,
            format!("failed to read resolvConf {path}: {e}"),
            format!("ipam.resolvConf: \"{path}\""),
        )
    })?;
    Ok(parse(&String::from_utf8_lossy(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_the_reference() {
        let dns = parse(
            "# comment\n; other comment\nnameserver 10.0.0.1\nnameserver  192.0.2.53 extra\n\
             domain a.example\n\tdomain b.example\nsearch x.example y.example\nsearch z.example\n\
             options ndots:2 edns0\noptions rotate\nnameserver\nsortlist 10.0.0.0\n",
        );
        assert_eq!(dns.nameservers, ["10.0.0.1", "192.0.2.53"]);
        assert_eq!(dns.domain, "b.example");
        assert_eq!(dns.search, ["x.example", "y.example", "z.example"]);
        assert_eq!(dns.options, ["ndots:2", "edns0", "rotate"]);
        assert!(parse("").is_empty());
    }

    #[test]
    fn missing_file_is_an_error() {
        let e = parse_file("/nonexistent/resolv.conf").unwrap_err();
        assert_eq!(e.code, 5);
        assert!(
            e.msg
                .starts_with("failed to read resolvConf /nonexistent/resolv.conf: "),
            "{}",
            e.msg
        );
        assert_eq!(e.details, "ipam.resolvConf: \"/nonexistent/resolv.conf\"");
    }
}
