#![no_main]
//! Fuzz target `prefix_decode`: see `zarrbuf_fuzz::prefix_decode`. A mask XORed into (and
//! optionally a cut of) a valid chunk of a blosc, gzip, zlib or zstd array; one element read
//! with and without prefix decoding must agree wherever the whole decode reads.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = zarrbuf_fuzz::prefix_decode(data);
});
