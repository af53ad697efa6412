//! Host reads by zarrs' decode-into (`Array::retrieve_array_subset_into`): the output, a
//! C-order window of a host array in native byte order, is written by zarrs straight from
//! each chunk, with no staging. zarrbuf first checks what zarrs trusts (shard indexes, the
//! stored sizes of chunks it reads by range) and, after a failed read, names the chunk at
//! fault. An output off a cache line whose chunk rows are short is read through aligned
//! slabs instead ([`CACHE_LINE`]). Which reads come here, and why, is decided with
//! [`staged_beats_direct`] by the route choice (`choose_route.rs`).

use super::read_request::ReadRequest;
use crate::buffer::{BufferPrototype, CWindow, NDBuffer};
use crate::data_types::Order;
use crate::errors::{Error, Result};
use crate::memory::with_decode_target;
use crate::options::ReadOptions;
use crate::zarr::{
    ShardIndex, Unit, UnitPlan, UnitSource, check_stored_size, chunk_error, guard_zarrs,
    plan_chunks, subchunk_shape_of, zarr_error,
};
use std::ops::Range;
use zarrs::array::{Array, ArrayBytes, ArrayShardedExt, ArraySubset};
use zarrs::storage::ReadableStorageTraits;

/// Chunks (inner chunks, for sharded arrays) a read into an aligned host output must touch
/// before `Auto` takes the staged pipeline instead of zarrs' decode-into.
///
/// Measured on the 2-core development machine (`zarrbuf bench --subset`, 256 MiB float32
/// arrays of 64³ chunks, median of 7–21 reads, staged against decode-into): one chunk
/// 0.2–0.8× (the staged pipeline starts its workers and slots for every read); 8 chunks
/// 1.2–2.6×; whole arrays 1.06–1.38× aligned, and 1.8–4.7× for subsets that cut through
/// chunks (zarrs decodes a partly read chunk with a partial decoder; the staged pipeline
/// decodes it whole and scatters the part it needs).
pub(crate) const STAGED_MIN_CHUNKS: u64 = 8;

/// Whether an `Auto` read into an aligned host output takes the staged pipeline (see
/// [`STAGED_MIN_CHUNKS`]).
pub(crate) fn staged_beats_direct<S: ?Sized>(array: &Array<S>, subset: &[Range<u64>]) -> bool {
    let Some(chunks) = array
        .chunks_in_array_subset(&ArraySubset::new_with_ranges(subset))
        .ok()
        .flatten()
    else {
        return false;
    };
    let zero = vec![0u64; array.dimensionality()];
    // Inner chunks per shard: the staged pipeline decodes them in parallel one by one.
    let per_chunk = match (array.chunk_shape(&zero).ok(), subchunk_shape_of(array)) {
        (Some(shard), Some(inner)) if shard.len() == inner.len() => shard
            .iter()
            .zip(inner.iter())
            .map(|(s, i)| s.get().div_ceil(i.get()))
            .fold(1u64, u64::saturating_mul),
        _ => 1,
    };
    chunks.num_elements().saturating_mul(per_chunk) >= STAGED_MIN_CHUNKS
}

/// Reads `request` into its output, the C-order window `window` of a host array, by zarrs'
/// decode-into: straight into the output, or through aligned slabs when the output is off a
/// cache line and zarrs' copies would be short (see [`CACHE_LINE`]).
pub(crate) fn read_decode_into<S: ?Sized + ReadableStorageTraits + 'static>(
    request: &mut ReadRequest<'_, S>,
    window: CWindow,
) -> Result<()> {
    let (array, subset, out, opts) = (request.array, request.subset, request.out, request.opts);
    match realign_slab_rows(array, subset, out, &window, opts) {
        Some(slab_rows) => read_realigned(array, subset, out, slab_rows, opts),
        None => read_direct(request, window),
    }
}

