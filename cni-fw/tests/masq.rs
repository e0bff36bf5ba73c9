//! Masquerade rules applied for real, each test in a private network
//! namespace (the tools it runs inherit the thread's namespace).

#![cfg(test)]

use cni_fw::masq::{self, Attachment, Backend};
use std::process::Command;

/// Runs `f` in a private network namespace, or prints a SKIP line when not
/// root or when one of `tools` is missing.
fn in_private_netns(test: &str, tools: &[&str], f: impl FnOnce() + Send) {
    if rcni_tests::skip_unless(test, tools) {
        return;
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
            f();
        })
        .join()
        .expect("test thread");
    });
}

fn output(cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd).args(args).output().expect(cmd);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const A: Attachment = Attachment {
    network: "masqnet",
    ifname: "eth0",
    container_id: "ctr1",
};
const B: Attachment = Attachment {
    network: "masqnet",
    ifname: "eth0",
    container_id: "ctr2",
};

#[test]
fn iptables_setup_teardown_gc() {
    in_private_netns(
        "iptables_setup_teardown_gc",
        &[
            "iptables-restore",
            "iptables-save",
            "ip6tables-restore",
            "ip6tables-save",
        ],
        || {
            let addrs = [
                "10.77.0.5/24".parse().unwrap(),
                "fd77::5/64".parse().unwrap(),
            ];
            masq::setup(Backend::Iptables, &addrs, A).unwrap();
            // Idempotent: a second setup adds nothing twice.
            masq::setup(Backend::Iptables, &addrs, A).unwrap();
            masq::setup(Backend::Iptables, &["10.77.0.6/24".parse().unwrap()], B).unwrap();
            let chain = cni_fw::hash::chain_name("masqnet", "ctr1");
            let v4 = output("iptables-save", &["-t", "nat"]);
            let expect = [
                format!(
                    "-A POSTROUTING -s 10.77.0.5/32 -m comment --comment \"name: \\\"masqnet\\\" id: \\\"ctr1\\\"\" -j {chain}"
                ),
                format!(
                    "-A {chain} -d 10.77.0.0/24 -m comment --comment \"name: \\\"masqnet\\\" id: \\\"ctr1\\\"\" -j ACCEPT"
                ),
                format!(
                    "-A {chain} ! -d 224.0.0.0/4 -m comment --comment \"name: \\\"masqnet\\\" id: \\\"ctr1\\\"\" -j MASQUERADE"
                ),
            ];
            for e in &expect {
                assert_eq!(v4.lines().filter(|l| l == e).count(), 1, "{e}\n{v4}");
            }
            let v6 = output("ip6tables-save", &["-t", "nat"]);
            assert!(v6.contains("-A POSTROUTING -s fd77::5/128"), "{v6}");
            assert!(v6.contains("! -d ff00::/8"), "{v6}");

            // GC keeps ctr2 only.
            masq::gc("masqnet", &[("ctr2".into(), "eth0".into())]).unwrap();
            let v4 = output("iptables-save", &["-t", "nat"]);
            assert!(!v4.contains(&chain), "{v4}");
            assert!(v4.contains(&cni_fw::hash::chain_name("masqnet", "ctr2")));
            assert!(!output("ip6tables-save", &["-t", "nat"]).contains(&chain));

            masq::teardown(B).unwrap();
            masq::teardown(B).unwrap();
            assert!(!output("iptables-save", &["-t", "nat"]).contains("CNI-"));
        },
    );
}

#[test]
fn nftables_setup_teardown_gc() {
    in_private_netns("nftables_setup_teardown_gc", &["nft"], || {
        let addrs = [
            "10.78.0.5/24".parse().unwrap(),
            "fd78::5/64".parse().unwrap(),
        ];
        masq::setup(Backend::Nftables, &addrs, A).unwrap();
        masq::setup(Backend::Nftables, &addrs, A).unwrap();
        masq::setup(Backend::Nftables, &["10.78.0.6/24".parse().unwrap()], B).unwrap();
        let t = output("nft", &["list", "table", "inet", "cni_plugins_masquerade"]);
        assert_eq!(
            t.matches("ip saddr 10.78.0.5 ip daddr != 10.78.0.0/24 masquerade")
                .count(),
            1,
            "{t}"
        );
        assert_eq!(
            t.matches("ip6 saddr fd78::5 ip6 daddr != fd78::/64 masquerade")
                .count(),
            1,
            "{t}"
        );
        assert!(t.contains("goto masq_checks"), "{t}");
        assert!(t.contains("id: ctr1"), "{t}");

        masq::gc("masqnet", &[("ctr2".into(), "eth0".into())]).unwrap();
        let t = output("nft", &["list", "table", "inet", "cni_plugins_masquerade"]);
        assert!(!t.contains("id: ctr1"), "{t}");
        assert!(t.contains("id: ctr2"), "{t}");

        masq::teardown(B).unwrap();
        masq::teardown(B).unwrap();
        let t = output("nft", &["list", "table", "inet", "cni_plugins_masquerade"]);
        assert!(!t.contains("masquerade comment"), "{t}");
    });
}
