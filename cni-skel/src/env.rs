//! The `CNI_*` environment: which variables each command requires, and the
//! name rules that keep a container ID or interface name from becoming a path.

use crate::error::{CniError, code};
use std::path::PathBuf;

/// A CNI command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Create an attachment.
    Add,
    /// Remove an attachment.
    Del,
    /// Verify an attachment.
    Check,
    /// Remove resources of attachments that are no longer valid.
    Gc,
    /// Report whether ADD can be served.
    Status,
    /// Report the supported versions.
    Version,
}

impl Command {
    /// Parses `CNI_COMMAND`; `None` for an unknown command.
    pub fn parse(s: &str) -> Option<Command> {
        Some(match s {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "GC" => Command::Gc,
            "STATUS" => Command::Status,
            "VERSION" => Command::Version,
            _ => return None,
        })
    }

    /// The `CNI_COMMAND` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Gc => "GC",
            Command::Status => "STATUS",
            Command::Version => "VERSION",
        }
    }
}

/// The `CNI_*` variables every command may need, in the order the
/// reference reports them.
pub const VARS: &[&str] = SKEL_VARS.split_at(6).0;

/// `1` or `true` (any case): the plugin may act in its own network
/// namespace (the reference's skel reads it too).
pub const NETNS_OVERRIDE_VAR: &str = "CNI_NETNS_OVERRIDE";

/// Every variable the skel reads: [`VARS`], [`NETNS_OVERRIDE_VAR`] and
/// [`INVOKER_VAR`]. `cni_skel::run` reads each once.
pub const SKEL_VARS: &[&str] = &[
    "CNI_COMMAND",
    "CNI_CONTAINERID",
    "CNI_NETNS",
    "CNI_IFNAME",
    "CNI_ARGS",
    "CNI_PATH",
    NETNS_OVERRIDE_VAR,
    INVOKER_VAR,
];

/// Whether `var` must be set for `cmd` (`None` = an unknown command).
pub(crate) fn required(var: &str, cmd: Option<Command>) -> bool {
    use Command::*;
    match var {
        "CNI_COMMAND" => true,
        "CNI_CONTAINERID" | "CNI_IFNAME" => matches!(cmd, Some(Add | Del | Check)),
        "CNI_NETNS" => matches!(cmd, Some(Add | Check)),
        "CNI_PATH" => matches!(cmd, Some(Add | Del | Check | Gc | Status)),
        _ => false,
    }
}

/// True for names matching `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`.
pub fn valid_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The reference's `ValidateContainerID` (code 4).
pub fn validate_container_id(id: &str) -> Result<(), CniError> {
    if id.is_empty() {
        return Err(CniError::new(
            code::UNKNOWN_CONTAINER,
            "missing containerID",
            "",
        ));
    }
    if !valid_name(id) {
        return Err(CniError::new(
            code::INVALID_ENV,
            "invalid characters in containerID",
            id,
        ));
    }
    Ok(())
}

/// The reference's `ValidateInterfaceName` (code 4): 1–15 bytes, not `.` or
/// `..`, no `/`, `:` or whitespace.
pub fn validate_ifname(name: &str) -> Result<(), CniError> {
    let err = |msg: &str, details: &str| Err(CniError::new(code::INVALID_ENV, msg, details));
    if name.is_empty() {
        return err("interface name is empty", "");
    }
    if name.len() > 15 {
        return err(
            "interface name is too long",
            "interface name should be less than 16 characters",
        );
    }
    if name == "." || name == ".." {
        return err("interface name is . or ..", "");
    }
    if let Some(c) = name
        .chars()
        .find(|c| *c == '/' || *c == ':' || c.is_whitespace())
    {
        return err(
            "interface name contains / or : or whitespace characters",
            &format!("{name:?} contains {c:?}"),
        );
    }
    Ok(())
}

