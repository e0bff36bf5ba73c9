//! `cnitool`: runs a network config against a network namespace, as the
//! CNI project's cnitool (cni:cnitool) does, through cni-runtime.
//!
//! ```text
//! cnitool add|check|del|gc|status <network-name> [<netns-path>] [-i <ifname>]
//! ```
//!
//! The network is found by name in `NETCONFPATH` (default `/etc/cni/net.d`):
//! `.conflist` files first, then `.conf` / `.json` single-plugin configs.
//! Plugins are looked up in `CNI_PATH`; `CNI_IFNAME` (or `-i`) names the
//! interface (default `eth0`), `CNI_ARGS` and `CAP_ARGS` (a JSON object) are
//! passed on. The container ID is, as in the Go tool, `cnitool-` and the
//! first 10 bytes (hex) of the SHA-512 of the absolute netns path.
//!
//! Beyond the Go tool:
//! - `CNI_CONTAINERID` overrides the derived container ID (which makes
//!   `del` possible without a netns path);
//! - `CNITOOL_CACHE_DIR` replaces the result cache directory (default
//!   `/var/lib/cni`; results live in `<dir>/results`);
//! - `CNITOOL_VALID_ATTACHMENTS`, a JSON list of `{"containerID", "ifname"}`,
//!   makes `gc` keep those attachments (without it, as in the Go tool, `gc`
//!   deletes every cached attachment of the network and the plugins release
//!   everything they hold for it);
//! - the netns path is optional for `gc` and `status`, which do not use it;
//! - a failure prints the CNI error JSON (naming the failing plugin) on
//!   stdout and exits 1.

use cni_runtime::{CniConfig, CniError, GcAttachment, NetworkConfigList, RuntimeConf};
use cni_skel::error::code;
use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "\
cnitool: add, check, delete, garbage-collect or get the status of a CNI
network attachment in an already-created network namespace.

Usage:
  cnitool add    <network-name> <netns-path>
  cnitool check  <network-name> <netns-path>
  cnitool del    <network-name> <netns-path>
  cnitool gc     <network-name> [<netns-path>]
  cnitool status <network-name> [<netns-path>]

Flags:
  -i, --ifname <name>  interface name (default: $CNI_IFNAME, else eth0)
  -h, --help           this help

