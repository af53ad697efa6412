//! Host (CPU) implementations of every operation.
//!
//! These are the reference the CUDA kernels are tested against, and what zarrbuf's host
//! device runs. All of them validate layouts first ([`check_extent`](crate::check_extent)),
//! then merge dimensions ([`merge_dims`](crate::merge_dims)) and iterate rows of the innermost
//! dimension with specialised loops (whole-row `memcpy` when both sides are contiguous and no
//! swap is asked, typed `swap_bytes` loops otherwise). They are single-threaded.

mod cast;
mod copy;
mod fill;
mod permute;
mod swap;
mod word;

pub use cast::{cast, cast_slices};
pub use copy::{strided_copy, strided_copy_slices};
pub use fill::fill;
pub use permute::permute;
pub(crate) use permute::PermutePlan;
pub use swap::byte_swap;
