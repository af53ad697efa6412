//! Writing any subset of a zarrs `Array` from an [`NDBuffer`] in any memory.

use super::target::{Role, check_target};
use crate::buffer::{BufferPrototype, NDBuffer};
use crate::cache::invalidate_written;
use crate::data_types::{ByteOrder, DataType, Order};
use crate::errors::Result;
use crate::options::{Durability, PipelineMode, WriteOptions};
use crate::pipeline::{StoreQueue, write_staged};
use crate::stores::SyncedWrites;
use crate::zarr::{ChainPlan, ShardEncoder, fill_bytes, forget_written_shard_indexes, zarr_error};
use std::ops::Range;
use zarrs::array::{Array, ArrayBytes, ArraySubset};
use zarrs::storage::ReadableWritableStorageTraits;

/// Writing zarrbuf buffers into zarrs arrays: an extension trait on `zarrs::array::Array`.
///
/// Host data spanning several chunks (shards) of a chain zarrbuf encodes itself goes through
/// the staged write pipeline on the host: each worker gathers a chunk and compresses it
/// while store threads wait on the store; whole shards are not gathered at all, their inner
/// chunks are cut straight out of the caller's array. Other host data is handed to zarrs
/// without copies.
/// Device data is gathered, transposed and byte-swapped on the device, copied into pinned
/// staging, then compressed and stored on the CPU (or compressed on the device, see
/// `Compress`). Chunks partly covered by the subset are read, merged and written back. Each
/// chunk is stored on its own, so a failure leaves every chunk stored before it intact.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
///
/// let array = ArrayBuilder::new(vec![3, 4], vec![2, 2], data_type::int16(), -1i16)
///     .build(Arc::new(MemoryStore::new()), "/a")
///     .map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// array.write(&[1..2, 1..3], &NDBuffer::from_vec(vec![5i16, 6], &[1, 2])?)?;
/// let all = array.read_all(&BufferPrototype::cpu())?;
/// assert_eq!(all.to_vec::<i16>()?, vec![-1, -1, -1, -1, -1, 5, 6, -1, -1, -1, -1, -1]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub trait ArrayWriteExt {
    /// Writes `data` (shape of `subset`, the array's data type, any memory) into `subset`.
    fn write(&self, subset: &[Range<u64>], data: &NDBuffer) -> Result<()> {
        self.write_opt(subset, data, &WriteOptions::default())
    }

    /// [`write`](Self::write) with options.
    fn write_opt(&self, subset: &[Range<u64>], data: &NDBuffer, opts: &WriteOptions) -> Result<()>;

    /// Writes `data` (the array's shape) into the whole array.
    fn write_all(&self, data: &NDBuffer) -> Result<()> {
        self.write_all_opt(data, &WriteOptions::default())
    }

    /// [`write_all`](Self::write_all) with options.
    fn write_all_opt(&self, data: &NDBuffer, opts: &WriteOptions) -> Result<()>;
}

impl<S: ?Sized + ReadableWritableStorageTraits + 'static> ArrayWriteExt for Array<S> {
    fn write_opt(&self, subset: &[Range<u64>], data: &NDBuffer, opts: &WriteOptions) -> Result<()> {
        let _synced = (opts.durability == Durability::Sync).then(SyncedWrites::begin);
        let dtype = check_target(self, subset, data, Role::Data)?;
        if data.is_empty() {
            return Ok(());
        }
        // Decoded-chunk caches drop what this write replaces, before and after (see
        // `invalidate_written`).
        invalidate_written(self, subset);
        let result = write_routed(self, subset, data, dtype, opts, None);
        // Shards stored (some, if it failed) no longer have the indexes read before.
        forget_written_shard_indexes(self, subset);
        invalidate_written(self, subset);
        result
    }

    fn write_all_opt(&self, data: &NDBuffer, opts: &WriteOptions) -> Result<()> {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        self.write_opt(&subset, data, opts)
    }
}

