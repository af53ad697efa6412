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
//! their `Async` twins) give both the same operations: `x` with defaults and `x_opt` with
//! options, as in zarrs, and the suffix `_async` for the async twin (`read`, `read_opt`,
//! `read_opt_async`), where zarrs puts `async_` in front.
//! `read_as::<T>` reads into the output kind the caller names ([`ReadOutput`]: an
//! [`NDBuffer`], or a [`VarLenBuffer`] for variable-length strings and bytes).
//! The root holds the everyday types; the specialised ones are in modules ([`multi`],
//! [`stream`], [`store`], [`icechunk`], [`cuda`], [`ipc`], [`dlpack`], [`npy`], [`alloc`],
//! [`host`], [`options`], [`dtype`], [`hierarchy`], [`subset`], [`check`]).

#![warn(missing_docs)]

// The `mod` lines are in rustfmt's alphabetical order, not in layer order. The layers,
// bottom to top, each importing only from the layers below it (ARCHITECTURE.md has the map;
// tests/it/import_cycles.rs fails on any import cycle between the files of src/):
// - the leaves: `place` (Device, Memory), `process_local` (values a forked child builds
//   afresh), `errors` (imports `place`), `data_types` (imports
//   `errors`), `options` and `memory_limit` (how much host memory this process may still
//   take; both import nothing from the crate);
// - `stores`: where bytes live (the stores zarrbuf opens, `Location`, key checks); it imports
//   only the leaves. Its public face, the module `store` below, is assembled here from it and
//   from the zarr floor's `open_store`, `open_store_opt` and `zarrs_safe_metadata`;
// - `driver`: the CUDA driver, probed before anything touches CUDA; it imports only the
//   leaves, and `memory` and `device` both import it;
// - `memory`: who owns raw memory (allocations, borrow flags, fences, the block cache);
// - `device`: the device trait, its host and CUDA implementations, nvCOMP;
// - `buffer` (Buffer, NDBuffer, BufferPrototype) and `zarr` (metadata, units, codec plans,
//   shards, opening arrays), side by side: neither imports the other;
// - `cache`: decoded-chunk caches (`ChunkCache`), their keys and policies, and the registry
//   of live caches that writes invalidate;
// - `pipeline`: the staged read and write engines, their drivers and the reads behind read
//   streams; beside it `check` (finding and repairing damaged chunks), which imports only
//   `zarr`, `stores`, `options`, `error` and `cache`;
// - `api`: the public operations (the extension traits on zarrs' `Array`, read streams,
//   `copy_array`), which pick a route and call `pipeline` or zarrs.
mod api;
mod buffer;
pub mod cache;
// `checking`, `data_types`, `errors` and `option_types` are public through the modules
// `check`, `dtype`, `error` and `options` below, which hold only what has no other public
// path (the root has `Error`, `DataType` and the like; `options` also holds `OpenOptions`
// and `CopyOptions`, defined elsewhere): every name has one public path.
mod checking;
mod compression_formats;
mod data_types;
mod device;
mod driver;
mod errors;
mod memory;
mod memory_limit;
mod option_types;
mod pipeline;
mod place;
mod process_local;
mod stage_timings;
mod stores;
pub mod thread_pool;
mod zarr;

// The everyday types, at the root.
pub use api::{ArrayReadAsyncExt, ArrayReadExt, ArrayWriteAsyncExt, ArrayWriteExt};
pub use api::{ArrayReadVarLenAsyncExt, ArrayReadVarLenExt, ArrayWriteVarLenExt, ReadOutput};
pub use api::{copy_array, create_like};
pub use buffer::{Buffer, BufferPrototype, NDBuffer, VarLenBuffer};
pub use data_types::{DataType, Element, Order, VarLenKind};
pub use errors::{Error, Result};
pub use place::{Device, Memory, ParseDeviceError};
pub use stores::open::DynArray;
pub use stores::remote::AsyncArray;
pub use zarr::{ArrayInfo, ArrayLayout, CodecSpec, describe, resume_like};
pub use zarr::{Hierarchy, list_hierarchy, list_hierarchy_opt};
pub use zarr::{VarLenInfo, describe_varlen, varlen_kind};
pub use zarr::{open, open_async, open_opt, open_opt_async};

// The specialised ones, in named modules.
pub use buffer::{dlpack, npy};

// README.md's and docs/rust-api.md's Rust examples are compiled as doc tests (`no_run`: they
// need stores and GPUs), so the API tour cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/rust-api.md")]
struct RustApiExamples;

