//! The one check of a read's output or a write's data against the array and the subset, so
//! that sync and async operations report the same error for the same mistake.

use crate::buffer::NDBuffer;
use crate::data_types::DataType;
use crate::errors::{Error, Result};
use crate::zarr::{check_subset, data_type_of};
use std::ops::Range;
use zarrs::array::Array;

/// What the checked NDBuffer is to the operation (it names it in messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// The output of a read (`read_into`).
    Output,
    /// The data of a write.
    Data,
}

/// Checks `target` for a read into (or a write from) `subset` of `array`: the subset lies
/// inside the array (`ShapeMismatch` for another number of dimensions, `OutOfBounds` for a
/// range outside it), the array has a data type zarrbuf handles (`Unsupported`, `Zarr`),
/// `target` holds the array's data type (`DataType`) and has the subset's shape
/// (`ShapeMismatch`). Returns the array's data type.
pub(super) fn check_target<S: ?Sized>(
    array: &Array<S>,
    subset: &[Range<u64>],
    target: &NDBuffer,
    role: Role,
) -> Result<DataType> {
    check_subset(array.shape(), subset, array.path().as_str())?;
    let dtype = data_type_of(array)?;
    if target.dtype() != dtype {
        return Err(Error::DataType(match role {
            Role::Output => format!(
                "array {} holds {dtype} but the output NDBuffer holds {}",
                array.path(),
                target.dtype()
            ),
            Role::Data => format!(
                "array {} holds {dtype} but the data is {}; convert it with astype",
                array.path(),
                target.dtype()
            ),
        }));
    }
    let shape = subset_shape(subset);
    if target.shape() != shape.as_slice() {
        let what = match role {
            Role::Output => "the output NDBuffer",
            Role::Data => "the data",
        };
        return Err(Error::ShapeMismatch(format!(
            "the subset has shape {shape:?} but {what} has shape {:?}",
            target.shape()
        )));
    }
    Ok(dtype)
}

/// The shape of `subset` (one extent per range).
pub(super) fn subset_shape(subset: &[Range<u64>]) -> Vec<usize> {
    subset.iter().map(|r| (r.end - r.start) as usize).collect()
}
