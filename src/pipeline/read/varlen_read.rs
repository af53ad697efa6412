//! Reads of variable-length arrays into a [`VarLenBuffer`] (Arrow's large layout).
//!
//! Two passes over the units (chunks, or a shard's inner chunks) of a request, each in
//! parallel on rayon's pool:
//! 1. every unit is fetched, its bytes-to-bytes codecs run (bounded decoders, each held to
//!    what is left of the read's budget), and its encoded elements checked (`UnitCodec`,
//!    shared with `check`), which records where each element starts; a missing unit reads
//!    as the fill value. The decoded units are counted against the budget as they arrive,
//!    and the offsets of the result against it before anything is fetched;
//! 2. the element lengths, gathered in C order of the request, give the offsets (a prefix
//!    sum); the request is cut into *runs* (a unit's part of one row along the last axis,
//!    contiguous in the unit and in the output) and each run copies its elements straight
//!    into its own, disjoint, slice of the values.
//!
//! From an object store the units are fetched ahead of the decoders by the fetch-ahead stage
//! (`fetch_ahead.rs`), as fixed-size reads are, and the decoders take them in the same order.
//!
//! Nothing is allocated per element: one offsets buffer, one values buffer, and per unit its
//! decoded bytes and one start position per element. Into a device the buffers are built in
//! pinned host memory and cross in two copies (offsets, values).

use super::read_driver::fetch_ahead_limits;
use crate::buffer::{Buffer, BufferPrototype, VarLenBuffer};
use crate::errors::{Error, Result};
use crate::options::{Progress, ReadOptions};
use crate::pipeline::ShardReads;
use crate::pipeline::fetch::fetch_ahead::FetchAhead;
use crate::pipeline::fetch::fetch_stage::FetchStage;
use crate::pipeline::fetch::shard_reads::InnerFetch;
use crate::place::Memory;
use crate::zarr::{
    EncodedLayout, ShardIndex, Unit, UnitCodec, UnitFault, UnitPlan, UnitSource, VlenIndex,
    VlenPlan, chunk_error, plan_vlen,
};
use bytes::Bytes;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use zarrs::array::{Array, CodecOptions};

/// Fetches the encoded bytes of unit `i` of the plan (`None`: not stored).
type VarLenFetch<'a> =
    dyn Fn(&UnitPlan, Option<&ShardReads>, usize) -> Result<Option<Bytes>> + Sync + 'a;

/// One unit after pass 1: its decoded bytes and where each element starts, or missing.
enum Decoded {
    Stored { bytes: Vec<u8>, index: VlenIndex },
    Missing,
}

impl Decoded {
    /// The bytes of element `i` of the unit (C order of the unit); `fill` when missing.
    fn element<'a>(&'a self, i: usize, fill: &'a [u8]) -> &'a [u8] {
        match self {
            Decoded::Stored { bytes, index } => &bytes[index.range(bytes, i)],
            Decoded::Missing => fill,
        }
    }
}

/// A unit's part of one row of the request along the last axis: `count` elements that are
/// contiguous in the output (from element `out`) and `step` apart in the unit's stored order
/// (from element `at`; `step` is 1 unless the chunk is stored transposed).
#[derive(Clone, Copy)]
struct Run {
    unit: usize,
    at: usize,
    step: usize,
    out: usize,
    count: usize,
}

/// How a message names `unit` of a read: the chunk, or the shard and the inner chunk.
fn unit_name<S: ?Sized>(array: &Array<S>, shards: Option<&ShardReads>, unit: &Unit) -> String {
    match shards {
        Some(s) => {
            let (shard, within) = s.index().split(&unit.indices);
            format!(
                "shard {shard:?} (key {}), inner chunk {within:?}",
                array.chunk_key(&shard)
            )
        }
        None => format!(
            "chunk {:?} (key {})",
            unit.indices,
            array.chunk_key(&unit.indices)
        ),
    }
}

/// An error about `unit` of a read: it names the chunk, or the shard and the inner chunk.
fn unit_error<S: ?Sized>(
    array: &Array<S>,
    shards: Option<&ShardReads>,
    unit: &Unit,
    why: String,
) -> Error {
    match shards {
        Some(_) => Error::zarr(
            array.path().as_str(),
            format!("{}: {why}", unit_name(array, shards, unit)),
            None,
        ),
        None => chunk_error(array, &unit.indices, why),
    }
}

/// A planned read of a variable-length array: its units (ordered shard by shard for
/// sharded arrays) and, for those, the shard index.
pub(crate) struct VarLenRead {
    plan: VlenPlan,
    shards: Option<ShardReads>,
    subset: Vec<Range<u64>>,
}

