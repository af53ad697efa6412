//! The device decoder's side of a staged read: chunks handed over still compressed are
//! gathered into batches, decompressed on the device (nvCOMP on CUDA, its host twin on the
//! host), checked chunk by chunk and scattered into the output.
//!
//! Batches are the hybrid queue's ([`super::hybrid::WorkQueue`]): the device takes a batch of
//! units, the workers fetch and check them, and each compressed chunk is copied — as it
//! comes in, on a queue of its own — from the worker's staging slot into the batch's input
//! buffer in device memory, at the next [`CHUNK_ALIGN`]-byte boundary. Its slot is free
//! again once that copy is done, so a batch holds compressed bytes only, and its size is
//! the batch plan's ([`super::batch_plan`]), not the slots'. Once every unit of the batch has
//! come in, the batch is submitted: decompress every chunk straight into the output where
//! the layout allows, into device scratch elsewhere, then the fused scatter kernel. Two
//! batches are in flight: the copies into one overlap the decompression of the other.
//!
//! [`DeviceBatches`] owns that state for one read of the general route (`slot_ring.rs`),
//! whose coordinator calls its steps: gather a chunk as it comes in, count a unit arrived,
//! settle finished batches, finish the rest.

use super::batch_plan::{BatchPlan, BatchPlanInput, align_up, batch_plan};
use super::device_parts::{Compressed, DeviceDecode, DeviceParts, MAX_STREAMS_PER_CHUNK};
use super::hybrid::{BatchId, WorkQueue};
use super::stage_clock::{DeviceClock, Timed};
use super::tuning::Tuning;
use crate::compression_formats::Compression;
use crate::device::{BatchDesc, BatchItem, DeviceOps, Event, Mark, Queue, Unshuffle};
use crate::errors::{Error, Result};
use crate::memory::Region;
use crate::options::Progress;
use crate::pipeline::cache::device_cache::Kept;
use crate::pipeline::cache::miss_keeper::MissKeeper;
use crate::pipeline::read::scatter::{PendingScatter, Scatter};
use crate::pipeline::{Slot, StagedRead};
use crate::stage_timings::Stage;
use crate::zarr::{BloscFrame, STREAM_ALIGN, Unit};
use std::sync::mpsc;
use std::time::Instant;
use zarrbuf_codecs::host::Shuffle;

/// Most items (streams) one batch takes.
const MAX_BATCH_ITEMS: usize = 65_536;

/// One entry of the ring of batches: descriptor memory, the device buffer the compressed
/// chunks are copied into, device scratch, and the batch last submitted with it.
struct BatchSlot {
    desc: BatchDesc,
    /// `plan.batch_bytes` of device memory.
    input: Region,
    /// Decoded chunks that do not go straight into the output, and (a region of its own,
    /// as the unshuffle reads one and writes the other) blosc chunks unshuffled there
    /// before their scatter; grown on demand.
    scratch: [Option<Region>; 2],
    event: Option<Event>,
    /// (unit index, expected decoded size) of each item of the batch last submitted.
    items: Vec<(usize, usize)>,
    /// The chunks of the batch last submitted, and the queue's batch it belongs to.
    chunks: usize,
    batch: Option<u64>,
    /// When the batch last submitted was.
    submitted: Instant,
    /// The decoded chunks of the batch last submitted that go to the read's cache once the
    /// batch has finished and they were checked (unit index, device buffer).
    kept: Vec<(usize, Kept)>,
    /// The timed device work of the batch last submitted (stage timings only).
    timed: Vec<Timed>,
}

/// A batch of the queue being gathered.
struct Gathering {
    batch: BatchId,
    /// Units of the batch that have come in (compressed or not).
    arrived: usize,
    /// The ring entry whose input holds the chunks so far (taken at the first chunk).
    entry: Option<usize>,
    /// (unit index, offset in the entry's input, chunk).
    chunks: Vec<(usize, usize, Compressed)>,
    /// Bytes of the entry's input used, and the batch items the chunks take.
    bytes: usize,
    items: usize,
    /// The chunks' timed copies into the input (stage timings only).
    timed: Vec<Timed>,
}

