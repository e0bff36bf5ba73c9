//! The noop test plugin's debug-file protocol, end to end (mirrors
//! cni:plugins/test/noop/noop_test.go, plus the parts it leaves out).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::tempdir::TempDir;
use rcni_tests::{Invocation, PluginOutput, bin, error_msg};
use serde_json::{Value, json};

const REPORT_RESULT: &str =
    r#"{ "ips": [{ "version": "4", "address": "10.1.2.3/24" }], "dns": {} }"#;
const STDIN: &str = r#"{"name": "noop-test", "some":"stdin-json", "cniVersion": "0.3.1"}"#;

/// One test's debug file, in its own temp dir.
struct Setup {
    dir: TempDir,
    debug: String,
}

impl Setup {
    fn new(tag: &str, debug: Value) -> Setup {
        let dir = TempDir::new(tag);
        let debug_path = dir.file("cni_debug");
        std::fs::write(&debug_path, debug.to_string()).unwrap();
        Setup {
            dir,
            debug: debug_path,
        }
    }

    /// The Go test's default: the report result and 0.1.0–0.4.0 claimed.
    fn standard(tag: &str) -> Setup {
        Setup::new(
            tag,
            json!({
                "ReportResult": REPORT_RESULT,
                "ReportVersionSupport": ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0"]
            }),
        )
    }

    fn args(&self) -> String {
        format!("DEBUG={};FOO=BAR", self.debug)
    }

    /// ADD as the Go test runs it.
    fn cmd(&self, command: &str) -> Invocation {
        Invocation::new(bin("noop"), command)
            .env("CNI_CONTAINERID", "some-container-id")
            .env("CNI_NETNS", "/some/netns/path")
            .env("CNI_IFNAME", "some-eth0")
            .env("CNI_PATH", "/some/bin/path")
            .env("CNI_ARGS", self.args())
            .stdin(STDIN)
    }

    fn read_debug(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(&self.debug).unwrap()).unwrap()
    }

    fn write_debug(&self, debug: Value) {
        std::fs::write(&self.debug, debug.to_string()).unwrap();
    }
}

fn json_eq(text: &str, want: &str) {
    let got: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    let want: Value = serde_json::from_str(want).unwrap();
    assert_eq!(got, want);
}

fn b64decode(s: &str) -> Vec<u8> {
    rcni_tests::base64_decode(s).unwrap_or_else(|| panic!("not base64: {s:?}"))
}

/// The Go test's `expectedCmdArgs`, checked field by field.
fn assert_recorded(debug: &Value, command: &str, args: &str, stdin: &str) {
    assert_eq!(debug["Command"], command, "{debug}");
    let a = &debug["CmdArgs"];
    assert_eq!(a["ContainerID"], "some-container-id");
    assert_eq!(a["Netns"], "/some/netns/path");
    assert_eq!(a["IfName"], "some-eth0");
    assert_eq!(a["Args"], args);
    assert_eq!(a["Path"], "/some/bin/path");
    assert_eq!(a["NetnsOverride"], "");
    assert_eq!(
        b64decode(a["StdinData"].as_str().unwrap()),
        stdin.as_bytes()
    );
}

#[test]
fn responds_to_add_with_report_result() {
    let s = Setup::standard("nrr");
    let out = s.cmd("ADD").run();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, REPORT_RESULT, "verbatim");
}

