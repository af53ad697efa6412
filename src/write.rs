//! Writing any subset of a zarrs `Array` from an [`NDBuffer`] in any memory.

use crate::codec_plan::ChainPlan;
use crate::device::ops_for;
use crate::dtype::{ByteOrder, Order};
use crate::error::{Error, Result};
use crate::ndbuffer::NDBuffer;
use crate::options::{PipelineMode, WriteOptions};
use crate::pipeline_write::{Gathered, StagedWrite};
use crate::prototype::BufferPrototype;
use crate::read::{chunk_error, data_type_of, fill_bytes, zarr_error};
use crate::units::{Unit, check_subset, plan_chunks};
use std::ops::Range;
use zarrs::array::{Array, ArrayBytes, ArraySubset, CodecOptions};
use zarrs::storage::ReadableWritableStorageTraits;

/// Writing zarrbuf buffers into zarrs arrays: an extension trait on `zarrs::array::Array`.
///
/// Host data is handed to zarrs without copies; device data is gathered, transposed and
/// byte-swapped on the device, copied into pinned staging, then compressed and stored on the
/// CPU. Chunks partly covered by the subset are read, merged and written back. Each chunk is
/// stored on its own, so a failure leaves every chunk stored before it intact.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
///
/// let array = ArrayBuilder::new(vec![3, 4], vec![2, 2], data_type::int16(), -1i16)
///     .build(Arc::new(MemoryStore::new()), "/a")
///     .map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// array.write(&[1..2, 1..3], &NDBuffer::from_vec(vec![5i16, 6], &[1, 2])?)?;
/// let all = array.read_all(&BufferPrototype::cpu())?;
/// assert_eq!(all.to_vec::<i16>()?, vec![-1, -1, -1, -1, -1, 5, 6, -1, -1, -1, -1, -1]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub trait ArrayWriteExt {
    /// Writes `data` (shape of `subset`, the array's data type, any memory) into `subset`.
    fn write(&self, subset: &[Range<u64>], data: &NDBuffer) -> Result<()> {
        self.write_opt(subset, data, &WriteOptions::default())
    }

    /// [`write`](Self::write) with options.
    fn write_opt(&self, subset: &[Range<u64>], data: &NDBuffer, opts: &WriteOptions) -> Result<()>;

    /// Writes the whole array.
    fn write_all(&self, data: &NDBuffer) -> Result<()>;
}

impl<S: ?Sized + ReadableWritableStorageTraits + 'static> ArrayWriteExt for Array<S> {
    fn write_opt(&self, subset: &[Range<u64>], data: &NDBuffer, opts: &WriteOptions) -> Result<()> {
        check_subset(self.shape(), subset, self.path().as_str())?;
        let dtype = data_type_of(self)?;
        if data.dtype() != dtype {
            return Err(Error::DataType(format!(
                "array {} holds {dtype} but the data is {}; convert it with astype",
                self.path(),
                data.dtype()
            )));
        }
        let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
        if data.shape() != shape.as_slice() {
            return Err(Error::ShapeMismatch(format!(
                "the subset has shape {shape:?} but the data has shape {:?}",
                data.shape()
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        if opts.mode == PipelineMode::Auto && data.buffer().is_host_accessible() {
            return write_direct(self, subset, data, opts);
        }
        write_staged(self, self, subset, data, opts)
    }

    fn write_all(&self, data: &NDBuffer) -> Result<()> {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        self.write(&subset, data)
    }
}

/// Host data: zarrs encodes straight from the caller's bytes when they are C-contiguous.
fn write_direct<S: ?Sized + ReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    data: &NDBuffer,
    opts: &WriteOptions,
) -> Result<()> {
    let contiguous = if data.is_c_contiguous() && data.byte_order() == ByteOrder::native() {
        data.clone()
    } else {
        data.copy_to(&BufferPrototype::cpu(), Order::C)?
    };
    let bytes = contiguous.buffer().as_host_bytes()?;
    let start = contiguous.offset();
    let body = &bytes[start..start + contiguous.nbytes()];
    array
        .store_array_subset_opt(
            &ArraySubset::new_with_ranges(subset),
            ArrayBytes::from(body),
            &opts.codec_options(),
        )
        .map_err(|e| zarr_error(array, e))
}

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
    if let Some(c) = &chain {
        if c.layout.endian != ByteOrder::native() {
            zarrbuf_codecs::host::byte_swap(&mut fill_encoded, data.dtype().swap_unit())?;
        }
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