impl Gathering {
    /// A batch whose gathering begins: nothing in yet.
    fn new(batch: BatchId) -> Self {
        Gathering {
            batch,
            arrived: 0,
            entry: None,
            chunks: Vec::new(),
            bytes: 0,
            items: 0,
            timed: Vec::new(),
        }
    }
}

/// The device decoder's state in one read: the batches being gathered and the ring of
/// submitted ones.
pub(in crate::pipeline) struct DeviceBatches<'r> {
    read: &'r StagedRead<'r>,
    /// Where decoded units that a cache keeps go.
    keep: MissKeeper<'r>,
    compression: Compression,
    /// Where batches are decompressed and scattered.
    queue: Queue,
    /// Where chunks are copied into the batches' input buffers.
    copy_queue: Queue,
    plan: BatchPlan,
    plan_input: BatchPlanInput,
    /// Most items (streams) in one batch: the descriptors' capacity.
    item_capacity: usize,
    ring: Vec<BatchSlot>,
    next: usize,
    gathering: Vec<Gathering>,
    /// When the last batch checked was seen finished (a batch's device time starts at its
    /// submission or there, whichever is later).
    last_done: Option<Instant>,
    /// The largest compressed chunk gathered so far, for the plan's estimate.
    largest_seen: usize,
    /// The device side of the read's stage timings, when it has them.
    clock: Option<DeviceClock>,
    /// The end mark of the last chunk copied into a batch (timed reads only).
    last_copy: Option<Mark>,
}

/// What follows a device batch for one of its chunks.
enum After<'f> {
    /// Unit `.0` decoded straight into its place: the output, or its cache buffer.
    Done(usize),
    /// Scatter unit `.0`'s decoded bytes into the output.
    Scatter(usize, Region),
    /// Undo blosc's shuffle from `.2` into `.3`, then (when `.5`) scatter unit `.0` from there.
    Unshuffle(usize, Shuffle, Region, Region, &'f BloscFrame, bool),
}

impl<'r> DeviceBatches<'r> {
    /// The device decoder of `read` (general route; `slot_bytes`: the largest decoded unit),
    /// its batches sized by the batch plan from the device's SM count and the staging
    /// budget, and its ring of batch buffers allocated.
    pub(in crate::pipeline) fn new(
        read: &'r StagedRead<'r>,
        keep: MissKeeper<'r>,
        decode: &DeviceDecode,
        slot_bytes: usize,
    ) -> Result<Self> {
        let ops = read.ops.as_ref();
        let plan_input = BatchPlanInput {
            sm_count: ops.sm_count()?,
            chunks: read.units.len(),
            decoded_chunk_bytes: slot_bytes,
            compressed_chunk_bytes: None,
            staging_bytes: read.staging_bytes,
            tuning: super::tuning::tuning()?,
        };
        let plan = batch_plan(plan_input);
        let item_capacity = if decode.blosc {
            (plan.chunks_per_batch * 32).clamp(MAX_STREAMS_PER_CHUNK, MAX_BATCH_ITEMS)
        } else {
            plan.chunks_per_batch
        };
        let now = Instant::now();
        let mut ring = Vec::with_capacity(plan.batches_in_flight);
        for _ in 0..plan.batches_in_flight {
            ring.push(BatchSlot {
                desc: ops.new_batch_desc(item_capacity)?,
                input: ops.alloc(plan.batch_bytes)?,
                scratch: [None, None],
                event: None,
                items: Vec::new(),
                chunks: 0,
                batch: None,
                submitted: now,
                kept: Vec::new(),
                timed: Vec::new(),
            });
        }
        for entry in &ring {
            entry.input.settle()?;
        }
        let queue = ops.new_queue()?;
        let clock = match &read.stage_timings {
            Some(t) => Some(DeviceClock::new(ops, &queue, t.clone())?),
            None => None,
        };
        Ok(DeviceBatches {
            read,
            keep,
            compression: decode.compression,
            queue,
            copy_queue: ops.new_queue()?,
            plan,
            plan_input,
            item_capacity,
            ring,
            next: 0,
            gathering: Vec::new(),
            last_done: None,
            largest_seen: 0,
            clock,
            last_copy: None,
        })
    }

