//! A summary of an array's metadata, for `zarrbuf info` and for users.

use super::{data_type_of, fill_bytes};
use crate::data_types::DataType;
use crate::errors::Result;
use crate::zarr::codec_names;
use zarrs::array::{Array, ArrayMetadata, ArrayShardedExt};

/// What `zarrbuf info` prints.
///
/// ```
/// let a = zarrbuf::open("fixtures/data/v3_shard_end.zarr", "")?;
/// let info = zarrbuf::describe(&a)?;
/// assert_eq!(info.zarr_format, 3);
/// assert!(info.inner_chunks.is_some());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayInfo {
    /// 2 or 3.
    pub zarr_format: u8,
    /// The array shape.
    pub shape: Vec<u64>,
    /// Chunk shape (the shard shape for sharded arrays).
    pub chunks: Vec<u64>,
    /// Inner chunk shape of sharded arrays.
    pub inner_chunks: Option<Vec<u64>>,
    /// The data type.
    pub data_type: DataType,
    /// Codec names in encoding order (inner codecs of shards in brackets).
    pub codecs: Vec<String>,
    /// The fill value, formatted.
    pub fill_value: String,
}

/// Describes an array's metadata.
pub fn describe<S: ?Sized>(array: &Array<S>) -> Result<ArrayInfo> {
    let data_type = data_type_of(array)?;
    let zero = vec![0u64; array.dimensionality()];
    let chunks = array
        .chunk_shape(&zero)
        .map(|s| s.iter().map(|n| n.get()).collect())
        .unwrap_or_default();
    let inner_chunks = array
        .subchunk_shape()
        .map(|s| s.iter().map(|n| n.get()).collect());
    Ok(ArrayInfo {
        zarr_format: match array.metadata() {
            ArrayMetadata::V2(_) => 2,
            _ => 3,
        },
        shape: array.shape().to_vec(),
        chunks,
        inner_chunks,
        data_type,
        codecs: codec_list(array),
        fill_value: data_type.format_value(&fill_bytes(array)),
    })
}

/// Codec names in encoding order, the inner codecs of shards in brackets.
pub(crate) fn codec_list<S: ?Sized>(array: &Array<S>) -> Vec<String> {
    let mut names = codec_names(&array.codecs());
    if array.is_sharded()
        && let Ok(inner) = crate::zarr::inner_chain(array)
    {
        names.push(format!("[inner: {}]", codec_names(&inner).join(", ")));
    }
    names
}
