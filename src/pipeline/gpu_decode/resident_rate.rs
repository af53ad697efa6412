//! The device decoder's limits for one array, each measured on its own so that a read's
//! stage timings can be held against them ([`decode_limits`]):
//!
//! - the *resident* rate: every chunk's compressed payload already in device memory, only
//!   the batched decompression, in batches of the size a read's batch plan gives them
//!   (nvCOMP on CUDA; the host twin's CPU decoder on the host);
//! - the *host codec* rate: the same chunks decoded one after another on one thread with
//!   the CPU codec the pipeline's workers use (a read on `cores` threads reaches at most
//!   `cores` times it); of large arrays, a sample of them spread over the array
//!   ([`HOST_CODEC_SAMPLE`] decoded bytes, about), so that a 1 GiB line takes a second.
//!
//! The chunks are fetched and walked as a read does (whole chunks, or the inner chunks of
//! shards through their index), before anything is timed.

use super::batch_plan::{BatchPlanInput, align_up, batch_plan};
use super::tuning::tuning;
use crate::buffer::BufferPrototype;
use crate::device::{BatchItem, DeviceOps, ops_for};
use crate::errors::{Error, Result};
use crate::memory::Region;
use crate::options::ReadOptions;
use crate::pipeline::{FetchStage, InnerFetch, ShardReads};
use crate::zarr::{
    DeviceCodec, DevicePayload, ShardIndex, UnitSource, chunk_error, data_type_of, plan_units,
};
use std::ops::Range;
use std::time::Instant;
use zarrs::array::Array;
use zarrs::storage::ReadableStorageTraits;

/// About the most decoded bytes the host codec's rate is measured on per pass.
const HOST_CODEC_SAMPLE: usize = 128 << 20;

/// What [`decode_limits`] measured for an array.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecodeLimits {
    /// Chunks (or inner chunks) measured: the stored ones the device decoder takes (a read
    /// decodes the others on the CPU).
    pub chunks: usize,
    /// Their stored bytes, as fetched.
    pub stored_bytes: u64,
    /// Their decoded bytes.
    pub decoded_bytes: u64,
    /// Most chunks in one batch of the resident measurement (the batch plan's).
    pub chunks_per_batch: usize,
    /// Decoded GB/s of the batched decompression of chunks already in device memory
    /// (median of the repetitions).
    pub resident_gbps: f64,
    /// Decoded GB/s of the CPU codec on one thread (median of the repetitions; on every
    /// k-th chunk of arrays of more than 128 MiB, about 128 MiB of them).
    pub host_codec_gbps: f64,
    /// The host's CPU cores: the host codec's limit is `host_codec_gbps × cores`.
    pub cores: usize,
}

/// One chunk as the device decoder takes it: its payload (blosc streams packed at aligned
/// places), the (input, output) ranges of its batch items, and its decoded size.
struct Payload {
    bytes: Vec<u8>,
    items: Vec<(Range<usize>, Range<usize>)>,
    decoded: usize,
}

