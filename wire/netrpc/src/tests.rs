//! The codec and the rpc framing against bytes captured between two Go
//! processes (the CNI dhcp plugin and daemon of the Go reference 1.1.1,
//! through a recording proxy on the unix socket): `testdata/go111_*`. A
//! request file is what the Go client wrote (CONNECT line included), a
//! reply file what the Go server answered (status line included). Only
//! their net/rpc and gob structure matters here; the dhcp plugin tests its
//! own types against the same files.

use super::*;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const ADD_REQUEST: &[u8] = include_bytes!("../testdata/go111_add_request.bin");
const ADD_REPLY: &[u8] = include_bytes!("../testdata/go111_add_reply.bin");
const ADD_ERROR_REPLY: &[u8] = include_bytes!("../testdata/go111_add_error_reply.bin");
const DEL_REQUEST: &[u8] = include_bytes!("../testdata/go111_del_request.bin");
const DEL_REPLY: &[u8] = include_bytes!("../testdata/go111_del_reply.bin");
const UNKNOWN_REQUEST: &[u8] = include_bytes!("../testdata/go111_unknown_method_request.bin");
const UNKNOWN_REPLY: &[u8] = include_bytes!("../testdata/go111_unknown_method_reply.bin");

const STATUS_LINE: &[u8] = b"HTTP/1.0 200 Connected to Go RPC\n\n";
const DEADLINE: Duration = Duration::from_secs(30);

/// The argument type of the captured calls, as the Go client numbered it.
static ARGS: TypeDef = TypeDef {
    id: 66,
    name: "CmdArgs",
    kind: Kind::Struct(&[
        ("ContainerID", Ty::String),
        ("Netns", Ty::String),
        ("IfName", Ty::String),
        ("Args", Ty::String),
        ("Path", Ty::String),
        ("StdinData", Ty::Bytes),
    ]),
};
/// `struct{}` as the Go server numbered it (after its reply types).
static EMPTY: TypeDef = TypeDef {
    id: 76,
    name: "",
    kind: Kind::Struct(&[]),
};

fn strip<'a>(bytes: &'a [u8], prefix: &[u8]) -> &'a [u8] {
    assert!(bytes.starts_with(prefix), "{:?}", &bytes[..prefix.len()]);
    &bytes[prefix.len()..]
}

/// Reads a request stream as the server does.
fn decode_request(bytes: &[u8]) -> (Header, Value) {
    let mut r = strip(bytes, CONNECT);
    let (header, body) = read_request(&mut gob::Decoder::new(), &mut r)
        .unwrap()
        .unwrap();
    assert!(r.is_empty());
    (header, body)
}

#[test]
fn decodes_go_client_requests() {
    let (header, args) = decode_request(ADD_REQUEST);
    assert_eq!(
        (header.service_method.as_str(), header.seq),
        ("DHCP.Allocate", 0)
    );
    assert_eq!(
        args.field("ContainerID"),
        Some(&Value::String("cap-ctr-1".into()))
    );
    assert_eq!(args.field("IfName"), Some(&Value::String("eth0".into())));
    assert!(
        matches!(args.field("StdinData"), Some(Value::Bytes(b)) if b.starts_with(b"{\"cniVersion\""))
    );
    let (header, del_args) = decode_request(DEL_REQUEST);
    assert_eq!(header.service_method, "DHCP.Release");
    assert_eq!(del_args, args);
}

