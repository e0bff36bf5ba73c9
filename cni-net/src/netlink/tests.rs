//! Netlink tests. The root ones work only in anonymous namespaces created
//! by `NetNs::new_anonymous` (a thread that unshares and hands back a
//! handle), so they never touch the real host network and leave nothing
//! behind.

use super::*;
use crate::testutil::skip_unless_root;

fn net(s: &str) -> IpNetwork {
    s.parse().unwrap()
}

fn ipv6_enabled() -> bool {
    std::path::Path::new("/proc/sys/net/ipv6").exists()
}

#[test]
fn mac_parse_and_print() {
    let m: Mac = "0A:1b:2c:3d:4e:5F".parse().unwrap();
    assert_eq!(m, Mac([0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f]));
    assert_eq!(m.to_string(), "0a:1b:2c:3d:4e:5f");
    assert_eq!("0a-1b-2c-3d-4e-5f".parse::<Mac>().unwrap(), m);
    for bad in [
        "",
        "0a:1b:2c:3d:4e",
        "0a:1b:2c:3d:4e:5f:00",
        "0a:1b:2c:3d:4e:zz",
        "a:1b:2c:3d:4e:5f",
    ] {
        assert!(bad.parse::<Mac>().is_err(), "{bad:?}");
    }
    assert_eq!(format_hw(&[0; 6]), "00:00:00:00:00:00");
}

#[test]
fn route_messages_round_trip() {
    let mut r = Route::new(net("10.9.0.7/16"))
        .via("10.1.2.1".parse().unwrap())
        .dev(3);
    r.priority = Some(100);
    r.table = Some(1000);
    r.scope = Some(scope::UNIVERSE);
    r.mtu = Some(1300);
    r.advmss = Some(1200);
    r.src = Some("10.1.2.3".parse().unwrap());
    r.onlink = true;
    let back = Route::from_msg(&r.to_msg(false).unwrap()).unwrap();
    let mut want = r.clone();
    want.dst = net("10.9.0.0/16");
    want.protocol = 4; // static, the builder's default
    assert_eq!(back, want);
    assert_eq!(
        r.to_string(),
        "10.9.0.7/16 via 10.1.2.1 dev 3 src 10.1.2.3 metric 100 table 1000 scope 0 mtu 1300 advmss 1200 onlink"
    );

    let d = Route::default_route(IpFamily::V6).via("2001:db8::1".parse().unwrap());
    assert_eq!(d.dst, net("::/0"));
    let del = d.to_msg(true).unwrap();
    assert_eq!(del.header.scope, RouteScope::NoWhere);
    assert_eq!(del.header.protocol, RouteProtocol::Unspec);
    let back = Route::from_msg(&d.to_msg(false).unwrap()).unwrap();
    assert_eq!(
        (back.dst, back.gateway, back.table),
        (d.dst, d.gateway, Some(TABLE_MAIN))
    );

    // A gateway of the other family is a v4-via-v6 next hop; a bad mix fails.
    let mut bad = Route::new(net("2001:db8::/64"));
    bad.src = Some("10.0.0.1".parse().unwrap());
    assert!(bad.to_msg(false).is_err());
}

#[test]
fn loopback_in_private_netns() {
    if skip_unless_root("netlink::loopback_in_private_netns") {
        return;
    }
    let ns = NetNs::new_anonymous().unwrap();
    // `host()` binds to the calling thread's namespace: here, `ns`.
    let links = ns
        .run(|| Netlink::host().unwrap().links().unwrap())
        .unwrap();
    assert_eq!(links.len(), 1, "{links:?}");
    let nl = Netlink::for_ns(&ns).unwrap();
    let lo = nl.must_link("lo").unwrap();
    assert_eq!(links[0], lo);
    assert_eq!(
        (lo.kind.as_str(), lo.mac.as_str(), lo.up),
        ("", "00:00:00:00:00:00", false)
    );
    assert_eq!(nl.link_by_index(lo.index).unwrap().unwrap().name, "lo");
    assert!(nl.link_by_name("nosuch0").unwrap().is_none());
    assert!(nl.link_by_name("a-name-much-too-long").unwrap().is_none());
    assert!(nl.link_by_index(9999).unwrap().is_none());
    let e = nl.must_link("nosuch0").unwrap_err();
    assert_eq!(
        e.to_string(),
        "get link nosuch0: No such device (os error 19)"
    );

    nl.set_up(&lo).unwrap();
    assert!(nl.must_link("lo").unwrap().up);
    let v4 = nl.addrs(&lo, Some(IpFamily::V4)).unwrap();
    assert_eq!(
        v4.iter().map(|a| a.address).collect::<Vec<_>>(),
        vec![net("127.0.0.1/8")]
    );
    assert_eq!(v4[0].scope, scope::HOST);
    if ipv6_enabled() {
        let v6 = nl.addrs(&lo, Some(IpFamily::V6)).unwrap();
        assert_eq!(
            v6.iter().map(|a| a.address).collect::<Vec<_>>(),
            vec![net("::1/128")]
        );
    }
    nl.set_down(&lo).unwrap();
    assert!(!nl.must_link("lo").unwrap().up);
}

