use super::*;
use std::collections::HashMap;

struct Fake;

impl Plugin for Fake {
    fn about(&self) -> String {
        "CNI fake plugin".into()
    }
    fn add(&self, args: &CmdArgs) -> CmdResult {
        Ok(CniResult {
            interfaces: vec![Interface {
                name: args.ifname.clone(),
                ..Default::default()
            }],
            ips: vec![IpConfig {
                interface: Some(0),
                address: "10.0.0.2/24".parse().unwrap(),
                gateway: None,
            }],
            ..Default::default()
        }
        .into())
    }
    fn del(&self, _: &CmdArgs) -> CmdResult {
        Ok(Output::Nothing)
    }
    fn check(&self, _: &CmdArgs) -> CmdResult {
        Err(CniError::new(42, "checked", ""))
    }
}

fn run_env(env: &[(&str, &str)], stdin: &str) -> Outcome {
    let map: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    dispatch(
        &Fake,
        &move |k| map.get(k).cloned(),
        Box::new(std::io::Cursor::new(stdin.to_string().into_bytes())),
    )
}

fn full(cmd: &str) -> Vec<(&str, &str)> {
    vec![
        ("CNI_COMMAND", cmd),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", "/nonexistent/ns"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin"),
    ]
}

fn err_of(o: &Outcome) -> serde_json::Value {
    assert_eq!(o.exit, 1, "{o:?}");
    serde_json::from_str(&o.stdout).unwrap()
}

const CONF: &str = r#"{"cniVersion":"1.0.0","name":"net1","type":"fake"}"#;

#[test]
fn about_on_empty_command() {
    let o = run_env(&[], "");
    assert_eq!(o.exit, 0);
    assert!(o.stdout.is_empty());
    assert!(
        o.stderr
            .starts_with("CNI fake plugin\nCNI protocol versions supported: 0.1.0, 0.2.0")
    );
}

#[test]
fn missing_variables_listed_together() {
    let e = err_of(&run_env(&[("CNI_COMMAND", "ADD")], CONF));
    assert_eq!(e["code"], 4);
    assert_eq!(
        e["msg"],
        "required env variables [CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME,CNI_PATH] missing"
    );
    let e = err_of(&run_env(&[("CNI_COMMAND", "DEL")], CONF));
    assert_eq!(
        e["msg"],
        "required env variables [CNI_CONTAINERID,CNI_IFNAME,CNI_PATH] missing"
    );
    let e = err_of(&run_env(&[("CNI_COMMAND", "GC")], CONF));
    assert_eq!(e["msg"], "required env variables [CNI_PATH] missing");
}

#[test]
fn version_needs_nothing_and_reads_no_stdin() {
    let o = run_env(&[("CNI_COMMAND", "VERSION")], "not json");
    assert_eq!(o.exit, 0);
    assert_eq!(
        o.stdout,
        "{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"0.1.0\",\"0.2.0\",\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]}\n"
    );
}

#[test]
fn add_prints_in_config_version() {
    for v in version::ALL {
        let conf = CONF.replace("1.0.0", v);
        let o = run_env(&full("ADD"), &conf);
        if matches!(*v, "0.1.0" | "0.2.0") {
            assert_eq!(o.exit, 0, "{o:?}");
            assert!(o.stdout.contains("\"ip4\""));
        } else {
            let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
            assert_eq!(r["cniVersion"], *v);
            assert_eq!(r["interfaces"][0]["name"], "eth0");
        }
    }
}