/// Go's bytes → our value → our bytes: the same bytes, through `Client`.
#[test]
fn client_requests_are_byte_identical_to_go_client() {
    for (bytes, reply) in [(ADD_REQUEST, ADD_REPLY), (DEL_REQUEST, DEL_REPLY)] {
        let (header, args) = decode_request(bytes);
        let (a, b) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let mut got = vec![0u8; bytes.len()];
            let (connect, request) = got.split_at_mut(CONNECT.len());
            (&b).read_exact(connect).unwrap();
            (&b).write_all(STATUS_LINE).unwrap();
            (&b).read_exact(request).unwrap();
            (&b).write_all(strip(reply, STATUS_LINE)).unwrap();
            got
        });
        let mut client = Client::from_stream(a).unwrap();
        let body = client.call(&header.service_method, &ARGS, &args).unwrap();
        assert_eq!(server.join().unwrap(), bytes);
        assert_eq!(client.next_seq(), 1);
        // The reply's body: the Go server's value.
        let mut r = strip(reply, STATUS_LINE);
        let mut dec = gob::Decoder::new();
        dec.read_value(&mut r).unwrap();
        assert_eq!(body, dec.read_value(&mut r).unwrap());
    }
}

#[test]
fn decodes_go_server_replies() {
    let mut r = strip(ADD_REPLY, STATUS_LINE);
    let mut dec = gob::Decoder::new();
    let header = Header::from_value(&dec.read_value(&mut r).unwrap()).unwrap();
    assert_eq!(
        header,
        Header {
            service_method: "DHCP.Allocate".into(),
            seq: 0,
            error: String::new()
        }
    );
    // A struct with a slice of structs holding structs.
    let body = dec.read_value(&mut r).unwrap();
    let Some(Value::Slice(ips)) = body.field("IPs") else {
        panic!("{body:?}")
    };
    let ip = ips[0].field("Address").and_then(|a| a.field("IP"));
    assert_eq!(ip, Some(&Value::Bytes(vec![10, 132, 250, 24])));
    assert!(r.is_empty());

    let mut r = strip(ADD_ERROR_REPLY, STATUS_LINE);
    let mut dec = gob::Decoder::new();
    let header = Header::from_value(&dec.read_value(&mut r).unwrap()).unwrap();
    assert_eq!(header.error, r#"error looking up "nosuch": Link not found"#);
    assert_eq!(dec.read_value(&mut r).unwrap(), Value::Struct(vec![]));
}

/// A service that answers `Release` (with `struct{}`) and `Echo` (its
/// argument back), fails `Allocate` as the Go server did in the captures,
/// and records what it was asked.
#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<(String, Value)>>,
}

impl Service for Fake {
    fn name(&self) -> &str {
        "DHCP"
    }
    fn empty(&self) -> &'static TypeDef {
        &EMPTY
    }
    fn call(&self, method: &str, args: &Value) -> Option<Result<Reply, String>> {
        self.calls
            .lock()
            .unwrap()
            .push((method.into(), args.clone()));
        Some(match method {
            "Allocate" => Err(r#"error looking up "nosuch": Link not found"#.into()),
            "Release" => Ok(Reply {
                def: &EMPTY,
                value: Value::Struct(Vec::new()),
            }),
            "Echo" => Ok(Reply {
                def: &ARGS,
                value: args.clone(),
            }),
            _ => return None,
        })
    }
}

