//! Copies into large destinations with non-temporal (streaming) stores.
//!
//! Why: a whole read scatters each decoded chunk into an output far larger than the caches
//! (a 64³ float32 chunk becomes 4,096 rows of 256 bytes spread over a 256 MiB array). An
//! ordinary store first reads every destination line into the cache, only to evict it again
//! before anyone reads it: half of the memory traffic is wasted. Streaming stores write whole
//! lines without reading them. Measured on the 2-core development machine, that scatter ran at
//! 3.4 GB/s with `memcpy` and 10–11 GB/s with streaming stores into an output already mapped,
//! 2.1 against 3.5 GB/s into freshly mapped pages; in a whole read over HTTP it was 15% of the
//! process's CPU time. Small destinations keep ordinary stores: their bytes are likely to be
//! read again while still cached.

/// Destinations at least this long are written with streaming stores. Far above a core's
/// share of a shared cache, so that what is written will be evicted before it is read.
const STREAMING_MIN_DESTINATION: usize = 32 << 20;

/// Rows shorter than one cache line gain nothing: a partial line is flushed on its own.
const STREAMING_MIN_ROW: usize = 64;

/// How a copy writes its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stores {
    /// Ordinary stores (through the cache).
    Cached,
    /// Non-temporal stores for rows of at least [`STREAMING_MIN_ROW`] bytes; call
    /// [`Stores::finish`] before the destination is handed to another thread.
    Streaming,
}

impl Stores {
    /// The stores for a destination region of `dst_len` bytes.
    pub(super) fn for_destination(dst_len: usize) -> Self {
        if cfg!(target_arch = "x86_64") && dst_len >= STREAMING_MIN_DESTINATION {
            Stores::Streaming
        } else {
            Stores::Cached
        }
    }

    /// Whether rows of `row_bytes` contiguous bytes are streamed.
    pub(super) fn streams_rows_of(self, row_bytes: usize) -> bool {
        self == Stores::Streaming && row_bytes >= STREAMING_MIN_ROW
    }

    /// Orders the streaming stores made so far before any later store of this thread (the
    /// release that hands the destination on). Streaming stores are weakly ordered; ordinary
    /// ones are not, so `Cached` needs nothing.
    pub(super) fn finish(self) {
        #[cfg(target_arch = "x86_64")]
        if self == Stores::Streaming {
            // SAFETY: `sfence` only orders stores; SSE is part of the x86_64 baseline.
            unsafe { std::arch::x86_64::_mm_sfence() };
        }
    }
}

/// Copies `len` bytes from `src` to `dst`, with streaming stores where `dst` is 16-byte
/// aligned, and ordinary ones otherwise (and for a tail shorter than 16 bytes).
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and the two ranges must
/// not overlap. The caller must call [`Stores::finish`] before another thread reads `dst`.
#[inline(always)]
pub(super) unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if (dst as usize).is_multiple_of(16) {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let (s, d) = (src.cast::<__m128i>(), dst.cast::<__m128i>());
        let words = len / 16;
        for i in 0..words {
            // SAFETY: word `i` lies inside both ranges (i < len / 16); `d.add(i)` is 16-byte
            // aligned because `dst` is; the load takes any alignment.
            unsafe { _mm_stream_si128(d.add(i), _mm_loadu_si128(s.add(i))) };
        }
        let done = words * 16;
        // SAFETY: the tail `done..len` lies inside both ranges, which do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), len - done) };
        return;
    }
    // SAFETY: forwarded from the caller.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_destinations_stream_and_small_ones_do_not() {
        let small = Stores::for_destination(STREAMING_MIN_DESTINATION - 1);
        assert_eq!(small, Stores::Cached);
        assert!(!small.streams_rows_of(4096));
        let large = Stores::for_destination(STREAMING_MIN_DESTINATION);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(large, Stores::Streaming);
            assert!(large.streams_rows_of(STREAMING_MIN_ROW));
            assert!(!large.streams_rows_of(STREAMING_MIN_ROW - 1));
        } else {
            assert_eq!(large, Stores::Cached);
        }
    }

    #[test]
    fn streaming_copies_equal_memcpy_at_every_alignment_and_length() {
        let src: Vec<u8> = (0..600u32).map(|i| (i * 7 + 3) as u8).collect();
        for dst_at in 0..20 {
            for src_at in [0, 1, 5, 16] {
                for len in [0, 1, 15, 16, 17, 64, 100, 256, 300] {
                    let mut dst = vec![0xAAu8; 700];
                    // SAFETY: both ranges lie inside their vectors, which are distinct.
                    unsafe {
                        copy_streaming(src.as_ptr().add(src_at), dst.as_mut_ptr().add(dst_at), len)
                    };
                    Stores::Streaming.finish();
                    assert_eq!(&dst[dst_at..dst_at + len], &src[src_at..src_at + len]);
                    assert!(dst[..dst_at].iter().all(|&b| b == 0xAA));
                    assert!(dst[dst_at + len..].iter().all(|&b| b == 0xAA));
                }
            }
        }
    }

    #[test]
    fn a_scatter_into_a_large_destination_writes_exactly_its_elements() {
        use crate::{Strided, host::strided_copy_slices};
        // A 64x64x64 u32 chunk into a 128x256x256 u32 array (32 MiB), at an aligned and at
        // a misaligned position, through the public strided copy.
        let chunk: Vec<u8> = (0..64u32 * 64 * 64).flat_map(|v| v.to_le_bytes()).collect();
        let (ny, nx) = (256usize, 256usize);
        let strides = [(ny * nx * 4) as isize, (nx * 4) as isize, 4];
        for start in [(0usize, 0usize, 0usize), (3, 5, 7)] {
            let mut dst = vec![0u8; 128 * ny * nx * 4];
            assert_eq!(
                Stores::for_destination(dst.len()) == Stores::Streaming,
                cfg!(target_arch = "x86_64")
            );
            let offset = ((start.0 * ny + start.1) * nx + start.2) * 4;
            strided_copy_slices(
                &chunk,
                Strided {
                    offset: 0,
                    strides: &[64 * 64 * 4, 64 * 4, 4],
                },
                &mut dst,
                Strided {
                    offset,
                    strides: &strides,
                },
                &[64, 64, 64],
                4,
                0,
            )
            .expect("a valid copy");
            let mut written = 0usize;
            for (i, word) in dst.chunks_exact(4).enumerate() {
                let (z, y, x) = (i / (ny * nx), i / nx % ny, i % nx);
                let inside = (start.0..start.0 + 64).contains(&z)
                    && (start.1..start.1 + 64).contains(&y)
                    && (start.2..start.2 + 64).contains(&x);
                let value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                if inside {
                    let (cz, cy, cx) = (z - start.0, y - start.1, x - start.2);
                    assert_eq!(value as usize, (cz * 64 + cy) * 64 + cx);
                    written += 1;
                } else {
                    assert_eq!(
                        value, 0,
                        "element ({z}, {y}, {x}) outside the chunk was written"
                    );
                }
            }
            assert_eq!(written, 64 * 64 * 64);
        }
    }
}
