//! The dhcp service's types and methods against bytes captured between the
//! Go reference's 1.1.1 plugin and daemon (`/usr/lib/cni/dhcp`, through a
//! recording proxy on the unix socket, dnsmasq serving the lease): the
//! `netrpc` crate's `testdata/go111_*`. A request file is what the Go
//! plugin wrote (CONNECT line included), a reply file what the Go daemon
//! answered (status line included). The crate tests the protocol itself.

use super::*;
use cni_skel::Route;
use ipnetwork::IpNetwork;
use netrpc::Header;
use netrpc::gob;
use std::io::{Read, Write};
use std::sync::Mutex;

const ADD_REQUEST: &[u8] = include_bytes!("../../../../wire/netrpc/testdata/go111_add_request.bin");
const ADD_REPLY: &[u8] = include_bytes!("../../../../wire/netrpc/testdata/go111_add_reply.bin");
const ADD_ERROR_REPLY: &[u8] =
    include_bytes!("../../../../wire/netrpc/testdata/go111_add_error_reply.bin");
const DEL_REQUEST: &[u8] = include_bytes!("../../../../wire/netrpc/testdata/go111_del_request.bin");
const DEL_REPLY: &[u8] = include_bytes!("../../../../wire/netrpc/testdata/go111_del_reply.bin");

const CONNECT: &[u8] = b"CONNECT /_goRPC_ HTTP/1.0\n\n";
const STATUS_LINE: &[u8] = b"HTTP/1.0 200 Connected to Go RPC\n\n";
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

const STDIN: &str = r#"{"cniVersion":"1.0.0","name":"capnet","type":"macvlan","ipam":{"type":"dhcp","daemonSocketPath":"/tmp/dhcprpc-cap/proxy.sock"}}
"#;

fn captured_args() -> CmdArgs {
    CmdArgs {
        container_id: "cap-ctr-1".into(),
        netns: "/run/netns/dhcprpc-cap-c".into(),
        if_name: "eth0".into(),
        args: "IgnoreUnknown=1;K8S_POD_NAME=p".into(),
        path: "/usr/lib/cni".into(),
        netns_override: false,
        stdin_data: STDIN.as_bytes().to_vec(),
    }
}

/// The lease the Go daemon returned: dnsmasq with a router and option 121.
fn captured_result() -> CniResult {
    let route = |dst: &str, gw: &str| Route::new(dst.parse().unwrap(), Some(gw.parse().unwrap()));
    CniResult {
        cni_version: String::new(), // the Go daemon leaves it unset
        interfaces: Vec::new(),
        ips: vec![cni_skel::IpConfig {
            interface: None,
            address: "10.132.250.24/24".parse().unwrap(),
            gateway: Some("10.132.250.1".parse().unwrap()),
        }],
        routes: vec![
            route("10.132.251.0/24", "10.132.250.3"),
            route("0.0.0.0/0", "10.132.250.1"),
        ],
        dns: Default::default(),
    }
}

fn strip<'a>(bytes: &'a [u8], prefix: &[u8]) -> &'a [u8] {
    assert!(bytes.starts_with(prefix), "{:?}", &bytes[..prefix.len()]);
    &bytes[prefix.len()..]
}

/// Reads a request as the server does: header and body.
fn decode_request(bytes: &[u8]) -> (Header, CmdArgs) {
    let mut r = strip(bytes, CONNECT);
    let (header, body) = netrpc::read_request(&mut gob::Decoder::new(), &mut r)
        .unwrap()
        .unwrap();
    assert!(r.is_empty());
    (header, wire::cmd_args_from_value(&body).unwrap())
}

#[test]
fn decodes_go_plugin_requests() {
    let (header, args) = decode_request(ADD_REQUEST);
    assert_eq!((header.service_method.as_str(), header.seq), (ALLOCATE, 0));
    assert_eq!(args, captured_args());
    let (header, args) = decode_request(DEL_REQUEST);
    assert_eq!(header.service_method, RELEASE);
    assert_eq!(args, captured_args());
}

/// The argument's definition and value, after the request header's: Go's
/// bytes (the crate checks the header's).
#[test]
fn our_requests_are_byte_identical_to_go_plugin() {
    for bytes in [ADD_REQUEST, DEL_REQUEST] {
        let mut out = Vec::new();
        gob::Encoder::new()
            .encode(
                &mut out,
                &wire::CMD_ARGS,
                &wire::cmd_args_to_value(&captured_args()),
            )
            .unwrap();
        assert!(bytes.ends_with(&out), "{bytes:02x?}");
    }
}