impl VarLenRead {
    /// Plans a read of `subset` (checked by the caller) into memory made by `proto`: a
    /// device that is not there is an error before anything is read.
    /// `inner_fetch` says how a sharded array's inner chunks are fetched (merged into few
    /// requests from object stores).
    pub(crate) fn new<S: ?Sized + Send + Sync + 'static>(
        array: &Array<S>,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
        inner_fetch: InnerFetch,
    ) -> Result<Self> {
        crate::device::ops_for(proto.memory())?;
        let mut plan = plan_vlen(array, subset)?;
        let shards = match plan.units.source {
            UnitSource::Subchunk => Some(ShardReads::new(
                ShardIndex::with_limit(array, opts.validate_checksums, opts.max_bytes)?
                    .shared_with(array),
                &mut plan.units.units,
                inner_fetch,
                opts.staging_bytes as u64,
            )),
            _ => None,
        };
        Ok(VarLenRead {
            plan,
            shards,
            subset: subset.to_vec(),
        })
    }

    /// The units this read fetches, by their chunk (or inner chunk) indices: what a
    /// stream's read claims in its chunk share.
    pub(crate) fn unit_keys(&self) -> Vec<Vec<u64>> {
        self.plan
            .units
            .units
            .iter()
            .map(|u| u.indices.clone())
            .collect()
    }

    /// Fetches (through `stage`: ahead of the decoders from object stores), decodes and
    /// assembles the units into a new [`VarLenBuffer`] made by `proto`.
    pub(crate) fn run<S: ?Sized + Send + Sync + 'static>(
        &self,
        array: &Array<S>,
        proto: &BufferPrototype,
        opts: &ReadOptions,
        stage: &FetchStage<'_>,
    ) -> Result<VarLenBuffer> {
        let (plan, shards) = (&self.plan, self.shards.as_ref());
        check_offsets(array, &self.subset, read_budget(opts))?;
        let units = &plan.units;
        let decode = |fetch: &VarLenFetch<'_>| match opts.concurrency {
            // A pool of the asked size, for this read only; the process's pool otherwise.
            Some(n) => rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build()
                .map_err(|e| {
                    Error::InvalidArgument(format!("a pool of {n} decoding threads: {e}"))
                })?
                .install(|| decode_units(array, plan, shards, opts, fetch)),
            None if on_caller(plan) => decode_units(array, plan, shards, opts, fetch),
            None => crate::thread_pool::install(|| decode_units(array, plan, shards, opts, fetch)),
        };
        let decoded = match fetch_ahead_limits(array, opts) {
            Some(limits) => FetchAhead::run(units, &units.units, shards, stage, limits, |ahead| {
                decode(&|_, _, i| ahead.fetch(&units.units[i]))
            })?,
            None => decode(&|plan, shards, i| stage.fetch(plan, shards, &plan.units[i]))?,
        };
        let subset = &self.subset;
        let shape: Vec<u64> = subset.iter().map(|r| r.end - r.start).collect();
        let runs = runs_of(&units.units, &units.layout(), subset);
        assemble(array, plan, &decoded, &runs, shape, proto, opts)
    }
}

/// Reads `subset` (checked by the caller) of a variable-length array into a new
/// [`VarLenBuffer`] made by `proto`, fetching each unit through `stage`.
pub(crate) fn read_varlen<S: ?Sized + Send + Sync + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    proto: &BufferPrototype,
    opts: &ReadOptions,
    inner_fetch: InnerFetch,
    stage: &FetchStage<'_>,
) -> Result<VarLenBuffer> {
    VarLenRead::new(array, subset, proto, opts, inner_fetch)?.run(array, proto, opts, stage)
}

/// The bytes a variable-length read may hold, and where the number comes from: the read's
/// `max_bytes`, else the memory this process may still take (its decoded units and the
/// values it builds are host memory, pinned or not, whatever the output's memory).
fn read_budget(opts: &ReadOptions) -> Option<(u64, &'static str)> {
    match opts.max_bytes {
        Some(n) => Some((n, "the read's max_bytes")),
        None => crate::memory_limit::available_bytes()
            .map(|n| (n, "the memory this process may still take")),
    }
}

