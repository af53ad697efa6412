//! An array's data type in zarrbuf's terms (checked against its chunk shapes), and its fill
//! value's bytes.

use crate::data_types::{ByteOrder, DataType, TimeUnit};
use crate::errors::{Error, Result};
use crate::zarr::plugins::dtypes::{NullTerminatedBytesDataType, StructDataType};
use zarrs::array::data_type::{
    FixedLengthUTF32DataType, NumpyDateTime64DataType, NumpyTimeDelta64DataType,
};
use zarrs::array::{Array, ArrayMetadata, ArrayShardedExt};
use zarrs::metadata_ext::data_type::NumpyTimeUnit;
use zarrs::plugin::ExtensionName;

fn time_unit(u: NumpyTimeUnit) -> TimeUnit {
    match u {
        NumpyTimeUnit::Generic => TimeUnit::Generic,
        NumpyTimeUnit::Year => TimeUnit::Year,
        NumpyTimeUnit::Month => TimeUnit::Month,
        NumpyTimeUnit::Week => TimeUnit::Week,
        NumpyTimeUnit::Day => TimeUnit::Day,
        NumpyTimeUnit::Hour => TimeUnit::Hour,
        NumpyTimeUnit::Minute => TimeUnit::Minute,
        NumpyTimeUnit::Second => TimeUnit::Second,
        NumpyTimeUnit::Millisecond => TimeUnit::Millisecond,
        NumpyTimeUnit::Microsecond => TimeUnit::Microsecond,
        NumpyTimeUnit::Nanosecond => TimeUnit::Nanosecond,
        NumpyTimeUnit::Picosecond => TimeUnit::Picosecond,
        NumpyTimeUnit::Femtosecond => TimeUnit::Femtosecond,
        NumpyTimeUnit::Attosecond => TimeUnit::Attosecond,
    }
}

/// The `endian` of every `bytes` codec in a v3 chain, sharding included.
fn bytes_endians(codecs: &[serde_json::Value], out: &mut Vec<String>) {
    for c in codecs {
        let cfg = c.get("configuration");
        match c.get("name").and_then(|n| n.as_str()) {
            Some("bytes") => {
                if let Some(e) = cfg.and_then(|c| c.get("endian")).and_then(|e| e.as_str()) {
                    out.push(e.to_string());
                }
            }
            Some("sharding_indexed") => {
                if let Some(inner) = cfg.and_then(|c| c.get("codecs")).and_then(|c| c.as_array()) {
                    bytes_endians(inner, out);
                }
            }
            _ => {}
        }
    }
}

/// zarrbuf's data type for a zarrs array, checked to be one zarrbuf can read and write
/// (worked out afresh: `facts.rs` memoizes it as `data_type_of`):
/// `Unsupported` for variable-length types, `Zarr` for chunks too large to exist.
///
/// Variable-length strings and bytes (zarr `string`, `bytes`; v2 `|O` with `vlen-utf8`,
/// `vlen-bytes`, `json2`, `msgpack2`, `pickle`) have no fixed-size element, which every
/// zarrbuf buffer (host, pinned, device) is made of: the error says how to read them.
///
/// Every read and write starts here, so this is also where chunk shapes zarrs would panic on
/// are refused (see [`check_chunk_shapes`]): a chunk whose size in bytes does not fit 64 bits
/// (zarrs multiplies it unchecked), or inner chunks of a shard with the wrong number of
/// dimensions.
pub(super) fn checked_data_type<S: ?Sized>(array: &Array<S>) -> Result<DataType> {
    let dtype = element_type(array)?;
    check_chunk_shapes(array, dtype)?;
    Ok(dtype)
}

