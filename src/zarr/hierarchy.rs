//! Listing a zarr hierarchy — the groups and arrays under a node, with each array's layout
//! and stored size — for `zarrbuf info` on a group and for users; and the error that says a
//! group was opened as an array.
//!
//! The nodes come from consolidated metadata when the group has it (v3 `consolidated_metadata`
//! in its `zarr.json`, v2 `.zmetadata`), as zarr-python reads them, and from listing the store
//! otherwise. zarrs' own `Node`/`Hierarchy` are not used: they read v3 consolidated metadata
//! only, and one node whose metadata zarrs cannot parse fails the whole listing, where here
//! it is listed with the reason zarrbuf cannot read it.

use super::info::codec_list;
use super::open_options::OpenOptions;
use super::remote_store::RemoteStore;
use super::{data_type_of, fill_bytes, label, node_path};
use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use zarrs::array::{Array, ArrayMetadata, ArrayShardedExt};
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{
    AsyncListableStorageTraits, AsyncReadableStorageTraits, Bytes, ListableStorageTraits,
    ReadableStorageTraits, StoreKey, StorePrefix,
};

/// The groups and arrays under a node of a store, as [`list_hierarchy`] finds them. Its
/// [`Display`](std::fmt::Display) is the tree `zarrbuf info` prints; it serializes (serde) to
/// the JSON `zarrbuf info --json` prints.
///
/// ```
/// let h = zarrbuf::list_hierarchy("fixtures/data/v3_nested_group.zarr", "")?;
/// assert_eq!(h.nodes[0].path, "");
/// println!("{h}");
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hierarchy {
    /// The store location, as given.
    pub location: String,
    /// The path of the node listed inside the store (`""` for the store root).
    pub path: String,
    /// Whether the nodes came from consolidated metadata (v3 `consolidated_metadata` in the
    /// group's `zarr.json`, or v2 `.zmetadata`) rather than from listing the store.
    pub consolidated: bool,
    /// The nodes, parents before children: the node at [`Hierarchy::path`] first (absent when
    /// that path holds no metadata of its own but nodes below it), then the rest sorted by
    /// path.
    pub nodes: Vec<NodeInfo>,
}

/// One group or array of a [`Hierarchy`].
///
/// ```
/// let h = zarrbuf::list_hierarchy("fixtures/data/v3_nested_group.zarr", "")?;
/// let c = h.nodes.iter().find(|n| n.path == "a/b/c").unwrap();
/// assert_eq!(c.zarr_format, 3);
/// assert!(c.array().is_some());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeInfo {
    /// The node's path from the store root, as `--path` and [`open`](crate::open) take it:
    /// `""` for the root, `"a/b"` below it.
    pub path: String,
    /// 2 or 3.
    pub zarr_format: u8,
    /// Group or array (in JSON, `"node_type": "group"` or `"array"` and the array's fields).
    #[serde(flatten)]
    pub kind: NodeKind,
}

impl NodeInfo {
    /// The array's summary, or `None` for a group.
    ///
    /// ```
    /// let h = zarrbuf::list_hierarchy("fixtures/data/v3_shard_end.zarr", "")?;
    /// assert!(h.nodes[0].array().unwrap().shards.is_some());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn array(&self) -> Option<&ArraySummary> {
        match &self.kind {
            NodeKind::Array(a) => Some(a),
            NodeKind::Group => None,
        }
    }
}

/// Whether a node is a group or an array.
///
/// ```
/// let h = zarrbuf::list_hierarchy("fixtures/data/v3_nested_group.zarr", "")?;
/// assert!(matches!(h.nodes[0].kind, zarrbuf::hierarchy::NodeKind::Group));
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "node_type", rename_all = "lowercase")]
#[non_exhaustive]
pub enum NodeKind {
    /// A group.
    Group,
    /// An array.
    Array(ArraySummary),
}

