//! Small host reads: a read of a few chunks (inner chunks) into a C-contiguous host output in
//! native byte order, with `PipelineMode::Auto`, as a training loop's random patches are.
//!
//! Each unit is fetched (`fetch/fetch_unit.rs`: the stored-size check first; inner chunks through the
//! shard index, shared by the reads of the same store object, `zarr/shard/index_cache.rs`)
//! and decoded by the bounded decoders the staged pipeline uses (`DeviceCodec::decode_into`,
//! into exactly the unit's decoded size) into a recycled buffer; then the part the read
//! needs is copied into the output. The units of one read decode in parallel on rayon's
//! global pool: no threads started, no staging slots, no second read of the shard index by
//! zarrs. Reads this route does not take (other chains, transposed or byte-swapped layouts,
//! strided outputs, more units) go the way they went before. A unit another sync read is
//! fetching at the same time is taken from it (`fetch_flight.rs`). From an object store the
//! units' requests all go out at once, through the fetch-ahead stage. Async reads take the same
//! plan and decoders ([`SmallRead`]) through `small_read_async.rs`.
//!
//! A unit stored in its decoded layout (no bytes-to-bytes codecs) of which the read needs
//! less than half is fetched by byte ranges, its needed rows only (`unit_ranges.rs`: a few
//! requests from local files, one spanning the needed rows from an object store), each
//! checked against the unit's exact size before it is used (`fetch_ranges.rs`); the ranges
//! are placed where they lie in the recycled unit buffer and the part the read needs copied
//! out as from a whole unit. Unsharded chunks whose size the store cannot tell without a
//! request of its own are fetched whole.

use super::read_driver::fetch_ahead_limits;
use super::read_request::ReadRequest;
use crate::buffer::NDBuffer;
use crate::data_types::ByteOrder;
use crate::errors::Result;
use crate::options::{PipelineMode, ReadOptions};
use crate::pipeline::fetch::fetch_ahead::FetchAhead;
use crate::pipeline::fetch::fetch_flight::{FlightKey, Readers, fetch_shared, flight_unit};
use crate::pipeline::fetch::fetch_ranges::{
    chunks_sized_cheaply, fetch_unit_ranges, requests_are_round_trips,
};
use crate::pipeline::fetch::fetch_stage::FetchStage;
use crate::pipeline::fetch::unit_ranges::{RangePolicy, UnitRanges};
use crate::pipeline::{InnerFetch, ShardReads};
use crate::process_local::ProcessLocal;
use crate::zarr::{
    DeviceCodec, ShardIndex, Unit, UnitPlan, UnitSource, chunk_error, decode_needed_into,
    fill_bytes, needed_range, not_exact_size,
};
use bytes::Bytes;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use zarrs::array::Array;
use zarrs::storage::ReadableStorageTraits;

/// Decoded-chunk buffers kept for the next small read: at most this many bytes in all.
const KEPT_BUFFER_BYTES: usize = 64 << 20;

/// Buffers of decoded units, recycled between reads (a fresh MiB faults in its pages on
/// every read); one set per process, so that a forked worker never takes a lock a parent
/// thread held when it forked.
static BUFFERS: ProcessLocal<Mutex<Vec<Vec<u8>>>> = ProcessLocal::new(Mutex::default);

fn take_buffer(len: usize) -> Vec<u8> {
    let mut kept = BUFFERS.get().lock().unwrap_or_else(|p| p.into_inner());
    match kept.iter().position(|b| b.capacity() >= len) {
        Some(i) => {
            let mut b = kept.swap_remove(i);
            b.resize(len, 0);
            b
        }
        None => vec![0; len],
    }
}

fn give_back(buffers: impl IntoIterator<Item = Vec<u8>>) {
    let mut kept = BUFFERS.get().lock().unwrap_or_else(|p| p.into_inner());
    for b in buffers {
        let held: usize = kept.iter().map(Vec::capacity).sum();
        if held + b.capacity() <= KEPT_BUFFER_BYTES {
            kept.push(b);
        }
    }
}