/// Refuses chunk shapes (of the first chunk, and of a shard's inner chunks) that no store
/// can hold or that do not fit the array: inner chunks with another number of dimensions
/// than the array (zarrs builds their grid with an `expect`) or that do not evenly divide the
/// shard, chunks whose size in bytes overflows a `u64`, and shards whose encoded-size bound
/// in zarrs overflows one.
fn check_chunk_shapes<S: ?Sized>(array: &Array<S>, dtype: DataType) -> Result<()> {
    let zero = vec![0u64; array.dimensionality()];
    let shapes = [
        array.chunk_shape(&zero).ok().map(|s| s.to_vec()),
        array.subchunk_shape().map(|s| s.to_vec()),
    ];
    let damaged = |why: String| {
        Err(Error::zarr(
            array.path().as_str(),
            format!(
                "{why}; the metadata is damaged (fix the chunk shape in its zarr.json or .zarray)"
            ),
            None,
        ))
    };
    // The sharding codec sees a shard after the array-to-array codecs before it (a transpose
    // reorders its axes), and its inner chunk shape is in that order.
    let sharded = shapes[0].as_ref().and_then(|shard| {
        array
            .codecs()
            .array_to_array_codecs()
            .iter()
            .try_fold(shard.clone(), |s, c| {
                c.encoded_shape(&s).ok().map(|s| s.to_vec())
            })
    });
    if let (Some(shard), Some(inner)) = (&sharded, &shapes[1])
        && shard.len() == inner.len()
    {
        let dims = |s: &[std::num::NonZeroU64]| s.iter().map(|n| n.get()).collect::<Vec<_>>();
        // zarrs' partial shard decoder refuses these; its whole-shard decoder did not.
        if shard.iter().zip(inner).any(|(s, i)| s.get() % i.get() != 0) {
            return damaged(format!(
                "its inner chunks of shape {:?} do not evenly divide its shards of shape {:?}",
                dims(inner),
                dims(shard)
            ));
        }
        // zarrs bounds an encoded shard by its inner chunks' count times the encoded bound
        // of a whole shard's bytes (unchecked): refuse shards for which that overflows, with
        // room for any codec's overhead (at most the size again, plus 64 KiB).
        let shard_bytes = shard
            .iter()
            .try_fold(dtype.size() as u64, |n, d| n.checked_mul(d.get()));
        let inner_chunks = shard
            .iter()
            .zip(inner)
            .try_fold(1u64, |n, (s, i)| n.checked_mul(s.get().div_ceil(i.get())));
        let bound = shard_bytes
            .and_then(|b| b.checked_mul(2))
            .and_then(|b| b.checked_add(1 << 16))
            .zip(inner_chunks)
            .and_then(|(b, n)| b.checked_mul(n));
        if bound.is_none() {
            return damaged(format!(
                "its shards of shape {:?} of {dtype} split into inner chunks of shape {:?} are \
                 too large and too many to size (zarrs bounds a shard's encoded size by their \
                 count times the shard's size, which overflows 64 bits); use smaller shards",
                dims(shard),
                dims(inner)
            ));
        }
    }
    for (what, shape) in ["chunks", "inner chunks"].iter().zip(shapes) {
        let Some(shape) = shape else { continue };
        let dims: Vec<u64> = shape.iter().map(|n| n.get()).collect();
        if dims.len() != array.dimensionality() {
            return damaged(format!(
                "its {what} of shape {dims:?} have {} dimensions but the array has {}",
                dims.len(),
                array.dimensionality()
            ));
        }
        let bytes = dims
            .iter()
            .try_fold(dtype.size() as u64, |n, &d| n.checked_mul(d));
        if bytes.is_none() {
            return damaged(format!(
                "its {what} of shape {dims:?} of {dtype} would hold more than 2^64 bytes each"
            ));
        }
    }
    Ok(())
}

/// zarrbuf's data type for a zarrs array's elements (see [`checked_data_type`]).
fn element_type<S: ?Sized>(array: &Array<S>) -> Result<DataType> {
    let dt = array.data_type();
    let name = dt
        .name_v3()
        .map(|n| n.into_owned())
        .unwrap_or_else(|| "unnamed".into());
    let Some(size) = dt.fixed_size() else {
        return Err(Error::Unsupported(format!(
            "array {} has the variable-length data type {name}; an NDBuffer holds fixed-size \
             elements. Read it into a VarLenBuffer (Arrow's layout) with \
             read_as::<VarLenBuffer> (ArrayReadExt; from Python, zarrbuf.open(...).read() \
             gives strings or bytes)",
            array.path()
        )));
    };
    if let Some(t) = dt.downcast_ref::<NumpyDateTime64DataType>() {
        return Ok(DataType::DateTime64(
            time_unit(t.unit),
            t.scale_factor.get(),
        ));
    }
    if let Some(t) = dt.downcast_ref::<NumpyTimeDelta64DataType>() {
        return Ok(DataType::TimeDelta64(
            time_unit(t.unit),
            t.scale_factor.get(),
        ));
    }
    if dt.downcast_ref::<FixedLengthUTF32DataType>().is_some() {
        return Ok(DataType::FixedUtf32(size / 4));
    }
    if dt.downcast_ref::<NullTerminatedBytesDataType>().is_some() {
        return Ok(DataType::FixedBytes(size));
    }
    if let Some(s) = dt.downcast_ref::<StructDataType>() {
        // Records are read as raw bytes, which no zarrbuf path byte-swaps field by field.
        let native = match ByteOrder::native() {
            ByteOrder::Little => "little",
            ByteOrder::Big => "big",
        };
        let mut endians = Vec::new();
        if let ArrayMetadata::V3(m) = array.metadata() {
            let codecs = serde_json::to_value(&m.codecs).unwrap_or_default();
            bytes_endians(
                codecs.as_array().map_or(&[][..], Vec::as_slice),
                &mut endians,
            );
        }
        if s.has_multi_byte_fields() && endians.iter().any(|e| e != native) {
            return Err(Error::Unsupported(format!(
                "array {} holds struct records stored {} endian; zarrbuf reads struct records \
                 as raw bytes in the stored order and needs them {native} endian (zarr-python's \
                 default) — read this array with zarr-python",
                array.path(),
                endians.join("/")
            )));
        }
        return Ok(DataType::RawBits(size));
    }
    match name.parse::<DataType>() {
        Ok(t) if t.size() == size => Ok(t),
        _ if size > 0 => Ok(DataType::RawBits(size)),
        _ => Err(Error::Unsupported(format!(
            "array {} has the data type {name} with zero-sized elements",
            array.path()
        ))),
    }
}

/// The fill value's bytes (one element, native order).
pub(crate) fn fill_bytes<S: ?Sized>(array: &Array<S>) -> Vec<u8> {
    array.fill_value().as_ne_bytes().to_vec()
}