#[test]
fn bad_config_and_names() {
    let e = err_of(&run_env(&full("ADD"), ""));
    assert_eq!(e["code"], 6);
    assert_eq!(
        e["msg"],
        "error unmarshall network config: EOF while parsing a value at line 1 column 0"
    );
    let e = err_of(&run_env(&full("ADD"), r#"{"name":"a b"}"#));
    assert_eq!(e["code"], 7);
    let mut env = full("ADD");
    env[1] = ("CNI_CONTAINERID", "../../etc");
    assert_eq!(err_of(&run_env(&env, CONF))["code"], 4);
    let mut env = full("ADD");
    env[3] = ("CNI_IFNAME", "eth0/../x");
    assert_eq!(err_of(&run_env(&env, CONF))["code"], 4);
}

#[test]
fn unknown_command_after_config() {
    let e = err_of(&run_env(&[("CNI_COMMAND", "FOO")], CONF));
    assert_eq!(
        (e["code"].as_u64(), e["msg"].as_str()),
        (Some(4), Some("unknown CNI_COMMAND: FOO"))
    );
    let e = err_of(&run_env(&[("CNI_COMMAND", "FOO")], "{"));
    assert_eq!(e["code"], 6);
}

#[test]
fn version_gates() {
    let e = err_of(&run_env(&full("ADD"), &CONF.replace("1.0.0", "9.9.9")));
    assert_eq!(e["code"], 1);
    assert!(
        e["details"]
            .as_str()
            .unwrap()
            .starts_with("config is \"9.9.9\", plugin supports [\"0.1.0\"")
    );
    let e = err_of(&run_env(&full("ADD"), &CONF.replace("1.0.0", "1.0")));
    assert_eq!(e["code"], 1);
    let e = err_of(&run_env(&full("CHECK"), &CONF.replace("1.0.0", "0.3.1")));
    assert_eq!(
        (e["code"].as_u64(), e["msg"].as_str()),
        (Some(1), Some("config version does not allow CHECK"))
    );
    let e = err_of(&run_env(&full("CHECK"), CONF));
    assert_eq!(e["code"], 42, "CHECK from 0.4.0 reaches the plugin");
    let gc = [("CNI_COMMAND", "GC"), ("CNI_PATH", "/x")];
    let e = err_of(&run_env(&gc, CONF));
    assert_eq!(e["msg"], "config version does not allow GC");
    let o = run_env(&gc, &CONF.replace("1.0.0", "1.1.0"));
    assert_eq!((o.exit, o.stdout.as_str()), (0, ""));
    let st = [("CNI_COMMAND", "STATUS"), ("CNI_PATH", "/x")];
    assert_eq!(
        err_of(&run_env(&st, CONF))["msg"],
        "config version does not allow STATUS"
    );
}

#[test]
fn missing_version_is_0_1_0() {
    let o = run_env(&full("ADD"), r#"{"name":"n"}"#);
    assert_eq!(o.exit, 0);
    assert!(o.stdout.contains("\"cniVersion\": \"0.1.0\""));
}

#[test]
fn own_netns_is_refused_unless_overridden() {
    let mut env = full("ADD");
    env[2] = ("CNI_NETNS", "/proc/self/ns/net");
    let e = err_of(&run_env(&env, CONF));
    assert_eq!(e["code"], 8);
    env.push(("CNI_NETNS_OVERRIDE", "true"));
    assert_eq!(run_env(&env, CONF).exit, 0);
}

#[test]
fn errors_carry_the_config_version() {
    let e = err_of(&run_env(&full("CHECK"), CONF));
    assert_eq!(e["cniVersion"], "1.0.0");
}

#[test]
fn non_utf8_variables_are_errors() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let env = |k: &str| match k {
        "CNI_COMMAND" => Some(OsString::from_vec(b"AD\xffD".to_vec())),
        "CNI_ARGS" => Some(OsString::from_vec(b"IP=\xff".to_vec())),
        "CNI_PATH" => Some(OsString::from("/opt/cni/bin")),
        _ => None,
    };
    let e = not_unicode(&env).unwrap();
    assert_eq!(e.code, 4);
    assert_eq!(
        e.msg,
        "env variables [CNI_COMMAND,CNI_ARGS] are not valid UTF-8"
    );
    assert!(not_unicode(&|k| (k == "CNI_COMMAND").then(|| OsString::from("ADD"))).is_none());
}

#[test]
fn structs_in_results_must_be_objects() {
    for (prev, version) in [
        (r#"{"cniVersion":"1.0.0","dns":[]}"#, "1.0.0"),
        (r#"{"cniVersion":"1.0.0","ips":[["10.0.0.2/24"]]}"#, "1.0.0"),
        (r#"{"cniVersion":"1.0.0","interfaces":[["eth0"]]}"#, "1.0.0"),
        (
            r#"{"cniVersion":"1.0.0","routes":[["0.0.0.0/0"]]}"#,
            "1.0.0",
        ),
        (r#"{"cniVersion":"0.4.0","dns":["1.1.1.1"]}"#, "0.4.0"),
        (r#"{"cniVersion":"0.2.0","ip4":["10.0.0.2/24"]}"#, "0.2.0"),
        (
            r#"{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.2/24","routes":[["0.0.0.0/0"]]}}"#,
            "0.2.0",
        ),
        (r#"[]"#, "1.0.0"),
    ] {
        let v: serde_json::Value = serde_json::from_str(prev).unwrap();
        let e = CniResult::parse_prev(&v, version).unwrap_err();
        assert_eq!(e.code, 6, "{prev}: {e:?}");
        assert!(
            CniResult::parse(prev.as_bytes(), version).is_err(),
            "{prev}"
        );
    }
    let ok: serde_json::Value = serde_json::from_str(
        r#"{"cniVersion":"1.0.0","dns":null,"ips":[{"address":"10.0.0.2/24"}]}"#,
    )
    .unwrap();
    assert!(CniResult::parse_prev(&ok, "1.0.0").is_ok());
}

/// Hands back what the skel gave it: the config it parsed and the
/// `prevResult` read from it.
struct Echo;

impl Plugin for Echo {
    fn about(&self) -> String {
        "CNI echo plugin".into()
    }
    fn add(&self, args: &CmdArgs) -> CmdResult {
        let prev = args.prev_result()?.map(|p| p.ips.len());
        Ok(Output::Raw {
            stdout: format!("{} {prev:?}", args.config),
            exit: 0,
        })
    }
    fn del(&self, _: &CmdArgs) -> CmdResult {
        Ok(Output::Nothing)
    }
    fn check(&self, _: &CmdArgs) -> CmdResult {
        Ok(Output::Nothing)
    }
}

#[test]
fn the_plugin_reads_the_config_the_skel_parsed() {
    let conf = r#"{"cniVersion":"1.0.0","name":"net1","type":"echo","x":{"B":[1,null]},
        "PrevResult":{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24"}]}}"#;
    let env: HashMap<String, String> = full("ADD")
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let o = dispatch(
        &Echo,
        &move |k| env.get(k).cloned(),
        Box::new(std::io::Cursor::new(conf.as_bytes().to_vec())),
    );
    assert_eq!(o.exit, 0, "{o:?}");
    let (config, prev) = o.stdout.split_once(' ').unwrap();
    let want: serde_json::Value = serde_json::from_str(conf).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(config).unwrap(),
        want
    );
    // prevResult under any case, as Go reads it.
    assert_eq!(prev, "Some(1)");
}

#[test]
fn each_variable_is_read_once() {
    let env: HashMap<String, String> = full("ADD")
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let reads = std::rc::Rc::new(std::cell::RefCell::new(Vec::<String>::new()));
    let seen = reads.clone();
    let o = dispatch(
        &Fake,
        &move |k| {
            seen.borrow_mut().push(k.to_string());
            env.get(k).cloned()
        },
        Box::new(std::io::Cursor::new(CONF.as_bytes().to_vec())),
    );
    assert_eq!(o.exit, 0, "{o:?}");
    let mut reads = reads.borrow().clone();
    let all = reads.len();
    reads.sort();
    reads.dedup();
    assert_eq!(all, reads.len(), "read twice: {reads:?}");
    assert!(
        reads.iter().all(|k| env::SKEL_VARS.contains(&k.as_str())),
        "{reads:?}"
    );
}
