#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_bodies::host_local_config(data));
