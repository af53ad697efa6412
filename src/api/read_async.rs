//! Async reads from any async zarrs store (object stores on tokio), into any prototype.
//!
//! The front checks its arguments and allocates the output; the read core
//! (`pipeline/read/read_core.rs`) chooses the route. Small host reads (up to 7 chunks or inner
//! chunks, `PipelineMode::Auto`, into a C-contiguous output) take the small route
//! (`pipeline/read/small_read_async.rs`): their units are fetched concurrently on the runtime,
//! fetches of the same unit by concurrent reads shared, and decoded by the bounded decoders
//! without the pipeline. Other reads fetch on the tokio runtime; decoding and device work run
//! on a blocking thread through the same staged pipeline as sync reads (pinned staging ring,
//! device kernels), so memory in flight is bounded by the options. Dropping the future
//! cancels: the pipeline stops at its next unit, drains its device queues, and keeps the
//! output buffer alive until then.

use super::read_output::{ReadOutput, read_into_async};
use super::read_stream::ReadStream;
use crate::buffer::{BufferPrototype, NDBuffer};
use crate::data_types::DataType;
use crate::errors::Result;
use crate::options::{ReadOptions, StreamOptions};
use crate::zarr::data_type_of;
use std::ops::Range;
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
    ) -> impl Future<Output = Result<NDBuffer>> + Send {
        self.read_as_opt_async(subset, proto, opts)
    }

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
    ) -> impl Future<Output = Result<NDBuffer>> + Send {
        self.read_all_as_opt_async(proto, opts)
    }

    /// Reads `subset` into a new output of the caller's kind `T` made by `proto`: an
    /// [`NDBuffer`] (the same as [`read_async`](Self::read_async)) or a
    /// [`VarLenBuffer`](crate::VarLenBuffer) for variable-length strings and bytes (see
    /// [`ReadOutput`] and the sync [`crate::ArrayReadExt::read_as`]). Into a
    /// `VarLenBuffer` the read runs on a blocking thread and rayon's pool, its chunks
    /// fetched on the tokio runtime ahead of the decoders, up to
    /// [`ReadOptions::io_concurrency`] requests and the staging budget in bytes.
    ///
    /// # Errors
    /// Those of [`crate::ArrayReadExt::read_as`]; `InvalidArgument` for a `VarLenBuffer`
    /// outside a tokio runtime.
    fn read_as_async<T: ReadOutput>(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
    ) -> impl Future<Output = Result<T>> + Send {
        async move {
            let opts = ReadOptions::default();
            self.read_as_opt_async(subset, proto, &opts).await
        }
    }

    /// [`read_as_async`](Self::read_as_async) with options (as
    /// [`crate::ArrayReadExt::read_as_opt`]).
    fn read_as_opt_async<T: ReadOutput>(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<T>> + Send;

    /// Reads the whole array into a new output of the caller's kind `T` made by `proto`
    /// (see [`read_as_async`](Self::read_as_async)).
    fn read_all_as_async<T: ReadOutput>(
        &self,
        proto: &BufferPrototype,
    ) -> impl Future<Output = Result<T>> + Send {
        async move {
            let opts = ReadOptions::default();
            self.read_all_as_opt_async(proto, &opts).await
        }
    }

    /// [`read_all_as_async`](Self::read_all_as_async) with options.
    fn read_all_as_opt_async<T: ReadOutput>(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<T>> + Send;

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
    /// subset is an `Err` item ([`Error::StreamItem`](crate::Error::StreamItem)) and the
    /// stream goes on; dropping the stream cancels the reads in flight. The subsets' iterator is pulled lazily. See
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
        I::IntoIter: Send + 'static,
    {
        self.read_stream_as::<NDBuffer, I>(subsets, proto, opts)
    }

    /// [`read_stream`](Self::read_stream) into outputs of the caller's kind `T` (see
    /// [`ReadOutput`]): `NDBuffer`s, or [`VarLenBuffer`](crate::VarLenBuffer)s for arrays of
    /// variable-length strings and bytes, through the same engine.
    ///
    /// # Errors
    /// `InvalidArgument` when called outside a tokio runtime (the reads run on it).
    ///
    /// ```
    /// # fn main() -> zarrbuf::Result<()> {
    /// use futures::StreamExt;
    /// use zarrbuf::{ArrayReadAsyncExt, ArrayWriteVarLenExt, BufferPrototype, VarLenBuffer};
    /// use zarrbuf::options::StreamOptions;
    /// use zarrs::array::{ArrayBuilder, data_type};
    /// # let dir = std::env::temp_dir().join(format!("zarrbuf-doc-vstream-{}", std::process::id()));
    /// # let err = |e: &dyn std::fmt::Display| zarrbuf::Error::InvalidArgument(e.to_string());
    /// let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(&dir).map_err(|e| err(&e))?);
    /// let array = ArrayBuilder::new(vec![4], vec![2], data_type::string(), "").build(store, "/s").map_err(|e| err(&e))?;
    /// array.store_metadata().map_err(|e| err(&e))?;
    /// array.write_varlen(&[0..4], &VarLenBuffer::from_strings(vec![4], ["a", "b", "c", "d"])?)?;
    ///
    /// let rt = tokio::runtime::Runtime::new().map_err(|e| err(&e))?;
    /// rt.block_on(async {
    ///     let array = zarrbuf::open_async(&format!("file://{}", dir.display()), "s").await?;
    ///     let opts = StreamOptions::default();
    ///     let mut stream = array.read_stream_as::<VarLenBuffer, _>([vec![2..4], vec![0..1]], &BufferPrototype::cpu(), &opts)?;
    ///     let mut got = Vec::new();
    ///     while let Some(batch) = stream.next().await {
    ///         got.push(batch?.iter_str()?.collect::<zarrbuf::Result<Vec<String>>>()?);
    ///     }
    ///     assert_eq!(got, [vec!["c", "d"], vec!["a"]]);
    ///     Ok::<(), zarrbuf::Error>(())
    /// })?;
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(()) }
    /// ```
    fn read_stream_as<T: ReadOutput, I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Result<ReadStream<T>>
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static;

    /// The array's data type as zarrbuf names it.
    fn zarrbuf_data_type(&self) -> Result<DataType>;
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> ArrayReadAsyncExt for Array<S> {
    fn read_as_opt_async<T: ReadOutput>(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<T>> + Send {
        T::read_async(self, subset.to_vec(), proto.clone(), opts.clone())
    }

    fn read_all_as_opt_async<T: ReadOutput>(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<T>> + Send {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        T::read_async(self, subset, proto.clone(), opts.clone())
    }

    fn read_stream_as<T: ReadOutput, I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Result<ReadStream<T>>
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static,
    {
        T::stream_async(self, Box::new(subsets.into_iter()), proto, opts)
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
        read_into_async(self, subset.to_vec(), out.clone(), opts.clone())
    }
}
