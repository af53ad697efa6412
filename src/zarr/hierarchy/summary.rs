//! What a hierarchy listing says of an array: its layout as zarrs opens it, or, when zarrs
//! does not, as its metadata was written and why zarrbuf cannot read it.

use super::nodes::ArraySummary;
use crate::zarr::array::codec_list;
use crate::zarr::{data_type_of, fill_bytes};
use serde_json::Value as Json;
use std::sync::Arc;
use zarrs::array::{Array, ArrayMetadata, ArrayShardedExt};
use zarrs::storage::store::MemoryStore;

/// What zarrbuf makes of an array's metadata document.
pub(super) fn summarize(path: &str, doc: &Json, v2: bool) -> ArraySummary {
    crate::zarr::plugins::codecs::register_zarrs_overrides();
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
        crate::zarr::new_array(store.clone(), &node, m)
            .map_err(|e| crate::zarr::open::describe_open_error(&e))
    });
    let built = match built {
        Err(why) if v2 => {
            let bytes = serde_json::to_vec(doc).unwrap_or_default();
            match crate::zarr::plugins::dtypes::v2_metadata_fallback(&bytes) {
                Some(Ok(m)) => crate::zarr::new_array(store, &node, m)
                    .map_err(|e| crate::zarr::open::describe_open_error(&e)),
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
    let varlen = crate::zarr::describe_varlen(array).ok();
    let (data_type, fill_value, unreadable) = match (data_type_of(array), varlen) {
        (Ok(t), _) => (t.to_string(), t.format_value(&fill_bytes(array)), None),
        // Variable-length strings and bytes read through their own route.
        (Err(_), Some(v)) => (
            crate::zarr::varlen_zarr_name(v.data_type).to_string(),
            v.fill_value,
            None,
        ),
        (Err(e), None) => (
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
