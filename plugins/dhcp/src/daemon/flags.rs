//! `dhcp daemon` flags, parsed as Go's `flag` package does: `-x v`,
//! `-x=v`, `--x`, bool flags without a value, parsing stops at the first
//! non-flag or after `--`; errors print the same text and exit 2.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    pub pidfile: String,
    pub hostprefix: String,
    pub socketpath: String,
    pub broadcast: bool,
    pub timeout: Duration,
    pub resendmax: Duration,
    pub resendtimeout: Duration,
    /// Ours: where leases are stored (default: `dhcp-leases/` beside the
    /// socket).
    pub leasedir: String,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            pidfile: String::new(),
            hostprefix: String::new(),
            socketpath: String::new(),
            broadcast: false,
            timeout: Duration::from_secs(10),
            resendmax: Duration::from_secs(62),
            resendtimeout: Duration::from_secs(208),
            leasedir: String::new(),
        }
    }
}

pub const USAGE: &str = "Usage of daemon:
  -broadcast
    \tbroadcast DHCP leases (accepted; replies are always asked broadcast while unbound)
  -hostprefix string
    \toptional prefix to host root
  -leasedir string
    \tdirectory of the stored leases (default: dhcp-leases beside the socket)
  -pidfile string
    \toptional path to write daemon PID to
  -resendmax duration
    \toptional dhcp client resend max duration (default 1m2s)
  -resendtimeout duration
    \toptional dhcp client resend timeout duration (default 3m28s)
  -socketpath string
    \toptional dhcp server socketpath
  -timeout duration
    \toptional dhcp client timeout duration (default 10s)
";

/// Why parsing stopped: `Help` (exit 0 after the usage) or an error text
/// (printed with the usage, exit 2).
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    Help,
    Error(String),
}

pub fn parse(args: &[String]) -> Result<Flags, Stop> {
    let mut f = Flags::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a.len() < 2 || !a.starts_with('-') {
            break; // first non-flag: Go stops here
        }
        let body = a.strip_prefix("--").unwrap_or(&a[1..]);
        if a == "--" {
            break;
        }
        if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
            return Err(Stop::Error(format!("bad flag syntax: {a}")));
        }
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        if name == "broadcast" {
            f.broadcast = match inline.as_deref() {
                None => true,
                Some(v) => parse_bool(v).ok_or_else(|| {
                    Stop::Error(format!(
                        "invalid boolean value {v:?} for -broadcast: parse error"
                    ))
                })?,
            };
            continue;
        }
        if name == "h" || name == "help" {
            return Err(Stop::Help);
        }
        let known = [
            "pidfile",
            "hostprefix",
            "socketpath",
            "timeout",
            "resendmax",
            "resendtimeout",
            "leasedir",
        ];
        if !known.contains(&name) {
            return Err(Stop::Error(format!(
                "flag provided but not defined: -{name}"
            )));
        }
        let value = match inline {
            Some(v) => v,
            None => {
                let Some(v) = args.get(i) else {
                    return Err(Stop::Error(format!("flag needs an argument: -{name}")));
                };
                i += 1;
                v.clone()
            }
        };
        let dur = |v: &str| {
            go_duration(v).ok_or_else(|| {
                Stop::Error(format!("invalid value {v:?} for flag -{name}: parse error"))
            })
        };
        match name {
            "pidfile" => f.pidfile = value,
            "hostprefix" => f.hostprefix = value,
            "socketpath" => f.socketpath = value,
            "leasedir" => f.leasedir = value,
            "timeout" => f.timeout = dur(&value)?,
            "resendmax" => f.resendmax = dur(&value)?,
            _ => f.resendtimeout = dur(&value)?,
        }
    }
    Ok(f)
}

/// Go's `strconv.ParseBool`.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `time.ParseDuration` for non-negative values: `300ms`, `1.5h`,
/// `2h45m`, `0`.
pub fn go_duration(s: &str) -> Option<Duration> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() || num == "." {
            return None;
        }
        let n: f64 = num.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * scale;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn go_syntax() {
        let f = parse(&v(&[
            "-socketpath",
            "/tmp/x.sock",
            "--pidfile=/run/p",
            "-broadcast",
            "-timeout=1.5s",
            "--resendmax",
            "2m",
            "-resendtimeout=0",
        ]))
        .unwrap();
        assert_eq!(f.socketpath, "/tmp/x.sock");
        assert_eq!(f.pidfile, "/run/p");
        assert!(f.broadcast);
        assert_eq!(f.timeout, Duration::from_millis(1500));
        assert_eq!(f.resendmax, Duration::from_secs(120));
        assert_eq!(f.resendtimeout, Duration::ZERO);
        // Parsing stops at the first non-flag.
        let f = parse(&v(&["extra", "-socketpath", "x"])).unwrap();
        assert_eq!(f.socketpath, "");
        assert!(!parse(&v(&["-broadcast=false"])).unwrap().broadcast);
    }

    #[test]
    fn errors() {
        assert_eq!(
            parse(&v(&["-nope"])),
            Err(Stop::Error("flag provided but not defined: -nope".into()))
        );
        assert_eq!(
            parse(&v(&["-socketpath"])),
            Err(Stop::Error("flag needs an argument: -socketpath".into()))
        );
        assert_eq!(
            parse(&v(&["-timeout", "soon"])),
            Err(Stop::Error(
                "invalid value \"soon\" for flag -timeout: parse error".into()
            ))
        );
        assert_eq!(parse(&v(&["-h"])), Err(Stop::Help));
        assert!(parse(&v(&["---x"])).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(go_duration("10"), None);
        assert_eq!(go_duration("s"), None);
        assert_eq!(go_duration(""), None);
        assert_eq!(go_duration("-1s"), None);
    }
}
