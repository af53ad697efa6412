//! The deprecated `read_varlen*` wrappers of `read_as_async` and `read_stream_as` for
//! variable-length arrays (strings, byte strings) over async stores.
#![allow(deprecated)] // (VarLenReadStream, the deprecated stream type, is named here)

use super::read_async::ArrayReadAsyncExt;
use super::read_stream::VarLenReadStream;
use crate::buffer::{BufferPrototype, VarLenBuffer};
use crate::errors::Result;
use crate::options::{ReadOptions, StreamOptions};
use std::ops::Range;
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

/// The async twin of [`crate::ArrayReadVarLenExt`], for arrays over async stores (e.g.
/// [`crate::open_async`]): its read streams. One subset is read with
/// [`crate::ArrayReadAsyncExt::read_as_async`]`::<VarLenBuffer>`: the read runs on a
/// blocking thread and rayon's pool, and its chunks are fetched on the tokio runtime ahead
/// of the decoders, up to [`ReadOptions::io_concurrency`] requests and the staging budget
/// in bytes, as fixed-size reads are. Dropping the future cancels the requests in flight.
/// The futures are `Send`. Every method here is a deprecated wrapper: of `read_as_async`,
/// and of `read_stream_as::<VarLenBuffer, _>` for the stream.
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

    /// The read stream of an async store's subsets as a blocking iterator:
    /// [`crate::ArrayReadAsyncExt::read_stream_as`]`::<VarLenBuffer, _>` then
    /// [`blocking`](crate::stream::ReadStream::blocking).
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadAsyncExt::read_stream_as::<VarLenBuffer, _>; removed in 0.3.0"
    )]
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
        Ok(self
            .read_stream_as::<VarLenBuffer, I>(subsets, proto, opts)?
            .blocking())
    }
}
