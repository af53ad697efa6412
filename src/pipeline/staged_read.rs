//! The staged read pipeline: fetch → CPU decompress into a staging slot → copy to the device
//! → device kernels (byte swap + transpose + scatter, fused into one strided copy; fill for
//! missing chunks).
//!
//! Staging slots form a ring: worker threads decode unit k+1.. into free slots while the
//! device copies and scatters unit k. A slot is reused only after the device work that read
//! it has finished (its event). Host memory is bounded by the slot count × slot size.
//!
//! The pipeline is written against [`DeviceOps`]; with [`crate::device::HostOps`] every step runs
//! on the host, which is how CI exercises this logic without a GPU.

use super::{Slot, allocate_slots, finish};
use crate::buffer::NDBuffer;
use crate::device::DeviceOps;
use crate::dtype::ByteOrder;
use crate::error::{Error, Result};
use crate::options::{Progress, ProgressFn};
use crate::zarr::EncodedLayout;
use crate::zarr::Unit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use zarrbuf_codecs::Strided;

/// What decoding one unit into a staging slot produced.
pub(crate) enum Produced {
    /// The unit is not stored: it reads as the fill value.
    Missing,
    /// This many bytes were written at the start of the slot.
    Decoded(usize),
}

/// Fetches and decodes one unit into the slot (called on worker threads).
pub(crate) type Producer<'a> = dyn Fn(&Unit, &mut [u8]) -> Result<Produced> + Sync + 'a;

/// Everything a staged read needs besides the producer.
pub(crate) struct StagedRead<'a> {
    pub ops: Arc<dyn DeviceOps>,
    pub units: &'a [Unit],
    pub layout: EncodedLayout,
    /// Array coordinates of the output's element 0.
    pub request_start: Vec<u64>,
    /// One element of fill value, native byte order.
    pub fill_value: Vec<u8>,
    pub staging_bytes: usize,
    pub threads: usize,
    pub progress: Option<ProgressFn>,
}

impl StagedRead<'_> {
    /// Runs the pipeline, writing every unit's region of the request into `out`.
    pub(crate) fn run(&self, out: &NDBuffer, produce: &Producer<'_>) -> Result<()> {
        if self.units.is_empty() {
            return Ok(());
        }
        // The slots' queues do not consult the output's fences operation by operation:
        // whatever is in flight on it (its allocation, a copy) is waited for once, here.
        out.buffer().region().settle()?;
        let elem = out.dtype().size();
        let slots = allocate_slots(
            self.ops.as_ref(),
            self.units,
            elem,
            self.staging_bytes,
            self.threads,
        )?;
        let result = self.run_with_slots(out, produce, &slots);
        // Whatever happened, no device work may outlive this call.
        let drained = finish(self.ops.as_ref(), slots, self.units, elem);
        result.and(drained)
    }

    fn run_with_slots(&self, out: &NDBuffer, produce: &Producer<'_>, slots: &[Slot]) -> Result<()> {
        let (free_tx, free_rx) = mpsc::channel::<usize>();
        for i in 0..slots.len() {
            free_tx.send(i).expect("receiver alive");
        }
        let free_rx = Mutex::new(free_rx);
        let (ready_tx, ready_rx) = mpsc::channel::<(usize, usize, Result<Produced>)>();
        let next = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        let workers = self.threads.clamp(1, slots.len().max(1));

        std::thread::scope(|scope| {
            for _ in 0..workers {
                let ready_tx = ready_tx.clone();
                let (free_rx, next, abort) = (&free_rx, &next, &abort);
                scope.spawn(move || {
                    loop {
                        if abort.load(Ordering::Relaxed) {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= self.units.len() {
                            break;
                        }
                        let slot_id = match free_rx.lock().map(|rx| rx.recv()) {
                            Ok(Ok(s)) => s,
                            _ => break,
                        };
                        let slot = &slots[slot_id];
                        let waited = match slot.pending.lock().map(|mut p| p.take()) {
                            Ok(Some(event)) => event.wait(),
                            _ => Ok(()),
                        };
                        let result = waited.and_then(|()| {
                            slot.staging
                                .with_host_mut(|bytes| produce(&self.units[i], bytes))
                        });
                        if ready_tx.send((i, slot_id, result)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(ready_tx);
            let outcome = self.submit_all(out, slots, &ready_rx, &free_tx, elem_of(out));
            if outcome.is_err() {
                abort.store(true, Ordering::Relaxed);
            }
            // Unblock workers waiting for a slot.
            drop(free_tx);
            outcome
        })
    }

    /// The coordinating loop: takes decoded units as they come and queues their device work.
    fn submit_all(
        &self,
        out: &NDBuffer,
        slots: &[Slot],
        ready: &mpsc::Receiver<(usize, usize, Result<Produced>)>,
        free: &mpsc::Sender<usize>,
        elem: usize,
    ) -> Result<()> {
        let swap = if self.layout.endian == out.byte_order() {
            0
        } else {
            out.dtype().swap_unit()
        };
        let mut fill = self.fill_value.clone();
        if out.byte_order() != ByteOrder::native() {
            zarrbuf_codecs::host::byte_swap(&mut fill, out.dtype().swap_unit())?;
        }
        let mut progress = Progress {
            chunks_done: 0,
            chunks_total: self.units.len(),
            bytes_done: 0,
        };
        for _ in 0..self.units.len() {
            let (i, slot_id, produced) = ready
                .recv()
                .map_err(|_| Error::Cancelled("a decoding thread stopped unexpectedly".into()))?;
            let unit = &self.units[i];
            let slot = &slots[slot_id];
            let region_shape = unit.region_shape();
            let dst_offset =
                unit.offset_in_request(&self.request_start, out.offset(), out.strides());
            let dst = Strided {
                offset: dst_offset,
                strides: out.strides(),
            };
            match produced? {
                Produced::Missing => {
                    self.ops.fill(
                        &slot.queue,
                        out.buffer().region(),
                        dst,
                        &region_shape,
                        &fill,
                    )?;
                }
                Produced::Decoded(len) => {
                    let expected = unit.num_elements() * elem;
                    if len != expected {
                        return Err(Error::ShapeMismatch(format!(
                            "chunk {:?} decoded to {len} bytes, expected {expected} for shape {:?}",
                            unit.indices, unit.shape
                        )));
                    }
                    let (staged, scratch) = (
                        slot.staging.try_slice(..len)?,
                        slot.scratch.try_slice(..len)?,
                    );
                    self.ops
                        .copy(&slot.queue, staged.region(), scratch.region())?;
                    let shape = unit.shape_usize();
                    let src_strides = self.layout.decoded_strides(&shape, elem);
                    let src_offset = unit.offset_in_unit(&src_strides);
                    let src = Strided {
                        offset: src_offset,
                        strides: &src_strides,
                    };
                    self.ops.strided_copy(
                        &slot.queue,
                        scratch.region(),
                        src,
                        out.buffer().region(),
                        dst,
                        &region_shape,
                        elem,
                        swap,
                    )?;
                }
            }
            let event = self.ops.record(&slot.queue)?;
            if let Ok(mut p) = slot.pending.lock() {
                *p = Some(event);
            }
            let _ = free.send(slot_id);
            progress.chunks_done += 1;
            progress.bytes_done += (region_shape.iter().product::<usize>() * elem) as u64;
            if let Some(cb) = &self.progress {
                cb(progress);
            }
        }
        Ok(())
    }
}

fn elem_of(out: &NDBuffer) -> usize {
    out.dtype().size()
}