/// What the runtime passed: the environment and stdin.
#[derive(Debug, Clone)]
pub struct CmdArgs {
    /// The command being run.
    pub command: Command,
    /// `CNI_CONTAINERID` (empty for GC and STATUS).
    pub container_id: String,
    /// `CNI_NETNS`; `None` when empty (DEL may omit it).
    pub netns: Option<PathBuf>,
    /// `CNI_IFNAME` (empty for GC and STATUS).
    pub ifname: String,
    /// Raw `CNI_ARGS`.
    pub args: String,
    /// `CNI_PATH`, split on `:`.
    pub path: Vec<PathBuf>,
    /// `CNI_NETNS_OVERRIDE` is `1` or `true`.
    pub netns_override: bool,
    /// The raw config bytes, kept for delegation.
    pub stdin: Vec<u8>,
    /// The config as parsed once by the skel (the JSON object of `stdin`;
    /// `Null` only where a test builds the arguments by hand): a plugin
    /// reads its keys from it with [`crate::gojson::from_value`], which
    /// gives the same values and errors as parsing `stdin` again.
    pub config: serde_json::Value,
    /// The common keys of the config.
    pub conf: crate::conf::NetConf,
    /// The pid of the process that ran the plugin, read when the plugin
    /// started (before stdin; see [`invoker_of`]), so that
    /// [`CmdArgs::invoker_gone`] can tell whether anyone is still waiting
    /// for the result.
    pub invoker: Option<u32>,
}

impl CmdArgs {
    /// True when the process that ran the plugin has exited since the
    /// plugin started (this process was handed to another parent): a
    /// runtime, or a delegating plugin killed mid-ADD. Its result would
    /// reach nobody, so what it would reserve would leak.
    pub fn invoker_gone(&self) -> bool {
        self.invoker
            .is_some_and(|pid| pid != std::os::unix::process::parent_id())
    }

    /// The config's `cniVersion` (`0.1.0` when missing).
    pub fn cni_version(&self) -> &str {
        self.conf.cni_version()
    }

    /// The `prevResult` as the config holds it (an object; `None` when
    /// absent or null).
    pub fn prev_result_value(&self) -> Option<&serde_json::Value> {
        self.conf.prev_result?;
        crate::conf::field(&self.config, "prevResult")
    }

    /// The `prevResult`, parsed in the config's version family.
    pub fn prev_result(&self) -> Result<Option<crate::types::CniResult>, CniError> {
        match self.prev_result_value() {
            None => Ok(None),
            Some(v) => crate::types::CniResult::parse_prev(v, self.cni_version())
                .map(Some)
                .map_err(|e| e.context("failed to parse prevResult")),
        }
    }

    /// The `prevResult` a chained plugin cannot do without:
    /// [`CmdArgs::prev_result`], and when the config has none an internal
    /// error (code 999) saying `missing` (each plugin's reference text).
    pub fn required_prev_result(&self, missing: &str) -> Result<crate::types::CniResult, CniError> {
        self.prev_result()?
            .ok_or_else(|| CniError::internal(missing))
    }

    /// Parsed `CNI_ARGS`, with only `known` keys allowed unless `IgnoreUnknown`.
    pub fn cni_args(&self, known: &[&str]) -> Result<crate::args::CniArgs, CniError> {
        crate::args::CniArgs::load(&self.args, known)
    }
}

/// Set by a delegating rcni plugin to its own pid in its delegate's
/// environment ([`crate::delegate`]). A delegate may read its parent only
/// after the delegator was killed (between fork and the delegate's first
/// instruction): its parent is then already someone else, and the pid
/// named here tells it that the one it was run for has gone.
pub const INVOKER_VAR: &str = "RCNI_INVOKER_PID";

/// How far up [`invoker_of`] looks for the named delegator.
const MAX_ANCESTRY: usize = 16;

/// The pid of the process waiting for this one's result: its parent,
/// unless `named` (the [`INVOKER_VAR`] it was given) names a process that
/// is not among its ancestors, which can only be a delegator that exited
/// before this process looked. `parent_of` reads a process's parent
/// (`None`: cannot tell, and then the parent is taken, so that a process
/// run through an intermediate, say a shell or another plugin, is never
/// told its invoker has gone).
pub(crate) fn invoker_of(
    named: Option<&str>,
    parent: u32,
    parent_of: impl Fn(u32) -> Option<u32>,
) -> u32 {
    let Some(named) = named.and_then(|s| s.parse::<u32>().ok()) else {
        return parent;
    };
    let mut pid = parent;
    for _ in 0..MAX_ANCESTRY {
        if pid == named {
            return parent;
        }
        match parent_of(pid) {
            // Past the top of the tree (pid 1's parent is 0) without meeting it.
            Some(0) => return named,
            Some(up) => pid = up,
            None => return parent,
        }
    }
    parent
}

