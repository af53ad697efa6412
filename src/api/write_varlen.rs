//! Writing variable-length strings and bytes ([`VarLenBuffer`]) into zarr arrays of
//! `string`, `variable_length_bytes` and v2 `|O` (`VLenUTF8` / `VLenBytes`) elements.

use super::target::subset_shape;
use crate::buffer::VarLenBuffer;
use crate::data_types::VarLenKind;
use crate::errors::{Error, Result};
use crate::options::{Durability, WriteOptions};
use crate::stores::SyncedWrites;
use crate::zarr::{
    ElementSink, VlenEncoder, VlenGather, check_subset, chunk_error, encodes_vlen_itself,
    forget_written_shard_indexes, require_vlen, zarr_error,
};
use std::borrow::Cow;
use std::ops::Range;
use zarrs::array::{Array, ArrayBytes, ArraySubset, CodecOptions};
use zarrs::storage::ReadableWritableStorageTraits;

/// Writing variable-length strings or bytes into zarrs arrays: an extension trait on
/// `zarrs::array::Array`, the twin of [`ArrayWriteExt`](crate::ArrayWriteExt) for
/// [`VarLenBuffer`]s.
///
/// Chunks are built and compressed in parallel (`WriteOptions::concurrency` threads), each
/// straight from the buffer's offsets and values into the `vlen-utf8` / `vlen-bytes` layout
/// and through the array's compressors; sharded arrays are encoded by zarrs' sharding codec.
/// Chunks the subset covers only in part are read, merged and written back. Each chunk is
/// stored on its own through the array's store (the directory store writes every key to a
/// temporary file and renames it into place, so a write killed at any moment leaves each
/// chunk old or new, never torn); chunks of only the fill value are erased unless
/// `WriteOptions::store_empty_chunks`. Buffers in device memory are copied to the host first.
///
/// UTF-8 strings go into `string` and `variable_length_bytes` arrays alike; byte strings
/// go into a `string` array only when every element is valid UTF-8.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayWriteVarLenExt, VarLenBuffer};
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
///
/// let array = ArrayBuilder::new(vec![5], vec![2], data_type::string(), "")
///     .build(Arc::new(MemoryStore::new()), "/names")
///     .map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// array.write_varlen(&[1..4], &VarLenBuffer::from_strings(vec![3], ["a", "βγ", ""])?)?;
/// let back: Vec<String> = array.retrieve_array_subset(&[0..5]).unwrap();
/// assert_eq!(back, ["", "a", "βγ", "", ""]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub trait ArrayWriteVarLenExt {
    /// Writes `data` (the shape of `subset`, any memory) into `subset`.
    fn write_varlen(&self, subset: &[Range<u64>], data: &VarLenBuffer) -> Result<()> {
        self.write_varlen_opt(subset, data, &WriteOptions::default())
    }

    /// [`write_varlen`](Self::write_varlen) with options (`concurrency`,
    /// `store_empty_chunks`, `durability`; the route and compression options do not apply).
    fn write_varlen_opt(
        &self,
        subset: &[Range<u64>],
        data: &VarLenBuffer,
        opts: &WriteOptions,
    ) -> Result<()>;

    /// Writes `data` (the array's shape) into the whole array.
    fn write_varlen_all(&self, data: &VarLenBuffer) -> Result<()> {
        self.write_varlen_all_opt(data, &WriteOptions::default())
    }

    /// [`write_varlen_all`](Self::write_varlen_all) with options.
    fn write_varlen_all_opt(&self, data: &VarLenBuffer, opts: &WriteOptions) -> Result<()>;
}

