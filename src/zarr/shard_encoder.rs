//! Encoding whole shards for the staged write pipeline: the inner chunks are cut out of the
//! gathered shard, compressed in parallel with the inner chain's own encoders, and the shard
//! (inner chunks and index) is assembled once.
//!
//! zarrs encodes a shard by copying each inner chunk out, encoding it and concatenating the
//! results on the one thread that stores the shard; with few large shards (256³ float32
//! shards are 64 MiB) a write then leaves cores idle. Only exclusively sharded arrays whose
//! inner chain zarrbuf encodes itself (`bytes`, then bytes-to-bytes codecs; no transposes)
//! are taken; every other shard, and a shard a write covers only in part, goes through zarrs.

use super::{ChainPlan, ShardIndex, inner_chain};
use crate::dtype::ByteOrder;
use crate::error::Result;
use rayon::prelude::*;
use zarrbuf_codecs::{Strided, host};
use zarrs::array::{Array, ArrayShardedExt, CodecOptions};

/// Encodes whole shards of one array.
pub(crate) struct ShardEncoder {
    index: ShardIndex,
    inner: ChainPlan,
    inner_shape: Vec<u64>,
    /// One element of the fill value in the inner `bytes` codec's byte order.
    stored_fill: Vec<u8>,
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
        let index = ShardIndex::new(array, true)?;
        let mut stored_fill = fill;
        if inner.layout.endian != ByteOrder::native() {
            host::byte_swap(&mut stored_fill, swap_unit)?;
        }
        Ok(Some(ShardEncoder {
            index,
            inner,
            inner_shape: inner_shape.iter().map(|n| n.get()).collect(),
            stored_fill,
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
        let total: u64 = counts.iter().product();
        let chunks: Vec<Option<Vec<u8>>> = (0..total)
            .into_par_iter()
            .map(|linear| self.encode_inner(region, extent, linear, store_empty, opts))
            .collect::<std::result::Result<_, String>>()?;
        if chunks.iter().all(Option::is_none) {
            return Ok(None);
        }
        let index_size = self.index.encoded_size();
        let body: u64 = chunks.iter().flatten().map(|c| c.len() as u64).sum();
        let mut pairs = Vec::with_capacity(chunks.len() * 2);
        let mut offset = if self.index.at_start() { index_size } else { 0 };
        for chunk in &chunks {
            match chunk {
                Some(c) => {
                    pairs.extend([offset, c.len() as u64]);
                    offset += c.len() as u64;
                }
                None => pairs.extend([u64::MAX, u64::MAX]),
            }
        }
        let index = self.index.encode(&pairs)?;
        let len = usize::try_from(body + index_size)
            .map_err(|_| "the encoded shard does not fit in memory".to_string())?;
        let mut shard = Vec::with_capacity(len);
        if self.index.at_start() {
            shard.extend_from_slice(&index);
        }
        for chunk in chunks.iter().flatten() {
            shard.extend_from_slice(chunk);
        }
        if !self.index.at_start() {
            shard.extend_from_slice(&index);
        }
        Ok(Some(shard))
    }

    /// Cuts inner chunk `linear` (C order within the shard) out of `region` (fill where it
    /// passes the region's `extent`) in the inner chain's byte order, and encodes it; `None`
    /// when it holds only the fill value.
    fn encode_inner(
        &self,
        region: &[u8],
        extent: &[u64],
        linear: u64,
        store_empty: bool,
        opts: &CodecOptions,
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        let counts = self.index.chunks_per_shard();
        let dims = counts.len();
        let mut origin = vec![0u64; dims];
        let mut rest = linear;
        for d in (0..dims).rev() {
            origin[d] = (rest % counts[d]) * self.inner_shape[d];
            rest /= counts[d];
        }
        // Entirely past the array's edge: never stored.
        if origin.iter().zip(extent).any(|(&o, &e)| o >= e) {
            return Ok(None);
        }
        let inside: Vec<usize> = origin
            .iter()
            .zip(&self.inner_shape)
            .zip(extent)
            .map(|((&o, &s), &e)| s.min(e - o) as usize)
            .collect();
        let inner: Vec<usize> = self.inner_shape.iter().map(|&s| s as usize).collect();
        let c_strides = |shape: &[usize]| {
            let mut strides = vec![self.elem as isize; shape.len()];
            for d in (0..shape.len() - 1).rev() {
                strides[d] = strides[d + 1] * shape[d + 1] as isize;
            }
            strides
        };
        let src_strides = c_strides(&extent.iter().map(|&e| e as usize).collect::<Vec<_>>());
        let dst_strides = c_strides(&inner);
        let dst_view = Strided {
            offset: 0,
            strides: &dst_strides,
        };
        let mut chunk = vec![0u8; inner.iter().product::<usize>() * self.elem];
        if inside != inner {
            host::fill(&mut chunk, dst_view, &inner, &self.stored_fill)
                .map_err(|e| e.to_string())?;
        }
        let src_offset: isize = origin
            .iter()
            .zip(&src_strides)
            .map(|(&o, &s)| o as isize * s)
            .sum();
        // Cut out and byte-swapped to the inner `bytes` codec's order in one pass.
        let swap = if self.inner.layout.endian == ByteOrder::native() {
            0
        } else {
            self.swap_unit
        };
        host::strided_copy_slices(
            region,
            Strided {
                offset: src_offset as usize,
                strides: &src_strides,
            },
            &mut chunk,
            dst_view,
            &inside,
            self.elem,
            swap,
        )
        .map_err(|e| e.to_string())?;
        if !store_empty && chunk.chunks_exact(self.elem).all(|e| e == self.stored_fill) {
            return Ok(None);
        }
        self.inner
            .encode_bytes(&chunk, opts)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}
