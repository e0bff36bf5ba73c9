use super::*;

fn sample() -> CniResult {
    CniResult {
        cni_version: "1.1.0".into(),
        interfaces: vec![
            Interface {
                name: "cni0".into(),
                mac: "00:11:22:33:44:55".into(),
                ..Default::default()
            },
            Interface {
                name: "eth0".into(),
                mac: "00:11:22:33:44:66".into(),
                mtu: 1400,
                sandbox: "/var/run/netns/blah".into(),
                ..Default::default()
            },
        ],
        ips: vec![
            IpConfig {
                interface: Some(1),
                address: "10.1.2.3/24".parse().unwrap(),
                gateway: Some("10.1.2.1".parse().unwrap()),
            },
            IpConfig {
                interface: Some(1),
                address: "abcd:1234:ffff::cdde/64".parse().unwrap(),
                gateway: Some("abcd:1234:ffff::1".parse().unwrap()),
            },
        ],
        routes: vec![
            Route::new("0.0.0.0/0".parse().unwrap(), None),
            Route {
                mtu: 1280,
                table: Some(100),
                ..Route::new(
                    "1.2.3.0/24".parse().unwrap(),
                    Some("1.2.3.1".parse().unwrap()),
                )
            },
            Route::new("::/0".parse().unwrap(), None),
        ],
        dns: Dns {
            nameservers: vec!["1.2.3.4".into(), "1::cafe".into()],
            domain: "acompany.com".into(),
            search: vec!["somedomain.com".into(), "otherdomain.net".into()],
            options: vec!["foo".into(), "bar".into()],
        },
    }
}

const GOLDEN_1: &str = r#"{
    "cniVersion": "1.0.0",
    "dns": {
        "domain": "acompany.com",
        "nameservers": [
            "1.2.3.4",
            "1::cafe"
        ],
        "options": [
            "foo",
            "bar"
        ],
        "search": [
            "somedomain.com",
            "otherdomain.net"
        ]
    },
    "interfaces": [
        {
            "mac": "00:11:22:33:44:55",
            "name": "cni0"
        },
        {
            "mac": "00:11:22:33:44:66",
            "mtu": 1400,
            "name": "eth0",
            "sandbox": "/var/run/netns/blah"
        }
    ],
    "ips": [
        {
            "address": "10.1.2.3/24",
            "gateway": "10.1.2.1",
            "interface": 1
        },
        {
            "address": "abcd:1234:ffff::cdde/64",
            "gateway": "abcd:1234:ffff::1",
            "interface": 1
        }
    ],
    "routes": [
        {
            "dst": "0.0.0.0/0"
        },
        {
            "dst": "1.2.3.0/24",
            "gw": "1.2.3.1",
            "mtu": 1280,
            "table": 100
        },
        {
            "dst": "::/0"
        }
    ]
}"#;

const GOLDEN_04: &str = r#"{
    "cniVersion": "0.4.0",
    "interfaces": [
        {
            "name": "cni0",
            "mac": "00:11:22:33:44:55"
        },
        {
            "name": "eth0",
            "mac": "00:11:22:33:44:66",
            "sandbox": "/var/run/netns/blah"
        }
    ],
    "ips": [
        {
            "version": "4",
            "interface": 1,
            "address": "10.1.2.3/24",
            "gateway": "10.1.2.1"
        },
        {
            "version": "6",
            "interface": 1,
            "address": "abcd:1234:ffff::cdde/64",
            "gateway": "abcd:1234:ffff::1"
        }
    ],
    "routes": [
        {
            "dst": "0.0.0.0/0"
        },
        {
            "dst": "1.2.3.0/24",
            "gw": "1.2.3.1",
            "mtu": 1280,
            "table": 100
        },
        {
            "dst": "::/0"
        }
    ],
    "dns": {
        "nameservers": [
            "1.2.3.4",
            "1::cafe"
        ],
        "domain": "acompany.com",
        "search": [
            "somedomain.com",
            "otherdomain.net"
        ],
        "options": [
            "foo",
            "bar"
        ]
    }
}"#;

