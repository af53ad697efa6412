//! The staged write pipeline, the mirror of [`crate::pipeline`]: on the device, gather each
//! chunk's part of the source (with the transpose codec's permutation and the bytes codec's
//! byte swap fused into one strided copy), copy it into a host staging slot, then compress and
//! store it on CPU worker threads while the device gathers the next chunk.
//!
//! With a device compressor ([`DeviceCompress`]), chunks the write covers whole are gathered
//! into batches instead and compressed on the device ([`CompressBatches`]); only their
//! compressed bytes (and for zlib the Adler-32 piece sums) come back to host memory, and the
//! workers frame and store them.
//!
//! With the host "device" ([`crate::device::HostOps`]) every device step runs at once on the
//! thread that queues it, so the general route would gather into scratch and copy it into
//! staging, both on the one coordinating thread. Host writes instead have each worker gather
//! its chunk straight into its slot's staging memory, in parallel, once.

use super::write_batches::{ADLER_PIECE, CompressBatches, Compressed, MAX_WRITE_BATCH};
use crate::buffer::{Buffer, NDBuffer};
use crate::compression_formats::CompressSettings;
use crate::data_types::{ByteOrder, Order};
use crate::device::StridedCopy;
use crate::device::{Event, Queue};
use crate::errors::{Error, Result};
use crate::options::{Progress, ProgressFn};
use crate::pipeline::{Slot, allocate_slots, finish, largest_unit_bytes};
use crate::place::Memory;
use crate::zarr::EncodedLayout;
use crate::zarr::Unit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::TryRecvError;
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
    /// The whole chunk as for `FullChunk`, compressed on the device: the consumer gets no
    /// staged bytes, and a [`DeviceChunk`].
    Compressed {
        /// The uncompressed chunk's size.
        len: usize,
    },
    /// Not gathered: the consumer reads the unit straight from the source (host route,
    /// units [`StagedWrite::in_place`] picks); the consumer gets no staged bytes.
    InPlace,
}

/// Compresses (or frames) and stores one staged chunk (called on worker threads): the
/// unit, how it was gathered, its staged bytes, and for [`Gathered::Compressed`] what the
/// device produced.
pub(crate) type Consumer<'a> =
    dyn Fn(&Unit, &Gathered, &[u8], Option<DeviceChunk<'_>>) -> Result<()> + Sync + 'a;

/// A chunk compressed on the device, as it reached host memory.
pub(crate) struct DeviceChunk<'a> {
    /// The device's compressed stream.
    pub compressed: &'a [u8],
    /// The Adler-32 of the uncompressed chunk, when [`DeviceCompress::adler32`].
    pub adler32: Option<u32>,
}

/// Compression on the device for chunks the write covers whole.
pub(crate) struct DeviceCompress {
    pub settings: CompressSettings,
    /// Sum each chunk for its Adler-32 on the device too (zlib).
    pub adler32: bool,
}

/// A chunk handed to the workers: its unit, slot, how it was gathered, its staged length,
/// its compressed length (device compression), and the event after which its bytes are in
/// host memory. On the host route the worker gathers it itself (`len` is then unused).
struct Job {
    unit: usize,
    slot: usize,
    gathered: Gathered,
    len: usize,
    compressed: Option<usize>,
    event: Event,
}

/// What the workers of one run share: the source, the consumer, the slots, the device
/// compressor's host outputs per slot, the job queue, and how the run stands.
struct Workers<'w> {
    data: &'w NDBuffer,
    consume: &'w Consumer<'w>,
    slots: &'w [Slot],
    /// Per slot, the device compressor's output and its Adler-32 piece sums, in host memory
    /// (empty without device compression).
    host_out: Vec<Buffer>,
    host_sums: Vec<Buffer>,
    /// The workers gather their own chunks ([`StagedWrite::gathers_on_workers`]).
    on_workers: bool,
    work: Mutex<mpsc::Receiver<Job>>,
    abort: AtomicBool,
    first_error: Mutex<Option<Error>>,
    done: Mutex<Progress>,
}

