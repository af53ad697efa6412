//! The staged write pipeline, the mirror of [`crate::pipeline`]: on the device, gather each
//! chunk's part of the source (with the transpose codec's permutation and the bytes codec's
//! byte swap fused into one strided copy), copy it into a host staging slot, then compress and
//! store it on CPU worker threads while the device gathers the next chunk.

use super::{Slot, allocate_slots, finish};
use crate::buffer::NDBuffer;
use crate::device::Event;
use crate::dtype::{ByteOrder, Order};
use crate::error::{Error, Result};
use crate::options::{Progress, ProgressFn};
use crate::zarr::EncodedLayout;
use crate::zarr::Unit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use zarrbuf_codecs::Strided;

/// How a chunk's bytes are laid out in its staging slot.
#[derive(Clone, Debug)]
pub(crate) enum Gathered {
    /// The whole chunk in the codec chain's encoded layout, ready for the bytes-to-bytes
    /// codecs (the part outside the request, if any, holds the fill value).
    FullChunk,
    /// Only the requested region, native byte order, C order (zarrs merges it into the chunk).
    Region,
}

/// Compresses and stores one staged chunk (called on worker threads).
pub(crate) type Consumer<'a> = dyn Fn(&Unit, &Gathered, &[u8]) -> Result<()> + Sync + 'a;

/// Everything a staged write needs besides the consumer.
pub(crate) struct StagedWrite<'a> {
    pub ops: std::sync::Arc<dyn crate::device::DeviceOps>,
    pub units: &'a [Unit],
    /// The layout of a full encoded chunk, or `None` when every chunk goes through zarrs.
    pub layout: Option<EncodedLayout>,
    /// Array coordinates of the source's element 0.
    pub request_start: Vec<u64>,
    /// One element of fill value, native byte order.
    pub fill_value: Vec<u8>,
    /// Array shape, to tell which chunks the request covers completely.
    pub array_shape: Vec<u64>,
    pub staging_bytes: usize,
    pub threads: usize,
    pub progress: Option<ProgressFn>,
}

