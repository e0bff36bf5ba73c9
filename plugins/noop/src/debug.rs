//! The debug-file protocol of the noop test plugin.
//!
//! Config keys: `debugFile` (path of the debug file) and `commandLog` (path
//! of a JSON array every call is appended to; the file must exist).
//! `CNI_ARGS` is parsed leniently as `K=V;K=V`; `DEBUG=<path>` there wins over
//! `debugFile`.
//!
//! The debug file is the JSON of [`Debug`]. The plugin reads it, writes back
//! `Command` and `CmdArgs` (what it was called with; `StdinData` in base64),
//! then answers as told:
//! - `ReportStderr` is written to stderr;
//! - `ReportError` makes it fail with `{code: ReportErrorCode or 999, msg}`;
//! - `ReportResult` `PASSTHROUGH` prints the `prevResult` converted to the
//!   config's version (compact JSON), `INJECT-DNS` the same with
//!   `dns.nameservers = ["1.2.3.4"]`, anything else is printed verbatim;
//! - `ExitWithCode` > 0 becomes the exit status (after printing).
//!
//! Without a debug path it prints `{}` and says so on stderr.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use cni_skel::error::code;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Output};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::Write;
use std::path::Path;

/// What the plugin claims without a debug file overriding it. The first
/// entry is deliberately bogus, as in the Go plugin.
pub const DEFAULT_VERSIONS: &[&str] = &[
    "0.-42.0", "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

/// The debug file: `Report*` steer the plugin, `Command`/`CmdArgs` record
/// the last call. Field names and order are the Go struct's.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Debug {
    /// What to print on success (or `PASSTHROUGH` / `INJECT-DNS`).
    pub report_result: String,
    /// When set, fail with this message.
    pub report_error: String,
    /// The code for `ReportError`; 0 means 999.
    pub report_error_code: u64,
    /// Written to stderr.
    pub report_stderr: String,
    /// The versions to claim; `null` means the defaults.
    pub report_version_support: Option<Vec<String>>,
    /// Exit status after printing, when > 0.
    pub exit_with_code: i64,
    /// The command of the last call.
    #[serde(skip_deserializing)]
    pub command: String,
    /// The arguments of the last call.
    #[serde(skip_deserializing)]
    pub cmd_args: Recorded,
}

/// The Go skel's `CmdArgs` as `encoding/json` prints it.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Recorded {
    /// `CNI_CONTAINERID`.
    #[serde(rename = "ContainerID")]
    pub container_id: String,
    /// `CNI_NETNS`.
    #[serde(rename = "Netns")]
    pub netns: String,
    /// `CNI_IFNAME`.
    #[serde(rename = "IfName")]
    pub if_name: String,
    /// `CNI_ARGS`.
    #[serde(rename = "Args")]
    pub args: String,
    /// `CNI_PATH`, unsplit.
    #[serde(rename = "Path")]
    pub path: String,
    /// `CNI_NETNS_OVERRIDE`, raw.
    #[serde(rename = "NetnsOverride")]
    pub netns_override: String,
    /// stdin, base64 (`[]byte` in Go).
    #[serde(rename = "StdinData")]
    pub stdin_data: Option<String>,
}

impl Recorded {
    fn of(args: &CmdArgs) -> Self {
        let env = |k: &str| std::env::var(k).unwrap_or_default();
        Recorded {
            container_id: args.container_id.clone(),
            netns: args
                .netns
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            if_name: args.ifname.clone(),
            args: args.args.clone(),
            path: env("CNI_PATH"),
            netns_override: env("CNI_NETNS_OVERRIDE"),
            stdin_data: Some(BASE64.encode(&args.stdin)),
        }
    }
}

/// One entry of the command log.
#[derive(Debug, Serialize, Deserialize)]
struct LogEntry {
    #[serde(rename = "Command", default)]
    command: String,
    #[serde(rename = "CmdArgs", default)]
    cmd_args: Recorded,
}

/// The keys noop reads from its config.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NoopConf {
    #[serde(default)]
    debug_file: Option<String>,
    #[serde(default)]
    command_log: Option<String>,
    #[serde(default)]
    cni_version: Option<String>,
    #[serde(default)]
    prev_result: Option<Value>,
}

