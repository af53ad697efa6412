//! Creating an array shaped like another one, with new chunks, shards and codecs: the
//! destination of a copy.

use super::CodecSpec;
use crate::errors::{Error, Result};
use crate::stores::{DynArray, label};
use crate::zarr::vlen::zarr_python_bytes_metadata;
use crate::zarr::{data_type_of, describe, describe_varlen, inner_chain, vlen_kind};
use std::sync::Arc;
use zarrs::array::codec::{BytesCodec, ShardingCodec};
use zarrs::array::{Array, ArrayBuilder, ArrayMetadata};
use zarrs::node::NodePath;
use zarrs::storage::{ReadableWritableListableStorageTraits, StorePrefix};

/// How a new array is laid out; `None` fields keep the source's choice.
///
/// ```
/// let layout = zarrbuf::ArrayLayout {
///     chunks: Some(vec![32, 32]),
///     shards: Some(vec![128, 128]),
///     codecs: Some("zstd:1".parse()?),
///     ..Default::default()
/// };
/// assert_eq!(layout.zarr_format, None);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArrayLayout {
    /// Chunk shape (the inner chunk shape when `shards` is set). Default: the source's chunks
    /// (its inner chunks when it is sharded).
    pub chunks: Option<Vec<u64>>,
    /// Shard shape, a multiple of `chunks` in every dimension. Default: the source's shards
    /// when `chunks` is not given either, else no sharding.
    pub shards: Option<Vec<u64>>,
    /// Bytes-to-bytes codecs (compressors, checksums). Default: the source's.
    pub codecs: Option<CodecSpec>,
    /// 3 (the default). zarrbuf writes zarr v3 metadata only; 2 is refused with an error.
    pub zarr_format: Option<u8>,
}

/// Decoded bytes of one inner chunk in [`ArrayLayout::for_gpu`]: small enough that a read
/// gives a GPU thousands of independent frames (nvCOMP decodes about one frame per thread
/// block; NVIDIA recommends ~64 KiB chunks), large enough that CPU decoding keeps its speed.
pub const GPU_INNER_CHUNK_BYTES: u64 = 128 << 10;
/// Decoded bytes of one shard in [`ArrayLayout::for_gpu`]: 512 inner chunks, few files.
pub const GPU_SHARD_BYTES: u64 = 64 << 20;

impl ArrayLayout {
    /// A sharded layout made for GPU decompression of an array of `shape` with `elem_bytes`
    /// bytes per element: inner chunks of about [`GPU_INNER_CHUNK_BYTES`] (power-of-two
    /// edges, as even as the shape allows) in shards of about [`GPU_SHARD_BYTES`], zstd level
    /// 1 inside the shards. `zarrbuf copy --layout gpu` writes it.
    ///
    /// ```
    /// let l = zarrbuf::ArrayLayout::for_gpu(&[1024, 512, 512], 4);
    /// assert_eq!(l.chunks, Some(vec![32, 32, 32]));     // 128 KiB of float32
    /// assert_eq!(l.shards, Some(vec![256, 256, 256]));  // 64 MiB
    /// let small = zarrbuf::ArrayLayout::for_gpu(&[10, 3], 8);
    /// assert_eq!(small.chunks, Some(vec![10, 3]));
    /// assert_eq!(small.shards, Some(vec![10, 3]));
    /// ```
    pub fn for_gpu(shape: &[u64], elem_bytes: usize) -> ArrayLayout {
        let elem = elem_bytes.max(1) as u64;
        let chunks = grow_evenly(&vec![1; shape.len()], shape, GPU_INNER_CHUNK_BYTES / elem);
        let shards = grow_evenly(&chunks, shape, GPU_SHARD_BYTES / elem);
        ArrayLayout {
            chunks: Some(chunks),
            shards: Some(shards),
            codecs: Some(CodecSpec::zstd(1)),
            zarr_format: None,
        }
    }
}

