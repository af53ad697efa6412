//! Async read streams of variable-length arrays (strings, byte strings), yielding
//! [`VarLenBuffer`]s, and the deprecated `read_varlen` wrappers of `read_as_async`.

use super::read_async::ArrayReadAsyncExt;
use super::read_varlen_stream::VarLenReadStream;
use crate::buffer::{BufferPrototype, VarLenBuffer};
use crate::errors::{Error, Result};
use crate::options::{ReadOptions, StreamOptions};
use crate::pipeline::{Cancel, VarLenStreamReads};
use std::ops::Range;
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

/// The async twin of [`crate::ArrayReadVarLenExt`], for arrays over async stores (e.g.
/// [`crate::open_async`]): its read streams. One subset is read with
/// [`crate::ArrayReadAsyncExt::read_as_async`]`::<VarLenBuffer>`: the read runs on a
/// blocking thread and rayon's pool, and its chunks are fetched on the tokio runtime ahead
/// of the decoders, up to [`ReadOptions::io_concurrency`] requests and the staging budget
/// in bytes, as fixed-size reads are. Dropping the future cancels the requests in flight.
/// The futures are `Send`. The `read_varlen` methods are deprecated wrappers of `read_as`.
///
/// ```no_run
/// # async fn demo() -> zarrbuf::Result<()> {
/// use zarrbuf::{ArrayReadAsyncExt, BufferPrototype, VarLenBuffer};
/// let array = zarrbuf::open_async("https://example.org/data.zarr", "station_name").await?;
/// let names: VarLenBuffer = array.read_as_async(&[0..10], &BufferPrototype::cpu()).await?;
/// # Ok(()) }
/// ```
pub trait ArrayReadVarLenAsyncExt: Sync {
    /// Reads `subset` into a new [`VarLenBuffer`] made by `proto`.
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadAsyncExt::read_as_async::<VarLenBuffer>; removed in 0.3.0"
    )]
    fn read_varlen_async(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send {
        async move {
            let opts = ReadOptions::default();
            #[allow(deprecated)]
            self.read_varlen_opt_async(subset, proto, &opts).await
        }
    }

    /// [`read_varlen_async`](Self::read_varlen_async) with options (as
    /// [`crate::ArrayReadExt::read_as_opt`]).
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadAsyncExt::read_as_opt_async::<VarLenBuffer>; removed in 0.3.0"
    )]
    fn read_varlen_opt_async(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send;

    /// Reads the whole array into a new [`VarLenBuffer`] made by `proto`.
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadAsyncExt::read_all_as_async::<VarLenBuffer>; removed in 0.3.0"
    )]
    fn read_varlen_all_async(
        &self,
        proto: &BufferPrototype,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send {
        async move {
            let opts = ReadOptions::default();
            #[allow(deprecated)]
            self.read_varlen_all_opt_async(proto, &opts).await
        }
    }

    /// [`read_varlen_all_async`](Self::read_varlen_all_async) with options.
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadAsyncExt::read_all_as_opt_async::<VarLenBuffer>; removed in 0.3.0"
    )]
    fn read_varlen_all_opt_async(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send;

    /// The read stream of [`crate::ArrayReadVarLenExt::read_varlen_stream`] for an async
    /// store, made inside a tokio runtime (an error outside one): each subset is read as
    /// [`crate::ArrayReadAsyncExt::read_as_opt_async`] on a plain thread of its own
    /// that waits on that runtime. The stream is a blocking iterator: take its items
    /// outside async tasks (e.g. `spawn_blocking`). Dropping it abandons the fetches in
    /// flight; a read already decoding finishes on the runtime's blocking pool.
    ///
    /// ```
    /// # fn main() -> zarrbuf::Result<()> {
    /// use zarrbuf::{ArrayReadVarLenAsyncExt, ArrayWriteVarLenExt, BufferPrototype, VarLenBuffer};
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
    /// let _enter = rt.enter(); // the stream's reads wait on `rt`
    /// let array = rt.block_on(zarrbuf::open_async(&format!("file://{}", dir.display()), "s"))?;
    /// let stream = array.read_varlen_stream([vec![2..4], vec![0..1]], &BufferPrototype::cpu(), &StreamOptions::default())?;
    /// let got: Vec<Vec<String>> = stream
    ///     .map(|b| b?.iter_str()?.collect::<zarrbuf::Result<Vec<String>>>())
    ///     .collect::<zarrbuf::Result<_>>()?;
    /// assert_eq!(got, [vec!["c", "d"], vec!["a"]]);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(()) }
    /// ```
    fn read_varlen_stream<I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Result<VarLenReadStream>
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static;
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> ArrayReadVarLenAsyncExt for Array<S> {
    fn read_varlen_opt_async(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send {
        self.read_as_opt_async(subset, proto, opts)
    }

    fn read_varlen_all_opt_async(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send {
        self.read_all_as_opt_async(proto, opts)
    }

    fn read_varlen_stream<I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Result<VarLenReadStream>
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static,
    {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::InvalidArgument(
                "read streams of async arrays need a tokio runtime: make them inside one \
                 (in a task, or after `runtime.enter()`)"
                    .into(),
            )
        })?;
        let array = Arc::new(self.with_storage(self.storage()));
        let (proto, read_opts) = (proto.clone(), opts.read.clone());
        let read = move |subset: &[Range<u64>], cancel: &Cancel| {
            cancel.check("read stream")?;
            let fut = array.read_as_opt_async::<VarLenBuffer>(subset, &proto, &read_opts);
            handle.block_on(cancel.unless_dropped("read stream", fut))
        };
        let subsets = Box::new(subsets.into_iter());
        let reads = VarLenStreamReads::new(Arc::new(read), subsets, opts);
        Ok(VarLenReadStream::new(reads))
    }
}