/// CPU path: zarrs decodes straight into the output (no temporaries).
fn read_direct<S: ?Sized + ReadableStorageTraits + 'static>(
    request: &mut ReadRequest<'_, S>,
    window: CWindow,
) -> Result<()> {
    let (array, subset, out, opts) = (request.array, request.subset, request.out, request.opts);
    let elem = out.dtype().size();
    let region = out.buffer().try_slice(window.byte_start..window.byte_end)?;
    let whole = ArraySubset::new_with_ranges(subset);
    let codec_opts = opts.codec_options();
    let plan = request.plan()?;
    check_shard_indexes(array, subset, plan, opts)?;
    check_stored_sizes(array, subset)?;
    let result = region.with_host_mut(|bytes| {
        with_decode_target(
            bytes,
            elem,
            &window.parent_shape,
            window.window.clone(),
            |target| {
                guard_zarrs(array, || {
                    // zarrs decodes the chunks in parallel: on the process's pool (see
                    // `thread_pool`: rayon's global one does not survive a fork).
                    crate::thread_pool::install(|| {
                        array.retrieve_array_subset_into_opt(&whole, target, &codec_opts)
                    })
                    .map_err(|e| zarr_error(array, e))
                })
            },
        )
    });
    if let Some(cb) = &opts.progress {
        let units = plan.units.len();
        cb(crate::options::Progress {
            chunks_done: units,
            chunks_total: units,
            bytes_done: out.nbytes() as u64,
        });
    }
    result.map_err(|e| locate_failing_chunk(array, subset, plan).unwrap_or(e))
}

/// zarrs copies each decoded chunk into the output row by row. When those rows are short and
/// the output does not start on a cache line (numpy's large arrays start 16 bytes into a
/// page), every store of the copy straddles two cache lines, and reads ran at less than half
/// the speed they reach into an aligned output (uncompressed 64³ float32 chunks: 1.0 against
/// 2.5 GB/s on 2 cores). Such reads on zarrs' route (`PipelineMode::Direct`, and `Auto`
/// reads of fewer than [`STAGED_MIN_CHUNKS`] chunks) decode into aligned scratch memory a
/// slab at a time and copy each slab out with long copies, which memcpy aligns itself.
/// Larger `Auto` reads take the staged pipeline whatever the output's alignment: into
/// numpy's misaligned 256 MiB outputs (64³ float32 chunks, 2 cores) it read 1.8–2.6× as fast
/// as these slabs uncompressed, with blosc and with zstd, 1.2× sharded.
const CACHE_LINE: usize = 64;
/// Runs of at least this many bytes are copied well at any alignment.
const SHORT_RUN: usize = 4096;
/// Outputs smaller than this are read directly whatever their alignment.
const REALIGN_MIN_BYTES: usize = 1 << 20;
/// Scratch per slab at most (and at most `ReadOptions::staging_bytes`), but at least one
/// row of chunks along the first axis.
const REALIGN_SLAB_BYTES: usize = 64 << 20;

/// The rows (along the first axis) of each slab of a realigned read, or `None` to read
/// straight into `out`.
fn realign_slab_rows<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    window: &CWindow,
    opts: &ReadOptions,
) -> Option<u64> {
    let d = subset.len();
    if d == 0 || opts.progress.is_some() || out.nbytes() < REALIGN_MIN_BYTES {
        return None;
    }
    let first = out.buffer().host_ptr()? as usize + out.offset();
    if first.is_multiple_of(CACHE_LINE) {
        return None;
    }
    let zero = vec![0u64; d];
    let grid: Vec<u64> = array
        .chunk_shape(&zero)
        .ok()?
        .iter()
        .map(|n| n.get())
        .collect();
    // zarrs decodes sharded arrays inner chunk by inner chunk.
    let unit: Vec<u64> = subchunk_shape_of(array)
        .map(|s| s.iter().map(|n| n.get()).collect())
        .unwrap_or_else(|| grid.clone());
    if unit.len() != d || grid.len() != d {
        return None;
    }
    // The longest run zarrs writes in one copy: the unit's last axis, and the axes before it
    // while the unit spans the whole output along the axes after them.
    let elem = out.dtype().size() as u64;
    let mut run = elem;
    for k in (0..d).rev() {
        let extent = subset[k].end - subset[k].start;
        run = run.saturating_mul(unit[k].min(extent));
        if unit[k] < extent || extent != window.parent_shape[k] {
            break;
        }
    }
    if run >= SHORT_RUN as u64 {
        return None;
    }
    let row_bytes = (out.nbytes() / out.shape()[0].max(1)).max(1) as u64;
    let budget = REALIGN_SLAB_BYTES.min(opts.staging_bytes) as u64;
    let rows = (budget / row_bytes).max(1);
    // Whole chunks (shards) along the first axis when they fit.
    Some(if rows >= grid[0] {
        rows - rows % grid[0]
    } else {
        grid[0]
    })
}

