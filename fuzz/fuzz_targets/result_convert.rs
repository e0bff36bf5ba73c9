//! Results and prevResults in every version, converted to every version:
//! whatever is accepted prints, and what is printed parses again.
#![no_main]

use cni_skel::CniResult;
use cni_skel::version::ALL;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let value: Option<serde_json::Value> = serde_json::from_slice(data).ok();
    for from in ALL {
        let parsed = CniResult::parse(data, from).ok().into_iter().chain(
            value
                .as_ref()
                .and_then(|v| CniResult::parse_prev(v, from).ok()),
        );
        for r in parsed {
            for to in ALL {
                if let Ok(text) = r.to_json(to) {
                    assert!(
                        CniResult::parse(text.as_bytes(), to).is_ok(),
                        "{to}: {text}"
                    );
                }
            }
        }
    }
});
