//! The write driver: plans a request's chunks, runs the staged write (gather, transpose and
//! byte swap on the device, copy to host staging) and compresses and stores each chunk on
//! the worker threads, through a [`ChunkSink`] (a sync array, or an async one).

use super::{DeviceCompress, Gathered, StagedWrite};
use crate::buffer::NDBuffer;
use crate::device::{DeviceOps, max_chunk_bytes, ops_for};
use crate::dtype::ByteOrder;
use crate::error::{Error, Result};
use crate::options::{Compress, WriteOptions};
use crate::zarr::{ChainPlan, Unit, WriteCodec, chunk_error, fill_bytes, plan_chunks};
use std::ops::Range;
use std::sync::{Arc, Once};
use zarrs::array::{Array, ArrayBytes, ArraySubset, CodecOptions};
use zarrs::storage::ReadableWritableStorageTraits;

/// Where the staged write puts finished chunks: a sync array, or an async one driven from
/// the blocking pipeline thread.
pub(crate) trait ChunkSink: Sync {
    /// Removes a chunk that holds only the fill value.
    fn erase(&self, indices: &[u64]) -> Result<()>;
    /// Stores fully encoded chunk bytes.
    ///
    /// # Safety
    /// `encoded` must be a valid encoding of the chunk under the array's codec chain.
    unsafe fn store_encoded(&self, indices: &[u64], encoded: bytes::Bytes) -> Result<()>;
    /// Merges `bytes` (native, C order) into `local` of the chunk (read-modify-write).
    fn store_subset(
        &self,
        indices: &[u64],
        local: &ArraySubset,
        bytes: &[u8],
        opts: &CodecOptions,
    ) -> Result<()>;
}

impl<S: ?Sized + ReadableWritableStorageTraits + 'static> ChunkSink for Array<S> {
    fn erase(&self, indices: &[u64]) -> Result<()> {
        self.erase_chunk(indices)
            .map_err(|e| chunk_error(self, indices, e))
    }

    unsafe fn store_encoded(&self, indices: &[u64], encoded: bytes::Bytes) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.store_encoded_chunk(indices, encoded) }
            .map_err(|e| chunk_error(self, indices, e))
    }

    fn store_subset(
        &self,
        indices: &[u64],
        local: &ArraySubset,
        bytes: &[u8],
        opts: &CodecOptions,
    ) -> Result<()> {
        self.store_chunk_subset_opt(indices, local, ArrayBytes::from(bytes), opts)
            .map_err(|e| chunk_error(self, indices, e))
    }
}

/// Device data (or a forced staged write): the staged write pipeline into `sink`.
pub(crate) fn write_staged<S: ?Sized + Send + Sync>(
    array: &Array<S>,
    sink: &dyn ChunkSink,
    subset: &[Range<u64>],
    data: &NDBuffer,
    opts: &WriteOptions,
) -> Result<()> {
    write_staged_on(ops_for(data.memory())?, array, sink, subset, data, opts)
}

/// Whether, and how, a write on `ops` compresses on the device (see [`Compress`]); `None`
/// means the CPU workers compress. Falling back from an explicit [`Compress::Gpu`] says why
/// on stderr once per reason.
fn device_compress(
    choice: Compress,
    ops: &dyn DeviceOps,
    chain: Option<&ChainPlan>,
    chunk_bytes: usize,
    store_empty_chunks: bool,
) -> Option<DeviceCompress> {
    match choice {
        Compress::Cpu | Compress::Auto => return None,
        Compress::Gpu => {}
    }
    let say = |once: &'static Once, why: String| {
        once.call_once(|| eprintln!("zarrbuf: compressing on the CPU: {why}"));
    };
    // Chains the device cannot compress stay on the CPU without a word, as reads do.
    let codec = WriteCodec::of(&chain?.chain).ok()?;
    if let Err(why) = ops.batch_compressor() {
        static SAID: Once = Once::new();
        say(&SAID, why);
        return None;
    }
    let settings = codec.settings();
    let limit = max_chunk_bytes(settings.format);
    if chunk_bytes > limit {
        static SAID: Once = Once::new();
        say(
            &SAID,
            format!(
                "chunks of {chunk_bytes} bytes are larger than the {limit} the device compresses in {}",
                settings.format
            ),
        );
        return None;
    }
    Some(DeviceCompress {
        settings,
        stage_uncompressed: codec.needs_uncompressed() || !store_empty_chunks,
    })
}

