//! The read driver: plans a request's units, then fetches each one (through the caller's
//! fetch stage, sync or async) and decodes it on the worker that fetched it, into the staged
//! read's slots.

use super::host_scatter::Claim;
use super::read_request::ReadRequest;
use super::read_route::{RouteOptions, run_read};
use super::staged_read::Decoder;
use crate::device::{DeviceOps, ops_for};
use crate::errors::{BoxError, Error, Result};
use crate::options::{Decode, ReadOptions};
use crate::options::{io_concurrency, io_concurrency_is_default};
use crate::pipeline::cache::device_cache::ReadCache;
use crate::pipeline::fetch::fetch_ahead::{AheadLimits, FetchAhead};
use crate::pipeline::fetch::fetch_stage::FetchStage;
use crate::pipeline::fetch::shard_reads::{InnerFetch, ShardReads};
use crate::pipeline::gpu_decode::device_parts::{
    Compressed, DeviceDecode, DeviceParts, MAX_STREAMS_PER_CHUNK,
};
use crate::pipeline::{Produced, StagedRead, largest_unit_bytes};
use crate::place::Memory;
use crate::stage_timings::{Stage, StageTimings};
use crate::zarr::{
    DeviceCodec, DevicePayload, Framing, ShardIndex, Unit, UnitPlan, UnitSource, chunk_error,
    fill_bytes,
};
use bytes::Bytes;
use std::borrow::Cow;
use std::sync::Once;
use std::time::Instant;
use zarrs::array::{Array, CodecOptions};

/// Runs the staged pipeline for `request` (its units planned now unless a route planned them
/// already), fetching each unit through `stage` (ahead of the workers for object stores) and
/// decoding it on a worker; a read with stage timings adds its end-to-end time to them.
pub(crate) fn run_staged<S: ?Sized + Send + Sync + 'static>(
    request: ReadRequest<'_, S>,
    inner_fetch: InnerFetch,
    stage: &FetchStage<'_>,
) -> Result<()> {
    let Some(timings) = request.opts.stage_timings.clone() else {
        return run_planned(request, inner_fetch, stage);
    };
    let started = Instant::now();
    let result = run_planned(request, inner_fetch, stage);
    timings.add_read(started.elapsed());
    result
}