impl StagedWrite<'_> {
    /// Whether the request covers every in-bounds element of the unit.
    fn covers_stored_part(&self, unit: &Unit) -> bool {
        unit.region
            .iter()
            .zip(unit.origin.iter().zip(&unit.shape))
            .zip(&self.array_shape)
            .all(|((r, (&o, s)), &n)| r.start == o && r.end == (o + s.get()).min(n))
    }

    fn plan(&self, unit: &Unit) -> Gathered {
        match &self.layout {
            Some(_) if self.covers_stored_part(unit) => Gathered::FullChunk,
            _ => Gathered::Region,
        }
    }

    /// Runs the pipeline over every unit of `data`.
    pub(crate) fn run(&self, data: &NDBuffer, consume: &Consumer<'_>) -> Result<()> {
        if self.units.is_empty() {
            return Ok(());
        }
        // As for reads: work in flight on the data is waited for once, before the slots' queues.
        data.buffer().written_region("a write")?.settle()?;
        let elem = data.dtype().size();
        let slots = allocate_slots(
            self.ops.as_ref(),
            self.units,
            elem,
            self.staging_bytes,
            self.threads,
            0,
        )?;
        let result = self.run_with_slots(data, consume, &slots);
        let drained = finish(self.ops.as_ref(), slots, self.units, elem);
        result.and(drained)
    }

    fn run_with_slots(
        &self,
        data: &NDBuffer,
        consume: &Consumer<'_>,
        slots: &[Slot],
    ) -> Result<()> {
        let (free_tx, free_rx) = mpsc::channel::<usize>();
        for i in 0..slots.len() {
            free_tx.send(i).expect("receiver alive");
        }
        let (work_tx, work_rx) = mpsc::channel::<(usize, usize, Gathered, usize, Event)>();
        let work_rx = Mutex::new(work_rx);
        let abort = AtomicBool::new(false);
        let first_error: Mutex<Option<Error>> = Mutex::new(None);
        let done: Mutex<Progress> = Mutex::new(Progress {
            chunks_done: 0,
            chunks_total: self.units.len(),
            bytes_done: 0,
        });
        let workers = self.threads.clamp(1, slots.len());
        let elem = data.dtype().size();

        std::thread::scope(|scope| {
            for _ in 0..workers {
                let free_tx = free_tx.clone();
                let (work_rx, abort, first_error, done) = (&work_rx, &abort, &first_error, &done);
                scope.spawn(move || {
                    loop {
                        let job = match work_rx.lock().map(|rx| rx.recv()) {
                            Ok(Ok(job)) => job,
                            _ => break,
                        };
                        let (i, slot_id, gathered, len, event) = job;
                        let unit = &self.units[i];
                        let result = event.wait().and_then(|()| {
                            let bytes = slots[slot_id].staging.as_host_bytes()?;
                            consume(unit, &gathered, &bytes[..len])
                        });
                        match result {
                            Ok(()) => {
                                if let Ok(mut p) = done.lock() {
                                    p.chunks_done += 1;
                                    p.bytes_done += (unit.region_shape().iter().product::<usize>()
                                        * elem)
                                        as u64;
                                    if let Some(cb) = &self.progress {
                                        cb(*p);
                                    }
                                }
                            }
                            Err(e) => {
                                abort.store(true, Ordering::Relaxed);
                                if let Ok(mut slot) = first_error.lock() {
                                    slot.get_or_insert(e);
                                }
                            }
                        }
                        let _ = free_tx.send(slot_id);
                    }
                });
            }
            drop(free_tx);
            let submitted = self.submit_all(data, slots, &free_rx, &work_tx, &abort);
            drop(work_tx);
            submitted
        })?;
        match first_error.into_inner().ok().flatten() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Queues the device gather and device-to-host copy of every unit, in order.
    fn submit_all(
        &self,
        data: &NDBuffer,
        slots: &[Slot],
        free: &mpsc::Receiver<usize>,
        work: &mpsc::Sender<(usize, usize, Gathered, usize, Event)>,
        abort: &AtomicBool,
    ) -> Result<()> {
        let elem = data.dtype().size();
        let dtype = data.dtype();
        for (i, unit) in self.units.iter().enumerate() {
            if abort.load(Ordering::Relaxed) {
                break;
            }
            let Ok(slot_id) = free.recv() else { break };
            let slot = &slots[slot_id];
            let region_shape = unit.region_shape();
            let src_offset =
                unit.offset_in_request(&self.request_start, data.offset(), data.strides());
            let src = Strided {
                offset: src_offset,
                strides: data.strides(),
            };
            let gathered = self.plan(unit);
            let len = match (&gathered, &self.layout) {
                (Gathered::FullChunk, Some(layout)) => {
                    let len = unit.num_elements() * elem;
                    let scratch = slot.scratch.try_slice(..len)?;
                    if !unit.is_whole() {
                        // Padding of edge chunks holds the fill value, as zarr writers store it.
                        let mut fill = self.fill_value.clone();
                        if layout.endian != ByteOrder::native() {
                            zarrbuf_codecs::host::byte_swap(&mut fill, dtype.swap_unit())?;
                        }
                        let n = [unit.num_elements()];
                        let s = [elem as isize];
                        self.ops.fill(
                            &slot.queue,
                            scratch.region()?,
                            Strided {
                                offset: 0,
                                strides: &s,
                            },
                            &n,
                            &fill,
                        )?;
                    }
                    let dst_strides = layout.decoded_strides(&unit.shape_usize(), elem);
                    let dst_offset = unit.offset_in_unit(&dst_strides);
                    let swap = if layout.endian == data.byte_order() {
                        0
                    } else {
                        dtype.swap_unit()
                    };
                    self.ops.strided_copy(
                        &slot.queue,
                        data.buffer().written_region("a write")?,
                        src,
                        scratch.region()?,
                        Strided {
                            offset: dst_offset,
                            strides: &dst_strides,
                        },
                        &region_shape,
                        elem,
                        swap,
                    )?;
                    len
                }
                _ => {
                    let len = region_shape.iter().product::<usize>() * elem;
                    let scratch = slot.scratch.try_slice(..len)?;
                    let dst_strides = Order::C.strides(&region_shape, elem);
                    let swap = if data.byte_order() == ByteOrder::native() {
                        0
                    } else {
                        dtype.swap_unit()
                    };
                    self.ops.strided_copy(
                        &slot.queue,
                        data.buffer().written_region("a write")?,
                        src,
                        scratch.region()?,
                        Strided {
                            offset: 0,
                            strides: &dst_strides,
                        },
                        &region_shape,
                        elem,
                        swap,
                    )?;
                    len
                }
            };
            let (scratch, staging) = (
                slot.scratch.try_slice(..len)?,
                slot.staging.try_slice(..len)?,
            );
            self.ops
                .copy(&slot.queue, scratch.region()?, staging.region()?)?;
            let event = self.ops.record(&slot.queue)?;
            if work.send((i, slot_id, gathered, len, event)).is_err() {
                break;
            }
        }
        Ok(())
    }
}
