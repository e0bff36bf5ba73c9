//! Every skel rule (reference-behaviour §1.3, §2), checked by exec'ing the
//! built `noop` plugin exactly as a runtime would. Without a debug file noop
//! answers `{}`, so whatever fails here failed in the skel.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::tempdir::TempDir;
use rcni_tests::{Invocation, PluginOutput, bin};
use serde_json::{Value, json};

const ALL: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];
const NOOP_VERSIONS: &str =
    r#"["0.-42.0" "0.1.0" "0.2.0" "0.3.0" "0.3.1" "0.4.0" "1.0.0" "1.1.0"]"#;

fn noop(cmd: &str) -> Invocation {
    Invocation::new(bin("noop"), cmd)
}

/// All the attachment variables set, to a netns path that is not ours.
fn full(cmd: &str) -> Invocation {
    noop(cmd)
        .env("CNI_CONTAINERID", "c1")
        .env("CNI_NETNS", "/nonexistent/netns")
        .env("CNI_IFNAME", "eth0")
}

fn conf(version: &str) -> String {
    json!({"cniVersion": version, "name": "skel-test", "type": "noop"}).to_string()
}

/// The noop answer without a debug file.
fn assert_ok(out: &PluginOutput) {
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "{}", "{out:?}");
}

/// A CNI error: exit 1, stdout holding exactly one JSON object (no trailing
/// newline, as the Go skel prints it), nothing on stderr.
fn assert_err(out: &PluginOutput, code: u64, msg: &str) -> Value {
    let e = out.err();
    assert!(e.is_object(), "{out:?}");
    assert!(!out.stdout.ends_with('\n'), "trailing newline: {out:?}");
    assert_eq!(out.stderr, "", "{out:?}");
    assert_eq!(e["code"], code, "{out:?}");
    assert_eq!(e["msg"], msg, "{out:?}");
    e
}

#[test]
fn missing_env_vars_are_all_reported_at_once() {
    for (cmd, missing) in [
        ("ADD", "CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME,CNI_PATH"),
        ("CHECK", "CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME,CNI_PATH"),
        ("DEL", "CNI_CONTAINERID,CNI_IFNAME,CNI_PATH"),
        ("GC", "CNI_PATH"),
        ("STATUS", "CNI_PATH"),
    ] {
        let out = noop(cmd).unset("CNI_PATH").stdin(conf("1.1.0")).run();
        let e = assert_err(
            &out,
            4,
            &format!("required env variables [{missing}] missing"),
        );
        assert!(e.get("details").is_none(), "{e}");
    }
    // One missing among the others.
    let out = full("ADD").unset("CNI_NETNS").stdin(conf("1.0.0")).run();
    assert_err(&out, 4, "required env variables [CNI_NETNS] missing");
    let out = full("CHECK")
        .unset("CNI_IFNAME")
        .unset("CNI_PATH")
        .stdin(conf("1.0.0"))
        .run();
    assert_err(
        &out,
        4,
        "required env variables [CNI_IFNAME,CNI_PATH] missing",
    );
}

#[test]
fn optional_env_vars_per_command() {
    // DEL needs no netns; GC and STATUS need no attachment; VERSION nothing.
    assert_ok(&full("DEL").unset("CNI_NETNS").stdin(conf("1.0.0")).run());
    assert_ok(&noop("GC").stdin(conf("1.1.0")).run());
    assert_ok(&noop("STATUS").stdin(conf("1.1.0")).run());
    let out = noop("VERSION").unset("CNI_PATH").run();
    assert_eq!(out.code, 0, "{out:?}");
    // CNI_ARGS is optional everywhere; an empty value counts as missing.
    assert_ok(&full("ADD").env("CNI_ARGS", "").stdin(conf("1.0.0")).run());
}

#[test]
fn about_text_on_empty_command() {
    let expected = "CNI noop plugin v0.7.0\nCNI protocol versions supported: 0.-42.0, 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0\n";
    for inv in [
        noop(""),
        noop("").unset("CNI_COMMAND"),
        noop("").unset("CNI_PATH"),
    ] {
        let out = inv.run();
        assert_eq!(out.code, 0, "{out:?}");
        assert_eq!(out.stdout, "", "{out:?}");
        assert_eq!(out.stderr, expected, "{out:?}");
    }
}

