//! Reading one subset onto several devices at once ([`read`], [`read_opt`]): replicated on
//! each, or split along one axis into chunk-aligned partitions read by one pipeline per
//! device, in parallel.

use super::read::ArrayReadExt;
use crate::buffer::{MultiNDBuffer, MultiPrototype, Placement, join_worker};
use crate::data_types::Order;
use crate::errors::{Error, Result};
use crate::options::{Progress, ReadOptions};
use crate::zarr::{check_subset, chunk_aligned_partitions};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use zarrs::array::Array;
use zarrs::storage::ReadableStorageTraits;

/// Reads `subset` of `array` onto several devices, one part per prototype of `proto`:
///
/// - [`Placement::Replicate`]: the whole subset on every device. It is read (fetched and
///   decoded) once, into the first part, and copied to the others in parallel.
/// - [`Placement::Split { axis }`](Placement::Split): the subset cut along `axis` at chunk
///   boundaries (shard boundaries for sharded arrays) into consecutive partitions balanced
///   by extent, each read by its own pipeline on its own device, all in parallel. A device
///   gets an empty part when there are fewer chunks than devices.
///
/// # Errors
/// What a read reports, for the first part that failed; `InvalidArgument` for an axis the
/// subset does not have.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::multi::{MultiPrototype, Placement};
/// use zarrbuf::{ArrayWriteExt, NDBuffer};
/// use zarrs::array::{ArrayBuilder, data_type};
/// let array = ArrayBuilder::new(vec![8, 2], vec![2, 2], data_type::uint16(), 0u16)
///     .build(Arc::new(zarrs::storage::store::MemoryStore::new()), "/a")
///     .map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// array.write_all(&NDBuffer::from_vec((0..16u16).collect::<Vec<_>>(), &[8, 2])?)?;
/// // Two host memories stand in for two GPUs (BufferPrototype::cuda_devices(&[0, 1])).
/// let parts = zarrbuf::multi::read(&array, &[1..8, 0..2], &MultiPrototype::host(2)?,
///     Placement::Split { axis: 0 })?;
/// assert_eq!(parts.subset(0), Some(&[1..4, 0..2][..])); // cut at a chunk boundary
/// assert_eq!(parts[1].to_vec::<u16>()?, (8..16).collect::<Vec<_>>());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn read<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    proto: &MultiPrototype,
    placement: Placement,
) -> Result<MultiNDBuffer> {
    read_opt(array, subset, proto, placement, &ReadOptions::default())
}

/// [`read`] with options. Each pipeline stages through up to `opts.staging_bytes` of its
/// own; with [`Placement::Split`], `opts.concurrency` is shared out between the pipelines
/// and `opts.progress` sees the sum of their progress.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::multi::{MultiPrototype, Placement};
/// use zarrbuf::{ArrayWriteExt, NDBuffer, options::ReadOptions};
/// use zarrs::array::{ArrayBuilder, data_type};
/// let array = ArrayBuilder::new(vec![4], vec![2], data_type::uint8(), 0u8)
///     .build(Arc::new(zarrs::storage::store::MemoryStore::new()), "/a")
///     .map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// array.write_all(&NDBuffer::from_vec(vec![1u8, 2, 3, 4], &[4])?)?;
/// let opts = ReadOptions::default().with_concurrency(2);
/// let parts = zarrbuf::multi::read_opt(&array, &[0..4], &MultiPrototype::host(2)?,
///     Placement::Replicate, &opts)?;
/// assert_eq!(parts[1].to_vec::<u8>()?, [1, 2, 3, 4]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn read_opt<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    proto: &MultiPrototype,
    placement: Placement,
    opts: &ReadOptions,
) -> Result<MultiNDBuffer> {
    check_subset(array.shape(), subset, array.path().as_str())?;
    match placement {
        Placement::Replicate => {
            // One read (one decode of every chunk), then a copy per further device.
            let first = array.read_opt(subset, &proto.parts()[0], opts)?;
            let rest = std::thread::scope(|s| {
                let copies: Vec<_> = proto.parts()[1..]
                    .iter()
                    .map(|p| {
                        let first = &first;
                        s.spawn(move || first.copy_to(p, Order::C))
                    })
                    .collect();
                copies
                    .into_iter()
                    .map(join_worker)
                    .collect::<Result<Vec<_>>>()
            })?;
            let mut parts = vec![first];
            parts.extend(rest);
            let subsets = vec![subset.to_vec(); parts.len()];
            MultiNDBuffer::from_parts(parts, subsets, placement)
        }
        Placement::Split { axis } => {
            let partitions = chunk_aligned_partitions(array, subset, axis, proto.len())?;
            let per_part = per_pipeline_options(opts, proto.len());
            let parts = std::thread::scope(|s| {
                let reads: Vec<_> = partitions
                    .iter()
                    .zip(proto.parts())
                    .enumerate()
                    .map(|(i, (part, p))| {
                        let o = per_part(i);
                        s.spawn(move || {
                            array.read_opt(part, p, &o).map_err(|e| match e {
                                Error::InvalidArgument(m) => Error::InvalidArgument(format!(
                                    "part {i} ({}): {m}",
                                    p.memory()
                                )),
                                other => other,
                            })
                        })
                    })
                    .collect();
                reads
                    .into_iter()
                    .map(join_worker)
                    .collect::<Result<Vec<_>>>()
            })?;
            MultiNDBuffer::from_parts(parts, partitions, placement)
        }
    }
}

/// Options for each of `n` parallel pipelines: the decoding threads shared out, and
/// progress summed over the parts before it reaches the caller's callback.
fn per_pipeline_options(opts: &ReadOptions, n: usize) -> impl Fn(usize) -> ReadOptions + '_ {
    let share = (opts.threads() / n).max(1);
    let totals = Arc::new(Mutex::new(vec![Progress::default(); n]));
    move |i| {
        let mut o = opts.clone().with_concurrency(share);
        if let Some(report) = opts.progress.clone() {
            let totals = totals.clone();
            o.progress = Some(Arc::new(move |p: Progress| {
                let sum = {
                    let mut all = totals.lock().unwrap_or_else(|e| e.into_inner());
                    all[i] = p;
                    all.iter().fold(Progress::default(), |acc, q| Progress {
                        chunks_done: acc.chunks_done + q.chunks_done,
                        chunks_total: acc.chunks_total + q.chunks_total,
                        bytes_done: acc.bytes_done + q.bytes_done,
                    })
                };
                report(sum);
            }));
        }
        o
    }
}