/// The write of a checked, non-empty target, by the route `opts.mode` picks.
fn write_routed<S: ?Sized + ReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    data: &NDBuffer,
    dtype: DataType,
    opts: &WriteOptions,
    shared_stores: Option<&StoreQueue>,
) -> Result<()> {
    let direct = match opts.mode {
        PipelineMode::Direct => true,
        PipelineMode::Auto => !staged_beats_direct(array, subset, dtype),
        PipelineMode::Staged => false,
    };
    if direct && data.buffer().is_host_accessible() {
        return write_direct(array, subset, data, opts);
    }
    write_staged(array, array, subset, data, opts, shared_stores)
}

/// One block of a copy: [`ArrayWriteExt::write_opt`]'s write of `data` into `subset`, whose
/// whole chunks (a copy's blocks are whole destination chunks, each written by one block
/// only) are queued on `stores` when the write takes the staged route, where the store
/// threads of the whole copy store them while the next block is compressed. The copy
/// finishes the queue, then drops the caches' and shard indexes' view of what it wrote
/// ([`forget_copied`]).
pub(crate) fn write_block<S: ?Sized + ReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    data: &NDBuffer,
    opts: &WriteOptions,
    stores: &StoreQueue,
) -> Result<()> {
    let dtype = check_target(array, subset, data, Role::Data)?;
    if data.is_empty() {
        return Ok(());
    }
    invalidate_written(array, subset);
    write_routed(array, subset, data, dtype, opts, Some(stores))
}

/// After a copy's blocks ([`write_block`]) are all stored (or it failed): decoded-chunk
/// caches and shard indexes drop what it wrote into `subset`.
pub(crate) fn forget_copied<S: ?Sized + Send + Sync + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
) {
    forget_written_shard_indexes(array, subset);
    invalidate_written(array, subset);
}

/// Whether an `Auto` write of host data takes the staged pipeline: for chains zarrbuf encodes
/// itself over more than one chunk (shard). zarrs' filesystem store syncs every chunk file
/// it writes, and zarrs compresses and stores each chunk on the same thread; the staged
/// pipeline stores on separate threads while its workers compress, and assembles whole
/// shards with their inner chunks compressed in parallel ([`ShardEncoder`]). Measured on the
/// 2-core development machine (`zarrbuf bench-write --shards 256`, 256 MiB float32, 64³
/// chunks, 256³ shards): staged 1.32–1.48× zarrs with zstd 1 and 1.5–1.8× uncompressed;
/// sharded 1.1× (zstd 1) and 1.7× (uncompressed) with the shard encoder, level without it.
fn staged_beats_direct<S: ?Sized>(
    array: &Array<S>,
    subset: &[Range<u64>],
    dtype: DataType,
) -> bool {
    let plain = matches!(
        ChainPlan::new(array.codecs(), dtype.size(), array.dimensionality()),
        Ok(Some(_))
    );
    let sharded_plain = || {
        matches!(
            ShardEncoder::new(array, fill_bytes(array), dtype.swap_unit()),
            Ok(Some(_))
        )
    };
    (plain || sharded_plain())
        && array
            .chunks_in_array_subset(&ArraySubset::new_with_ranges(subset))
            .ok()
            .flatten()
            .is_some_and(|chunks| chunks.num_elements() > 1)
}

/// Host data: zarrs encodes straight from the caller's bytes when they are C-contiguous.
fn write_direct<S: ?Sized + ReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    data: &NDBuffer,
    opts: &WriteOptions,
) -> Result<()> {
    let contiguous = if data.is_c_contiguous() && data.byte_order() == ByteOrder::native() {
        data.clone()
    } else {
        data.copy_to(&BufferPrototype::cpu(), Order::C)?
    };
    let bytes = contiguous.buffer().as_host_bytes()?;
    let start = contiguous.offset();
    let body = &bytes[start..start + contiguous.nbytes()];
    // zarrs encodes the chunks in parallel: on the process's pool (see `thread_pool`).
    crate::thread_pool::install(|| {
        array.store_array_subset_opt(
            &ArraySubset::new_with_ranges(subset),
            ArrayBytes::from(body),
            &opts.codec_options(),
        )
    })
    .map_err(|e| zarr_error(array, e))
}