impl<S: ?Sized + ReadableWritableStorageTraits + 'static> ArrayWriteVarLenExt for Array<S> {
    fn write_varlen_opt(
        &self,
        subset: &[Range<u64>],
        data: &VarLenBuffer,
        opts: &WriteOptions,
    ) -> Result<()> {
        let _synced = (opts.durability == Durability::Sync).then(SyncedWrites::begin);
        let vtype = require_vlen(self)?;
        check_subset(self.shape(), subset, self.path().as_str())?;
        let shape: Vec<u64> = subset_shape(subset).iter().map(|&n| n as u64).collect();
        if data.shape() != shape.as_slice() {
            return Err(Error::ShapeMismatch(format!(
                "the subset has shape {shape:?} but the data has shape {:?}",
                data.shape()
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        let host = data.to_host()?;
        let offsets_bytes = host.offsets().as_host_bytes()?;
        let values = host.values().as_host_bytes()?;
        let offsets = le_i64s(&offsets_bytes);
        if vtype == VarLenKind::Utf8 && host.kind() == VarLenKind::Bytes {
            check_utf8(self, &offsets, &values)?;
        }
        let source = Source {
            subset,
            offsets: &offsets,
            values: &values,
        };
        let chunks = self
            .chunks_in_array_subset(&ArraySubset::new_with_ranges(subset))
            .map_err(|e| zarr_error(self, e))?
            .ok_or_else(|| zarr_error(self, "the chunk grid cannot locate this subset"))?;
        let all: Vec<Vec<u64>> = chunks
            .indices()
            .into_iter()
            .map(|i| i.iter().copied().collect())
            .collect();
        let written = run_parallel(opts, &all, |indices| {
            write_chunk(self, indices, &source, opts)
        });
        // Shards stored (some, if it failed) no longer have the indexes reads kept.
        forget_written_shard_indexes(self, subset);
        written
    }

    fn write_varlen_all_opt(&self, data: &VarLenBuffer, opts: &WriteOptions) -> Result<()> {
        let subset: Vec<Range<u64>> = self.shape().iter().map(|&n| 0..n).collect();
        self.write_varlen_opt(&subset, data, opts)
    }
}

/// Runs `f` on every chunk on `opts.concurrency` threads; the first error is returned.
pub(super) fn run_parallel<T: Sync>(
    opts: &WriteOptions,
    items: &[T],
    f: impl Fn(&T) -> Result<()> + Sync + Send,
) -> Result<()> {
    use rayon::prelude::*;
    let threads = opts.concurrency.unwrap_or(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| {
            Error::InvalidArgument(format!("cannot start {threads} writing threads: {e}"))
        })?;
    pool.install(|| items.par_iter().try_for_each(&f))
}

/// Little-endian i64s from bytes.
fn le_i64s(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect()
}

/// Refuses byte strings that are not UTF-8 for a `string` array, naming the first one.
fn check_utf8<S: ?Sized>(array: &Array<S>, offsets: &[i64], values: &[u8]) -> Result<()> {
    for (i, w) in offsets.windows(2).enumerate() {
        let bytes = &values[w[0] as usize..w[1] as usize];
        if let Err(e) = std::str::from_utf8(bytes) {
            return Err(Error::DataType(format!(
                "array {} holds UTF-8 strings, but element {i} of the byte strings written \
                 is not valid UTF-8 ({e}); write it into a variable_length_bytes array",
                array.path()
            )));
        }
    }
    Ok(())
}

/// The data of a write: the subset it covers and its elements in C order of the subset.
pub(super) struct Source<'a> {
    pub(super) subset: &'a [Range<u64>],
    pub(super) offsets: &'a [i64],
    pub(super) values: &'a [u8],
}

impl Source<'_> {
    /// The flat index in the data of the element at array coordinates `coords` (inside the
    /// subset).
    fn flat(&self, coords: &[u64]) -> usize {
        let mut flat = 0u64;
        for (c, r) in coords.iter().zip(self.subset) {
            flat = flat * (r.end - r.start) + (c - r.start);
        }
        flat as usize
    }
}

/// Builds, encodes and stores (or erases) one chunk.
fn write_chunk<S>(
    array: &Array<S>,
    indices: &[u64],
    source: &Source,
    opts: &WriteOptions,
) -> Result<()>
where
    S: ?Sized + ReadableWritableStorageTraits + 'static,
{
    let failed = |e: Error| match e {
        Error::Zarr { .. } => e,
        other => chunk_error(array, indices, other),
    };
    let chunk = array
        .chunk_subset(indices)
        .map_err(|e| chunk_error(array, indices, e))?
        .to_ranges();
    let whole = chunk
        .iter()
        .zip(source.subset)
        .all(|(c, s)| s.start <= c.start && c.end <= s.end);
    let codec_opts = CodecOptions::default()
        .with_store_empty_chunks(opts.store_empty_chunks)
        .with_concurrent_target(1);
    let old = if whole {
        None
    } else {
        let bytes = array
            .retrieve_chunk_opt::<ArrayBytes<'static>>(indices, &codec_opts)
            .map_err(|e| chunk_error(array, indices, e))?;
        Some(
            bytes
                .into_variable()
                .map_err(|e| chunk_error(array, indices, e))?,
        )
    };
    let old_parts = old.as_ref().map(|v| (&**v.offsets(), &v.bytes()[..]));
    let count: u64 = chunk.iter().map(|r| r.end - r.start).product();
    let count = usize::try_from(count).map_err(|_| {
        chunk_error(
            array,
            indices,
            "the chunk has more elements than memory can address",
        )
    })?;
    let fill = array.fill_value().as_ne_bytes();
    // The chunk's share of the data's values, as a capacity hint.
    let elements = source.offsets.len().saturating_sub(1).max(1);
    let hint = (source.values.len() as u128 * count as u128 / elements as u128) as usize;
    let stored = if encodes_vlen_itself(array) {
        let mut sink = VlenEncoder::new(count, hint, fill).map_err(failed)?;
        gather(&mut sink, &chunk, source, old_parts).map_err(failed)?;
        let (encoded, all_fill) = sink.finish().map_err(failed)?;
        if all_fill && !opts.store_empty_chunks {
            None
        } else {
            Some(Stored::Encoded(encoded))
        }
    } else {
        let mut sink = VlenGather::new(count, hint, fill);
        gather(&mut sink, &chunk, source, old_parts).map_err(failed)?;
        let (bytes, all_fill) = sink.finish().map_err(failed)?;
        if all_fill && !opts.store_empty_chunks {
            None
        } else {
            Some(Stored::Elements(bytes))
        }
    };
    match stored {
        None => array
            .erase_chunk(indices)
            .map_err(|e| chunk_error(array, indices, e)),
        Some(Stored::Elements(bytes)) => array
            .store_chunk_opt(indices, bytes, &codec_opts)
            .map_err(|e| chunk_error(array, indices, e)),
        Some(Stored::Encoded(encoded)) => store_encoded(array, indices, encoded, &codec_opts),
    }
}

/// What a chunk becomes: bytes in the `vlen-utf8` / `vlen-bytes` layout (not yet
/// compressed), or elements zarrs encodes.
enum Stored {
    Encoded(Vec<u8>),
    Elements(ArrayBytes<'static>),
}

/// Compresses a chunk in the `vlen-utf8` / `vlen-bytes` layout through the array's
/// bytes-to-bytes codecs and stores it.
fn store_encoded<S>(
    array: &Array<S>,
    indices: &[u64],
    layout: Vec<u8>,
    codec_opts: &CodecOptions,
) -> Result<()>
where
    S: ?Sized + ReadableWritableStorageTraits + 'static,
{
    let mut bytes: Cow<'_, [u8]> = Cow::Owned(layout);
    for c in array.codecs().bytes_to_bytes_codecs() {
        bytes = Cow::Owned(
            c.encode(bytes, codec_opts)
                .map_err(|e| chunk_error(array, indices, e))?
                .into_owned(),
        );
    }
    let encoded = bytes::Bytes::from(bytes.into_owned());
    // SAFETY: `encodes_vlen_itself` holds for this array (checked by the caller): its chain
    // is no array-to-array codec, then vlen-utf8, vlen-bytes or vlen_v2 (all three the same
    // layout, which `VlenEncoder` wrote for exactly the chunk's element count), then the
    // bytes-to-bytes codecs, each of which ran above in order. So `encoded` is the chunk's
    // encoding under the array's whole chain.
    unsafe { array.store_encoded_chunk(indices, encoded) }
        .map_err(|e| chunk_error(array, indices, e))
}

/// Pushes the chunk's elements (`chunk`: its ranges in array coordinates) in C order into
/// `sink`: those inside the written subset from `source`, the others from the chunk as
/// stored (`old`: its offsets and values; `None` when the subset covers the whole chunk).
fn gather(
    sink: &mut impl ElementSink,
    chunk: &[Range<u64>],
    source: &Source,
    old: Option<(&[usize], &[u8])>,
) -> Result<()> {
    let dims = chunk.len();
    let Some(last) = dims.checked_sub(1) else {
        // 0-d: the one element is the data's.
        return sink.push_run(&source.offsets[0..2], source.values);
    };
    let row_len = chunk[last].end - chunk[last].start;
    let rows: u64 = chunk[..last].iter().map(|r| r.end - r.start).product();
    let mut coords: Vec<u64> = chunk.iter().map(|r| r.start).collect();
    for row in 0..rows {
        let mut rest = row;
        for d in (0..last).rev() {
            let n = chunk[d].end - chunk[d].start;
            coords[d] = chunk[d].start + rest % n;
            rest /= n;
        }
        let row_base = row * row_len;
        let inside = (0..last).all(|d| source.subset[d].contains(&coords[d]));
        let (lo, hi) = if inside {
            let s = &source.subset[last];
            (
                s.start.clamp(chunk[last].start, chunk[last].end),
                s.end.clamp(chunk[last].start, chunk[last].end),
            )
        } else {
            (chunk[last].end, chunk[last].end)
        };
        let base = chunk[last].start;
        push_old(sink, old, row_base, row_base + (lo - base))?;
        if lo < hi {
            coords[last] = lo;
            let first = source.flat(&coords);
            let n = (hi - lo) as usize;
            sink.push_run(&source.offsets[first..=first + n], source.values)?;
        }
        push_old(sink, old, row_base + (hi - base), row_base + row_len)?;
    }
    Ok(())
}

/// Pushes elements `from..to` of the stored chunk (`old`: its offsets and values).
fn push_old(
    sink: &mut impl ElementSink,
    old: Option<(&[usize], &[u8])>,
    from: u64,
    to: u64,
) -> Result<()> {
    if from >= to {
        return Ok(());
    }
    let Some((offs, vals)) = old else {
        return Err(Error::InvalidArgument(format!(
            "elements {from}..{to} of a chunk lie outside the written subset, but the chunk \
             was not read"
        )));
    };
    let (from, to) = (from as usize, to as usize);
    if offs.len() <= to {
        return Err(Error::ShapeMismatch(format!(
            "the stored chunk decoded to {} elements; element {to} was wanted",
            offs.len().saturating_sub(1)
        )));
    }
    for i in from..to {
        sink.push(&vals[offs[i]..offs[i + 1]])?;
    }
    Ok(())
}
