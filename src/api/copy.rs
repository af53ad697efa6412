//! Copying an array (or a subset) into another one block by block: the library side of
//! `zarrbuf copy`, for rechunking and recompressing.

use super::copy_options::CopyOptions;
use super::copy_read_ahead::read_ahead_of_writes;
use super::read::ArrayReadExt;
use super::write::{forget_copied, write_block};
use super::write_varlen::ArrayWriteVarLenExt;
use crate::buffer::{BufferPrototype, VarLenBuffer};
use crate::errors::{Error, Result};
use crate::options::{Durability, Progress};
use crate::pipeline::{StoreQueue, store_threads};
use crate::stores::SyncedWrites;
use crate::zarr::{
    check_subset, data_type_of, refuse_overlap, require_vlen, varlen_zarr_name, vlen_kind,
};
use std::ops::Range;
use zarrs::array::Array;
use zarrs::storage::{ReadableStorageTraits, ReadableWritableStorageTraits};

/// Bytes of a block beyond which a copy cuts more blocks: with fewer, little of the reads
/// overlaps the writes (the first block's read and the last one's write never do).
const MAX_BLOCK_BYTES: usize = 64 << 20;

/// The bytes of one block under a copy's memory budget: two are held at once (one written,
/// the next read; see `copy_read_ahead.rs`), each at most [`MAX_BLOCK_BYTES`]. A block still
/// holds at least one whole destination chunk.
fn block_bytes(memory_bytes: usize) -> usize {
    (memory_bytes / 2).min(MAX_BLOCK_BYTES)
}

/// The block shape: whole destination chunks (`unit`), grown from the last dimension to the
/// first while the block fits in `budget` bytes.
fn block_shape(shape: &[u64], unit: &[u64], elem: usize, budget: usize) -> Vec<u64> {
    let mut block: Vec<u64> = unit
        .iter()
        .zip(shape)
        .map(|(&u, &n)| u.min(n.max(1)))
        .collect();
    let unit_bytes = block
        .iter()
        .product::<u64>()
        .saturating_mul(elem as u64)
        .max(1);
    let mut units_left = (budget as u64 / unit_bytes).max(1);
    for d in (0..shape.len()).rev() {
        let along = shape[d].div_ceil(unit[d]).max(1);
        let take = along.min(units_left);
        block[d] = (unit[d] * take).min(shape[d].max(1));
        units_left /= take;
        if take < along {
            break;
        }
    }
    block
}

