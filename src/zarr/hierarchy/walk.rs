//! The walk of a hierarchy listing: the node asked for, the nodes below it from consolidated
//! metadata or from the store's keys, and each array's stored chunks and bytes.

use super::nodes::{NodeInfo, NodeKind};
use super::source::Source;
use super::summary::summarize;
use crate::errors::{Error, Result};
use crate::stores::{METADATA_NAMES, check_key, label};
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Whether a walk adds each array's stored bytes, which costs a listing of the keys under
/// it (chunk counts come with the listing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sizes {
    /// The stored chunk counts and bytes of each array (a hierarchy listing).
    Measure,
    /// Only the nodes (the arrays under a group that `open` refuses).
    Skip,
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

/// `base` + `/` + `name` (or `name` at the root).
pub(super) fn meta_key(base: &str, name: &str) -> String {
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

/// The nodes at and under `base` (see [`list_hierarchy`](crate::list_hierarchy)) and whether they came from
/// consolidated metadata; [`Sizes::Measure`] adds the stored chunk counts and bytes of each
/// array.
pub(super) async fn walk(
    source: &dyn Source,
    location: &str,
    base: &str,
    sizes: Sizes,
) -> Result<(bool, Vec<NodeInfo>)> {
    let (mut nodes, consolidated, is_array) = base_nodes(source, base).await?;
    let root_prefix = if base.is_empty() {
        String::new()
    } else {
        format!("{base}/")
    };
    let keys = if sizes == Sizes::Measure || !(consolidated || is_array) {
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
                // Checked before any '/' is trimmed: `/abs/key` is absolute, not `abs/key`.
                check_key(rel.trim_end_matches('/'), &consolidated_in(base))?;
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
                add_v2_consolidated(map, base, &mut nodes)?;
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
) -> Result<()> {
    for (k, v) in map {
        check_key(k, &consolidated_in(base))?;
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
    Ok(())
}

/// Where consolidated metadata read at `base` came from, for errors.
fn consolidated_in(base: &str) -> String {
    format!("the consolidated metadata of the group at {base:?}")
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
/// chunk count and (with [`Sizes::Measure`]) stored bytes; parents before children.
async fn node_infos(
    source: &dyn Source,
    nodes: &BTreeMap<String, Meta>,
    stored: &HashMap<&str, u64>,
    base: &str,
    sizes: Sizes,
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
                if sizes == Sizes::Measure {
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