/// What a listing says of an array.
///
/// ```
/// let h = zarrbuf::list_hierarchy("fixtures/data/v3_large_3d.zarr", "")?;
/// let a = h.nodes[0].array().unwrap();
/// assert_eq!((a.data_type.as_str(), a.chunks_stored, a.chunks_total), ("float32", 18, 18));
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArraySummary {
    /// The array shape.
    pub shape: Vec<u64>,
    /// The data type: zarrbuf's name (`float32`, `datetime64[ns]`…) when zarrbuf reads it,
    /// else zarr's (`string`).
    pub data_type: String,
    /// The chunk shape: the inner chunks of a sharded array.
    pub chunks: Vec<u64>,
    /// The shard shape of a sharded array.
    pub shards: Option<Vec<u64>>,
    /// Codec names in encoding order (a shard's inner codecs in brackets).
    pub codecs: Vec<String>,
    /// The fill value, formatted (as the metadata spells it when zarrbuf cannot read the
    /// array).
    pub fill_value: String,
    /// Chunk objects stored (shards for a sharded array); the others read as the fill value.
    pub chunks_stored: u64,
    /// Chunks (shards) in the chunk grid.
    pub chunks_total: u64,
    /// Bytes stored under the array's path (its chunks and metadata; compressed size inside
    /// a zip file).
    pub stored_bytes: u64,
    /// Why zarrbuf cannot read this array, or `None` when it can.
    pub unreadable: Option<String>,
}

/// Lists the groups and arrays at and under `path` in the store at `location` (a directory,
/// zip file, `file://` or object-store URL): a group's whole hierarchy, or the one array
/// found at `path`.
///
/// Nodes come from consolidated metadata where the group has it, else from listing the
/// store; the stored chunk counts and sizes always come from one listing of the keys under
/// `path` (plus one size query per array). Object-store URLs are read with credentials from
/// the environment, as in [`open_async`](crate::open_async).
///
/// # Errors
///
/// When the store does not open or cannot be listed, when a metadata document is not JSON,
/// and when nothing at or under `path` holds zarr metadata.
///
/// ```
/// let h = zarrbuf::list_hierarchy("fixtures/data/v3_nested_group.zarr", "")?;
/// let paths: Vec<&str> = h.nodes.iter().map(|n| n.path.as_str()).collect();
/// assert_eq!(paths, ["", "a", "a/b", "a/b/c"]);
/// assert_eq!(h.nodes[3].array().unwrap().shape.len(), 2);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn list_hierarchy(location: &str, path: &str) -> Result<Hierarchy> {
    list_hierarchy_opt(location, path, &OpenOptions::default())
}

/// [`list_hierarchy`] with [`OpenOptions`]: object_store's options for an object-store URL,
/// the version of an icechunk repository to list (see [`open_opt`](crate::open_opt);
/// default the tip of branch `main`).
///
/// ```
/// let Err(err) = zarrbuf::list_hierarchy_opt("fixtures/data/v3_int8.zarr", "",
///     &zarrbuf::options::OpenOptions::default().with_branch("main")) else { panic!() };
/// assert!(err.to_string().contains("not an icechunk repository"));
/// ```
pub fn list_hierarchy_opt(location: &str, path: &str, opts: &OpenOptions) -> Result<Hierarchy> {
    let base = node_path(path)?.trim_start_matches('/').to_string();
    let remote = location
        .split_once("://")
        .is_some_and(|(scheme, _)| scheme != "file" && scheme != "memory");
    // The store of an icechunk repository waits on the store runtime itself, from any thread.
    let icechunk_walk = || -> Result<(bool, Vec<NodeInfo>)> {
        let store = super::store::icechunk_sync_store(location, opts)?;
        futures::executor::block_on(walk(&SyncSource(store.as_ref()), location, &base, true))
    };
    let (consolidated, nodes) = if super::store::icechunk_route(location, opts)? {
        icechunk_walk()?
    } else if remote {
        let store = RemoteStore::new(super::object_store_for_url(location, &opts.store_pairs())?);
        // A runtime of its own on a thread of its own: callable from async code too.
        let listed = std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        Error::InvalidArgument(format!("cannot start the async runtime: {e}"))
                    })?;
                rt.block_on(walk(&AsyncSource(&store), location, &base, true))
            })
            .join()
            .unwrap_or_else(|_| {
                Err(Error::store(
                    location,
                    "internal error while listing (please report)",
                    None,
                ))
            })
        });
        match listed {
            // Nothing zarr there: an icechunk repository keeps its nodes in snapshots.
            Err(_) if super::store::url_is_repository(location) => icechunk_walk()?,
            other => other?,
        }
    } else {
        super::store::check_local_location(location)?;
        let store = super::open_store_opt(location, opts)?;
        futures::executor::block_on(walk(&SyncSource(store.as_ref()), location, &base, true))?
    };
    Ok(Hierarchy {
        location: location.to_string(),
        path: base,
        consolidated,
        nodes,
    })
}

