//! Host (CPU) implementations of every operation.
//!
//! These are the reference the CUDA kernels are tested against, and what zarrbuf's host
//! device runs. All of them validate layouts first ([`check_extent`](crate::check_extent)),
//! then merge dimensions ([`merge_dims`](crate::merge_dims)) and iterate rows of the innermost
//! dimension with specialised loops (whole-row `memcpy` when both sides are contiguous and no
//! swap is asked, typed `swap_bytes` loops otherwise, cache-blocked tiles for transposes).
//! They are single-threaded: callers parallelise across chunks.
//!
//! ```
//! // byte-swap a big-endian u32 chunk in place, then transpose it from 2x3 to 3x2
//! let mut chunk: Vec<u8> = (0u32..6).flat_map(|v| v.to_be_bytes()).collect();
//! zarrbuf_codecs::host::byte_swap(&mut chunk, 4)?;
//! let mut out = vec![0u8; 24];
//! zarrbuf_codecs::host::permute(&chunk, &mut out, &[2, 3], &[1, 0], 4)?;
//! assert_eq!(u32::from_le_bytes([out[4], out[5], out[6], out[7]]), 3);
//! # Ok::<(), zarrbuf_codecs::CodecError>(())
//! ```

mod adler;
mod cast;
mod copy;
mod copy_batch;
mod equal;
mod fill;
mod permute;
mod stream_store;
mod swap;
mod unshuffle;
mod word;

pub(crate) use adler::check_adler32;
pub use adler::{adler32_combine, adler32_piece_count, adler32_pieces};
pub use cast::{cast, cast_slices};
pub use copy::{strided_copy, strided_copy_slices};
pub use copy_batch::{strided_copy_batch, strided_copy_batch_slices};
pub use equal::all_equal;
pub use fill::fill;
pub(crate) use permute::PermutePlan;
pub use permute::permute;
pub use swap::byte_swap;
pub(crate) use unshuffle::check_unshuffle;
pub use unshuffle::{Shuffle, blosc_unshuffle};
