//! Async writes into async zarrs stores (object stores on tokio), from any memory.
//!
//! The staged write pipeline runs on a blocking thread (device gather, staging, CPU
//! compression); finished chunks are put through the runtime. Host data takes the same path,
//! so chunks are compressed in parallel whatever the memory.

use super::target::{Role, check_target};
use crate::buffer::NDBuffer;
use crate::cache::invalidate_written;
use crate::errors::{Error, Result};
use crate::options::WriteOptions;
use crate::pipeline::{Cancel, ChunkSink, write_staged};
use crate::zarr::{chunk_error, forget_written_shard_indexes};
use std::ops::Range;
use std::sync::Arc;
use zarrs::array::{Array, ArrayBytes, ArraySubset, CodecOptions};
use zarrs::storage::AsyncReadableWritableStorageTraits;

/// Async writes of zarrbuf buffers into zarrs arrays over async stores. The futures are `Send`.
///
/// ```no_run
/// # async fn demo() -> zarrbuf::Result<()> {
/// use zarrbuf::{ArrayWriteAsyncExt, NDBuffer, options::WriteOptions};
/// let array = zarrbuf::open_async("s3://bucket/out.zarr", "").await?;
/// let data = NDBuffer::from_vec(vec![0f32; 100], &[10, 10])?;
/// array.write_async(&[0..10, 0..10], &data).await?;
/// array.write_opt_async(&[0..10, 0..10], &data, &WriteOptions::default()).await?;
/// # Ok(()) }
/// ```
pub trait ArrayWriteAsyncExt: Sync {
    /// Writes `data` (shape of `subset`, the array's data type, any memory) into `subset`.
    fn write_async(
        &self,
        subset: &[Range<u64>],
        data: &NDBuffer,
    ) -> impl Future<Output = Result<()>> + Send {
        async move {
            let opts = WriteOptions::default();
            self.write_opt_async(subset, data, &opts).await
        }
    }

    /// [`write_async`](Self::write_async) with options.
    fn write_opt_async(
        &self,
        subset: &[Range<u64>],
        data: &NDBuffer,
        opts: &WriteOptions,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Writes `data` (the array's shape) into the whole array.
    fn write_all_async(&self, data: &NDBuffer) -> impl Future<Output = Result<()>> + Send {
        async move {
            let opts = WriteOptions::default();
            self.write_all_opt_async(data, &opts).await
        }
    }

    /// [`write_all_async`](Self::write_all_async) with options.
    fn write_all_opt_async(
        &self,
        data: &NDBuffer,
        opts: &WriteOptions,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Stores chunks of an async array from a blocking thread.
struct AsyncSink<'a, S: ?Sized> {
    array: &'a Array<S>,
    handle: &'a tokio::runtime::Handle,
    cancel: &'a Cancel,
}

impl<S: ?Sized> AsyncSink<'_, S> {
    fn check(&self) -> Result<()> {
        self.cancel.check("write")
    }

    /// Runs one store operation on the runtime, abandoned if the future is dropped (a put
    /// is atomic: the chunk is either stored whole or not at all).
    fn run<T, E: Into<crate::errors::BoxError>>(
        &self,
        indices: &[u64],
        op: impl Future<Output = std::result::Result<T, E>>,
    ) -> Result<T> {
        self.check()?;
        let op = async { op.await.map_err(|e| chunk_error(self.array, indices, e)) };
        self.handle
            .block_on(self.cancel.unless_dropped("write", op))
    }
}

impl<S: ?Sized + AsyncReadableWritableStorageTraits + 'static> ChunkSink for AsyncSink<'_, S> {
    fn erase(&self, indices: &[u64]) -> Result<()> {
        self.run(indices, self.array.async_erase_chunk(indices))
    }

    unsafe fn store_encoded(&self, indices: &[u64], encoded: bytes::Bytes) -> Result<()> {
        // SAFETY: forwarded to the caller.
        let put = unsafe { self.array.async_store_encoded_chunk(indices, encoded) };
        self.run(indices, put)
    }

    fn store_subset(
        &self,
        indices: &[u64],
        local: &ArraySubset,
        bytes: &[u8],
        opts: &CodecOptions,
    ) -> Result<()> {
        self.run(
            indices,
            self.array
                .async_store_chunk_subset_opt(indices, local, ArrayBytes::from(bytes), opts),
        )
    }
}

impl<S: ?Sized + AsyncReadableWritableStorageTraits + 'static> ArrayWriteAsyncExt for Array<S> {
    fn write_all_opt_async(
        &self,
        data: &NDBuffer,
        opts: &WriteOptions,
    ) -> impl Future<Output = Result<()>> + Send {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        let (data, opts) = (data.clone(), opts.clone());
        async move { self.write_opt_async(&subset, &data, &opts).await }
    }

    fn write_opt_async(
        &self,
        subset: &[Range<u64>],
        data: &NDBuffer,
        opts: &WriteOptions,
    ) -> impl Future<Output = Result<()>> + Send {
        let subset = subset.to_vec();
        let (data, opts) = (data.clone(), opts.clone());
        async move {
            check_target(self, &subset, &data, Role::Data)?;
            if data.is_empty() {
                return Ok(());
            }
            let array = Arc::new(self.with_storage(self.storage()));
            let handle = tokio::runtime::Handle::try_current().map_err(|_| {
                Error::InvalidArgument(
                    "async writes need a tokio runtime (call them inside one)".into(),
                )
            })?;
            // Dropping this future cancels the blocking half and waits until it has stopped
            // reading `data`.
            let (_stop, finish) = Cancel::pair();
            let written_subset = subset.clone();
            let task = tokio::task::spawn_blocking(move || {
                let sink = AsyncSink {
                    array: &*array,
                    handle: &handle,
                    cancel: finish.cancel(),
                };
                // Decoded-chunk caches drop what this write replaces, before and after.
                invalidate_written(&*array, &subset);
                let result = write_staged(&array, &sink, &subset, &data, &opts, None);
                invalidate_written(&*array, &subset);
                result
            });
            let written = task
                .await
                .map_err(|e| Error::Cancelled(format!("the write task stopped: {e}")))
                .and_then(|r| r);
            // Shards stored (some, if it failed) no longer have the indexes read before.
            forget_written_shard_indexes(self, &written_subset);
            written
        }
    }
}