/// The parsed config: the debug path and what else the plugin needs.
#[derive(Debug)]
struct Config {
    debug_path: String,
    command_log: String,
    cni_version: String,
    prev_result: Option<CniResult>,
}

/// `FOO=BAR;ABC=123`, leniently: later keys win, but every item needs
/// exactly one `=`.
fn parse_extra_args(args: &str) -> Result<Vec<(String, String)>, CniError> {
    let mut out = Vec::new();
    if args.is_empty() {
        return Ok(out);
    }
    for item in args.split(';') {
        let kv: Vec<&str> = item.split('=').collect();
        match kv.as_slice() {
            [k, v] => out.push((k.to_string(), v.to_string())),
            // Go prints the split item with %s: [a b c]
            _ => {
                return Err(CniError::internal(format!(
                    "CNI_ARGS invalid key/value pair: [{}]",
                    kv.join(" ")
                )));
            }
        }
    }
    Ok(out)
}

/// Loads the config and `CNI_ARGS` and picks the debug path.
fn get_config(stdin: &[u8], cni_args: &str) -> Result<Config, CniError> {
    let conf: NoopConf = cni_skel::gojson::from_slice(stdin).map_err(|e| {
        CniError::internal(format!(
            "failed to load netconf: {e} {:?}",
            String::from_utf8_lossy(stdin)
        ))
    })?;
    let cni_version = match conf.cni_version.as_deref() {
        None | Some("") => "0.1.0".to_string(),
        Some(v) => v.to_string(),
    };
    let prev_result =
        match &conf.prev_result {
            None | Some(Value::Null) => None,
            Some(v) => Some(CniResult::parse_prev(v, &cni_version).map_err(|e| {
                CniError::internal(format!("could not parse prevResult: {}", e.msg))
            })?),
        };
    let extra = parse_extra_args(cni_args)?;
    // DEBUG= in CNI_ARGS wins even when empty; the last DEBUG counts.
    let debug_path = match extra.iter().rev().find(|(k, _)| k == "DEBUG") {
        Some((_, v)) => v.clone(),
        None => conf.debug_file.unwrap_or_default(),
    };
    Ok(Config {
        debug_path,
        command_log: conf.command_log.unwrap_or_default(),
        cni_version,
        prev_result,
    })
}

/// The versions to claim: the debug file's `ReportVersionSupport` when
/// `CNI_ARGS` is set (the debug file then must be found and readable, as in
/// the Go plugin, which panics otherwise), else [`DEFAULT_VERSIONS`].
pub fn supported_versions(stdin: &[u8], cni_args: &str) -> Result<Vec<String>, CniError> {
    let default = || DEFAULT_VERSIONS.iter().map(|v| v.to_string()).collect();
    if cni_args.is_empty() {
        return Ok(default());
    }
    let conf = get_config(stdin, cni_args)
        .map_err(|e| e.context("test setup error: unable to get debug file path"))?;
    let debug = read_debug(&conf.debug_path)
        .map_err(|e| e.context("test setup error: unable to read debug file"))?;
    Ok(debug.report_version_support.unwrap_or_else(default))
}

/// An I/O error in Go's words: `open /x: no such file or directory`.
fn io_error(op: &str, path: &str, e: &std::io::Error) -> CniError {
    let mut text = e.to_string();
    if let Some(i) = text.find(" (os error") {
        text.truncate(i);
    }
    let mut chars = text.chars();
    let text = match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => text,
    };
    CniError::internal(format!("{op} {path}: {text}"))
}

/// The field names of [`Debug`], which Go matches case-insensitively.
const FIELDS: &[&str] = &[
    "ReportResult",
    "ReportError",
    "ReportErrorCode",
    "ReportStderr",
    "ReportVersionSupport",
    "ExitWithCode",
    "Command",
    "CmdArgs",
];

