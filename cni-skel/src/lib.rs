//! The CNI protocol for rcni plugins: reads the `CNI_*` environment and the
//! config on stdin, negotiates the spec version, dispatches to a [`Plugin`],
//! and prints exactly one result or error on stdout.
//!
//! This crate knows nothing of netlink or namespaces beyond the netns
//! self-check, so plugins that need no kernel access stay small.

pub mod args;
pub mod cidr;
pub mod conf;
pub mod delegate;
pub mod env;
pub mod error;
pub mod gojson;
pub mod logger;
pub mod parse_for;
pub mod state;
pub mod teardown;
pub mod types;
pub mod version;

pub use conf::NetConf;
pub use env::{CmdArgs, Command};
pub use error::{CniError, Context};
pub use parse_for::ParseFor;
pub use types::{CniResult, Dns, Interface, IpConfig, Route};

use error::code;
use std::io::{Read, Write};
use std::process::ExitCode;
use version::Version;

/// What a command hands back to the skel to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Print nothing (DEL, CHECK, GC, STATUS).
    Nothing,
    /// Print this result converted to the config's version.
    Result(CniResult),
    /// Print this text verbatim and exit with `exit` (the noop test plugin).
    Raw {
        /// Text for stdout.
        stdout: String,
        /// Exit status.
        exit: u8,
    },
}

impl From<CniResult> for Output {
    fn from(r: CniResult) -> Self {
        Output::Result(r)
    }
}

/// A command's outcome.
pub type CmdResult = Result<Output, CniError>;

/// rcni's release version, one for every plugin: the workspace's version
/// (a release is the git tag `v<RELEASE>`).
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// The first line of every plugin's about text (what [`Plugin::about`]
/// returns; printed to stderr, with the spec versions, when `CNI_COMMAND`
/// is empty). The Go reference prints `CNI <type> plugin <version>`
/// (`buildversion.BuildString`), `<version>` being `git describe` of the
/// release tag (`v1.4.0`; Debian's build says `version unknown`). Ours
/// keeps that shape and says whose it is as the version's semver build
/// metadata, so the version stays one `v`-prefixed token that a semver
/// parser reads as the release: `CNI bridge plugin v0.1.0+rcni`.
pub fn about(plugin_type: &str) -> String {
    format!("CNI {plugin_type} plugin v{RELEASE}+rcni")
}

/// A CNI plugin: one method per command.
pub trait Plugin {
    /// The about text printed to stderr when `CNI_COMMAND` is empty.
    fn about(&self) -> String;
    /// The spec versions this plugin accepts, exactly.
    fn supported_versions(&self) -> Vec<String> {
        version::ALL.iter().map(|v| v.to_string()).collect()
    }
    /// ADD.
    fn add(&self, args: &CmdArgs) -> CmdResult;
    /// DEL.
    fn del(&self, args: &CmdArgs) -> CmdResult;
    /// CHECK.
    fn check(&self, args: &CmdArgs) -> CmdResult;
    /// GC; nothing to collect by default.
    fn gc(&self, _args: &CmdArgs) -> CmdResult {
        Ok(Output::Nothing)
    }
    /// STATUS; available by default.
    fn status(&self, _args: &CmdArgs) -> CmdResult {
        Ok(Output::Nothing)
    }
}

/// What the process prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Text for stdout.
    pub stdout: String,
    /// Text for stderr.
    pub stderr: String,
    /// Exit status.
    pub exit: u8,
}

/// The command-line arguments a plugin library's `main` is given: those
/// after the program name (in the multicall binary, those after
/// `rcni <type>`). Read from the process only when a plugin asks (only
/// dhcp's daemon does), so that the others link no code to copy them: a
/// `Vec` collected in every `main.rs` cost each binary 1.5 KB of text.
#[derive(Debug)]
pub enum ProgramArgs {
    /// This process's own, after `argv[0]`.
    Process,
    /// Given by the caller.
    Given(Vec<std::ffi::OsString>),
}

impl ProgramArgs {
    /// The arguments.
    pub fn into_vec(self) -> Vec<std::ffi::OsString> {
        match self {
            ProgramArgs::Process => std::env::args_os().skip(1).collect(),
            ProgramArgs::Given(args) => args,
        }
    }
}

/// Runs `plugin` against the process environment and stdin, prints the
/// outcome and returns the exit status. Only `main` should call this.
pub fn run(plugin: &dyn Plugin) -> ExitCode {
    run_with_stdin(plugin, Box::new(std::io::stdin()))
}

