//! bridge's config validation: never a panic, and what it accepts is sane.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for layer3 in [false, true] {
        if let Ok(c) = bridge::config::load_value(v.clone(), "", layer3) {
            assert!(!c.bridge.is_empty() && c.bridge.len() <= 15);
            assert!(c.vlan <= 4094);
            assert!(c.mtu.is_none_or(|m| (68..=65535).contains(&m)));
        }
    }
});