/// Reads the debug file. Keys match case-insensitively (an exact match
/// wins) and `null` leaves a field at its zero value, as with Go's decoder.
pub fn read_debug(path: &str) -> Result<Debug, CniError> {
    let bytes = std::fs::read(path).map_err(|e| io_error("open", path, &e))?;
    let raw: Map<String, Value> =
        serde_json::from_slice(&bytes).map_err(|e| CniError::internal(e.to_string()))?;
    let mut fields = Map::new();
    for (k, v) in raw {
        if v.is_null() {
            continue;
        }
        if let Some(f) = FIELDS.iter().find(|f| f.eq_ignore_ascii_case(&k))
            && (k == *f || !fields.contains_key(*f))
        {
            fields.insert((*f).to_string(), v);
        }
    }
    serde_json::from_value(Value::Object(fields)).map_err(|e| CniError::internal(e.to_string()))
}

/// Replaces `path` atomically: a temp file in the same directory, renamed.
fn write_atomic(path: &str, data: &[u8], mode: u32) -> Result<(), CniError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = Path::new(path).as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(data)?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_error("write", path, &e)
    })
}

fn to_json<T: Serialize>(v: &T) -> Result<Vec<u8>, CniError> {
    serde_json::to_vec(v).map_err(|e| CniError::internal(e.to_string()))
}

/// Appends one entry to the command log, which must already exist.
fn append_command_log(path: &str, command: &str, cmd_args: &Recorded) -> Result<(), CniError> {
    let buf = std::fs::read(path).map_err(|e| io_error("open", path, &e))?;
    let mut entries: Vec<LogEntry> = if buf.is_empty() {
        Vec::new()
    } else {
        serde_json::from_slice::<Option<Vec<LogEntry>>>(&buf)
            .map_err(|e| CniError::internal(e.to_string()))?
            .unwrap_or_default()
    };
    entries.push(LogEntry {
        command: command.to_string(),
        cmd_args: cmd_args.clone(),
    });
    write_atomic(path, &to_json(&entries)?, 0o644)
}