#[test]
fn decodes_go_daemon_replies() {
    let mut r = strip(ADD_REPLY, STATUS_LINE);
    let mut dec = gob::Decoder::new();
    let header = Header::from_value(&dec.read_value(&mut r).unwrap()).unwrap();
    assert_eq!(
        header,
        Header {
            service_method: ALLOCATE.into(),
            seq: 0,
            error: String::new()
        }
    );
    let result = wire::result_from_value(&dec.read_value(&mut r).unwrap()).unwrap();
    assert_eq!(result, captured_result());
    assert!(r.is_empty());

    let mut r = strip(ADD_ERROR_REPLY, STATUS_LINE);
    let mut dec = gob::Decoder::new();
    let header = Header::from_value(&dec.read_value(&mut r).unwrap()).unwrap();
    assert_eq!(header.error, r#"error looking up "nosuch": Link not found"#);
    assert_eq!(dec.read_value(&mut r).unwrap(), gob::Value::Struct(vec![]));
}

/// A service that answers as the Go daemon did in the captures, and
/// records what it was asked.
#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<(String, CmdArgs)>>,
}

impl Service for Fake {
    fn allocate(&self, args: &CmdArgs) -> Result<CniResult, String> {
        self.calls
            .lock()
            .unwrap()
            .push((ALLOCATE.into(), args.clone()));
        match args.if_name.as_str() {
            "nosuch" => Err(r#"error looking up "nosuch": Link not found"#.into()),
            _ => Ok(captured_result()),
        }
    }
    fn release(&self, args: &CmdArgs) -> Result<(), String> {
        self.calls
            .lock()
            .unwrap()
            .push((RELEASE.into(), args.clone()));
        Ok(())
    }
}

/// Feeds `request` (whole: CONNECT line and gob) to `serve_conn` and
/// returns all it wrote before closing.
fn serve_bytes(service: &Fake, request: &[u8]) -> Vec<u8> {
    let (ours, theirs) = UnixStream::pair().unwrap();
    (&theirs).write_all(request).unwrap();
    theirs.shutdown(std::net::Shutdown::Write).unwrap();
    netrpc::serve_conn(ours, &Dhcp(service), DEADLINE).unwrap();
    let mut out = Vec::new();
    (&theirs).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn server_answers_byte_identical_to_go_daemon() {
    let fake = Fake::default();
    assert_eq!(serve_bytes(&fake, DEL_REQUEST), DEL_REPLY);
    let nosuch = ADD_REQUEST
        .windows(6)
        .position(|w| w == b"\x04eth0\x01")
        .unwrap();
    // The same request for a link that does not exist: length bytes
    // adjusted (message and string), as the Go plugin would send it.
    let mut bad = ADD_REQUEST[..nosuch].to_vec();
    bad.push(6);
    bad.extend_from_slice(b"nosuch");
    bad.extend_from_slice(&ADD_REQUEST[nosuch + 5..]);
    // The CmdArgs value's length, before the name: 223 bytes, now 225.
    assert_eq!(&bad[0xb9..0xbb], &[0xff, 0xdf]);
    bad[0xba] += 2;
    assert_eq!(serve_bytes(&fake, &bad), ADD_ERROR_REPLY);
    let calls = fake.calls.lock().unwrap();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], (RELEASE.to_string(), captured_args()));
    assert_eq!(calls[1].1.if_name, "nosuch");
}

#[test]
fn server_result_decodes_as_go_daemon_result() {
    let ours = serve_bytes(&Fake::default(), ADD_REQUEST);
    // The response header and its definition are Go's bytes; the Result
    // definition has the fields newer Go versions added (MTU, Priority,
    // Scope ... of a route), so compare it decoded.
    assert_eq!(ours[..0x70], ADD_REPLY[..0x70]);
    let mut r = strip(&ours, STATUS_LINE);
    let mut dec = gob::Decoder::new();
    Header::from_value(&dec.read_value(&mut r).unwrap()).unwrap();
    let result = wire::result_from_value(&dec.read_value(&mut r).unwrap()).unwrap();
    assert_eq!(result, captured_result());
}

