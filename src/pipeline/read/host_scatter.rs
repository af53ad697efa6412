//! The staged read's route into host memory: each worker decodes a unit into its own
//! staging slot and scatters it into the output itself — or decodes straight into the
//! output when the unit is one contiguous run of it — and tells the coordinator only that
//! the unit is done (progress, errors).
//!
//! With [`crate::device::HostOps`] the "device" work of the general route (copy into
//! scratch, scatter) runs at once on the coordinating thread, so a read into host memory
//! there copies every byte twice on one thread: async reads into host memory were bound by
//! that thread. Here the copies run on the workers, in parallel, once.

use super::staged_read::{Decoder, Producer};
use crate::buffer::NDBuffer;
use crate::data_types::Order;
use crate::errors::{Error, Result};
use crate::memory::SharedHostOutput;
use crate::pipeline::{Produced, Slot, StagedRead, largest_unit_bytes};
use crate::place::Memory;
use crate::zarr::Unit;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use zarrbuf_codecs::Strided;

/// How the workers of the host route take units from the read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// One at a time: the units come from the fetch-ahead stage, which hands them out in
    /// the order the workers ask, so a worker holding a run would wait for a fetch that is
    /// not started while the others' units are parked.
    OneByOne,
    /// Runs of consecutive units: each unit's fetch is the worker's own (a file read), and
    /// one message to the coordinator per run, not per unit, keeps small chunks cheap.
    Runs,
}

/// Decoded bytes a worker claims at once when units are claimed in runs ([`Claim::Runs`]):
/// with 16³ float32 chunks (16 KiB each) a message to the coordinator per unit, and the
/// wake-up it costs, was about a tenth of a read's time on 2 cores.
const CLAIM_BYTES: usize = 256 << 10;

/// Outputs smaller than this are not prefaulted ([`HostScatter::prefault_output`]): their
/// page faults cost less than the thread that would take them.
const PREFAULT_MIN_BYTES: usize = 16 << 20;
/// Bytes of output prefaulted per step, between looks at whether the read has finished.
const PREFAULT_STEP: usize = 8 << 20;

/// What a worker hands the coordinator for one claim: the units it placed (a run from the
/// claim's first unit), and the error that stopped it, if one did.
struct Claimed {
    units: Range<usize>,
    result: Result<()>,
}

/// The host route of one read: the read, how its workers claim units, and what every worker
/// needs to place a unit into the output.
pub(super) struct HostScatter<'r> {
    read: &'r StagedRead<'r>,
    claim: Claim,
    out: &'r NDBuffer,
    shared: SharedHostOutput<'r>,
    elem: usize,
    /// Byte-swap unit from the decoded layout to the output's byte order (0: none).
    swap: usize,
    /// One element of fill value in the output's byte order.
    fill: Vec<u8>,
}

impl<'r> HostScatter<'r> {
    /// True when a read into `out` may take the host route (with no device decoder and no
    /// cache, which the route choice checks): the host "device" (`HostOps`), a host output
    /// whose elements have distinct bytes, and units that are distinct chunks (so their
    /// regions, and their bytes in the output, are disjoint).
    pub(super) fn fits(read: &StagedRead<'_>, out: &NDBuffer) -> bool {
        read.ops.memory() == Memory::Host
            && out.buffer().is_host_accessible()
            && elements_are_distinct(out.shape(), out.strides(), out.dtype().size())
            && distinct_units(read.units)
    }

