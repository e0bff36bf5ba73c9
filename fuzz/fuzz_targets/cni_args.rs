//! CNI_ARGS: what parses is exactly its pairs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(a) = cni_skel::args::CniArgs::parse(raw) {
        let back: Vec<String> = a.pairs().iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(back.join(";"), raw);
    }
    let _ = cni_skel::args::CniArgs::load(raw, &["IP", "MAC"]);
});
