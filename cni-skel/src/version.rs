//! Spec versions: the supported list, parsing and comparison.

use crate::error::{CniError, code};

/// Every spec version this library speaks, oldest first.
pub const ALL: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

/// Every version of [`ALL`] from `oldest` on: a plugin that needs what
/// came in `oldest` (chaining, prevResult) supports no earlier one.
/// `oldest` is one of [`ALL`].
pub fn since(oldest: &str) -> Vec<String> {
    ALL.iter()
        .skip_while(|v| **v != oldest)
        .map(|v| v.to_string())
        .collect()
}

/// The newest spec version; VERSION reports it as its own `cniVersion`.
pub const CURRENT: &str = "1.1.0";

/// A parsed `major.minor.patch` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// CHECK exists from 0.4.0 on.
    pub const CHECK: Version = Version(0, 4, 0);
    /// GC and STATUS exist from 1.1.0 on.
    pub const GC_STATUS: Version = Version(1, 1, 0);
    /// Several addresses per family and chaining exist from 0.3.0 on.
    pub const MULTI_IP: Version = Version(0, 3, 0);

    /// Parses a version the way the reference does: empty is 0.1.0, and up to
    /// three numeric parts (missing parts are 0).
    pub fn parse(s: &str) -> Result<Version, CniError> {
        if s.is_empty() {
            return Ok(Version(0, 1, 0));
        }
        let bad = || CniError::new(code::DECODING_FAILURE, format!("invalid version {s:?}"), "");
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() > 3 {
            return Err(bad());
        }
        let mut nums = [0u32; 3];
        for (slot, part) in nums.iter_mut().zip(&parts) {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            *slot = part.parse().map_err(|_| bad())?;
        }
        let [a, b, c] = nums;
        Ok(Version(a, b, c))
    }

    /// The result family a version belongs to.
    pub fn family(self) -> Family {
        if self < Version(0, 3, 0) {
            Family::V02
        } else if self < Version(1, 0, 0) {
            Family::V04
        } else {
            Family::V1
        }
    }
}

/// The result formats of the spec's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// 0.1.0 and 0.2.0: `ip4`/`ip6`.
    V02,
    /// 0.3.0, 0.3.1 and 0.4.0: `interfaces`/`ips` with `version`.
    V04,
    /// 1.0.0 and 1.1.0.
    V1,
}

impl Family {
    /// The versions whose results this family's parser accepts.
    pub fn versions(self) -> &'static [&'static str] {
        match self {
            Family::V02 => &["0.1.0", "0.2.0"],
            Family::V04 => &["0.3.0", "0.3.1", "0.4.0"],
            Family::V1 => &["1.0.0", "1.1.0"],
        }
    }
}

/// The error for a config version that is not exactly one of `supported`.
pub fn incompatible(config: &str, supported: &[String]) -> CniError {
    let list: Vec<String> = supported.iter().map(|v| format!("{v:?}")).collect();
    CniError::new(
        code::INCOMPATIBLE_VERSION,
        "incompatible CNI versions",
        format!("config is {config:?}, plugin supports [{}]", list.join(" ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_keeps_the_newer_versions() {
        assert_eq!(
            since("0.3.0"),
            ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]
        );
        assert_eq!(since("0.3.1"), ["0.3.1", "0.4.0", "1.0.0", "1.1.0"]);
        assert_eq!(since("0.1.0").len(), ALL.len());
    }

    #[test]
    fn parses_and_orders() {
        assert_eq!(Version::parse("").unwrap(), Version(0, 1, 0));
        assert_eq!(Version::parse("1.0").unwrap(), Version(1, 0, 0));
        assert!(Version::parse("0.3.1").unwrap() < Version::parse("0.4.0").unwrap());
        assert!(Version::parse("1.1.0").unwrap() >= Version::GC_STATUS);
        for bad in ["a.b.c", "1.2.3.4", "1..2", "-1", "1.x"] {
            assert_eq!(
                Version::parse(bad).unwrap_err().code,
                code::DECODING_FAILURE,
                "{bad}"
            );
        }
    }

    #[test]
    fn families() {
        assert_eq!(Version::parse("0.2.0").unwrap().family(), Family::V02);
        assert_eq!(Version::parse("0.3.0").unwrap().family(), Family::V04);
        assert_eq!(Version::parse("0.4.0").unwrap().family(), Family::V04);
        assert_eq!(Version::parse("1.1.0").unwrap().family(), Family::V1);
    }

    #[test]
    fn incompatible_lists_versions() {
        let e = incompatible("9.9.9", &["0.1.0".into(), "1.0.0".into()]);
        assert_eq!(e.code, 1);
        assert_eq!(
            e.details,
            r#"config is "9.9.9", plugin supports ["0.1.0" "1.0.0"]"#
        );
    }
}
