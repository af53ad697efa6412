//! Async reads from any async zarrs store (object stores on tokio), into any prototype.
//!
//! Small host reads (up to 7 chunks or inner chunks, `PipelineMode::Auto`, into a
//! C-contiguous output) take the small route (`pipeline/read/small_read_async.rs`): their units
//! are fetched concurrently on the runtime, fetches of the same unit by concurrent reads
//! shared, and decoded by the bounded decoders without the pipeline. Other reads fetch on the
//! tokio runtime, concurrently up to the decoding thread count; decoding
//! and device work run on a blocking thread through the same staged pipeline as sync reads
//! (pinned staging ring, device kernels), so memory in flight is bounded by the options.
//! Dropping the future cancels: the pipeline stops at its next unit, drains its device
//! queues, and keeps the output buffer alive until then.

use super::read::SMALL_READ_UNITS;
use super::read_stream::ReadStream;
use super::target::{Role, check_target, subset_shape};
use crate::buffer::{BufferPrototype, NDBuffer};
use crate::cache::ChunkCache;
use crate::data_types::{DataType, Order};
use crate::errors::{Error, Result};
use crate::options::{ReadOptions, StreamOptions};
use crate::pipeline::{
    AsyncUnits, CachedRead, Cancel, FetchStage, InnerFetch, caches_on_device, check_output_size,
    miss_options, miss_output, read_small_async, run_staged,
};
use crate::stores::reading_inline;
use crate::zarr::{check_subset, data_type_of};
use std::ops::Range;
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

/// Async reads of zarrs arrays over async stores (e.g. [`crate::open_async`]). The futures
/// are `Send`, so they can be spawned on a multi-thread tokio runtime.
///
/// ```no_run
/// # async fn demo() -> zarrbuf::Result<()> {
/// use zarrbuf::{ArrayReadAsyncExt, BufferPrototype};
/// let array = zarrbuf::open_async("https://example.org/data.zarr", "").await?;
/// let part = array.read_async(&[0..10, 0..10], &BufferPrototype::cpu()).await?;
/// # Ok(()) }
/// ```
pub trait ArrayReadAsyncExt: Sync {
    /// Reads `subset` into a new C-order NDBuffer made by `proto`.
    fn read_async(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
    ) -> impl Future<Output = Result<NDBuffer>> + Send {
        async move {
            let opts = ReadOptions::default();
            self.read_opt_async(subset, proto, &opts).await
        }
    }

