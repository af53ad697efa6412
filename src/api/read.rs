//! Reading any subset of a zarrs `Array` into any [`BufferPrototype`].

use super::read_output::{ReadOutput, read_into_sync};
use super::read_stream::BlockingReadStream;
use crate::buffer::{BufferPrototype, NDBuffer};
use crate::data_types::DataType;
use crate::errors::Result;
use crate::options::{ReadOptions, StreamOptions};
use crate::zarr::data_type_of;
use std::ops::Range;
use zarrs::array::Array;
use zarrs::storage::ReadableStorageTraits;

/// Reading zarrs arrays into zarrbuf buffers: an extension trait on `zarrs::array::Array`.
///
/// Subsets are half-open ranges, one per dimension. Outputs can live in any memory; CPU
/// outputs are decoded in place by zarrs, device outputs go through the staged pipeline
/// (CPU decompression, pinned staging, device byte swap/transpose/scatter). The `read_as`
/// methods read into the output kind the caller names ([`ReadOutput`]): an `NDBuffer`, or a
/// [`VarLenBuffer`](crate::VarLenBuffer) for variable-length strings and bytes.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
///
/// let store = Arc::new(MemoryStore::new());
/// let array = ArrayBuilder::new(vec![4, 6], vec![2, 3], data_type::float32(), 0.0f32)
///     .build(store, "/x").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// let data = NDBuffer::from_vec((0..24).map(|v| v as f32).collect::<Vec<_>>(), &[4, 6])?;
/// array.write_all(&data)?;
/// let part = array.read(&[1..3, 2..5], &BufferPrototype::cpu())?;
/// assert_eq!(part.to_vec::<f32>()?, vec![8.0, 9.0, 10.0, 14.0, 15.0, 16.0]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub trait ArrayReadExt {
    /// Reads `subset` into a new C-order NDBuffer made by `proto`.
    fn read(&self, subset: &[Range<u64>], proto: &BufferPrototype) -> Result<NDBuffer> {
        self.read_opt(subset, proto, &ReadOptions::default())
    }

    /// [`read`](Self::read) with options.
    fn read_opt(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<NDBuffer> {
        self.read_as_opt(subset, proto, opts)
    }

    /// Reads the whole array into a new NDBuffer made by `proto`.
    fn read_all(&self, proto: &BufferPrototype) -> Result<NDBuffer> {
        self.read_all_opt(proto, &ReadOptions::default())
    }

    /// [`read_all`](Self::read_all) with options.
    fn read_all_opt(&self, proto: &BufferPrototype, opts: &ReadOptions) -> Result<NDBuffer> {
        self.read_all_as_opt(proto, opts)
    }

    /// Reads `subset` into a new output of the caller's kind `T` made by `proto`: an
    /// [`NDBuffer`] (C order; the same as [`read`](Self::read)) for arrays of fixed-size
    /// elements, a [`VarLenBuffer`](crate::VarLenBuffer) (elements in C order of the
    /// subset) for variable-length strings and bytes. See [`ReadOutput`] for an example.
    ///
    /// # Errors
    /// Those of [`read`](Self::read); asking for the other kind than the array holds is
    /// `Unsupported` (an `NDBuffer` of a variable-length array) or `DataType` (a
    /// `VarLenBuffer` of a fixed-size one), naming the call to make instead.
    fn read_as<T: ReadOutput>(&self, subset: &[Range<u64>], proto: &BufferPrototype) -> Result<T> {
        self.read_as_opt(subset, proto, &ReadOptions::default())
    }

    /// [`read_as`](Self::read_as) with options. Into a `VarLenBuffer`, `validate_checksums`,
    /// `max_bytes` (the limit on its offsets and values together), `progress` (once per
    /// chunk decoded), `concurrency` (the decoding threads: a pool of that size for this
    /// read; rayon's global pool by default) and the fetch options apply; the staging and
    /// route options are for fixed-size reads and do not change it.
    fn read_as_opt<T: ReadOutput>(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<T>;

    /// Reads the whole array into a new output of the caller's kind `T` made by `proto`
    /// (see [`read_as`](Self::read_as)).
    fn read_all_as<T: ReadOutput>(&self, proto: &BufferPrototype) -> Result<T> {
        self.read_all_as_opt(proto, &ReadOptions::default())
    }

    /// [`read_all_as`](Self::read_all_as) with options.
    fn read_all_as_opt<T: ReadOutput>(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<T>;

    /// Reads `subset` into `out` (any memory; may be a strided view of a larger NDBuffer;
    /// its shape must be the subset's shape and its data type the array's).
    fn read_into(&self, subset: &[Range<u64>], out: &mut NDBuffer) -> Result<()> {
        self.read_into_opt(subset, out, &ReadOptions::default())
    }

    /// [`read_into`](Self::read_into) with options.
    fn read_into_opt(
        &self,
        subset: &[Range<u64>],
        out: &mut NDBuffer,
        opts: &ReadOptions,
    ) -> Result<()>;

    /// Reads many subsets (a training loop's minibatches) ahead of the caller, at most
    /// `opts.prefetch` at once, and yields their NDBuffers in order as a blocking iterator;
    /// chunks shared by subsets in flight are fetched once. A failed subset is an `Err` item
    /// ([`Error::StreamItem`](crate::Error::StreamItem)) and the iterator goes on; dropping
    /// it cancels the reads in flight. See [`crate::stream::ReadStream`] for the design and the async twin
    /// [`crate::ArrayReadAsyncExt::read_stream`].
    ///
    /// ```
    /// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
    /// use zarrbuf::options::StreamOptions;
    /// use zarrs::array::{ArrayBuilder, data_type};
    /// let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// let array = ArrayBuilder::new(vec![100, 3], vec![10, 3], data_type::uint16(), 0u16)
    ///     .build(store, "/x").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
    /// array.write_all(&NDBuffer::from_vec((0..300u16).collect::<Vec<_>>(), &[100, 3])?)?;
    /// let batches = (0..10u64).rev().map(|b| vec![b * 10..b * 10 + 10, 0..3]);
    /// let opts = StreamOptions::default().with_prefetch(3);
    /// let mut seen = 0;
    /// for (k, batch) in array.read_stream(batches, &BufferPrototype::cpu(), &opts).enumerate() {
    ///     let batch = batch?;
    ///     assert_eq!(batch.shape(), &[10, 3]);
    ///     assert_eq!(batch.to_vec::<u16>()?[0], ((9 - k) * 30) as u16);
    ///     seen += 1;
    /// }
    /// assert_eq!(seen, 10);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    fn read_stream<I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> BlockingReadStream
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static,
    {
        self.read_stream_as::<NDBuffer, I>(subsets, proto, opts)
    }

    /// [`read_stream`](Self::read_stream) into outputs of the caller's kind `T` (see
    /// [`ReadOutput`]): `NDBuffer`s, or [`VarLenBuffer`](crate::VarLenBuffer)s for arrays of
    /// variable-length strings and bytes. One engine serves both: the same order, bound,
    /// chunk sharing, errors and cancellation.
    ///
    /// ```
    /// use zarrbuf::{ArrayReadExt, BufferPrototype, VarLenBuffer};
    /// use zarrbuf::options::StreamOptions;
    /// use zarrs::array::{ArrayBuilder, data_type};
    /// let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// let array = ArrayBuilder::new(vec![6], vec![3], data_type::string(), "")
    ///     .build(store, "/s").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
    /// array.store_chunk(&[1], vec!["x", "yy", "zzz"]).map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
    /// let batches = [vec![4..6], vec![0..9], vec![0..2]];
    /// let items: Vec<_> = array
    ///     .read_stream_as::<VarLenBuffer, _>(batches, &BufferPrototype::cpu(), &StreamOptions::default())
    ///     .collect();
    /// let strs = |b: &VarLenBuffer| b.iter_str()?.collect::<zarrbuf::Result<Vec<String>>>();
    /// assert_eq!(strs(items[0].as_ref().unwrap())?, ["yy", "zzz"]);
    /// let e = items[1].as_ref().unwrap_err(); // out of bounds: named, and the stream goes on
    /// assert!(e.to_string().contains("item 1 (subset [0..9])"), "{e}");
    /// assert_eq!(strs(items[2].as_ref().unwrap())?, ["", ""]); // not stored: the fill value
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    fn read_stream_as<T: ReadOutput, I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> BlockingReadStream<T>
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static;

    /// The array's data type as zarrbuf names it.
    fn zarrbuf_data_type(&self) -> Result<DataType>;
}

impl<S: ?Sized + ReadableStorageTraits + 'static> ArrayReadExt for Array<S> {
    fn read_as_opt<T: ReadOutput>(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<T> {
        T::read_sync(self, subset, proto, opts)
    }

    fn read_all_as_opt<T: ReadOutput>(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<T> {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        T::read_sync(self, &subset, proto, opts)
    }

    fn read_into_opt(
        &self,
        subset: &[Range<u64>],
        out: &mut NDBuffer,
        opts: &ReadOptions,
    ) -> Result<()> {
        read_into_sync(self, subset, out, opts)
    }

    fn read_stream_as<T: ReadOutput, I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> BlockingReadStream<T>
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static,
    {
        T::stream_sync(self, Box::new(subsets.into_iter()), proto, opts).blocking()
    }

    fn zarrbuf_data_type(&self) -> Result<DataType> {
        data_type_of(self)
    }
}
