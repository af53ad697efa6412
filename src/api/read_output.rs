//! What a read returns, chosen by the caller's type: [`ReadOutput`], implemented by
//! [`NDBuffer`] (fixed-size elements, through the read core) and [`VarLenBuffer`]
//! (variable-length strings or bytes, through `pipeline::read_varlen`). The traits'
//! `read_as` and `read_stream_as` methods dispatch here; nothing here decodes.

use super::read_stream::ReadStream;
use super::target::{Role, check_target, subset_shape};
use crate::buffer::{BufferPrototype, NDBuffer, VarLenBuffer};
use crate::data_types::Order;
use crate::errors::{Error, Result};
use crate::options::{ReadOptions, StreamOptions};
use crate::pipeline::{
    AsyncStreamStore, AsyncUnits, Cancel, FetchStage, FixedSource, InnerFetch, StreamReads,
    Subsets, SyncStreamStore, VarLenRead, VarLenSource, check_output_size, read_array,
    read_array_async, read_varlen,
};
use crate::zarr::{check_subset, data_type_of};
use std::ops::Range;
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

/// The kind of buffer a read makes, chosen by the caller's type as zarrs chooses its
/// outputs (`FromArrayBytes`): [`NDBuffer`] for arrays of fixed-size elements (numbers,
/// fixed-width strings, records), [`VarLenBuffer`] for variable-length strings and bytes
/// (zarr v3 `string` and `variable_length_bytes`, v2 object arrays with `VLenUTF8` or
/// `VLenBytes`). Used by [`crate::ArrayReadExt::read_as`] and
/// [`crate::ArrayReadAsyncExt::read_as_async`] and their `_opt` and `_all` forms, and by the
/// read streams' `read_stream_as`.
///
/// The trait is sealed: only these two types implement it. Asking an array for the other
/// kind than it holds is an error that names the call to make instead.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer, VarLenBuffer};
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
///
/// let err = |e: &dyn std::fmt::Display| zarrbuf::Error::InvalidArgument(e.to_string());
/// let store = Arc::new(MemoryStore::new());
/// let numbers = ArrayBuilder::new(vec![4], vec![2], data_type::uint8(), 0u8)
///     .build(store.clone(), "/numbers").map_err(|e| err(&e))?;
/// numbers.write_all(&NDBuffer::from_vec(vec![1u8, 2, 3, 4], &[4])?)?;
/// let names = ArrayBuilder::new(vec![3], vec![2], data_type::string(), "")
///     .build(store, "/names").map_err(|e| err(&e))?;
/// names.store_chunk(&[0], vec!["ab", "αβ"]).map_err(|e| err(&e))?;
///
/// let proto = BufferPrototype::cpu();
/// let n: NDBuffer = numbers.read_as(&[1..3], &proto)?;
/// assert_eq!(n.to_vec::<u8>()?, [2, 3]);
/// let s = names.read_all_as::<VarLenBuffer>(&proto)?;
/// let s: Vec<String> = s.iter_str()?.collect::<zarrbuf::Result<_>>()?;
/// assert_eq!(s, ["ab", "αβ", ""]); // element 2 is not stored: the fill value
///
/// // The other kind is an error that says which to ask for.
/// let e = names.read_as::<NDBuffer>(&[0..1], &proto).unwrap_err();
/// assert!(e.to_string().contains("read_as::<VarLenBuffer>"), "{e}");
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub trait ReadOutput: sealed::Sealed + Sized + Send + 'static {}

impl ReadOutput for NDBuffer {}
impl ReadOutput for VarLenBuffer {}

pub(super) mod sealed {
    use super::{BufferPrototype, Range, ReadOptions, ReadStream, Result, StreamOptions, Subsets};
    use zarrs::array::Array;
    use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

    /// The reads behind [`super::ReadOutput`], per output kind: one subset (sync, async)
    /// and a read stream (sync, async), whose one engine is given this kind's reads.
    /// Public in a private module, so callers outside the crate can neither implement
    /// [`super::ReadOutput`] nor call these.
    pub trait Sealed: Sized {
        /// Reads `subset` of a sync array into a new output made by `proto`.
        fn read_sync<S: ?Sized + ReadableStorageTraits + 'static>(
            array: &Array<S>,
            subset: &[Range<u64>],
            proto: &BufferPrototype,
            opts: &ReadOptions,
        ) -> Result<Self>;

        /// Reads `subset` of an async array into a new output made by `proto`.
        fn read_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
            array: &Array<S>,
            subset: Vec<Range<u64>>,
            proto: BufferPrototype,
            opts: ReadOptions,
        ) -> impl Future<Output = Result<Self>> + Send;

        /// The read stream of `subsets` of a sync array (reads on plain threads).
        fn stream_sync<S: ?Sized + ReadableStorageTraits + 'static>(
            array: &Array<S>,
            subsets: Subsets,
            proto: &BufferPrototype,
            opts: &StreamOptions,
        ) -> ReadStream<Self>;

        /// The read stream of `subsets` of an async array (reads on the blocking pool of
        /// the tokio runtime this is called in; an error outside one).
        fn stream_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
            array: &Array<S>,
            subsets: Subsets,
            proto: &BufferPrototype,
            opts: &StreamOptions,
        ) -> Result<ReadStream<Self>>;
    }
}

