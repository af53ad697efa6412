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
mod dtype;
mod error;
mod memory;
mod options;
mod pipeline;
mod place;
mod zarr;

pub use api::{
    ArrayReadAsyncExt, ArrayReadExt, ArrayWriteAsyncExt, ArrayWriteExt, BlockingReadStream,
    CopyOptions, ReadStream, copy_array,
};
pub use buffer::dlpack;
pub use buffer::npy;
pub use buffer::{
    Allocator, Buffer, BufferPrototype, HostArrayView, HostArrayViewMut, HostBytes, IpcDescriptor,
    MemoryResource, MultiBuffer, MultiNDBuffer, MultiPrototype, NDBuffer, Placement,
    default_prototype, set_default_prototype,
};
pub use check::{CheckOptions, CheckReport, check_array};
pub use device::{Stream, cuda_device_count, nvcomp_compression, nvcomp_library};
pub use dtype::{ByteOrder, DataType, Element, Order, TimeUnit};
pub use error::{BoxError, Error, Result};
pub use options::{
    Compress, Decode, Durability, PipelineMode, Progress, ProgressFn, ReadOptions, StreamOptions,
    WriteOptions,
};
pub use pipeline::release_cached_memory;
pub use place::{Device, Memory, ParseDeviceError};
#[cfg(feature = "icechunk")]
pub use zarr::IcechunkWriter;
pub use zarr::{
    ArrayInfo, ArrayLayout, ArraySummary, AsyncArray, CodecSpec, DynArray, Hierarchy,
    IcechunkVersion, NodeInfo, NodeKind, OpenOptions, RemoteStore, create_like, describe,
    is_icechunk_repository, list_hierarchy, list_hierarchy_with, location_label, node_path,
    object_store_for_url, open, open_async, open_async_with, open_async_with_options, open_store,
    open_store_with, open_with, parse_subset, resume_like,
};