/// Reads `subset` slab by slab (along the first axis, at chunk boundaries) into aligned
/// scratch memory and copies each slab into its place in `out` (see [`CACHE_LINE`]).
fn read_realigned<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    slab_rows: u64,
    opts: &ReadOptions,
) -> Result<()> {
    let axis0 = subset[0].clone();
    let mut start = axis0.start;
    while start < axis0.end {
        // The slab ends on a multiple of `slab_rows` (a chunk boundary) or at the subset's end.
        let end = ((start / slab_rows + 1) * slab_rows).min(axis0.end);
        let mut slab = subset.to_vec();
        slab[0] = start..end;
        let shape: Vec<usize> = slab.iter().map(|r| (r.end - r.start) as usize).collect();
        // Every element is written by read_direct before the copy reads it; on an error the
        // scratch is dropped unread.
        let scratch =
            NDBuffer::empty_unwritten(&shape, out.dtype(), Order::C, &BufferPrototype::cpu())?;
        let window = scratch.c_window().ok_or_else(|| {
            Error::ShapeMismatch("scratch memory is not C-contiguous".to_string())
        })?;
        read_direct(&mut ReadRequest::new(array, &slab, &scratch, opts), window)?;
        let mut place: Vec<Range<usize>> = shape.iter().map(|&n| 0..n).collect();
        place[0] = (start - axis0.start) as usize..(end - axis0.start) as usize;
        copy_into_window(&scratch, &out.get(&place)?)?;
        start = end;
    }
    Ok(())
}

/// Copies the C-contiguous host array `src` into `dst` (same shape and type, a window of a
/// C-contiguous host parent), in parallel.
fn copy_into_window(src: &NDBuffer, dst: &NDBuffer) -> Result<()> {
    use rayon::prelude::*;
    let w = dst.c_window().ok_or_else(|| {
        Error::ShapeMismatch("the output is not a window of a C-contiguous array".to_string())
    })?;
    let elem = dst.dtype().size();
    let n = src.nbytes();
    let (_guard, bytes) = src.buffer().written_region("a copy")?.host_bytes()?;
    let s = &bytes[src.offset()..src.offset() + n];
    let region = dst.buffer().try_slice(w.byte_start..w.byte_end)?;
    // On the process's pool (see `thread_pool`: rayon's global one does not survive a fork).
    crate::thread_pool::install(|| {
        region.with_host_mut(|d| {
            const PIECE: usize = 1 << 20;
            if dst.is_c_contiguous() {
                let at = dst.offset() - w.byte_start;
                d[at..at + n]
                    .par_chunks_mut(PIECE)
                    .zip(s.par_chunks(PIECE))
                    .for_each(|(d, s)| d.copy_from_slice(s));
                return Ok(());
            }
            // A window: parent rows along the first axis hold the window's rows at an offset.
            let nd = dst.ndim();
            let shape = dst.shape();
            let parent: Vec<usize> = w.parent_shape.iter().map(|&v| v as usize).collect();
            let origin: Vec<usize> = w.window.start().iter().map(|&v| v as usize).collect();
            let mut pstride = vec![elem; nd];
            for k in (0..nd.saturating_sub(1)).rev() {
                pstride[k] = pstride[k + 1] * parent[k + 1];
            }
            let run = shape[nd - 1] * elem;
            let src_row = n / shape[0];
            let runs_per_row = src_row / run;
            d.par_chunks_mut(pstride[0])
                .zip(s.par_chunks(src_row))
                .for_each(|(drow, srow)| {
                    for (r, src_run) in srow.chunks_exact(run).enumerate().take(runs_per_row) {
                        // The index of run `r` over axes 1..nd-1, as a byte offset in the parent row.
                        let mut rest = r;
                        let mut at = origin[nd - 1] * elem;
                        for k in (1..nd - 1).rev() {
                            at += (origin[k] + rest % shape[k]) * pstride[k];
                            rest /= shape[k];
                        }
                        drow[at..at + run].copy_from_slice(src_run);
                    }
                });
            Ok(())
        })
    })
}