/// Measures the device decoder's limits for every stored chunk of `array` (see the module
/// docs): the batched decompression of the chunks already in the memory of `proto`'s device
/// (CUDA, or the host twin for host memory), and the CPU codec on one thread; each the
/// median of `reps` timed passes, after one checked pass. `opts` gives the staging budget
/// and checksum validation.
///
/// # Errors
/// A chain the device decoder does not take (`InvalidArgument`), a device without a batch
/// decoder, a damaged chunk, or a store error.
pub fn decode_limits<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    proto: &BufferPrototype,
    opts: &ReadOptions,
    reps: usize,
) -> Result<DecodeLimits> {
    let ops = ops_for(proto.memory())?;
    ops.batch_decoder().map_err(Error::DeviceUnavailable)?;
    let elem = data_type_of(array)?.size();
    let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
    let mut plan = plan_units(array, &all, elem)?;
    let codec = plan
        .chain
        .as_ref()
        .and_then(|c| DeviceCodec::of(&c.chain))
        .filter(|c| c.compression().is_some())
        .ok_or_else(|| {
            Error::InvalidArgument("the array's codecs do not decode on the device".into())
        })?;
    let shards = match plan.source {
        UnitSource::Subchunk => Some(ShardReads::new(
            ShardIndex::with_limit(array, opts.validate_checksums, None)?.shared_with(array),
            &mut plan.units,
            InnerFetch::for_store(array),
            opts.staging_bytes as u64,
        )),
        _ => None,
    };
    let stage = FetchStage::for_sync_store(array);
    let (mut stored, mut payloads) = (Vec::new(), Vec::new());
    for unit in &plan.units {
        let Some(encoded) = stage.fetch(&plan, shards.as_ref(), unit)? else {
            continue;
        };
        let decoded = unit.num_elements() * elem;
        let payload = codec
            .device_payload(&encoded, decoded, opts.validate_checksums)
            .map_err(|why| chunk_error(array, &unit.indices, why))?;
        // A chunk a read would decode on the CPU is left out, as the device never sees it.
        let Some(p) = device_payload(&encoded, payload, decoded) else {
            continue;
        };
        payloads.push(p);
        stored.push((encoded, decoded));
    }
    let reps = reps.max(1);
    let decoded_total: usize = stored.iter().map(|(_, d)| d).sum();
    let every = decoded_total.div_ceil(HOST_CODEC_SAMPLE).max(1);
    let sample: Vec<&(bytes::Bytes, usize)> = stored.iter().step_by(every).collect();
    let host_codec_gbps = host_codec_rate(
        &sample,
        &|enc, out| codec.decode_into(enc, out, opts.validate_checksums),
        reps,
    )?;
    let compression = codec.compression().ok_or_else(|| {
        Error::InvalidArgument("the array's codecs do not decode on the device".into())
    })?;
    let plan_input = BatchPlanInput {
        sm_count: ops.sm_count()?,
        chunks: payloads.len(),
        decoded_chunk_bytes: payloads.iter().map(|p| p.decoded).max().unwrap_or(0),
        compressed_chunk_bytes: payloads.iter().map(|p| p.bytes.len()).max(),
        staging_bytes: opts.staging_bytes,
        tuning: tuning()?,
    };
    let chunks_per_batch = batch_plan(plan_input).chunks_per_batch.max(1);
    let resident = Resident::upload(ops.as_ref(), &payloads, chunks_per_batch)?;
    let resident_gbps = resident.rate(ops.as_ref(), compression, reps)?;
    Ok(DecodeLimits {
        chunks: payloads.len(),
        stored_bytes: stored.iter().map(|(e, _)| e.len() as u64).sum(),
        decoded_bytes: resident.decoded as u64,
        chunks_per_batch,
        resident_gbps,
        host_codec_gbps,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

/// The chunk as the device decoder takes it, or `None` when it decodes on the CPU.
fn device_payload(encoded: &[u8], payload: DevicePayload, decoded: usize) -> Option<Payload> {
    match payload {
        DevicePayload::Whole(range) => Some(Payload {
            items: vec![(0..range.len(), 0..decoded)],
            bytes: encoded[range].to_vec(),
            decoded,
        }),
        DevicePayload::Blosc(range, mut frame) => {
            // Packed as a read packs them into its staging slot, which a chunk's decoded
            // size bounds.
            let mut bytes = vec![0; decoded.max(range.len())];
            let len = frame.pack_streams(&encoded[range], &mut bytes)?;
            bytes.truncate(len);
            let items = frame
                .streams
                .iter()
                .filter(|s| !s.stored)
                .map(|s| (s.input.clone(), s.output.clone()))
                .collect();
            Some(Payload {
                bytes,
                items,
                decoded,
            })
        }
        DevicePayload::Cpu => None,
    }
}

/// A CPU codec: decodes one chunk's encoded bytes into its decoded size, or says why not.
type CodecFn<'a> = dyn Fn(&[u8], &mut [u8]) -> std::result::Result<usize, String> + 'a;

/// Median decoded GB/s of `reps` single-threaded passes of `decode` over the chunks `stored`
/// (encoded bytes, decoded size).
fn host_codec_rate(
    stored: &[&(bytes::Bytes, usize)],
    decode: &CodecFn,
    reps: usize,
) -> Result<f64> {
    let largest = stored.iter().map(|(_, d)| *d).max().unwrap_or(0);
    let total: usize = stored.iter().map(|(_, d)| d).sum();
    let mut out = vec![0u8; largest];
    let mut secs = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        for &(encoded, decoded) in stored {
            let n = decode(encoded, &mut out[..*decoded]).map_err(Error::InvalidArgument)?;
            if n != *decoded {
                return Err(Error::InvalidArgument(format!(
                    "the CPU codec decoded {n} bytes of a chunk of {decoded}"
                )));
            }
        }
        secs.push(t.elapsed().as_secs_f64());
    }
    Ok(gbps(total, &mut secs))
}

/// Decoded GB/s of `bytes` in the median of `secs`.
fn gbps(bytes: usize, secs: &mut [f64]) -> f64 {
    secs.sort_by(f64::total_cmp);
    let median = secs.get(secs.len() / 2).copied().unwrap_or(0.0);
    bytes as f64 / median.max(1e-9) / 1e9
}

/// Every chunk's payload in device memory, and the batches that decode them.
struct Resident {
    /// The payloads, each at an aligned offset (kept alive for the items' regions).
    _input: Region,
    /// One batch's decoded chunks, each at an aligned offset (every batch reuses it).
    _output: Region,
    batches: Vec<Vec<BatchItem>>,
    decoded: usize,
}

impl Resident {
    /// Copies the payloads into device memory (through staging memory) and forms batches
    /// of at most `per_batch` chunks.
    fn upload(ops: &dyn DeviceOps, payloads: &[Payload], per_batch: usize) -> Result<Self> {
        let offsets: Vec<usize> = payloads
            .iter()
            .scan(0, |at, p| {
                let here = *at;
                *at += align_up(p.bytes.len());
                Some(here)
            })
            .collect();
        let total_in = payloads
            .iter()
            .map(|p| align_up(p.bytes.len()))
            .sum::<usize>();
        let batch_out = payloads
            .chunks(per_batch)
            .map(|b| b.iter().map(|p| align_up(p.decoded)).sum::<usize>())
            .max()
            .unwrap_or(0);
        let staging = ops.alloc_staging(total_in.max(1))?;
        staging.with_host_mut(|host| {
            for (p, &at) in payloads.iter().zip(&offsets) {
                host[at..at + p.bytes.len()].copy_from_slice(&p.bytes);
            }
            Ok(())
        })?;
        let (input, output) = (ops.alloc(total_in.max(1))?, ops.alloc(batch_out.max(1))?);
        input.settle()?;
        output.settle()?;
        let q = ops.default_queue();
        ops.copy(&q, &staging, &input)?;
        ops.synchronize(&q)?;
        let mut batches = Vec::new();
        for (chunk_offsets, batch) in offsets.chunks(per_batch).zip(payloads.chunks(per_batch)) {
            let mut out_at = 0;
            let mut items = Vec::new();
            for (&at, p) in chunk_offsets.iter().zip(batch) {
                for (i, o) in &p.items {
                    items.push(BatchItem {
                        input: input.sub(at + i.start, at + i.end),
                        output: output.sub(out_at + o.start, out_at + o.end),
                    });
                }
                out_at += align_up(p.decoded);
            }
            batches.push(items);
        }
        Ok(Resident {
            _input: input,
            _output: output,
            batches,
            decoded: payloads.iter().map(|p| p.decoded).sum(),
        })
    }

    /// Median decoded GB/s of `reps` passes over every batch (two descriptors in turn, as a
    /// read's two batches in flight), after one pass whose every item is checked.
    fn rate(
        &self,
        ops: &dyn DeviceOps,
        format: crate::compression_formats::Compression,
        reps: usize,
    ) -> Result<f64> {
        let capacity = self.batches.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut descs = [ops.new_batch_desc(capacity)?, ops.new_batch_desc(capacity)?];
        let q = ops.new_queue()?;
        for items in &self.batches {
            ops.decompress_batch(&q, format, items, &mut descs[0])?;
            ops.synchronize(&q)?;
            let outcomes = descs[0].outcomes(items.len(), &|st| ops.describe_status(st))?;
            for (item, outcome) in items.iter().zip(outcomes) {
                match outcome {
                    Ok(n) if n == item.output.len() => {}
                    Ok(n) => {
                        return Err(Error::InvalidArgument(format!(
                            "the device decoder produced {n} bytes where a stream holds {}",
                            item.output.len()
                        )));
                    }
                    Err(why) => {
                        return Err(Error::InvalidArgument(format!(
                            "the device decoder failed: {why}"
                        )));
                    }
                }
            }
        }
        let mut secs = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            for (b, items) in self.batches.iter().enumerate() {
                ops.decompress_batch(&q, format, items, &mut descs[b % 2])?;
            }
            ops.synchronize(&q)?;
            secs.push(t.elapsed().as_secs_f64());
        }
        Ok(gbps(self.decoded, &mut secs))
    }
}
