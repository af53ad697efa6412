//! Reading any subset of a zarrs `Array` into any [`BufferPrototype`].

use crate::device::ops_for;
use crate::dtype::{ByteOrder, DataType, Order};
use crate::error::{Error, Result};
use crate::memory::with_decode_target;
use crate::ndbuffer::NDBuffer;
use crate::options::{PipelineMode, ReadOptions};
use crate::pipeline::{Produced, StagedRead};
use crate::prototype::BufferPrototype;
use crate::shard_index::ShardIndex;
use crate::units::{Unit, UnitPlan, UnitSource, check_subset, plan_units};
use std::borrow::Cow;
use std::ops::Range;
use zarrs::array::{Array, ArrayBytes, ArraySubset, CodecOptions};
use zarrs::plugin::ExtensionName;
use zarrs::storage::ReadableStorageTraits;
use zarrs::storage::byte_range::ByteRange;

/// zarrbuf's data type for a zarrs array, or `Unsupported` for variable-length types.
pub(crate) fn data_type_of<S: ?Sized>(array: &Array<S>) -> Result<DataType> {
    let dt = array.data_type();
    let name = dt
        .name_v3()
        .map(|n| n.into_owned())
        .unwrap_or_else(|| "unnamed".into());
    let Some(size) = dt.fixed_size() else {
        return Err(Error::Unsupported(format!(
            "array {} has the variable-length data type {name}; zarrbuf buffers hold fixed-size elements",
            array.path()
        )));
    };
    match name.parse::<DataType>() {
        Ok(t) if t.size() == size => Ok(t),
        _ if size > 0 => Ok(DataType::RawBits(size)),
        _ => Err(Error::Unsupported(format!(
            "array {} has the data type {name} with zero-sized elements",
            array.path()
        ))),
    }
}

/// The fill value's bytes (one element, native order).
pub(crate) fn fill_bytes<S: ?Sized>(array: &Array<S>) -> Vec<u8> {
    array.fill_value().as_ne_bytes().to_vec()
}

pub(crate) fn zarr_error<S: ?Sized>(array: &Array<S>, e: impl std::fmt::Display) -> Error {
    Error::Zarr {
        array: array.path().to_string(),
        message: e.to_string(),
    }
}

/// Reading zarrs arrays into zarrbuf buffers: an extension trait on `zarrs::array::Array`.
///
/// Subsets are half-open ranges, one per dimension. Outputs can live in any memory; CPU
/// outputs are decoded in place by zarrs, device outputs go through the staged pipeline
/// (CPU decompression, pinned staging, device byte swap/transpose/scatter).
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
///
/// let store = Arc::new(MemoryStore::new());
/// let array = ArrayBuilder::new(vec![4, 6], vec![2, 3], data_type::float32(), 0.0f32)
///     .build(store, "/x").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// let data = NDBuffer::from_vec((0..24).map(|v| v as f32).collect::<Vec<_>>(), &[4, 6])?;
/// array.write_all(&data)?;
/// let part = array.read(&[1..3, 2..5], &BufferPrototype::cpu())?;
/// assert_eq!(part.to_vec::<f32>()?, vec![8.0, 9.0, 10.0, 14.0, 15.0, 16.0]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub trait ArrayReadExt {
    /// Reads `subset` into a new C-order NDBuffer made by `proto`.
    fn read(&self, subset: &[Range<u64>], proto: &BufferPrototype) -> Result<NDBuffer> {
        self.read_opt(subset, proto, &ReadOptions::default())
    }

    /// [`read`](Self::read) with options.
    fn read_opt(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<NDBuffer>;

    /// Reads the whole array into a new NDBuffer made by `proto`.
    fn read_all(&self, proto: &BufferPrototype) -> Result<NDBuffer>;

    /// Reads `subset` into `out` (any memory; may be a strided view of a larger NDBuffer;
    /// its shape must be the subset's shape and its data type the array's).
    fn read_into(&self, subset: &[Range<u64>], out: &mut NDBuffer) -> Result<()> {
        self.read_into_opt(subset, out, &ReadOptions::default())
    }

    /// [`read_into`](Self::read_into) with options.
    fn read_into_opt(
        &self,
        subset: &[Range<u64>],
        out: &mut NDBuffer,
        opts: &ReadOptions,
    ) -> Result<()>;

    /// The array's data type as zarrbuf names it.
    fn zarrbuf_data_type(&self) -> Result<DataType>;
}

