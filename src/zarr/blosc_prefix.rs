//! Decoding only the blocks of a blosc frame that a read's prefix needs (see
//! [`super::prefix_decode`]).
//!
//! The blocks of a blosc frame are independent: each is compressed on its own (in one
//! stream, or one per byte of the element), then unshuffled on its own. A prefix of the
//! decoded chunk is therefore decoded by the blocks whose decoded bytes start before its
//! end, and the others are never touched. The frame is first checked whole by
//! [`blosc_frame::parse`], the parse that guards the device decoder (header sizes, version,
//! compressor, every block start and every stream's size inside the frame, more than c-blosc
//! checks), so what is not decoded is at least well-framed; then c-blosc itself — the
//! library the whole decode uses — decodes the needed elements with `blosc_getitem`, which
//! decompresses and unshuffles only the blocks that hold them. (Safe Rust decoders per
//! stream plus a scalar unshuffle ran at a quarter of c-blosc's rate per byte: slower than
//! decoding the whole chunk for an average patch.)
//!
//! [`blosc_prefix_into`] answers `None` for anything else — a frame the parse refuses or
//! leaves to the CPU, a prefix that reaches into bytes after the last whole element, any
//! error of c-blosc — and the caller then decodes the chunk whole with c-blosc, so that a
//! refusal is exactly the whole decode's.

use super::blosc_frame::{self, BloscCompressor, Parsed};
use super::framing::blosc_nbytes;

/// Decodes the blocks of the blosc frame `frame` (streams in `compressor`) that the first
/// `prefix` bytes of its decoded chunk need into `out` (exactly the chunk's decoded size),
/// and returns how many leading bytes of `out` are right (at least `prefix`: the prefix
/// rounded up to whole elements). `None`: not decodable by blocks here; decode the chunk
/// whole.
pub(crate) fn blosc_prefix_into(
    compressor: BloscCompressor,
    frame: &[u8],
    out: &mut [u8],
    prefix: usize,
) -> Option<usize> {
    // The header as c-blosc reads it: its declared compressed length is the frame's, its
    // decoded length the chunk's.
    if blosc_nbytes(frame).ok()? != out.len() {
        return None;
    }
    // Every block start and stream inside the frame (the decoders check the contents).
    let whole = |stream: &[u8], _decoded: usize| Ok(0..stream.len());
    let Ok(Parsed::Device(parsed)) = blosc_frame::parse(frame, out.len(), compressor, &whole)
    else {
        return None;
    };
    let typesize = parsed.typesize.max(1);
    let items = prefix.div_ceil(typesize);
    let bytes = items.checked_mul(typesize)?;
    if bytes > out.len() {
        return None;
    }
    let items = std::ffi::c_int::try_from(items).ok()?;
    // SAFETY: c-blosc's `blosc_getitem` reads the frame's header, block starts and the
    // streams of the blocks holding items `0..items`; `blosc_cbuffer_validate` (in
    // `blosc_nbytes`) checked that the header's compressed length is `frame.len()`, and the
    // parse above that every block start and stream lies inside the frame, so it reads
    // within `frame`. It writes `items * typesize` bytes at `out`, which holds `out.len()`
    // bytes, at least that many (checked above); it allocates its own scratch and keeps no
    // state between calls (thread-safe).
    let written = unsafe {
        blosc_src::blosc_getitem(
            frame.as_ptr().cast::<std::ffi::c_void>(),
            0,
            items,
            out.as_mut_ptr().cast::<std::ffi::c_void>(),
        )
    };
    (usize::try_from(written).ok()? == bytes).then_some(bytes)
}

#[cfg(test)]
#[path = "blosc_prefix_tests.rs"]
mod tests;