/// Doubles the edges of `start` (each capped at the array's extent rounded up to a multiple
/// of `start`'s edge), smallest edge first so the block stays as even as the shape allows,
/// while the element count stays within `elements`. The result is a multiple of `start` in
/// every dimension.
fn grow_evenly(start: &[u64], shape: &[u64], elements: u64) -> Vec<u64> {
    let mut edge = start.to_vec();
    let cap: Vec<u64> = shape
        .iter()
        .zip(start)
        .map(|(&n, &s)| n.max(1).div_ceil(s) * s)
        .collect();
    loop {
        let count: u64 = edge.iter().product();
        let grow = (0..edge.len())
            .filter(|&d| {
                edge[d] < cap[d] && count / edge[d] * (edge[d] * 2).min(cap[d]) <= elements
            })
            .min_by_key(|&d| (edge[d] / start[d].max(1), std::cmp::Reverse(d)));
        match grow {
            Some(d) => edge[d] = (edge[d] * 2).min(cap[d]),
            None => return edge,
        }
    }
}

fn check_shape(what: &str, v: &[u64], shape: &[u64]) -> Result<()> {
    if v.len() != shape.len() {
        return Err(Error::InvalidArgument(format!(
            "--{what} {v:?} has {} sizes but the array has {} dimensions (shape {shape:?}); give one size per dimension",
            v.len(),
            shape.len()
        )));
    }
    if v.contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "--{what} {v:?} has a zero size; every {what} size must be at least 1"
        )));
    }
    Ok(())
}

/// [`crate::create_like`] (its docs are there): the array, without telling the chunk caches
/// of a replaced array (`api/create.rs` does).
pub(crate) fn create_like<S: ?Sized>(
    src: &Array<S>,
    shape: &[u64],
    store: Arc<dyn ReadableWritableListableStorageTraits>,
    path: &str,
    layout: &ArrayLayout,
    overwrite: bool,
) -> Result<DynArray> {
    let node = crate::stores::node_path(path)?;
    refuse_overlap(src, store.as_ref(), &node)?;
    let array = build_like(src, shape, store.clone(), &node, layout)?;
    if existing_metadata(&*store, &node)?.is_some() {
        if !overwrite {
            return Err(Error::InvalidArgument(format!(
                "the destination store already holds a zarr array or group at {node}; pass --overwrite to replace it \
                 (everything under that path is deleted first), --resume to continue a copy into it, or choose another destination"
            )));
        }
        return replace_node(&*store, &node, &array).map(|()| array);
    }
    store_metadata(&array, &node)?;
    Ok(array)
}

/// Refuses a destination node `node` of `store` that overlaps the source array (the same
/// array, or one inside the other): in the same store object, or in stores zarrbuf opened at
/// overlapping locations (compared after resolving symlinks and `..`).
pub(crate) fn refuse_overlap<S: ?Sized, D: ?Sized>(
    src: &Array<S>,
    store: &D,
    node: &str,
) -> Result<()> {
    let source = src.path().as_str();
    if crate::stores::nodes_in_stores_overlap(src.storage().as_ref(), source, store, node) {
        return Err(Error::InvalidArgument(format!(
            "the destination {node} overlaps the source {source} (one is the other or lies \
             inside it, in the same store or at overlapping locations after resolving symlinks \
             and `..`), and writing it would overwrite the source; put the destination \
             outside the source"
        )));
    }
    Ok(())
}

/// [`create_like`](crate::create_like) for continuing a copy: the array already at `path` is opened when its
/// metadata is exactly what `create_like` would store (same shape, data type, layout and
/// attributes), and created when `path` holds nothing; anything else is an error that says
/// what differs. The chunks already stored are kept.
///
/// # Errors
///
/// Those of [`create_like`](crate::create_like), and [`Error::InvalidArgument`] when the existing array's
/// metadata differs.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::ArrayLayout;
/// use zarrs::storage::store::MemoryStore;
/// let src = zarrbuf::open("fixtures/data/v3_int8.zarr", "")?;
/// let store = Arc::new(MemoryStore::new());
/// let layout = ArrayLayout { chunks: Some(vec![8, 8]), ..Default::default() };
/// zarrbuf::resume_like(&src, src.shape(), store.clone(), "/c", &layout)?; // created
/// zarrbuf::resume_like(&src, src.shape(), store.clone(), "/c", &layout)?; // opened
/// let other = ArrayLayout { chunks: Some(vec![4, 4]), ..Default::default() };
/// assert!(zarrbuf::resume_like(&src, src.shape(), store, "/c", &other).is_err());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn resume_like<S: ?Sized>(
    src: &Array<S>,
    shape: &[u64],
    store: Arc<dyn ReadableWritableListableStorageTraits>,
    path: &str,
    layout: &ArrayLayout,
) -> Result<DynArray> {
    let node = crate::stores::node_path(path)?;
    refuse_overlap(src, store.as_ref(), &node)?;
    let array = build_like(src, shape, store.clone(), &node, layout)?;
    let Some(found) = existing_metadata(&*store, &node)? else {
        store_metadata(&array, &node)?;
        return Ok(array);
    };
    let want = without_zarrs_version(
        serde_json::to_value(array.metadata())
            .map_err(|e| Error::InvalidArgument(e.to_string()))?,
    );
    let have = without_zarrs_version(serde_json::from_slice(&found).unwrap_or_default());
    if have != want {
        return Err(Error::InvalidArgument(format!(
            "--resume: the destination {node} holds an array whose metadata differs from the one this copy \
             creates ({}); resume with the same source, --subset, --chunks, --shards and --codec as the copy \
             that was interrupted, or start again with --overwrite",
            first_difference(&have, &want)
        )));
    }
    Ok(array)
}

