//! The codec against bytes captured between the Go reference's 1.1.1
//! plugin and daemon (`/usr/lib/cni/dhcp`, through a recording proxy on the
//! unix socket, dnsmasq serving the lease): `testdata/go111_*`. A request
//! file is what the Go plugin wrote (CONNECT line included), a reply file
//! what the Go daemon answered (status line included).

use super::*;
use cni_skel::Route;
use ipnetwork::IpNetwork;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

const ADD_REQUEST: &[u8] = include_bytes!("testdata/go111_add_request.bin");
const ADD_REPLY: &[u8] = include_bytes!("testdata/go111_add_reply.bin");
const ADD_ERROR_REPLY: &[u8] = include_bytes!("testdata/go111_add_error_reply.bin");
const DEL_REQUEST: &[u8] = include_bytes!("testdata/go111_del_request.bin");
const DEL_REPLY: &[u8] = include_bytes!("testdata/go111_del_reply.bin");
const UNKNOWN_REQUEST: &[u8] = include_bytes!("testdata/go111_unknown_method_request.bin");
const UNKNOWN_REPLY: &[u8] = include_bytes!("testdata/go111_unknown_method_reply.bin");

const STATUS_LINE: &[u8] = b"HTTP/1.0 200 Connected to Go RPC\n\n";

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
    let mut dec = gob::Decoder::new();
    let header = Header::from_value(&dec.read_value(&mut r).unwrap()).unwrap();
    let args = wire::cmd_args_from_value(&dec.read_value(&mut r).unwrap()).unwrap();
    assert!(r.is_empty());
    (header, args)
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

