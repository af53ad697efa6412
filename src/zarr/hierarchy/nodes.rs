//! What a hierarchy listing holds — the nodes, each a group or an array with its summary — and
//! the tree `zarrbuf info` prints of it.

use crate::stores::label;
use serde::Serialize;
use std::collections::BTreeMap;

/// The groups and arrays under a node of a store, as [`list_hierarchy`](crate::list_hierarchy) finds them. Its
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
