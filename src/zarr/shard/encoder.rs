//! Encoding whole shards for the staged write pipeline: the inner chunks are cut out of the
//! shard's source (the gathered shard, or for host data the caller's own array, read in
//! place), compressed in parallel with the inner chain's own encoders, and the shard
//! (inner chunks and index) is assembled once; uncompressed inner chunks are cut straight
//! into their place in it.
//!
//! zarrs encodes a shard by copying each inner chunk out, encoding it and concatenating the
//! results on the one thread that stores the shard; with few large shards (256³ float32
//! shards are 64 MiB) a write then leaves cores idle. Only exclusively sharded arrays whose
//! inner chain zarrbuf encodes itself (`bytes`, then bytes-to-bytes codecs; no transposes)
//! are taken; every other shard, and a shard a write covers only in part, goes through zarrs.

use crate::data_types::ByteOrder;
use crate::errors::Result;
use crate::zarr::{ChainPlan, ShardIndex, inner_chain};
use rayon::prelude::*;
use zarrbuf_codecs::{Strided, host};
use zarrs::array::{Array, ArrayShardedExt, CodecOptions};

/// Encodes whole shards of one array.
pub(crate) struct ShardEncoder {
    index: ShardIndex,
    inner: ChainPlan,
    inner_shape: Vec<u64>,
    /// One element of the fill value in native byte order, and byte-swapped.
    native_fill: Vec<u8>,
    swapped_fill: Vec<u8>,
    elem: usize,
    /// Bytes per byte-swap unit (the element, or each half of a complex one).
    swap_unit: usize,
}

impl ShardEncoder {
    /// The encoder for `array`, or `None` when zarrs must encode its shards.
    pub(crate) fn new<S: ?Sized>(
        array: &Array<S>,
        fill: Vec<u8>,
        swap_unit: usize,
    ) -> Result<Option<Self>> {
        if !array.is_exclusively_sharded() || fill.is_empty() || array.dimensionality() == 0 {
            return Ok(None);
        }
        let elem = fill.len();
        let Ok(chain) = inner_chain(array) else {
            return Ok(None);
        };
        let Some(inner) = ChainPlan::new(chain, elem, array.dimensionality())? else {
            return Ok(None);
        };
        if inner.layout.order.is_some() {
            return Ok(None);
        }
        let Some(inner_shape) = array.subchunk_shape() else {
            return Ok(None);
        };
        let index = ShardIndex::new(array)?;
        let mut swapped_fill = fill.clone();
        let native_fill = fill;
        host::byte_swap(&mut swapped_fill, swap_unit)?;
        Ok(Some(ShardEncoder {
            index,
            inner,
            inner_shape: inner_shape.iter().map(|n| n.get()).collect(),
            native_fill,
            swapped_fill,
            elem,
            swap_unit,
        }))
    }

    /// Whether a shard of `shape` is one this encoder's index describes.
    pub(crate) fn fits(&self, shape: &[u64]) -> bool {
        shape.len() == self.inner_shape.len()
            && shape
                .iter()
                .zip(&self.inner_shape)
                .zip(self.index.chunks_per_shard())
                .all(|((&s, &i), &n)| i.checked_mul(n) == Some(s))
    }

    /// Encodes a shard whose stored part is `region` (native, C order), the shard's first
    /// `extent[d]` elements along each dimension (less than the shard at the array's edge;
    /// the rest is fill). `None` when every inner chunk holds only the fill value and
    /// `store_empty` is false: the shard is then erased, as zarrs does.
    pub(crate) fn encode(
        &self,
        region: &[u8],
        extent: &[u64],
        store_empty: bool,
        opts: &CodecOptions,
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        let counts = self.index.chunks_per_shard();
        let expected = extent
            .iter()
            .try_fold(self.elem as u64, |n, &e| n.checked_mul(e));
        if extent.len() != counts.len() || expected != Some(region.len() as u64) {
            return Err(format!(
                "{} bytes were gathered for a shard region of {extent:?} elements of {} bytes \
                 (internal error: please report)",
                region.len(),
                self.elem
            ));
        }
        let shape: Vec<usize> = extent.iter().map(|&e| e as usize).collect();
        let strides = crate::data_types::Order::C.strides(&shape, self.elem);
        let source = ShardSource {
            bytes: region,
            offset: 0,
            strides: &strides,
            swapped: false,
        };
        self.encode_from(&source, extent, store_empty, opts)
    }

