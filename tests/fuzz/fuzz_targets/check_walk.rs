#![no_main]
//! Fuzz target `check_walk`: see `zarrbuf_fuzz::check_walk` (`zarrbuf check` on arbitrary
//! stored chunk bytes, and its chunk-key parser on arbitrary keys).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = zarrbuf_fuzz::check_walk(data);
});