/// When the node at `path` is a group: the error [`open`](crate::open) returns for it,
/// naming the arrays under it. `None` when it is not a group (or cannot be listed).
pub(crate) fn group_error_sync<S>(store: &S, location: &str, path: &str) -> Option<Error>
where
    S: ?Sized + ReadableStorageTraits + ListableStorageTraits,
{
    futures::executor::block_on(group_error(&SyncSource(store), location, path))
}

/// [`group_error_sync`] for an object store.
pub(crate) async fn group_error_async(
    store: &RemoteStore,
    location: &str,
    path: &str,
) -> Option<Error> {
    group_error(&AsyncSource(store), location, path).await
}

async fn group_error(source: &dyn Source, location: &str, path: &str) -> Option<Error> {
    let base = node_path(path).ok()?.trim_start_matches('/').to_string();
    let is_group = match source.get(&meta_key(&base, "zarr.json")).await.ok()? {
        Some(doc) => serde_json::from_slice::<Json>(&doc)
            .ok()
            .is_some_and(|v| v["node_type"] == "group"),
        None => {
            source
                .get(&meta_key(&base, ".zarray"))
                .await
                .ok()?
                .is_none()
                && source
                    .get(&meta_key(&base, ".zgroup"))
                    .await
                    .ok()?
                    .is_some()
        }
    };
    if !is_group {
        return None;
    }
    let arrays = match walk(source, location, &base, false).await {
        Ok((_, nodes)) => nodes
            .into_iter()
            .filter(|n| n.array().is_some())
            .map(|n| n.path)
            .collect(),
        Err(_) => Vec::new(),
    };
    Some(Error::IsGroup {
        group: label(location, path),
        arrays,
    })
}

/// The store operations a listing needs, over sync and async stores alike.
#[async_trait::async_trait]
trait Source: Sync {
    async fn get(&self, key: &str) -> Result<Option<Bytes>>;
    /// Every key under `prefix` (`""` or ending in `/`).
    async fn list(&self, prefix: &str) -> Result<Vec<String>>;
    /// Bytes stored under `prefix`.
    async fn size(&self, prefix: &str) -> Result<u64>;
}

fn storage_error(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::store(what, e.to_string(), Some(Box::new(e)))
}

fn key(k: &str) -> Result<StoreKey> {
    StoreKey::new(k).map_err(|e| storage_error(k, e))
}

fn prefix(p: &str) -> Result<StorePrefix> {
    StorePrefix::new(p).map_err(|e| storage_error(p, e))
}

struct SyncSource<'a, S: ?Sized>(&'a S);

#[async_trait::async_trait]
impl<S> Source for SyncSource<'_, S>
where
    S: ?Sized + ReadableStorageTraits + ListableStorageTraits,
{
    async fn get(&self, k: &str) -> Result<Option<Bytes>> {
        self.0.get(&key(k)?).map_err(|e| storage_error(k, e))
    }

    async fn list(&self, p: &str) -> Result<Vec<String>> {
        let keys = self
            .0
            .list_prefix(&prefix(p)?)
            .map_err(|e| storage_error(p, e))?;
        Ok(keys.iter().map(|k| k.as_str().to_string()).collect())
    }

    async fn size(&self, p: &str) -> Result<u64> {
        self.0
            .size_prefix(&prefix(p)?)
            .map_err(|e| storage_error(p, e))
    }
}

struct AsyncSource<'a, S: ?Sized>(&'a S);