    /// Encodes a shard whose stored part (its first `extent[d]` elements along each
    /// dimension) is read from `source`, as [`ShardEncoder::encode`] does.
    pub(crate) fn encode_from(
        &self,
        source: &ShardSource<'_>,
        extent: &[u64],
        store_empty: bool,
        opts: &CodecOptions,
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        // The inner chunks are cut and compressed in parallel on the process's own pool
        // (see `thread_pool`: rayon's global one does not survive a fork).
        crate::thread_pool::install(|| self.encode_on_pool(source, extent, store_empty, opts))
    }

    fn encode_on_pool(
        &self,
        source: &ShardSource<'_>,
        extent: &[u64],
        store_empty: bool,
        opts: &CodecOptions,
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        let counts = self.index.chunks_per_shard();
        if extent.len() != counts.len() || source.strides.len() != counts.len() {
            return Err(format!(
                "a shard source of {} dimensions for a shard region of {extent:?} \
                 (internal error: please report)",
                source.strides.len()
            ));
        }
        let total: u64 = counts.iter().product();
        if self.inner.chain.bytes_to_bytes_codecs().is_empty() {
            return self.encode_uncompressed(source, extent, total, store_empty);
        }
        // Each task cuts its inner chunk into a buffer it reuses for the next one.
        let chunks: Vec<Option<Vec<u8>>> = (0..total)
            .into_par_iter()
            .map_init(Vec::new, |cut: &mut Vec<u8>, linear| {
                let Some(place) = self.place(extent, linear) else {
                    return Ok(None);
                };
                if !store_empty && self.holds_only_fill(source, &place)? {
                    return Ok(None);
                }
                cut.resize(self.chunk_bytes(), 0);
                self.cut(source, &place, cut)?;
                self.inner
                    .encode_bytes(cut, opts)
                    .map(Some)
                    .map_err(|e| e.to_string())
            })
            .collect::<std::result::Result<_, String>>()?;
        let sizes: Vec<Option<u64>> = chunks
            .iter()
            .map(|c| c.as_ref().map(|c| c.len() as u64))
            .collect();
        let Some((mut shard, body_start)) = self.assemble(&sizes)? else {
            return Ok(None);
        };
        let mut at = body_start;
        for chunk in chunks.iter().flatten() {
            shard[at..at + chunk.len()].copy_from_slice(chunk);
            at += chunk.len();
        }
        Ok(Some(shard))
    }

    /// A shard whose inner chain stores chunks as they are (`bytes` alone): every stored
    /// inner chunk has the same size, so the shard is allocated once and each inner chunk
    /// is cut straight into its place in it, in parallel.
    fn encode_uncompressed(
        &self,
        source: &ShardSource<'_>,
        extent: &[u64],
        total: u64,
        store_empty: bool,
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        let places: Vec<Option<InnerPlace>> = (0..total)
            .into_par_iter()
            .map(|linear| match self.place(extent, linear) {
                Some(p) if !store_empty && self.holds_only_fill(source, &p)? => Ok(None),
                place => Ok(place),
            })
            .collect::<std::result::Result<_, String>>()?;
        let size = self.chunk_bytes() as u64;
        let sizes: Vec<Option<u64>> = places.iter().map(|p| p.as_ref().map(|_| size)).collect();
        let Some((mut shard, body_start)) = self.assemble(&sizes)? else {
            return Ok(None);
        };
        let body_end = body_start + places.iter().flatten().count() * self.chunk_bytes();
        let mut rest = &mut shard[body_start..body_end];
        let mut jobs = Vec::with_capacity(places.len());
        for place in places.iter().flatten() {
            let (chunk, tail) = rest.split_at_mut(self.chunk_bytes());
            jobs.push((place, chunk));
            rest = tail;
        }
        jobs.into_par_iter()
            .try_for_each(|(place, chunk)| self.cut(source, place, chunk))?;
        Ok(Some(shard))
    }

    /// Allocates a shard for inner chunks of `sizes` (in C order; `None`: not stored) and
    /// writes its index; returns it with the offset where the first stored chunk goes, or
    /// `None` when no inner chunk is stored.
    fn assemble(
        &self,
        sizes: &[Option<u64>],
    ) -> std::result::Result<Option<(Vec<u8>, usize)>, String> {
        if sizes.iter().all(Option::is_none) {
            return Ok(None);
        }
        let index_size = self.index.encoded_size();
        let body: u64 = sizes.iter().flatten().sum();
        let mut pairs = Vec::with_capacity(sizes.len() * 2);
        let mut offset = if self.index.at_start() { index_size } else { 0 };
        for size in sizes {
            match size {
                Some(n) => {
                    pairs.extend([offset, *n]);
                    offset += n;
                }
                None => pairs.extend([u64::MAX, u64::MAX]),
            }
        }
        let index = self.index.encode(&pairs)?;
        let too_large = || "the encoded shard does not fit in memory".to_string();
        let len = usize::try_from(body + index_size).map_err(|_| too_large())?;
        let body = usize::try_from(body).map_err(|_| too_large())?;
        let mut shard = vec![0u8; len];
        let body_start = if self.index.at_start() {
            shard[..index.len()].copy_from_slice(&index);
            index.len()
        } else {
            shard[body..].copy_from_slice(&index);
            0
        };
        Ok(Some((shard, body_start)))
    }