impl<S: ?Sized + ReadableStorageTraits + 'static> ArrayReadExt for Array<S> {
    fn read_opt(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<NDBuffer> {
        check_subset(self.shape(), subset, self.path().as_str())?;
        let dtype = data_type_of(self)?;
        let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
        let mut out = NDBuffer::empty(&shape, dtype, Order::C, proto)?;
        self.read_into_opt(subset, &mut out, opts)?;
        Ok(out)
    }

    fn read_all(&self, proto: &BufferPrototype) -> Result<NDBuffer> {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        self.read(&subset, proto)
    }

    fn read_into_opt(
        &self,
        subset: &[Range<u64>],
        out: &mut NDBuffer,
        opts: &ReadOptions,
    ) -> Result<()> {
        check_subset(self.shape(), subset, self.path().as_str())?;
        let dtype = data_type_of(self)?;
        if out.dtype() != dtype {
            return Err(Error::DataType(format!(
                "array {} holds {dtype} but the output NDBuffer holds {}",
                self.path(),
                out.dtype()
            )));
        }
        let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
        if out.shape() != shape.as_slice() {
            return Err(Error::ShapeMismatch(format!(
                "the subset has shape {shape:?} but the output NDBuffer has shape {:?}",
                out.shape()
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        let direct = opts.mode == PipelineMode::Auto
            && out.buffer().is_host_accessible()
            && out.byte_order() == ByteOrder::native();
        if direct {
            if let Some(window) = out.c_window() {
                return read_direct(self, subset, out, window, opts);
            }
        }
        read_staged(self, subset, out, opts)
    }

    fn zarrbuf_data_type(&self) -> Result<DataType> {
        data_type_of(self)
    }
}

/// CPU path: zarrs decodes straight into the output (no temporaries).
fn read_direct<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    window: crate::ndbuffer::CWindow,
    opts: &ReadOptions,
) -> Result<()> {
    let elem = out.dtype().size();
    let region = out.buffer().try_slice(window.byte_start..window.byte_end)?;
    let request = ArraySubset::new_with_ranges(subset);
    let codec_opts = opts.codec_options();
    let result = region.with_host_mut(|bytes| {
        with_decode_target(
            bytes,
            elem,
            &window.parent_shape,
            window.window.clone(),
            |target| {
                array
                    .retrieve_array_subset_into_opt(&request, target, &codec_opts)
                    .map_err(|e| zarr_error(array, e))
            },
        )
    });
    if let Some(cb) = &opts.progress {
        let units = plan_units(array, subset, elem)
            .map(|p| p.units.len())
            .unwrap_or(0);
        cb(crate::Progress {
            chunks_done: units,
            chunks_total: units,
            bytes_done: out.nbytes() as u64,
        });
    }
    result.map_err(|e| locate_failing_chunk(array, subset, elem).unwrap_or(e))
}

/// After a failed whole-subset read, decodes chunk by chunk to name the one at fault.
fn locate_failing_chunk<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    elem: usize,
) -> Option<Error> {
    let plan = plan_units(array, subset, elem).ok()?;
    let grid_units = if plan.source == UnitSource::Subchunk {
        // Shards are the stored objects; name the shard.
        crate::units::plan_chunks(array, subset).ok()?
    } else {
        plan.units
    };
    grid_units.iter().find_map(|u| {
        array
            .retrieve_chunk_if_exists::<ArrayBytes<'static>>(&u.indices)
            .err()
            .map(|e| chunk_error(array, &u.indices, e))
    })
}

pub(crate) fn chunk_error<S: ?Sized>(
    array: &Array<S>,
    indices: &[u64],
    e: impl std::fmt::Display,
) -> Error {
    Error::Zarr {
        array: array.path().to_string(),
        message: format!("chunk {indices:?} (key {}): {e}", array.chunk_key(indices)),
    }
}

/// Device (or forced) path: the staged pipeline.
fn read_staged<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    opts: &ReadOptions,
) -> Result<()> {
    run_staged(array, subset, out, opts, &|plan, shards, unit| {
        fetch_unit(array, plan, shards, unit)
    })
}

/// Fetches one unit's encoded bytes (`None`: not stored); called on pipeline worker threads.
pub(crate) type Fetch<'a> =
    dyn Fn(&UnitPlan, Option<&ShardIndex>, &Unit) -> Result<Option<Vec<u8>>> + Sync + 'a;

/// Plans the units of `subset` and runs the staged pipeline into `out`, fetching each unit
/// with `fetch` and decoding it on the worker thread that fetched it.
pub(crate) fn run_staged<S: ?Sized + Send + Sync>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    opts: &ReadOptions,
    fetch: &Fetch<'_>,
) -> Result<()> {
    let elem = out.dtype().size();
    let plan = plan_units(array, subset, elem)?;
    let staged = StagedRead {
        ops: ops_for(out.memory())?,
        units: &plan.units,
        layout: plan.layout(),
        request_start: subset.iter().map(|r| r.start).collect(),
        fill_value: fill_bytes(array),
        staging_bytes: opts.staging_bytes,
        threads: opts.threads(),
        progress: opts.progress.clone(),
    };
    // Chunks are decoded in parallel, so each codec runs single-threaded.
    let codec_opts = CodecOptions::default()
        .with_validate_checksums(opts.validate_checksums)
        .with_concurrent_target(1);
    let shards = match plan.source {
        UnitSource::Subchunk => Some(ShardIndex::new(array)?),
        _ => None,
    };
    let produce = |unit: &Unit, slot: &mut [u8]| -> Result<Produced> {
        match fetch(&plan, shards.as_ref(), unit)? {
            None => Ok(Produced::Missing),
            Some(encoded) => decode_unit(array, &plan, &codec_opts, unit, encoded, slot),
        }
    };
    staged.run(out, &produce)
}