/// As [`run`], with stdin supplied by the caller (a plugin that had to read
/// it before the skel, as the noop test plugin does).
pub fn run_with_stdin(plugin: &dyn Plugin, stdin: Box<dyn Read>) -> ExitCode {
    logger::init();
    install_panic_hook();
    // Each variable the skel reads, read from the process once (each read
    // scans the whole environment, which a runtime passes on in full).
    let read: Vec<(&str, Option<std::ffi::OsString>)> = env::SKEL_VARS
        .iter()
        .map(|k| (*k, std::env::var_os(k)))
        .collect();
    let lookup = |k: &str| read.iter().find(|(name, _)| *name == k);
    let outcome = match not_unicode_where(&|k| {
        lookup(k).is_some_and(|(_, v)| v.as_ref().is_some_and(|v| v.to_str().is_none()))
    }) {
        Some(e) => fail(e, version::CURRENT),
        None => dispatch(
            plugin,
            &|k| match lookup(k) {
                Some((_, v)) => v.as_ref().and_then(|v| v.to_str()).map(String::from),
                None => std::env::var(k).ok(),
            },
            stdin,
        ),
    };
    // Nobody may be reading; a broken pipe is not worth a panic.
    let _ = std::io::stderr()
        .lock()
        .write_all(outcome.stderr.as_bytes());
    write_stdout(outcome.stdout.as_bytes());
    ExitCode::from(outcome.exit)
}

/// Writes `bytes` to stdout with one write(2) where the pipe takes them
/// whole. std's stdout is line-buffered: a pretty-printed result went out
/// up to its last newline, then its closing brace at the flush, two writes
/// that each woke the reader (the runtime, or the plugin that delegated
/// IPAM to us) to read and poll again.
fn write_stdout(bytes: &[u8]) {
    let stdout = std::io::stdout();
    // Nothing else prints, but what std holds must go first.
    let _ = stdout.lock().flush();
    let mut rest = bytes;
    while !rest.is_empty() {
        match nix::unistd::write(&stdout, rest) {
            Ok(0) => return,
            Ok(n) => rest = rest.get(n..).unwrap_or_default(),
            Err(nix::errno::Errno::EINTR) => {}
            // Nobody may be reading; a broken pipe is not worth a panic.
            Err(_) => return,
        }
    }
}

/// A panic, which the lints keep out of plugin code, still answers with a
/// CNI error (code 999) and exit status 1.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = match info.payload().downcast_ref::<&str>() {
            Some(s) => s.to_string(),
            None => info
                .payload()
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_default(),
        };
        let at = info.location().map(|l| l.to_string()).unwrap_or_default();
        let e = CniError::new(code::INTERNAL, format!("internal error: {msg}"), at);
        let _ = std::io::stdout()
            .lock()
            .write_all(e.to_json(version::CURRENT).as_bytes());
        std::process::exit(1);
    }));
}

