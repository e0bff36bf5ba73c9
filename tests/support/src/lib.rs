//! What the unit tests of the crates and the integration tests in `tests/`
//! share: visible skips, the ledger of kernel features, and fake plugins
//! to delegate to ([`FakePlugin`]).
//!
//! A test that exists to check a kernel feature this machine lacks (a link
//! kind, VLAN filtering on bridges) cannot pass here by skipping it: it
//! skips here and runs in a VM (`scripts/vmtest`) whose kernel has it,
//! where `RCNI_REQUIRE_KERNEL_FEATURES=1` turns the skip into a failure.
//! Each test declares the feature it needs as it runs
//! ([`skip_without_kernel_feature`] where the kernel lacks it,
//! [`kernel_feature_present`] where it has it), and with
//! `RCNI_FEATURE_LEDGER=<file>` each declaration is a line in that file.
//! `scripts/test` points the host's runs and the VMs at one ledger;
//! `scripts/vmtest` runs every test the host skipped for a feature (no
//! list of names to keep), and `scripts/test` fails when one of them ran
//! nowhere that has it.

// Test code: failing loudly is its job.
#![allow(clippy::panic)]

use std::io::Write;

/// The environment variable naming the ledger file.
pub const LEDGER_VAR: &str = "RCNI_FEATURE_LEDGER";

/// The environment variable with which a VM says its kernel has every
/// feature the tests need.
pub const REQUIRE_VAR: &str = "RCNI_REQUIRE_KERNEL_FEATURES";

/// True when running as root (the effective uid, from `/proc`, to need no
/// libc call).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Prints a visible skip line and returns true when not root.
pub fn skip_unless_root(test: &str) -> bool {
    if is_root() {
        return false;
    }
    say_skip(test, "needs root");
    true
}

/// Prints a visible skip line (straight to stderr: libtest captures
/// `eprintln!` of passing tests).
pub fn say_skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: {why}");
}

/// For a test whose kernel lacks `feature`, which the test exists to check:
/// records the skip in the ledger and prints one SKIP line, so the caller
/// returns; fails the test where [`REQUIRE_VAR`] says the kernel has every
/// feature (scripts/vmtest's VMs).
pub fn skip_without_kernel_feature(test: &str, feature: &str) {
    if std::env::var_os(REQUIRE_VAR).is_some_and(|v| v == "1") {
        panic!("{test}: this kernel lacks {feature} ({REQUIRE_VAR}=1 requires it)");
    }
    record("skipped", test, feature);
    say_skip(
        test,
        &format!("this kernel lacks {feature} (scripts/vmtest runs it under one that has it)"),
    );
}

/// For a test of `feature` whose kernel has it: records in the ledger that
/// the test ran with it.
pub fn kernel_feature_present(test: &str, feature: &str) {
    record("ran", test, feature);
}

/// Appends `<what>\t<test binary>\t<test>\t<feature>` to the ledger, if
/// there is one. The test is the libtest thread's name (the test's full
/// path, which no caller can mistype), else `test`; the binary is the
/// test target's name without cargo's hash, the same in debug and release
/// builds and in the VMs.
fn record(what: &str, test: &str, feature: &str) {
    let Some(path) = std::env::var_os(LEDGER_VAR).filter(|p| !p.is_empty()) else {
        return;
    };
    let thread = std::thread::current();
    let name = thread.name().filter(|n| *n != "main").unwrap_or(test);
    let line = format!("{what}\t{}\t{name}\t{feature}\n", test_binary());
    // One write of a short line to a file opened for appending: lines of
    // tests running side by side do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("cannot record in the feature ledger {path:?}: {e}");
    }
}

/// The running test binary's target name: `ipvlan-0123456789abcdef` →
/// `ipvlan`.
fn test_binary() -> String {
    let exe = std::env::current_exe().ok();
    let file = exe
        .as_deref()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("?");
    strip_hash(file).to_string()
}

fn strip_hash(file: &str) -> &str {
    match file.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name
        }
        _ => file,
    }
}

/// A fake plugin for delegation tests (an IPAM plugin a plugin delegates
/// to): an executable shell script in a fresh directory of its own, which
/// goes when this is dropped. The script finds its directory as
/// `"${0%/*}"` (it is run by its full path), to leave files there that
/// the test reads.
#[derive(Debug)]
pub struct FakePlugin {
    dir: std::path::PathBuf,
}

impl FakePlugin {
    /// The plugin `name` whose script is `#!/bin/sh` then `body`; `tag`
    /// names the directory (with the process id and a counter, so that
    /// parallel tests never share one).
    pub fn new(tag: &str, name: &str, body: &str) -> FakePlugin {
        use std::os::unix::fs::PermissionsExt;
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rcni-fake-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let script = dir.join(name);
        let made = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&script, format!("#!/bin/sh\n{body}")))
            .and_then(|()| {
                std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700))
            });
        if let Err(e) = made {
            panic!("fake plugin {}: {e}", script.display());
        }
        FakePlugin { dir }
    }

    /// The plugin's directory (for `CNI_PATH`).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

impl Drop for FakePlugin {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_names_lose_cargos_hash() {
        assert_eq!(strip_hash("ipvlan-0123456789abcdef"), "ipvlan");
        assert_eq!(strip_hash("cni_net-89abcdef01234567"), "cni_net");
        assert_eq!(strip_hash("host-local"), "host-local");
        assert_eq!(strip_hash("a-b-c"), "a-b-c");
    }

    #[test]
    fn a_fake_plugin_runs_in_its_own_directory_and_goes_when_dropped() {
        let fake = FakePlugin::new("dd-self", "dd-ipam", ": > \"${0%/*}/ran\"\necho dd_out\n");
        let dir = fake.dir().to_path_buf();
        let other = FakePlugin::new("dd-self", "dd-ipam", "");
        assert_ne!(other.dir(), dir);
        let out = std::process::Command::new(dir.join("dd-ipam"))
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.stdout, b"dd_out\n");
        assert!(dir.join("ran").exists());
        drop(fake);
        assert!(!dir.exists());
    }
}