/// [`run_staged`]'s read.
fn run_planned<S: ?Sized + Send + Sync + 'static>(
    mut request: ReadRequest<'_, S>,
    inner_fetch: InnerFetch,
    stage: &FetchStage<'_>,
) -> Result<()> {
    let mut plan = request.take_plan()?;
    let (array, subset, out, opts) = (request.array, request.subset, request.out, request.opts);
    let elem = out.dtype().size();
    // Sharded arrays: units ordered shard by shard, each shard's inner chunks fetched in as
    // few requests as possible.
    let shards = match plan.source {
        UnitSource::Subchunk => Some(ShardReads::new(
            ShardIndex::with_limit(array, opts.validate_checksums, opts.max_bytes)?
                .shared_with(array),
            &mut plan.units,
            inner_fetch,
            opts.staging_bytes as u64,
        )),
        _ => None,
    };
    let ops = ops_for(out.memory())?;
    let device_codec = plan.chain.as_ref().and_then(|c| DeviceCodec::of(&c.chain));
    // For nvCOMP's per-chunk limit: the largest decoded chunk (a stored chunk longer than a
    // staging slot, about that size, decodes on the CPU anyway).
    let largest_chunk = largest_unit_bytes(&plan.units, elem) as u64;
    let choice = crate::pipeline::gpu_decode::decode_choice::resolve_decode(
        opts.decode,
        out.memory(),
        ops.as_ref(),
        device_codec.and_then(|c| c.compression()),
        plan.units.len(),
    );
    let device_decode = device_decode(
        choice,
        out.memory(),
        ops.as_ref(),
        device_codec,
        largest_chunk,
    );
    let unit_error = |unit: &Unit, why: String| -> Error { chunk_error(array, &unit.indices, why) };
    // Taken before anything is fetched (see `ReadCache::new`).
    let cache = opts
        .chunk_cache()
        .map(|c| ReadCache::new(c, array, ops.memory()));
    let ahead = fetch_ahead_limits(array, opts);
    let staged = StagedRead {
        ops,
        units: &plan.units,
        layout: plan.layout(),
        request_start: subset.iter().map(|r| r.start).collect(),
        fill_value: fill_bytes(array),
        staging_bytes: opts.staging_bytes,
        threads: opts.threads(),
        progress: opts.progress.clone(),
        unit_error: &unit_error,
        stage_timings: opts.stage_timings.clone(),
    };
    let routes = RouteOptions {
        device_decode,
        cache: cache.as_ref(),
        claim: if ahead.is_some() {
            Claim::OneByOne
        } else {
            Claim::Runs
        },
    };
    // Chunks are decoded in parallel, so each codec runs single-threaded.
    let codec_opts = CodecOptions::default()
        .with_validate_checksums(opts.validate_checksums)
        .with_concurrent_target(1);
    // Chains with no bytes-to-bytes codecs store chunks in their decoded layout.
    let stored_as_decoded = plan
        .chain
        .as_ref()
        .is_some_and(|c| c.chain.bytes_to_bytes_codecs().is_empty());
    let producer = UnitProducer {
        array,
        plan: &plan,
        opts,
        elem,
        device_codec,
        stored_as_decoded,
        codec_opts,
        timings: opts.stage_timings.as_deref(),
    };
    let run = |unit_fetch: &UnitFetch<'_>| {
        run_read(&staged, &routes, out, &|unit, slot, decoder| {
            let encoded = producer.timed(
                Stage::Fetch,
                || unit_fetch(unit),
                |got| match got {
                    Ok(Some(bytes)) => bytes.len() as u64,
                    _ => 0,
                },
            )?;
            producer.produce(encoded, unit, slot, decoder)
        })
    };
    match ahead {
        Some(limits) => FetchAhead::run(
            &plan,
            &plan.units,
            shards.as_ref(),
            stage,
            limits,
            |ahead| run(&|unit| ahead.fetch(unit)),
        ),
        None => run(&|unit| stage.fetch(&plan, shards.as_ref(), unit)),
    }
}

/// One unit's encoded bytes, for the staged read's producer.
type UnitFetch<'a> = dyn Fn(&Unit) -> Result<Option<Bytes>> + Sync + 'a;

/// How far ahead of the decoders a read of `array` fetches: only from object stores (a local
/// store answers as fast as a worker asks), up to `ReadOptions::io_concurrency` requests and
/// the staging budget in bytes fetched and not yet decoded.
pub(crate) fn fetch_ahead_limits<S: ?Sized + 'static>(
    array: &Array<S>,
    opts: &ReadOptions,
) -> Option<AheadLimits> {
    if !crate::stores::fetches_are_remote(array.storage().as_ref()) {
        return None;
    }
    Some(AheadLimits {
        requests: io_concurrency(opts.io_concurrency),
        auto: io_concurrency_is_default(opts.io_concurrency),
        bytes: opts.staging_bytes.max(1) as u64,
        origin: crate::stores::latency_origin(array.storage().as_ref()),
    })
}

/// Turns a unit's fetched bytes into what the staged read wants in its slot: decoded on the
/// CPU, left compressed for the device decoder, or handed over as stored.
struct UnitProducer<'a, S: ?Sized> {
    array: &'a Array<S>,
    plan: &'a UnitPlan,
    opts: &'a ReadOptions,
    elem: usize,
    device_codec: Option<DeviceCodec>,
    /// The chain has no bytes-to-bytes codecs: chunks are stored in their decoded layout.
    stored_as_decoded: bool,
    codec_opts: CodecOptions,
    /// Where the fetch, header walk and staging copy of each unit add their time.
    timings: Option<&'a StageTimings>,
}