#[test]
fn every_result_field_round_trips() {
    let mut full = captured_result();
    full.cni_version = "1.1.0".into();
    full.interfaces.push(cni_skel::Interface {
        name: "eth0".into(),
        mac: "aa:bb:cc:dd:ee:ff".into(),
        mtu: 1400,
        sandbox: "/run/netns/x".into(),
        socket_path: "/s".into(),
        pci_id: "0000:00:01.0".into(),
    });
    full.ips[0].interface = Some(1); // Some(0) is lost on the wire, as in Go
    full.ips.push(cni_skel::IpConfig {
        interface: None,
        address: "fd00::5/64".parse().unwrap(),
        gateway: None,
    });
    full.routes[0].mtu = 1300;
    full.routes[0].adv_mss = 1200;
    full.routes[0].priority = 7;
    full.routes[0].table = Some(100);
    full.routes[1].scope = Some(253);
    full.routes[1].gw = None;
    full.dns = cni_skel::Dns {
        nameservers: vec!["10.132.250.2".into(), String::new()],
        domain: "example.org".into(),
        search: vec!["a.example".into()],
        options: vec!["ndots:2".into()],
    };
    let mut enc = gob::Encoder::new();
    let mut out = Vec::new();
    enc.encode(&mut out, &wire::RESULT, &wire::result_to_value(&full))
        .unwrap();
    // Definitions go once per stream.
    let first = out.len();
    enc.encode(&mut out, &wire::RESULT, &wire::result_to_value(&full))
        .unwrap();
    let mut r = &out[..];
    let mut dec = gob::Decoder::new();
    for _ in 0..2 {
        let v = dec.read_value(&mut r).unwrap();
        assert_eq!(wire::result_from_value(&v).unwrap(), full);
    }
    assert!(out.len() - first < first / 2, "{first} {}", out.len());
}

