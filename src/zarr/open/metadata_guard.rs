//! Array metadata made safe to hand to zarrs. Every array zarrbuf builds from stored or given
//! metadata goes through [`zarrs_safe_metadata`]: [`open_array`] and [`async_open_array`]
//! stand in for zarrs' `Array::open` and `Array::async_open`, which would build the array
//! from the v2 metadata they parse before zarrbuf could look at it, and [`new_array`] for
//! `Array::new_with_metadata`.
//!
//! The one rewrite: a 0-d v2 array (`"shape": []`) with `"order": "F"` gets `"order": "C"`.
//! Why: zarrs 0.23.14 turns `"order": "F"` into a transpose codec whose order is the axes
//! reversed, `TransposeOrder::new(&[n-1, …, 0]).unwrap_unchecked()` (`array.rs:1431` when
//! the array is built, `convert.rs:142` in `array_metadata_v2_to_v3`). `TransposeOrder::new`
//! refuses an empty order, so for 0 axes that unwraps an `Err`: undefined behaviour (an
//! abort, "unsafe precondition violated", with debug assertions). Every other
//! dimensionality gives a valid permutation. The order of a 0-d array's single element means
//! nothing, so C reads exactly what F would.

use std::sync::Arc;
use zarrs::array::{Array, ArrayCreateError, ArrayMetadata};
use zarrs::config::MetadataRetrieveVersion;
use zarrs::metadata::v2::{ArrayMetadataV2, ArrayMetadataV2Order};
use zarrs::node::{NodePath, meta_key_v2_array, meta_key_v2_attributes};
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits, StorageError};

/// `meta` rewritten where zarrs would otherwise hit undefined behaviour building an array
/// from it: a 0-d zarr v2 array's `"order": "F"` becomes `"C"` (the same array: one element
/// has no layout). Anything else is returned unchanged.
///
/// ```
/// let meta: zarrs::array::ArrayMetadata = serde_json::from_str(
///     r#"{"zarr_format": 2, "shape": [], "chunks": [], "dtype": "<f8", "fill_value": "NaN",
///         "order": "F", "filters": null, "compressor": null}"#,
/// ).unwrap();
/// let safe = zarrbuf::store::zarrs_safe_metadata(meta);
/// let zarrs::array::ArrayMetadata::V2(m) = safe else { panic!() };
/// assert_eq!(m.order, zarrs::metadata::v2::ArrayMetadataV2Order::C);
/// ```
pub fn zarrs_safe_metadata(mut meta: ArrayMetadata) -> ArrayMetadata {
    if let ArrayMetadata::V2(m) = &mut meta
        && m.shape.is_empty()
        && m.order == ArrayMetadataV2Order::F
    {
        // why: zarrs 0.23.14 unwraps TransposeOrder::new(&[]) unchecked for this (see above).
        m.order = ArrayMetadataV2Order::C;
    }
    meta
}

/// `Array::new_with_metadata` of `meta` made safe by [`zarrs_safe_metadata`].
pub(crate) fn new_array<S: ?Sized>(
    store: Arc<S>,
    path: &str,
    meta: ArrayMetadata,
) -> Result<Array<S>, ArrayCreateError> {
    Array::new_with_metadata(store, path, zarrs_safe_metadata(meta))
}

/// `Array::open`: the array at `path` from its `zarr.json`, else its `.zarray` (with
/// `.zattrs`), the v2 metadata read here and made safe before zarrs builds the array.
pub(crate) fn open_array<S: ?Sized + ReadableStorageTraits + 'static>(
    store: Arc<S>,
    path: &str,
) -> Result<Array<S>, ArrayCreateError> {
    match Array::open_opt(store.clone(), path, &MetadataRetrieveVersion::V3) {
        Err(ArrayCreateError::MissingMetadata) => {}
        v3 => return v3,
    }
    let node = NodePath::new(path)?;
    let zarray = store.get(&meta_key_v2_array(&node))?;
    let zattrs = match zarray {
        Some(_) => store.get(&meta_key_v2_attributes(&node))?,
        None => None,
    };
    let meta = v2_metadata(&node, zarray.as_deref(), zattrs.as_deref())?;
    new_array(store, path, meta)
}

