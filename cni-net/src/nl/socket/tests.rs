//! The wrapper on crafted bytes: framing, terminators, extended ACK,
//! capture mode. (The kernel exchanges are tested by the facade's tests.)

use super::*;
use crate::nl::rtm::{RTM_GETLINK, RTM_NEWLINK, RTM_SETLINK, Rtm};
use netlink_packet_core::{NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_MULTIPART};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};

/// One netlink message: header with `kind`, `flags`, `seq`, port 0, then `payload`.
fn nlmsg(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
    v.extend_from_slice(&kind.to_ne_bytes());
    v.extend_from_slice(&flags.to_ne_bytes());
    v.extend_from_slice(&seq.to_ne_bytes());
    v.extend_from_slice(&0u32.to_ne_bytes());
    v.extend_from_slice(payload);
    v.resize(align4(v.len()), 0);
    v
}

/// One attribute, padded.
fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    v.extend_from_slice(&kind.to_ne_bytes());
    v.extend_from_slice(value);
    v.resize(align4(v.len()), 0);
    v
}

/// Feeds `datagram` to an exchange with sequence 7, collecting the
/// message types handed on.
fn run(datagram: &[u8]) -> (Result<Option<Outcome>, Failure>, Vec<u16>) {
    let mut seen = Vec::new();
    let mut ex = Exchange::new(7);
    let r = ex.feed(datagram, &mut |h, _| {
        seen.push(h.message_type);
        Ok(())
    });
    (r, seen)
}

#[test]
fn ack_ends_the_exchange() {
    let d = nlmsg(NLMSG_ERROR, 0, 7, &[0; 20]);
    assert_eq!(run(&d), (Ok(Some(Outcome::Done)), vec![]));
}

#[test]
fn other_sequences_and_noops_are_skipped() {
    let mut d = nlmsg(16, NLM_F_MULTIPART, 6, &[0; 16]);
    d.extend(nlmsg(NLMSG_NOOP, 0, 7, &[]));
    d.extend(nlmsg(16, NLM_F_MULTIPART, 7, &[0; 16]));
    assert_eq!(run(&d), (Ok(None), vec![16]));
    // The dump goes on in the next datagram and ends at DONE.
    let mut ex = Exchange::new(7);
    assert_eq!(ex.feed(&d, &mut |_, _| Ok(())), Ok(None));
    let done = nlmsg(NLMSG_DONE, NLM_F_MULTIPART, 7, &0i32.to_ne_bytes());
    assert_eq!(ex.feed(&done, &mut |_, _| Ok(())), Ok(Some(Outcome::Done)));
}

#[test]
fn done_without_code_and_interrupted_dumps() {
    // An old kernel's NLMSG_DONE carries no code.
    assert_eq!(
        run(&nlmsg(NLMSG_DONE, 0, 7, &[])).0,
        Ok(Some(Outcome::Done))
    );
    let mut d = nlmsg(16, NLM_F_MULTIPART | NLM_F_DUMP_INTR, 7, &[0; 16]);
    d.extend(nlmsg(NLMSG_DONE, NLM_F_MULTIPART, 7, &0i32.to_ne_bytes()));
    assert_eq!(run(&d).0, Ok(Some(Outcome::Interrupted)));
}