#[test]
fn client_reports_unreachable_daemon_like_go() {
    let dir = std::env::temp_dir().join(format!("dhcprpc-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.sock");
    let e = allocate(&missing, &captured_args()).unwrap_err();
    assert!(matches!(e, CallError::Unreachable { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "dial unix {}: connect: no such file or directory",
            missing.display()
        )
    );
    // A socket file nobody listens on (a daemon that died).
    let stale = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let e = release(&stale, &captured_args()).unwrap_err();
    assert!(
        e.to_string().ends_with("connect: connection refused"),
        "{e}"
    );
    assert!(reachable(&stale).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The Go reference's plugin (1.1.1) against our server loop: it must
/// accept our handshake, Result and error replies as it does its daemon's.
#[test]
fn go_plugin_talks_to_our_server() {
    let go = Path::new("/usr/lib/cni/dhcp");
    if !go.exists() {
        eprintln!("SKIP go_plugin_talks_to_our_server: no Go reference plugin at {go:?}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("dhcprpc-go-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("d.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let fake = Fake::default();
    let conf = format!(
        r#"{{"cniVersion":"1.0.0","name":"capnet","type":"macvlan","ipam":{{"type":"dhcp","daemonSocketPath":"{}"}}}}"#,
        socket.display()
    );
    let run = |command: &str, ifname: &str| {
        let mut child = std::process::Command::new(go)
            .env_clear()
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", "cap-ctr-1")
            .env("CNI_NETNS", "/run/netns/dhcprpc-none")
            .env("CNI_IFNAME", ifname)
            .env("CNI_PATH", "/usr/lib/cni")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(conf.as_bytes())
            .unwrap();
        let (stream, _) = listener.accept().unwrap();
        netrpc::serve_conn(stream, &Dhcp(&fake), DEADLINE).unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, out) = run("ADD", "eth0");
    assert_eq!(code, Some(0), "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "cniVersion": "1.0.0",
            "ips": [{"address": "10.132.250.24/24", "gateway": "10.132.250.1"}],
            "routes": [
                {"dst": "10.132.251.0/24", "gw": "10.132.250.3"},
                {"dst": "0.0.0.0/0", "gw": "10.132.250.1"}
            ],
            "dns": {}
        })
    );
    let (code, out) = run("ADD", "nosuch");
    assert_eq!(code, Some(1));
    assert!(
        out.contains(r#"error calling DHCP.Allocate: error looking up \"nosuch\": Link not found"#),
        "{out}"
    );
    assert_eq!(run("DEL", "eth0"), (Some(0), String::new()));
    let calls = fake.calls.lock().unwrap();
    let methods: Vec<&str> = calls.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(methods, [ALLOCATE, ALLOCATE, RELEASE]);
    assert_eq!(calls[2].1.netns, "/run/netns/dhcprpc-none");
    assert_eq!(calls[2].1.stdin_data, conf.as_bytes());
    drop(calls);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Newer Go plugins send `NetnsOverride` (a string: CNI_NETNS_OVERRIDE as
/// given) between `Path` and `StdinData`; it is read as the skel reads it.
#[test]
fn reads_newer_go_cmd_args() {
    use gob::{Kind, Ty, TypeDef};
    static HEAD_CMD_ARGS: TypeDef = TypeDef {
        id: 66,
        name: "CmdArgs",
        kind: Kind::Struct(&[
            ("ContainerID", Ty::String),
            ("Netns", Ty::String),
            ("IfName", Ty::String),
            ("Args", Ty::String),
            ("Path", Ty::String),
            ("NetnsOverride", Ty::String),
            ("StdinData", Ty::Bytes),
        ]),
    };
    for (value, want) in [
        ("1", true),
        ("true", true),
        ("TRUE", true),
        ("0", false),
        ("", false),
    ] {
        let mut v = wire::cmd_args_to_value(&captured_args());
        if let gob::Value::Struct(fields) = &mut v {
            fields.push(("NetnsOverride".into(), gob::Value::String(value.into())));
        }
        let mut out = Vec::new();
        gob::Encoder::new()
            .encode(&mut out, &HEAD_CMD_ARGS, &v)
            .unwrap();
        let got =
            wire::cmd_args_from_value(&gob::Decoder::new().read_value(&mut &out[..]).unwrap())
                .unwrap();
        assert_eq!(got.netns_override, want, "{value:?}");
        assert_eq!(got.stdin_data, captured_args().stdin_data);
    }
}

/// Random results and arguments survive encode → decode unchanged (but
/// for what Go's gob loses too: a zero behind a pointer, which the
/// generator leaves out).
#[test]
fn random_values_round_trip() {
    let mut state: u64 = 0xdead_beef_cafe_f00d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let text = |next: &mut dyn FnMut() -> u64| -> String {
        let n = next() % 12;
        (0..n)
            .map(|_| ['a', 'Z', '0', '/', ' ', 'é', '\u{0}', '😀'][(next() % 8) as usize])
            .collect()
    };
    for _ in 0..500 {
        let net = |next: &mut dyn FnMut() -> u64| -> IpNetwork {
            if next().is_multiple_of(2) {
                let ip = std::net::Ipv4Addr::from(next() as u32);
                IpNetwork::new(ip.into(), (next() % 33) as u8).unwrap()
            } else {
                let hi = 0x2001_0db8_0000_0000u64 | (next() & 0xffff_ffff);
                let ip = std::net::Ipv6Addr::from((u128::from(hi) << 64) | u128::from(next()));
                IpNetwork::new(ip.into(), (next() % 129) as u8).unwrap()
            }
        };
        let mut r = CniResult {
            cni_version: text(&mut next),
            ..Default::default()
        };
        for _ in 0..next() % 3 {
            r.interfaces.push(cni_skel::Interface {
                name: text(&mut next),
                mac: text(&mut next),
                mtu: next() as u32 % 10_000,
                sandbox: text(&mut next),
                socket_path: text(&mut next),
                pci_id: text(&mut next),
            });
        }
        for _ in 0..next() % 4 {
            let address = net(&mut next);
            r.ips.push(cni_skel::IpConfig {
                interface: (next().is_multiple_of(2)).then(|| 1 + (next() % 5) as usize),
                address,
                gateway: (next().is_multiple_of(2)).then(|| net(&mut next).ip()),
            });
        }
        for _ in 0..next() % 4 {
            let mut route = Route::new(net(&mut next), None);
            route.gw = (next().is_multiple_of(2)).then(|| net(&mut next).ip());
            route.mtu = next() as u32;
            route.adv_mss = next() as u32 % 3;
            route.priority = next() as u32;
            route.table = (next().is_multiple_of(2)).then(|| 1 + next() as u32 % 1000);
            route.scope = (next().is_multiple_of(2)).then(|| 1 + (next() % 255) as u8);
            r.routes.push(route);
        }
        r.dns.nameservers = (0..next() % 3).map(|_| text(&mut next)).collect();
        r.dns.domain = text(&mut next);
        r.dns.search = (0..next() % 3).map(|_| text(&mut next)).collect();
        r.dns.options = (0..next() % 3).map(|_| text(&mut next)).collect();

        let args = CmdArgs {
            container_id: text(&mut next),
            netns: text(&mut next),
            if_name: text(&mut next),
            args: text(&mut next),
            path: text(&mut next),
            netns_override: false,
            stdin_data: (0..next() % 300).map(|_| next() as u8).collect(),
        };

        let mut out = Vec::new();
        gob::Encoder::new()
            .encode(&mut out, &wire::RESULT, &wire::result_to_value(&r))
            .unwrap();
        // The other direction: a stream of its own (ids are per direction).
        let mut out2 = Vec::new();
        gob::Encoder::new()
            .encode(&mut out2, &wire::CMD_ARGS, &wire::cmd_args_to_value(&args))
            .unwrap();
        let mut rd = &out[..];
        let got = wire::result_from_value(&gob::Decoder::new().read_value(&mut rd).unwrap());
        assert_eq!(got.unwrap(), r);
        let mut rd2 = &out2[..];
        let got = wire::cmd_args_from_value(&gob::Decoder::new().read_value(&mut rd2).unwrap());
        assert_eq!(got.unwrap(), args);
        assert!(rd.is_empty() && rd2.is_empty());
    }
}