/// A process's parent, from `/proc/<pid>/stat` (the field after the
/// command name, which may itself hold spaces and parentheses).
pub(crate) fn parent_in_proc(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process tree: 1 (top) -> 40 (runtime) -> 50 (delegator) -> 60 (a
    /// shell between) ; 70 was reparented to 1.
    fn tree(pid: u32) -> Option<u32> {
        match pid {
            1 => Some(0),
            40 => Some(1),
            50 => Some(40),
            60 => Some(50),
            70 => Some(1),
            _ => None,
        }
    }

    #[test]
    fn the_invoker_is_the_parent_unless_a_named_delegator_is_no_ancestor() {
        // Run by a runtime (no name), or by the named delegator itself.
        assert_eq!(invoker_of(None, 50, tree), 50);
        assert_eq!(invoker_of(Some("50"), 50, tree), 50);
        assert_eq!(invoker_of(Some("garbage"), 50, tree), 50);
        // Through a shell the delegator ran: the delegator is an ancestor.
        assert_eq!(invoker_of(Some("50"), 60, tree), 60);
        // The delegator died before we looked: reparented to 1.
        assert_eq!(invoker_of(Some("50"), 1, tree), 50);
        assert_eq!(invoker_of(Some("55"), 70, tree), 55);
        // Cannot tell (no /proc): the parent, never a false "gone".
        assert_eq!(invoker_of(Some("50"), 99, tree), 99);
    }

    #[test]
    fn parent_in_proc_reads_this_process_s_parent() {
        assert_eq!(
            parent_in_proc(std::process::id()),
            Some(std::os::unix::process::parent_id())
        );
        assert_eq!(parent_in_proc(u32::MAX), None);
    }

    #[test]
    fn a_missing_prev_result_is_the_plugins_own_internal_error() {
        let args = CmdArgs {
            command: Command::Check,
            container_id: "c".into(),
            netns: None,
            ifname: "eth0".into(),
            args: String::new(),
            path: Vec::new(),
            netns_override: false,
            stdin: b"{}".to_vec(),
            config: serde_json::json!({}),
            conf: crate::conf::NetConf::default(),
            invoker: None,
        };
        assert!(args.prev_result().unwrap().is_none());
        let e = args
            .required_prev_result("Required prevResult missing")
            .unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (999, "Required prevResult missing")
        );
    }

    #[test]
    fn the_skel_reads_every_variable_it_names() {
        assert_eq!(VARS.last(), Some(&"CNI_PATH"));
        assert!(SKEL_VARS.contains(&NETNS_OVERRIDE_VAR) && SKEL_VARS.contains(&INVOKER_VAR));
    }

    #[test]
    fn names() {
        for ok in ["a", "A1", "some-id_1.2", "0abc"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", ".a", "_a", "a/b", "a b", "..", "a\0", "é"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn container_ids() {
        assert!(validate_container_id("abc-123").is_ok());
        assert_eq!(validate_container_id("").unwrap_err().code, 3);
        let e = validate_container_id("../x").unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str(), e.details.as_str()),
            (4, "invalid characters in containerID", "../x")
        );
    }

    #[test]
    fn interface_names() {
        for ok in ["eth0", "a", "123456789012345", "e.1", "net-1"] {
            assert!(validate_ifname(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "1234567890123456",
            "a/b",
            "a:b",
            "a b",
            "a\tb",
            "a\nb",
        ] {
            assert_eq!(validate_ifname(bad).unwrap_err().code, 4, "{bad:?}");
        }
        assert_eq!(
            validate_ifname("1234567890123456").unwrap_err().msg,
            "interface name is too long"
        );
    }

    #[test]
    fn requirements_per_command() {
        use Command::*;
        assert!(required("CNI_NETNS", Some(Add)));
        assert!(!required("CNI_NETNS", Some(Del)));
        assert!(!required("CNI_CONTAINERID", Some(Gc)));
        assert!(required("CNI_PATH", Some(Status)));
        assert!(!required("CNI_PATH", Some(Version)));
        assert!(required("CNI_COMMAND", None));
        assert!(!required("CNI_PATH", None));
        for c in ["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"] {
            assert_eq!(Command::parse(c).unwrap().as_str(), c);
        }
        assert!(Command::parse("add").is_none());
    }
}