#[test]
fn errors_carry_errno_and_extended_ack() {
    // Plain error, no TLVs: the echoed request follows the code.
    let mut p = (-19i32).to_ne_bytes().to_vec();
    p.extend(nlmsg(18, 5, 7, &[0; 16]));
    assert_eq!(
        run(&nlmsg(NLMSG_ERROR, 0, 7, &p)).0,
        Err(Failure::Kernel(19, ExtAck::default()))
    );

    // Capped echo (header only) and TLVs: message and offset.
    let mut p = (-95i32).to_ne_bytes().to_vec();
    p.extend(&nlmsg(16, 0x605, 7, &[])[..16]);
    p.extend(nla(1, b"Unknown device type\0"));
    p.extend(nla(2, &44u32.to_ne_bytes()));
    let d = nlmsg(NLMSG_ERROR, NLM_F_CAPPED | NLM_F_ACK_TLVS, 7, &p);
    let want = ExtAck {
        msg: Some("Unknown device type".into()),
        offset: Some(44),
    };
    assert_eq!(run(&d).0, Err(Failure::Kernel(95, want.clone())));
    let e = Failure::Kernel(95, want).into_error("create link x");
    assert_eq!(
        e.to_string(),
        "create link x: Operation not supported (os error 95) (Unknown device type)"
    );

    // Uncapped echo: the TLVs start after the whole echoed request.
    let mut p = (-34i32).to_ne_bytes().to_vec();
    p.extend(nlmsg(
        16,
        0x605,
        7,
        &nla(3, b"a-name-that-is-far-too-long\0"),
    ));
    p.extend(nla(1, b"Attribute failed policy validation\0"));
    let d = nlmsg(NLMSG_ERROR, NLM_F_ACK_TLVS, 7, &p);
    let (r, _) = run(&d);
    assert_eq!(
        r,
        Err(Failure::Kernel(
            34,
            ExtAck {
                msg: Some("Attribute failed policy validation".into()),
                offset: None
            }
        ))
    );

    // A dump failing midway: DONE with a negative code and a TLV.
    let mut p = (-16i32).to_ne_bytes().to_vec();
    p.extend(nla(1, b"busy\0"));
    let d = nlmsg(NLMSG_DONE, NLM_F_MULTIPART | NLM_F_ACK_TLVS, 7, &p);
    assert_eq!(
        run(&d).0,
        Err(Failure::Kernel(
            16,
            ExtAck {
                msg: Some("busy".into()),
                offset: None
            }
        ))
    );

    // TLVs announced but cut short: the errno alone.
    let mut p = (-22i32).to_ne_bytes().to_vec();
    p.extend(&nlmsg(16, 0, 7, &[])[..16]);
    p.extend([200, 0, 1, 0]);
    let d = nlmsg(NLMSG_ERROR, NLM_F_CAPPED | NLM_F_ACK_TLVS, 7, &p);
    assert_eq!(run(&d).0, Err(Failure::Kernel(22, ExtAck::default())));
}

#[test]
fn malformed_framing_is_an_error_not_a_panic() {
    assert!(matches!(run(&[1, 2, 3]).0, Err(Failure::Decode(_))));
    let mut d = nlmsg(16, 0, 7, &[0; 8]);
    d[0] = 200; // length past the datagram
    assert!(matches!(run(&d).0, Err(Failure::Decode(_))));
    let mut d = nlmsg(16, 0, 7, &[]);
    d[0] = 8; // shorter than a header
    assert!(matches!(run(&d).0, Err(Failure::Decode(_))));
}

#[test]
fn a_get_ends_at_its_answer() {
    let mut ex = Exchange::new(7);
    ex.single = true;
    let d = nlmsg(16, 0, 7, &[0; 16]);
    let mut calls = 0;
    let r = ex.feed(&d, &mut |_, _| {
        calls += 1;
        Ok(())
    });
    assert_eq!((r, calls), (Ok(Some(Outcome::Done)), 1));
    // Or at the error that replaces it.
    let mut ex = Exchange::new(7);
    ex.single = true;
    let mut p = (-19i32).to_ne_bytes().to_vec();
    p.extend(nlmsg(18, 1, 7, &[0; 16]));
    let r = ex.feed(&nlmsg(NLMSG_ERROR, 0, 7, &p), &mut |_, _| Ok(()));
    assert_eq!(r, Err(Failure::Kernel(19, ExtAck::default())));
}

#[test]
fn a_bad_answer_is_reported_after_draining() {
    let mut d = nlmsg(16, NLM_F_MULTIPART, 7, &[0; 16]);
    d.extend(nlmsg(16, NLM_F_MULTIPART, 7, &[0; 16]));
    d.extend(nlmsg(NLMSG_DONE, NLM_F_MULTIPART, 7, &0i32.to_ne_bytes()));
    let mut calls = 0;
    let mut ex = Exchange::new(7);
    let r = ex.feed(&d, &mut |_, _| {
        calls += 1;
        Err("bad".into())
    });
    assert_eq!((r, calls), (Err(Failure::Decode("bad".into())), 1));
}

