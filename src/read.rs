//! Reading any subset of a zarrs `Array` into any [`BufferPrototype`].

use crate::buffer::BufferPrototype;
use crate::buffer::{MultiNDBuffer, MultiPrototype, NDBuffer, Placement};
use crate::dtype::{ByteOrder, DataType, Order};
use crate::error::{Error, Result};
use crate::memory::with_decode_target;
use crate::options::{PipelineMode, ReadOptions, StreamOptions};
use crate::pipeline::{InnerFetch, fetch_unit, run_staged};
use crate::read_stream::BlockingReadStream;
use crate::zarr::{
    ShardIndex, UnitSource, check_subset, chunk_error, data_type_of, guard_zarrs, plan_chunks,
    plan_units, zarr_error,
};
use std::ops::Range;
use zarrs::array::{Array, ArrayBytes, ArraySubset};
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
    fn read_all(&self, proto: &BufferPrototype) -> Result<NDBuffer>;

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

    /// Reads `subset` onto several devices, one part per prototype of `proto`:
    ///
    /// - [`Placement::Replicate`]: the whole subset on every device. It is read (fetched
    ///   and decoded) once, into the first part, and copied to the others in parallel.
    /// - [`Placement::Split { axis }`](Placement::Split): the subset cut along `axis` at
    ///   chunk boundaries (shard boundaries for sharded arrays) into consecutive partitions
    ///   balanced by extent, each read by its own pipeline on its own device, all in
    ///   parallel; `opts.concurrency` is shared out between them and `opts.progress` sees
    ///   the sum. A device gets an empty part when there are fewer chunks than devices.
    ///
    /// Each pipeline stages through up to `opts.staging_bytes` of its own.
    ///
    /// # Errors
    /// What a read reports, for the first part that failed; `InvalidArgument` for an axis
    /// the subset does not have.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use zarrbuf::{ArrayReadExt, ArrayWriteExt, MultiPrototype, NDBuffer, Placement, ReadOptions};
    /// use zarrs::array::{ArrayBuilder, data_type};
    /// let array = ArrayBuilder::new(vec![8, 2], vec![2, 2], data_type::uint16(), 0u16)
    ///     .build(Arc::new(zarrs::storage::store::MemoryStore::new()), "/a")
    ///     .map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
    /// array.write_all(&NDBuffer::from_vec((0..16u16).collect::<Vec<_>>(), &[8, 2])?)?;
    /// // Two host memories stand in for two GPUs (BufferPrototype::cuda_devices(&[0, 1])).
    /// let parts = array.read_multi(&[1..8, 0..2], &MultiPrototype::host(2)?,
    ///     Placement::Split { axis: 0 }, &ReadOptions::default())?;
    /// assert_eq!(parts.subset(0), Some(&[1..4, 0..2][..])); // cut at a chunk boundary
    /// assert_eq!(parts[1].to_vec::<u16>()?, (8..16).collect::<Vec<_>>());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    fn read_multi(
        &self,
        subset: &[Range<u64>],
        proto: &MultiPrototype,
        placement: Placement,
        opts: &ReadOptions,
    ) -> Result<MultiNDBuffer>;

    /// Reads many subsets (a training loop's minibatches) ahead of the caller, at most
    /// `opts.prefetch` at once, and yields their NDBuffers in order as a blocking iterator;
    /// chunks shared by subsets in flight are fetched once. A failed subset is an `Err` item
    /// ([`Error::StreamItem`]) and the iterator goes on; dropping it cancels the reads in
    /// flight. See [`crate::ReadStream`] for the design and the async twin
    /// [`crate::ArrayReadAsyncExt::read_stream`].
    ///
    /// ```
    /// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer, StreamOptions};
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
        let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
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

    fn read_all(&self, proto: &BufferPrototype) -> Result<NDBuffer> {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        self.read(&subset, proto)
    }

    fn read_into_opt(
        &self,
        subset: &[Range<u64>],
        out: &mut NDBuffer,
        opts: &ReadOptions,
    ) -> Result<()> {
        check_subset(self.shape(), subset, self.path().as_str())?;
        let dtype = data_type_of(self)?;
        if out.dtype() != dtype {
            return Err(Error::DataType(format!(
                "array {} holds {dtype} but the output NDBuffer holds {}",
                self.path(),
                out.dtype()
            )));
        }
        let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
        if out.shape() != shape.as_slice() {
            return Err(Error::ShapeMismatch(format!(
                "the subset has shape {shape:?} but the output NDBuffer has shape {:?}",
                out.shape()
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        let direct = opts.mode == PipelineMode::Auto
            && out.buffer().is_host_accessible()
            && out.byte_order() == ByteOrder::native();
        if direct && let Some(window) = out.c_window() {
            return read_direct(self, subset, out, window, opts);
        }
        read_staged(self, subset, out, opts)
    }

    fn read_multi(
        &self,
        subset: &[Range<u64>],
        proto: &MultiPrototype,
        placement: Placement,
        opts: &ReadOptions,
    ) -> Result<MultiNDBuffer> {
        crate::read_multi::read_multi(self, subset, proto, placement, opts)
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
        crate::read_stream::sync_stream(self, subsets, proto, opts)
    }

    fn zarrbuf_data_type(&self) -> Result<DataType> {
        data_type_of(self)
    }
}

/// CPU path: zarrs decodes straight into the output (no temporaries).
fn read_direct<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    window: crate::buffer::CWindow,
    opts: &ReadOptions,
) -> Result<()> {
    let elem = out.dtype().size();
    let region = out.buffer().try_slice(window.byte_start..window.byte_end)?;
    let request = ArraySubset::new_with_ranges(subset);
    let codec_opts = opts.codec_options();
    check_shard_indexes(array, subset, elem, opts)?;
    let result = region.with_host_mut(|bytes| {
        with_decode_target(
            bytes,
            elem,
            &window.parent_shape,
            window.window.clone(),
            |target| {
                guard_zarrs(array, || {
                    array
                        .retrieve_array_subset_into_opt(&request, target, &codec_opts)
                        .map_err(|e| zarr_error(array, e))
                })
            },
        )
    });
    if let Some(cb) = &opts.progress {
        let units = plan_units(array, subset, elem)
            .map(|p| p.units.len())
            .unwrap_or(0);
        cb(crate::options::Progress {
            chunks_done: units,
            chunks_total: units,
            bytes_done: out.nbytes() as u64,
        });
    }
    result.map_err(|e| locate_failing_chunk(array, subset, elem).unwrap_or(e))
}

/// For sharded arrays, reads (and caches in the OS) the index of every shard the request
/// touches and refuses damaged ones before zarrs reads through them: zarrs trusts index
/// entries, and a damaged one makes it overflow or allocate whatever size the entry claims.
fn check_shard_indexes<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    elem: usize,
    opts: &ReadOptions,
) -> Result<()> {
    if plan_units(array, subset, elem)?.source != UnitSource::Subchunk {
        return Ok(());
    }
    let shards = ShardIndex::new(array, opts.validate_checksums)?;
    let storage = array.storage();
    for shard in plan_chunks(array, subset)? {
        let key = array.chunk_key(&shard.indices);
        let index = shards
            .index_of(&shard.indices, |range| {
                storage.get_partial(&key, range).map_err(|e| e.to_string())
            })
            .map_err(|e| chunk_error(array, &shard.indices, e))?;
        if let Some(index) = index {
            shards
                .check(&index)
                .map_err(|e| chunk_error(array, &shard.indices, e))?;
        }
    }
    Ok(())
}

/// After a failed whole-subset read, decodes chunk by chunk to name the one at fault.
fn locate_failing_chunk<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    elem: usize,
) -> Option<Error> {
    let plan = plan_units(array, subset, elem).ok()?;
    let grid_units = if plan.source == UnitSource::Subchunk {
        // Shards are the stored objects; name the shard.
        plan_chunks(array, subset).ok()?
    } else {
        plan.units
    };
    grid_units.iter().find_map(|u| {
        guard_zarrs(array, || {
            array
                .retrieve_chunk_if_exists::<ArrayBytes<'static>>(&u.indices)
                .map(|_| ())
                .map_err(|e| chunk_error(array, &u.indices, e))
        })
        .err()
    })
}

/// Device (or forced) path: the staged pipeline.
fn read_staged<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    opts: &ReadOptions,
) -> Result<()> {
    // Sync stores are local: parallel per-chunk reads.
    run_staged(
        array,
        subset,
        out,
        opts,
        InnerFetch::PerChunk,
        &|plan, shards, unit| fetch_unit(array, plan, shards, unit),
    )
}