impl<S: ?Sized + Send + Sync + 'static> UnitProducer<'_, S> {
    /// Runs `f`, adding its time and the bytes `bytes` counts of its outcome to `stage` when
    /// the read is timed.
    fn timed<R>(&self, stage: Stage, f: impl FnOnce() -> R, bytes: impl FnOnce(&R) -> u64) -> R {
        let Some(t) = self.timings else {
            return f();
        };
        let started = Instant::now();
        let r = f();
        t.add(stage, started.elapsed(), bytes(&r));
        r
    }

    /// Produces `unit` from its encoded bytes (`None`: not stored) into `slot`.
    fn produce(
        &self,
        encoded: Option<Bytes>,
        unit: &Unit,
        slot: &mut [u8],
        decoder: Decoder,
    ) -> Result<Produced> {
        let Some(encoded) = encoded else {
            return Ok(Produced::Missing);
        };
        let (array, opts, elem) = (self.array, self.opts, self.elem);
        if let (Decoder::Device, Some(codec)) = (decoder, self.device_codec) {
            // Checked on the CPU before the device sees it (nvCOMP trusts its input).
            let expected = unit.num_elements() * elem;
            let walk = || codec.device_payload(&encoded, expected, opts.validate_checksums);
            let payload = self
                .timed(Stage::Walk, walk, |_| encoded.len() as u64)
                .map_err(|why| chunk_error(array, &unit.indices, why))?;
            match payload {
                DevicePayload::Whole(range) => {
                    // A chunk that does not compress below a slot is decoded here instead.
                    if let Some(dst) = slot.get_mut(..range.len()) {
                        let copy = || dst.copy_from_slice(&encoded[range.clone()]);
                        self.timed(Stage::Staging, copy, |()| range.len() as u64);
                        return Ok(Produced::Compressed(Compressed {
                            len: range.len(),
                            parts: DeviceParts::Whole,
                        }));
                    }
                }
                DevicePayload::Blosc(range, mut frame)
                    if frame.compressed_streams() <= MAX_STREAMS_PER_CHUNK =>
                {
                    // Each stream at an aligned place in the slot, as nvCOMP needs.
                    let pack = || frame.pack_streams(&encoded[range], slot);
                    let packed = self.timed(Stage::Staging, pack, |n| n.unwrap_or(0) as u64);
                    if let Some(len) = packed {
                        return Ok(Produced::Compressed(Compressed {
                            len,
                            parts: DeviceParts::Blosc(Box::new(frame)),
                        }));
                    }
                }
                // Too many streams for one batch, or not for the device.
                DevicePayload::Blosc(..) | DevicePayload::Cpu => {}
            }
        }
        if self.stored_as_decoded {
            // Nothing to decompress: the fetched bytes are the decoded ones.
            let expected = unit.num_elements() * elem;
            if encoded.len() != expected {
                return Err(chunk_error(
                    array,
                    &unit.indices,
                    format!(
                        "stored as {} bytes, but its encoding takes exactly {expected}: the \
                     chunk is damaged",
                        encoded.len()
                    ),
                ));
            }
            return Ok(Produced::Stored(encoded));
        }
        if let Some(codec) = self.device_codec {
            // The common chains decode straight into the slot: no allocation, no copy.
            let expected = unit.num_elements() * elem;
            let dst = slot.get_mut(..expected).ok_or_else(|| {
                chunk_error(
                    array,
                    &unit.indices,
                    "the chunk does not fit its staging slot",
                )
            })?;
            return codec
                .decode_into(&encoded, dst, opts.validate_checksums)
                .map(Produced::Decoded)
                .map_err(|why| chunk_error(array, &unit.indices, why));
        }
        decode_unit(array, self.plan, &self.codec_opts, unit, encoded, slot)
    }
}