#[test]
fn capture_mode_records_requests() {
    let mut s = Socket::capture("route");
    let mut m = LinkMessage::default();
    m.header.index = 3;
    m.attributes.push(LinkAttribute::Mtu(1400));
    s.ack(&Rtm(RTM_SETLINK, m), 0, "set mtu").unwrap();
    assert_eq!(
        s.get(&Rtm(RTM_GETLINK, LinkMessage::default()), "get")
            .unwrap(),
        None
    );
    let dumped = s
        .dump(|| Rtm(RTM_GETLINK, LinkMessage::default()), "dump", Some)
        .unwrap();
    assert!(dumped.is_empty());
    let c = s.captured();
    assert_eq!(c.len(), 3);
    // RTM_SETLINK, REQUEST|ACK, sequence 1; ifinfomsg index 3; IFLA_MTU.
    let mut want = nlmsg(
        19,
        0x5,
        1,
        &[0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    want.extend(nla(4, &1400u32.to_ne_bytes()));
    want[0] = want.len() as u8;
    assert_eq!(c[0], want);
    // RTM_GETLINK without ACK; the dump with NLM_F_DUMP (0x300), sequence 3.
    assert_eq!(&c[1][4..12], &[18, 0, 1, 0, 2, 0, 0, 0]);
    assert_eq!(&c[2][4..12], &[18, 0, 1, 3, 3, 0, 0, 0]);
}

#[test]
fn decoded_answers_reach_the_caller() {
    // A whole RTM_NEWLINK as the kernel would send it, decoded by the crate.
    let mut m = LinkMessage::default();
    m.header.index = 5;
    m.attributes.push(LinkAttribute::IfName("eth0".into()));
    let msg = Rtm(RTM_NEWLINK, m.clone());
    let mut body = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut body);
    let mut d = nlmsg(16, 0, 7, &body);
    d.extend(nlmsg(NLMSG_ERROR, 0, 7, &[0; 20]));
    let mut got = Vec::new();
    let mut ex = Exchange::new(7);
    let r = ex.feed(&d, &mut |h, p| {
        got.push(decode::<Rtm<LinkMessage>>(h, p)?);
        Ok(())
    });
    assert_eq!(r, Ok(Some(Outcome::Done)));
    assert_eq!(got, vec![Rtm(RTM_NEWLINK, m)]);
}

#[test]
fn replay_mode_reads_canned_datagrams() {
    // A link dump over two datagrams, answering the first request (seq 1);
    // an interrupted dump is asked again (seq 2) and read from what is left.
    let mut m = LinkMessage::default();
    m.header.index = 2;
    m.attributes.push(LinkAttribute::IfName("eth0".into()));
    let msg = Rtm(RTM_NEWLINK, m.clone());
    let mut body = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut body);
    let done = |seq| nlmsg(NLMSG_DONE, NLM_F_MULTIPART, seq, &0i32.to_ne_bytes());
    let mut first = nlmsg(16, NLM_F_MULTIPART | NLM_F_DUMP_INTR, 1, &body);
    first.extend(nlmsg(16, NLM_F_MULTIPART, 9, &body)); // not ours: skipped
    let second = nlmsg(16, NLM_F_MULTIPART, 2, &body);
    let answers = vec![first, done(1), second, done(2)];
    let mut s = Socket::replay("route", answers);
    let dump = || Rtm(RTM_GETLINK, LinkMessage::default());
    let got = s.dump(dump, "dump", Some).unwrap();
    assert_eq!(got, vec![Rtm(RTM_NEWLINK, m)]);
    assert_eq!(s.captured().len(), 2);
    // None left: an empty dump, as in capture mode.
    assert!(s.dump(dump, "dump", Some).unwrap().is_empty());

    // Answers that end before the terminator fail the exchange.
    let mut s = Socket::replay("route", vec![nlmsg(16, NLM_F_MULTIPART, 1, &body)]);
    let e = s.dump(dump, "list links", Some).unwrap_err();
    assert_eq!(
        e.to_string(),
        "list links: the answer ended without a terminator"
    );
}
