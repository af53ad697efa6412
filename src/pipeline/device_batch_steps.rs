//! The steps of a staged read's device decoder (see [`super::device_batches`] for its state
//! and the design): gathering chunks into batches as they come in, submitting each batch,
//! and settling finished ones.

use super::batch_plan::{BatchPlanInput, align_up, batch_plan};
use super::device_batches::{DeviceBatches, Gathering, scratch_for};
use super::device_cache::Kept;
use super::device_parts::{Compressed, DeviceParts, Scatter};
use super::hybrid::{BatchId, WorkQueue};
use super::{Slot, StagedRead};
use crate::device::Unshuffle;
use crate::device::{BatchItem, Event, Queue};
use crate::errors::{Error, Result};
use crate::memory::Region;
use crate::options::Progress;
use crate::zarr::BloscFrame;
use std::sync::mpsc;
use std::time::Instant;
use zarrbuf_codecs::host::Shuffle;

/// What follows a device batch for one of its chunks.
enum After<'f> {
    /// Unit `.0` decoded straight into its place: the output, or its cache buffer.
    Done(usize),
    /// Scatter unit `.0`'s decoded bytes into the output.
    Scatter(usize, Region),
    /// Undo blosc's shuffle from `.2` into `.3`, then (when `.5`) scatter unit `.0` from there.
    Unshuffle(usize, Shuffle, Region, Region, &'f BloscFrame, bool),
}

