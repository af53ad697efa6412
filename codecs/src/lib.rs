//! `zarrbuf-codecs`: the element-level kernels behind zarrbuf's array codecs and n-d buffer
//! operations.
//!
//! The crate holds kernels, not zarr codecs: it knows nothing of zarr, metadata or codec
//! chains. zarr's codecs (and numcodecs' as zarrs plugins) are in zarrbuf itself, under
//! `src/zarr/plugins/codecs/`; they and zarrbuf's buffers call the kernels here for the work done
//! on elements. The name is kept because it is the published crate's name and its import
//! path in every crate of the workspace.
//!
//! Every operation exists twice, with identical results:
//!
//! * [`host`] — plain Rust on host memory (slices or raw pointers);
//! * [`cuda`] — CUDA kernels on device memory, compiled at run time with NVRTC
//!   (sources in `kernels/*.cu`), enqueued asynchronously on a caller's stream.
//!
//! The operations are
//!
//! * **strided copy** (`strided_copy`): `dst[i] = src[i]` over an n-d index space, each side with
//!   its own byte offset and byte strides, optionally byte-swapping each element — the scatter
//!   of a decoded chunk into an output array, the gather on write, and the `bytes` codec;
//! * **batched strided copy** (`strided_copy_batch`): many [`CopyItem`]s, each with its own
//!   source region and layouts, into one destination — one kernel launch on CUDA for all the
//!   scatters of a decode batch;
//! * **fill**: write one element pattern everywhere (missing chunks, fill values);
//! * **cast**: numpy `astype`-style conversion between [`ScalarKind`]s;
//! * **byte swap**: in place, contiguous (the `bytes` codec on a whole chunk);
//! * **permute**: transpose of a C-contiguous block (the `transpose` codec).
//!
//! One more runs on the host only: **all equal** (`host::all_equal`), the read-only twin of
//! fill, with which writes find chunks of only the fill value in host data without copying
//! them.
//!
//! Layouts are described by [`Strided`] views over byte regions; every view is checked against
//! its region with [`check_extent`] before any byte is touched, so bad input returns
//! [`CodecError::InvalidLayout`] instead of reading or writing out of bounds.
//!
//! ```
//! use zarrbuf_codecs::{host, Strided};
//! // a 2x3 u16 array, transposed into a 3x2 one, byte-swapped on the way
//! let src: Vec<u8> = (0u16..6).flat_map(|v| v.to_be_bytes()).collect();
//! let mut dst = vec![0u8; 12];
//! host::strided_copy_slices(
//!     &src, Strided { offset: 0, strides: &[2, 6] },   // read src transposed
//!     &mut dst, Strided { offset: 0, strides: &[4, 2] }, // write C order
//!     &[3, 2], 2, 2,
//! )?;
//! let out: Vec<u16> = dst.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
//! assert_eq!(out, [0, 3, 1, 4, 2, 5]);
//! # Ok::<(), zarrbuf_codecs::CodecError>(())
//! ```

#![warn(missing_docs)]

mod copy_batch;
mod error;
mod float16;
mod layout;
mod scalar;

pub mod cuda;
pub mod host;

pub use copy_batch::CopyItem;
pub use error::{CodecError, Result};
pub use layout::{MAX_DIMS, Strided, check_extent, merge_dims};
pub use scalar::ScalarKind;
