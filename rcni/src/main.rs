//! `rcni`: every plugin of the release in one static binary, which runs
//! the plugin it is called as. Installed as `rcni` with one link per
//! plugin name beside it (`bridge -> rcni`, ...), it is run by a runtime
//! as `/opt/cni/bin/bridge`: the basename of `argv[0]` names the plugin,
//! so a copy renamed `bridge` elsewhere still runs bridge. Tools call it
//! as `rcni <plugin> [args...]` (`rcni dhcp daemon ...`).
//!
//! Anything else (`rcni` alone, a name no plugin has) prints a short usage
//! with the plugin names on stderr and exits 2; when a runtime ran it
//! (`CNI_COMMAND` set) a CNI error on stdout says the same.

// dlmalloc rather than musl's allocator, as every plugin binary (cni-alloc).
use cni_alloc as _;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// A plugin's entry point: the command-line arguments after the program
/// name.
type Main = fn(cni_skel::ProgramArgs) -> ExitCode;

/// The plugins, by the name each is called as, sorted: the release
/// tarball's set (every plugin but noop, the test double). Each library's
/// `main` takes the arguments after the program name.
const PLUGINS: &[(&str, Main)] = &[
    ("bandwidth", bandwidth::main),
    ("bridge", bridge::main),
    ("dhcp", dhcp::main),
    ("dummy", dummy::main),
    ("firewall", firewall::main),
    ("host-device", host_device::main),
    ("host-local", host_local::main),
    ("ipvlan", ipvlan::main),
    ("loopback", loopback::main),
    ("macvlan", macvlan::main),
    ("portmap", portmap::main),
    ("ptp", ptp::main),
    ("sbr", sbr::main),
    ("static", r#static::main),
    ("tap", tap::main),
    ("tuning", tuning::main),
    ("vlan", vlan::main),
    ("vrf", vrf::main),
];

/// The order of the functions at link time (scripts/link-ordered reads
/// it, by path): named here only so that cargo relinks rcni when it
/// changes (rustc lists an included file among the crate's inputs). An
/// unused constant: nothing of it is in the binary.
const _LINK_ORDER: &str = include_str!("../link-order");

/// The name of the multicall binary itself: called so, the first argument
/// names the plugin.
const SELF: &str = "rcni";

/// What one command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    /// Run this plugin (its index in [`PLUGINS`]) with these arguments.
    Run(usize, Vec<OsString>),
    /// `rcni --list`: the plugin names, one a line, on stdout.
    List,
    /// `rcni --help`: the usage on stdout.
    Help,
    /// `rcni --version`.
    Version,
    /// `rcni` alone: the usage on stderr, exit 2.
    Usage,
    /// A name no plugin has (lossy if not UTF-8): an error, exit 2.
    Unknown(String),
}

/// Reads a command line: `argv0` the program name as called (absent when
/// the caller passed an empty argv), `args` the rest.
fn resolve(argv0: Option<&OsStr>, mut args: Vec<OsString>) -> Action {
    let name = argv0.map(Path::new).and_then(Path::file_name);
    let name = match name {
        None => return Action::Usage,
        Some(n) if n == SELF => {
            if args.is_empty() {
                return Action::Usage;
            }
            let first = args.remove(0);
            match first.to_str() {
                Some("--list") => return Action::List,
                Some("-h" | "--help") => return Action::Help,
                Some("--version") => return Action::Version,
                _ => first,
            }
        }
        Some(n) => n.to_os_string(),
    };
    match PLUGINS.iter().position(|(p, _)| name == *p) {
        Some(i) => Action::Run(i, args),
        None => Action::Unknown(name.to_string_lossy().into_owned()),
    }
}

fn usage() -> String {
    let names: Vec<&str> = PLUGINS.iter().map(|(n, _)| *n).collect();
    format!(
        "{SELF} v{release}: the rcni CNI plugins in one binary, run as the plugin it is called as\n\
         usage: <plugin>                  (a link to {SELF} named after the plugin, e.g. /opt/cni/bin/bridge)\n\
         \x20      {SELF} <plugin> [args...]\n\
         \x20      {SELF} --list | --help | --version\n\
         plugins: {names}\n",
        release = cni_skel::RELEASE,
        names = names.join(", "),
    )
}