#[async_trait::async_trait]
impl<S> Source for AsyncSource<'_, S>
where
    S: ?Sized + AsyncReadableStorageTraits + AsyncListableStorageTraits,
{
    async fn get(&self, k: &str) -> Result<Option<Bytes>> {
        self.0.get(&key(k)?).await.map_err(|e| storage_error(k, e))
    }

    async fn list(&self, p: &str) -> Result<Vec<String>> {
        let keys = self
            .0
            .list_prefix(&prefix(p)?)
            .await
            .map_err(|e| storage_error(p, e))?;
        Ok(keys.iter().map(|k| k.as_str().to_string()).collect())
    }

    async fn size(&self, p: &str) -> Result<u64> {
        self.0
            .size_prefix(&prefix(p)?)
            .await
            .map_err(|e| storage_error(p, e))
    }
}

/// A node's metadata document(s), as found.
enum Meta {
    /// A v3 `zarr.json` (group or array).
    V3(Json),
    /// A v2 `.zarray`.
    V2Array(Json),
    /// A v2 `.zgroup`.
    V2Group,
}

/// The metadata names of a node.
const METADATA_NAMES: [&str; 5] = ["zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"];

/// `base` + `/` + `name` (or `name` at the root).
fn meta_key(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}/{name}")
    }
}

fn parse(key: &str, bytes: &[u8]) -> Result<Json> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::store(
            key,
            format!("the metadata is not JSON ({e}); the store is damaged"),
            Some(Box::new(e)),
        )
    })
}

/// The nodes at and under `base` (see [`list_hierarchy`]) and whether they came from
/// consolidated metadata; `sizes` adds the stored chunk counts and bytes of each array.
async fn walk(
    source: &dyn Source,
    location: &str,
    base: &str,
    sizes: bool,
) -> Result<(bool, Vec<NodeInfo>)> {
    let (mut nodes, consolidated, is_array) = base_nodes(source, base).await?;
    let root_prefix = if base.is_empty() {
        String::new()
    } else {
        format!("{base}/")
    };
    let keys = if sizes || !(consolidated || is_array) {
        source.list(&root_prefix).await?
    } else {
        Vec::new()
    };
    if !(consolidated || is_array) {
        discover_nodes(source, base, &keys, &mut nodes).await?;
    }
    if nodes.is_empty() {
        return Err(Error::store(
            label(location, base),
            "no zarr array or group here (no zarr.json, .zarray or .zgroup at or below this \
             path); check the store location and --path",
            None,
        ));
    }
    let stored = stored_chunks(&nodes, &keys);
    let out = node_infos(source, &nodes, &stored, base, sizes).await?;
    Ok((consolidated, out))
}

/// The node at `base` and, from its consolidated metadata, the nodes below it; whether
/// they came from consolidated metadata, and whether `base` is an array.
async fn base_nodes(
    source: &dyn Source,
    base: &str,
) -> Result<(BTreeMap<String, Meta>, bool, bool)> {
    let mut nodes: BTreeMap<String, Meta> = BTreeMap::new();
    let mut consolidated = false;
    let mut is_array = false;
    let zarr_json = meta_key(base, "zarr.json");
    if let Some(doc) = source.get(&zarr_json).await? {
        let doc = parse(&zarr_json, &doc)?;
        is_array = doc["node_type"] == "array";
        if let Some(map) = doc["consolidated_metadata"]["metadata"].as_object() {
            consolidated = true;
            for (rel, child) in map {
                let rel = rel.trim_matches('/');
                if !rel.is_empty() {
                    nodes.insert(meta_key(base, rel), Meta::V3(child.clone()));
                }
            }
        }
        nodes.insert(base.to_string(), Meta::V3(doc));
    } else if let Some(doc) = source.get(&meta_key(base, ".zarray")).await? {
        is_array = true;
        nodes.insert(
            base.to_string(),
            Meta::V2Array(parse(&meta_key(base, ".zarray"), &doc)?),
        );
    } else if source.get(&meta_key(base, ".zgroup")).await?.is_some() {
        nodes.insert(base.to_string(), Meta::V2Group);
        let zmetadata = meta_key(base, ".zmetadata");
        if let Some(doc) = source.get(&zmetadata).await? {
            let doc = parse(&zmetadata, &doc)?;
            if let Some(map) = doc["metadata"].as_object() {
                consolidated = true;
                add_v2_consolidated(map, base, &mut nodes);
            }
        }
    }
    Ok((nodes, consolidated, is_array))
}

