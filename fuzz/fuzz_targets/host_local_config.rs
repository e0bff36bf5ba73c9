//! host-local's config loading (ranges, routes, requested IPs, GC list).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = host_local::config::load(data, "") {
        assert!(!c.ranges.is_empty());
        for set in &c.ranges {
            assert!(set.capacity() > 0);
        }
    }
    let _ = cni_skel::conf::valid_attachments(data);
});