/// Fetches the encoded bytes of one inner chunk through its shard's index.
fn fetch_inner_chunk<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    shards: &ShardIndex,
    inner: &[u64],
) -> Result<Option<Vec<u8>>> {
    let (shard, within) = shards.split(inner);
    let key = array.chunk_key(&shard);
    let storage = array.storage();
    let fail = |e: String| Error::Zarr {
        array: array.path().to_string(),
        message: format!("shard {shard:?} (key {key}), inner chunk {within:?}: {e}"),
    };
    let index = shards
        .index_of(&shard, |range| {
            storage.get_partial(&key, range).map_err(|e| e.to_string())
        })
        .map_err(fail)?;
    let Some(index) = index else {
        return Ok(None);
    };
    let Some(range) = shards.inner_range(&index, &within).map_err(fail)? else {
        return Ok(None);
    };
    let bytes = storage
        .get_partial(&key, ByteRange::new(range.clone()))
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| fail("the shard disappeared while it was being read".into()))?;
    if bytes.len() as u64 != range.end - range.start {
        return Err(fail(format!(
            "the shard is truncated: {} bytes at {}..{} expected, {} read",
            range.end - range.start,
            range.start,
            range.end,
            bytes.len()
        )));
    }
    Ok(Some(bytes.to_vec()))
}

/// Fetches one unit's encoded bytes (`None`: not stored, reads as the fill value).
fn fetch_unit<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &UnitPlan,
    shards: Option<&ShardIndex>,
    unit: &Unit,
) -> Result<Option<Vec<u8>>> {
    match plan.source {
        UnitSource::Chunk | UnitSource::ZarrsDecoded => array
            .retrieve_encoded_chunk(&unit.indices)
            .map_err(|e| chunk_error(array, &unit.indices, e)),
        UnitSource::Subchunk => {
            let shards = shards.expect("sharded plans carry their index");
            fetch_inner_chunk(array, shards, &unit.indices)
        }
    }
}

/// Runs the CPU half of a unit's codecs on its encoded bytes, into `slot`: only the
/// bytes-to-bytes codecs when the device can do the rest, else the whole chain.
pub(crate) fn decode_unit<S: ?Sized>(
    array: &Array<S>,
    plan: &UnitPlan,
    codec_opts: &CodecOptions,
    unit: &Unit,
    encoded: Vec<u8>,
    slot: &mut [u8],
) -> Result<Produced> {
    let fail = |e: &dyn std::fmt::Display| chunk_error(array, &unit.indices, e);
    let decoded: Vec<u8> = match &plan.chain {
        Some(chain) => chain
            .decode_bytes(
                Cow::Owned(encoded),
                &unit.shape,
                array.data_type(),
                array.fill_value(),
                codec_opts,
            )
            .map_err(|e| fail(&e))?,
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
                .map_err(|e| fail(&e))?
                .into_fixed()
                .map_err(|e| fail(&e))?
                .into_owned()
        }
    };
    let capacity = slot.len();
    let dst = slot.get_mut(..decoded.len()).ok_or_else(|| {
        fail(&format!(
            "decoded to {} bytes, more than the {capacity} a chunk of shape {:?} holds",
            decoded.len(),
            unit.shape
        ))
    })?;
    dst.copy_from_slice(&decoded);
    Ok(Produced::Decoded(decoded.len()))
}