/// The arrays and groups of a v2 group's consolidated metadata (`.zmetadata`'s `metadata`).
fn add_v2_consolidated(
    map: &serde_json::Map<String, Json>,
    base: &str,
    nodes: &mut BTreeMap<String, Meta>,
) {
    for (k, v) in map {
        let (dir, name) = k.rsplit_once('/').unwrap_or(("", k));
        let path = if dir.is_empty() {
            base.to_string()
        } else {
            meta_key(base, dir)
        };
        match name {
            ".zarray" => {
                nodes.insert(path, Meta::V2Array(v.clone()));
            }
            ".zgroup" => {
                nodes.entry(path).or_insert(Meta::V2Group);
            }
            _ => {}
        }
    }
}

/// Discovers the nodes below `base` from their metadata keys among `keys` (zarr.json wins
/// over v2 files) and reads their metadata.
async fn discover_nodes(
    source: &dyn Source,
    base: &str,
    keys: &[String],
    nodes: &mut BTreeMap<String, Meta>,
) -> Result<()> {
    let mut found: BTreeMap<String, (bool, bool, bool)> = BTreeMap::new();
    for k in keys {
        let (dir, name) = k.rsplit_once('/').unwrap_or(("", k));
        if dir == base || (base.is_empty() && dir.is_empty()) {
            continue;
        }
        let entry = found.entry(dir.to_string()).or_default();
        match name {
            "zarr.json" => entry.0 = true,
            ".zarray" => entry.1 = true,
            ".zgroup" => entry.2 = true,
            _ => {}
        }
    }
    for (dir, (v3, v2_array, v2_group)) in found {
        if v3 {
            let k = meta_key(&dir, "zarr.json");
            if let Some(doc) = source.get(&k).await? {
                nodes.insert(dir, Meta::V3(parse(&k, &doc)?));
            }
        } else if v2_array {
            let k = meta_key(&dir, ".zarray");
            if let Some(doc) = source.get(&k).await? {
                nodes.insert(dir, Meta::V2Array(parse(&k, &doc)?));
            }
        } else if v2_group {
            nodes.insert(dir, Meta::V2Group);
        }
    }
    Ok(())
}

/// Chunk objects per array: the keys under an array's path that are not its metadata.
fn stored_chunks<'n>(nodes: &'n BTreeMap<String, Meta>, keys: &[String]) -> HashMap<&'n str, u64> {
    let arrays: HashSet<&str> = nodes
        .iter()
        .filter(|(_, m)| match m {
            Meta::V3(doc) => doc["node_type"] == "array",
            Meta::V2Array(_) => true,
            Meta::V2Group => false,
        })
        .map(|(p, _)| p.as_str())
        .collect();
    let mut stored: HashMap<&str, u64> = HashMap::new();
    for k in keys {
        let (mut dir, name) = k.rsplit_once('/').unwrap_or(("", k));
        if METADATA_NAMES.contains(&name) && nodes.contains_key(dir) {
            continue;
        }
        loop {
            if let Some(a) = arrays.get(dir) {
                *stored.entry(a).or_default() += 1;
                break;
            }
            match dir.rsplit_once('/') {
                Some((parent, _)) => dir = parent,
                None if !dir.is_empty() => dir = "",
                None => break,
            }
        }
    }
    stored
}

