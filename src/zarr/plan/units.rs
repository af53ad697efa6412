//! The units of work of a read or write: the chunks (or, for sharded arrays, the inner
//! chunks) that intersect a subset, each with the codec plan that decodes it.

use crate::errors::{Error, Result};
use crate::zarr::{ChainPlan, EncodedLayout, unit_codecs};
use std::num::NonZeroU64;
use std::ops::Range;
use zarrs::array::{Array, ArraySubset, ChunkGrid};

/// Where a unit's encoded bytes come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnitSource {
    /// A whole chunk object, decoded by the plan's bytes-to-bytes codecs.
    Chunk,
    /// An inner chunk of a shard, fetched by byte range through the shard index.
    Subchunk,
    /// A whole chunk decoded entirely by zarrs on the CPU (codecs the device path cannot split).
    ZarrsDecoded,
}

/// One chunk or inner chunk touched by a request.
#[derive(Clone, Debug)]
pub(crate) struct Unit {
    /// Indices in the chunk grid (or the array-wide inner-chunk grid).
    pub indices: Vec<u64>,
    /// Array coordinates of the unit's first element.
    pub origin: Vec<u64>,
    /// The unit's full decoded shape (edge chunks are stored padded to it).
    pub shape: Vec<NonZeroU64>,
    /// The part of the request inside this unit, in array coordinates.
    pub region: Vec<Range<u64>>,
}

impl Unit {
    /// Elements of the full unit.
    pub(crate) fn num_elements(&self) -> usize {
        self.shape.iter().map(|n| n.get() as usize).product()
    }

    pub(crate) fn shape_usize(&self) -> Vec<usize> {
        self.shape.iter().map(|n| n.get() as usize).collect()
    }

    /// The region's start relative to the unit origin.
    pub(crate) fn local_start(&self) -> Vec<usize> {
        self.region
            .iter()
            .zip(&self.origin)
            .map(|(r, o)| (r.start - o) as usize)
            .collect()
    }

    pub(crate) fn region_shape(&self) -> Vec<usize> {
        self.region
            .iter()
            .map(|r| (r.end - r.start) as usize)
            .collect()
    }

    /// Byte offset of the region's first element in an array that holds the request starting
    /// at `request_start`, with its element 0 at `base` and byte `strides`.
    pub(crate) fn offset_in_request(
        &self,
        request_start: &[u64],
        base: usize,
        strides: &[isize],
    ) -> usize {
        base + self
            .region
            .iter()
            .zip(request_start)
            .zip(strides)
            .map(|((r, s), &st)| (r.start - s) as usize * st as usize)
            .sum::<usize>()
    }

    /// Byte offset of the region's first element inside the unit laid out with `strides`.
    pub(crate) fn offset_in_unit(&self, strides: &[isize]) -> usize {
        self.local_start()
            .iter()
            .zip(strides)
            .map(|(&i, &s)| i * s as usize)
            .sum()
    }

    /// True when the request covers the whole unit.
    pub(crate) fn is_whole(&self) -> bool {
        self.region
            .iter()
            .zip(self.origin.iter().zip(&self.shape))
            .all(|(r, (&o, s))| r.start == o && r.end == o + s.get())
    }
}

/// All units of a request and how to decode them.
pub(crate) struct UnitPlan {
    pub source: UnitSource,
    /// `None` for [`UnitSource::ZarrsDecoded`] (zarrs produces native C-order bytes).
    pub chain: Option<ChainPlan>,
    pub units: Vec<Unit>,
}

impl UnitPlan {
    /// The layout of the bytes a unit's decode produces.
    pub(crate) fn layout(&self) -> EncodedLayout {
        self.chain
            .as_ref()
            .map(|c| c.layout.clone())
            .unwrap_or_else(EncodedLayout::native)
    }
}

/// Checks a requested subset against the array shape.
pub(crate) fn check_subset(shape: &[u64], subset: &[Range<u64>], array: &str) -> Result<()> {
    if subset.len() != shape.len() {
        return Err(Error::ShapeMismatch(format!(
            "array {array} has {} dimensions (shape {shape:?}) but the subset has {} ranges",
            shape.len(),
            subset.len()
        )));
    }
    for (k, (r, &n)) in subset.iter().zip(shape).enumerate() {
        if r.start > r.end || r.end > n {
            return Err(Error::OutOfBounds(format!(
                "subset {}:{} on dimension {k} is outside array {array} of shape {shape:?}",
                r.start, r.end
            )));
        }
    }
    Ok(())
}

/// Plans the units of `subset` for a read or write (their chain and grid from the array's
/// memoized facts, `array/facts.rs`).
pub(crate) fn plan_units<S: ?Sized>(
    array: &Array<S>,
    subset: &[Range<u64>],
    elem: usize,
) -> Result<UnitPlan> {
    let codecs = unit_codecs(array, elem)?;
    let source = match (&codecs.plan, codecs.subchunks) {
        (None, _) => UnitSource::ZarrsDecoded,
        (Some(_), true) => UnitSource::Subchunk,
        (Some(_), false) => UnitSource::Chunk,
    };
    let units =
        units_in(&codecs.grid, subset).map_err(|e| Error::zarr(array.path().as_str(), e, None))?;
    Ok(UnitPlan {
        source,
        chain: codecs.plan,
        units,
    })
}

/// The stored chunks (shards, for sharded arrays) intersecting `subset`.
pub(crate) fn plan_chunks<S: ?Sized>(array: &Array<S>, subset: &[Range<u64>]) -> Result<Vec<Unit>> {
    units_in(array.chunk_grid(), subset).map_err(|e| Error::zarr(array.path().as_str(), e, None))
}

/// The units of `grid` (chunks, or the array-wide inner chunks) that intersect `subset`,
/// each clipped to it.
pub(crate) fn units_in(
    grid: &ChunkGrid,
    subset: &[Range<u64>],
) -> std::result::Result<Vec<Unit>, String> {
    let request = ArraySubset::new_with_ranges(subset);
    if request.is_empty() {
        return Ok(Vec::new());
    }
    let chunks = grid
        .chunks_in_array_subset(&request)
        .map_err(|e| e.to_string())?
        .ok_or("the chunk grid cannot locate this subset")?;
    let mut units = Vec::with_capacity(chunks.num_elements_usize());
    for idx in chunks.indices().into_iter() {
        let indices: Vec<u64> = idx.iter().copied().collect();
        let full = grid
            .subset(&indices)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("chunk {indices:?} has no extent"))?;
        let shape = grid
            .chunk_shape(&indices)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("chunk {indices:?} has no shape"))?;
        let region: Vec<Range<u64>> = full
            .to_ranges()
            .iter()
            .zip(subset)
            .map(|(c, r)| c.start.max(r.start)..c.end.min(r.end))
            .collect();
        if region.iter().any(|r| r.start >= r.end) {
            continue;
        }
        units.push(Unit {
            origin: full.start().to_vec(),
            indices,
            shape: shape.to_vec(),
            region,
        });
    }
    Ok(units)
}
