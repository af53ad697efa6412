//! zarrbuf reads and writes zarr (v2 and v3) chunked arrays into buffers that live where the
//! next computation runs: host memory, pinned host memory, or CUDA device memory.
//!
//! The three types follow zarr-python's buffer design:
//! - [`Buffer`]: flat, untyped bytes in any memory, cheap to clone and slice;
//! - [`NDBuffer`]: a typed, strided n-d view over a `Buffer`;
//! - [`BufferPrototype`]: where new memory comes from (CPU, pinned, CUDA device N, a stream,
//!   a user allocator).
//!
//! ```
//! use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
//! let a = NDBuffer::zeros(&[2, 3], DataType::Float32, Order::C, &BufferPrototype::cpu())?;
//! assert_eq!(a.shape(), &[2, 3]);
//! assert_eq!(a.as_ndarray::<f32>()?.sum(), 0.0);
//! # Ok::<(), zarrbuf::Error>(())
//! ```
//!
//! Arrays are zarrs arrays: [`open`] gives a [`DynArray`] (sync), [`open_async`] an
//! [`AsyncArray`] (async), and the extension traits ([`ArrayReadExt`], [`ArrayWriteExt`] and
//! their `Async` twins) give both the same operations, named as in zarrs: `x` with defaults,
//! `x_opt` with options, `_async` for the async twin (`read`, `read_opt`, `read_opt_async`).
//! The root holds the everyday types; the specialised ones are in modules ([`multi`],
//! [`stream`], [`store`], [`icechunk`], [`cuda`], [`ipc`], [`dlpack`], [`npy`], [`alloc`],
//! [`host`], [`options`], [`dtype`], [`hierarchy`], [`subset`], [`check`]).

#![warn(missing_docs)]

// The `mod` lines are in rustfmt's alphabetical order, not in layer order. The layers,
// bottom to top, each importing only from the layers below it (ARCHITECTURE.md has the map;
// tests/it/import_cycles.rs fails on any import cycle between the files of src/):
// - the leaves: `place` (Device, Memory), `error` (imports `place`), `dtype` (imports
//   `error`) and `options` (imports nothing from the crate);
// - `device::driver`: the CUDA driver, probed before anything touches CUDA; it imports only
//   the leaves, and it is the one file of `device` that `memory` imports;
// - `memory`: who owns raw memory (allocations, borrow flags, fences, the block cache);
// - the rest of `device`: the device trait, its host and CUDA implementations, nvCOMP;
// - `buffer` (Buffer, NDBuffer, BufferPrototype) and `zarr` (stores, units, codec plans,
//   shards), side by side: neither imports the other;
// - `pipeline`: the staged read and write engines, their drivers and the reads behind read
//   streams; beside it `check` (finding and repairing damaged chunks), which imports only
//   `zarr`, `options` and `error`;
// - `api`: the public operations (the extension traits on zarrs' `Array`, read streams,
//   `copy_array`), which pick a route and call `pipeline` or zarrs.
mod api;
mod buffer;
pub mod check;
mod device;
pub mod dtype;
pub mod error;
mod memory;
pub mod options;
mod pipeline;
mod place;
mod zarr;

// The everyday types, at the root.
pub use api::{ArrayReadAsyncExt, ArrayReadExt, ArrayWriteAsyncExt, ArrayWriteExt};
pub use api::{CopyOptions, copy_array};
pub use buffer::{Buffer, BufferPrototype, NDBuffer};
pub use check::{CheckOptions, CheckReport, check_array};
pub use dtype::{DataType, Element, Order};
pub use error::{Error, Result};
pub use options::{PipelineMode, ReadOptions, WriteOptions};
pub use place::{Device, Memory, ParseDeviceError};
pub use zarr::{ArrayInfo, ArrayLayout, CodecSpec, create_like, describe, resume_like};
pub use zarr::{AsyncArray, DynArray, OpenOptions, open, open_async, open_opt, open_opt_async};
pub use zarr::{Hierarchy, list_hierarchy, list_hierarchy_opt};

// The specialised ones, in named modules.
pub use buffer::{dlpack, npy};

// README.md's Rust examples are compiled as doc tests (`no_run`: they need stores and GPUs),
// so the API tour cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

/// Where buffer memory comes from: user allocators, the memory resource behind a buffer,
/// the process-wide default prototype, and how much host memory is left.
pub mod alloc {
    pub use crate::buffer::{Allocator, MemoryResource, default_prototype, set_default_prototype};
    pub use crate::memory::available_bytes as available_memory;
}

/// CUDA streams and devices, nvCOMP, and the memory zarrbuf keeps cached for reuse.
pub mod cuda {
    pub use crate::device::{Stream, cuda_device_count, nvcomp_compression, nvcomp_library};
    pub use crate::pipeline::release_cached_memory;
}

/// The nodes of a zarr hierarchy, as [`list_hierarchy`] lists them.
pub mod hierarchy {
    pub use crate::zarr::{
        ArraySummary, Hierarchy, NodeInfo, NodeKind, list_hierarchy, list_hierarchy_opt,
    };
}

/// Borrowed views of host memory: bytes, and typed n-d arrays (ndarray) of an NDBuffer.
pub mod host {
    pub use crate::buffer::{HostArrayView, HostArrayViewMut, HostBytes};
}

/// Icechunk repositories: the version to open, recognising a repository, and (feature
/// `icechunk`) writing to a branch.
pub mod icechunk {
    #[cfg(feature = "icechunk")]
    pub use crate::zarr::IcechunkWriter;
    pub use crate::zarr::{IcechunkVersion, is_icechunk_repository};
}

/// Sharing device and pinned buffers between processes (CUDA IPC).
pub mod ipc {
    pub use crate::buffer::IpcDescriptor;
}

/// One read onto several devices: the prototypes, the parts, and the reads themselves.
pub mod multi {
    pub use crate::api::multi::{read, read_opt};
    pub use crate::buffer::{MultiBuffer, MultiNDBuffer, MultiPrototype, Placement};
}

/// Stores: opening the store at a location, object stores for URLs, and the rewrite to apply
/// to array metadata before building a zarrs `Array` on one from it.
pub mod store {
    pub use crate::zarr::{
        RemoteStore, node_path, object_store_for_url, open_store, open_store_opt,
        zarrs_safe_metadata,
    };
}

/// Read streams: many subsets read ahead of the consumer, in order.
pub mod stream {
    pub use crate::api::{BlockingReadStream, ReadStream};
    pub use crate::options::StreamOptions;
}

/// Array subsets in text form.
pub mod subset {
    pub use crate::zarr::parse_subset;
}
