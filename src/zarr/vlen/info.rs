//! Which arrays hold variable-length elements (zarr v3 `string` and
//! `variable_length_bytes`, v2 `|O` with the `VLenUTF8` / `VLenBytes` filters), and how
//! `zarrbuf info` describes them ([`VarLenInfo`]).

use super::plan::vlen_kind;
use crate::data_types::VarLenKind;
use crate::errors::{Error, Result};
use crate::zarr::array::codec_list;
use zarrs::array::{Array, ArrayMetadata, ArrayShardedExt};

/// The zarr v3 data type name zarr-python writes for `kind`.
pub(crate) fn zarr_name(kind: VarLenKind) -> &'static str {
    match kind {
        VarLenKind::Utf8 => "string",
        VarLenKind::Bytes => "variable_length_bytes",
    }
}

/// The kind of `array`'s variable-length elements, or an error saying it holds fixed-size
/// elements.
pub(crate) fn require_vlen<S: ?Sized>(array: &Array<S>) -> Result<VarLenKind> {
    vlen_kind(array).ok_or_else(|| {
        let name = array
            .data_type()
            .name_v3()
            .map(|n| n.into_owned())
            .unwrap_or_else(|| "unnamed".into());
        Error::DataType(format!(
            "array {} holds the fixed-size data type {name}, not variable-length strings or \
             bytes; read and write it with NDBuffers (read, write)",
            array.path()
        ))
    })
}

/// What `zarrbuf info` prints for an array of variable-length strings or bytes (the twin of
/// [`ArrayInfo`](crate::ArrayInfo), whose data type is always a fixed-size one).
///
/// ```
/// use std::sync::Arc;
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
/// let array = ArrayBuilder::new(vec![10], vec![4], data_type::string(), "")
///     .build(Arc::new(MemoryStore::new()), "/names")
///     .map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// let info = zarrbuf::describe_varlen(&array)?;
/// assert_eq!(info.data_type, zarrbuf::VarLenKind::Utf8);
/// assert_eq!(info.chunks, vec![4]);
/// assert_eq!(info.codecs, vec!["vlen-utf8"]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct VarLenInfo {
    /// 2 or 3.
    pub zarr_format: u8,
    /// The array shape.
    pub shape: Vec<u64>,
    /// Chunk shape (the shard shape for sharded arrays).
    pub chunks: Vec<u64>,
    /// Inner chunk shape of sharded arrays.
    pub inner_chunks: Option<Vec<u64>>,
    /// UTF-8 strings (zarr `string`) or byte strings (zarr `variable_length_bytes`).
    pub data_type: VarLenKind,
    /// The data type as the metadata names it: `string`, `variable_length_bytes` (zarrs
    /// also writes `bytes`), or for v2 `|O` with its filter (`|O vlen-utf8`).
    pub stored_type: String,
    /// Codec names in encoding order (inner codecs of shards in brackets).
    pub codecs: Vec<String>,
    /// The fill value, quoted (bytes that are not UTF-8 escaped as `\xNN`).
    pub fill_value: String,
}

/// What an array's elements are when they are of variable length (strings or byte
/// strings), `None` for arrays of fixed-size elements: which output kind reads it,
/// `read_as::<VarLenBuffer>` or `read_as::<NDBuffer>` (see [`crate::ReadOutput`]). Sync and
/// async arrays alike.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::VarLenKind;
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
///
/// let store = Arc::new(MemoryStore::new());
/// let err = |e: &dyn std::fmt::Display| zarrbuf::Error::InvalidArgument(e.to_string());
/// let names = ArrayBuilder::new(vec![4], vec![2], data_type::string(), "")
///     .build(store.clone(), "/names").map_err(|e| err(&e))?;
/// let numbers = ArrayBuilder::new(vec![4], vec![2], data_type::float32(), 0.0f32)
///     .build(store, "/numbers").map_err(|e| err(&e))?;
/// assert_eq!(zarrbuf::varlen_kind(&names), Some(VarLenKind::Utf8));
/// assert_eq!(zarrbuf::varlen_kind(&numbers), None);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn varlen_kind<S: ?Sized>(array: &Array<S>) -> Option<VarLenKind> {
    super::plan::vlen_kind(array)
}