/// A metadata document without the `_zarrs` attribute zarrs adds when it stores metadata
/// (its version, which is not part of the array's description).
fn without_zarrs_version(mut doc: serde_json::Value) -> serde_json::Value {
    if let Some(attrs) = doc.get_mut("attributes").and_then(|a| a.as_object_mut()) {
        attrs.remove("_zarrs");
        if attrs.is_empty() {
            doc.as_object_mut().map(|d| d.remove("attributes"));
        }
    }
    doc
}

/// Where two metadata documents first differ, as `field: stored … vs wanted …`.
fn first_difference(have: &serde_json::Value, want: &serde_json::Value) -> String {
    let (Some(h), Some(w)) = (have.as_object(), want.as_object()) else {
        return "the stored metadata is not a zarr v3 array document".into();
    };
    let mut fields: Vec<&String> = h.keys().chain(w.keys()).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .find(|f| h.get(*f) != w.get(*f))
        .map(|f| {
            let show =
                |v: Option<&serde_json::Value>| v.map_or("nothing".to_string(), |v| v.to_string());
            format!(
                "{f}: stored {} but this copy writes {}",
                show(h.get(f)),
                show(w.get(f))
            )
        })
        .unwrap_or_else(|| "the field order".into())
}

/// The new array's metadata, built but not stored.
fn build_like<S: ?Sized>(
    src: &Array<S>,
    shape: &[u64],
    store: Arc<dyn ReadableWritableListableStorageTraits>,
    node: &str,
    layout: &ArrayLayout,
) -> Result<DynArray> {
    let name = label("destination", node);
    if let Some(v) = layout.zarr_format
        && v != 3
    {
        return Err(Error::InvalidArgument(format!(
            "--zarr-format {v}: zarrbuf writes zarr v3 arrays only (zarr-python ≥ 3, \
                 tensorstore and zarrs read them); leave --zarr-format out or pass 3"
        )));
    }
    if src.shape().len() != shape.len() {
        return Err(Error::ShapeMismatch(format!(
            "the new shape {shape:?} has {} dimensions but the source has {}",
            shape.len(),
            src.shape().len()
        )));
    }
    // Variable-length strings and bytes have no element size: compressors that ask for
    // one (blosc's typesize) get 1.
    let (elem_size, src_chunks, src_inner) = if vlen_kind(src).is_some() {
        let info = describe_varlen(src)?;
        (1, info.chunks, info.inner_chunks)
    } else {
        let dtype = data_type_of(src)?;
        let info = describe(src)?;
        (dtype.size(), info.chunks, info.inner_chunks)
    };
    let (chunks, shards) = match (&layout.chunks, &layout.shards) {
        (None, None) => match &src_inner {
            Some(inner) => (inner.clone(), Some(src_chunks.clone())),
            None => (src_chunks.clone(), None),
        },
        (Some(c), None) => (c.clone(), None),
        (c, Some(s)) => (
            c.clone()
                .or_else(|| src_inner.clone())
                .unwrap_or_else(|| src_chunks.clone()),
            Some(s.clone()),
        ),
    };
    check_shape("chunks", &chunks, shape)?;
    if let Some(s) = &shards {
        check_shape("shards", s, shape)?;
        if s.iter().zip(&chunks).any(|(s, c)| s % c != 0) {
            return Err(Error::InvalidArgument(format!(
                "--shards {s:?} is not a multiple of the chunks {chunks:?} in every dimension; \
                 each shard must hold a whole number of chunks"
            )));
        }
    }
    // The bytes-to-bytes codecs: given, or the source's (inside its shards when sharded).
    let sharded_src = src
        .codecs()
        .array_to_bytes_codec()
        .as_any()
        .is::<ShardingCodec>();
    let src_chain = if sharded_src {
        inner_chain(src).map_err(|e| Error::zarr(src.path().as_str(), e, None))?
    } else {
        src.codecs().clone()
    };
    let b2b = match &layout.codecs {
        Some(spec) => spec.bytes_to_bytes_codecs(elem_size)?,
        None => src_chain.bytes_to_bytes_codecs().to_vec(),
    };
    let a2b = src_chain.array_to_bytes_codec();
    let keep_a2b = !(a2b.as_any().is::<BytesCodec>() || a2b.as_any().is::<ShardingCodec>());

    let mut builder = ArrayBuilder::new(
        shape.to_vec(),
        shards.clone().unwrap_or_else(|| chunks.clone()),
        src.data_type().clone(),
        src.fill_value().clone(),
    );
    builder
        .bytes_to_bytes_codecs(b2b)
        .attributes(src.attributes().clone())
        .dimension_names(src.dimension_names().clone());
    if keep_a2b {
        builder.array_to_bytes_codec(a2b.clone());
    }
    if let ArrayMetadata::V3(m) = src.metadata() {
        builder.additional_fields(m.additional_fields.clone());
    }
    if shards.is_some() {
        builder.subchunk_shape(chunks.clone());
    }
    let refused = |e: zarrs::array::ArrayCreateError| {
        Error::zarr(
            name.clone(),
            format!("cannot create the array: {e}"),
            Some(Box::new(e)),
        )
    };
    let array = builder.build(store.clone(), node).map_err(refused)?;
    match zarr_python_bytes_metadata(&array) {
        Some(meta) => crate::zarr::new_array(store, node, meta).map_err(refused),
        None => Ok(array),
    }
}