/// Copies `src` (or `opts.subset` of it) into `dst`, block by block: each block is whole
/// destination chunks (shards, for sharded destinations), read from `src` into
/// `opts.prototype`'s memory with `opts.read` and written to `dst` with `opts.write` while
/// the next block is read, in order (two blocks at most are held, each within half of
/// `opts.memory_bytes` unless one destination chunk is larger); destination chunks are
/// stored whole (chunks that hold only the fill value are not stored, like zarr's
/// `write_empty_chunks=False`, unless `opts.write.store_empty_chunks`).
///
/// `dst` must exist with the source's data type and the subset's shape — see
/// [`create_like`](crate::create_like). A failure stops the copy; every block written before
/// it stays in `dst`, and since every chunk is written whole (see [`Durability`]) a copy
/// killed at any moment can be continued with [`CopyOptions::resume`].
///
/// # Errors
///
/// [`Error::InvalidArgument`] when `dst` overlaps `src` (the same array, or one inside the
/// other: see [`create_like`](crate::create_like)),
/// [`Error::ShapeMismatch`]/[`Error::DataType`] when `dst` does not fit, [`Error::OutOfBounds`]
/// for a subset outside `src`, and any error of the reads and writes (naming the chunk).
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayLayout, ArrayReadExt, BufferPrototype, options::CopyOptions};
/// use zarrs::storage::store::MemoryStore;
/// let src = zarrbuf::open("fixtures/data/v3_int8.zarr", "")?;
/// let layout = ArrayLayout { chunks: Some(vec![5, 5]), codecs: Some("zstd:1".parse()?), ..Default::default() };
/// let dst = zarrbuf::create_like(&src, &[6, 11], Arc::new(MemoryStore::new()), "/", &layout, false)?;
/// zarrbuf::copy_array(&src, &dst, &CopyOptions::default().with_subset(vec![2..8, 0..11]))?;
/// let want = src.read(&[2..8, 0..11], &BufferPrototype::cpu())?;
/// assert_eq!(dst.read_all(&BufferPrototype::cpu())?.to_vec::<i8>()?, want.to_vec::<i8>()?);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn copy_array<S, D>(src: &Array<S>, dst: &Array<D>, opts: &CopyOptions) -> Result<()>
where
    S: ?Sized + ReadableStorageTraits + 'static,
    D: ?Sized + ReadableWritableStorageTraits + 'static,
{
    refuse_overlap(src, dst.storage().as_ref(), dst.path().as_str())?;
    let _synced = (opts.write.durability == Durability::Sync).then(SyncedWrites::begin);
    let subset: Vec<Range<u64>> = match &opts.subset {
        Some(s) => s.clone(),
        None => src.shape().iter().map(|&n| 0..n).collect(),
    };
    if vlen_kind(src).is_some() || vlen_kind(dst).is_some() {
        return copy_varlen(src, dst, &subset, opts);
    }
    let elem = check_destination(src, dst, &subset)?;
    let shape: Vec<u64> = subset.iter().map(|r| r.end - r.start).collect();
    if shape.contains(&0) {
        return Ok(());
    }
    let zero = vec![0u64; shape.len()];
    let unit: Vec<u64> = dst
        .chunk_shape(&zero)
        .map_err(|e| crate::zarr::zarr_error(dst, e))?
        .iter()
        .map(|n| n.get())
        .collect();
    check_chunk_budget(dst, &unit, elem, opts.memory_bytes)?;
    let block = block_shape(&shape, &unit, elem, block_bytes(opts.memory_bytes));
    let (read_opts, write_opts) = opts.block_options();
    let mut progress = Progress {
        chunks_done: 0,
        chunks_total: chunks_in(&unit, &shape.iter().map(|&n| 0..n).collect::<Vec<_>>()),
        bytes_done: 0,
    };
    if let Some(cb) = &opts.progress {
        cb(progress);
    }
    // One store queue for the whole copy: the uploads of a block go on while the next block
    // is compressed, instead of each block waiting for its last upload (at an object store's
    // latency, a round trip per block). It holds at most one block's bytes, as a block's own
    // queue did, so the copy takes no more memory than before.
    let stores = StoreQueue::new(
        store_threads(dst, &write_opts).min(progress.chunks_total.max(1)),
        write_opts.staging_bytes.min(block_bytes(opts.memory_bytes)),
    );
    let copied = std::thread::scope(|scope| {
        stores.spawn_stores(scope, dst);
        let copied = read_ahead_of_writes(
            blocks(&shape, &block),
            |region| {
                let from = source_region(region, &subset);
                let skip = (opts.resume && block_is_stored(dst, region, &unit)?)
                    || (!write_opts.store_empty_chunks
                        && super::copy_skip::block_is_fill(src, dst, &from, region)?);
                if skip {
                    return Ok(None);
                }
                src.read_opt(&from, &opts.prototype, &read_opts)
                    .map(Some)
                    .map_err(|e| tag(e, "source"))
            },
            |region, data| {
                if let Some(data) = data {
                    write_block(dst, region, &data, &write_opts, &stores)
                        .map_err(|e| tag(e, "destination"))?;
                }
                progress.chunks_done += chunks_in(&unit, region);
                progress.bytes_done +=
                    region.iter().map(|r| r.end - r.start).product::<u64>() * elem as u64;
                if let Some(cb) = &opts.progress {
                    cb(progress);
                }
                Ok(())
            },
        );
        // Every queued chunk is stored (or the first store error given) before the copy
        // returns; a store error is the cause of the "stopped" error a block then gave.
        let stored = stores.finish().map_err(|e| tag(e, "destination"));
        stored.and(copied)
    });
    let written: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
    forget_copied(dst, &written);
    copied?;
    sync_metadata(dst, opts)
}

/// With [`Durability::Sync`], stores `dst`'s metadata again: it was stored before the copy
/// began (create_like), and under the sync the whole array is on disk when the copy returns.
fn sync_metadata<D>(dst: &Array<D>, opts: &CopyOptions) -> Result<()>
where
    D: ?Sized + ReadableWritableStorageTraits + 'static,
{
    if opts.write.durability == Durability::Sync {
        dst.store_metadata().map_err(|e| {
            Error::zarr(
                dst.path().as_str(),
                format!("cannot store the metadata: {e}"),
                Some(Box::new(e)),
            )
        })?;
    }
    Ok(())
}

/// The bytes a block of a variable-length copy plans for each element (its offset and
/// about 56 bytes of value): blocks of whole destination chunks are sized by it.
const VARLEN_ELEMENT_BYTES: usize = 64;

