//! zarrbuf's data types as DLPack type codes, and back.

use super::abi::{DLDataType, type_code};
use crate::data_types::DataType;
use crate::errors::{Error, Result};

/// The DLPack type of a zarrbuf data type.
///
/// # Errors
/// `DataType` for raw bits, byte and UTF-32 strings, datetime64 and timedelta64: DLPack has no
/// code for them (view datetimes as `int64` with [`crate::NDBuffer::with_type`] first).
///
/// ```
/// use zarrbuf::{DataType, dlpack::{DLDataType, dlpack_dtype, type_code}};
/// assert_eq!(dlpack_dtype(DataType::Complex64)?, DLDataType { code: type_code::COMPLEX, bits: 64, lanes: 1 });
/// assert!(dlpack_dtype(DataType::RawBits(3)).is_err());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn dlpack_dtype(dtype: DataType) -> Result<DLDataType> {
    use type_code::*;
    let code = match dtype {
        DataType::Bool => BOOL,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => INT,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => UINT,
        DataType::Float16 | DataType::Float32 | DataType::Float64 => FLOAT,
        DataType::BFloat16 => BFLOAT,
        DataType::Complex64 | DataType::Complex128 => COMPLEX,
        other => {
            return Err(Error::DataType(format!(
                "{other} has no DLPack data type (DLPack knows bool, signed and unsigned \
                 integers, float16/32/64, bfloat16 and complex64/128); view the elements as \
                 another type of the same size with NDBuffer::with_type to export them"
            )));
        }
    };
    Ok(DLDataType {
        code,
        bits: (dtype.size() * 8) as u8,
        lanes: 1,
    })
}

/// The zarrbuf data type of a DLPack type.
///
/// # Errors
/// `DataType` for lanes other than 1 and for codes and widths zarrbuf has no type for.
///
/// ```
/// use zarrbuf::{DataType, dlpack::{DLDataType, dtype_from_dlpack, type_code}};
/// let t = DLDataType { code: type_code::BFLOAT, bits: 16, lanes: 1 };
/// assert_eq!(dtype_from_dlpack(t)?, DataType::BFloat16);
/// assert!(dtype_from_dlpack(DLDataType { lanes: 4, ..t }).is_err());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn dtype_from_dlpack(t: DLDataType) -> Result<DataType> {
    use type_code::*;
    if t.lanes != 1 {
        return Err(Error::DataType(format!(
            "DLPack vector type with {} lanes; zarrbuf reads scalar types (1 lane) only",
            t.lanes
        )));
    }
    Ok(match (t.code, t.bits) {
        (BOOL, 8) => DataType::Bool,
        (INT, 8) => DataType::Int8,
        (INT, 16) => DataType::Int16,
        (INT, 32) => DataType::Int32,
        (INT, 64) => DataType::Int64,
        (UINT, 8) => DataType::UInt8,
        (UINT, 16) => DataType::UInt16,
        (UINT, 32) => DataType::UInt32,
        (UINT, 64) => DataType::UInt64,
        (FLOAT, 16) => DataType::Float16,
        (FLOAT, 32) => DataType::Float32,
        (FLOAT, 64) => DataType::Float64,
        (BFLOAT, 16) => DataType::BFloat16,
        (COMPLEX, 64) => DataType::Complex64,
        (COMPLEX, 128) => DataType::Complex128,
        (code, bits) => {
            return Err(Error::DataType(format!(
                "DLPack type code {code} with {bits} bits has no zarrbuf data type"
            )));
        }
    })
}