/// For sharded arrays, reads (and caches in the OS) the index of every shard the request
/// touches and refuses damaged ones before zarrs reads through them: zarrs trusts index
/// entries, and a damaged one makes it overflow or allocate whatever size the entry claims.
fn check_shard_indexes<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    plan: &UnitPlan,
    opts: &ReadOptions,
) -> Result<()> {
    if plan.source != UnitSource::Subchunk {
        return Ok(());
    }
    let shards =
        ShardIndex::with_limit(array, opts.validate_checksums, opts.max_bytes)?.shared_with(array);
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
    // The entries of the inner chunks the read touches: zarrs reads part of an
    // uncompressed inner chunk by range, trusting its size.
    for unit in &plan.units {
        let (shard, within) = shards.split(&unit.indices);
        if let Some(Some(index)) = shards.cached(&shard) {
            shards
                .inner_range(&index, &within)
                .map_err(|e| chunk_error(array, &shard, e))?;
        }
    }
    Ok(())
}

/// zarrs reads the part of an uncompressed chunk a subset needs by byte range, without
/// looking at the chunk's size, so a chunk stored one byte short (or a gigabyte long) gave
/// bytes. Where the chain fixes a chunk's encoded size (no compression: `bytes`, `transpose`,
/// checksums), each chunk the read cuts through must be stored at exactly that size; chunks
/// read whole are decoded whole by zarrs, which checks their size. Every chunk is first
/// refused when its store tells its size cheaply and no encoding of it is that large
/// (`check_stored_size`). Shards are checked by their index ([`check_shard_indexes`]).
fn check_stored_sizes<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
) -> Result<()> {
    use zarrs::array::ArrayToBytesCodecTraits;
    if array.is_sharded() {
        return Ok(());
    }
    for chunk in plan_chunks(array, subset)? {
        // Any chunk larger than any encoding of it, before zarrs reads it whole.
        check_stored_size(array, &chunk.indices)?;
        let whole = chunk
            .region
            .iter()
            .zip(&chunk.origin)
            .zip(&chunk.shape)
            .all(|((r, &o), n)| r.start == o && r.end - o == n.get());
        if whole {
            continue;
        }
        let fixed = array
            .codecs()
            .encoded_representation(&chunk.shape, array.data_type(), array.fill_value())
            .ok()
            .and_then(|rep| match rep {
                zarrs::array::BytesRepresentation::FixedSize(n) => Some(n),
                _ => None,
            });
        let Some(expected) = fixed else {
            // Compressed chunks are decoded whole, by the bounded decoders, which check.
            continue;
        };
        let key = array.chunk_key(&chunk.indices);
        let stored = array
            .storage()
            .size_key(&key)
            .map_err(|e| chunk_error(array, &chunk.indices, e))?;
        if let Some(stored) = stored
            && stored != expected
        {
            return Err(chunk_error(
                array,
                &chunk.indices,
                format!(
                    "stored as {stored} bytes, but its encoding takes exactly {expected}: the \
                     chunk is damaged"
                ),
            ));
        }
    }
    Ok(())
}

/// After a failed whole-subset read, decodes chunk by chunk to name the one at fault.
fn locate_failing_chunk<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    plan: &UnitPlan,
) -> Option<Error> {
    let shards;
    let grid_units: &[Unit] = if plan.source == UnitSource::Subchunk {
        // Shards are the stored objects; name the shard.
        shards = plan_chunks(array, subset).ok()?;
        &shards
    } else {
        &plan.units
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