impl StagedRead<'_> {
    /// The batch plan of this read, from the device's SM count and the staging budget
    /// (`slot_bytes`: the largest decoded unit).
    pub(super) fn batch_plan_input(&self, slot_bytes: usize) -> Result<BatchPlanInput> {
        Ok(BatchPlanInput {
            sm_count: self.ops.sm_count()?,
            chunks: self.units.len(),
            decoded_chunk_bytes: slot_bytes,
            compressed_chunk_bytes: None,
            staging_bytes: self.staging_bytes,
            tuning: super::tuning::tuning()?,
        })
    }

    /// Takes a compressed chunk of `batch` from its slot: copies it into the batch's input
    /// buffer (submitting the batch first when it has no room left) and frees the slot once
    /// the copy is done.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gather(
        &self,
        d: &mut DeviceBatches,
        batch: BatchId,
        unit: usize,
        slot: (usize, &Slot),
        chunk: Compressed,
        free: &mpsc::Sender<usize>,
        s: &Scatter<'_>,
        progress: &mut Progress,
        queue: &WorkQueue,
    ) -> Result<()> {
        let need = align_up(chunk.len);
        let items = chunk.parts.items();
        let mut g = d.gathering(batch);
        let full = {
            let g = &d.gathering[g];
            !g.chunks.is_empty()
                && (g.bytes + need > d.plan.batch_bytes
                    || g.items + items > d.item_capacity
                    || g.chunks.len() >= d.plan.chunks_per_batch)
        };
        if full {
            // The batch goes as it is; the rest of its units start another.
            let done = std::mem::replace(
                &mut d.gathering[g],
                Gathering {
                    batch,
                    arrived: 0,
                    entry: None,
                    chunks: Vec::new(),
                    bytes: 0,
                    items: 0,
                },
            );
            d.gathering[g].arrived = done.arrived;
            self.submit(d, done, s, progress)?;
            g = d.gathering(batch);
        }
        let k = match d.gathering[g].entry {
            Some(k) => k,
            None => {
                // The next entry no other batch is gathering into (there is one: batches
                // are gathered for at most as many open batches of the queue as entries).
                let n = d.ring.len();
                let k = (0..n)
                    .map(|j| (d.next + j) % n)
                    .find(|&k| d.gathering.iter().all(|o| o.entry != Some(k)))
                    .ok_or_else(|| {
                        Error::InvalidArgument(
                            "more device batches gathering than batch buffers \
                             (internal error: please report)"
                                .into(),
                        )
                    })?;
                d.next = (k + 1) % n;
                self.settle_batch(d, k, queue)?;
                d.gathering[g].entry = Some(k);
                k
            }
        };
        let at = d.gathering[g].bytes;
        let input = &d.ring[k].input;
        if at + chunk.len > input.len() || items > d.item_capacity {
            return Err(Error::InvalidArgument(format!(
                "a chunk of {} compressed bytes and {items} streams does not fit a batch of {} \
                 bytes and {} streams (internal error: please report)",
                chunk.len,
                input.len(),
                d.item_capacity
            )));
        }
        let (slot_id, slot) = slot;
        let staged = slot.staging.try_slice(..chunk.len)?;
        self.ops.copy(
            &d.copy_queue,
            staged.region()?,
            &input.sub(at, at + chunk.len),
        )?;
        let copied = self.ops.record(&d.copy_queue)?;
        if let Ok(mut p) = slot.pending.lock() {
            *p = Some(copied);
        }
        let _ = free.send(slot_id);
        d.largest_seen = d.largest_seen.max(chunk.len);
        let g = &mut d.gathering[g];
        g.chunks.push((unit, at, chunk));
        g.bytes += need;
        g.items += items;
        Ok(())
    }

    /// One unit of `batch` has come in (gathered, or decoded elsewhere): once all have, the
    /// batch is submitted.
    pub(super) fn arrived(
        &self,
        d: &mut DeviceBatches,
        batch: BatchId,
        s: &Scatter<'_>,
        progress: &mut Progress,
        queue: &WorkQueue,
    ) -> Result<()> {
        let g = d.gathering(batch);
        d.gathering[g].arrived += 1;
        if d.gathering[g].arrived < batch.len {
            return Ok(());
        }
        let done = d.gathering.swap_remove(g);
        if !done.chunks.is_empty() {
            self.submit(d, done, s, progress)?;
        }
        // Later batches take as many chunks as fit if none is larger than the largest seen
        // so far, never more than the plan's.
        if d.largest_seen > 0 {
            let replanned = batch_plan(BatchPlanInput {
                compressed_chunk_bytes: Some(d.largest_seen),
                ..d.plan_input
            });
            queue.set_max_batch(replanned.chunks_per_batch.min(d.plan.chunks_per_batch));
        }
        Ok(())
    }

    /// Submits a gathered batch: decompress every chunk into the output or scratch, then
    /// unshuffle and scatter what needs it, and record the event its ring entry waits for.
    fn submit(
        &self,
        d: &mut DeviceBatches,
        g: Gathering,
        s: &Scatter<'_>,
        progress: &mut Progress,
    ) -> Result<()> {
        let Some(k) = g.entry else {
            return Ok(());
        };
        // Where each chunk decodes: straight into the output, or scratch (and a second
        // scratch region for blosc chunks unshuffled there before their scatter).
        let align = d.compression.required_alignment();
        let mut places = Vec::with_capacity(g.chunks.len());
        let mut scratch_bytes = [0, 0];
        let mut keeps = Vec::with_capacity(g.chunks.len());
        for (i, _, chunk) in &g.chunks {
            let unit = &self.units[*i];
            let expected = unit.num_elements() * s.elem;
            // With a cache, each chunk decodes into a buffer of its own: straight into it
            // when the decoded layout is the cache's, else into scratch and copied there.
            let kept = self.new_kept(unit, s.elem)?;
            let direct = match &kept {
                Some(k) if self.decoded_is_kept_layout(unit, k, s.out) => Some(k.region()?.clone()),
                Some(_) => None,
                None => self.direct_target(unit, s, align)?,
            };
            keeps.push(kept);
            let shuffled = matches!(&chunk.parts, DeviceParts::Blosc(f) if f.shuffle.is_some());
            let areas = match (direct.is_some(), shuffled) {
                (true, false) => 0,
                (true, true) | (false, false) => 1,
                (false, true) => 2,
            };
            places.push((direct, scratch_bytes, expected));
            for bytes in &mut scratch_bytes[..areas] {
                *bytes += align_up(expected);
            }
        }
        let scratch = [
            scratch_for(self.ops.as_ref(), &mut d.ring[k], 0, scratch_bytes[0])?,
            scratch_for(self.ops.as_ref(), &mut d.ring[k], 1, scratch_bytes[1])?,
        ];
        // Decompression reads what the copy queue wrote.
        self.ops.wait_for(&d.queue, &d.copy_queue)?;
        let entry = &d.ring[k];
        let mut items = Vec::with_capacity(g.chunks.len());
        let mut item_units = Vec::with_capacity(g.chunks.len());
        let mut after = Vec::with_capacity(g.chunks.len());
        for ((i, at, chunk), (direct, offset, expected)) in g.chunks.iter().zip(places) {
            let input = entry.input.sub(*at, at + chunk.len);
            let area = |n: usize| scratch[n].sub(offset[n], offset[n] + expected);
            match &chunk.parts {
                DeviceParts::Whole => {
                    let output = direct.clone().unwrap_or_else(|| area(0));
                    items.push(BatchItem {
                        input,
                        output: output.clone(),
                    });
                    item_units.push((*i, expected));
                    after.push(match direct {
                        Some(_) => After::Done(*i),
                        None => After::Scatter(*i, output),
                    });
                }
                DeviceParts::Blosc(frame) => {
                    // Unshuffled into the output, or into a second scratch area and scattered
                    // from there; unshuffled streams go where the chunk goes.
                    let (streams_to, next) = match (frame.shuffle, direct) {
                        (Some(shuffle), Some(target)) => (
                            area(0),
                            After::Unshuffle(*i, shuffle, area(0), target, frame, false),
                        ),
                        (Some(shuffle), None) => (
                            area(0),
                            After::Unshuffle(*i, shuffle, area(0), area(1), frame, true),
                        ),
                        (None, Some(target)) => (target, After::Done(*i)),
                        (None, None) => (area(0), After::Scatter(*i, area(0))),
                    };
                    for stream in &frame.streams {
                        let (from, to) = (
                            input.sub(stream.input.start, stream.input.end),
                            streams_to.sub(stream.output.start, stream.output.end),
                        );
                        if stream.stored {
                            self.ops.copy(&d.queue, &from, &to)?;
                        } else {
                            item_units.push((*i, to.len()));
                            items.push(BatchItem {
                                input: from,
                                output: to,
                            });
                        }
                    }
                    after.push(next);
                }
            }
        }
        let submitted = Instant::now();
        if !items.is_empty() {
            self.ops
                .decompress_batch(&d.queue, d.compression, &items, &mut d.ring[k].desc)?;
        }
        let kept_all = self.after_batch(&d.queue, &after, keeps, s)?;
        self.fence_kept(&d.queue, &kept_all)?;
        let event = self.ops.record(&d.queue)?;
        for (i, _, _) in &g.chunks {
            self.report(progress, &self.units[*i].region_shape(), s.elem);
        }
        let entry = &mut d.ring[k];
        entry.event = Some(event);
        entry.items = item_units;
        entry.chunks = g.chunks.len();
        entry.batch = Some(g.batch.id);
        entry.submitted = submitted;
        entry.kept = kept_all;
        Ok(())
    }

    /// Enqueues what follows a batch's decompression for each of its chunks (unshuffle,
    /// layout copy into its cache buffer), in order, then every scatter into the output
    /// together (one batched copy per byte-swap unit: after all of the above, so each
    /// reads what its unshuffle or layout copy wrote); returns the chunks to keep.
    fn after_batch(
        &self,
        q: &Queue,
        after: &[After<'_>],
        keeps: Vec<Option<Kept>>,
        s: &Scatter<'_>,
    ) -> Result<Vec<(usize, Kept)>> {
        let mut kept_all = Vec::new();
        let mut scatters = Vec::with_capacity(after.len());
        for (next, kept) in after.iter().zip(keeps) {
            match next {
                After::Done(i) => {
                    if let Some(k) = &kept {
                        let unit = &self.units[*i];
                        scatters.push(self.cached_scatter(unit, k.region()?, &k.shape, s.out));
                    }
                }
                After::Scatter(i, decoded) => scatters.push(self.prepare_place(
                    q,
                    &self.units[*i],
                    decoded,
                    kept.as_ref(),
                    s,
                )?),
                After::Unshuffle(i, shuffle, from, to, frame, scatter) => {
                    self.ops.blosc_unshuffle(
                        q,
                        Unshuffle {
                            src: from,
                            dst: to,
                            nbytes: frame.nbytes,
                            shuffle: *shuffle,
                            typesize: frame.typesize,
                            blocksize: frame.blocksize,
                        },
                    )?;
                    let unit = &self.units[*i];
                    if *scatter {
                        scatters.push(self.prepare_place(q, unit, to, kept.as_ref(), s)?);
                    } else if let Some(k) = &kept {
                        scatters.push(self.cached_scatter(unit, k.region()?, &k.shape, s.out));
                    }
                }
            }
            let i = match next {
                After::Done(i) | After::Scatter(i, _) | After::Unshuffle(i, ..) => *i,
            };
            kept_all.extend(kept.map(|k| (i, k)));
        }
        self.enqueue_scatters(q, &scatters, s.out)?;
        Ok(kept_all)
    }

    /// Settles every ring entry whose batch has finished (never blocks).
    pub(super) fn settle_finished(&self, d: &mut DeviceBatches, queue: &WorkQueue) -> Result<()> {
        for k in 0..d.ring.len() {
            if d.ring[k].event.as_ref().is_some_and(Event::is_complete) {
                self.settle_batch(d, k, queue)?;
            }
        }
        Ok(())
    }

    /// Submits what is still gathered and waits for every batch, checking each.
    pub(super) fn finish_batches(
        &self,
        d: &mut DeviceBatches,
        s: &Scatter<'_>,
        progress: &mut Progress,
        queue: &WorkQueue,
    ) -> Result<()> {
        for g in std::mem::take(&mut d.gathering) {
            self.submit(d, g, s, progress)?;
        }
        for k in 0..d.ring.len() {
            self.settle_batch(d, k, queue)?;
        }
        Ok(())
    }

    /// Waits for ring entry `k`'s last batch and checks every chunk of it: decoded, and to
    /// exactly its size (a failure names the chunk); then tells the queue how long the
    /// device took.
    fn settle_batch(&self, d: &mut DeviceBatches, k: usize, queue: &WorkQueue) -> Result<()> {
        let entry = &mut d.ring[k];
        let Some(event) = entry.event.take() else {
            return Ok(());
        };
        event.wait()?;
        let now = Instant::now();
        let started = d
            .last_done
            .map_or(entry.submitted, |t| t.max(entry.submitted));
        d.last_done = Some(now);
        let items = std::mem::take(&mut entry.items);
        let chunks = std::mem::take(&mut entry.chunks);
        // Cached only once every chunk of the batch has been checked.
        let kept = std::mem::take(&mut entry.kept);
        let outcomes = entry
            .desc
            .outcomes(items.len(), &|st| self.ops.describe_status(st))?;
        for ((i, expected), outcome) in items.into_iter().zip(outcomes) {
            let unit = &self.units[i];
            match outcome {
                Ok(n) if n == expected => {}
                Ok(n) => {
                    return Err((self.unit_error)(
                        unit,
                        format!(
                            "the device decoder produced {n} bytes where the chunk's stream \
                             holds {expected}"
                        ),
                    ));
                }
                Err(why) => {
                    return Err((self.unit_error)(
                        unit,
                        format!("the device decoder ({}) failed: {why}", d.compression),
                    ));
                }
            }
        }
        self.insert_kept(kept);
        if let Some(id) = entry.batch.take() {
            queue.device_done(id, chunks, now.saturating_duration_since(started));
        }
        Ok(())
    }
}
