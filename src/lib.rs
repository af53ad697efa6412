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

mod buffer;
mod codec_plan;
mod device;
mod dtype;
mod error;
mod info;
mod memory;
mod ndbuffer;
pub mod npy;
mod options;
mod pipeline;
mod pipeline_write;
mod prototype;
mod read;
mod read_async;
mod remote;
mod shard_index;
mod slot_pool;
mod store;
mod units;
mod write;
mod write_async;

pub use buffer::{Buffer, HostBytes};
pub use device::{Device, Stream, cuda_device_count};
pub use dtype::{ByteOrder, DataType, Element, Order};
pub use error::{Error, Result};
pub use info::{ArrayInfo, describe};
pub use memory::{Memory, release_cached_memory};
pub use ndbuffer::{HostArrayView, NDBuffer};
pub use options::{PipelineMode, Progress, ProgressFn, ReadOptions, WriteOptions};
pub use prototype::{Allocator, BufferPrototype, default_prototype, set_default_prototype};
pub use read::ArrayReadExt;
pub use read_async::ArrayReadAsyncExt;
pub use remote::{
    AsyncArray, RemoteStore, object_store_for_url, open_async, open_async_with_options,
};
pub use store::{DynArray, location_label, node_path, open, open_store};
pub use write::ArrayWriteExt;
pub use write_async::ArrayWriteAsyncExt;