#[test]
fn our_requests_are_byte_identical_to_go_plugin() {
    for (bytes, method) in [(ADD_REQUEST, ALLOCATE), (DEL_REQUEST, RELEASE)] {
        let mut enc = gob::Encoder::new();
        let mut out = CONNECT.to_vec();
        let header = Header {
            service_method: method.into(),
            ..Header::default()
        };
        enc.encode(&mut out, &wire::REQUEST, &header.to_value())
            .unwrap();
        enc.encode(
            &mut out,
            &wire::CMD_ARGS,
            &wire::cmd_args_to_value(&captured_args()),
        )
        .unwrap();
        assert_eq!(out, bytes, "{method}");
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
fn serve_bytes(service: &impl Service, request: &[u8]) -> Vec<u8> {
    let (ours, theirs) = UnixStream::pair().unwrap();
    (&theirs).write_all(request).unwrap();
    theirs.shutdown(std::net::Shutdown::Write).unwrap();
    serve_conn(ours, service).unwrap();
    let mut out = Vec::new();
    (&theirs).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn server_answers_byte_identical_to_go_daemon() {
    let fake = Fake::default();
    assert_eq!(serve_bytes(&fake, DEL_REQUEST), DEL_REPLY);
    assert_eq!(serve_bytes(&fake, UNKNOWN_REQUEST), UNKNOWN_REPLY);
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

/// A client and our server on one connection: several calls share the
/// streams (definitions sent once, sequence numbers counted).
#[test]
fn client_and_server_several_calls_on_one_connection() {
    let (a, b) = UnixStream::pair().unwrap();
    let fake = Fake::default();
    std::thread::scope(|s| {
        let server = s.spawn(|| serve_conn(b, &fake));
        let mut client = Client::from_stream(a).unwrap();
        let v = client.call(ALLOCATE, &captured_args()).unwrap();
        assert_eq!(wire::result_from_value(&v).unwrap(), captured_result());
        client.call(RELEASE, &captured_args()).unwrap();
        let mut nosuch = captured_args();
        nosuch.if_name = "nosuch".into();
        match client.call(ALLOCATE, &nosuch) {
            Err(CallError::Remote(m)) => assert!(m.contains("Link not found"), "{m}"),
            other => panic!("{other:?}"),
        }
        let e = client.call(GC, &CmdArgs::default()).unwrap_err();
        assert!(e.is_unknown_method(), "{e}");
        assert_eq!(e.to_string(), "rpc: can't find method DHCP.GC");
        let e = client.call("DHCP.Nope", &CmdArgs::default()).unwrap_err();
        assert_eq!(e.to_string(), "rpc: can't find method DHCP.Nope");
        let e = client
            .call("Other.Allocate", &CmdArgs::default())
            .unwrap_err();
        assert_eq!(e.to_string(), "rpc: can't find service Other.Allocate");
        let e = client.call("nodot", &CmdArgs::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rpc: service/method request ill-formed: nodot"
        );
        assert_eq!(client.seq, 7);
        drop(client);
        server.join().unwrap().unwrap();
    });
    assert_eq!(fake.calls.lock().unwrap().len(), 3);
}

#[test]
fn server_refuses_other_http_requests_as_go() {
    let out = serve_bytes(
        &Fake::default(),
        b"GET /_goRPC_ HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(out.ends_with(b"\r\n\r\n405 must CONNECT\n"), "{out:?}");
    let out = serve_bytes(&Fake::default(), b"CONNECT /debug/rpc HTTP/1.0\n\n");
    assert!(out.starts_with(b"HTTP/1.0 404 "), "{out:?}");
    // Not HTTP at all, or no end of head.
    let (ours, theirs) = UnixStream::pair().unwrap();
    (&theirs).write_all(&[0xff; 9000]).unwrap();
    drop(theirs);
    assert!(serve_conn(ours, &Fake::default()).is_err());
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

#[test]
fn client_refuses_a_server_that_is_not_go_rpc() {
    let (a, b) = UnixStream::pair().unwrap();
    (&b).write_all(b"HTTP/1.0 404 Not Found\n\n").unwrap();
    match Client::from_stream(a) {
        Err(CallError::Protocol(m)) => assert_eq!(m, "unexpected HTTP response: 404 Not Found"),
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("accepted"),
    }
}

// ---- hostile bytes: errors, never panics ----

/// Decodes everything in `bytes` as values until an error or the end.
fn decode_all(bytes: &[u8]) -> Result<usize, gob::Error> {
    let mut r = bytes;
    let mut dec = gob::Decoder::new();
    let mut n = 0;
    while !r.is_empty() {
        let v = dec.read_value(&mut r)?;
        let _ = wire::result_from_value(&v);
        let _ = wire::cmd_args_from_value(&v);
        let _ = Header::from_value(&v);
        n += 1;
    }
    Ok(n)
}

fn fixtures() -> [&'static [u8]; 5] {
    [
        strip(ADD_REQUEST, CONNECT),
        strip(DEL_REQUEST, CONNECT),
        strip(ADD_REPLY, STATUS_LINE),
        strip(ADD_ERROR_REPLY, STATUS_LINE),
        strip(UNKNOWN_REPLY, STATUS_LINE),
    ]
}

#[test]
fn truncated_streams_are_errors() {
    for f in fixtures() {
        assert_eq!(decode_all(f).unwrap(), 2);
        for cut in 1..f.len() {
            // A cut between messages is a shorter, valid stream.
            let _ = decode_all(&f[..cut]);
        }
        assert!(decode_all(&f[..f.len() - 1]).is_err());
    }
}

#[test]
fn mutated_streams_never_panic() {
    // A fixed xorshift: the same mutations every run.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for f in fixtures() {
        for _ in 0..3000 {
            let mut m = f.to_vec();
            for _ in 0..1 + next() % 4 {
                let at = (next() % m.len() as u64) as usize;
                m[at] = match next() % 4 {
                    0 => 0xff,
                    1 => 0x80,
                    2 => m[at].wrapping_add(1),
                    _ => next() as u8,
                };
            }
            let _ = decode_all(&m);
        }
    }
}

#[test]
fn hostile_lengths_and_nesting_are_refused() {
    for bad in [
        &[0xf8u8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff][..], // 2^64-1 byte message
        &[0xfc, 0x7f, 0xff, 0xff, 0xff][..],                           // 2 GiB message
        &[0xf7][..],                                                   // 9-byte length
        &[0x00][..],                                                   // empty message
        &[0x04, 0x02, 0x00, 0x00, 0x00][..],                           // bool value: trailing byte
        &[0x02, 0x7f, 0x00][..],       // defines type 64 (below user ids)
        &[0x03, 0x20, 0x00, 0x00][..], // a value of wireType itself
        &[0x04, 0xff, 0x82, 0x01, 0x01][..], // a value of an undefined type
        &[0x04, 0x10, 0x00, 0x01, b'x'][..], // an interface value
    ] {
        assert!(decode_all(bad).is_err(), "{bad:02x?}");
    }
    // A byte slice claiming more than the message holds.
    let mut msg = vec![];
    gob::put_int(&mut msg, gob::BYTES);
    msg.extend_from_slice(&[0x00, 0xfc, 0x7f, 0xff, 0xff, 0xff]);
    let mut stream = vec![msg.len() as u8];
    stream.extend_from_slice(&msg);
    assert!(decode_all(&stream).is_err());
    // A struct type containing a slice of itself, nested deeper than allowed.
    let mut stream = Vec::new();
    let def = |body: &[u8], out: &mut Vec<u8>| {
        out.push(body.len() as u8);
        out.extend_from_slice(body);
    };
    // type 65 = struct{ F []T66 }, type 66 = []T65
    def(
        &[
            0xff, 0x81, 0x03, 0x01, 0x02, 0xff, 0x82, 0x00, 0x01, 0x01, 0x01, 0x01, b'F', 0x01,
            0xff, 0x84, 0x00, 0x00, 0x00,
        ],
        &mut stream,
    );
    def(
        &[
            0xff, 0x83, 0x02, 0x01, 0x02, 0xff, 0x84, 0x00, 0x01, 0xff, 0x82, 0x00, 0x00,
        ],
        &mut stream,
    );
    let mut value = vec![0xff, 0x82];
    for _ in 0..100 {
        value.extend_from_slice(&[0x01, 0x01]); // field F, one element
    }
    value.extend(std::iter::repeat_n(0x00, 101));
    stream.push(0xfe);
    stream.extend_from_slice(&(value.len() as u16).to_be_bytes());
    stream.extend_from_slice(&value);
    match decode_all(&stream) {
        Err(gob::Error::Malformed(m)) => assert!(m.contains("too deep"), "{m}"),
        other => panic!("{other:?}"),
    }
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
        serve_conn(stream, &fake).unwrap();
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

/// Hostile clients: the server loop ends with an error or answers, never
/// panics, whatever the bytes after the handshake.
#[test]
fn server_survives_mutated_requests() {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let fake = Fake::default();
    for _ in 0..300 {
        let mut m = ADD_REQUEST.to_vec();
        for _ in 0..1 + next() % 3 {
            let at = CONNECT.len() + (next() % (m.len() - CONNECT.len()) as u64) as usize;
            m[at] = next() as u8;
        }
        let (ours, theirs) = UnixStream::pair().unwrap();
        (&theirs).write_all(&m).unwrap();
        theirs.shutdown(std::net::Shutdown::Write).unwrap();
        let _ = serve_conn(ours, &fake);
    }
}

/// A hostile daemon: a reply announcing 2^62 bytes, then silence, is an
/// error (the client does not wait for or allocate them).
#[test]
fn client_refuses_huge_replies() {
    let (a, b) = UnixStream::pair().unwrap();
    (&b).write_all(STATUS_LINE).unwrap();
    let mut client = Client::from_stream(a).unwrap();
    (&b).write_all(&[0xf8, 0x40, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    let e = client.call(ALLOCATE, &captured_args()).unwrap_err();
    assert!(e.to_string().contains("invalid message length"), "{e}");
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

/// Two schemas with the same id (a client's CmdArgs and a daemon's
/// Result are both 66) cannot share a stream: an error, not a stream the
/// other side would misread.
#[test]
fn one_id_one_type_per_stream() {
    let mut out = Vec::new();
    let mut enc = gob::Encoder::new();
    enc.encode(
        &mut out,
        &wire::RESULT,
        &wire::result_to_value(&captured_result()),
    )
    .unwrap();
    let e = enc
        .encode(
            &mut out,
            &wire::CMD_ARGS,
            &wire::cmd_args_to_value(&captured_args()),
        )
        .unwrap_err();
    assert!(e.to_string().contains("type id 66"), "{e}");
}