impl sealed::Sealed for NDBuffer {
    fn read_sync<S: ?Sized + ReadableStorageTraits + 'static>(
        array: &Array<S>,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<Self> {
        let mut out = new_output(array, subset, proto, opts)?;
        read_into_sync(array, subset, &mut out, opts)?;
        Ok(out)
    }

    async fn read_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
        array: &Array<S>,
        subset: Vec<Range<u64>>,
        proto: BufferPrototype,
        opts: ReadOptions,
    ) -> Result<Self> {
        let out = new_output(array, &subset, &proto, &opts)?;
        read_into_async(array, subset, out.clone(), opts).await?;
        Ok(out)
    }

    fn stream_sync<S: ?Sized + ReadableStorageTraits + 'static>(
        array: &Array<S>,
        subsets: Subsets,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> ReadStream<Self> {
        let source = FixedSource::new(SyncStreamStore::new(array), proto, &opts.read);
        ReadStream::new(StreamReads::new(source, subsets, opts))
    }

    fn stream_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
        array: &Array<S>,
        subsets: Subsets,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Result<ReadStream<Self>> {
        let source = FixedSource::new(AsyncStreamStore::new(array)?, proto, &opts.read);
        Ok(ReadStream::new(StreamReads::new(source, subsets, opts)))
    }
}

impl sealed::Sealed for VarLenBuffer {
    fn read_sync<S: ?Sized + ReadableStorageTraits + 'static>(
        array: &Array<S>,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<Self> {
        check_subset(array.shape(), subset, array.path().as_str())?;
        read_varlen(
            array,
            subset,
            proto,
            opts,
            InnerFetch::for_store(array),
            &FetchStage::for_sync_store(array),
        )
    }

    async fn read_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
        array: &Array<S>,
        subset: Vec<Range<u64>>,
        proto: BufferPrototype,
        opts: ReadOptions,
    ) -> Result<Self> {
        check_subset(array.shape(), &subset, array.path().as_str())?;
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::InvalidArgument("async reads need a tokio runtime (call them inside one)".into())
        })?;
        let owned = Arc::new(array.with_storage(array.storage()));
        let inner_fetch = InnerFetch::for_async_store(array);
        let read = VarLenRead::new(array, &subset, &proto, &opts, inner_fetch)?;
        // Dropping this future cancels the blocking half (its requests in flight
        // included) and waits until it has stopped.
        let (_stop, finish) = Cancel::pair();
        let task = tokio::task::spawn_blocking(move || {
            let units = AsyncUnits {
                array: owned.as_ref(),
                handle: &handle,
                cancel: finish.cancel(),
                what: "read",
            };
            read.run(&owned, &proto, &opts, &FetchStage::for_async_store(&units))
        });
        task.await
            .map_err(|e| Error::Cancelled(format!("the read task stopped: {e}")))?
    }

    fn stream_sync<S: ?Sized + ReadableStorageTraits + 'static>(
        array: &Array<S>,
        subsets: Subsets,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> ReadStream<Self> {
        let source = VarLenSource::new(SyncStreamStore::new(array), proto, &opts.read);
        ReadStream::new(StreamReads::new(source, subsets, opts))
    }

    fn stream_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
        array: &Array<S>,
        subsets: Subsets,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Result<ReadStream<Self>> {
        let source = VarLenSource::new(AsyncStreamStore::new(array)?, proto, &opts.read);
        Ok(ReadStream::new(StreamReads::new(source, subsets, opts)))
    }
}

/// A new C-order output for a fixed-size read of `subset`, its size checked against the
/// options, ordered after the work enqueued so far on the prototype's stream. Its elements
/// are unwritten: the read that follows writes every one, and on an error it is dropped,
/// never returned.
fn new_output<S: ?Sized>(
    array: &Array<S>,
    subset: &[Range<u64>],
    proto: &BufferPrototype,
    opts: &ReadOptions,
) -> Result<NDBuffer> {
    check_subset(array.shape(), subset, array.path().as_str())?;
    let dtype = data_type_of(array)?;
    check_output_size(
        &format!("array {}", array.path()),
        subset,
        dtype,
        proto,
        opts,
    )?;
    let out = NDBuffer::empty_unwritten(&subset_shape(subset), dtype, Order::C, proto)?;
    if let Some(s) = proto.stream() {
        // The read is ordered after the work enqueued on the prototype's stream so far;
        // it is done before the read returns, so work enqueued later comes after it.
        s.synchronize()?;
    }
    Ok(out)
}

/// Reads `subset` of a sync array into `out` (`ArrayReadExt::read_into_opt`): the read
/// core chooses the route (cache, small, zarrs' decode-into, staged).
pub(super) fn read_into_sync<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &mut NDBuffer,
    opts: &ReadOptions,
) -> Result<()> {
    check_target(array, subset, out, Role::Output)?;
    if out.is_empty() {
        return Ok(());
    }
    read_array(array, subset, out, opts)
}

/// Reads `subset` of an async array into `out` (`ArrayReadAsyncExt::read_into_opt_async`):
/// the read core chooses the route (cache, small, staged).
pub(super) async fn read_into_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: Vec<Range<u64>>,
    out: NDBuffer,
    opts: ReadOptions,
) -> Result<()> {
    check_target(array, &subset, &out, Role::Output)?;
    if out.is_empty() {
        return Ok(());
    }
    let array = Arc::new(array.with_storage(array.storage()));
    read_array_async(&array, &subset, &out, &opts).await
}
