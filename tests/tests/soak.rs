//! A bounded run of scripts/soak (50 ADD/DEL cycles of bridge+host-local+
//! portmap+firewall+tuning and ptp+host-local in private namespaces
//! `cxsoak*`): nothing may be left, and every tuning DEL must have put the
//! container's interface back. `RCNI_SOAK_CYCLES` changes the count.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::{FIREWALL_TOOLS, bin_dir, skip_unless};
use std::io::Write;
use std::process::Command;

#[test]
fn soak_bounded() {
    if skip_unless("soak_bounded", &[FIREWALL_TOOLS, &["python3"]].concat()) {
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/soak");
    let cycles = std::env::var("RCNI_SOAK_CYCLES").unwrap_or_else(|_| "50".into());
    let out = Command::new("python3")
        .arg(&script)
        .args(["--cycles", &cycles, "--bin-dir"])
        .arg(bin_dir())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIP soak_bounded: no python3 ({e})");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::io::stderr().write_all(text.as_bytes());
    assert!(
        out.status.success(),
        "soak failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
