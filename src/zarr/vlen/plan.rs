//! Which arrays hold variable-length elements zarrbuf reads, and the units of a read of
//! them: zarr v3 `string` (`vlen-utf8`) and `variable_length_bytes` (`vlen-bytes`), v2 `|O`
//! object arrays with the `VLenUTF8` or `VLenBytes` filter, sharded or not, behind any
//! bytes-to-bytes codecs (compressors, checksums), after transposes (v2 F order).

use crate::data_types::ByteOrder;
use crate::data_types::VarLenKind;
use crate::errors::{Error, Result};
use crate::zarr::{
    ChainPlan, EncodedLayout, UnitPlan, UnitSource, codec_names, inner_chain, transpose_order,
};
use std::ops::Range;
use std::sync::Arc;
use zarrs::array::codec::{VlenBytesCodec, VlenUtf8Codec, VlenV2Codec};
use zarrs::array::data_type::{BytesDataType, StringDataType};
use zarrs::array::{Array, ArrayShardedExt, CodecChain};

/// How to read a variable-length array: the kind of its elements, the units of a request
/// and the bytes of its fill value.
pub(crate) struct VlenPlan {
    /// UTF-8 strings or byte strings.
    pub kind: VarLenKind,
    /// The chunks (or inner chunks) of the request; their chain runs the bytes-to-bytes
    /// codecs, and [`super::scan`] does the rest. Its layout's `order` says where each
    /// element of a chunk is stored (transposed chunks, e.g. v2 arrays in F order).
    pub units: UnitPlan,
    /// What a missing chunk's elements read as: the array's fill value (`""` for a v3
    /// `string` array by default; a v2 object array's `null` or `0` read as `""` too).
    pub fill: Vec<u8>,
}

/// The kind of a variable-length array's elements, or `None` for arrays of fixed-size
/// elements (which [`crate::ArrayReadExt`] reads).
pub(crate) fn vlen_kind<S: ?Sized>(array: &Array<S>) -> Option<VarLenKind> {
    let dt = array.data_type();
    if dt.downcast_ref::<BytesDataType>().is_some() {
        return Some(VarLenKind::Bytes);
    }
    dt.downcast_ref::<StringDataType>()?;
    // v2 `|O` arrays are all `string` to zarrs; the filter says what they hold.
    let a2b = vlen_codec_chain(array)
        .map(|c| c.array_to_bytes_codec().clone())
        .ok()?;
    if a2b.as_any().is::<VlenBytesCodec>() {
        Some(VarLenKind::Bytes)
    } else {
        Some(VarLenKind::Utf8)
    }
}

/// The chain that encodes one unit (a chunk, or a shard's inner chunk).
fn vlen_codec_chain<S: ?Sized>(array: &Array<S>) -> std::result::Result<Arc<CodecChain>, String> {
    if array.is_exclusively_sharded() {
        inner_chain(array)
    } else {
        Ok(array.codecs())
    }
}

/// The kind of a variable-length array's elements and the plan of one unit's chain (its
/// bytes-to-bytes codecs, and where each element is stored): `Unsupported` for arrays of
/// fixed-size elements and for variable-length encodings other than numcodecs' (zarrs' own
/// `vlen`, `vlen-array`), or with array-to-array codecs other than transposes in front.
pub(crate) fn vlen_chain<S: ?Sized>(array: &Array<S>) -> Result<(VarLenKind, ChainPlan)> {
    let path = array.path().to_string();
    let Some(kind) = vlen_kind(array) else {
        let name = array
            .data_type()
            .name_v3()
            .map_or_else(|| "unnamed".into(), |n| n.into_owned());
        return Err(Error::DataType(format!(
            "array {path} has the data type {name}, not a variable-length one (string, \
             variable_length_bytes, or a v2 object array with VLenUTF8/VLenBytes); read it \
             into an NDBuffer with read_as::<NDBuffer> or read (ArrayReadExt)"
        )));
    };
    let chain = vlen_codec_chain(array).map_err(|e| Error::zarr(path.clone(), e, None))?;
    let a2b = chain.array_to_bytes_codec();
    let numcodecs = a2b.as_any().is::<VlenUtf8Codec>()
        || a2b.as_any().is::<VlenBytesCodec>()
        || a2b.as_any().is::<VlenV2Codec>();
    // Transposes (v2 object arrays in F order) only reorder the elements of a chunk.
    let order = transpose_order(&chain, array.dimensionality())?;
    let Some(order) = order.filter(|_| numcodecs) else {
        return Err(Error::Unsupported(format!(
            "array {path} encodes its variable-length elements with the codecs {:?}; zarrbuf \
             reads the vlen-utf8 and vlen-bytes encodings (numcodecs' VLenUTF8 and VLenBytes), \
             after transposes only and with only bytes-to-bytes codecs (compressors, \
             checksums) after them. Read it with zarrs or zarr-python",
            codec_names(&chain)
        )));
    };
    let plan = ChainPlan {
        chain,
        // Elements have no byte order; the order is where each one is stored.
        layout: EncodedLayout {
            order,
            endian: ByteOrder::native(),
        },
    };
    Ok((kind, plan))
}

/// Plans a read of `subset` (checked against the array's shape by the caller) of a
/// variable-length array (see [`vlen_chain`] for what is refused).
pub(crate) fn plan_vlen<S: ?Sized>(array: &Array<S>, subset: &[Range<u64>]) -> Result<VlenPlan> {
    let path = array.path().to_string();
    let (kind, chain) = vlen_chain(array)?;
    let (source, grid) = if array.is_exclusively_sharded() {
        (UnitSource::Subchunk, array.subchunk_grid())
    } else {
        (UnitSource::Chunk, array.chunk_grid().clone())
    };
    let units = crate::zarr::plan::units_in(&grid, subset)
        .map_err(|e| Error::zarr(path.clone(), e, None))?;
    Ok(VlenPlan {
        kind,
        units: UnitPlan {
            source,
            chain: Some(chain),
            units,
        },
        fill: array.fill_value().as_ne_bytes().to_vec(),
    })
}
