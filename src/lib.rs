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
mod shard_index;
mod store;
mod units;
mod write;

pub use buffer::{Buffer, HostBytes};
pub use device::{cuda_device_count, Device, Stream};
pub use dtype::{ByteOrder, DataType, Element, Order};
pub use error::{Error, Result};
pub use info::{describe, ArrayInfo};
pub use memory::{release_cached_memory, Memory};
pub use ndbuffer::{HostArrayView, NDBuffer};
pub use options::{PipelineMode, Progress, ProgressFn, ReadOptions, WriteOptions};
pub use prototype::{default_prototype, set_default_prototype, Allocator, BufferPrototype};
pub use read::ArrayReadExt;
pub use store::{location_label, node_path, open, open_any, open_store, DynArray};
pub use write::ArrayWriteExt;