/// The metadata keys a node may have: v3's, then v2's array and group documents.
fn metadata_keys(node: &str) -> Result<[zarrs::storage::StoreKey; 4]> {
    let np = NodePath::new(node).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    Ok([
        zarrs::node::meta_key_v3(&np),
        zarrs::node::meta_key_v2_array(&np),
        zarrs::node::meta_key_v2_group(&np),
        zarrs::node::meta_key_v2_attributes(&np),
    ])
}

/// The stored metadata document of the array or group at `node`, if there is one (v3's
/// `zarr.json` first).
fn existing_metadata(
    store: &dyn ReadableWritableListableStorageTraits,
    node: &str,
) -> Result<Option<zarrs::storage::Bytes>> {
    for key in metadata_keys(node)?.iter().take(3) {
        let found = store
            .get(key)
            .map_err(|e| Error::store("destination", e.to_string(), Some(Box::new(e))))?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

fn store_metadata(array: &DynArray, node: &str) -> Result<()> {
    array.store_metadata().map_err(|e| {
        Error::zarr(
            label("destination", node),
            format!("cannot store the metadata: {e}"),
            Some(Box::new(e)),
        )
    })
}

/// Replaces whatever is at `node` with `array`, in an order that leaves a readable array
/// whenever the process is killed: every key and directory under `node` but its own
/// metadata is deleted first (the old array then reads as its fill value), then the new metadata replaces the
/// old in one atomic write, then metadata of the other zarr format is deleted.
fn replace_node(
    store: &dyn ReadableWritableListableStorageTraits,
    node: &str,
    array: &DynArray,
) -> Result<()> {
    let gone = |e: zarrs::storage::StorageError| {
        Error::store(
            "destination",
            format!("cannot delete the old array: {e}"),
            Some(Box::new(e)),
        )
    };
    let meta = metadata_keys(node)?;
    let prefix =
        StorePrefix::new(format!("{}/", node.trim_start_matches('/')).trim_start_matches('/'))
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    // Keys beside the metadata one by one, and every directory below the node whole (with
    // whatever else it holds), so that no directory of the old array stays where a key of
    // the new one belongs.
    let listed = store.list_dir(&prefix).map_err(gone)?;
    for key in listed.keys() {
        if !meta.contains(key) {
            store.erase(key).map_err(gone)?;
        }
    }
    for below in listed.prefixes() {
        store.erase_prefix(below).map_err(gone)?;
    }
    store_metadata(array, node)?;
    for key in &meta[1..] {
        store.erase(key).map_err(gone)?;
    }
    Ok(())
}