/// Feeds `request` (whole: CONNECT line and gob) to `serve_conn` and
/// returns all it wrote before closing.
fn serve_bytes(service: &impl Service, request: &[u8]) -> Vec<u8> {
    let (ours, theirs) = UnixStream::pair().unwrap();
    (&theirs).write_all(request).unwrap();
    theirs.shutdown(std::net::Shutdown::Write).unwrap();
    serve_conn(ours, service, DEADLINE).unwrap();
    let mut out = Vec::new();
    (&theirs).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn server_answers_byte_identical_to_go_server() {
    let fake = Fake::default();
    assert_eq!(serve_bytes(&fake, DEL_REQUEST), DEL_REPLY);
    assert_eq!(serve_bytes(&fake, UNKNOWN_REQUEST), UNKNOWN_REPLY);
    // An error reply: the Allocate of the captures failed as Fake fails.
    let out = serve_bytes(&fake, ADD_REQUEST);
    assert_eq!(out, ADD_ERROR_REPLY);
    let calls = fake.calls.lock().unwrap();
    let methods: Vec<&str> = calls.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(methods, ["Release", "Allocatx", "Allocate"]);
    assert_eq!(calls[0].1, decode_request(DEL_REQUEST).1);
}

/// A client and our server on one connection: several calls share the
/// streams (definitions sent once, sequence numbers counted), and Go's
/// texts for what the server cannot find.
#[test]
fn client_and_server_several_calls_on_one_connection() {
    let (a, b) = UnixStream::pair().unwrap();
    let fake = Fake::default();
    let (_, args) = decode_request(ADD_REQUEST);
    std::thread::scope(|s| {
        let server = s.spawn(|| serve_conn(b, &fake, DEADLINE));
        let mut client = Client::from_stream(a).unwrap();
        assert_eq!(client.call("DHCP.Echo", &ARGS, &args).unwrap(), args);
        assert_eq!(client.call("DHCP.Echo", &ARGS, &args).unwrap(), args);
        let e = client.call("DHCP.Allocate", &ARGS, &args).unwrap_err();
        assert!(e.to_string().contains("Link not found"), "{e}");
        assert!(matches!(e, CallError::Remote(_)) && !e.is_unknown_method());
        let e = client.call("DHCP.GC", &ARGS, &args).unwrap_err();
        assert!(e.is_unknown_method(), "{e}");
        assert_eq!(e.to_string(), "rpc: can't find method DHCP.GC");
        let e = client.call("Other.Echo", &ARGS, &args).unwrap_err();
        assert_eq!(e.to_string(), "rpc: can't find service Other.Echo");
        let e = client.call("nodot", &ARGS, &args).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rpc: service/method request ill-formed: nodot"
        );
        assert_eq!(client.next_seq(), 6);
        drop(client);
        server.join().unwrap().unwrap();
    });
    assert_eq!(fake.calls.lock().unwrap().len(), 4);
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
    assert!(serve_conn(ours, &Fake::default(), DEADLINE).is_err());
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

/// A hostile server: a reply announcing 2^62 bytes, then silence, is an
/// error (the client does not wait for or allocate them).
#[test]
fn client_refuses_huge_replies() {
    let (a, b) = UnixStream::pair().unwrap();
    (&b).write_all(STATUS_LINE).unwrap();
    let mut client = Client::from_stream(a).unwrap();
    (&b).write_all(&[0xf8, 0x40, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    let e = client
        .call("DHCP.Echo", &ARGS, &Value::Struct(Vec::new()))
        .unwrap_err();
    assert!(e.to_string().contains("invalid message length"), "{e}");
}

/// Two schemas with the same id cannot share a stream: an error, not a
/// stream the other side would misread.
#[test]
fn one_id_one_type_per_stream() {
    static OTHER: TypeDef = TypeDef {
        id: 66,
        name: "Other",
        kind: Kind::Struct(&[("X", Ty::Int)]),
    };
    let mut out = Vec::new();
    let mut enc = gob::Encoder::new();
    enc.encode(
        &mut out,
        &OTHER,
        &Value::Struct(vec![("X".into(), Value::Int(1))]),
    )
    .unwrap();
    let e = enc
        .encode(&mut out, &ARGS, &Value::Struct(Vec::new()))
        .unwrap_err();
    assert!(e.to_string().contains("type id 66"), "{e}");
}

// ---- hostile bytes: errors, never panics ----

/// Decodes everything in `bytes` as values until an error or the end.
fn decode_all(bytes: &[u8]) -> Result<usize, gob::Error> {
    let mut r = bytes;
    let mut dec = gob::Decoder::new();
    let mut n = 0;
    while !r.is_empty() {
        let v = dec.read_value(&mut r)?;
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

/// A fixed xorshift: the same mutations every run.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[test]
fn mutated_streams_never_panic() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
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

/// Hostile clients: the server loop ends with an error or answers, never
/// panics, whatever the bytes after the handshake.
#[test]
fn server_survives_mutated_requests() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
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
        let _ = serve_conn(ours, &fake, DEADLINE);
    }
}

// ---- bounds (issue 25: the daemon's RPC decoder) ----

/// `struct U { F []U }`, for nesting.
static NESTED_SLICES: TypeDef = TypeDef {
    id: 65,
    name: "U",
    kind: Kind::Struct(&[("F", Ty::Def(&SLICE_OF_NESTED_SLICES))]),
};
static SLICE_OF_NESTED_SLICES: TypeDef = TypeDef {
    id: 66,
    name: "",
    kind: Kind::Slice(Ty::Def(&NESTED_SLICES)),
};
/// `struct { S []int }`, for long slices of one-byte elements.
static INTS: TypeDef = TypeDef {
    id: 65,
    name: "",
    kind: Kind::Struct(&[("S", Ty::Def(&INT_SLICE))]),
};
static INT_SLICE: TypeDef = TypeDef {
    id: 66,
    name: "",
    kind: Kind::Slice(Ty::Int),
};

/// A message: the length, then the body.
fn message(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    gob::put_uint(&mut out, body.len() as u64);
    out.extend_from_slice(body);
    out
}

/// `struct U { F []U }` nested `pairs` times below the top: each a
/// struct and a one-element slice.
fn nested_slices(pairs: usize) -> Vec<u8> {
    let mut v = Value::Struct(Vec::new());
    for _ in 0..pairs {
        v = Value::Struct(vec![("F".into(), Value::Slice(vec![v]))]);
    }
    let mut out = Vec::new();
    gob::Encoder::new()
        .encode(&mut out, &NESTED_SLICES, &v)
        .unwrap();
    out
}

/// `struct T { F T }` (a value Go cannot make, but a peer can send)
/// nested `depth` levels below the top.
fn nested_structs(depth: usize) -> Vec<u8> {
    // wireType{StructT: structType{CommonType{Id: 65}, Field: [{F, 65}]}}
    let mut out = message(&[
        0xff, 0x81, 0x03, 0x01, 0x02, 0xff, 0x82, 0x00, 0x01, 0x01, 0x01, 0x01, b'F', 0x01, 0xff,
        0x82, 0x00, 0x00, 0x00,
    ]);
    let mut value = vec![0xff, 0x82];
    value.extend(std::iter::repeat_n(0x01, depth)); // field F, each level
    value.extend(std::iter::repeat_n(0x00, depth + 1)); // each level's end
    out.extend(message(&value));
    out
}

/// `map[int]M` with `M` itself, nested `depth` levels below the top.
fn nested_maps(depth: usize) -> Vec<u8> {
    // wireType{MapT: mapType{CommonType{Id: 65}, Key: int, Elem: 65}}
    let mut out = message(&[
        0xff, 0x81, 0x04, 0x01, 0x02, 0xff, 0x82, 0x00, 0x01, 0x04, 0x01, 0xff, 0x82, 0x00, 0x00,
    ]);
    let mut value = vec![0xff, 0x82, 0x00];
    for _ in 0..depth {
        value.extend_from_slice(&[0x01, 0x00]); // one entry, key 0
    }
    value.push(0x00);
    out.extend(message(&value));
    out
}

/// Decodes `stream` (then drops the value and reads it as a header, as
/// the server does) on a thread with the dhcp daemon's 256 KiB stack.
fn decode_on_small_stack(stream: Vec<u8>) -> Result<usize, String> {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || decode_all(&stream).map_err(|e| e.to_string()))
        .unwrap()
        .join()
        .unwrap()
}

/// Values nested as deep as allowed, in each shape, decode on the
/// daemon's stack size (before the fix, 64 levels of structs overflowed
/// it in a debug build and aborted the process); one level more is an
/// error, in every shape.
#[test]
fn nesting_is_bounded_and_never_overflows_the_stack() {
    for (shape, ok, deeper) in [
        (
            "struct in struct",
            nested_structs(gob::MAX_DEPTH),
            nested_structs(gob::MAX_DEPTH + 1),
        ),
        (
            "slices of structs",
            nested_slices(gob::MAX_DEPTH / 2),
            nested_slices(gob::MAX_DEPTH / 2 + 1),
        ),
        (
            "map of maps",
            nested_maps(gob::MAX_DEPTH),
            nested_maps(gob::MAX_DEPTH + 1),
        ),
    ] {
        assert_eq!(decode_on_small_stack(ok), Ok(1), "{shape}");
        let e = decode_on_small_stack(deeper).unwrap_err();
        assert!(e.contains("too deep"), "{shape}: {e}");
    }
}

/// A struct holding `n` zero ints (one byte each), with its definitions.
fn ints(n: usize) -> Vec<u8> {
    let v = Value::Struct(vec![("S".into(), Value::Slice(vec![Value::Int(0); n]))]);
    let mut out = Vec::new();
    gob::Encoder::new().encode(&mut out, &INTS, &v).unwrap();
    out
}

/// One-byte elements cost a `Value` each decoded: a slice's length is
/// charged against MAX_DECODED before it is allocated (before the fix a
/// 16 MiB message of them became 512 MiB).
#[test]
fn decoded_size_is_bounded_before_allocation() {
    let per = std::mem::size_of::<Value>();
    assert_eq!(decode_all(&ints(gob::MAX_DECODED / per - 10)).unwrap(), 1);
    let e = decode_all(&ints(gob::MAX_DECODED / per))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bytes decoded"), "{e}");
    // Invalid UTF-8 triples when made a string: charged as it grows.
    static S: TypeDef = TypeDef {
        id: 65,
        name: "",
        kind: Kind::Struct(&[("S", Ty::Bytes)]),
    };
    let mut out = Vec::new();
    let bad = vec![0xffu8; 900 << 10];
    gob::Encoder::new()
        .encode(
            &mut out,
            &S,
            &Value::Struct(vec![("S".into(), Value::Bytes(bad))]),
        )
        .unwrap();
    assert_eq!(decode_all(&out).unwrap(), 1); // as bytes: 900 KiB
    // The same bytes as a string (type id 6 in the definition).
    let at = out.windows(2).position(|w| w == [0x01, 0x0a]).unwrap();
    out[at + 1] = 0x0c;
    let e = decode_all(&out).unwrap_err().to_string();
    assert!(e.contains("bytes decoded"), "{e}");
    // A map's count is bounded by 2 bytes an entry: 3 entries in 3 bytes.
    let mut maps = nested_maps(0);
    maps.truncate(maps.len() - 5); // the empty map's message
    maps.extend(message(&[0xff, 0x82, 0x00, 0x03, 0x00, 0x00, 0x00]));
    let e = decode_all(&maps).unwrap_err().to_string();
    assert!(e.contains("count 3 exceeds"), "{e}");
}

/// A message longer than MAX_MESSAGE is refused from its length, before
/// any of it is read or allocated.
#[test]
fn messages_over_the_cap_are_refused_at_their_length() {
    let mut big = Vec::new();
    gob::put_uint(&mut big, gob::MAX_MESSAGE + 1);
    let e = decode_all(&big).unwrap_err().to_string();
    assert!(e.contains("invalid message length"), "{e}");
    // One at the cap is read (and here refused only for what it holds).
    let mut at_cap = Vec::new();
    gob::put_uint(&mut at_cap, gob::MAX_MESSAGE);
    let e = decode_all(&at_cap).unwrap_err().to_string();
    assert!(!e.contains("invalid message length"), "{e}");
}

/// The encoder refuses what the decoder would: a client's request over
/// the cap is its own error, not a connection the server drops.
#[test]
fn encoder_refuses_messages_over_the_cap() {
    let big = |n: usize| Value::Struct(vec![("StdinData".into(), Value::Bytes(vec![b'x'; n]))]);
    let mut out = Vec::new();
    let mut enc = gob::Encoder::new();
    enc.encode(&mut out, &ARGS, &big(gob::MAX_MESSAGE as usize - 16))
        .unwrap();
    assert_eq!(decode_all(&out).unwrap(), 1);
    let e = enc
        .encode(&mut out, &ARGS, &big(gob::MAX_MESSAGE as usize))
        .unwrap_err();
    assert!(e.to_string().contains("at most 1048576"), "{e}");
}

/// At most MAX_TYPES definitions and MAX_TYPE_BYTES of them per stream.
#[test]
fn type_definitions_per_stream_are_bounded() {
    let def = |id: i64, fields: usize| {
        let mut b = Vec::new();
        gob::put_int(&mut b, -id);
        b.extend_from_slice(&[0x03, 0x01, 0x02]);
        gob::put_int(&mut b, id);
        b.extend_from_slice(&[0x00, 0x01]);
        gob::put_uint(&mut b, fields as u64);
        for _ in 0..fields {
            b.extend_from_slice(&[0x01, 0x01, b'x', 0x01, 0x04, 0x00]);
        }
        b.extend_from_slice(&[0x00, 0x00]);
        message(&b)
    };
    let value = message(&[0x02, 0x00, 0x01]); // a bool (true), after them
    let stream = |n: usize, fields: usize| -> Vec<u8> {
        let mut s: Vec<u8> = (0..n).flat_map(|i| def(65 + i as i64, fields)).collect();
        s.extend_from_slice(&value);
        s
    };
    assert_eq!(decode_all(&stream(gob::MAX_TYPES, 1)).unwrap(), 1);
    let e = decode_all(&stream(gob::MAX_TYPES + 1, 1)).unwrap_err();
    assert!(e.to_string().contains("type definitions"), "{e}");
    // Few definitions, but large ones.
    let e = decode_all(&stream(2, gob::MAX_TYPE_BYTES / 6)).unwrap_err();
    assert!(e.to_string().contains("type definitions"), "{e}");
}

/// Error texts name a field's kind, not the peer's bytes.
#[test]
fn errors_do_not_echo_values() {
    let big = Value::Struct(vec![("Seq".into(), Value::Bytes(vec![b'x'; 100_000]))]);
    let e = Header::from_value(&big).unwrap_err();
    assert_eq!(e, "field Seq: want uint, got []byte");
}

/// A peer that trickles its request a byte at a time (each byte well
/// within any per-read timeout) is dropped when the deadline has passed,
/// not before; so is one that sends nothing.
#[test]
fn slow_peers_are_dropped_at_the_deadline() {
    let deadline = Duration::from_millis(300);
    for trickle in [true, false] {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let start = Instant::now();
        let peer = std::thread::spawn(move || {
            if trickle {
                let _ = (&theirs).write_all(CONNECT);
                let _ = (&theirs).write_all(&[0x7f]); // a 127-byte message
                while (&theirs).write_all(&[0x01]).is_ok() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            } else {
                let mut sink = Vec::new();
                let _ = (&theirs).read_to_end(&mut sink);
            }
        });
        let e = serve_conn(ours, &Fake::default(), deadline).unwrap_err();
        let took = start.elapsed();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(
            took >= deadline && took < Duration::from_secs(10),
            "{took:?}"
        );
        peer.join().unwrap();
    }
}

/// `serve` runs at most `max_conns` connections: with two idle ones open,
/// a third is served only once the deadline has dropped them.
#[test]
fn serve_runs_at_most_max_conns_at_once() {
    let dir = std::env::temp_dir().join(format!("netrpc-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("s.sock");
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).unwrap();
    let limits = Limits {
        max_conns: 2,
        deadline: Duration::from_millis(500),
        ..Limits::default()
    };
    std::thread::spawn(move || serve(&listener, Arc::new(Fake::default()), limits));
    let start = Instant::now();
    let idle: Vec<UnixStream> = (0..2)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    let mut client = Client::from_stream(UnixStream::connect(&socket).unwrap()).unwrap();
    let took = start.elapsed();
    let args = Value::Struct(vec![("IfName".into(), Value::String("x".into()))]);
    assert_eq!(client.call("DHCP.Echo", &ARGS, &args).unwrap(), args);
    assert!(took >= limits.deadline, "served after {took:?}");
    drop(idle);
    std::fs::remove_dir_all(&dir).unwrap();
}