#[test]
fn records_all_the_args() {
    let s = Setup::standard("nargs");
    let out = s.cmd("ADD").run();
    assert_eq!(out.code, 0, "{out:?}");
    let debug = s.read_debug();
    assert_recorded(&debug, "ADD", &s.args(), STDIN);
    // The steering fields are kept, in the Go struct's layout.
    assert_eq!(debug["ReportResult"], REPORT_RESULT);
    let text = std::fs::read_to_string(&s.debug).unwrap();
    assert!(text.starts_with(r#"{"ReportResult":"#), "{text}");
    assert!(
        text.contains(r#""ExitWithCode":0,"Command":"ADD","CmdArgs":{"ContainerID":"some-container-id","Netns":"/some/netns/path","IfName":"some-eth0","Args":"#),
        "{text}"
    );
    // Written atomically: nothing but the debug file is left behind.
    let names: Vec<_> = std::fs::read_dir(s.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec!["cni_debug"]);
    // NetnsOverride is recorded raw.
    let out = s.cmd("ADD").env("CNI_NETNS_OVERRIDE", "TRUE").run();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(s.read_debug()["CmdArgs"]["NetnsOverride"], "TRUE");
}

#[test]
fn no_debug_file_is_an_error_not_a_panic() {
    // The Go plugin panics (exit 2); we answer with a CNI error.
    let s = Setup::standard("nnodbg");
    let out = s.cmd("ADD").env("CNI_ARGS", "FOO=BAR").run();
    let e = out.err();
    assert_eq!(e["code"], 999);
    let msg = e["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("test setup error: unable to read debug file: open : "),
        "{msg}"
    );
    // A debug file that is named but missing, also for VERSION.
    let missing = s.dir.file("missing");
    for cmd in ["ADD", "VERSION"] {
        let out = s.cmd(cmd).env("CNI_ARGS", format!("DEBUG={missing}")).run();
        let e = out.err();
        let msg = e["msg"].as_str().unwrap();
        assert!(
            msg.contains(&format!("open {missing}: no such file or directory")),
            "{msg}"
        );
    }
    // Garbage in the debug file.
    std::fs::write(&s.debug, "not json").unwrap();
    assert_eq!(s.cmd("ADD").run().err()["code"], 999);
}

#[test]
fn no_debug_path_prints_empty_object() {
    let out = Invocation::new(bin("noop"), "ADD")
        .env("CNI_CONTAINERID", "c")
        .env("CNI_NETNS", "/x")
        .env("CNI_IFNAME", "eth0")
        .stdin(STDIN)
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "{}");
    assert_eq!(out.stderr, "CNI_ARGS or config empty, no debug behavior\n");
}

fn passthrough(version: &str, report: &str, prev: Value) -> PluginOutput {
    let s = Setup::new("npass", json!({ "ReportResult": report }));
    let stdin = json!({
        "name": "noop-test",
        "some": "stdin-json",
        "cniVersion": version,
        "prevResult": prev
    });
    s.cmd("ADD").config(&stdin).run()
}

#[test]
fn passthrough_0_3_1_and_0_4_0() {
    for v in ["0.3.1", "0.4.0"] {
        let prev = json!({"cniVersion": v, "ips": [{"version": "4", "address": "10.1.2.15/24"}]});
        let out = passthrough(v, "PASSTHROUGH", prev);
        assert_eq!(out.code, 0, "{out:?}");
        // Compact JSON, struct order, as Go's json.Marshal prints it.
        assert_eq!(
            out.stdout,
            format!(
                r#"{{"cniVersion":"{v}","ips":[{{"version":"4","address":"10.1.2.15/24"}}],"dns":{{}}}}"#
            )
        );
    }
}

#[test]
fn passthrough_1_0_0_and_1_1_0() {
    for v in ["1.0.0", "1.1.0"] {
        let prev = json!({
            "cniVersion": v,
            "interfaces": [{"name": "eth0", "mac": "00:11:22:33:44:55", "sandbox": "/var/run/netns/x"}],
            "ips": [{"address": "10.1.2.15/24", "gateway": "10.1.2.1", "interface": 0}],
            "routes": [{"dst": "0.0.0.0/0"}]
        });
        let out = passthrough(v, "PASSTHROUGH", prev);
        assert_eq!(out.code, 0, "{out:?}");
        assert_eq!(
            out.stdout,
            format!(
                r#"{{"cniVersion":"{v}","interfaces":[{{"mac":"00:11:22:33:44:55","name":"eth0","sandbox":"/var/run/netns/x"}}],"ips":[{{"address":"10.1.2.15/24","gateway":"10.1.2.1","interface":0}}],"routes":[{{"dst":"0.0.0.0/0"}}]}}"#
            )
        );
    }
    // A prevResult without cniVersion takes the config's.
    let out = passthrough(
        "1.0.0",
        "PASSTHROUGH",
        json!({"ips": [{"address": "10.0.0.1/8"}]}),
    );
    assert_eq!(
        out.stdout,
        r#"{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.1/8"}]}"#
    );
}

#[test]
fn passthrough_errors() {
    // From another result family than the config's.
    let out = passthrough(
        "1.0.0",
        "PASSTHROUGH",
        json!({"cniVersion": "0.4.0", "ips": []}),
    );
    let e = out.err();
    assert_eq!(e["code"], 999);
    // Found while discovering versions (CNI_ARGS is set), as in the Go plugin.
    assert!(
        error_msg(&e).contains("could not parse prevResult: result type supports"),
        "{e}"
    );
    // None at all.
    let s = Setup::new("npnone", json!({ "ReportResult": "PASSTHROUGH" }));
    let e = s.cmd("ADD").run().err();
    assert_eq!(e["code"], 999);
    assert!(
        error_msg(&e).starts_with(r#"failed to convert result to config "0.3.1""#),
        "{e}"
    );
}

#[test]
fn inject_dns() {
    let prev = json!({"cniVersion": "0.4.0", "ips": [{"version": "4", "address": "10.1.2.3/24"}], "dns": {}});
    let out = passthrough("0.4.0", "INJECT-DNS", prev);
    assert_eq!(out.code, 0, "{out:?}");
    json_eq(
        &out.stdout,
        r#"{"cniVersion": "0.4.0", "ips": [{"version": "4", "address": "10.1.2.3/24"}], "dns": {"nameservers": ["1.2.3.4"]}}"#,
    );
    let prev =
        json!({"cniVersion": "1.0.0", "ips": [{"address": "10.1.2.3/24"}], "dns": {"domain": "x"}});
    let out = passthrough("1.0.0", "INJECT-DNS", prev);
    assert_eq!(
        out.stdout,
        r#"{"cniVersion":"1.0.0","dns":{"domain":"x","nameservers":["1.2.3.4"]},"ips":[{"address":"10.1.2.3/24"}]}"#
    );
}

#[test]
fn debug_file_in_config() {
    let s = Setup::standard("ncfg");
    let stdin = format!(
        r#"{{"name":"noop-test", "some": "stdin-json", "cniVersion": "0.4.0", "debugFile": {:?}}}"#,
        s.debug
    );
    let out = s
        .cmd("ADD")
        .env("CNI_ARGS", "FOO=BAR")
        .stdin(stdin.clone())
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, REPORT_RESULT);
    assert_recorded(&s.read_debug(), "ADD", "FOO=BAR", &stdin);
    // Also with no CNI_ARGS at all (then the default versions are claimed).
    let out = s.cmd("ADD").unset("CNI_ARGS").stdin(stdin.clone()).run();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(s.read_debug()["CmdArgs"]["Args"], "");
    // DEBUG= in CNI_ARGS wins over debugFile.
    let other = Setup::new("ncfg2", json!({"ReportResult": "{\"other\":1}"}));
    let out = s
        .cmd("ADD")
        .env("CNI_ARGS", other.args())
        .stdin(stdin)
        .run();
    assert_eq!(out.stdout, r#"{"other":1}"#);
}

#[test]
fn empty_report_result_prints_nothing() {
    let s = Setup::standard("nempty");
    s.write_debug(json!({"ReportResult": ""}));
    let out = s.cmd("ADD").run();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "");
    assert_eq!(s.read_debug()["ReportResult"], "");
}

#[test]
fn exit_with_code() {
    let s = Setup::standard("nexit");
    s.write_debug(json!({"ReportResult": "", "ExitWithCode": 3}));
    let out = s.cmd("ADD").run();
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.stdout, "");
    assert_eq!(s.read_debug()["ReportResult"], "");
    // After printing the result.
    s.write_debug(json!({"ReportResult": "{\"a\":1}", "ExitWithCode": 42}));
    let out = s.cmd("ADD").run();
    assert_eq!((out.code, out.stdout.as_str()), (42, r#"{"a":1}"#));
    // Not positive: ignored.
    s.write_debug(json!({"ReportResult": "", "ExitWithCode": -1}));
    assert_eq!(s.cmd("ADD").run().code, 0);
}

#[test]
fn report_error_exits_1_with_the_code() {
    let s = Setup::standard("nerr");
    s.write_debug(json!({"ReportResult": REPORT_RESULT, "ReportError": "banana"}));
    let out = s.cmd("ADD").run();
    let e = out.err();
    assert_eq!(
        (e["code"].as_u64(), e["msg"].as_str()),
        (Some(999), Some("banana"))
    );
    assert!(e.get("details").is_none());
    s.write_debug(
        json!({"ReportError": "plantain", "ReportErrorCode": 117, "ReportStderr": "to stderr\n"}),
    );
    let out = s.cmd("DEL").run();
    let e = out.err();
    assert_eq!(
        (e["code"].as_u64(), e["msg"].as_str()),
        (Some(117), Some("plantain"))
    );
    assert_eq!(out.stderr, "to stderr\n");
    // The call was still recorded.
    assert_eq!(s.read_debug()["Command"], "DEL");
}

#[test]
fn report_stderr() {
    let s = Setup::standard("nstderr");
    s.write_debug(json!({"ReportResult": "{}", "ReportStderr": "some diagnostics"}));
    let out = s.cmd("ADD").run();
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (0, "{}", "some diagnostics")
    );
}

#[test]
fn del_check_gc_status_do_the_debug_behaviour() {
    let s = Setup::standard("ndel");
    s.write_debug(json!({"ReportResult": r#"{ "some": "delete-data" }"#}));
    let out = s.cmd("DEL").run();
    assert_eq!(out.code, 0, "{out:?}");
    json_eq(&out.stdout, r#"{"some": "delete-data"}"#);
    assert_recorded(&s.read_debug(), "DEL", &s.args(), STDIN);

    let stdin = r#"{"name":"noop-test","cniVersion":"1.1.0"}"#;
    for cmd in ["CHECK", "GC", "STATUS"] {
        let out = s.cmd(cmd).stdin(stdin).run();
        assert_eq!(out.code, 0, "{cmd}: {out:?}");
        let d = s.read_debug();
        assert_eq!(d["Command"], cmd);
        assert_eq!(
            b64decode(d["CmdArgs"]["StdinData"].as_str().unwrap()),
            stdin.as_bytes()
        );
    }
}

#[test]
fn version_claims_report_version_support() {
    let s = Setup::standard("nver");
    s.write_debug(json!({"ReportVersionSupport": ["0.123.0", "0.2.0"]}));
    let out = s.cmd("VERSION").run();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"0.123.0\",\"0.2.0\"]}\n"
    );
    // The same list gates the other commands.
    let out = s.cmd("ADD").run();
    let e = out.err();
    assert_eq!(e["code"], 1);
    assert_eq!(
        e["details"],
        r#"config is "0.3.1", plugin supports ["0.123.0" "0.2.0"]"#
    );
    // null: the defaults.
    s.write_debug(json!({"ReportVersionSupport": null}));
    let out = s.cmd("VERSION").run();
    assert!(
        out.stdout
            .contains(r#"["0.-42.0","0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]"#),
        "{out:?}"
    );
    // The debug file named by debugFile in the config also counts.
    s.write_debug(json!({"ReportVersionSupport": ["0.4.0"]}));
    let stdin = json!({"name": "n", "debugFile": s.debug}).to_string();
    let out = s
        .cmd("VERSION")
        .env("CNI_ARGS", "FOO=BAR")
        .stdin(stdin)
        .run();
    assert_eq!(
        out.stdout,
        "{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"0.4.0\"]}\n"
    );
}

#[test]
fn bad_cni_args_pair() {
    let s = Setup::standard("nbadargs");
    let out = s.cmd("ADD").env("CNI_ARGS", "FOO=BAR;a=b=c").run();
    let e = out.err();
    assert_eq!(e["code"], 999);
    let msg = e["msg"].as_str().unwrap();
    assert!(
        msg.ends_with("CNI_ARGS invalid key/value pair: [a b c]"),
        "{msg}"
    );
}

#[test]
fn command_log_collects_every_call() {
    let s = Setup::new("nlog", json!({"ReportResult": "{}"}));
    let log = s.dir.file("cmdlog.json");
    std::fs::write(&log, "").unwrap();
    let stdin = json!({"name": "n", "cniVersion": "1.1.0", "commandLog": log}).to_string();
    for cmd in ["ADD", "CHECK", "DEL", "GC"] {
        let out = s.cmd(cmd).stdin(stdin.clone()).run();
        assert_eq!(out.code, 0, "{cmd}: {out:?}");
    }
    let entries: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&log).unwrap()).unwrap();
    let cmds: Vec<&str> = entries
        .iter()
        .map(|e| e["Command"].as_str().unwrap())
        .collect();
    assert_eq!(cmds, ["ADD", "CHECK", "DEL", "GC"]);
    for e in &entries {
        assert_eq!(e["CmdArgs"]["ContainerID"], "some-container-id");
        assert_eq!(
            b64decode(e["CmdArgs"]["StdinData"].as_str().unwrap()),
            stdin.as_bytes()
        );
    }
    // Go's layout: Command, then CmdArgs.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.starts_with(r#"[{"Command":"ADD","CmdArgs":{"ContainerID":"#),
        "{text}"
    );
    // The log must exist already.
    std::fs::remove_file(&log).unwrap();
    let e = s.cmd("ADD").stdin(stdin).run().err();
    assert!(error_msg(&e).contains("no such file or directory"), "{e}");
}