    /// [`read_async`](Self::read_async) with options.
    fn read_opt_async(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<NDBuffer>> + Send;

    /// Reads the whole array into a new NDBuffer made by `proto`.
    fn read_all_async(
        &self,
        proto: &BufferPrototype,
    ) -> impl Future<Output = Result<NDBuffer>> + Send {
        async move {
            let opts = ReadOptions::default();
            self.read_all_opt_async(proto, &opts).await
        }
    }

    /// [`read_all_async`](Self::read_all_async) with options.
    fn read_all_opt_async(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<NDBuffer>> + Send;

    /// Reads `subset` into `out` (any memory; may be a strided view of a larger NDBuffer;
    /// its shape must be the subset's shape and its data type the array's).
    fn read_into_async(
        &self,
        subset: &[Range<u64>],
        out: &mut NDBuffer,
    ) -> impl Future<Output = Result<()>> + Send {
        async move {
            let opts = ReadOptions::default();
            self.read_into_opt_async(subset, out, &opts).await
        }
    }

    /// [`read_into_async`](Self::read_into_async) with options.
    fn read_into_opt_async(
        &self,
        subset: &[Range<u64>],
        out: &mut NDBuffer,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Reads many subsets (a training loop's minibatches) ahead of the consumer, at most
    /// `opts.prefetch` at once, and yields their NDBuffers in order as a
    /// [`futures::Stream`]; chunks shared by subsets in flight are fetched once; a failed
    /// subset is an `Err` item ([`Error::StreamItem`]) and the stream goes on; dropping the
    /// stream cancels the reads in flight. The subsets' iterator is pulled lazily. See
    /// [`ReadStream`] for the design and a full example.
    ///
    /// # Errors
    /// `InvalidArgument` when called outside a tokio runtime (the reads run on it).
    ///
    /// ```
    /// # async fn demo() -> zarrbuf::Result<()> {
    /// use futures::StreamExt;
    /// use zarrbuf::{ArrayReadAsyncExt, BufferPrototype};
    /// use zarrbuf::options::StreamOptions;
    /// let array = zarrbuf::open_async("s3://bucket/data.zarr", "images").await?;
    /// let batches = (0..100u64).map(|b| vec![b * 64..b * 64 + 64, 0..512]);
    /// let mut stream = array.read_stream(batches, &BufferPrototype::cuda(0), &StreamOptions::default().with_prefetch(8))?;
    /// while let Some(batch) = stream.next().await {
    ///     let batch = batch?; // on the GPU, in order
    /// }
    /// # Ok(()) }
    /// # let rt = tokio::runtime::Runtime::new().unwrap();
    /// # let array = rt.block_on(zarrbuf::open_async("memory://", ""));
    /// # assert!(array.is_err()); // (no array there: the example above shows the calls)
    /// ```
    fn read_stream<I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Result<ReadStream>
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static;

    /// The array's data type as zarrbuf names it.
    fn zarrbuf_data_type(&self) -> Result<DataType>;
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> ArrayReadAsyncExt for Array<S> {
    fn read_opt_async(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<NDBuffer>> + Send {
        let subset = subset.to_vec();
        let (proto, opts) = (proto.clone(), opts.clone());
        async move {
            check_subset(self.shape(), &subset, self.path().as_str())?;
            let dtype = data_type_of(self)?;
            check_output_size(
                &format!("array {}", self.path()),
                &subset,
                dtype,
                &proto,
                &opts,
            )?;
            let shape = subset_shape(&subset);
            // Every element is written by the read; on an error `out` is dropped, never returned.
            let mut out = NDBuffer::empty_unwritten(&shape, dtype, Order::C, &proto)?;
            if let Some(s) = proto.stream() {
                // Ordered after the prototype stream's earlier work (see ArrayReadExt::read).
                s.synchronize()?;
            }
            self.read_into_opt_async(&subset, &mut out, &opts).await?;
            Ok(out)
        }
    }

    fn read_all_opt_async(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<NDBuffer>> + Send {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        let (proto, opts) = (proto.clone(), opts.clone());
        async move { self.read_opt_async(&subset, &proto, &opts).await }
    }

    fn read_stream<I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Result<ReadStream>
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static,
    {
        super::read_stream::async_stream(self, subsets, proto, opts)
    }

    fn zarrbuf_data_type(&self) -> Result<DataType> {
        data_type_of(self)
    }

    fn read_into_opt_async(
        &self,
        subset: &[Range<u64>],
        out: &mut NDBuffer,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<()>> + Send {
        let subset = subset.to_vec();
        let opts = opts.clone();
        let out = out.clone();
        async move {
            check_target(self, &subset, &out, Role::Output)?;
            if out.is_empty() {
                return Ok(());
            }
            let array = Arc::new(self.with_storage(self.storage()));
            let host_cache = opts
                .chunk_cache()
                .filter(|_| !caches_on_device(&out, &opts));
            // Small host reads: fetched on the runtime, decoded without the pipeline.
            if host_cache.is_none()
                && read_small_async(&array, &subset, &out, &opts, SMALL_READ_UNITS).await?
            {
                return Ok(());
            }
            let handle = tokio::runtime::Handle::try_current().map_err(|_| {
                Error::InvalidArgument(
                    "async reads need a tokio runtime (call them inside one)".into(),
                )
            })?;
            // A small read is looked up on the task, and one of only hits is copied here,
            // without a hand-off to a blocking thread (which costs more than the copies); a
            // larger one is looked up on the blocking thread, off the runtime.
            let cached = match &host_cache {
                Some(cache) => {
                    let begun = if out.nbytes() <= INLINE_HIT_BYTES {
                        let begun = CachedRead::begin(self, &subset, out.dtype(), cache)?;
                        if begun.all_hits() {
                            return begun.finish(
                                self.shape(),
                                &subset,
                                &out,
                                cache,
                                &opts,
                                &|_| {
                                    Err(Error::InvalidArgument(
                                        "internal error: a read of cache hits decoded a chunk \
                                     (please report)"
                                            .into(),
                                    ))
                                },
                            );
                        }
                        Some(begun)
                    } else {
                        None
                    };
                    Some((cache.clone(), begun))
                }
                None => None,
            };
            // Dropping this future cancels the blocking half and waits until it has stopped
            // writing into `out`.
            let (_stop, finish) = Cancel::pair();
            let task = tokio::task::spawn_blocking(move || match cached {
                Some((cache, begun)) => read_cached_blocking(
                    &array,
                    &subset,
                    &out,
                    (&cache, begun),
                    &opts,
                    &handle,
                    finish.cancel(),
                ),
                None => read_blocking(&array, &subset, &out, &opts, &handle, finish.cancel()),
            });
            task.await
                .map_err(|e| Error::Cancelled(format!("the read task stopped: {e}")))?
        }
    }
}

/// The largest cached async read looked up on its task and, when every unit is a hit,
/// copied there (a larger one, or one with a miss, finishes on a blocking thread): host
/// copies run at 10 GB/s or more, so 256 KiB is tens of microseconds, the order of the
/// hand-off it saves.
const INLINE_HIT_BYTES: usize = 256 << 10;

/// The blocking half of a read through a host cache (its units looked up here unless the
/// task did): hits copied, each miss read whole, uncached, by the small route (or
/// [`read_blocking`]) and kept.
fn read_cached_blocking<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Arc<Array<S>>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    (cache, begun): (&ChunkCache, Option<CachedRead>),
    opts: &ReadOptions,
    handle: &tokio::runtime::Handle,
    cancel: &Cancel,
) -> Result<()> {
    let uncached = miss_options(opts);
    let begun = match begun {
        Some(begun) => begun,
        None => CachedRead::begin(array.as_ref(), subset, out.dtype(), cache)?,
    };
    begun.finish(array.shape(), subset, out, cache, opts, &|region| {
        let chunk = miss_output(region, out.dtype())?;
        // A miss is one unit: the small route's fetch and decode, as sync misses take.
        let small = reading_inline(|| {
            handle.block_on(cancel.unless_dropped(
                "read",
                read_small_async(array, region, &chunk, &uncached, SMALL_READ_UNITS),
            ))
        })?;
        if !small {
            read_blocking(array, region, &chunk, &uncached, handle, cancel)?;
        }
        Ok(chunk)
    })
}

/// The blocking half of an uncached read (or of a device-cached one, which the staged
/// pipeline handles): the staged pipeline, whose producers fetch through the runtime.
fn read_blocking<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Arc<Array<S>>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    opts: &ReadOptions,
    handle: &tokio::runtime::Handle,
    cancel: &Cancel,
) -> Result<()> {
    let units = AsyncUnits {
        array: array.as_ref(),
        handle,
        cancel,
        what: "read",
    };
    run_staged(
        array.as_ref(),
        subset,
        out,
        opts,
        InnerFetch::for_async_store(array.as_ref()),
        &FetchStage {
            fetch: &|plan, shards, unit| units.fetch_blocking(plan, shards, unit),
            run_ahead: Some(&|shards, job| units.run_ahead(shards, job)),
            fetch_async: Some(&units),
            check: &|| units.check(),
        },
    )
}