/// Removes the whitespace between tokens: Go's compact `json.Marshal`
/// layout from the skel's indented one.
fn compact(pretty: &str) -> String {
    let mut out = String::with_capacity(pretty.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in pretty.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// `PASSTHROUGH` / `INJECT-DNS`: the prevResult in the config's version.
fn pass_through(conf: &Config, inject_dns: bool) -> Result<String, CniError> {
    let convert_err = |msg: String| {
        CniError::internal(format!(
            "failed to convert result to config {:?}: {msg}",
            conf.cni_version
        ))
    };
    let Some(mut result) = conf.prev_result.clone() else {
        return Err(convert_err("no prevResult to pass through".into()));
    };
    if inject_dns {
        result.dns.nameservers = vec!["1.2.3.4".to_string()];
    }
    let pretty = result
        .to_json(&conf.cni_version)
        .map_err(|e| convert_err(e.msg))?;
    Ok(compact(&pretty))
}

/// The whole behaviour of one command.
pub fn behave(args: &CmdArgs, command: &str) -> CmdResult {
    let conf = get_config(&args.stdin, &args.args)?;
    if conf.debug_path.is_empty() {
        let _ = std::io::stderr()
            .lock()
            .write_all(b"CNI_ARGS or config empty, no debug behavior\n");
        return Ok(Output::Raw {
            stdout: "{}".to_string(),
            exit: 0,
        });
    }

    let mut debug = read_debug(&conf.debug_path)?;
    debug.command = command.to_string();
    debug.cmd_args = Recorded::of(args);
    write_atomic(&conf.debug_path, &to_json(&debug)?, 0o600)?;

    if !conf.command_log.is_empty() {
        append_command_log(&conf.command_log, command, &debug.cmd_args)?;
    }

    if !debug.report_stderr.is_empty() {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(debug.report_stderr.as_bytes());
        let _ = err.flush();
    }

    if !debug.report_error.is_empty() {
        let code = match debug.report_error_code {
            0 => code::INTERNAL,
            c => u32::try_from(c).unwrap_or(u32::MAX),
        };
        return Err(CniError::new(code, debug.report_error, ""));
    }

    let stdout = match debug.report_result.as_str() {
        "PASSTHROUGH" => pass_through(&conf, false)?,
        "INJECT-DNS" => pass_through(&conf, true)?,
        other => other.to_string(),
    };
    // os.Exit(n) on Linux: the status is n's low byte.
    let exit = if debug.exit_with_code > 0 {
        (debug.exit_with_code & 0xff) as u8
    } else {
        0
    };
    Ok(Output::Raw { stdout, exit })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_args() {
        assert!(parse_extra_args("").unwrap().is_empty());
        let a = parse_extra_args("DEBUG=/x;FOO=BAR").unwrap();
        assert_eq!(
            a,
            vec![("DEBUG".into(), "/x".into()), ("FOO".into(), "BAR".into())]
        );
        assert_eq!(
            parse_extra_args("A=1;b=c=d").unwrap_err().msg,
            "CNI_ARGS invalid key/value pair: [b c d]"
        );
        assert_eq!(
            parse_extra_args("A=1;").unwrap_err().msg,
            "CNI_ARGS invalid key/value pair: []"
        );
        assert_eq!(
            parse_extra_args("nokey").unwrap_err().msg,
            "CNI_ARGS invalid key/value pair: [nokey]"
        );
    }

    #[test]
    fn debug_path_choice() {
        let stdin = br#"{"name":"n","debugFile":"/from/conf"}"#;
        assert_eq!(get_config(stdin, "").unwrap().debug_path, "/from/conf");
        assert_eq!(
            get_config(stdin, "DEBUG=/from/args").unwrap().debug_path,
            "/from/args"
        );
        assert_eq!(get_config(stdin, "DEBUG=").unwrap().debug_path, "");
        assert_eq!(
            get_config(br#"{"name":"n"}"#, "X=1").unwrap().debug_path,
            ""
        );
        let e = get_config(br#"{"name":"n","debugFile":5}"#, "").unwrap_err();
        assert!(e.msg.starts_with("failed to load netconf: "), "{}", e.msg);
        let e = get_config(
            br#"{"name":"n","cniVersion":"1.0.0","prevResult":{"cniVersion":"0.4.0"}}"#,
            "",
        )
        .unwrap_err();
        assert!(
            e.msg.starts_with("could not parse prevResult: "),
            "{}",
            e.msg
        );
    }

    #[test]
    fn compacts_like_go() {
        let pretty = "{\n    \"a\": [\n        1,\n        \"x y\\\" z\"\n    ],\n    \"b\": {}\n}";
        assert_eq!(compact(pretty), r#"{"a":[1,"x y\" z"],"b":{}}"#);
    }

    #[test]
    fn debug_round_trip_keeps_go_layout() {
        let d = Debug {
            report_result: "r".into(),
            command: "ADD".into(),
            cmd_args: Recorded {
                stdin_data: Some(BASE64.encode(b"{}")),
                ..Default::default()
            },
            ..Default::default()
        };
        let text = String::from_utf8(to_json(&d).unwrap()).unwrap();
        assert_eq!(
            text,
            r#"{"ReportResult":"r","ReportError":"","ReportErrorCode":0,"ReportStderr":"","ReportVersionSupport":null,"ExitWithCode":0,"Command":"ADD","CmdArgs":{"ContainerID":"","Netns":"","IfName":"","Args":"","Path":"","NetnsOverride":"","StdinData":"e30="}}"#
        );
    }

    #[test]
    fn reads_keys_case_insensitively() {
        let dir = std::env::temp_dir().join(format!("noop-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("debug");
        std::fs::write(
            &p,
            r#"{"reportResult":"x","ReportError":null,"exitwithcode":4,"Unknown":1,"CmdArgs":{"StdinData":"e30="}}"#,
        )
        .unwrap();
        let d = read_debug(p.to_str().unwrap()).unwrap();
        assert_eq!(
            (
                d.report_result.as_str(),
                d.report_error.as_str(),
                d.exit_with_code
            ),
            ("x", "", 4)
        );
        let e = read_debug(dir.join("missing").to_str().unwrap()).unwrap_err();
        assert!(
            e.msg.ends_with("missing: no such file or directory"),
            "{}",
            e.msg
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