/// A small read, planned (see the module docs): its units, and how each one decodes. The
/// sync route here and the async one (`small_read_async.rs`) share it.
pub(crate) struct SmallRead {
    plan: UnitPlan,
    /// The chain's bounded decoder; `None`: stored as decoded (nothing to decompress).
    codec: Option<DeviceCodec>,
    fill: Vec<u8>,
    elem: usize,
    validate_checksums: bool,
    /// Decode only the needed prefix of units (`ReadOptions::decode_needed_prefix`).
    prefix: bool,
    /// How units stored as decoded are fetched by byte ranges (`unit_ranges.rs`); `None`:
    /// every unit whole (compressed units, or unsharded chunks whose size the store cannot
    /// tell with no request of its own, `fetch_ranges.rs`).
    ranges: Option<RangePolicy>,
}

impl SmallRead {
    /// Whether the small route may take a read into `out` with `opts`, as far as that is
    /// known before its units are planned (see the module docs).
    pub(crate) fn may_take(out: &NDBuffer, opts: &ReadOptions) -> bool {
        opts.mode == PipelineMode::Auto
            && opts.progress.is_none()
            && out.buffer().is_host_accessible()
            && out.byte_order() == ByteOrder::native()
            && out.is_c_contiguous()
    }

    /// The small read of `request` when the small route takes it (at most `max_units`
    /// units, an `Auto` read; see the module docs), which then takes the request's units;
    /// else `None`, the request keeping them.
    pub(crate) fn of<S: ?Sized + 'static>(
        request: &mut ReadRequest<'_, S>,
        max_units: usize,
    ) -> Result<Option<SmallRead>> {
        let (array, out, opts) = (request.array, request.out, request.opts);
        let elem = out.dtype().size();
        if !Self::may_take(out, opts) {
            return Ok(None);
        }
        let plan = request.plan()?;
        let Some(chain) = plan.chain.as_ref() else {
            return Ok(None);
        };
        if plan.units.len() > max_units
            || chain.layout.order.is_some()
            || (elem > 1 && chain.layout.endian != ByteOrder::native())
        {
            return Ok(None);
        }
        let stored_as_decoded = chain.chain.bytes_to_bytes_codecs().is_empty();
        let codec = DeviceCodec::of(&chain.chain);
        let fill = fill_bytes(array);
        if (codec.is_none() && !stored_as_decoded) || fill.len() != elem {
            return Ok(None);
        }
        let storage = array.storage();
        let ranged = codec.is_none()
            && match plan.source {
                UnitSource::Subchunk => true,
                UnitSource::Chunk => chunks_sized_cheaply(storage.as_ref()),
                UnitSource::ZarrsDecoded => false,
            };
        let ranges =
            ranged.then(|| RangePolicy::for_store(requests_are_round_trips(storage.as_ref())));
        Ok(Some(SmallRead {
            plan: request.take_plan()?,
            codec,
            fill,
            elem,
            validate_checksums: opts.validate_checksums,
            prefix: opts.decode_needed_prefix,
            ranges,
        }))
    }

    /// The byte ranges of `unit` this read fetches (`None`: all of it): only for units
    /// stored as decoded whose needed part is less than half of them (`unit_ranges.rs`).
    pub(crate) fn unit_ranges(&self, unit: &Unit) -> Option<UnitRanges> {
        UnitRanges::of_unit(unit, self.elem, self.ranges?)
    }

    /// The units and where they are fetched from.
    pub(crate) fn unit_plan(&self) -> &UnitPlan {
        &self.plan
    }

    /// Orders the units of a sharded read shard by shard, as [`ShardReads::new`] does.
    pub(crate) fn order_by_shard(&mut self, index: &ShardIndex) {
        self.plan
            .units
            .sort_by_cached_key(|u| index.split(&u.indices));
    }

    /// Decodes one unit's fetched bytes (`None`: not stored, read as the fill value) into a
    /// recycled buffer of exactly its decoded size; a unit that does not decode is an error
    /// naming it. With `decode_needed_prefix`, a unit may be decoded only from the
    /// read's first element in it to its last (`zarr/decode/prefix.rs`): the bytes outside
    /// are unspecified and never read.
    pub(crate) fn decode<S: ?Sized>(
        &self,
        array: &Array<S>,
        unit: &Unit,
        encoded: Option<Bytes>,
    ) -> Result<Option<Vec<u8>>> {
        let Some(encoded) = encoded else {
            return Ok(None);
        };
        let expected = unit.num_elements() * self.elem;
        let Some(codec) = self.codec else {
            if let Some(ranges) = self.unit_ranges(unit) {
                // Only the needed ranges, checked by the fetch (`fetch_ranges.rs`): placed
                // where they lie; the bytes between are never read.
                let mut buf = take_buffer(expected);
                if !ranges.place(&encoded, &mut buf) {
                    give_back([buf]);
                    return Err(chunk_error(
                        array,
                        &unit.indices,
                        format!(
                            "internal error: {} bytes were fetched for byte ranges of {} \
                             (please report)",
                            encoded.len(),
                            ranges.fetched_len()
                        ),
                    ));
                }
                return Ok(Some(buf));
            }
            // Nothing to decompress: the fetched bytes are the decoded ones.
            if encoded.len() != expected {
                return Err(chunk_error(
                    array,
                    &unit.indices,
                    not_exact_size(encoded.len() as u64, expected as u64),
                ));
            }
            // The fetched buffer itself when the bytes are all of it (no copy).
            return Ok(Some(Vec::from(encoded)));
        };
        let mut buf = take_buffer(expected);
        let decoded = if self.prefix {
            let needed = needed_range(unit, self.elem);
            decode_needed_into(codec, &encoded, &mut buf, needed, self.validate_checksums)
                .map(|r| r.end)
        } else {
            codec.decode_into(&encoded, &mut buf, self.validate_checksums)
        };
        match decoded {
            Ok(_) => Ok(Some(buf)),
            Err(why) => {
                give_back([buf]);
                Err(chunk_error(array, &unit.indices, why))
            }
        }
    }

    /// Decodes every unit, `encoded(i)` giving unit `i`'s fetched bytes, on the calling
    /// thread and the pool's helpers (see [`on_caller_and_pool`]); the first error in unit
    /// order wins.
    pub(crate) fn decode_all<S: ?Sized + Send + Sync>(
        &self,
        array: &Array<S>,
        encoded: &(dyn Fn(usize) -> Result<Option<Bytes>> + Sync),
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let units = &self.plan.units;
        on_caller_and_pool(units.len(), |i| self.decode(array, &units[i], encoded(i)?))
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(crate::errors::Error::InvalidArgument(
                        "internal error: a unit of a small read was not decoded (please report)"
                            .into(),
                    ))
                })
            })
            .collect()
    }

    /// Copies the needed part of every decoded unit (the fill value for `None`) into `out`,
    /// the C-contiguous output of the read of `subset`, and keeps the buffers for the next
    /// read.
    pub(crate) fn place_all(
        &self,
        subset: &[Range<u64>],
        out: &NDBuffer,
        decoded: Vec<Option<Vec<u8>>>,
    ) -> Result<()> {
        let start: Vec<u64> = subset.iter().map(|r| r.start).collect();
        let out_shape = out.shape().to_vec();
        let region = out
            .buffer()
            .try_slice(out.offset()..out.offset() + out.nbytes())?;
        region.with_host_mut(|bytes| {
            for (unit, data) in self.plan.units.iter().zip(&decoded) {
                place(
                    unit,
                    data.as_deref(),
                    &start,
                    &out_shape,
                    self.elem,
                    &self.fill,
                    bytes,
                );
            }
            Ok(())
        })?;
        give_back(decoded.into_iter().flatten());
        Ok(())
    }
}

