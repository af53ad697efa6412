//! Reading any subset of a zarrs `Array` into any [`BufferPrototype`].

use super::read_stream::BlockingReadStream;
use super::target::{Role, check_target, subset_shape};
use crate::buffer::{BufferPrototype, NDBuffer};
use crate::data_types::{DataType, Order};
use crate::errors::Result;
use crate::options::{ReadOptions, StreamOptions};
use crate::pipeline::{check_output_size, read_array};
use crate::zarr::{check_subset, data_type_of};
use std::ops::Range;
use zarrs::array::Array;
use zarrs::storage::ReadableStorageTraits;

/// Reading zarrs arrays into zarrbuf buffers: an extension trait on `zarrs::array::Array`.
///
/// Subsets are half-open ranges, one per dimension. Outputs can live in any memory; CPU
/// outputs are decoded in place by zarrs, device outputs go through the staged pipeline
/// (CPU decompression, pinned staging, device byte swap/transpose/scatter).
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
    ) -> Result<NDBuffer>;

    /// Reads the whole array into a new NDBuffer made by `proto`.
    fn read_all(&self, proto: &BufferPrototype) -> Result<NDBuffer> {
        self.read_all_opt(proto, &ReadOptions::default())
    }

    /// [`read_all`](Self::read_all) with options.
    fn read_all_opt(&self, proto: &BufferPrototype, opts: &ReadOptions) -> Result<NDBuffer>;

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
        I::IntoIter: Send + 'static;

    /// The array's data type as zarrbuf names it.
    fn zarrbuf_data_type(&self) -> Result<DataType>;
}

impl<S: ?Sized + ReadableStorageTraits + 'static> ArrayReadExt for Array<S> {
    fn read_opt(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<NDBuffer> {
        check_subset(self.shape(), subset, self.path().as_str())?;
        let dtype = data_type_of(self)?;
        check_output_size(
            &format!("array {}", self.path()),
            subset,
            dtype,
            proto,
            opts,
        )?;
        let shape = subset_shape(subset);
        // Every element is written by the read; on an error `out` is dropped, never returned.
        let mut out = NDBuffer::empty_unwritten(&shape, dtype, Order::C, proto)?;
        if let Some(s) = proto.stream() {
            // The read is ordered after the work enqueued on the prototype's stream so far;
            // it is done before this returns, so work enqueued later comes after it.
            s.synchronize()?;
        }
        self.read_into_opt(subset, &mut out, opts)?;
        Ok(out)
    }

    fn read_all_opt(&self, proto: &BufferPrototype, opts: &ReadOptions) -> Result<NDBuffer> {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        self.read_opt(&subset, proto, opts)
    }

    fn read_into_opt(
        &self,
        subset: &[Range<u64>],
        out: &mut NDBuffer,
        opts: &ReadOptions,
    ) -> Result<()> {
        check_target(self, subset, out, Role::Output)?;
        if out.is_empty() {
            return Ok(());
        }
        // The read core chooses the route (cache, small, zarrs' decode-into, staged).
        read_array(self, subset, out, opts)
    }

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
        super::read_stream::sync_stream(self, subsets, proto, opts)
    }

    fn zarrbuf_data_type(&self) -> Result<DataType> {
        data_type_of(self)
    }
}
