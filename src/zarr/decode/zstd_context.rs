//! One zstd decompression context per thread, reused for every whole-chunk decode.
//!
//! `ZSTD_decompress` creates a context for each call and frees it after: about 160 KiB of
//! tables, above glibc's mmap threshold, so every chunk paid an `mmap`, a `munmap` and the
//! kernel zeroing fresh pages — most of a small chunk's decode time (a 16³ float32 chunk is
//! 16 KiB). A context kept per thread decodes the next frame with `ZSTD_decompressDCtx`,
//! which starts a new frame each call, so nothing carries over from the last one.

use std::cell::Cell;
use zstd::zstd_safe::DCtx;

thread_local! {
    static CONTEXT: Cell<Option<DCtx<'static>>> = const { Cell::new(None) };
}

/// Decodes the zstd frame(s) of `src` into `dst` (what `ZSTD_decompress` does) with this
/// thread's context; the error is zstd's code.
pub(crate) fn decompress(dst: &mut [u8], src: &[u8]) -> Result<usize, usize> {
    // Taken out while it decodes and put back after, whatever the outcome (a one-shot
    // decode starts afresh each call, also after an error).
    let mut context = match CONTEXT.with(|c| c.replace(None)) {
        Some(c) => c,
        None => match DCtx::try_create() {
            Some(c) => c,
            // Out of memory for the context: the one-shot call reports it in zstd's words.
            None => return zstd::zstd_safe::decompress(dst, src),
        },
    };
    let result = context.decompress(dst, src);
    CONTEXT.with(|c| c.replace(Some(context)));
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_reused_context_decodes_each_frame_on_its_own() {
        let a: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let b: Vec<u8> = (0..70_000u32).flat_map(|i| (i * 7).to_le_bytes()).collect();
        for data in [&a, &b, &a] {
            let frame = zstd::bulk::compress(data, 1).unwrap();
            let mut out = vec![0u8; data.len()];
            assert_eq!(super::decompress(&mut out, &frame), Ok(data.len()));
            assert_eq!(&out, data);
            // A damaged frame errs, and the next good one still decodes.
            let mut bad = frame.clone();
            bad.truncate(frame.len() / 2);
            assert!(super::decompress(&mut out, &bad).is_err());
        }
        let frame = zstd::bulk::compress(&b, 3).unwrap();
        let mut small = vec![0u8; b.len() - 1];
        assert!(
            super::decompress(&mut small, &frame).is_err(),
            "room for less than the frame"
        );
    }
}