/// [`write_staged`] on the device `ops` (tests pass their own).
pub(crate) fn write_staged_on<S: ?Sized + Send + Sync>(
    ops: Arc<dyn DeviceOps>,
    array: &Array<S>,
    sink: &dyn ChunkSink,
    subset: &[Range<u64>],
    data: &NDBuffer,
    opts: &WriteOptions,
) -> Result<()> {
    let elem = data.dtype().size();
    let units = plan_chunks(array, subset)?;
    let chain = ChainPlan::new(array.codecs(), elem)?;
    let chunk_bytes = units
        .iter()
        .map(|u| u.num_elements() * elem)
        .max()
        .unwrap_or(0);
    let compress = device_compress(
        opts.compress,
        ops.as_ref(),
        chain.as_ref(),
        chunk_bytes,
        opts.store_empty_chunks,
    );
    let codec = match (&compress, &chain) {
        (Some(_), Some(c)) => WriteCodec::of(&c.chain).ok(),
        _ => None,
    };
    let unit_error = |unit: &Unit, why: String| -> Error { chunk_error(array, &unit.indices, why) };
    let staged = StagedWrite {
        ops,
        units: &units,
        layout: chain.as_ref().map(|c| c.layout.clone()),
        request_start: subset.iter().map(|r| r.start).collect(),
        fill_value: fill_bytes(array),
        array_shape: array.shape().to_vec(),
        staging_bytes: opts.staging_bytes,
        threads: opts.threads(),
        progress: opts.progress.clone(),
        device_compress: compress,
        unit_error: &unit_error,
    };
    // Chunks are compressed in parallel, so each codec runs single-threaded.
    let codec_opts = opts.codec_options().with_concurrent_target(1);
    let mut fill_encoded = fill_bytes(array);
    if let Some(c) = &chain
        && c.layout.endian != ByteOrder::native()
    {
        zarrbuf_codecs::host::byte_swap(&mut fill_encoded, data.dtype().swap_unit())?;
    }
    let is_empty = |bytes: &[u8]| {
        !opts.store_empty_chunks
            && bytes
                .chunks_exact(fill_encoded.len())
                .all(|e| e == fill_encoded)
    };
    let consume = |unit: &Unit,
                   gathered: &Gathered,
                   bytes: &[u8],
                   compressed: Option<&[u8]>|
     -> Result<()> {
        match (gathered, &chain) {
            (Gathered::Compressed { len }, _) => {
                let (Some(codec), Some(compressed)) = (&codec, compressed) else {
                    return Err(chunk_error(
                        array,
                        &unit.indices,
                        "a device-compressed chunk without its codec or bytes (internal error: please report)",
                    ));
                };
                // The uncompressed chunk is staged whenever empty chunks are skipped.
                if !bytes.is_empty() && is_empty(bytes) {
                    return sink.erase(&unit.indices);
                }
                let encoded = codec
                    .frame(compressed, *len, bytes)
                    .map_err(|why| chunk_error(array, &unit.indices, why))?;
                // SAFETY: `encoded` is the chunk's contents in the chain's encoded layout
                // (gathered as for `FullChunk` below), compressed by the device in the
                // chain's only compressor's format and framed as that codec frames it, with
                // the chain's crc32c appended when it has one (WriteCodec::of accepts only
                // such chains; round trips in tests/device_compress.rs and the GPU check):
                // a valid encoding of this chunk.
                unsafe { sink.store_encoded(&unit.indices, bytes::Bytes::from(encoded)) }
            }
            (Gathered::FullChunk, Some(chain)) => {
                if is_empty(bytes) {
                    return sink.erase(&unit.indices);
                }
                let encoded = chain
                    .encode_bytes(bytes, &codec_opts)
                    .map_err(|e| chunk_error(array, &unit.indices, e))?;
                // SAFETY: `encoded` is the chunk's contents in the chain's encoded layout (the
                // array-to-array and array-to-bytes steps done by the gather kernel, checked
                // against zarrs by the round-trip tests) passed through the chain's own
                // bytes-to-bytes encoders: a valid encoding of this chunk.
                unsafe { sink.store_encoded(&unit.indices, bytes::Bytes::from(encoded)) }
            }
            _ => {
                let local: Vec<Range<u64>> = unit
                    .region
                    .iter()
                    .zip(&unit.origin)
                    .map(|(r, o)| r.start - o..r.end - o)
                    .collect();
                sink.store_subset(
                    &unit.indices,
                    &ArraySubset::new_with_ranges(&local),
                    bytes,
                    &codec_opts,
                )
            }
        }
    };
    staged.run(data, &consume)
}
