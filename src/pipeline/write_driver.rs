//! The write driver: plans a request's chunks, runs the staged write (gather, transpose and
//! byte swap on the device, copy to host staging) and compresses and stores each chunk on
//! the worker threads, through a [`ChunkSink`] (a sync array, or an async one).

use super::{Gathered, StagedWrite};
use crate::buffer::NDBuffer;
use crate::device::ops_for;
use crate::dtype::ByteOrder;
use crate::error::Result;
use crate::options::WriteOptions;
use crate::zarr::{ChainPlan, Unit, chunk_error, fill_bytes, plan_chunks};
use std::ops::Range;
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
    let elem = data.dtype().size();
    let units = plan_chunks(array, subset)?;
    let chain = ChainPlan::new(array.codecs(), elem)?;
    let staged = StagedWrite {
        ops: ops_for(data.memory())?,
        units: &units,
        layout: chain.as_ref().map(|c| c.layout.clone()),
        request_start: subset.iter().map(|r| r.start).collect(),
        fill_value: fill_bytes(array),
        array_shape: array.shape().to_vec(),
        staging_bytes: opts.staging_bytes,
        threads: opts.threads(),
        progress: opts.progress.clone(),
    };
    // Chunks are compressed in parallel, so each codec runs single-threaded.
    let codec_opts = opts.codec_options().with_concurrent_target(1);
    let mut fill_encoded = fill_bytes(array);
    if let Some(c) = &chain
        && c.layout.endian != ByteOrder::native()
    {
        zarrbuf_codecs::host::byte_swap(&mut fill_encoded, data.dtype().swap_unit())?;
    }
    let consume = |unit: &Unit, gathered: &Gathered, bytes: &[u8]| -> Result<()> {
        match (gathered, &chain) {
            (Gathered::FullChunk, Some(chain)) => {
                if !opts.store_empty_chunks
                    && bytes
                        .chunks_exact(fill_encoded.len())
                        .all(|e| e == fill_encoded)
                {
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