/// The listing's entries: each node with its format and, for arrays, its summary, stored
/// chunk count and (with `sizes`) stored bytes; parents before children.
async fn node_infos(
    source: &dyn Source,
    nodes: &BTreeMap<String, Meta>,
    stored: &HashMap<&str, u64>,
    base: &str,
    sizes: bool,
) -> Result<Vec<NodeInfo>> {
    let mut out = Vec::with_capacity(nodes.len());
    for (path, meta) in nodes {
        let (zarr_format, kind) = match meta {
            Meta::V2Group => (2, NodeKind::Group),
            Meta::V3(doc) if doc["node_type"] != "array" => (3, NodeKind::Group),
            Meta::V3(doc) | Meta::V2Array(doc) => {
                let v2 = matches!(meta, Meta::V2Array(_));
                let mut summary = summarize(path, doc, v2);
                summary.chunks_stored = stored.get(path.as_str()).copied().unwrap_or(0);
                if sizes {
                    summary.stored_bytes = source
                        .size(&if path.is_empty() {
                            String::new()
                        } else {
                            format!("{path}/")
                        })
                        .await?;
                }
                (if v2 { 2 } else { 3 }, NodeKind::Array(summary))
            }
        };
        out.push(NodeInfo {
            path: path.clone(),
            zarr_format,
            kind,
        });
    }
    // Parents before children, siblings by name (a plain string sort puts "a-x" before "a/b").
    out.sort_by_cached_key(|n| {
        (
            n.path != base,
            n.path.split('/').map(str::to_string).collect::<Vec<_>>(),
        )
    });
    Ok(out)
}

/// What zarrbuf makes of an array's metadata document.
fn summarize(path: &str, doc: &Json, v2: bool) -> ArraySummary {
    super::codecs::register_zarrs_overrides();
    let node = format!("/{path}");
    let metadata: std::result::Result<ArrayMetadata, String> = if v2 {
        serde_json::from_value(doc.clone())
            .map(ArrayMetadata::V2)
            .map_err(|e| e.to_string())
    } else {
        serde_json::from_value(doc.clone())
            .map(ArrayMetadata::V3)
            .map_err(|e| e.to_string())
    };
    let store = Arc::new(MemoryStore::new());
    let built = metadata.and_then(|m| {
        super::new_array(store.clone(), &node, m).map_err(|e| super::store::describe_open_error(&e))
    });
    let built = match built {
        Err(why) if v2 => {
            let bytes = serde_json::to_vec(doc).unwrap_or_default();
            match super::dtypes::v2_metadata_fallback(&bytes) {
                Some(Ok(m)) => super::new_array(store, &node, m)
                    .map_err(|e| super::store::describe_open_error(&e)),
                Some(Err(fallback)) => Err(format!("cannot open the array: {fallback}")),
                None => Err(why),
            }
        }
        other => other,
    };
    match built {
        Ok(array) => from_array(&array, doc),
        Err(why) => from_json(doc, v2, why),
    }
}

fn dims(s: &[std::num::NonZeroU64]) -> Vec<u64> {
    s.iter().map(|n| n.get()).collect()
}

fn from_array<S: ?Sized>(array: &Array<S>, doc: &Json) -> ArraySummary {
    let zero = vec![0u64; array.dimensionality()];
    let outer = array
        .chunk_shape(&zero)
        .map(|s| dims(&s))
        .unwrap_or_default();
    let (chunks, shards) = match array.subchunk_shape() {
        Some(inner) => (dims(&inner), Some(outer)),
        None => (outer, None),
    };
    let (data_type, fill_value, unreadable) = match data_type_of(array) {
        Ok(t) => (t.to_string(), t.format_value(&fill_bytes(array)), None),
        Err(e) => (
            array
                .data_type()
                .name_v3()
                .map(|n| n.into_owned())
                .unwrap_or_else(|| "unnamed".into()),
            doc["fill_value"].to_string(),
            Some(e.to_string()),
        ),
    };
    ArraySummary {
        shape: array.shape().to_vec(),
        data_type,
        chunks,
        shards,
        codecs: codec_list(array),
        fill_value,
        chunks_stored: 0,
        chunks_total: array.chunk_grid_shape().iter().product(),
        stored_bytes: 0,
        unreadable,
    }
}

