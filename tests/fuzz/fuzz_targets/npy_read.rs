#![no_main]
//! Fuzz target `npy_read`: see `zarrbuf_fuzz::npy_read`. Inputs that hit a known, still open bug
//! are skipped here unless `ZARRBUF_FUZZ_KEEP_KNOWN` is set (to minimise or reproduce
//! them); the regression tests always replay them. See `zarrbuf_fuzz::known_divergence`.

static INIT: std::sync::Once = std::sync::Once::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    INIT.call_once(|| {
        let skip = std::env::var_os("ZARRBUF_FUZZ_KEEP_KNOWN").is_none();
        zarrbuf_fuzz::SKIP_KNOWN.store(skip, std::sync::atomic::Ordering::Relaxed);
    });
    let _ = zarrbuf_fuzz::npy_read(data);
});