Environment:
  NETCONFPATH    config directory (default /etc/cni/net.d)
  CNI_PATH       plugin directories, colon-separated
  CNI_IFNAME     interface name (default eth0)
  CNI_ARGS       KEY1=VALUE1;KEY2=VALUE2 passed to the plugins
  CAP_ARGS       capability arguments, a JSON object ({\"portMappings\": [...]})
  CNI_CONTAINERID          container ID (default: derived from the netns path)
  CNITOOL_CACHE_DIR        result cache directory (default /var/lib/cni)
  CNITOOL_VALID_ATTACHMENTS  gc: JSON list of {\"containerID\",\"ifname\"} to keep
";

/// The default config directory.
const DEFAULT_NET_DIR: &str = "/etc/cni/net.d";

/// One of the five commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Add,
    Check,
    Del,
    Gc,
    Status,
}

impl Cmd {
    fn parse(s: &str) -> Option<Cmd> {
        match s {
            "add" => Some(Cmd::Add),
            "check" => Some(Cmd::Check),
            "del" => Some(Cmd::Del),
            "gc" => Some(Cmd::Gc),
            "status" => Some(Cmd::Status),
            _ => None,
        }
    }
}

/// The command line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cli {
    cmd: Cmd,
    network: String,
    netns: Option<String>,
    ifname: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Parsed {
    Help,
    Run(Cli),
}

fn usage_error(msg: impl Into<String>) -> CniError {
    CniError::new(code::INVALID_ENV, msg, "run `cnitool --help` for usage")
}

/// Parses the arguments after the program name. Flags may come anywhere;
/// `--` ends them.
fn parse_cli(args: &[String]) -> Result<Parsed, CniError> {
    let mut positional = Vec::new();
    let mut ifname = None;
    let mut iter = args.iter();
    let mut flags_done = false;
    while let Some(arg) = iter.next() {
        if flags_done || !arg.starts_with('-') || arg == "-" {
            positional.push(arg.clone());
            continue;
        }
        match arg.as_str() {
            "--" => flags_done = true,
            "-h" | "--help" => return Ok(Parsed::Help),
            "-i" | "--ifname" => match iter.next() {
                Some(v) => ifname = Some(v.clone()),
                None => return Err(usage_error(format!("flag needs an argument: {arg}"))),
            },
            _ => {
                if let Some(v) = arg.strip_prefix("--ifname=") {
                    ifname = Some(v.to_string());
                } else if let Some(v) = arg.strip_prefix("-i") {
                    ifname = Some(v.strip_prefix('=').unwrap_or(v).to_string());
                } else {
                    return Err(usage_error(format!("unknown flag: {arg}")));
                }
            }
        }
    }
    let mut positional = positional.into_iter();
    let Some(cmd) = positional.next() else {
        return Ok(Parsed::Help);
    };
    if cmd == "help" {
        return Ok(Parsed::Help);
    }
    let Some(cmd_kind) = Cmd::parse(&cmd) else {
        return Err(usage_error(format!("unknown command {cmd:?}")));
    };
    let Some(network) = positional.next() else {
        return Err(usage_error(format!("{cmd}: network name required")));
    };
    let netns = positional.next();
    if let Some(extra) = positional.next() {
        return Err(usage_error(format!("{cmd}: unexpected argument {extra:?}")));
    }
    Ok(Parsed::Run(Cli {
        cmd: cmd_kind,
        network,
        netns,
        ifname,
    }))
}

/// Go's `filepath.Abs`: joined to `cwd` when relative, then cleaned
/// lexically (`.` and `..` resolved without looking at the file system).
fn absolute(path: &str, cwd: &Path) -> String {
    let joined = if path.starts_with('/') {
        PathBuf::from(path)
    } else {
        cwd.join(path)
    };
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in joined.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::ParentDir => {
                parts.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    let mut out = String::new();
    for p in parts {
        out.push('/');
        out.push_str(&p.to_string_lossy());
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// The Go cnitool's container ID for a netns path: `cnitool-` and the hex
/// of the first 10 bytes of the path's SHA-512.
fn container_id_for(netns: &str) -> String {
    cni_fw::hash::hash_with_prefix("cnitool-".len() + 20, "cnitool-", netns)
}

/// `CNI_ARGS` as the Go cnitool reads it: `K=V` pairs, neither part empty.
fn parse_cni_args(raw: &str) -> Result<Vec<(String, String)>, CniError> {
    if raw.is_empty() {
        return Ok(Vec::new());
    }
    let invalid = |pair: &str| {
        CniError::new(
            code::INVALID_ENV,
            format!("invalid CNI_ARGS pair {pair:?}"),
            "",
        )
    };
    let mut out = Vec::new();
    for pair in raw.split(';') {
        match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() && !v.contains('=') => {
                out.push((k.to_string(), v.to_string()));
            }
            _ => return Err(invalid(pair)),
        }
    }
    Ok(out)
}

/// `CAP_ARGS`: a JSON object.
fn parse_cap_args(raw: &str) -> Result<Map<String, Value>, CniError> {
    if raw.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(CniError::new(
            code::DECODING_FAILURE,
            "invalid CAP_ARGS: not a JSON object",
            other.to_string(),
        )),
        Err(e) => Err(CniError::new(
            code::DECODING_FAILURE,
            format!("invalid CAP_ARGS: {e}"),
            "",
        )),
    }
}

/// `CNITOOL_VALID_ATTACHMENTS`: `[{"containerID": "...", "ifname": "..."}]`.
fn parse_valid_attachments(raw: &str) -> Result<Vec<GcAttachment>, CniError> {
    serde_json::from_str(raw).map_err(|e| {
        CniError::new(
            code::DECODING_FAILURE,
            format!("invalid CNITOOL_VALID_ATTACHMENTS: {e}"),
            "",
        )
    })
}

/// Everything one run needs, from the command line and the environment.
struct Setup {
    list: NetworkConfigList,
    cni: CniConfig,
    rt: RuntimeConf,
    valid: Option<Vec<GcAttachment>>,
}

/// Reads the environment through `env` (unset and empty are the same).
fn setup(cli: &Cli, env: &dyn Fn(&str) -> Option<String>, cwd: &Path) -> Result<Setup, CniError> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
    let net_dir = var("NETCONFPATH").unwrap_or_else(|| DEFAULT_NET_DIR.to_string());
    let list = cni_runtime::load_network_conf(&net_dir, &cli.network)?;
    let capability_args = parse_cap_args(&var("CAP_ARGS").unwrap_or_default())?;
    let args = parse_cni_args(&var("CNI_ARGS").unwrap_or_default())?;
    let ifname = cli
        .ifname
        .clone()
        .filter(|i| !i.is_empty())
        .or_else(|| var("CNI_IFNAME"))
        .unwrap_or_else(|| "eth0".to_string());
    let netns = cli
        .netns
        .as_deref()
        .map(|n| absolute(n, cwd))
        .unwrap_or_default();
    let container_id = match var("CNI_CONTAINERID") {
        Some(id) => id,
        None if !netns.is_empty() => container_id_for(&netns),
        None => String::new(),
    };
    if container_id.is_empty() && matches!(cli.cmd, Cmd::Add | Cmd::Check | Cmd::Del) {
        return Err(usage_error(
            "a netns path is required (or CNI_CONTAINERID, for del)",
        ));
    }
    if netns.is_empty() && matches!(cli.cmd, Cmd::Add | Cmd::Check) {
        return Err(usage_error("a netns path is required"));
    }
    let path: Vec<PathBuf> = var("CNI_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect();
    let cache_dir =
        var("CNITOOL_CACHE_DIR").unwrap_or_else(|| CniConfig::DEFAULT_CACHE_DIR.to_string());
    let valid = var("CNITOOL_VALID_ATTACHMENTS")
        .map(|v| parse_valid_attachments(&v))
        .transpose()?;
    Ok(Setup {
        list,
        cni: CniConfig::new(path).with_cache_dir(cache_dir),
        rt: RuntimeConf {
            container_id,
            netns,
            ifname,
            args,
            capability_args,
        },
        valid,
    })
}

/// Runs the command; on success, what to print (ADD's result).
fn run(cli: &Cli, s: &Setup) -> Result<Option<String>, CniError> {
    match cli.cmd {
        Cmd::Add => {
            let result = s.cni.add_network_list(&s.list, &s.rt)?;
            Ok(Some(result.to_json(&s.list.cni_version)?))
        }
        Cmd::Check => s.cni.check_network_list(&s.list, &s.rt).map(|()| None),
        Cmd::Del => s.cni.del_network_list(&s.list, &s.rt).map(|()| None),
        Cmd::Gc => s
            .cni
            .gc_network_list(&s.list, s.valid.as_deref())
            .map(|()| None),
        Cmd::Status => s.cni.status_network_list(&s.list).map(|()| None),
    }
}

fn print(out: &mut dyn Write, text: &str) {
    // Nothing sensible is left to do if stdout is gone.
    let _ = writeln!(out, "{text}");
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stdout = &mut std::io::stdout().lock();
    let cli = match parse_cli(&args) {
        Ok(Parsed::Help) => {
            print(stdout, USAGE.trim_end());
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Run(cli)) => cli,
        Err(e) => {
            print(stdout, &e.to_json(cni_skel::version::CURRENT));
            return ExitCode::FAILURE;
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let get = |k: &str| std::env::var(k).ok();
    let s = match setup(&cli, &get, &cwd) {
        Ok(s) => s,
        Err(e) => {
            print(stdout, &e.to_json(cni_skel::version::CURRENT));
            return ExitCode::FAILURE;
        }
    };
    match run(&cli, &s) {
        Ok(Some(text)) => {
            print(stdout, &text);
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            print(stdout, &e.to_json(&s.list.cni_version));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    fn cli(s: &[&str]) -> Cli {
        match parse_cli(&args(s)).unwrap() {
            Parsed::Run(c) => c,
            Parsed::Help => panic!("help for {s:?}"),
        }
    }

    #[test]
    fn command_line() {
        assert_eq!(
            cli(&["add", "net", "/run/netns/x"]),
            Cli {
                cmd: Cmd::Add,
                network: "net".into(),
                netns: Some("/run/netns/x".into()),
                ifname: None,
            }
        );
        assert_eq!(cli(&["gc", "net"]).netns, None);
        assert_eq!(
            cli(&["-i", "net1", "del", "n", "p"]).ifname.unwrap(),
            "net1"
        );
        assert_eq!(cli(&["del", "n", "p", "--ifname=a"]).ifname.unwrap(), "a");
        assert_eq!(
            cli(&["del", "n", "p", "--ifname", "b"]).ifname.unwrap(),
            "b"
        );
        assert_eq!(cli(&["del", "n", "p", "-ic"]).ifname.unwrap(), "c");
        assert_eq!(cli(&["status", "--", "-n"]).network, "-n");
        for help in [&[][..], &["help"], &["-h"], &["add", "--help"]] {
            assert_eq!(parse_cli(&args(help)).unwrap(), Parsed::Help);
        }
        for (bad, want) in [
            (&["frob", "n"][..], "unknown command \"frob\""),
            (&["add"], "add: network name required"),
            (&["add", "n", "p", "q"], "unexpected argument \"q\""),
            (&["add", "n", "p", "-i"], "flag needs an argument: -i"),
            (&["add", "n", "p", "--frob"], "unknown flag: --frob"),
        ] {
            let e = parse_cli(&args(bad)).unwrap_err();
            assert_eq!(e.code, code::INVALID_ENV);
            assert!(e.msg.contains(want), "{bad:?}: {}", e.msg);
        }
    }

    #[test]
    fn absolute_paths_like_go() {
        let cwd = Path::new("/work/dir");
        assert_eq!(absolute("/run/netns/x", cwd), "/run/netns/x");
        assert_eq!(absolute("/run//netns/./x/", cwd), "/run/netns/x");
        assert_eq!(absolute("ns", cwd), "/work/dir/ns");
        assert_eq!(absolute("../ns", cwd), "/work/ns");
        assert_eq!(absolute("/../..", cwd), "/");
    }

    #[test]
    fn container_id_matches_go() {
        // Go: s := sha512.Sum512([]byte(netns)); fmt.Sprintf("cnitool-%x", s[:10])
        // (python3: hashlib.sha512(b"/var/run/netns/testing").hexdigest()[:20])
        assert_eq!(
            container_id_for("/var/run/netns/testing"),
            "cnitool-77383ca0a0715733ca6f"
        );
    }

    #[test]
    fn env_parsing() {
        assert_eq!(parse_cni_args("").unwrap(), vec![]);
        assert_eq!(
            parse_cni_args("A=1;B=2").unwrap(),
            vec![("A".into(), "1".into()), ("B".into(), "2".into())]
        );
        for bad in ["A", "A=", "=1", "A=1=2", "A=1;"] {
            let e = parse_cni_args(bad).unwrap_err();
            assert!(e.msg.starts_with("invalid CNI_ARGS pair"), "{bad}");
        }
        assert!(parse_cap_args("").unwrap().is_empty());
        assert_eq!(
            parse_cap_args(r#"{"portMappings":[]}"#).unwrap()["portMappings"],
            serde_json::json!([])
        );
        assert_eq!(parse_cap_args("[1]").unwrap_err().code, 6);
        assert_eq!(parse_cap_args("{").unwrap_err().code, 6);
        assert_eq!(
            parse_valid_attachments(r#"[{"containerID":"c","ifname":"eth0"}]"#).unwrap(),
            vec![GcAttachment {
                container_id: "c".into(),
                ifname: "eth0".into()
            }]
        );
        assert!(parse_valid_attachments("{}").is_err());
    }

    #[test]
    fn setup_reads_the_environment() {
        let dir = std::env::temp_dir().join(format!("cnitool-setup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("10-a.conflist"),
            r#"{"cniVersion":"1.1.0","name":"a","plugins":[{"type":"noop"}]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("20-b.conf"),
            r#"{"cniVersion":"0.4.0","name":"b","type":"noop"}"#,
        )
        .unwrap();
        let d = dir.display().to_string();
        let env = |k: &str| match k {
            "NETCONFPATH" => Some(d.clone()),
            "CNI_PATH" => Some("/x::/y".to_string()),
            "CNI_ARGS" => Some("K=V".to_string()),
            "CAP_ARGS" => Some(r#"{"mac":"aa"}"#.to_string()),
            "CNITOOL_CACHE_DIR" => Some("/tmp/c".to_string()),
            _ => None,
        };
        let s = setup(&cli(&["add", "a", "ns"]), &env, Path::new("/run/netns")).unwrap();
        assert_eq!(s.list.name, "a");
        assert_eq!(s.cni.path, vec![PathBuf::from("/x"), PathBuf::from("/y")]);
        assert_eq!(s.cni.cache_dir, PathBuf::from("/tmp/c"));
        assert_eq!(s.rt.netns, "/run/netns/ns");
        assert_eq!(s.rt.container_id, container_id_for("/run/netns/ns"));
        assert_eq!(s.rt.ifname, "eth0");
        assert_eq!(s.rt.args, vec![("K".into(), "V".into())]);
        assert_eq!(s.rt.capability_args["mac"], "aa");
        assert!(s.valid.is_none());

        let env2 = |k: &str| match k {
            "NETCONFPATH" => Some(d.clone()),
            "CNI_IFNAME" => Some("net9".to_string()),
            "CNI_CONTAINERID" => Some("c1".to_string()),
            "CNITOOL_VALID_ATTACHMENTS" => Some("[]".to_string()),
            _ => None,
        };
        let s = setup(&cli(&["del", "b"]), &env2, Path::new("/")).unwrap();
        assert_eq!(s.list.name, "b");
        assert_eq!(s.list.cni_version, "0.4.0");
        assert_eq!(s.rt.container_id, "c1");
        assert_eq!(s.rt.ifname, "net9");
        assert_eq!(s.rt.netns, "");
        assert_eq!(s.cni.cache_dir, PathBuf::from("/var/lib/cni"));
        assert_eq!(s.valid, Some(vec![]));
        let s = setup(&cli(&["del", "b", "p", "-i", "x"]), &env2, Path::new("/")).unwrap();
        assert_eq!(s.rt.ifname, "x");

        let env3 = |k: &str| (k == "NETCONFPATH").then(|| d.clone());
        assert!(setup(&cli(&["status", "a"]), &env3, Path::new("/")).is_ok());
        let e = setup(&cli(&["del", "a"]), &env3, Path::new("/"))
            .err()
            .unwrap();
        assert!(e.msg.contains("netns path is required"), "{}", e.msg);
        let e = setup(&cli(&["add", "zz", "p"]), &env3, Path::new("/"))
            .err()
            .unwrap();
        assert!(
            e.msg.contains("no net configuration with name \"zz\""),
            "{}",
            e.msg
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