/// The Adler-32 of the device-compressed chunk in slot `slot_id`, combined from the piece
/// sums the device took of it; `None` when the write takes none.
fn chunk_adler32(host_sums: &[Buffer], slot_id: usize, gathered: &Gathered) -> Result<Option<u32>> {
    let (Gathered::Compressed { len }, Some(sums)) = (gathered, host_sums.get(slot_id)) else {
        return Ok(None);
    };
    let sums = sums.as_host_bytes()?;
    let words: Vec<u32> = sums
        .chunks_exact(4)
        .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    Ok(Some(zarrbuf_codecs::host::adler32_combine(
        &words,
        *len,
        ADLER_PIECE,
    )))
}

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
    /// Compression on the device, when this write uses it.
    pub device_compress: Option<DeviceCompress>,
    /// The error for a unit the device compressor failed on (names the array and chunk).
    pub unit_error: &'a (dyn Fn(&Unit, String) -> Error + Sync),
    /// On the host route, the units the consumer encodes straight from the source
    /// ([`Gathered::InPlace`]): whole shards, whose encoder cuts its inner chunks out of
    /// the caller's array itself, so gathering the shard first would only copy it.
    pub in_place: Option<&'a (dyn Fn(&Unit) -> bool + Sync)>,
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

    /// True when the workers gather their own chunks: the host "device", host-readable
    /// data, and no device compressor.
    fn gathers_on_workers(&self, data: &NDBuffer) -> bool {
        self.device_compress.is_none()
            && self.ops.memory() == Memory::Host
            && data.buffer().is_host_accessible()
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
        // Device compression: as many more slots as a batch takes, and half the budget for
        // them (the other half is the compressed output buffers).
        let (budget, in_batches) = match &self.device_compress {
            Some(_) => (self.staging_bytes / 2, MAX_WRITE_BATCH),
            None => (self.staging_bytes, 0),
        };
        let slots = allocate_slots(
            self.ops.as_ref(),
            self.units,
            elem,
            budget,
            self.threads,
            in_batches,
        )?;
        let result = match &self.device_compress {
            Some(dc) => {
                let chunk_bytes = largest_unit_bytes(self.units, elem);
                CompressBatches::new(
                    self.ops.as_ref(),
                    dc.settings,
                    slots.len(),
                    chunk_bytes,
                    dc.adler32,
                )
                .and_then(|mut batches| {
                    let r = self.run_with_slots(data, consume, &slots, Some(&mut batches));
                    // No batch work may outlive the run.
                    r.and(self.ops.synchronize(batches.queue()))
                })
            }
            None => self.run_with_slots(data, consume, &slots, None),
        };
        let drained = finish(self.ops.as_ref(), slots, self.units, elem);
        result.and(drained)
    }

    fn run_with_slots(
        &self,
        data: &NDBuffer,
        consume: &Consumer<'_>,
        slots: &[Slot],
        batches: Option<&mut CompressBatches<'_>>,
    ) -> Result<()> {
        let (free_tx, free_rx) = mpsc::channel::<usize>();
        for i in 0..slots.len() {
            free_tx.send(i).expect("receiver alive");
        }
        let (host_out, host_sums): (Vec<Buffer>, Vec<Buffer>) = batches
            .as_ref()
            .map(|b| (b.host_out.clone(), b.host_sums.clone()))
            .unwrap_or_default();
        let (work_tx, work_rx) = mpsc::channel::<Job>();
        let w = Workers {
            data,
            consume,
            slots,
            host_out,
            host_sums,
            on_workers: self.gathers_on_workers(data),
            work: Mutex::new(work_rx),
            abort: AtomicBool::new(false),
            first_error: Mutex::new(None),
            done: Mutex::new(Progress {
                chunks_done: 0,
                chunks_total: self.units.len(),
                bytes_done: 0,
            }),
        };
        let workers = self.threads.clamp(1, slots.len());

        std::thread::scope(|scope| {
            for _ in 0..workers {
                let free_tx = free_tx.clone();
                let w = &w;
                scope.spawn(move || self.work_until_closed(w, &free_tx));
            }
            drop(free_tx);
            let submitted = self.submit_all(data, slots, &free_rx, &work_tx, &w.abort, batches);
            drop(work_tx);
            submitted
        })?;
        match w.first_error.into_inner().ok().flatten() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// One worker: consumes jobs until the queue closes, counting each chunk done or keeping
    /// the first error (which stops the submission), and gives each job's slot back.
    fn work_until_closed(&self, w: &Workers<'_>, free: &mpsc::Sender<usize>) {
        loop {
            let job = match w.work.lock().map(|rx| rx.recv()) {
                Ok(Ok(job)) => job,
                _ => break,
            };
            let (unit, slot_id) = (&self.units[job.unit], job.slot);
            match self.consume_job(w, job) {
                Ok(()) => {
                    if let Ok(mut p) = w.done.lock() {
                        p.chunks_done += 1;
                        p.bytes_done += (unit.region_shape().iter().product::<usize>()
                            * w.data.dtype().size()) as u64;
                        if let Some(cb) = &self.progress {
                            cb(*p);
                        }
                    }
                }
                Err(e) => {
                    w.abort.store(true, Ordering::Relaxed);
                    if let Ok(mut slot) = w.first_error.lock() {
                        slot.get_or_insert(e);
                    }
                }
            }
            let _ = free.send(slot_id);
        }
    }

    /// Hands one job's chunk to the consumer once its device work is done: gathered here on
    /// the host route, with what the device compressor produced for compressed chunks.
    fn consume_job(&self, w: &Workers<'_>, job: Job) -> Result<()> {
        let Job {
            unit: i,
            slot: slot_id,
            gathered,
            len,
            compressed,
            event,
        } = job;
        let unit = &self.units[i];
        event.wait()?;
        let slot = &w.slots[slot_id];
        let gather_here = w.on_workers && !matches!(gathered, Gathered::InPlace);
        let len = if gather_here {
            // HostOps runs the copy now, on this thread.
            let queue = self.ops.default_queue();
            self.gather(w.data, &slot.staging, &queue, unit, &gathered)?
        } else {
            len
        };
        let bytes = slot.staging.as_host_bytes()?;
        let Some(n) = compressed else {
            return (w.consume)(unit, &gathered, &bytes[..len], None);
        };
        let out = w
            .host_out
            .get(slot_id)
            .ok_or_else(|| {
                Error::InvalidArgument(
                    "a compressed chunk without its output buffer (internal error: please report)"
                        .into(),
                )
            })?
            .as_host_bytes()?;
        let chunk = DeviceChunk {
            compressed: &out[..n],
            adler32: chunk_adler32(&w.host_sums, slot_id, &gathered)?,
        };
        (w.consume)(unit, &gathered, &bytes[..len], Some(chunk))
    }

    /// Queues the device gather and device-to-host copy of every unit, in order (chunks
    /// for the device compressor in batches).
    fn submit_all(
        &self,
        data: &NDBuffer,
        slots: &[Slot],
        free: &mpsc::Receiver<usize>,
        work: &mpsc::Sender<Job>,
        abort: &AtomicBool,
        mut batches: Option<&mut CompressBatches<'_>>,
    ) -> Result<()> {
        let unit_error = |i: usize, why: String| (self.unit_error)(&self.units[i], why);
        let mut send_compressed = |c: Compressed| {
            work.send(Job {
                unit: c.unit,
                slot: c.slot,
                gathered: Gathered::Compressed { len: c.len },
                len: 0,
                compressed: Some(c.compressed),
                event: c.event,
            })
            .is_ok()
        };
        // As the workers decide it: on the host route they gather every chunk not sent to
        // them as `Gathered::InPlace`.
        let on_workers = self.gathers_on_workers(data);
        for (i, unit) in self.units.iter().enumerate() {
            if abort.load(Ordering::Relaxed) {
                break;
            }
            // While chunks wait for a batch, a missing free slot means: compress them now.
            let slot_id = match batches.as_deref_mut() {
                Some(b) if !b.is_empty() => match free.try_recv() {
                    Ok(s) => s,
                    Err(TryRecvError::Empty) => {
                        b.flush(slots, &mut send_compressed, &unit_error)?;
                        match free.recv() {
                            Ok(s) => s,
                            Err(_) => break,
                        }
                    }
                    Err(TryRecvError::Disconnected) => break,
                },
                _ => match free.recv() {
                    Ok(s) => s,
                    Err(_) => break,
                },
            };
            let slot = &slots[slot_id];
            let gathered = self.plan(unit);
            if on_workers {
                let in_place = self.in_place.is_some_and(|f| f(unit));
                let job = Job {
                    unit: i,
                    slot: slot_id,
                    gathered: if in_place {
                        Gathered::InPlace
                    } else {
                        gathered
                    },
                    len: 0,
                    compressed: None,
                    event: self.ops.record(&slot.queue)?,
                };
                if work.send(job).is_err() {
                    break;
                }
                continue;
            }
            if let (Gathered::FullChunk, Some(b)) = (&gathered, batches.as_deref_mut()) {
                let queue = b.queue().clone();
                let len = self.gather(data, &slot.scratch, &queue, unit, &gathered)?;
                if b.push(slots, i, slot_id, len)? {
                    b.flush(slots, &mut send_compressed, &unit_error)?;
                }
                continue;
            }
            let len = self.gather(data, &slot.scratch, &slot.queue, unit, &gathered)?;
            let (scratch, staging) = (
                slot.scratch.try_slice(..len)?,
                slot.staging.try_slice(..len)?,
            );
            self.ops
                .copy(&slot.queue, scratch.region()?, staging.region()?)?;
            let event = self.ops.record(&slot.queue)?;
            let job = Job {
                unit: i,
                slot: slot_id,
                gathered,
                len,
                compressed: None,
                event,
            };
            if work.send(job).is_err() {
                break;
            }
        }
        if let Some(b) = batches
            && !abort.load(Ordering::Relaxed)
        {
            b.flush(slots, &mut send_compressed, &unit_error)?;
        }
        Ok(())
    }

    /// Enqueues on `queue` the gather of `unit` into `dst` (a slot's scratch, or its staging
    /// memory on the host route); returns its length.
    fn gather(
        &self,
        data: &NDBuffer,
        dst: &Buffer,
        queue: &Queue,
        unit: &Unit,
        gathered: &Gathered,
    ) -> Result<usize> {
        let elem = data.dtype().size();
        let dtype = data.dtype();
        let region_shape = unit.region_shape();
        let src_offset = unit.offset_in_request(&self.request_start, data.offset(), data.strides());
        let src = Strided {
            offset: src_offset,
            strides: data.strides(),
        };
        match (gathered, &self.layout) {
            (Gathered::FullChunk, Some(layout)) => {
                let len = unit.num_elements() * elem;
                let scratch = dst.try_slice(..len)?;
                if !unit.is_whole() {
                    // Padding of edge chunks holds the fill value, as zarr writers store it.
                    let mut fill = self.fill_value.clone();
                    if layout.endian != ByteOrder::native() {
                        zarrbuf_codecs::host::byte_swap(&mut fill, dtype.swap_unit())?;
                    }
                    let n = [unit.num_elements()];
                    let s = [elem as isize];
                    self.ops.fill(
                        queue,
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
                    queue,
                    StridedCopy {
                        src: data.buffer().written_region("a write")?,
                        src_view: src,
                        dst: scratch.region()?,
                        dst_view: Strided {
                            offset: dst_offset,
                            strides: &dst_strides,
                        },
                        shape: &region_shape,
                        elem_size: elem,
                        swap_unit: swap,
                    },
                )?;
                Ok(len)
            }
            _ => {
                let len = region_shape.iter().product::<usize>() * elem;
                let scratch = dst.try_slice(..len)?;
                let dst_strides = Order::C.strides(&region_shape, elem);
                let swap = if data.byte_order() == ByteOrder::native() {
                    0
                } else {
                    dtype.swap_unit()
                };
                self.ops.strided_copy(
                    queue,
                    StridedCopy {
                        src: data.buffer().written_region("a write")?,
                        src_view: src,
                        dst: scratch.region()?,
                        dst_view: Strided {
                            offset: 0,
                            strides: &dst_strides,
                        },
                        shape: &region_shape,
                        elem_size: elem,
                        swap_unit: swap,
                    },
                )?;
                Ok(len)
            }
        }
    }
}