/// [`open_array`] for an async store (`Array::async_open`).
pub(crate) async fn async_open_array<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    store: Arc<S>,
    path: &str,
) -> Result<Array<S>, ArrayCreateError> {
    match Array::async_open_opt(store.clone(), path, &MetadataRetrieveVersion::V3).await {
        Err(ArrayCreateError::MissingMetadata) => {}
        v3 => return v3,
    }
    let node = NodePath::new(path)?;
    let zarray = store.get(&meta_key_v2_array(&node)).await?;
    let zattrs = match zarray {
        Some(_) => store.get(&meta_key_v2_attributes(&node)).await?,
        None => None,
    };
    let meta = v2_metadata(&node, zarray.as_deref(), zattrs.as_deref())?;
    new_array(store, path, meta)
}

/// The v2 metadata of the array at `node` from its `.zarray` and `.zattrs` bytes, parsed as
/// zarrs' `Array::open` parses them (the same errors).
fn v2_metadata(
    node: &NodePath,
    zarray: Option<&[u8]>,
    zattrs: Option<&[u8]>,
) -> Result<ArrayMetadata, ArrayCreateError> {
    let invalid = |key: zarrs::storage::StoreKey, e: serde_json::Error| {
        ArrayCreateError::StorageError(StorageError::InvalidMetadata(key, e.to_string()))
    };
    let zarray = zarray.ok_or(ArrayCreateError::MissingMetadata)?;
    let mut meta: ArrayMetadataV2 =
        serde_json::from_slice(zarray).map_err(|e| invalid(meta_key_v2_array(node), e))?;
    if let Some(attrs) = zattrs {
        meta.attributes =
            serde_json::from_slice(attrs).map_err(|e| invalid(meta_key_v2_attributes(node), e))?;
    }
    Ok(ArrayMetadata::V2(meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use zarrs::storage::WritableStorageTraits;
    use zarrs::storage::store::MemoryStore;

    fn zarray(shape: &str, order: &str) -> Vec<u8> {
        let chunks = shape.replace('0', "1");
        format!(
            r#"{{"zarr_format": 2, "shape": {shape}, "chunks": {chunks}, "dtype": "<f8",
                "fill_value": "NaN", "order": "{order}", "filters": null,
                "compressor": {{"id": "zstd", "level": 3}}}}"#
        )
        .into_bytes()
    }

    fn v2(bytes: &[u8]) -> ArrayMetadata {
        ArrayMetadata::V2(serde_json::from_slice(bytes).unwrap())
    }

    #[test]
    fn only_zero_dim_fortran_order_is_rewritten() {
        let order = |m: ArrayMetadata| match zarrs_safe_metadata(m) {
            ArrayMetadata::V2(m) => m.order,
            ArrayMetadata::V3(_) => unreachable!(),
        };
        assert_eq!(order(v2(&zarray("[]", "F"))), ArrayMetadataV2Order::C);
        assert_eq!(order(v2(&zarray("[]", "C"))), ArrayMetadataV2Order::C);
        assert_eq!(order(v2(&zarray("[0]", "F"))), ArrayMetadataV2Order::F);
        assert_eq!(order(v2(&zarray("[2, 3]", "F"))), ArrayMetadataV2Order::F);
    }

    #[test]
    fn opens_zero_dim_fortran_order_and_keeps_attributes() {
        let store = Arc::new(MemoryStore::new());
        let node = NodePath::new("/a").unwrap();
        store
            .set(&meta_key_v2_array(&node), zarray("[]", "F").into())
            .unwrap();
        store
            .set(
                &meta_key_v2_attributes(&node),
                br#"{"units": "m"}"#.to_vec().into(),
            )
            .unwrap();
        let array = open_array(store, "/a").unwrap();
        assert!(array.shape().is_empty());
        assert_eq!(array.attributes()["units"], "m");
    }

    #[test]
    fn errors_match_zarrs_open() {
        let store = Arc::new(MemoryStore::new());
        assert!(matches!(
            open_array(store.clone(), "/a"),
            Err(ArrayCreateError::MissingMetadata)
        ));
        let node = NodePath::new("/a").unwrap();
        store
            .set(&meta_key_v2_array(&node), b"{not json".to_vec().into())
            .unwrap();
        let ours = open_array(store.clone(), "/a").unwrap_err().to_string();
        let zarrs = Array::open(store, "/a").unwrap_err().to_string();
        assert_eq!(ours, zarrs);
    }
}
