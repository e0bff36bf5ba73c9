//! The multicall binary `rcni` (rcni/): one binary that runs the plugin
//! named by the basename it is called as. Tags `mc…`, subnets
//! 10.159.N.0/24.
//!
//! It runs `bin("rcni")`: the debug build, or the release's when
//! `RCNI_BIN_DIR` points at an untarred multicall tarball
//! (`scripts/dist-test multicall`, which also runs about.rs and smoke.rs
//! through the tarball's own links).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::iface_util::bridge_add_check_del;
use rcni_tests::tempdir::TempDir;
use rcni_tests::{Invocation, PluginOutput, bin, skip_unless_root};
use std::path::Path;

/// The plugin names `rcni --list` prints.
fn names() -> Vec<String> {
    let out = std::process::Command::new(bin("rcni"))
        .arg("--list")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// A directory with a symlink per plugin name to `bin("rcni")`, as the
/// multicall tarball installs them.
fn linked(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    for n in names() {
        std::os::unix::fs::symlink(bin("rcni"), dir.join(&n)).unwrap();
    }
    dir
}

/// The about text's first line, as the skel prints it for `name`.
fn about_line(name: &str) -> String {
    format!("CNI {name} plugin v{}+rcni", env!("CARGO_PKG_VERSION"))
}

fn about(program: &Path) -> PluginOutput {
    Invocation::new(program, "").unset("CNI_COMMAND").run()
}

/// What the usage says and how: exit 2, the names on stderr.
fn assert_usage(out: &PluginOutput, names: &[String]) {
    assert_eq!(out.code, 2, "{out:?}");
    let plugins = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("plugins: "))
        .unwrap_or_else(|| panic!("no plugin list: {out:?}"));
    assert_eq!(plugins, names.join(", "), "{out:?}");
}

#[test]
fn lists_the_release_set() {
    let names = names();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(names.iter().any(|n| n == "bridge"), "{names:?}");
    assert!(names.iter().any(|n| n == "host-local"), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "noop" || n == "rcni"),
        "{names:?}"
    );
    // Every name is a plugin directory.
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
    for n in &names {
        assert!(plugins.join(n).is_dir(), "{n}");
    }
}

#[test]
fn every_link_answers_as_its_plugin() {
    let dir = linked("mc-links");
    for n in names() {
        let link = dir.join(&n);
        let out = about(&link);
        assert_eq!(out.code, 0, "{n}: {out:?}");
        assert_eq!(out.stderr.lines().next(), Some(&*about_line(&n)), "{n}");
        let v = Invocation::new(&link, "VERSION").run().ok();
        assert_eq!(v["cniVersion"], "1.1.0", "{n}: {v}");
    }
}

/// `cp from to`: copied by another process, so no thread of this one
/// forking meanwhile inherits a descriptor open for writing on `to` (the
/// exec of `to` would fail with ETXTBSY).
fn copy_file(from: &Path, to: &Path) {
    let st = std::process::Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp {} {}", from.display(), to.display());
}

#[test]
fn a_copy_dispatches_by_its_new_name() {
    let dir = TempDir::new("mc-copy");
    let names = names();
    // A copy (not a link) named after a plugin is that plugin.
    for n in ["bridge", "host-local"] {
        let copy = dir.join(n);
        copy_file(&bin("rcni"), &copy);
        let out = about(&copy);
        assert_eq!(out.stderr.lines().next(), Some(&*about_line(n)), "{out:?}");
    }
    // Renamed to no plugin's name: the usage with the names, exit 2, and
    // for a runtime a CNI error on stdout.
    let other = dir.join("bridge.old");
    copy_file(&bin("rcni"), &other);
    let out = about(&other);
    assert_usage(&out, &names);
    assert!(
        out.stderr
            .starts_with("rcni: no plugin named \"bridge.old\""),
        "{out:?}"
    );
    assert_eq!(out.stdout, "");
    let out = Invocation::new(&other, "ADD").run();
    assert_usage(&out, &names);
    let e = out.json();
    assert_eq!(e["code"], 999, "{e}");
    assert_eq!(e["msg"], "no plugin named \"bridge.old\" in rcni", "{e}");
}

#[test]
fn rcni_alone_prints_the_usage_and_names_the_plugin_in_tool_form() {
    let names = names();
    let rcni = bin("rcni");
    let out = about(&rcni);
    assert_usage(&out, &names);
    assert_eq!(out.stdout, "");
    // `rcni <type>`: the plugin, its arguments after the name.
    let run = |args: &[&str], cmd: &str| {
        let o = std::process::Command::new(&rcni)
            .args(args)
            .env_clear()
            .env("CNI_COMMAND", cmd)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, _, err) = run(&["bridge"], "");
    assert_eq!(code, Some(0));
    assert_eq!(err.lines().next(), Some(&*about_line("bridge")));
    let (code, out, _) = run(&["host-local"], "VERSION");
    assert_eq!(code, Some(0));
    assert!(out.contains("\"supportedVersions\""), "{out}");
    let (code, out, err) = run(&["nonesuch"], "");
    assert_eq!(code, Some(2));
    assert_eq!(out, "");
    assert!(
        err.starts_with("rcni: no plugin named \"nonesuch\""),
        "{err}"
    );
    let (code, out, _) = run(&["--version"], "");
    assert_eq!(code, Some(0));
    assert_eq!(out, format!("rcni v{}\n", env!("CARGO_PKG_VERSION")));
}

/// bridge delegating to host-local, both links to rcni (CNI_PATH is the
/// link directory): ADD, CHECK, DEL in a throwaway host namespace.
#[test]
fn bridge_and_host_local_add_check_del_through_links() {
    if skip_unless_root("multicall::bridge_and_host_local_add_check_del_through_links") {
        return;
    }
    let dir = linked("mc-br");
    bridge_add_check_del(&dir.join("bridge"), "mc", "10.159.1");
}
