//! What zarrbuf needs to know of a zarrs `Array` everywhere: its data type in zarrbuf's
//! terms, its fill value's bytes, and errors that name the array and chunk.

use crate::dtype::DataType;
use crate::error::{BoxError, Error, Result};
use zarrs::array::Array;
use zarrs::plugin::ExtensionName;

/// zarrbuf's data type for a zarrs array, or `Unsupported` for variable-length types.
pub(crate) fn data_type_of<S: ?Sized>(array: &Array<S>) -> Result<DataType> {
    let dt = array.data_type();
    let name = dt
        .name_v3()
        .map(|n| n.into_owned())
        .unwrap_or_else(|| "unnamed".into());
    let Some(size) = dt.fixed_size() else {
        return Err(Error::Unsupported(format!(
            "array {} has the variable-length data type {name}; zarrbuf buffers hold fixed-size elements",
            array.path()
        )));
    };
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

/// An error about `array`, keeping `e` (zarrs' error, or a sentence) as its source.
pub(crate) fn zarr_error<S: ?Sized>(array: &Array<S>, e: impl Into<BoxError>) -> Error {
    let source: BoxError = e.into();
    Error::zarr(array.path().as_str(), source.to_string(), Some(source))
}

/// An error about one chunk of `array`, naming its indices and key; `e` is kept as the source.
pub(crate) fn chunk_error<S: ?Sized>(
    array: &Array<S>,
    indices: &[u64],
    e: impl Into<BoxError>,
) -> Error {
    let source: BoxError = e.into();
    Error::zarr(
        array.path().as_str(),
        format!(
            "chunk {indices:?} (key {}): {source}",
            array.chunk_key(indices)
        ),
        Some(source),
    )
}