    /// The host route of `read` into `out` (which [`fits`](Self::fits) it).
    pub(super) fn new(read: &'r StagedRead<'r>, claim: Claim, out: &'r NDBuffer) -> Result<Self> {
        let region = out.buffer().region()?;
        // SAFETY: the only writes through `shared` are `place`'s, one unit per call, each
        // unit taken by exactly one worker (`run`'s `next` hands every index out once). A
        // call selects only the bytes of its unit's region in the output: the strided copy's
        // destination view is that region, and `contiguous_mut` is taken only when the
        // region is exactly one run of `num_elements × elem` bytes. The regions of distinct
        // units are disjoint: each unit is a distinct chunk of one chunk grid (checked by
        // `distinct_units` in `fits`, which the route choice calls before this) and its
        // region lies inside the chunk (the chunk ∩ the request), and chunks of a grid do
        // not overlap; distinct elements of the output have distinct bytes (its strides do
        // not overlap: `elements_are_distinct`, in `fits` too). So no two concurrent calls
        // select a common byte.
        let shared = unsafe { SharedHostOutput::new(region) }?;
        Ok(HostScatter {
            read,
            claim,
            out,
            shared,
            elem: out.dtype().size(),
            swap: read.swap_into(out),
            fill: read.fill_for(out)?,
        })
    }