/// Where buffer memory comes from: user allocators, the memory resource behind a buffer,
/// the process-wide default prototype, how much host memory is left, the memory zarrbuf
/// keeps cached for reuse, and whether its large host buffers ask for huge pages.
pub mod alloc {
    pub use crate::buffer::{Allocator, MemoryResource, default_prototype, set_default_prototype};
    pub use crate::memory::{
        HUGE_PAGES_ENV, fresh_memory_keeps_small_pages, host_returns_free_pages,
        huge_pages_advised, huge_pages_setting, release_cached_memory,
    };
    pub use crate::memory_limit::available_bytes as available_memory;
}

/// CUDA streams and devices, nvCOMP, and the device decoder's knobs.
pub mod cuda {
    pub use crate::device::{Stream, nvcomp_compression, nvcomp_library};
    pub use crate::driver::cuda_device_count;
    pub use crate::pipeline::{DecodeLimits, Tuning, decode_limits, tuning};
}

/// Checking a stored array for damage: the library side of `zarrbuf check`.
///
/// Every file under the array's directory is classified (metadata, chunk, temporary file of
/// a killed write, or something else), every chunk inside the chunk grid is decoded on all
/// cores — the inner chunks of a shard one by one when the shard does not decode, so that
/// the damaged ones are named — and each problem becomes one [`Finding`](check::Finding).
/// With [`CheckOptions::repair`](options::CheckOptions::repair) leftovers and undecodable
/// chunks are removed; a shard with some damaged inner chunks is rewritten with those inner
/// chunks missing (they then read as the fill value) and the good ones kept. Its options are
/// [`options::CheckOptions`].
pub mod check {
    pub use crate::checking::{
        CheckReport, Finding, KeySource, Problem, check_array, chunk_indices, is_temporary_name,
    };
}

/// Options of every operation — reads, writes, read streams, opening, copies, checks — and
/// the values inside them (routes, decoders, compressors, durability, progress reports).
pub mod options {
    pub use crate::api::CopyOptions;
    pub use crate::checking::CheckOptions;
    pub use crate::option_types::{
        CacheHandle, Compress, DEFAULT_IO_CONCURRENCY, Decode, Durability, MAX_IO_CONCURRENCY,
        PipelineMode, Progress, ProgressFn, ReadOptions, StreamOptions, WriteOptions,
        io_concurrency, io_concurrency_is_default,
    };
    pub use crate::stage_timings::{Stage, StageReport, StageTimings, StageTotal};
    pub use crate::stores::open_options::OpenOptions;
}

/// The nodes of a zarr hierarchy, as [`list_hierarchy`] lists them.
pub mod hierarchy {
    pub use crate::zarr::{ArraySummary, NodeInfo, NodeKind};
}

/// Data type details: byte order and time units. [`DataType`], [`Element`], [`Order`] and
/// [`VarLenKind`] are at the root.
pub mod dtype {
    pub use crate::data_types::{ByteOrder, TimeUnit};
}

/// Error sources. [`Error`] and [`Result`] are at the root.
pub mod error {
    pub use crate::errors::BoxError;
}

/// Borrowed views of host memory: bytes, and typed n-d arrays (ndarray) of an NDBuffer.
pub mod host {
    pub use crate::buffer::{HostArrayView, HostArrayViewMut, HostBytes};
}

/// Icechunk repositories: the version to open, recognising a repository, and (feature
/// `icechunk`) writing to a branch.
pub mod icechunk {
    #[cfg(feature = "icechunk")]
    pub use crate::stores::icechunk::IcechunkWriter;
    pub use crate::stores::open_options::{IcechunkVersion, is_icechunk_repository};
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

/// Stores: where a store lives ([`Location`](store::Location), parsed once and compared
/// canonically), opening the store at a location, object stores for URLs, and the rewrite to
/// apply to array metadata before building a zarrs `Array` on one from it.
pub mod store {
    // The stores are the layer `stores`, which knows nothing of zarr; `open_store`,
    // `open_store_opt` and `zarrs_safe_metadata` are the zarr floor's (they register
    // zarrbuf's codec fixes with zarrs before the store opens).
    pub use crate::stores::{
        Location, RemoteStore, node_path, object_store_for_url, time_to_first_byte,
    };
    pub use crate::zarr::{open_store, open_store_opt, zarrs_safe_metadata};
}

/// Read streams: many subsets read ahead of the consumer, in order, as `NDBuffer`s or
/// `VarLenBuffer`s (one stream type for both).
pub mod stream {
    #[allow(deprecated)]
    pub use crate::api::VarLenReadStream;
    pub use crate::api::{BlockingReadStream, ReadStream};
}

/// Array subsets in text form.
pub mod subset {
    pub use crate::zarr::parse_subset;
}
