//! The cached route of a staged read (the design is in [`super::device_cache`]): every unit
//! is looked up in the decoded-chunk cache in the device's memory first; the hits are placed
//! into the output from their cached buffers by one batched copy on a pooled queue, and only
//! the misses run through the general route, which decodes each into a buffer of its own
//! and keeps it ([`super::miss_keeper`]).

use super::device_cache::{ReadCache, give_back_queue, take_queue};
use crate::buffer::{Buffer, NDBuffer};
use crate::errors::Result;
use crate::options::{Progress, ProgressFn};
use crate::pipeline::StagedRead;
use crate::pipeline::read::scatter::PendingScatter;
use crate::zarr::Unit;
use std::sync::Arc;

/// A staged read through a cache in its device's memory.
pub(in crate::pipeline) struct DeviceCachedRead<'r> {
    pub(in crate::pipeline) read: &'r StagedRead<'r>,
    pub(in crate::pipeline) cache: &'r ReadCache,
}

impl DeviceCachedRead<'_> {
    /// Places the hits from the cache on the device, then reads the misses with `misses`
    /// (the general route, keeping what it decodes), given the read narrowed to them.
    pub(in crate::pipeline) fn run(
        &self,
        out: &NDBuffer,
        misses: impl FnOnce(&StagedRead<'_>) -> Result<()>,
    ) -> Result<()> {
        let read = self.read;
        // As in the uncached run: whatever is in flight on the output (its allocation, a
        // copy) is waited for once, here, not by every hit's copy.
        out.buffer().region()?.settle()?;
        let elem = out.dtype().size();
        let memory = read.ops.memory();
        let mut hits: Vec<(&Unit, Buffer, Vec<usize>)> = Vec::new();
        let mut missed: Vec<Unit> = Vec::new();
        for unit in read.units {
            let shape = self.cache.kept_shape(unit);
            let bytes = shape.iter().product::<usize>() * elem;
            // A buffer of another size or memory is not this unit's (never the case for
            // what zarrbuf inserts): the unit is read again.
            match self
                .cache
                .get(&unit.indices)
                .filter(|b| b.len() == bytes && b.memory() == memory && b.is_allocated())
            {
                Some(b) => hits.push((unit, b, shape)),
                None => missed.push(unit.clone()),
            }
        }
        let mut progress = read.no_progress();
        let q = match hits.is_empty() {
            true => None,
            false => Some(take_queue(read.ops.as_ref())?),
        };
        // Every hit placed by one batched copy (per byte-swap unit).
        let placed = q.as_ref().map_or(Ok(()), |q| {
            let scatters = hits
                .iter()
                .map(|(unit, b, shape)| {
                    Ok(PendingScatter::cached(read, unit, b.region()?, shape, out))
                })
                .collect::<Result<Vec<_>>>()?;
            PendingScatter::enqueue_all(read.ops.as_ref(), q, &scatters, out)?;
            for (unit, _, _) in &hits {
                read.report(&mut progress, &unit.region_shape(), elem);
            }
            Ok(())
        });
        let missed = placed.and_then(|()| {
            if missed.is_empty() {
                return Ok(());
            }
            let rest = read.over(&missed, read.progress.clone().map(|cb| after(cb, progress)));
            misses(&rest)
        });
        // The hits' copies are done before the read returns (and before the buffers the
        // cache may evict meanwhile are let go here).
        let drained = q.map_or(Ok(()), |q| {
            read.ops.synchronize(&q)?;
            give_back_queue(memory, q);
            Ok(())
        });
        drop(hits);
        missed.and(drained)
    }
}

/// `cb`, reporting the units of a run that follows `base` as part of the whole read.
fn after(cb: ProgressFn, base: Progress) -> ProgressFn {
    Arc::new(move |p: Progress| {
        cb(Progress {
            chunks_done: base.chunks_done + p.chunks_done,
            chunks_total: base.chunks_total,
            bytes_done: base.bytes_done + p.bytes_done,
        })
    })
}