fn main() -> ExitCode {
    let mut argv = std::env::args_os();
    let argv0 = argv.next();
    let (stdout, stderr) = match resolve(argv0.as_deref(), argv.collect()) {
        Action::Run(i, args) => return (PLUGINS[i].1)(cni_skel::ProgramArgs::Given(args)),
        Action::List => {
            let names: String = PLUGINS.iter().map(|(n, _)| format!("{n}\n")).collect();
            (names, String::new())
        }
        Action::Help => (usage(), String::new()),
        Action::Version => (format!("{SELF} v{}\n", cni_skel::RELEASE), String::new()),
        Action::Usage => return fail(usage(), "no plugin named".into()),
        Action::Unknown(name) => {
            let msg = format!("no plugin named {name:?} in {SELF}");
            return fail(format!("{SELF}: {msg}\n{}", usage()), msg);
        }
    };
    // Nobody may be reading; a broken pipe is not worth a panic.
    let _ = std::io::stdout().lock().write_all(stdout.as_bytes());
    let _ = std::io::stderr().lock().write_all(stderr.as_bytes());
    ExitCode::SUCCESS
}

/// Prints `text` on stderr and, when a runtime is asking (`CNI_COMMAND` is
/// set), a CNI error with `msg` on stdout; exit status 2.
fn fail(text: String, msg: String) -> ExitCode {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
    if std::env::var_os("CNI_COMMAND").is_some_and(|c| !c.is_empty()) {
        let e = cni_skel::CniError::new(cni_skel::error::code::INTERNAL, msg, "");
        let _ = std::io::stdout()
            .lock()
            .write_all(e.to_json(cni_skel::version::CURRENT).as_bytes());
    }
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn index(name: &str) -> usize {
        PLUGINS.iter().position(|(n, _)| *n == name).unwrap()
    }

    #[test]
    fn plugins_sorted_and_unique() {
        let names: Vec<&str> = PLUGINS.iter().map(|(n, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        assert!(!names.contains(&SELF) && !names.contains(&"noop"));
    }

    /// scripts/dist reads the plugins in the table from the manifest (a
    /// cross build cannot run `rcni --list`): the two must agree.
    #[test]
    fn plugins_are_the_manifests_dependencies() {
        let mut deps: Vec<&str> = include_str!("../Cargo.toml")
            .lines()
            .filter_map(|l| l.split("path = \"../plugins/").nth(1))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        deps.sort_unstable();
        let names: Vec<&str> = PLUGINS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, deps);
    }

    /// Every plugin the release ships (a directory under plugins/, but
    /// noop) is in the table: the multicall form is the whole set.
    #[test]
    fn plugins_are_the_release_set() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
        let mut shipped: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "noop")
            .collect();
        shipped.sort_unstable();
        let names: Vec<&str> = PLUGINS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, shipped);
    }

    #[test]
    fn dispatch_by_basename() {
        for argv0 in ["bridge", "/opt/cni/bin/bridge", "./bridge", "/tmp/x/bridge"] {
            assert_eq!(
                resolve(Some(OsStr::new(argv0)), os(&["a", "b"])),
                Action::Run(index("bridge"), os(&["a", "b"])),
                "{argv0}"
            );
        }
        assert_eq!(
            resolve(Some(OsStr::new("/usr/lib/cni/host-local")), vec![]),
            Action::Run(index("host-local"), vec![])
        );
    }

    #[test]
    fn tool_form_names_the_plugin() {
        assert_eq!(
            resolve(Some(OsStr::new("/usr/bin/rcni")), os(&["bridge", "x"])),
            Action::Run(index("bridge"), os(&["x"]))
        );
        let rcni = Some(OsStr::new("rcni"));
        assert_eq!(resolve(rcni, os(&["--list"])), Action::List);
        assert_eq!(resolve(rcni, os(&["--help"])), Action::Help);
        assert_eq!(resolve(rcni, os(&["--version"])), Action::Version);
        assert_eq!(resolve(rcni, os(&["rcni"])), Action::Unknown("rcni".into()));
        assert_eq!(resolve(rcni, os(&["noop"])), Action::Unknown("noop".into()));
    }

    #[test]
    fn anything_else_is_usage_or_unknown() {
        assert_eq!(resolve(Some(OsStr::new("rcni")), vec![]), Action::Usage);
        assert_eq!(resolve(None, os(&["bridge"])), Action::Usage);
        assert_eq!(resolve(Some(OsStr::new("")), vec![]), Action::Usage);
        assert_eq!(resolve(Some(OsStr::new("/")), vec![]), Action::Usage);
        assert_eq!(
            resolve(Some(OsStr::new("/opt/cni/bin/bridge.old")), vec![]),
            Action::Unknown("bridge.old".into())
        );
        assert_eq!(
            resolve(Some(OsStr::from_bytes(b"br\xffidge")), vec![]),
            Action::Unknown("br\u{fffd}idge".into())
        );
    }

    #[test]
    fn usage_lists_every_plugin() {
        let u = usage();
        for (n, _) in PLUGINS {
            assert!(u.contains(n), "{n}: {u}");
        }
    }
}