#[test]
fn bad_container_id() {
    for cmd in ["ADD", "DEL", "CHECK"] {
        for id in ["bad/id", "-lead", "a b", "../etc", "é"] {
            let out = full(cmd)
                .env("CNI_CONTAINERID", id)
                .stdin(conf("1.0.0"))
                .run();
            let e = assert_err(&out, 4, "invalid characters in containerID");
            assert_eq!(e["details"], id);
        }
    }
    for id in ["a", "A1", "some-id_1.2", "0abc"] {
        assert_ok(
            &full("ADD")
                .env("CNI_CONTAINERID", id)
                .stdin(conf("1.0.0"))
                .run(),
        );
    }
    // GC does not look at the container ID.
    assert_ok(
        &noop("GC")
            .env("CNI_CONTAINERID", "bad/id")
            .stdin(conf("1.1.0"))
            .run(),
    );
}

#[test]
fn bad_interface_name() {
    for cmd in ["ADD", "DEL", "CHECK"] {
        let out = full(cmd)
            .env("CNI_IFNAME", "1234567890123456")
            .stdin(conf("1.0.0"))
            .run();
        let e = assert_err(&out, 4, "interface name is too long");
        assert_eq!(
            e["details"],
            "interface name should be less than 16 characters"
        );
        for name in [".", ".."] {
            let out = full(cmd).env("CNI_IFNAME", name).stdin(conf("1.0.0")).run();
            assert_err(&out, 4, "interface name is . or ..");
        }
        for name in ["a/b", "a:b", "a b", "a\tb"] {
            let out = full(cmd).env("CNI_IFNAME", name).stdin(conf("1.0.0")).run();
            assert_err(
                &out,
                4,
                "interface name contains / or : or whitespace characters",
            );
        }
    }
    for name in ["123456789012345", "e.1", "net-1", "a"] {
        assert_ok(
            &full("ADD")
                .env("CNI_IFNAME", name)
                .stdin(conf("1.0.0"))
                .run(),
        );
    }
    // GC does not look at the interface name.
    assert_ok(
        &noop("GC")
            .env("CNI_IFNAME", "a/b")
            .stdin(conf("1.1.0"))
            .run(),
    );
}

#[test]
fn bad_network_name() {
    for stdin in [
        r#"{"cniVersion":"1.0.0"}"#,
        r#"{"cniVersion":"1.0.0","name":""}"#,
    ] {
        assert_err(&full("ADD").stdin(stdin).run(), 7, "missing network name");
    }
    for name in ["bad name", "-x", "a/b", ".."] {
        let stdin = json!({"cniVersion": "1.0.0", "name": name}).to_string();
        for cmd in ["ADD", "DEL", "GC"] {
            let out = full(cmd).stdin(stdin.clone()).run();
            let e = assert_err(&out, 7, "invalid characters found in network name");
            assert_eq!(e["details"], name);
        }
    }
}

