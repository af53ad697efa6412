//! Async reads of variable-length arrays (strings, byte strings) into a [`VarLenBuffer`].

use crate::buffer::{BufferPrototype, VarLenBuffer};
use crate::error::{Error, Result};
use crate::options::ReadOptions;
use crate::pipeline::{Cancel, fetch_unit_async, read_varlen};
use crate::store::reading_inline;
use crate::zarr::check_subset;
use std::ops::Range;
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

/// The async twin of [`crate::ArrayReadVarLenExt`], for arrays over async stores (e.g.
/// [`crate::open_async`]): fetches run on the tokio runtime, decoding on a blocking thread
/// and rayon's pool; dropping the future cancels at the next chunk. The futures are `Send`.
///
/// ```no_run
/// # async fn demo() -> zarrbuf::Result<()> {
/// use zarrbuf::{ArrayReadVarLenAsyncExt, BufferPrototype};
/// let array = zarrbuf::open_async("https://example.org/data.zarr", "station_name").await?;
/// let names = array.read_varlen_async(&[0..10], &BufferPrototype::cpu()).await?;
/// # Ok(()) }
/// ```
pub trait ArrayReadVarLenAsyncExt: Sync {
    /// Reads `subset` into a new [`VarLenBuffer`] made by `proto`.
    fn read_varlen_async(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send {
        async move {
            let opts = ReadOptions::default();
            self.read_varlen_opt_async(subset, proto, &opts).await
        }
    }

    /// [`read_varlen_async`](Self::read_varlen_async) with options (as
    /// [`crate::ArrayReadVarLenExt::read_varlen_opt`]).
    fn read_varlen_opt_async(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send;

    /// Reads the whole array into a new [`VarLenBuffer`] made by `proto`.
    fn read_varlen_all_async(
        &self,
        proto: &BufferPrototype,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send {
        async move {
            let opts = ReadOptions::default();
            self.read_varlen_all_opt_async(proto, &opts).await
        }
    }

    /// [`read_varlen_all_async`](Self::read_varlen_all_async) with options.
    fn read_varlen_all_opt_async(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send;
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> ArrayReadVarLenAsyncExt for Array<S> {
    fn read_varlen_opt_async(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send {
        let subset = subset.to_vec();
        let (proto, opts) = (proto.clone(), opts.clone());
        async move {
            check_subset(self.shape(), &subset, self.path().as_str())?;
            let array = Arc::new(self.with_storage(self.storage()));
            let handle = tokio::runtime::Handle::try_current().map_err(|_| {
                Error::InvalidArgument(
                    "async reads need a tokio runtime (call them inside one)".into(),
                )
            })?;
            // Dropping this future stops the blocking half at its next chunk.
            let (_stop, finish) = Cancel::pair();
            let task =
                tokio::task::spawn_blocking(move || {
                    let cancel = finish.cancel();
                    read_varlen(&array, &subset, &proto, &opts, &|plan, shards, unit| {
                        cancel.check("read")?;
                        // This thread waits for the fetch anyway: local files are read on it.
                        reading_inline(|| {
                            handle.block_on(cancel.unless_dropped(
                                "read",
                                fetch_unit_async(&array, plan, shards, unit),
                            ))
                        })
                    })
                });
            task.await
                .map_err(|e| Error::Cancelled(format!("the read task stopped: {e}")))?
        }
    }

    fn read_varlen_all_opt_async(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> impl Future<Output = Result<VarLenBuffer>> + Send {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        let (proto, opts) = (proto.clone(), opts.clone());
        async move { self.read_varlen_opt_async(&subset, &proto, &opts).await }
    }
}
