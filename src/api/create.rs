//! [`create_like`]: a new array shaped like another, replacing what was at its path.

use crate::errors::Result;
use crate::stores::DynArray;
use crate::zarr::ArrayLayout;
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::ReadableWritableListableStorageTraits;

/// Creates a new array at `path` of `store` with `src`'s data type, fill value, attributes and
/// dimension names, the given `shape` (the source's, or a subset's) and `layout`, and stores
/// its metadata. Sources of variable-length strings or bytes (v3 `string`,
/// `variable_length_bytes`, v2 `|O` with `VLenUTF8` / `VLenBytes`) make v3 `string` /
/// `bytes` arrays with the `vlen-utf8` / `vlen-bytes` codec, which zarr-python reads.
/// Array-to-array codecs (transpose, numcodecs filters) are not carried over;
/// the array-to-bytes codec is kept unless it is `bytes` or sharding (then `bytes`,
/// little-endian).
///
/// An existing array or group at `path` is an error unless `overwrite` is true; then every
/// key under `path` is deleted first (the whole store when `path` is the root). A
/// destination that overlaps `src` — the same array, or one inside the other, in the same
/// store object or in stores zarrbuf opened at overlapping locations (symlinks and `..`
/// resolved) — is refused, with or without `overwrite`. Replacing an array drops its chunks
/// from every decoded-chunk cache of the process ([`crate::cache`]).
///
/// # Errors
///
/// [`Error::InvalidArgument`] for a destination overlapping the source, chunk or shard
/// shapes of the wrong length, zero sizes,
/// shards that are not multiples of the chunks, an existing destination without `overwrite`,
/// or `zarr_format` 2; [`Error::Zarr`]/[`Error::Store`] when zarrs refuses the metadata or the
/// store fails.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::ArrayLayout;
/// use zarrs::storage::store::MemoryStore;
/// let src = zarrbuf::open("fixtures/data/v3_int8.zarr", "")?;
/// let store = Arc::new(MemoryStore::new());
/// let layout = ArrayLayout { chunks: Some(vec![8, 8]), codecs: Some("gzip:1".parse()?), ..Default::default() };
/// let dst = zarrbuf::create_like(&src, src.shape(), store.clone(), "/copy", &layout, false)?;
/// assert_eq!(zarrbuf::describe(&dst)?.chunks, vec![8, 8]);
/// assert!(zarrbuf::create_like(&src, src.shape(), store, "/copy", &layout, false).is_err());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn create_like<S: ?Sized>(
    src: &Array<S>,
    shape: &[u64],
    store: Arc<dyn ReadableWritableListableStorageTraits>,
    path: &str,
    layout: &ArrayLayout,
    overwrite: bool,
) -> Result<DynArray> {
    let array = crate::zarr::create_like(src, shape, store, path, layout, overwrite)?;
    // An overwritten array's chunks were deleted: none of them may be read from a cache.
    crate::cache::invalidate_node(&array);
    Ok(array)
}