/// [`copy_array`] of variable-length strings or bytes: block by block (whole destination
/// chunks, sized as if each element took [`VARLEN_ELEMENT_BYTES`]), each read from `src`
/// into a [`VarLenBuffer`](crate::VarLenBuffer) on the host and written to `dst` before
/// the next is read. Both arrays must hold variable-length elements of the same kind.
fn copy_varlen<S, D>(
    src: &Array<S>,
    dst: &Array<D>,
    subset: &[Range<u64>],
    opts: &CopyOptions,
) -> Result<()>
where
    S: ?Sized + ReadableStorageTraits + 'static,
    D: ?Sized + ReadableWritableStorageTraits + 'static,
{
    check_subset(src.shape(), subset, src.path().as_str())?;
    let (sk, dk) = (require_vlen(src)?, require_vlen(dst)?);
    if sk != dk {
        return Err(Error::DataType(format!(
            "the source holds {} but the destination {} holds {}; a copy keeps the data type",
            varlen_zarr_name(sk),
            dst.path(),
            varlen_zarr_name(dk)
        )));
    }
    let shape: Vec<u64> = subset.iter().map(|r| r.end - r.start).collect();
    if dst.shape() != shape.as_slice() {
        return Err(Error::ShapeMismatch(format!(
            "the destination {} has shape {:?} but the copied part of the source has shape {shape:?}; create it with that shape (zarrbuf::create_like)",
            dst.path(),
            dst.shape()
        )));
    }
    if shape.contains(&0) {
        return Ok(());
    }
    let unit: Vec<u64> = dst
        .chunk_shape(&vec![0u64; shape.len()])
        .map_err(|e| crate::zarr::zarr_error(dst, e))?
        .iter()
        .map(|n| n.get())
        .collect();
    check_chunk_budget(dst, &unit, VARLEN_ELEMENT_BYTES, opts.memory_bytes)?;
    let block = block_shape(
        &shape,
        &unit,
        VARLEN_ELEMENT_BYTES,
        block_bytes(opts.memory_bytes),
    );
    let (read_opts, write_opts) = opts.block_options();
    let mut progress = Progress {
        chunks_done: 0,
        chunks_total: chunks_in(&unit, &shape.iter().map(|&n| 0..n).collect::<Vec<_>>()),
        bytes_done: 0,
    };
    if let Some(cb) = &opts.progress {
        cb(progress);
    }
    read_ahead_of_writes(
        blocks(&shape, &block),
        |region| {
            if opts.resume && block_is_stored(dst, region, &unit)? {
                return Ok(None);
            }
            let from = source_region(region, subset);
            src.read_as_opt::<VarLenBuffer>(&from, &BufferPrototype::cpu(), &read_opts)
                .map(Some)
                .map_err(|e| tag(e, "source"))
        },
        |region, data| {
            if let Some(data) = data {
                dst.write_varlen_opt(region, &data, &write_opts)
                    .map_err(|e| tag(e, "destination"))?;
                progress.bytes_done += (data.offsets().len() + data.values().len()) as u64;
            }
            progress.chunks_done += chunks_in(&unit, region);
            if let Some(cb) = &opts.progress {
                cb(progress);
            }
            Ok(())
        },
    )?;
    sync_metadata(dst, opts)
}

/// Refuses destination chunks (shards) that no block can hold: a block holds at least one
/// whole chunk (it is encoded whole), also when that is more than the copy's block memory,
/// but never more than the memory this process may still take — a chunk shape of 2^40
/// elements would take terabytes however small the array.
fn check_chunk_budget<D: ?Sized>(
    dst: &Array<D>,
    unit: &[u64],
    elem: usize,
    memory_bytes: usize,
) -> Result<()> {
    let bytes = unit
        .iter()
        .try_fold(elem as u64, |n, &d| n.checked_mul(d))
        .unwrap_or(u64::MAX);
    let room = crate::memory_limit::available_bytes().unwrap_or(u64::MAX);
    let limit = room.max(memory_bytes as u64);
    if bytes > limit {
        return Err(Error::TooLarge {
            what: format!(
                "one chunk (shard) of shape {unit:?} of the destination {}",
                dst.path()
            ),
            bytes,
            limit,
            limit_from: "the copy's block memory or the memory this process may still take, \
                         whichever is more; a block holds at least one chunk"
                .into(),
            advice: "choose smaller --chunks (--shards)".into(),
        });
    }
    Ok(())
}

/// Checks that `dst` can take `subset` of `src`; returns the element size in bytes.
fn check_destination<S: ?Sized, D: ?Sized>(
    src: &Array<S>,
    dst: &Array<D>,
    subset: &[Range<u64>],
) -> Result<usize> {
    check_subset(src.shape(), subset, src.path().as_str())?;
    let shape: Vec<u64> = subset.iter().map(|r| r.end - r.start).collect();
    if dst.shape() != shape.as_slice() {
        return Err(Error::ShapeMismatch(format!(
            "the destination {} has shape {:?} but the copied part of the source has shape {shape:?}; create it with that shape (zarrbuf::create_like)",
            dst.path(),
            dst.shape()
        )));
    }
    let (sd, dd) = (data_type_of(src)?, data_type_of(dst)?);
    if sd != dd {
        return Err(Error::DataType(format!(
            "the source holds {sd} but the destination {} holds {dd}; a copy keeps the data type",
            dst.path()
        )));
    }
    Ok(sd.size())
}