    /// Runs the host route with the ring's slots (one per worker).
    pub(super) fn run(&self, produce: &Producer<'_>, slots: &[Slot]) -> Result<()> {
        let units = self.read.units;
        let workers = self.read.threads.clamp(1, slots.len().max(1));
        let per_claim = self.units_per_claim(workers);
        let (ready_tx, ready_rx) = mpsc::channel::<Claimed>();
        // Decoding runs at most a ring's worth of claims ahead of the coordinator, as in the
        // general route (where a slot comes back only once its unit was handled): progress
        // callbacks keep pace with the work, and a cancelled read stops within that many.
        let (permit_tx, permit_rx) = mpsc::channel::<()>();
        for _ in 0..slots.len() {
            permit_tx.send(()).expect("receiver alive");
        }
        let permit_rx = std::sync::Mutex::new(permit_rx);
        let next = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        let finished = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for slot in &slots[..workers] {
                let ready_tx = ready_tx.clone();
                let (next, abort, permit_rx) = (&next, &abort, &permit_rx);
                scope.spawn(move || {
                    let waited = match slot.pending.lock().map(|mut p| p.take()) {
                        Ok(Some(event)) => event.wait(),
                        _ => Ok(()),
                    };
                    // The worker keeps its slot for the whole run: nothing but this thread
                    // uses it (there is no device work to wait for).
                    let outcome = waited.and_then(|()| {
                        slot.staging.with_host_mut(|staging| {
                            while !abort.load(Ordering::Relaxed) {
                                // The coordinator gone (its permits dropped): stop.
                                if !matches!(permit_rx.lock().map(|rx| rx.recv()), Ok(Ok(()))) {
                                    break;
                                }
                                let first = next.fetch_add(per_claim, Ordering::Relaxed);
                                let end = first.saturating_add(per_claim).min(units.len());
                                if first >= end {
                                    break;
                                }
                                let mut claimed = Claimed {
                                    units: first..first,
                                    result: Ok(()),
                                };
                                for unit in &units[first..end] {
                                    claimed.result = self.place(unit, staging, produce);
                                    if claimed.result.is_err() {
                                        break;
                                    }
                                    claimed.units.end += 1;
                                }
                                if ready_tx.send(claimed).is_err() {
                                    break;
                                }
                            }
                            Ok(())
                        })
                    });
                    if let Err(e) = outcome {
                        // The slot itself failed (it is never lent elsewhere): report it.
                        let _ = ready_tx.send(Claimed {
                            units: 0..0,
                            result: Err(e),
                        });
                    }
                });
            }
            drop(ready_tx);
            if self.claim == Claim::OneByOne {
                let finished = &finished;
                // Only a head start: a thread that cannot start leaves the faults to the
                // workers.
                let _ = std::thread::Builder::new()
                    .name("zarrbuf-prefault".into())
                    .spawn_scoped(scope, move || self.prefault_output(finished));
            }
            let outcome = self.collect(&ready_rx, &permit_tx);
            finished.store(true, Ordering::Relaxed);
            if outcome.is_err() {
                abort.store(true, Ordering::Relaxed);
            }
            // Unblocks workers waiting for a permit.
            drop(permit_tx);
            outcome
        })
    }

    /// Maps the output's pages in ahead of the workers, in the order they write it, until
    /// the whole output is done or `finished` is set. Only for reads fed by the fetch-ahead
    /// stage (object stores): while their first requests are in flight the CPU has nothing
    /// else to do, and the kernel's zeroing of a new output's pages (a fresh process's, or a
    /// NumPy array zarr-python allocated for its pipeline) then costs the read no time where
    /// it otherwise ran inside the workers' scatter.
    fn prefault_output(&self, finished: &AtomicBool) {
        let (start, end) = self.out.byte_span();
        if end - start < PREFAULT_MIN_BYTES {
            return;
        }
        let mut at = start;
        while at < end && !finished.load(Ordering::Relaxed) {
            let len = PREFAULT_STEP.min(end - at);
            if !self.shared.prefault(at, len) {
                return;
            }
            at += len;
        }
    }

    /// Units a worker claims at once (see [`Claim`]): one, or a run of about [`CLAIM_BYTES`]
    /// decoded bytes, while every worker still gets several runs (so they finish together).
    fn units_per_claim(&self, workers: usize) -> usize {
        if self.claim == Claim::OneByOne {
            return 1;
        }
        let units = self.read.units;
        let unit_bytes = largest_unit_bytes(units, self.elem).max(1);
        let by_bytes = (CLAIM_BYTES / unit_bytes).max(1);
        let by_balance = (units.len() / workers.saturating_mul(8).max(1)).max(1);
        by_bytes.min(by_balance)
    }

    /// The coordinator's part: one message per claim, in the order they finish; each hands a
    /// permit back to the workers.
    fn collect(&self, ready: &mpsc::Receiver<Claimed>, permits: &mpsc::Sender<()>) -> Result<()> {
        let all = self.read.units;
        let mut progress = self.read.no_progress();
        while progress.chunks_done < all.len() {
            let claimed = ready
                .recv()
                .map_err(|_| Error::Cancelled("a decoding thread stopped unexpectedly".into()))?;
            claimed.result?;
            let units = &all[claimed.units];
            if units.is_empty() {
                continue;
            }
            progress.chunks_done += units.len();
            progress.bytes_done += units
                .iter()
                .map(|u| (u.region_shape().iter().product::<usize>() * self.elem) as u64)
                .sum::<u64>();
            if let Some(cb) = &self.read.progress {
                cb(progress);
            }
            let _ = permits.send(());
        }
        Ok(())
    }

    /// Fetches and decodes `unit` and writes its region of the output (on a worker).
    fn place(&self, unit: &Unit, staging: &mut [u8], produce: &Producer<'_>) -> Result<()> {
        let region_shape = unit.region_shape();
        let strides = self.out.strides();
        let dst = Strided {
            offset: unit.offset_in_request(&self.read.request_start, self.out.offset(), strides),
            strides,
        };
        let expected = unit.num_elements() * self.elem;
        if self.read.is_one_run(unit, self.out, self.swap) {
            // Straight into the output: no staging, no copy.
            let target = self.shared.contiguous_mut(dst.offset, expected)?;
            return match produce(unit, target, Decoder::Cpu)?.into_slot(target, unit)? {
                Produced::Missing => {
                    for e in target.chunks_exact_mut(self.elem) {
                        e.copy_from_slice(&self.fill);
                    }
                    Ok(())
                }
                Produced::Decoded(len) => check_len(unit, len, expected),
                Produced::Compressed(_) | Produced::Stored(_) => Err(left_compressed()),
            };
        }
        let produced = produce(unit, staging, Decoder::Cpu)?;
        // Stored bytes are scattered from where they were fetched: no copy into the slot.
        let (decoded, len): (&[u8], usize) = match &produced {
            Produced::Decoded(len) => (&staging[..(*len).min(staging.len())], *len),
            Produced::Stored(bytes) => (bytes, bytes.len()),
            _ => (&[], 0),
        };
        match &produced {
            Produced::Missing => {
                // The fill value, laid out as the region in C order, then scattered.
                let n = region_shape.iter().product::<usize>() * self.elem;
                let src = staging.get_mut(..n).ok_or_else(|| {
                    Error::ShapeMismatch(format!(
                        "chunk {:?}: its region does not fit the staging slot",
                        unit.indices
                    ))
                })?;
                for e in src.chunks_exact_mut(self.elem) {
                    e.copy_from_slice(&self.fill);
                }
                let src_strides = Order::C.strides(&region_shape, self.elem);
                let src_view = Strided {
                    offset: 0,
                    strides: &src_strides,
                };
                self.shared
                    .strided_copy(src, src_view, dst, &region_shape, self.elem, 0)
            }
            Produced::Decoded(_) | Produced::Stored(_) => {
                check_len(unit, len, expected)?;
                let shape = unit.shape_usize();
                let src_strides = self.read.layout.decoded_strides(&shape, self.elem);
                let src_view = Strided {
                    offset: unit.offset_in_unit(&src_strides),
                    strides: &src_strides,
                };
                self.shared.strided_copy(
                    decoded,
                    src_view,
                    dst,
                    &region_shape,
                    self.elem,
                    self.swap,
                )
            }
            Produced::Compressed(_) => Err(left_compressed()),
        }
    }
}