const GOLDEN_02: &str = r#"{
    "cniVersion": "0.2.0",
    "ip4": {
        "ip": "10.1.2.3/24",
        "gateway": "10.1.2.1",
        "routes": [
            {
                "dst": "0.0.0.0/0"
            },
            {
                "dst": "1.2.3.0/24",
                "gw": "1.2.3.1"
            }
        ]
    },
    "ip6": {
        "ip": "abcd:1234:ffff::cdde/64",
        "gateway": "abcd:1234:ffff::1",
        "routes": [
            {
                "dst": "::/0"
            }
        ]
    },
    "dns": {
        "nameservers": [
            "1.2.3.4",
            "1::cafe"
        ],
        "domain": "acompany.com",
        "search": [
            "somedomain.com",
            "otherdomain.net"
        ],
        "options": [
            "foo",
            "bar"
        ]
    }
}"#;

#[test]
fn prints_each_family_like_the_go_library() {
    let r = sample();
    assert_eq!(r.to_json("1.0.0").unwrap(), GOLDEN_1);
    assert_eq!(r.to_json("0.4.0").unwrap(), GOLDEN_04);
    assert_eq!(r.to_json("0.2.0").unwrap(), GOLDEN_02);
    assert_eq!(
        r.to_json("0.3.1").unwrap(),
        GOLDEN_04.replace("\"0.4.0\"", "\"0.3.1\"")
    );
    assert_eq!(
        r.to_json("1.1.0").unwrap(),
        GOLDEN_1.replace("\"1.0.0\"", "\"1.1.0\"")
    );
}

#[test]
fn parses_each_family_back() {
    let r = sample();
    let v1 = CniResult::parse(GOLDEN_1.as_bytes(), "1.1.0").unwrap();
    assert_eq!(v1.cni_version, "1.0.0");
    assert_eq!(v1.interfaces, r.interfaces);
    assert_eq!(v1.ips, r.ips);
    assert_eq!(v1.routes, r.routes);
    assert_eq!(v1.dns, r.dns);

    let v04 = CniResult::parse(GOLDEN_04.as_bytes(), "1.1.0").unwrap();
    assert_eq!(v04.cni_version, "0.4.0");
    assert_eq!(v04.ips, r.ips);
    // 0.4.0 has no interface mtu.
    assert_eq!(v04.interfaces[1].mtu, 0);
    assert_eq!(v04.to_json("0.4.0").unwrap(), GOLDEN_04);

    let v02 = CniResult::parse(GOLDEN_02.as_bytes(), "1.1.0").unwrap();
    assert_eq!(v02.ips.len(), 2);
    assert!(v02.ips.iter().all(|i| i.interface.is_none()));
    assert_eq!(v02.routes.len(), 3);
    assert_eq!(v02.to_json("0.2.0").unwrap(), GOLDEN_02);
}

#[test]
fn every_direction_round_trips_addresses() {
    let r = sample();
    for from in crate::version::ALL {
        let text = r.to_json(from).unwrap();
        let parsed = CniResult::parse(text.as_bytes(), "0.1.0").unwrap();
        assert_eq!(parsed.cni_version, *from);
        for to in crate::version::ALL {
            let out = parsed.to_json(to).unwrap();
            let back = CniResult::parse(out.as_bytes(), "0.1.0").unwrap();
            assert_eq!(back.cni_version, *to);
            let addrs: Vec<_> = back.ips.iter().map(|i| i.address).collect();
            assert_eq!(
                addrs,
                vec![r.ips[0].address, r.ips[1].address],
                "{from} -> {to}"
            );
        }
    }
}

