//! Wall-clock seconds and their two printed forms: Go's `log` prefix
//! (`2006/01/02 15:04:05`) and RFC 3339 (`2026-11-27T19:40:00Z`) for the
//! times inside log lines (lease expiry). No date crate: the tree has
//! none, and UTC from epoch seconds is one civil-from-days conversion.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the epoch (0 if the clock is before it).
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// UTC `(year, month, day, hour, minute, second)` of epoch seconds
/// (Howard Hinnant's civil-from-days, proleptic Gregorian calendar).
fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = (secs % 86_400) as u32;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem / 60 % 60, rem % 60)
}

/// Go's `log` prefix: UTC `YYYY/MM/DD hh:mm:ss`.
pub fn go_log_time(secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}/{mo:02}/{d:02} {h:02}:{mi:02}:{s:02}")
}

/// RFC 3339 in UTC: `YYYY-MM-DDThh:mm:ssZ`.
pub fn rfc3339(secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        // Each checked against `date -u -d @<secs> +%FT%TZ`.
        let cases = [
            (0, "1970-01-01T00:00:00Z"),
            (86_399, "1970-01-01T23:59:59Z"),
            (951_782_400, "2000-02-29T00:00:00Z"), // leap day of a /400 year
            (951_868_800, "2000-03-01T00:00:00Z"),
            (1_709_164_800, "2024-02-29T00:00:00Z"),
            (1_735_689_599, "2024-12-31T23:59:59Z"),
            (1_795_482_000, "2026-11-24T01:00:00Z"),
            (1_795_808_400, "2026-11-27T19:40:00Z"),
            (4_107_542_400, "2100-03-01T00:00:00Z"), // 2100 is no leap year
            (4_294_967_295, "2106-02-07T06:28:15Z"),
        ];
        for (secs, text) in cases {
            assert_eq!(rfc3339(secs), text, "{secs}");
        }
        let _ = rfc3339(u64::MAX); // no overflow
        assert_eq!(go_log_time(0), "1970/01/01 00:00:00");
        assert_eq!(go_log_time(1_795_482_000), "2026/11/24 01:00:00");
    }
}