/// The source's part that block `region` of the destination copies (`subset` is the part
/// of the source copied).
fn source_region(region: &[Range<u64>], subset: &[Range<u64>]) -> Vec<Range<u64>> {
    region
        .iter()
        .zip(subset)
        .map(|(r, s)| s.start + r.start..s.start + r.end)
        .collect()
}

/// The blocks of an array of `shape` cut into `block`s, last dimension fastest.
fn blocks(shape: &[u64], block: &[u64]) -> impl Iterator<Item = Vec<Range<u64>>> {
    let counts: Vec<u64> = shape
        .iter()
        .zip(block)
        .map(|(&n, &b)| n.div_ceil(b))
        .collect();
    let total: u64 = counts.iter().product();
    let (shape, block) = (shape.to_vec(), block.to_vec());
    (0..total).map(move |mut flat| {
        let mut region = vec![0..0; shape.len()];
        for d in (0..shape.len()).rev() {
            let i = flat % counts[d];
            flat /= counts[d];
            region[d] = i * block[d]..((i + 1) * block[d]).min(shape[d]);
        }
        region
    })
}

/// How many chunks of shape `unit` `region` touches.
fn chunks_in(unit: &[u64], region: &[Range<u64>]) -> usize {
    region
        .iter()
        .zip(unit)
        .map(|(r, &u)| (r.end.div_ceil(u) - r.start / u) as usize)
        .product()
}

/// Whether every destination chunk (shard) of `region` is stored and decodes: a resumed copy
/// skips such a block. Chunks are checked on all cores.
fn block_is_stored<D>(dst: &Array<D>, region: &[Range<u64>], unit: &[u64]) -> Result<bool>
where
    D: ?Sized + ReadableWritableStorageTraits + 'static,
{
    use rayon::prelude::*;
    let grid: Vec<Range<u64>> = region
        .iter()
        .zip(unit)
        .map(|(r, &u)| r.start / u..r.end.div_ceil(u))
        .collect();
    let count: u64 = grid.iter().map(|r| r.end - r.start).product();
    let whole = |flat: u64| -> Result<bool> {
        let mut indices = vec![0u64; grid.len()];
        let mut rest = flat;
        for d in (0..grid.len()).rev() {
            let n = grid[d].end - grid[d].start;
            indices[d] = grid[d].start + rest % n;
            rest /= n;
        }
        let decoded = dst.retrieve_chunk_if_exists_opt::<zarrs::array::ArrayBytes<'static>>(
            &indices,
            &zarrs::array::CodecOptions::default(),
        );
        match decoded {
            Ok(found) => Ok(found.is_some()),
            // A store that fails is an error; a chunk that does not decode is written again.
            Err(zarrs::array::ArrayError::StorageError(e)) => {
                Err(crate::zarr::chunk_error(dst, &indices, e))
            }
            Err(_) => Ok(false),
        }
    };
    let results: Vec<Result<bool>> =
        crate::thread_pool::install(|| (0..count).into_par_iter().map(whole).collect());
    for r in results {
        if !r? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Says which side of the copy an array error is about: `array` becomes
/// `"source /path"` or `"destination /path"`.
fn tag(e: Error, side: &str) -> Error {
    match e {
        Error::Zarr {
            array,
            message,
            source,
            ..
        } => Error::Zarr {
            array: format!("{side} {array}"),
            message,
            source,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::block_shape;

    #[test]
    fn blocks_are_whole_chunks_within_the_budget() {
        // 4-byte elements, 10×10 chunks of 400 bytes: 1000 bytes hold 2 chunks.
        assert_eq!(block_shape(&[100, 100], &[10, 10], 4, 1000), vec![10, 20]);
        // A whole row of chunks (10 × 400 bytes) and two rows fit in 8000 bytes.
        assert_eq!(block_shape(&[100, 100], &[10, 10], 4, 8000), vec![20, 100]);
        // Less than one chunk: one chunk.
        assert_eq!(block_shape(&[100, 100], &[10, 10], 4, 1), vec![10, 10]);
        // Chunks larger than the array are clipped to it.
        assert_eq!(block_shape(&[5, 7], &[10, 10], 4, 1 << 30), vec![5, 7]);
        // Everything fits.
        assert_eq!(
            block_shape(&[95, 100], &[10, 10], 4, 1 << 30),
            vec![95, 100]
        );
        assert_eq!(block_shape(&[], &[], 4, 1), Vec::<u64>::new());
    }
}
