//! Decoding chunks on the CPU without trusting them: decompression bounded by the chunk's
//! decoded size (`bounded.rs`), the refusal of a chunk stored larger than any encoding of it
//! (`stored_size.rs`), the decode of only the prefix of a chunk a read needs (`prefix.rs`,
//! with blosc's blocks in `blosc_prefix.rs`), and the zstd context each thread reuses
//! (`zstd_context.rs`).

mod blosc_prefix;
pub(super) mod bounded;
mod prefix;
mod stored_size;
pub(super) mod zstd_context;

pub(crate) use prefix::{decode_needed_into, needed_range};
pub(crate) use stored_size::{
    check_exact_size, check_exact_size_async, check_stored_size, check_stored_size_async,
    not_exact_size, stored_size_problem,
};
