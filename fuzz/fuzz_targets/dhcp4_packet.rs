//! DHCPv4 messages from the wire (the dhcp daemon's input from any host on
//! the LAN): `Message::decode` with overload (52) and long options, then
//! the route options 121 and 33 of what decoded. Whatever parses must
//! encode and decode back to itself, and a parsed option 121 must encode
//! back to its exact bytes.
#![no_main]

use dhcp4::{Message, classless_routes, opt, static_routes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The raw bytes as an option 121 / 33 value too: the daemon reads
    // them from a decoded message, whose option values are any bytes.
    check_routes(data);
    let _ = static_routes(data);
    let Some(m) = Message::decode(data) else {
        return;
    };
    let _ = m.message_type();
    for code in [opt::SUBNET_MASK, opt::ROUTER, opt::SERVER_ID] {
        let _ = m.ip_option(code);
    }
    for code in [opt::LEASE_TIME, opt::RENEWAL_TIME, opt::REBINDING_TIME] {
        let _ = m.u32_option(code);
    }
    if let Some(v) = m.option(opt::CLASSLESS_ROUTES) {
        check_routes(v);
    }
    if let Some(v) = m.option(opt::STATIC_ROUTES) {
        let _ = static_routes(v);
    }
    let again = Message::decode(&m.encode());
    assert_eq!(again.as_ref(), Some(&m), "decode(encode(m)) != m");
});

fn check_routes(v: &[u8]) {
    let Some(routes) = classless_routes(v) else {
        return;
    };
    let mut back = Vec::new();
    for (dst, width, gw) in routes {
        back.push(width);
        back.extend_from_slice(&dst.octets()[..usize::from(width).div_ceil(8)]);
        back.extend_from_slice(&gw.octets());
    }
    assert_eq!(back, v, "option 121 does not encode back to its bytes");
}
