//! Which blocks of a copy need no reading or writing: where no source chunk is stored, the
//! source reads as its fill value; where the destination (of the same fill value) has no
//! chunk stored either, it already reads as that. A whole copy of a 10^12-element array
//! with nothing stored then costs one key lookup per chunk, not a read, an encode and a
//! comparison with the fill value of every block.

use crate::errors::Result;
use crate::zarr::chunk_error;
use std::ops::Range;
use zarrs::array::Array;
use zarrs::storage::ReadableStorageTraits;

/// Whether the copy of source region `from` into destination region `to` may be skipped
/// (see the module docs). Both arrays hold the same data type (checked by the caller).
pub(super) fn block_is_fill<S, D>(
    src: &Array<S>,
    dst: &Array<D>,
    from: &[Range<u64>],
    to: &[Range<u64>],
) -> Result<bool>
where
    S: ?Sized + ReadableStorageTraits + 'static,
    D: ?Sized + ReadableStorageTraits + 'static,
{
    if src.fill_value().as_ne_bytes() != dst.fill_value().as_ne_bytes() {
        return Ok(false);
    }
    Ok(!any_stored(src, from)? && !any_stored(dst, to)?)
}

/// Whether any chunk (shard) of `array` that `region` touches is stored.
fn any_stored<A>(array: &Array<A>, region: &[Range<u64>]) -> Result<bool>
where
    A: ?Sized + ReadableStorageTraits + 'static,
{
    let subset = zarrs::array::ArraySubset::new_with_ranges(region);
    let chunks = array
        .chunks_in_array_subset(&subset)
        .map_err(|e| crate::zarr::zarr_error(array, e))?;
    let Some(chunks) = chunks else {
        return Ok(true);
    };
    let storage = array.storage();
    for indices in &chunks.indices() {
        let key = array.chunk_key(&indices);
        if storage
            .size_key(&key)
            .map_err(|e| chunk_error(array, &indices, e))?
            .is_some()
        {
            return Ok(true);
        }
    }
    Ok(false)
}