    /// Most chunks in one batch (the plan's).
    pub(in crate::pipeline) fn chunks_per_batch(&self) -> usize {
        self.plan.chunks_per_batch
    }

    /// The device decoder's knobs this read runs with.
    pub(in crate::pipeline) fn tuning(&self) -> Tuning {
        self.plan_input.tuning
    }

    /// The gathering of `batch`, begun if new.
    fn gathering(&mut self, batch: BatchId) -> usize {
        if let Some(g) = self.gathering.iter().position(|g| g.batch == batch) {
            return g;
        }
        self.gathering.push(Gathering::new(batch));
        self.gathering.len() - 1
    }

    /// A timing mark at the end of `q` when the read is timed.
    fn mark(&self, q: &Queue) -> Result<Option<Mark>> {
        match self.clock {
            Some(_) => self.read.ops.mark(q).map(Some),
            None => Ok(None),
        }
    }

    /// Waits for everything enqueued on the decoder's queues (no device work may outlive a
    /// read, whatever stopped it).
    pub(in crate::pipeline) fn drain(&self) -> Result<()> {
        let ops = self.read.ops.as_ref();
        ops.synchronize(&self.copy_queue)?;
        ops.synchronize(&self.queue)
    }

    /// Takes a compressed chunk of `batch` from its slot: copies it into the batch's input
    /// buffer (submitting the batch first when it has no room left) and frees the slot once
    /// the copy is done.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::pipeline) fn gather(
        &mut self,
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
        let mut g = self.gathering(batch);
        let full = {
            let g = &self.gathering[g];
            !g.chunks.is_empty()
                && (g.bytes + need > self.plan.batch_bytes
                    || g.items + items > self.item_capacity
                    || g.chunks.len() >= self.plan.chunks_per_batch)
        };
        if full {
            // The batch goes as it is; the rest of its units start another.
            let done = std::mem::replace(&mut self.gathering[g], Gathering::new(batch));
            self.gathering[g].arrived = done.arrived;
            self.submit(done, s, progress)?;
            g = self.gathering(batch);
        }
        let k = match self.gathering[g].entry {
            Some(k) => k,
            None => {
                // The next entry no other batch is gathering into (there is one: batches
                // are gathered for at most as many open batches of the queue as entries).
                let n = self.ring.len();
                let k = (0..n)
                    .map(|j| (self.next + j) % n)
                    .find(|&k| self.gathering.iter().all(|o| o.entry != Some(k)))
                    .ok_or_else(|| {
                        Error::InvalidArgument(
                            "more device batches gathering than batch buffers \
                             (internal error: please report)"
                                .into(),
                        )
                    })?;
                self.next = (k + 1) % n;
                self.settle_batch(k, queue)?;
                self.gathering[g].entry = Some(k);
                k
            }
        };
        let at = self.gathering[g].bytes;
        let input = &self.ring[k].input;
        if at + chunk.len > input.len() || items > self.item_capacity {
            return Err(Error::InvalidArgument(format!(
                "a chunk of {} compressed bytes and {items} streams does not fit a batch of {} \
                 bytes and {} streams (internal error: please report)",
                chunk.len,
                input.len(),
                self.item_capacity
            )));
        }
        let (slot_id, slot) = slot;
        let staged = slot.staging.try_slice(..chunk.len)?;
        let to = input.sub(at, at + chunk.len);
        let (copied, timed) = self.copy_in(staged.region()?, &to)?;
        if let Ok(mut p) = slot.pending.lock() {
            *p = Some(copied);
        }
        let _ = free.send(slot_id);
        self.largest_seen = self.largest_seen.max(chunk.len);
        let g = &mut self.gathering[g];
        g.timed.extend(timed);
        g.chunks.push((unit, at, chunk));
        g.bytes += need;
        g.items += items;
        Ok(())
    }

    /// Copies a chunk from its staging slot into a batch's input on the copy queue; returns
    /// the event the slot waits for and, when the read is timed, the copy's timing. The
    /// copy's end mark is that event, and it starts where the copy before it ends while that
    /// one still runs (the queue runs them in order), else at a new mark: about one event a
    /// chunk, as untimed.
    fn copy_in(&mut self, from: &Region, to: &Region) -> Result<(Event, Option<Timed>)> {
        let ops = self.read.ops.as_ref();
        if self.clock.is_none() {
            ops.copy(&self.copy_queue, from, to)?;
            return Ok((ops.record(&self.copy_queue)?, None));
        }
        let start = match self.last_copy.take() {
            Some(end) if !end.is_complete() => end,
            _ => ops.mark(&self.copy_queue)?,
        };
        ops.copy(&self.copy_queue, from, to)?;
        let end = ops.mark(&self.copy_queue)?;
        self.last_copy = Some(end.clone());
        let timed = Timed {
            stage: Stage::H2d,
            bytes: to.len() as u64,
            start,
            end: end.clone(),
        };
        Ok((Event::of_mark(&end), Some(timed)))
    }

    /// One unit of `batch` has come in (gathered, or decoded elsewhere): once all have, the
    /// batch is submitted.
    pub(in crate::pipeline) fn arrived(
        &mut self,
        batch: BatchId,
        s: &Scatter<'_>,
        progress: &mut Progress,
        queue: &WorkQueue,
    ) -> Result<()> {
        let g = self.gathering(batch);
        self.gathering[g].arrived += 1;
        if self.gathering[g].arrived < batch.len {
            return Ok(());
        }
        let done = self.gathering.swap_remove(g);
        if !done.chunks.is_empty() {
            self.submit(done, s, progress)?;
        }
        // Later batches take as many chunks as fit if none is larger than the largest seen
        // so far, never more than the plan's.
        if self.largest_seen > 0 {
            let replanned = batch_plan(BatchPlanInput {
                compressed_chunk_bytes: Some(self.largest_seen),
                ..self.plan_input
            });
            queue.set_max_batch(replanned.chunks_per_batch.min(self.plan.chunks_per_batch));
        }
        Ok(())
    }

    /// Submits a gathered batch: decompress every chunk into the output or scratch, then
    /// unshuffle and scatter what needs it, and record the event its ring entry waits for.
    fn submit(&mut self, mut g: Gathering, s: &Scatter<'_>, progress: &mut Progress) -> Result<()> {
        let Some(k) = g.entry else {
            return Ok(());
        };
        let read = self.read;
        // Where each chunk decodes: straight into the output, or scratch (and a second
        // scratch region for blosc chunks unshuffled there before their scatter).
        let align = self.compression.required_alignment();
        let mut places = Vec::with_capacity(g.chunks.len());
        let mut scratch_bytes = [0, 0];
        let mut keeps = Vec::with_capacity(g.chunks.len());
        for (i, _, chunk) in &g.chunks {
            let unit = &read.units[*i];
            let expected = unit.num_elements() * s.elem;
            // With a cache, each chunk decodes into a buffer of its own: straight into it
            // when the decoded layout is the cache's, else into scratch and copied there.
            let kept = self.keep.new_kept(unit, s.elem)?;
            let direct = match &kept {
                Some(k) if self.keep.decoded_is_kept_layout(unit, k, s.out) => {
                    Some(k.region()?.clone())
                }
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
            scratch_for(read.ops.as_ref(), &mut self.ring[k], 0, scratch_bytes[0])?,
            scratch_for(read.ops.as_ref(), &mut self.ring[k], 1, scratch_bytes[1])?,
        ];
        // Decompression reads what the copy queue wrote.
        read.ops.wait_for(&self.queue, &self.copy_queue)?;
        let entry = &self.ring[k];
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
                            read.ops.copy(&self.queue, &from, &to)?;
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
        let [decoding, decoded] = self.decompress(k, &items)?;
        let (kept_all, scattered) = self.after_batch(&self.queue, &after, keeps, s)?;
        self.keep.fence_kept(&self.queue, &kept_all)?;
        let done = self.mark(&self.queue)?;
        g.timed
            .extend(batch_timings([decoding, decoded, done], &items, scattered));
        let event = read.ops.record(&self.queue)?;
        for (i, _, _) in &g.chunks {
            self.read
                .report(progress, &read.units[*i].region_shape(), s.elem);
        }
        let entry = &mut self.ring[k];
        entry.event = Some(event);
        entry.items = item_units;
        entry.chunks = g.chunks.len();
        entry.batch = Some(g.batch.id);
        entry.submitted = submitted;
        entry.kept = kept_all;
        entry.timed = g.timed;
        Ok(())
    }

    /// Enqueues the decompression of a batch's `items` with ring entry `k`'s descriptors;
    /// returns the timing marks around it when the read is timed.
    fn decompress(&mut self, k: usize, items: &[BatchItem]) -> Result<[Option<Mark>; 2]> {
        let decoding = self.mark(&self.queue)?;
        if !items.is_empty() {
            self.read.ops.decompress_batch(
                &self.queue,
                self.compression,
                items,
                &mut self.ring[k].desc,
            )?;
        }
        Ok([decoding, self.mark(&self.queue)?])
    }

    /// Enqueues what follows a batch's decompression for each of its chunks (unshuffle,
    /// layout copy into its cache buffer), in order, then every scatter into the output
    /// together (one batched copy per byte-swap unit: after all of the above, so each
    /// reads what its unshuffle or layout copy wrote); returns the chunks to keep and the
    /// bytes scattered into the output.
    fn after_batch(
        &self,
        q: &Queue,
        after: &[After<'_>],
        keeps: Vec<Option<Kept>>,
        s: &Scatter<'_>,
    ) -> Result<(Vec<(usize, Kept)>, u64)> {
        let mut kept_all = Vec::new();
        let mut scatters = Vec::with_capacity(after.len());
        for (next, kept) in after.iter().zip(keeps) {
            match next {
                After::Done(i) => {
                    if let Some(k) = &kept {
                        let unit = &self.read.units[*i];
                        scatters.push(self.keep.kept_scatter(unit, k, s.out)?);
                    }
                }
                After::Scatter(i, decoded) => scatters.push(self.keep.prepare_place(
                    q,
                    &self.read.units[*i],
                    decoded,
                    kept.as_ref(),
                    s,
                )?),
                After::Unshuffle(i, shuffle, from, to, frame, scatter) => {
                    self.read.ops.blosc_unshuffle(
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
                    let unit = &self.read.units[*i];
                    if *scatter {
                        scatters.push(self.keep.prepare_place(q, unit, to, kept.as_ref(), s)?);
                    } else if let Some(k) = &kept {
                        scatters.push(self.keep.kept_scatter(unit, k, s.out)?);
                    }
                }
            }
            let i = match next {
                After::Done(i) | After::Scatter(i, _) | After::Unshuffle(i, ..) => *i,
            };
            kept_all.extend(kept.map(|k| (i, k)));
        }
        PendingScatter::enqueue_all(self.read.ops.as_ref(), q, &scatters, s.out)?;
        let scattered = scatters.iter().map(|p| p.bytes(s.elem) as u64).sum();
        Ok((kept_all, scattered))
    }

    /// Where a unit's decoded bytes can go straight into the output, skipping the scratch
    /// slot and the scatter: the unit lies whole inside the request, its decoded bytes are one
    /// contiguous run of the output (same byte order, no transpose, the chunk spanning the
    /// output's inner dimensions), the output is in the device decoder's memory, and the run
    /// starts at an address aligned to `align` (nvCOMP's requirement, and 8 for blosc
    /// streams). `None`: decode into scratch and scatter.
    fn direct_target(&self, unit: &Unit, s: &Scatter<'_>, align: usize) -> Result<Option<Region>> {
        let read = self.read;
        if s.out.memory() != read.ops.memory() || !read.is_one_run(unit, s.out, s.swap) {
            return Ok(None);
        }
        let region = s.out.buffer().region()?;
        let start = unit.offset_in_request(&read.request_start, s.out.offset(), s.out.strides());
        let Some(end) = start
            .checked_add(unit.num_elements() * s.elem)
            .filter(|&end| end <= region.len())
        else {
            return Ok(None);
        };
        let target = region.sub(start, end);
        let addr = target
            .device_addr()
            .or_else(|| target.host_ptr().map(|p| p as u64));
        let align = align.max(STREAM_ALIGN) as u64;
        Ok(addr.filter(|a| a.is_multiple_of(align)).map(|_| target))
    }

    /// Settles every ring entry whose batch has finished (never blocks).
    pub(in crate::pipeline) fn settle_finished(&mut self, queue: &WorkQueue) -> Result<()> {
        for k in 0..self.ring.len() {
            if self.ring[k].event.as_ref().is_some_and(Event::is_complete) {
                self.settle_batch(k, queue)?;
            }
        }
        Ok(())
    }

    /// Submits what is still gathered and waits for every batch, checking each.
    pub(in crate::pipeline) fn finish_batches(
        &mut self,
        s: &Scatter<'_>,
        progress: &mut Progress,
        queue: &WorkQueue,
    ) -> Result<()> {
        for g in std::mem::take(&mut self.gathering) {
            self.submit(g, s, progress)?;
        }
        for k in 0..self.ring.len() {
            self.settle_batch(k, queue)?;
        }
        if let Some(clock) = self.clock.as_mut() {
            clock.finish()?;
        }
        Ok(())
    }

    /// Waits for ring entry `k`'s last batch and checks every chunk of it: decoded, and to
    /// exactly its size (a failure names the chunk); then tells the queue how long the
    /// device took.
    fn settle_batch(&mut self, k: usize, queue: &WorkQueue) -> Result<()> {
        let entry = &mut self.ring[k];
        let Some(event) = entry.event.take() else {
            return Ok(());
        };
        event.wait()?;
        let now = Instant::now();
        if let Some(clock) = self.clock.as_mut() {
            clock.settle(std::mem::take(&mut entry.timed));
        }
        let started = self
            .last_done
            .map_or(entry.submitted, |t| t.max(entry.submitted));
        self.last_done = Some(now);
        let items = std::mem::take(&mut entry.items);
        let chunks = std::mem::take(&mut entry.chunks);
        // Cached only once every chunk of the batch has been checked.
        let kept = std::mem::take(&mut entry.kept);
        let outcomes = entry
            .desc
            .outcomes(items.len(), &|st| self.read.ops.describe_status(st))?;
        for ((i, expected), outcome) in items.into_iter().zip(outcomes) {
            let unit = &self.read.units[i];
            match outcome {
                Ok(n) if n == expected => {}
                Ok(n) => {
                    return Err((self.read.unit_error)(
                        unit,
                        format!(
                            "the device decoder produced {n} bytes where the chunk's stream \
                             holds {expected}"
                        ),
                    ));
                }
                Err(why) => {
                    return Err((self.read.unit_error)(
                        unit,
                        format!("the device decoder ({}) failed: {why}", self.compression),
                    ));
                }
            }
        }
        self.keep.insert_kept(kept);
        if let Some(id) = entry.batch.take() {
            queue.device_done(id, chunks, now.saturating_duration_since(started));
        }
        Ok(())
    }
}

/// A batch's timed device work from its marks: the decompression of `items` (their
/// decoded bytes) between the first two, what follows it (`scattered` bytes placed) between
/// the last two; nothing when the read is not timed.
fn batch_timings(marks: [Option<Mark>; 3], items: &[BatchItem], scattered: u64) -> Vec<Timed> {
    let [Some(a), Some(b), Some(c)] = marks else {
        return Vec::new();
    };
    let nvcomp = items.iter().map(|it| it.output.len() as u64).sum();
    vec![
        Timed {
            stage: Stage::Nvcomp,
            bytes: nvcomp,
            start: a,
            end: b.clone(),
        },
        Timed {
            stage: Stage::Scatter,
            bytes: scattered,
            start: b,
            end: c,
        },
    ]
}

/// Entry's scratch region `n`, grown to at least `bytes` (an empty region when none is
/// needed). The entry's last batch has finished (the entry was settled when the batch began
/// gathering), so a region it outgrew may go.
fn scratch_for(
    ops: &dyn DeviceOps,
    entry: &mut BatchSlot,
    n: usize,
    bytes: usize,
) -> Result<Region> {
    if bytes == 0 {
        return Ok(entry.input.sub(0, 0));
    }
    if let Some(r) = entry.scratch[n].as_ref().filter(|r| r.len() >= bytes) {
        return Ok(r.clone());
    }
    let r = ops.alloc(bytes)?;
    r.settle()?;
    entry.scratch[n] = Some(r.clone());
    Ok(r)
}