/// Describes an array of variable-length strings or bytes; `DataType` error for arrays of
/// fixed-size elements (describe those with [`describe`](crate::describe)).
pub fn describe_varlen<S: ?Sized>(array: &Array<S>) -> Result<VarLenInfo> {
    let data_type = require_vlen(array)?;
    let zero = vec![0u64; array.dimensionality()];
    let chunks = array
        .chunk_shape(&zero)
        .map(|s| s.iter().map(|n| n.get()).collect())
        .unwrap_or_default();
    let inner_chunks = array
        .subchunk_shape()
        .map(|s| s.iter().map(|n| n.get()).collect());
    let (zarr_format, stored_type) = match array.metadata() {
        ArrayMetadata::V2(m) => {
            let filter = m
                .filters
                .iter()
                .flatten()
                .map(|f| f.id().to_string())
                .next()
                .unwrap_or_else(|| "no filter".into());
            (2, format!("|O {filter}"))
        }
        ArrayMetadata::V3(m) => (3, m.data_type.name().to_string()),
    };
    Ok(VarLenInfo {
        zarr_format,
        shape: array.shape().to_vec(),
        chunks,
        inner_chunks,
        data_type,
        stored_type,
        codecs: codec_list(array),
        fill_value: format_fill(array.fill_value().as_ne_bytes()),
    })
}

/// A variable-length fill value as a quoted string (Rust's escapes); bytes that are not
/// UTF-8 escaped as `\xNN`.
fn format_fill(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => format!("{text:?}"),
        Err(_) => format!("\"{}\"", bytes.escape_ascii()),
    }
}

/// The metadata zarr-python reads for a v3 array of byte strings that zarrs built: zarrs
/// names the data type `bytes` and writes its fill value as a list of numbers, which
/// zarr-python 3 refuses; zarr-python's own form is `variable_length_bytes` with a base64
/// fill value (zarrs reads both). `None` for every other array.
pub(crate) fn zarr_python_bytes_metadata<S: ?Sized>(
    array: &Array<S>,
) -> Option<zarrs::array::ArrayMetadata> {
    use base64::Engine;
    use zarrs_metadata::v3::{FillValueMetadataV3, MetadataV3};
    if vlen_kind(array) != Some(VarLenKind::Bytes) {
        return None;
    }
    let ArrayMetadata::V3(m) = array.metadata() else {
        return None;
    };
    let mut m = m.clone();
    let fill = base64::prelude::BASE64_STANDARD.encode(array.fill_value().as_ne_bytes());
    m.data_type = MetadataV3::new("variable_length_bytes");
    m.fill_value = FillValueMetadataV3::from(fill.as_str());
    Some(ArrayMetadata::V3(m))
}

/// Why a decoded chunk of a `string` array is damaged: an element that is not valid UTF-8
/// (zarrs' decoder does not look). `None` for valid chunks and for other arrays.
pub(crate) fn invalid_utf8<S: ?Sized>(
    array: &Array<S>,
    decoded: &zarrs::array::ArrayBytes<'_>,
) -> Option<String> {
    if vlen_kind(array) != Some(VarLenKind::Utf8) {
        return None;
    }
    let zarrs::array::ArrayBytes::Variable(v) = decoded else {
        return None;
    };
    let (offsets, values) = (&**v.offsets(), &v.bytes()[..]);
    offsets.windows(2).enumerate().find_map(|(i, w)| {
        let e = std::str::from_utf8(values.get(w[0]..w[1])?).err()?;
        Some(format!(
            "element {i} is not valid UTF-8 ({e}); the array holds UTF-8 strings"
        ))
    })
}
