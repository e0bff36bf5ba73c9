//! Configs the reference accepts that rcni used to refuse (issue 28, "as
//! tolerant as the reference"), each run through ours and Go's
//! (/usr/lib/cni, Debian's v1.1.1, installed by scripts/test-deps) on
//! identical fresh namespaces, asserting the same outcome: success or
//! failure, and the kernel state that matters. Tags `par…`, subnets
//! 10.162.N.0/24 and fd62:N::/64.

#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::host_local_util::DataDir;
use rcni_tests::{Invocation, Netns, PluginOutput, bin, go_bin, skip_unless_root};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// One side's run: whether ADD succeeded, and what `look` saw after it.
#[derive(Debug, PartialEq)]
struct Outcome {
    ok: bool,
    state: String,
}

/// A private host namespace and a container namespace.
struct Pair {
    host: Netns,
    cont: Netns,
}

impl Pair {
    fn new() -> Pair {
        let host = Netns::new("parh");
        host.exec_ok("ip", &["link", "set", "lo", "up"]);
        Pair {
            host,
            cont: Netns::new("parc"),
        }
    }

    fn run(&self, plugin: &Path, cmd: &str, conf: &Value) -> PluginOutput {
        Invocation::new(plugin, cmd)
            .attach("par1", &self.cont, "eth0")
            .in_host(&self.host)
            .config(conf)
            .run()
    }
}

/// Ours and Go's `kind`.
fn both(kind: &str) -> [PathBuf; 2] {
    let go = go_bin(kind).unwrap_or_else(|| panic!("no Go {kind}: run scripts/test-deps"));
    [bin(kind), go]
}

/// ADD of `conf` by ours and by Go's `kind`, each in a fresh [`Pair`]
/// (`prepare`d) with its own host-local `dataDir` when `conf` has an
/// `ipam`: the same success or failure and the same `look` after ADD on
/// both sides (returned). DEL then succeeds on both sides.
fn same_outcome(
    kind: &str,
    conf: &Value,
    prepare: impl Fn(&Pair),
    look: impl Fn(&Pair) -> String,
) -> Outcome {
    let [ours, theirs] = both(kind).map(|plugin| {
        let p = Pair::new();
        prepare(&p);
        let data = DataDir::new("par");
        let mut c = conf.clone();
        if c.get("ipam").is_some() {
            c["ipam"]["dataDir"] = json!(data.path().display().to_string());
        }
        let out = p.run(&plugin, "ADD", &c);
        let got = Outcome {
            ok: out.code == 0,
            state: look(&p),
        };
        let del = p.run(&plugin, "DEL", &c);
        assert_eq!(del.code, 0, "{} DEL {c}: {del:?}", plugin.display());
        (got, out)
    });
    assert_eq!(
        ours.0, theirs.0,
        "{kind} {conf}: ours {:?}, Go's {:?}",
        ours.1, theirs.1
    );
    ours.0
}

/// The MTU of `dev` in `ns`.
fn mtu(ns: &Netns, dev: &str) -> u64 {
    ns.ip_json(&["link", "show", dev])[0]["mtu"]
        .as_u64()
        .unwrap()
}

/// The MTUs of the container's `eth0` and of every link in the host but
/// `lo` (the bridge, the host veth), or "none" where there is none.
fn mtus(p: &Pair) -> String {
    let mut out = Vec::new();
    if p.cont.link_names().iter().any(|l| l == "eth0") {
        out.push(format!("eth0 {}", mtu(&p.cont, "eth0")));
    }
    for l in p.host.link_names() {
        if l != "lo" {
            // Host veth names are random: the kind stands for the name.
            let kind = if l.starts_with("veth") { "veth" } else { &l };
            out.push(format!("{kind} {}", mtu(&p.host, &l)));
        }
    }
    out.sort();
    if out.is_empty() {
        "none".into()
    } else {
        out.join(", ")
    }
}

/// bridge and ptp: an `mtu` of 0 or less is the kernel's default (Go's
/// netlink sends no MTU then), 68 and 65535 are set, 67 and 65536 fail
/// (the kernel refuses them; ours before creating anything, leaving
/// nothing either).
#[test]
fn par_bridge_ptp_mtu_like_go() {
    if skip_unless_root("parity::par_bridge_ptp_mtu_like_go") {
        return;
    }
    for (kind, n) in [("bridge", 1), ("ptp", 2)] {
        for (m, want) in [
            (json!(0), Some(1500)),
            (json!(-1), Some(1500)),
            (json!(-100000), Some(1500)),
            (json!(68), Some(68)),
            (json!(65535), Some(65535)),
            (json!(67), None),
            (json!(65536), None),
        ] {
            let conf = json!({
                "cniVersion": "1.0.0", "name": "parnet", "type": kind,
                "bridge": "parbr0", "mtu": m,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": format!("10.162.{n}.0/24")}]]},
            });
            let got = same_outcome(kind, &conf, |_| {}, mtus);
            match want {
                Some(w) => {
                    assert!(got.ok, "{kind} mtu {m}");
                    let links = if kind == "bridge" {
                        format!("eth0 {w}, parbr0 {w}, veth {w}")
                    } else {
                        format!("eth0 {w}, veth {w}")
                    };
                    assert_eq!(got.state, links, "{kind} mtu {m}");
                }
                None => {
                    assert!(!got.ok, "{kind} mtu {m}");
                    assert_eq!(got.state, "none", "{kind} mtu {m}");
                }
            }
        }
    }
}
