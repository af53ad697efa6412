#![no_main]
//! Fuzz target `zip_directory`: see `zarrbuf_fuzz::zip_directory`. Arbitrary bytes are
//! XORed into a small zip file's central directory; the zip store must refuse what lies
//! (overlapping entries, local headers that disagree, CRC-32 failures, declared sizes the
//! data does not hold) and read exactly the template's values otherwise.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = zarrbuf_fuzz::zip_directory(data);
});