/// Reads `request` by the small-read route, as `small` planned it (see the module docs),
/// fetching each unit through `stage`. A unit another sync read is fetching at the same time
/// is taken from it (`fetch_flight.rs`).
pub(crate) fn read_small<S: ?Sized + ReadableStorageTraits + 'static>(
    request: &ReadRequest<'_, S>,
    mut small: SmallRead,
    stage: &FetchStage<'_>,
) -> Result<()> {
    let (array, subset, out, opts) = (request.array, request.subset, request.out, request.opts);
    let plan = &mut small.plan;
    let shards = match plan.source {
        UnitSource::Subchunk => Some(ShardReads::new(
            ShardIndex::with_limit(array, opts.validate_checksums, opts.max_bytes)?
                .shared_with(array),
            &mut plan.units,
            InnerFetch::PerChunk,
            opts.staging_bytes as u64,
        )),
        _ => None,
    };
    let plan = &small.plan;
    let shared_fetch = |plan: &UnitPlan, shards: Option<&ShardReads>, unit: &Unit| {
        let ranged = small.unit_ranges(unit);
        let key = FlightKey::new(
            array,
            flight_unit(array, shards.map(ShardReads::index), unit, ranged.as_ref()),
            Readers::Sync,
        );
        match &ranged {
            Some(ranges) => fetch_shared(&key, || {
                fetch_unit_ranges(array, plan, shards, unit, ranges)
            }),
            None => fetch_shared(&key, || stage.fetch(plan, shards, unit)),
        }
    };
    let decoded = match fetch_ahead_limits(array, opts) {
        // From an object store every unit's request goes out at once (the caller and the
        // pool's threads alone would send one per core and wait a round trip for each).
        Some(limits) if plan.units.len() > 1 => {
            let stage = FetchStage::from_fetch(shared_fetch);
            FetchAhead::run(
                plan,
                &plan.units,
                shards.as_ref(),
                &stage,
                limits,
                |ahead| small.decode_all(array, &|i| ahead.fetch(&plan.units[i])),
            )?
        }
        _ => small.decode_all(array, &|i| {
            shared_fetch(plan, shards.as_ref(), &plan.units[i])
        })?,
    };
    small.place_all(subset, out, decoded)
}