/// The summary of an array zarrs does not open, from its metadata as written.
fn from_json(doc: &Json, v2: bool, why: String) -> ArraySummary {
    let numbers = |v: &Json| -> Vec<u64> {
        v.as_array()
            .map(|a| a.iter().filter_map(Json::as_u64).collect())
            .unwrap_or_default()
    };
    let shape = numbers(&doc["shape"]);
    let (data_type, chunks, codecs) = if v2 {
        let codecs = doc["filters"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&doc["compressor"]))
            .filter_map(|c| c["id"].as_str().map(str::to_string))
            .collect();
        let dtype = match &doc["dtype"] {
            Json::String(s) => s.clone(),
            other => other.to_string(),
        };
        (dtype, numbers(&doc["chunks"]), codecs)
    } else {
        let dtype = match &doc["data_type"] {
            Json::String(s) => s.clone(),
            other => other["name"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| other.to_string()),
        };
        let codecs = doc["codecs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect();
        (
            dtype,
            numbers(&doc["chunk_grid"]["configuration"]["chunk_shape"]),
            codecs,
        )
    };
    let chunks_total = if chunks.len() == shape.len() && chunks.iter().all(|&c| c > 0) {
        shape
            .iter()
            .zip(&chunks)
            .map(|(s, c)| s.div_ceil(*c))
            .product()
    } else {
        0
    };
    ArraySummary {
        shape,
        data_type,
        chunks,
        shards: None,
        codecs,
        fill_value: doc["fill_value"].to_string(),
        chunks_stored: 0,
        chunks_total,
        stored_bytes: 0,
        unreadable: Some(why),
    }
}

/// `4.1 KiB`.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

impl std::fmt::Display for NodeInfo {
    /// One line: `float32 [40, 30], chunks [10, 10], codecs bytes, zstd; 12 of 12 chunks
    /// stored, 4.1 KiB`, or `group`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(a) = self.array() else {
            return write!(f, "group (zarr v{})", self.zarr_format);
        };
        write!(f, "{} {:?}, chunks {:?}", a.data_type, a.shape, a.chunks)?;
        if let Some(s) = &a.shards {
            write!(f, " in shards {s:?}")?;
        }
        let unit = if a.shards.is_some() {
            "shards"
        } else {
            "chunks"
        };
        write!(
            f,
            ", codecs {}; {} of {} {unit} stored, {}",
            a.codecs.join(", "),
            a.chunks_stored,
            a.chunks_total,
            human_bytes(a.stored_bytes)
        )?;
        if let Some(why) = &a.unreadable {
            // The first clause says what; the JSON keeps the advice that follows.
            let what = why.split("; ").next().unwrap_or(why);
            let what = what.strip_prefix("unsupported: ").unwrap_or(what);
            write!(f, " (zarrbuf cannot read it: {what})")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Hierarchy {
    /// The tree `zarrbuf info` prints: one line per node, children indented under their
    /// group.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let title = label(&self.location, &self.path);
        let rest: Vec<&NodeInfo> = match self.nodes.first() {
            Some(root) if root.path == self.path => {
                write!(f, "{title}: {root}")?;
                self.nodes[1..].iter().collect()
            }
            _ => {
                write!(f, "{title}: no group metadata at this path")?;
                self.nodes.iter().collect()
            }
        };
        if self.consolidated {
            write!(f, " [consolidated metadata]")?;
        }
        writeln!(f)?;
        // Each node's parent is its nearest listed ancestor (else the listed path).
        let parent_of = |path: &str| -> String {
            let mut p = path;
            while let Some((up, _)) = p.rsplit_once('/') {
                if rest.iter().any(|n| n.path == up) {
                    return up.to_string();
                }
                p = up;
            }
            self.path.clone()
        };
        let mut children: BTreeMap<String, Vec<&NodeInfo>> = BTreeMap::new();
        for n in &rest {
            children.entry(parent_of(&n.path)).or_default().push(n);
        }
        fn draw(
            f: &mut std::fmt::Formatter<'_>,
            children: &BTreeMap<String, Vec<&NodeInfo>>,
            parent: &str,
            indent: &str,
        ) -> std::fmt::Result {
            let Some(list) = children.get(parent) else {
                return Ok(());
            };
            for (i, n) in list.iter().enumerate() {
                let last = i + 1 == list.len();
                let name = n
                    .path
                    .strip_prefix(parent)
                    .map(|r| r.trim_start_matches('/'))
                    .unwrap_or(&n.path);
                writeln!(
                    f,
                    "{indent}{} {name}: {n}",
                    if last { "└──" } else { "├──" }
                )?;
                let deeper = format!("{indent}{}", if last { "    " } else { "│   " });
                draw(f, children, &n.path, &deeper)?;
            }
            Ok(())
        }
        draw(f, &children, &self.path, "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(4200), "4.1 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