fn check_len(unit: &Unit, len: usize, expected: usize) -> Result<()> {
    if len == expected {
        return Ok(());
    }
    Err(Error::ShapeMismatch(format!(
        "chunk {:?} decoded to {len} bytes, expected {expected} for shape {:?}",
        unit.indices, unit.shape
    )))
}

fn left_compressed() -> Error {
    Error::InvalidArgument(
        "a chunk was left compressed without a device decoder (internal error: please report)"
            .into(),
    )
}

/// True when distinct elements of an array of `shape` with byte `strides` occupy distinct
/// bytes: taken by increasing stride, each axis steps past everything the smaller ones span.
fn elements_are_distinct(shape: &[usize], strides: &[isize], elem: usize) -> bool {
    if shape.len() != strides.len() {
        return false;
    }
    let mut axes: Vec<(usize, usize)> = shape
        .iter()
        .zip(strides)
        .filter(|&(&n, _)| n > 1)
        .map(|(&n, &s)| (s.unsigned_abs(), n))
        .collect();
    axes.sort_unstable();
    let mut span = elem;
    for (stride, n) in axes {
        if stride < span {
            return false;
        }
        let Some(next) = stride
            .checked_mul(n - 1)
            .and_then(|extent| extent.checked_add(span))
        else {
            return false;
        };
        span = next;
    }
    true
}

/// True when no chunk appears twice among `units`.
fn distinct_units(units: &[Unit]) -> bool {
    let mut seen = HashSet::with_capacity(units.len());
    units.iter().all(|u| seen.insert(u.indices.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::elements_are_distinct;

    #[test]
    fn overlapping_strides_are_refused() {
        // C and F order, and a window of a larger array.
        assert!(elements_are_distinct(&[4, 6], &[24, 4], 4));
        assert!(elements_are_distinct(&[4, 6], &[4, 16], 4));
        assert!(elements_are_distinct(&[2, 3], &[40, 4], 4));
        // Negative strides, and axes of extent 1 with any stride.
        assert!(elements_are_distinct(&[4, 6], &[-24, 4], 4));
        assert!(elements_are_distinct(&[1, 6], &[0, 4], 4));
        // Broadcast (stride 0) and rows that overlap.
        assert!(!elements_are_distinct(&[4, 6], &[0, 4], 4));
        assert!(!elements_are_distinct(&[4, 6], &[20, 4], 4));
        assert!(!elements_are_distinct(&[4, 6], &[24, 2], 4));
        assert!(elements_are_distinct(&[4], &[4], 4));
        assert!(!elements_are_distinct(&[2], &[4, 4], 4));
    }
}