/// `f(0)`, …, `f(n - 1)`, in order (each `Some`): the calling thread takes indices one by one while up to
/// `n - 1` jobs on the process's pool (`thread_pool`) take the others, so a read of one unit hands nothing
/// to another thread, and on a busy machine the caller does the work the pool is too slow to
/// start.
fn on_caller_and_pool<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<Option<T>> {
    let next = AtomicUsize::new(0);
    let done: Vec<Mutex<Option<T>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = done.get(i) else {
                break;
            };
            let value = f(i);
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        }
    };
    // The caller and the helpers together: one thread per core of the pool.
    let helpers = n
        .saturating_sub(1)
        .min(crate::thread_pool::threads().saturating_sub(1));
    crate::thread_pool::in_place_scope(|s| {
        for _ in 0..helpers {
            s.spawn(|_| work());
        }
        work();
    });
    // Every index below n was taken by exactly one worker, which finished it before the
    // scope ended (a panic in `f` would have ended the scope with that panic).
    done.into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect()
}

/// Copies the part of `unit` the read needs from its decoded C-order bytes `data` (or the
/// fill value, `None`) into the C-contiguous output `out` of shape `out_shape` that starts
/// at array coordinates `start`.
fn place(
    unit: &Unit,
    data: Option<&[u8]>,
    start: &[u64],
    out_shape: &[usize],
    elem: usize,
    fill: &[u8],
    out: &mut [u8],
) {
    let d = out_shape.len();
    let unit_shape = unit.shape_usize();
    let local = unit.local_start();
    let region = unit.region_shape();
    let c_strides = |shape: &[usize]| -> Vec<usize> {
        let mut s = vec![elem; shape.len()];
        for k in (0..shape.len().saturating_sub(1)).rev() {
            s[k] = s[k + 1] * shape[k + 1];
        }
        s
    };
    let (us, os) = (c_strides(&unit_shape), c_strides(out_shape));
    if d == 0 {
        match data {
            Some(src) => out[..elem].copy_from_slice(&src[..elem]),
            None => out[..elem].copy_from_slice(fill),
        }
        return;
    }
    let run = region[d - 1] * elem;
    let rows: usize = region[..d - 1].iter().product();
    let mut at = vec![0usize; d - 1];
    for _ in 0..rows {
        let mut src = local[d - 1] * elem;
        let mut dst = (unit.region[d - 1].start - start[d - 1]) as usize * elem;
        for k in 0..d - 1 {
            src += (local[k] + at[k]) * us[k];
            dst += ((unit.region[k].start - start[k]) as usize + at[k]) * os[k];
        }
        let to = &mut out[dst..dst + run];
        match data {
            Some(bytes) => to.copy_from_slice(&bytes[src..src + run]),
            None => to
                .chunks_exact_mut(elem)
                .for_each(|e| e.copy_from_slice(fill)),
        }
        for k in (0..d - 1).rev() {
            at[k] += 1;
            if at[k] < region[k] {
                break;
            }
            at[k] = 0;
        }
    }
}