    /// Bytes of one decoded inner chunk.
    fn chunk_bytes(&self) -> usize {
        self.inner_shape.iter().product::<u64>() as usize * self.elem
    }

    /// Where inner chunk `linear` (C order within the shard) lies in the region of
    /// `extent`; `None` when it lies entirely past the array's edge (never stored).
    fn place(&self, extent: &[u64], linear: u64) -> Option<InnerPlace> {
        let counts = self.index.chunks_per_shard();
        let dims = counts.len();
        let mut origin = vec![0u64; dims];
        let mut rest = linear;
        for d in (0..dims).rev() {
            origin[d] = (rest % counts[d]) * self.inner_shape[d];
            rest /= counts[d];
        }
        if origin.iter().zip(extent).any(|(&o, &e)| o >= e) {
            return None;
        }
        let inside = origin
            .iter()
            .zip(&self.inner_shape)
            .zip(extent)
            .map(|((&o, &s), &e)| s.min(e - o) as usize)
            .collect();
        Some(InnerPlace { origin, inside })
    }

    /// Whether the part of the source an inner chunk covers holds only the fill value (the
    /// rest of an edge chunk is fill anyway).
    fn holds_only_fill(
        &self,
        source: &ShardSource<'_>,
        place: &InnerPlace,
    ) -> std::result::Result<bool, String> {
        let fill = if source.swapped {
            &self.swapped_fill
        } else {
            &self.native_fill
        };
        host::all_equal(source.bytes, source.at(place), &place.inside, fill)
            .map_err(|e| e.to_string())
    }

    /// Cuts the inner chunk at `place` out of `source` into `chunk` (a decoded inner
    /// chunk's size), in the inner `bytes` codec's byte order, with fill where it passes
    /// the shard's stored extent.
    fn cut(
        &self,
        source: &ShardSource<'_>,
        place: &InnerPlace,
        chunk: &mut [u8],
    ) -> std::result::Result<(), String> {
        let inner: Vec<usize> = self.inner_shape.iter().map(|&s| s as usize).collect();
        let dst_strides = crate::data_types::Order::C.strides(&inner, self.elem);
        let dst_view = Strided {
            offset: 0,
            strides: &dst_strides,
        };
        let stored_native = self.inner.layout.endian == ByteOrder::native();
        if place.inside != inner {
            let stored_fill = if stored_native {
                &self.native_fill
            } else {
                &self.swapped_fill
            };
            host::fill(chunk, dst_view, &inner, stored_fill).map_err(|e| e.to_string())?;
        }
        // Cut out and byte-swapped to the inner `bytes` codec's order in one pass.
        let source_native = !source.swapped;
        let swap = if source_native == stored_native {
            0
        } else {
            self.swap_unit
        };
        host::strided_copy_slices(
            source.bytes,
            source.at(place),
            chunk,
            dst_view,
            &place.inside,
            self.elem,
            swap,
        )
        .map_err(|e| e.to_string())
    }
}

/// Where a shard's stored part is read from: `bytes`, with the shard's first element at
/// byte `offset` and `strides` (bytes, per dimension; any sign) between elements, which
/// are byte-swapped from native order when `swapped`.
pub(crate) struct ShardSource<'a> {
    pub bytes: &'a [u8],
    pub offset: usize,
    pub strides: &'a [isize],
    pub swapped: bool,
}

impl<'a> ShardSource<'a> {
    /// The view of the source that starts at an inner chunk's first element.
    fn at(&self, place: &InnerPlace) -> Strided<'a> {
        let offset = place
            .origin
            .iter()
            .zip(self.strides)
            .fold(self.offset as isize, |at, (&o, &s)| at + o as isize * s);
        Strided {
            offset: offset as usize,
            strides: self.strides,
        }
    }
}

/// Where an inner chunk lies in the shard's stored part.
struct InnerPlace {
    /// Element coordinates of its first element in the region.
    origin: Vec<u64>,
    /// How much of it lies inside the region, per dimension (less than the inner chunk at
    /// the array's edge).
    inside: Vec<usize>,
}
