//! Reading one subset onto several devices: replicated on each, or split along one axis into
//! chunk-aligned partitions read by one pipeline per device, in parallel.

use crate::buffer::{MultiNDBuffer, MultiPrototype, Placement, join_worker};
use crate::dtype::Order;
use crate::error::{Error, Result};
use crate::options::{Progress, ReadOptions};
use crate::read::ArrayReadExt;
use crate::zarr::{check_subset, chunk_aligned_partitions};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use zarrs::array::Array;
use zarrs::storage::ReadableStorageTraits;

/// See [`ArrayReadExt::read_multi`].
pub(crate) fn read_multi<S: ?Sized + ReadableStorageTraits + 'static>(
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