#[test]
fn downconvert_without_ips_fails() {
    let r = CniResult {
        interfaces: vec![Interface {
            name: "lo".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    for v in ["0.1.0", "0.2.0"] {
        assert_eq!(
            r.to_json(v).unwrap_err().msg,
            "cannot convert: no valid IP addresses"
        );
    }
    assert!(r.to_json("0.3.0").is_ok());
}

#[test]
fn v04_always_prints_dns_and_v1_omits_it() {
    let r = CniResult {
        ips: vec![IpConfig {
            interface: Some(0),
            address: "127.0.0.1/8".parse().unwrap(),
            gateway: None,
        }],
        ..Default::default()
    };
    let v04 = r.to_json("0.4.0").unwrap();
    assert!(v04.contains("\"dns\": {}"), "{v04}");
    assert!(v04.contains("\"interface\": 0"), "{v04}");
    let v1 = r.to_json("1.0.0").unwrap();
    assert!(!v1.contains("dns"), "{v1}");
    assert!(v1.contains("\"interface\": 0"));
}

#[test]
fn prev_result_must_be_in_the_config_family() {
    let v: Value = serde_json::from_str(GOLDEN_04).unwrap();
    let err = CniResult::parse_prev(&v, "1.0.0").unwrap_err();
    assert_eq!(
        err.msg,
        r#"result type supports [1.0.0 1.1.0] but unmarshalled CNIVersion is "0.4.0""#
    );
    assert!(CniResult::parse_prev(&v, "0.3.1").is_ok());
    let v1: Value = serde_json::from_str(GOLDEN_1).unwrap();
    assert!(CniResult::parse_prev(&v1, "1.1.0").is_ok());
    // A prevResult without cniVersion takes the config's.
    let bare: Value = serde_json::json!({"ips": [{"address": "10.0.0.2/24"}]});
    assert_eq!(
        CniResult::parse_prev(&bare, "1.1.0").unwrap().cni_version,
        "1.1.0"
    );
}

#[test]
fn bad_results_are_decode_errors() {
    for bad in [
        &b"{"[..],
        br#"{"cniVersion": 1}"#,
        br#"{"cniVersion": "1.0.0", "ips": [{"address": "nope"}]}"#,
        br#"{"cniVersion": "1.0.0", "ips": {}}"#,
        br#"{"cniVersion": "x.y"}"#,
    ] {
        let e = CniResult::parse(bad, "1.0.0").unwrap_err();
        assert_eq!(
            e.code,
            code::DECODING_FAILURE,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn addresses_and_destinations_need_a_prefix_as_in_go() {
    // Go's types.IPNet reads through net.ParseCIDR: no implicit /32.
    let cases = [
        ("1.0.0", r#"{"ips": [{"address": "10.1.2.3"}]}"#, "10.1.2.3"),
        ("1.0.0", r#"{"ips": [{"address": "fd00::3"}]}"#, "fd00::3"),
        (
            "0.4.0",
            r#"{"ips": [{"version": "4", "address": "10.1.2.3"}]}"#,
            "10.1.2.3",
        ),
        (
            "1.0.0",
            r#"{"ips": [{"address": "10.1.2.3/24"}], "routes": [{"dst": "10.0.0.0"}]}"#,
            "10.0.0.0",
        ),
        ("0.2.0", r#"{"ip4": {"ip": "10.1.2.3"}}"#, "10.1.2.3"),
        (
            "0.2.0",
            r#"{"ip4": {"ip": "10.1.2.3/24", "routes": [{"dst": "0.0.0.0"}]}}"#,
            "0.0.0.0",
        ),
        (
            "1.0.0",
            r#"{"ips": [{"address": "10.1.2.3/255.255.255.0"}]}"#,
            "10.1.2.3/255.255.255.0",
        ),
        (
            "1.0.0",
            r#"{"ips": [{"address": "10.1.2.3/33"}]}"#,
            "10.1.2.3/33",
        ),
    ];
    for (version, prev, bad) in cases {
        let v: Value = serde_json::from_str(prev).unwrap();
        let e = CniResult::parse_prev(&v, version).unwrap_err();
        assert_eq!(e.code, code::DECODING_FAILURE, "{prev}");
        assert_eq!(
            e.msg,
            format!("failed to parse result: invalid CIDR address: {bad}"),
            "{prev}"
        );
    }
    // What Go's ParseCIDR takes still parses: host bits kept, a prefix
    // with leading zeros, IPv6.
    let v: Value = serde_json::json!({"ips": [{"address": "10.1.2.3/024"}, {"address": "fd00::3/64"}],
        "routes": [{"dst": "0.0.0.0/0"}]});
    let r = CniResult::parse_prev(&v, "1.0.0").unwrap();
    assert_eq!(r.ips[0].address.to_string(), "10.1.2.3/24");
    assert_eq!(r.ips[1].address.to_string(), "fd00::3/64");
    assert_eq!(r.routes[0].dst.to_string(), "0.0.0.0/0");
}
