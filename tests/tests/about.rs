//! Every plugin's about text (run with no `CNI_COMMAND`, as `/opt/cni/bin/bridge`
//! typed at a shell): one format for the whole set, `cni_skel::about`'s.
//!
//! It runs the binaries in `RCNI_BIN_DIR` (or `target/<profile>`), so the
//! release tests point it at an untarred release or at `/usr/lib/cni`
//! after the .deb is installed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::{Invocation, bin};
use std::path::Path;

/// The plugins we ship: one directory per plugin under `plugins/`, but
/// `noop`, the test double (it prints the Go test plugin's about text).
fn shipped() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "noop")
        .collect();
    names.sort();
    names
}

/// A spec version as the skel prints it: `x.y.z`.
fn is_spec_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

#[test]
fn every_plugin_prints_one_about_format() {
    let names = shipped();
    assert_eq!(names.len(), 18, "{names:?}");
    let release = env!("CARGO_PKG_VERSION");
    for name in &names {
        for inv in [
            Invocation::new(bin(name), "").unset("CNI_COMMAND"),
            Invocation::new(bin(name), ""),
        ] {
            let out = inv.run();
            assert_eq!(out.code, 0, "{name}: {out:?}");
            assert_eq!(out.stdout, "", "{name}: {out:?}");
            let lines: Vec<&str> = out.stderr.lines().collect();
            assert_eq!(lines.len(), 2, "{name}: {out:?}");
            // The Go reference's `CNI <type> plugin <version>`, the version
            // one semver token whose build metadata says whose it is.
            assert_eq!(
                lines[0],
                format!("CNI {name} plugin v{release}+rcni"),
                "{name}"
            );
            let versions = lines[1]
                .strip_prefix("CNI protocol versions supported: ")
                .unwrap_or_else(|| panic!("{name}: {:?}", lines[1]));
            let versions: Vec<&str> = versions.split(", ").collect();
            assert!(
                versions.iter().all(|v| is_spec_version(v)),
                "{name}: {versions:?}"
            );
            assert!(versions.contains(&"1.1.0"), "{name}: {versions:?}");
        }
    }
}