/// An error naming the `CNI_*` variables whose values are not UTF-8. Read
/// as "unset", a non-UTF-8 `CNI_COMMAND` would print the about text and
/// succeed, and a non-UTF-8 `CNI_ARGS` would be ignored.
pub fn not_unicode(getenv: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Option<CniError> {
    not_unicode_where(&|k| getenv(k).is_some_and(|v| v.to_str().is_none()))
}

/// [`not_unicode`], given whether each variable is set and not UTF-8 (no
/// copy of the values).
fn not_unicode_where(bad: &dyn Fn(&str) -> bool) -> Option<CniError> {
    let bad: Vec<&str> = env::VARS
        .iter()
        .copied()
        .chain([env::NETNS_OVERRIDE_VAR])
        .filter(|k| bad(k))
        .collect();
    (!bad.is_empty()).then(|| {
        CniError::new(
            code::INVALID_ENV,
            format!("env variables [{}] are not valid UTF-8", bad.join(",")),
            "",
        )
    })
}

fn fail(e: CniError, version: &str) -> Outcome {
    Outcome {
        stdout: e.to_json(version),
        stderr: String::new(),
        exit: 1,
    }
}

/// The whole protocol, free of process I/O so it can be tested directly.
pub fn dispatch(
    plugin: &dyn Plugin,
    getenv: &dyn Fn(&str) -> Option<String>,
    mut stdin: Box<dyn Read>,
) -> Outcome {
    // Before anything can block (stdin): who is waiting for us.
    let invoker = Some(env::invoker_of(
        getenv(env::INVOKER_VAR).as_deref(),
        std::os::unix::process::parent_id(),
        env::parent_in_proc,
    ));
    let cmd_text = getenv("CNI_COMMAND").unwrap_or_default();
    let supported = plugin.supported_versions();
    if cmd_text.is_empty() {
        return Outcome {
            stdout: String::new(),
            stderr: format!(
                "{}\nCNI protocol versions supported: {}\n",
                plugin.about(),
                supported.join(", ")
            ),
            exit: 0,
        };
    }
    let cmd = Command::parse(&cmd_text);
    // VERSION needs only CNI_COMMAND (never missing here): the others are
    // not read for it.
    if cmd == Some(Command::Version) {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Info<'a> {
            cni_version: &'a str,
            supported_versions: &'a [String],
        }
        let info = Info {
            cni_version: version::CURRENT,
            supported_versions: &supported,
        };
        let line = serde_json::to_string(&info).unwrap_or_default();
        return Outcome {
            stdout: line + "\n",
            stderr: String::new(),
            exit: 0,
        };
    }

    // VARS' values, each read once, in VARS' order.
    let vars: Vec<String> = env::VARS
        .iter()
        .map(|k| match *k {
            "CNI_COMMAND" => cmd_text.clone(),
            k => getenv(k).unwrap_or_default(),
        })
        .collect();
    let var = |k: &str| {
        env::VARS
            .iter()
            .zip(&vars)
            .find(|(name, _)| **name == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    let missing: Vec<&str> = env::VARS
        .iter()
        .zip(&vars)
        .filter(|(k, v)| env::required(k, cmd) && v.is_empty())
        .map(|(k, _)| *k)
        .collect();
    if !missing.is_empty() {
        let e = CniError::new(
            code::INVALID_ENV,
            format!("required env variables [{}] missing", missing.join(",")),
            "",
        );
        return fail(e, version::CURRENT);
    }

    // Room for a usual config up front: from an empty Vec, read_to_end
    // starts with a 32-byte probe and doubles, one read call each.
    let mut raw = Vec::with_capacity(4096);
    if let Err(e) = stdin.read_to_end(&mut raw) {
        let e = CniError::new(
            code::IO_FAILURE,
            format!("error reading from stdin: {e}"),
            "",
        );
        return fail(e, version::CURRENT);
    }
    let (config, conf) = match conf::parse_full(&raw) {
        Ok(c) => c,
        Err(e) => return fail(e, version::CURRENT),
    };
    let ver = conf.cni_version().to_string();
    let Some(cmd) = cmd else {
        let e = CniError::new(
            code::INVALID_ENV,
            format!("unknown CNI_COMMAND: {cmd_text}"),
            "",
        );
        return fail(e, &ver);
    };
    let args = CmdArgs {
        command: cmd,
        container_id: var("CNI_CONTAINERID").to_string(),
        netns: Some(var("CNI_NETNS"))
            .filter(|s| !s.is_empty())
            .map(Into::into),
        ifname: var("CNI_IFNAME").to_string(),
        args: var("CNI_ARGS").to_string(),
        path: var("CNI_PATH")
            .split(':')
            .filter(|s| !s.is_empty())
            .map(Into::into)
            .collect(),
        netns_override: matches!(
            getenv(env::NETNS_OVERRIDE_VAR)
                .unwrap_or_default()
                .to_ascii_lowercase()
                .as_str(),
            "1" | "true"
        ),
        stdin: raw,
        config,
        conf,
        invoker,
    };
    match call(plugin, &args, &supported) {
        Ok(Output::Nothing) => Outcome {
            stdout: String::new(),
            stderr: String::new(),
            exit: 0,
        },
        Ok(Output::Result(r)) => match r.to_json(&ver) {
            Ok(stdout) => Outcome {
                stdout,
                stderr: String::new(),
                exit: 0,
            },
            Err(e) => fail(e, &ver),
        },
        Ok(Output::Raw { stdout, exit }) => Outcome {
            stdout,
            stderr: String::new(),
            exit,
        },
        Err(e) => fail(e, &ver),
    }
}

/// Validation that needs the command, then the version gates, then the plugin.
fn call(plugin: &dyn Plugin, args: &CmdArgs, supported: &[String]) -> CmdResult {
    let cmd = args.command;
    if matches!(cmd, Command::Add | Command::Del | Command::Check) {
        env::validate_container_id(&args.container_id)?;
        env::validate_ifname(&args.ifname)?;
    }
    let ver = args.cni_version();
    let minimum = match cmd {
        Command::Check => Some(Version::CHECK),
        Command::Gc | Command::Status => Some(Version::GC_STATUS),
        _ => None,
    };
    if let Some(min) = minimum {
        let config = Version::parse(ver)?;
        if config < min {
            return Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!("config version does not allow {}", cmd.as_str()),
                "",
            ));
        }
        // Versions a plugin lists but that do not parse (the noop plugin's
        // deliberate "0.-42.0") simply never satisfy the gate.
        let plugin_allows = supported
            .iter()
            .any(|v| Version::parse(v).is_ok_and(|pv| pv >= config));
        if !plugin_allows {
            return Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!("plugin version does not allow {}", cmd.as_str()),
                "",
            ));
        }
    }
    if !supported.iter().any(|v| v == ver) {
        return Err(version::incompatible(ver, supported));
    }
    let acts_in_netns = matches!(cmd, Command::Add | Command::Del | Command::Check);
    if acts_in_netns && !args.netns_override && args.netns.as_deref().is_some_and(is_own_netns) {
        return Err(CniError::new(
            code::INVALID_NETNS,
            "plugin's netns and netns from CNI_NETNS should not be the same",
            "",
        ));
    }
    match cmd {
        Command::Add => plugin.add(args),
        Command::Del => plugin.del(args),
        Command::Check => plugin.check(args),
        Command::Gc => plugin.gc(args),
        Command::Status => plugin.status(args),
        Command::Version => Ok(Output::Nothing),
    }
}

/// True when `path` is the network namespace this process runs in (the
/// calling thread's, as the reference's `ns.GetCurrentNS`). A path that
/// cannot be examined counts as "not the same", as in the reference. The
/// thread's path is the one cni-net opens next to come back to it, which
/// then finds /proc's entries made (both lookups together 3 µs less).
fn is_own_netns(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (
        std::fs::metadata(path),
        std::fs::metadata("/proc/thread-self/ns/net"),
    ) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
