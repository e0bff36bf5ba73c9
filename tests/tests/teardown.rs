//! A DEL runs every step and reports every failure
//! (`cni_skel::teardown::Teardown`): with an IPAM plugin that refuses
//! its DEL and a CNI_NETNS that is no namespace (so the container's link
//! cannot be removed), each plugin that removes a link after its IPAM DEL
//! answers one error naming both, with the IPAM's code (the first
//! failure's).
//!
//! bridge opens the namespace before its IPAM DEL (as the reference: the
//! address may still be in use) and stops there, and sbr's steps (rule
//! deletions) fail only on a race with another writer, so neither can be
//! brought to two failures from outside; the collector's own unit test
//! covers them.

#![cfg(test)]

use rcni_test_support::FakePlugin;
use rcni_tests::{Invocation, Netns, bin, error_msg, skip_unless_root};
use serde_json::json;

#[test]
fn sp_del_reports_every_failing_step() {
    if skip_unless_root("sp_del_reports_every_failing_step") {
        return;
    }
    let host = Netns::new("sph");
    // An IPAM plugin that answers every command with error 11.
    let fake = FakePlugin::new(
        "sp-teardown",
        "sp-refuse",
        "echo '{\"code\":11,\"msg\":\"sp_ipam_refused\"}'\nexit 1\n",
    );
    let not_netns = fake.dir().join("not-a-netns");
    std::fs::write(&not_netns, b"sp").unwrap();
    let ipam = json!({"type": "sp-refuse"});
    for conf in [
        json!({"cniVersion": "1.0.0", "name": "sp-net", "type": "ptp", "ipam": ipam}),
        json!({"cniVersion": "1.0.0", "name": "sp-net", "type": "macvlan",
               "master": "sp-nolink", "ipam": ipam}),
        json!({"cniVersion": "1.0.0", "name": "sp-net", "type": "host-device",
               "device": "sp-nodev", "ipam": ipam}),
    ] {
        let plugin = conf["type"].as_str().unwrap();
        let out = Invocation::new(bin(plugin), "DEL")
            .env("CNI_PATH", fake.dir().display().to_string())
            .attach_at("sp-cid", &not_netns, "net1")
            .in_host(&host)
            .config(&conf)
            .run();
        let e = out.err();
        let msg = error_msg(&e);
        assert_eq!(e["code"], 11, "{plugin}: the first failure's code: {e}");
        assert!(
            msg.starts_with(&format!(
                "sp_ipam_refused; failed to open netns {:?}",
                not_netns.display().to_string()
            )),
            "{plugin}: both failures, IPAM's first: {e}"
        );
    }
}