/// The error of a read that would hold `bytes` (of `what`) beyond `budget`.
fn over_budget<S: ?Sized>(
    array: &Array<S>,
    what: &str,
    bytes: u64,
    (limit, from): (u64, &'static str),
) -> Error {
    Error::TooLarge {
        what: format!(
            "{what} of the variable-length read of array {}",
            array.path()
        ),
        bytes,
        limit,
        limit_from: from.into(),
        advice: "read a subset of it, or raise the limit (--memory, \
                 ReadOptions::with_max_bytes) if the memory is there"
            .into(),
    }
}

/// Whether a codec error is the bounded decoders' refusal to produce more than their bound
/// (`zarr/decode/bounded.rs`: "stopped there", or a header declaring more).
fn over_cap(e: &zarrs::array::CodecError) -> bool {
    let text = e.to_string();
    text.contains("(stopped there)") || text.contains("decoded bytes, more than the")
}

/// Refuses a request whose offsets alone (8 bytes an element, and one) exceed the budget,
/// before any unit is fetched.
fn check_offsets<S: ?Sized>(
    array: &Array<S>,
    subset: &[Range<u64>],
    budget: Option<(u64, &'static str)>,
) -> Result<()> {
    let Some(budget) = budget else {
        return Ok(());
    };
    let bytes = subset
        .iter()
        .try_fold(1u64, |n, r| n.checked_mul(r.end - r.start))
        .and_then(|n| n.checked_add(1)?.checked_mul(8))
        .unwrap_or(u64::MAX);
    if bytes > budget.0 {
        return Err(over_budget(array, "the offsets", bytes, budget));
    }
    Ok(())
}

/// Whether a read's units are decoded on the calling thread rather than the process's pool:
/// a read of one unit gains nothing from the pool, and its decoders wait there for their
/// fetches. With both pool threads of a 2-core machine waiting for another read's slow
/// requests, a one-chunk read of a stream waited 5 s for them.
fn on_caller(plan: &VlenPlan) -> bool {
    plan.units.units.len() <= 1
}

/// Pass 1: fetches, decompresses and checks every unit (in parallel unless
/// [`on_caller`]), holding the decoded units to the read's budget.
fn decode_units<S: ?Sized + Send + Sync>(
    array: &Array<S>,
    plan: &VlenPlan,
    shards: Option<&ShardReads>,
    opts: &ReadOptions,
    fetch: &VarLenFetch<'_>,
) -> Result<Vec<Decoded>> {
    let codec_opts = CodecOptions::default().with_validate_checksums(opts.validate_checksums);
    let chain = plan
        .units
        .chain
        .as_ref()
        .ok_or_else(|| Error::zarr(array.path().as_str(), "no codec plan", None))?;
    let codec = UnitCodec {
        chain,
        kind: plan.kind,
        data_type: array.data_type(),
        fill_value: array.fill_value(),
    };
    let budget = read_budget(opts);
    let total = plan.units.units.len();
    let (done, bytes_done) = (AtomicUsize::new(0), AtomicU64::new(0));
    // Decoded bytes held so far, with 8 bytes an element for where each one starts.
    let held = AtomicU64::new(0);
    let decode_one = |(i, unit): (usize, &Unit)| -> Result<(usize, Decoded)> {
        let report = |decoded: usize| {
            if let Some(progress) = &opts.progress {
                progress(Progress {
                    chunks_done: done.fetch_add(1, Ordering::Relaxed) + 1,
                    chunks_total: total,
                    bytes_done: bytes_done.fetch_add(decoded as u64, Ordering::Relaxed)
                        + decoded as u64,
                });
            }
        };
        let Some(encoded) = fetch(&plan.units, shards, i)? else {
            report(0);
            return Ok((i, Decoded::Missing));
        };
        let cap = budget.map(|(b, _)| b.saturating_sub(held.load(Ordering::Relaxed)));
        let (bytes, index) = codec
            .decode(Vec::from(encoded), &unit.shape, &codec_opts, cap)
            .map_err(|e| match (budget, e) {
                // A decoder stopped at what is left of the budget (or a header declared
                // more): the read is too large for it.
                (Some(budget), UnitFault::Codec(e)) if over_cap(&e) => {
                    let what = format!("{}, decoded,", unit_name(array, shards, unit));
                    over_budget(array, &what, budget.0 + 1, budget)
                }
                (_, e) => unit_error(array, shards, unit, e.to_string()),
            })?;
        let size = bytes.len() as u64 + 8 * unit.num_elements() as u64;
        let now = held.fetch_add(size, Ordering::Relaxed) + size;
        if let Some(budget) = budget
            && now > budget.0
        {
            return Err(over_budget(array, "the decoded chunks", now, budget));
        }
        report(bytes.len());
        Ok((i, Decoded::Stored { bytes, index }))
    };
    let units = plan.units.units.iter().enumerate();
    let mut decoded: Vec<(usize, Decoded)> = if on_caller(plan) {
        units.map(decode_one).collect::<Result<_>>()?
    } else {
        // Units are handed to the decoders in read order (not split in halves, as
        // `par_iter` would), the order in which the fetch-ahead stage fetches them.
        units.par_bridge().map(decode_one).collect::<Result<_>>()?
    };
    decoded.sort_unstable_by_key(|(i, _)| *i);
    Ok(decoded.into_iter().map(|(_, d)| d).collect())
}

/// The runs of every unit, in output order (see [`Run`]).
fn runs_of(units: &[Unit], layout: &EncodedLayout, subset: &[Range<u64>]) -> Vec<Run> {
    let dims = subset.len();
    let mut runs = Vec::new();
    for (u, unit) in units.iter().enumerate() {
        if dims == 0 {
            runs.push(Run {
                unit: u,
                at: 0,
                step: 1,
                out: 0,
                count: 1,
            });
            continue;
        }
        // Where each axis steps in the unit's stored order (C order unless transposed).
        let strides = layout.decoded_strides(&unit.shape_usize(), 1);
        let last = &unit.region[dims - 1];
        let count = (last.end - last.start) as usize;
        // Every row of the region: all index combinations of the leading axes.
        let mut row: Vec<u64> = unit.region.iter().map(|r| r.start).collect();
        'rows: loop {
            let (mut at, mut out) = (0usize, 0usize);
            for d in 0..dims {
                let width = (subset[d].end - subset[d].start) as usize;
                at += (row[d] - unit.origin[d]) as usize * strides[d] as usize;
                out = out * width + (row[d] - subset[d].start) as usize;
            }
            runs.push(Run {
                unit: u,
                at,
                step: strides[dims - 1] as usize,
                out,
                count,
            });
            // The next row: the leading axes advance like an odometer.
            let mut d = dims - 1;
            loop {
                if d == 0 {
                    break 'rows;
                }
                d -= 1;
                row[d] += 1;
                if row[d] < unit.region[d].end {
                    continue 'rows;
                }
                row[d] = unit.region[d].start;
            }
        }
    }
    runs.sort_unstable_by_key(|r| r.out);
    runs
}

/// Where the result is built: in the prototype's own memory when the host can write it,
/// else (a device) in pinned host memory of that device, falling back to ordinary host
/// memory where pinning is not available.
fn build_prototype(proto: &BufferPrototype) -> BufferPrototype {
    match proto.memory() {
        Memory::Cuda(n) => {
            let pinned = BufferPrototype::pinned(n);
            if Buffer::empty(1, &pinned).is_ok() {
                pinned
            } else {
                BufferPrototype::cpu()
            }
        }
        _ => proto.clone(),
    }
}

/// Refuses a result larger than the read's memory limit before its values are allocated.
fn check_result_size<S: ?Sized>(array: &Array<S>, bytes: u64, opts: &ReadOptions) -> Result<()> {
    match read_budget(opts) {
        Some(budget) if bytes > budget.0 => Err(over_budget(array, "the result", bytes, budget)),
        _ => Ok(()),
    }
}

/// Pass 2: offsets from the lengths (prefix sums in output order), then each run's values
/// copied into its own slice of the values, in parallel.
fn assemble<S: ?Sized>(
    array: &Array<S>,
    plan: &VlenPlan,
    decoded: &[Decoded],
    runs: &[Run],
    shape: Vec<u64>,
    proto: &BufferPrototype,
    opts: &ReadOptions,
) -> Result<VarLenBuffer> {
    let n: usize = runs.iter().map(|r| r.count).sum();
    let fill = plan.fill.as_slice();
    // Offsets, and each run's byte count.
    let mut offsets = Vec::with_capacity(8 * (n + 1));
    offsets.extend_from_slice(&0i64.to_le_bytes());
    let mut run_bytes = Vec::with_capacity(runs.len());
    let mut total = 0usize;
    for r in runs {
        let start = total;
        let unit = &decoded[r.unit];
        for k in 0..r.count {
            total += unit.element(r.at + k * r.step, fill).len();
            offsets.extend_from_slice(&(total as i64).to_le_bytes());
        }
        run_bytes.push(total - start);
    }
    let build = build_prototype(proto);
    check_result_size(array, (total + offsets.len()) as u64, opts)?;
    // Every byte is written below (the runs tile the values); an error drops the buffer.
    let values = Buffer::empty_unwritten(total, &build)?;
    values.with_host_mut(|dst| {
        let mut pieces = Vec::with_capacity(runs.len());
        let mut rest = dst;
        for (r, &len) in runs.iter().zip(&run_bytes) {
            let (piece, tail) = rest.split_at_mut(len);
            pieces.push((r, piece));
            rest = tail;
        }
        pieces.into_par_iter().for_each(|(r, piece)| {
            let unit = &decoded[r.unit];
            let mut pos = 0;
            for k in 0..r.count {
                let src = unit.element(r.at + k * r.step, fill);
                piece[pos..pos + src.len()].copy_from_slice(src);
                pos += src.len();
            }
        });
        Ok(())
    })?;
    let offsets = Buffer::from_buffer(&Buffer::from_vec(offsets), &build)?;
    let (offsets, values) = if build.memory() == proto.memory() {
        (offsets, values)
    } else {
        (offsets.copy_to_new(proto)?, values.copy_to_new(proto)?)
    };
    Ok(VarLenBuffer::from_checked(
        shape, plan.kind, offsets, values,
    ))
}
