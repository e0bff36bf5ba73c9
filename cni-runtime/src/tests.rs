use super::*;
use serde_json::json;

fn built(plugin: &Value, prev: Option<&Value>, rt: Option<&RuntimeConf>) -> Value {
    serde_json::from_slice(&build_one_config("net", "1.0.0", plugin, prev, rt).unwrap()).unwrap()
}

fn rt_with_caps(caps: Value) -> RuntimeConf {
    RuntimeConf {
        container_id: "c1".into(),
        ifname: "eth0".into(),
        capability_args: caps.as_object().unwrap().clone(),
        ..Default::default()
    }
}

#[test]
fn injects_name_and_version() {
    let plugin = json!({"type": "bridge", "name": "other", "cniVersion": "0.1.0", "bridge": "br0"});
    let got = built(&plugin, None, None);
    assert_eq!(
        got,
        json!({"type": "bridge", "name": "net", "cniVersion": "1.0.0", "bridge": "br0"})
    );
    assert!(got.get("prevResult").is_none());
}

#[test]
fn injects_prev_result() {
    let prev = json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.2/24"}]});
    let got = built(&json!({"type": "x"}), Some(&prev), None);
    assert_eq!(got["prevResult"], prev);
}

#[test]
fn capabilities_become_runtime_config() {
    let plugin = json!({
        "type": "portmap",
        "capabilities": {"portMappings": true, "mac": false, "ips": true, "bandwidth": true}
    });
    let rt = rt_with_caps(json!({
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
        "mac": "00:11:22:33:44:55",
        "ips": ["10.0.0.5/24"],
        "aliases": ["x"]
    }));
    let got = built(&plugin, None, Some(&rt));
    assert_eq!(
        got["runtimeConfig"],
        json!({
            "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
            "ips": ["10.0.0.5/24"]
        })
    );
    assert!(
        got.get("capabilities").is_none(),
        "capabilities must not be passed: {got}"
    );
}

#[test]
fn no_matching_args_keep_static_runtime_config() {
    let plugin = json!({
        "type": "x",
        "capabilities": {"mac": true},
        "runtimeConfig": {"static": 1}
    });
    // No capability args at all: nothing injected, the config's own stays.
    let got = built(&plugin, None, Some(&RuntimeConf::default()));
    assert_eq!(got["runtimeConfig"], json!({"static": 1}));
    assert!(got.get("capabilities").is_none());
    // Enabled and provided: replaces the static one, as libcni does.
    let got = built(&plugin, None, Some(&rt_with_caps(json!({"mac": "aa"}))));
    assert_eq!(got["runtimeConfig"], json!({"mac": "aa"}));
    // Without capabilities, args are never passed.
    let got = built(
        &json!({"type": "x"}),
        None,
        Some(&rt_with_caps(json!({"mac": "aa"}))),
    );
    assert!(got.get("runtimeConfig").is_none());
}

#[test]
fn non_object_plugin_is_an_error() {
    let e = build_one_config("n", "1.0.0", &json!([1]), None, None).unwrap_err();
    assert_eq!(e.code, 7);
}

#[test]
fn descriptions() {
    assert_eq!(
        plugin_description(&json!({"type": "noop"})),
        r#"type="noop""#
    );
    assert_eq!(
        plugin_description(&json!({"type": "noop", "name": "a"})),
        r#"type="noop" name="a""#
    );
}

#[test]
fn gc_attachment_wire_names() {
    let a = GcAttachment {
        container_id: "c".into(),
        ifname: "eth0".into(),
    };
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        r#"{"containerID":"c","ifname":"eth0"}"#
    );
}

#[test]
fn joined_errors_keep_the_first_code() {
    assert!(join_errors(vec![]).is_ok());
    let one = join_errors(vec![CniError::new(5, "a", "")]).unwrap_err();
    assert_eq!((one.code, one.msg.as_str()), (5, "a"));
    let two = join_errors(vec![CniError::new(5, "a", "d"), CniError::new(7, "b", "")]).unwrap_err();
    assert_eq!((two.code, two.msg.as_str()), (5, "a; d\nb"));
}

#[test]
fn version_gates() {
    let mut list = NetworkConfigList::from_bytes(
        br#"{"name":"n","cniVersion":"0.3.1","plugins":[{"type":"x"}]}"#,
    )
    .unwrap();
    let cni =
        CniConfig::new(vec![]).with_cache_dir(std::env::temp_dir().join("cni-runtime-unit-none"));
    let rt = RuntimeConf::default();
    let e = cni.check_network_list(&list, &rt).unwrap_err();
    assert_eq!(e.code, 1);
    assert_eq!(
        e.msg,
        r#"configuration version "0.3.1" does not support the CHECK command"#
    );
    // STATUS below 1.1.0 asks nobody.
    assert!(cni.status_network_list(&list).is_ok());
    list.cni_version = "1.0.0".into();
    list.disable_check = true;
    assert!(cni.check_network_list(&list, &rt).is_ok());
    list.disable_gc = true;
    assert!(cni.gc_network_list(&list, None).is_ok());
}

#[test]
fn add_validates_before_exec() {
    let list = NetworkConfigList::from_bytes(
        br#"{"name":"n","cniVersion":"1.0.0","plugins":[{"type":"sh"}]}"#,
    )
    .unwrap();
    let cni = CniConfig::new(vec!["/bin".into(), "/usr/bin".into()]);
    let rt = RuntimeConf {
        container_id: "bad/id".into(),
        ifname: "eth0".into(),
        ..Default::default()
    };
    let e = cni.add_network_list(&list, &rt).unwrap_err();
    assert_eq!(e.code, 4, "{e:?}");
    assert!(
        e.msg
            .starts_with(r#"plugin type="sh" failed (add): invalid characters in containerID"#),
        "{}",
        e.msg
    );
    let e = cni
        .add_network_list(
            &NetworkConfigList::from_bytes(
                br#"{"name":"n","plugins":[{"type":"no-such-plugin-x"}]}"#,
            )
            .unwrap(),
            &rt,
        )
        .unwrap_err();
    assert!(
        e.msg
            .contains(r#"failed to find plugin "no-such-plugin-x" in path [/bin /usr/bin]"#),
        "{}",
        e.msg
    );
}