#[test]
fn bridge_and_veth_across_namespaces() {
    if skip_unless_root("netlink::bridge_and_veth_across_namespaces") {
        return;
    }
    let host = NetNs::new_anonymous().unwrap();
    let cont = NetNs::new_anonymous().unwrap();
    let nl = Netlink::for_ns(&host).unwrap();
    let cnl = Netlink::for_ns(&cont).unwrap();

    let opts = BridgeOpts {
        name: "cni0",
        mtu: Some(1400),
        promisc: true,
        up: true,
        ..Default::default()
    };
    let br = nl.ensure_bridge(&opts).unwrap();
    assert_eq!(
        (br.kind.as_str(), br.mtu, br.up, br.promisc),
        ("bridge", 1400, true, true)
    );
    // Ensuring again finds the same bridge; creating it again is EEXIST.
    assert_eq!(nl.ensure_bridge(&opts).unwrap().index, br.index);
    let e = nl.create_bridge(&opts).unwrap_err();
    assert!(e.is_exists(), "{e}");
    assert_eq!(
        e.to_string(),
        "create bridge cni0: File exists (os error 17)"
    );

    let peer_mac: Mac = "0a:58:0a:01:02:03".parse().unwrap();
    let veth = VethOpts {
        name: "vethab12cd34",
        peer_name: "eth0",
        peer_ns: Some(&cont),
        mtu: Some(1400),
        peer_mac: Some(peer_mac),
        controller: Some(br.index),
        up: true,
        ..Default::default()
    };
    let host_end = nl.create_veth(&veth).unwrap();
    assert_eq!(host_end.kind, "veth");
    assert_eq!(host_end.master, Some(br.index));
    assert_eq!(host_end.mtu, 1400);
    assert!(host_end.up);
    assert_eq!(host_end.hairpin, Some(false));
    assert!(
        host_end.link_netnsid.is_some(),
        "peer is in another netns: {host_end:?}"
    );
    // The peer exists only in the container namespace, with its MAC.
    assert!(nl.link_by_name("eth0").unwrap().is_none());
    let cont_end = cnl.must_link("eth0").unwrap();
    assert_eq!(
        (cont_end.kind.as_str(), cont_end.mac.as_str(), cont_end.mtu),
        ("veth", "0a:58:0a:01:02:03", 1400)
    );
    assert!(!cont_end.up);
    assert_eq!(cont_end.peer_index, Some(host_end.index));
    assert_eq!(host_end.peer_index, Some(cont_end.index));

    // Same names again: EEXIST, naming both ends.
    let e = nl.create_veth(&veth).unwrap_err();
    assert!(e.is_exists());
    assert_eq!(
        e.to_string(),
        "create veth vethab12cd34 <-> eth0: File exists (os error 17)"
    );
    // A non-bridge of the bridge's name is refused.
    let e = nl
        .ensure_bridge(&BridgeOpts {
            name: "vethab12cd34",
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"ensure bridge vethab12cd34: "vethab12cd34" already exists but is not a bridge"#
    );

    // Port and link settings.
    nl.set_hairpin(&host_end, true).unwrap();
    nl.set_isolated(&host_end, true).unwrap();
    let l = nl.must_link("vethab12cd34").unwrap();
    assert_eq!((l.hairpin, l.isolated), (Some(true), Some(true)));
    nl.set_master(&host_end, None).unwrap();
    assert_eq!(nl.must_link("vethab12cd34").unwrap().master, None);
    nl.set_master(&host_end, Some(br.index)).unwrap();
    assert_eq!(nl.must_link("vethab12cd34").unwrap().master, Some(br.index));
    nl.set_mtu(&host_end, 1300).unwrap();
    let mac: Mac = "0a:58:00:00:00:01".parse().unwrap();
    nl.set_mac(&host_end, mac).unwrap();
    nl.set_promisc(&host_end, true).unwrap();
    let l = nl.must_link("vethab12cd34").unwrap();
    assert_eq!(
        (l.mtu, l.mac.as_str(), l.promisc),
        (1300, "0a:58:00:00:00:01", true)
    );
    nl.set_down(&host_end).unwrap();
    assert!(!nl.must_link("vethab12cd34").unwrap().up);
    cnl.set_up(&cont_end).unwrap();
    assert!(cnl.must_link("eth0").unwrap().up);

    // Deleting the host end removes the peer too; deleting again is fine.
    nl.del_link(&host_end).unwrap();
    assert!(cnl.link_by_name("eth0").unwrap().is_none());
    nl.del_link(&host_end).unwrap();
    assert!(nl.del_link_by_name("vethab12cd34").unwrap().is_none());
    assert_eq!(
        nl.del_link_by_name("cni0").unwrap().unwrap().index,
        br.index
    );
    assert_eq!(nl.links().unwrap().len(), 1);
}

/// A veth pair with both ends up in one namespace: a link that carries routes.
fn up_pair(nl: &Netlink) -> Link {
    let a0 = nl
        .create_veth(&VethOpts {
            name: "a0",
            peer_name: "a1",
            up: true,
            ..Default::default()
        })
        .unwrap();
    nl.set_up(&nl.must_link("a1").unwrap()).unwrap();
    a0
}

#[test]
fn addresses() {
    if skip_unless_root("netlink::addresses") {
        return;
    }
    let ns = NetNs::new_anonymous().unwrap();
    let nl = Netlink::for_ns(&ns).unwrap();
    let a0 = up_pair(&nl);
    assert!(nl.must_link("a1").unwrap().up);

    nl.add_addr(&a0, net("10.1.2.3/24")).unwrap();
    nl.add_addr(&a0, net("10.1.3.3/31")).unwrap();
    let e = nl.add_addr(&a0, net("10.1.2.3/24")).unwrap_err();
    assert!(e.is_exists());
    assert_eq!(
        e.to_string(),
        "add address 10.1.2.3/24 to a0: File exists (os error 17)"
    );
    let v4 = nl.addrs(&a0, Some(IpFamily::V4)).unwrap();
    assert_eq!(
        v4.iter().map(|a| a.address).collect::<Vec<_>>(),
        vec![net("10.1.2.3/24"), net("10.1.3.3/31")]
    );
    assert_eq!(v4[0].broadcast, Some("10.1.2.255".parse().unwrap()));
    assert_eq!(v4[1].broadcast, None);
    assert_eq!(
        (v4[0].scope, v4[0].label.as_str(), v4[0].permanent),
        (scope::UNIVERSE, "a0", true)
    );
    // Only a0's addresses, and all families when asked.
    let a1 = nl.must_link("a1").unwrap();
    assert!(nl.addrs(&a1, Some(IpFamily::V4)).unwrap().is_empty());

    if ipv6_enabled() {
        nl.add_addr(&a0, net("2001:db8::5/64")).unwrap();
        let v6 = nl.addrs(&a0, Some(IpFamily::V6)).unwrap();
        assert!(
            v6.iter().any(|a| a.address == net("2001:db8::5/64")),
            "{v6:?}"
        );
        let all = nl.addrs(&a0, None).unwrap();
        assert!(all.iter().any(|a| a.address.is_ipv4()) && all.iter().any(|a| a.address.is_ipv6()));
        nl.del_addr(&a0, net("2001:db8::5/64")).unwrap();
        assert!(
            !nl.addrs(&a0, Some(IpFamily::V6))
                .unwrap()
                .iter()
                .any(|a| a.address == net("2001:db8::5/64"))
        );
    }

    nl.del_addr(&a0, net("10.1.2.3/24")).unwrap();
    nl.del_addr(&a0, net("10.1.2.3/24")).unwrap();
    let v4 = nl.addrs(&a0, Some(IpFamily::V4)).unwrap();
    assert_eq!(
        v4.iter().map(|a| a.address).collect::<Vec<_>>(),
        vec![net("10.1.3.3/31")]
    );
}

#[test]
fn routes() {
    if skip_unless_root("netlink::routes") {
        return;
    }
    let ns = NetNs::new_anonymous().unwrap();
    let nl = Netlink::for_ns(&ns).unwrap();
    let a0 = up_pair(&nl);
    nl.add_addr(&a0, net("10.1.2.3/24")).unwrap();

    let mut r = Route::new(net("10.9.0.0/16"))
        .via("10.1.2.1".parse().unwrap())
        .dev(a0.index);
    r.priority = Some(100);
    r.mtu = Some(1300);
    r.advmss = Some(1200);
    r.src = Some("10.1.2.3".parse().unwrap());
    nl.add_route(&r).unwrap();
    let e = nl.add_route(&r).unwrap_err();
    assert!(e.is_exists(), "{e}");
    assert!(
        e.to_string()
            .starts_with("add route 10.9.0.0/16 via 10.1.2.1 dev "),
        "{e}"
    );
    nl.replace_route(&r).unwrap();

    let default = Route::default_route(IpFamily::V4)
        .via("10.1.2.1".parse().unwrap())
        .dev(a0.index);
    nl.add_route(&default).unwrap();
    let mut in_table = Route::new(net("10.8.0.0/16")).dev(a0.index);
    in_table.table = Some(100);
    in_table.scope = Some(scope::LINK);
    nl.add_route(&in_table).unwrap();

    let main = nl.routes(IpFamily::V4, None).unwrap();
    let got = main
        .iter()
        .find(|x| x.dst == net("10.9.0.0/16"))
        .expect("route listed");
    assert_eq!(got.gateway, r.gateway);
    assert_eq!(got.oif, Some(a0.index));
    assert_eq!(
        (got.priority, got.mtu, got.advmss, got.src),
        (Some(100), Some(1300), Some(1200), r.src)
    );
    assert_eq!(
        (got.table, got.scope),
        (Some(TABLE_MAIN), Some(scope::UNIVERSE))
    );
    assert!(
        main.iter()
            .any(|x| x.dst == net("0.0.0.0/0") && x.gateway == default.gateway)
    );
    // The kernel's prefix route for the address is there too, link scope.
    assert!(
        main.iter()
            .any(|x| x.dst == net("10.1.2.0/24") && x.scope == Some(scope::LINK))
    );
    assert!(!main.iter().any(|x| x.dst == net("10.8.0.0/16")));
    let t100 = nl.routes(IpFamily::V4, Some(100)).unwrap();
    assert_eq!(t100.len(), 1, "{t100:?}");
    assert_eq!(
        (t100[0].dst, t100[0].scope, t100[0].table),
        (net("10.8.0.0/16"), Some(scope::LINK), Some(100))
    );

    // Delete matches on what is given; deleting again is fine.
    nl.del_route(&Route::new(net("10.9.0.0/16"))).unwrap();
    nl.del_route(&Route::new(net("10.9.0.0/16"))).unwrap();
    nl.del_route(&default).unwrap();
    nl.del_route(&in_table).unwrap();
    let main = nl.routes(IpFamily::V4, None).unwrap();
    assert!(
        !main
            .iter()
            .any(|x| x.dst == net("10.9.0.0/16") || x.dst.prefix() == 0),
        "{main:?}"
    );
    assert!(nl.routes(IpFamily::V4, Some(100)).unwrap().is_empty());

    if ipv6_enabled() {
        nl.add_addr(&a0, net("2001:db8::5/64")).unwrap();
        let mut r6 = Route::new(net("2001:db8:9::/48"))
            .via("2001:db8::1".parse().unwrap())
            .dev(a0.index);
        r6.priority = Some(1024);
        nl.add_route(&r6).unwrap();
        let d6 = Route::default_route(IpFamily::V6)
            .via("2001:db8::1".parse().unwrap())
            .dev(a0.index);
        nl.add_route(&d6).unwrap();
        let v6 = nl.routes(IpFamily::V6, None).unwrap();
        let got = v6
            .iter()
            .find(|x| x.dst == net("2001:db8:9::/48"))
            .expect("v6 route listed");
        assert_eq!(
            (got.gateway, got.priority, got.oif),
            (r6.gateway, Some(1024), Some(a0.index))
        );
        assert!(v6.iter().any(|x| x.dst == net("::/0")));
        nl.del_route(&r6).unwrap();
        nl.del_route(&r6).unwrap();
        nl.del_route(&d6).unwrap();
        let v6 = nl.routes(IpFamily::V6, None).unwrap();
        assert!(
            !v6.iter()
                .any(|x| x.dst == net("2001:db8:9::/48") || x.dst.prefix() == 0),
            "{v6:?}"
        );
    }
}