/// Whether, and how, a read into `memory` decompresses on the device (see [`Decode`]).
fn device_decode(
    choice: Decode,
    memory: Memory,
    ops: &dyn DeviceOps,
    codec: Option<DeviceCodec>,
    largest_chunk: u64,
) -> Option<DeviceDecode> {
    let codec = codec?;
    let compression = codec.compression()?;
    let hybrid = match (choice, memory) {
        (Decode::Cpu | Decode::Auto, _) => return None,
        (Decode::Gpu, _) => false,
        (Decode::Both, Memory::Cuda(_)) => true,
        // The host twin decodes with the same CPU codecs: nothing to share with.
        (Decode::Both, _) => false,
    };
    if let Err(why) = ops.batch_decoder() {
        static SAID: Once = Once::new();
        SAID.call_once(|| eprintln!("zarrbuf: decoding on the CPU: {why}"));
        return None;
    }
    // Blosc chunks reach nvCOMP as their blocks, far smaller than the chunk; a whole
    // stream over nvCOMP's limit would be refused by it, or worse.
    if !matches!(codec.framing, Framing::Blosc(_)) && largest_chunk > compression.max_chunk_bytes()
    {
        static SAID: Once = Once::new();
        SAID.call_once(|| {
            eprintln!(
                "zarrbuf: decoding on the CPU: chunks of {largest_chunk} bytes are over \
                 nvCOMP's {compression} limit of {} bytes",
                compression.max_chunk_bytes()
            )
        });
        return None;
    }
    Some(DeviceDecode {
        compression,
        hybrid,
        blosc: matches!(codec.framing, Framing::Blosc(_)),
    })
}

/// Runs the CPU half of a unit's codecs on its encoded bytes, into `slot`: only the
/// bytes-to-bytes codecs when the device can do the rest, else the whole chain.
pub(crate) fn decode_unit<S: ?Sized>(
    array: &Array<S>,
    plan: &UnitPlan,
    codec_opts: &CodecOptions,
    unit: &Unit,
    encoded: Bytes,
    slot: &mut [u8],
) -> Result<Produced> {
    // The fetched buffer itself where the bytes are all of it; a part of a larger response
    // (an inner chunk of a merged shard request) is copied, as the codecs take it owned.
    let encoded = Vec::from(encoded);
    let fail = |e: BoxError| chunk_error(array, &unit.indices, e);
    let decoded: Vec<u8> = match &plan.chain {
        Some(chain) => chain
            .decode_bytes(
                Cow::Owned(encoded),
                &unit.shape,
                array.data_type(),
                array.fill_value(),
                codec_opts,
            )
            .map_err(|e| fail(e.into()))?,
        None => {
            use zarrs::array::ArrayToBytesCodecTraits;
            array
                .codecs()
                .decode(
                    Cow::Owned(encoded),
                    &unit.shape,
                    array.data_type(),
                    array.fill_value(),
                    codec_opts,
                )
                .map_err(|e| fail(e.into()))?
                .into_fixed()
                .map_err(|e| fail(e.into()))?
                .into_owned()
        }
    };
    let capacity = slot.len();
    let dst = slot.get_mut(..decoded.len()).ok_or_else(|| {
        fail(BoxError::from(format!(
            "decoded to {} bytes, more than the {capacity} a chunk of shape {:?} holds",
            decoded.len(),
            unit.shape
        )))
    })?;
    dst.copy_from_slice(&decoded);
    Ok(Produced::Decoded(decoded.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::HostOps;

    fn decode_choice(framing: Framing, largest_chunk: u64) -> Option<DeviceDecode> {
        let codec = DeviceCodec {
            framing,
            crc32c: false,
        };
        device_decode(
            Decode::Gpu,
            Memory::Host,
            &HostOps,
            Some(codec),
            largest_chunk,
        )
    }

    #[test]
    fn chunks_over_nvcomps_limit_decode_on_the_cpu() {
        let zstd_limit = (1u64 << 31) - 1;
        assert!(decode_choice(Framing::Zstd, zstd_limit).is_some());
        assert!(decode_choice(Framing::Zstd, zstd_limit + 1).is_none());
        let deflate_limit = (1u64 << 32) - 1;
        for framing in [Framing::Gzip, Framing::Zlib, Framing::Lz4] {
            assert!(decode_choice(framing, zstd_limit + 1).is_some());
            assert!(decode_choice(framing, deflate_limit).is_some());
            assert!(decode_choice(framing, deflate_limit + 1).is_none());
        }
    }
}