#[test]
fn every_spec_version_is_accepted() {
    for v in ALL {
        for cmd in ["ADD", "DEL"] {
            assert_ok(&full(cmd).stdin(conf(v)).run());
        }
    }
    // Missing or empty cniVersion is 0.1.0; noop's bogus "0.-42.0" matches as a string.
    assert_ok(&full("ADD").stdin(r#"{"name":"n"}"#).run());
    assert_ok(&full("ADD").stdin(conf("")).run());
    assert_ok(&full("ADD").stdin(conf("0.-42.0")).run());
}

#[test]
fn unknown_version_is_code_1_with_details() {
    for v in ["9.9.9", "1.0", "0.5.0", "a.b"] {
        for cmd in ["ADD", "DEL"] {
            let out = full(cmd).stdin(conf(v)).run();
            let e = assert_err(&out, 1, "incompatible CNI versions");
            assert_eq!(
                e["details"],
                format!("config is {v:?}, plugin supports {NOOP_VERSIONS}")
            );
        }
    }
}

#[test]
fn check_gc_status_version_gates() {
    for v in ["0.1.0", "0.2.0", "0.3.0", "0.3.1"] {
        assert_err(
            &full("CHECK").stdin(conf(v)).run(),
            1,
            "config version does not allow CHECK",
        );
    }
    for v in ["0.4.0", "1.0.0", "1.1.0"] {
        assert_ok(&full("CHECK").stdin(conf(v)).run());
    }
    for v in ["0.1.0", "0.3.1", "0.4.0", "1.0.0"] {
        assert_err(
            &noop("GC").stdin(conf(v)).run(),
            1,
            "config version does not allow GC",
        );
        assert_err(
            &noop("STATUS").stdin(conf(v)).run(),
            1,
            "config version does not allow STATUS",
        );
    }
    // Unparsable versions are decoding failures on these paths.
    assert_eq!(full("CHECK").stdin(conf("a.b")).run().err()["code"], 6);
    assert_eq!(noop("GC").stdin(conf("1.x")).run().err()["code"], 6);
    // A newer config version than the plugin's newest.
    let out = full("CHECK").stdin(conf("9.0.0")).run();
    assert_err(&out, 1, "plugin version does not allow CHECK");
    let out = noop("STATUS").stdin(conf("1.2.0")).run();
    assert_err(&out, 1, "plugin version does not allow STATUS");
}

#[test]
fn plugin_versions_gate_check_and_gc() {
    // The debug file narrows what noop claims.
    let dir = TempDir::new("skelver");
    let debug = dir.file("debug.json");
    std::fs::write(&debug, r#"{"ReportVersionSupport":["0.3.1"]}"#).unwrap();
    let out = full("CHECK")
        .env("CNI_ARGS", format!("DEBUG={debug}"))
        .stdin(conf("0.4.0"))
        .run();
    assert_err(&out, 1, "plugin version does not allow CHECK");
    std::fs::write(&debug, r#"{"ReportVersionSupport":["1.0.0"]}"#).unwrap();
    let out = noop("GC")
        .env("CNI_ARGS", format!("DEBUG={debug}"))
        .stdin(conf("1.1.0"))
        .run();
    assert_err(&out, 1, "plugin version does not allow GC");
    // Supported by the gate, but still not an exact match.
    std::fs::write(&debug, r#"{"ReportVersionSupport":["0.4.1"]}"#).unwrap();
    let out = full("CHECK")
        .env("CNI_ARGS", format!("DEBUG={debug}"))
        .stdin(conf("0.4.0"))
        .run();
    let e = assert_err(&out, 1, "incompatible CNI versions");
    assert_eq!(
        e["details"],
        r#"config is "0.4.0", plugin supports ["0.4.1"]"#
    );
}

#[test]
fn unknown_command() {
    for cmd in ["FOO", "add", "Version"] {
        let out = full(cmd).stdin(conf("1.0.0")).run();
        assert_err(&out, 4, &format!("unknown CNI_COMMAND: {cmd}"));
        // Needs nothing but CNI_COMMAND.
        let out = noop(cmd).unset("CNI_PATH").stdin(conf("1.0.0")).run();
        assert_err(&out, 4, &format!("unknown CNI_COMMAND: {cmd}"));
    }
    // The config is validated first.
    assert_eq!(noop("FOO").stdin("{").run().err()["code"], 6);
    assert_eq!(noop("FOO").stdin("{}").run().err()["code"], 7);
}

#[test]
fn malformed_json_is_code_6() {
    for stdin in ["", "{", "[]", "nope", "{\"name\":\"n\"} x", "\"str\""] {
        for cmd in ["ADD", "DEL", "CHECK", "GC", "STATUS"] {
            let e = full(cmd).stdin(stdin).run().err();
            assert_eq!(e["code"], 6, "{cmd} {stdin:?}: {e}");
            let msg = e["msg"].as_str().unwrap();
            assert!(
                msg.starts_with("error unmarshall network config: "),
                "{msg}"
            );
        }
    }
}

#[test]
fn wrong_types_for_common_keys_are_code_6() {
    for bad in [
        json!({"name": 1}),
        json!({"name": "n", "cniVersion": 1}),
        json!({"name": "n", "cniVersion": "1.0.0", "type": []}),
        json!({"name": "n", "cniVersion": "1.0.0", "prevResult": "x"}),
        json!({"name": "n", "cniVersion": "1.0.0", "ipam": "x"}),
        json!({"name": "n", "cniVersion": "1.0.0", "ipam": {"type": 5}}),
        json!({"name": "n", "cniVersion": "1.0.0", "dns": []}),
        json!({"name": "n", "cniVersion": "1.0.0", "runtimeConfig": 3}),
        json!({"name": "n", "cniVersion": "1.0.0", "args": "x"}),
    ] {
        let e = full("ADD").config(&bad).run().err();
        assert_eq!(e["code"], 6, "{bad}: {e}");
    }
    // Unknown keys are fine.
    let extra = json!({"name": "n", "cniVersion": "1.0.0", "whatever": [1, {"x": null}]});
    assert_ok(&full("ADD").config(&extra).run());
}

#[test]
fn one_mebibyte_of_stdin_gets_an_answer() {
    let padding = "x".repeat(1 << 20);
    let big = json!({"cniVersion": "1.0.0", "name": "big", "padding": padding});
    assert_ok(&full("ADD").config(&big).run());
    // And an error answer too (the config is read in full before failing).
    let big_bad = json!({"cniVersion": "7.0.0", "name": "big", "padding": "y".repeat(1 << 20)});
    assert_eq!(full("ADD").config(&big_bad).run().err()["code"], 1);
}

#[test]
fn own_netns_is_code_8_unless_overridden() {
    // /proc/self in the plugin process is the plugin: its own netns.
    let msg = "plugin's netns and netns from CNI_NETNS should not be the same";
    for cmd in ["ADD", "DEL", "CHECK"] {
        for path in ["/proc/self/ns/net", "/proc/thread-self/ns/net"] {
            let out = full(cmd).env("CNI_NETNS", path).stdin(conf("1.0.0")).run();
            assert_err(&out, 8, msg);
        }
        for yes in ["1", "true", "TRUE", "True"] {
            let out = full(cmd)
                .env("CNI_NETNS", "/proc/self/ns/net")
                .env("CNI_NETNS_OVERRIDE", yes)
                .stdin(conf("1.0.0"))
                .run();
            assert_ok(&out);
        }
        for no in ["0", "yes", "false"] {
            let out = full(cmd)
                .env("CNI_NETNS", "/proc/self/ns/net")
                .env("CNI_NETNS_OVERRIDE", no)
                .stdin(conf("1.0.0"))
                .run();
            assert_err(&out, 8, msg);
        }
    }
    // A path that is not a netns, or does not exist, is "not the same".
    assert_ok(
        &full("ADD")
            .env("CNI_NETNS", "/etc/hostname")
            .stdin(conf("1.0.0"))
            .run(),
    );
}

#[test]
fn own_netns_in_a_named_namespace() {
    if rcni_tests::skip_unless_root("own_netns_in_a_named_namespace") {
        return;
    }
    let host = rcni_tests::Netns::new("sk8h");
    let other = rcni_tests::Netns::new("sk8o");
    let msg = "plugin's netns and netns from CNI_NETNS should not be the same";
    let in_host = |netns: &rcni_tests::Netns| {
        full("ADD")
            .env("CNI_NETNS", netns.path().display().to_string())
            .stdin(conf("1.0.0"))
            .in_host(&host)
    };
    assert_err(&in_host(&host).run(), 8, msg);
    assert_ok(&in_host(&host).env("CNI_NETNS_OVERRIDE", "1").run());
    assert_ok(&in_host(&other).run());
}

#[test]
fn version_prints_exact_json() {
    let expected = r#"{"cniVersion":"1.1.0","supportedVersions":["0.-42.0","0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}"#;
    for inv in [
        noop("VERSION"),
        noop("VERSION").unset("CNI_PATH"),
        // stdin is not a config for VERSION.
        noop("VERSION").stdin("not json at all"),
        noop("VERSION").stdin(conf("0.1.0")),
    ] {
        let out = inv.run();
        assert_eq!(out.code, 0, "{out:?}");
        assert_eq!(out.stdout, format!("{expected}\n"), "{out:?}");
        assert_eq!(out.stderr, "", "{out:?}");
    }
}

#[test]
fn errors_always_exit_1_with_only_json_on_stdout() {
    let cases = [
        noop("ADD").unset("CNI_PATH"),
        full("ADD")
            .env("CNI_CONTAINERID", "x/y")
            .stdin(conf("1.0.0")),
        full("ADD").stdin("{"),
        full("ADD").stdin(conf("2.0.0")),
        full("CHECK").stdin(conf("0.3.0")),
        noop("BOGUS").stdin(conf("1.0.0")),
        full("DEL")
            .env("CNI_NETNS", "/proc/self/ns/net")
            .stdin(conf("1.0.0")),
    ];
    for inv in cases {
        let out = inv.run();
        assert_eq!(out.code, 1, "{out:?}");
        let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        let obj = v.as_object().unwrap();
        assert!(obj["code"].is_u64() && obj["msg"].is_string(), "{v}");
        for k in obj.keys() {
            assert!(
                ["cniVersion", "code", "msg", "details"].contains(&k.as_str()),
                "{v}"
            );
        }
        assert_eq!(out.stderr, "", "{out:?}");
    }
}

/// The answer leaves in one write(2): stdout is a datagram socket here, so
/// each write is one datagram. std's line-buffered stdout sent a
/// pretty-printed answer up to its last newline, then its closing brace.
#[test]
fn the_answer_is_one_write() {
    use std::os::unix::net::UnixDatagram;
    use std::process::{Command, Stdio};
    let (ours, theirs) = UnixDatagram::pair().unwrap();
    let status = Command::new(bin("noop"))
        .env_clear()
        .env("CNI_COMMAND", "ADD")
        .stdin(Stdio::null())
        .stdout(std::os::fd::OwnedFd::from(theirs))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success());
    ours.set_nonblocking(true).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = ours.recv(&mut buf).unwrap();
    let first = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(first.contains('\n') && first.ends_with('}'), "{first:?}");
    let e: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(e["code"], 4, "{first:?}");
    assert!(ours.recv(&mut buf).is_err(), "a second write");
}
