//! zarr-python's data types that zarrs 0.23 does not read, registered with zarrs as data type
//! plugins (one file per type), and the v2 structured-dtype fallback used when opening.
//!
//! - v2 `<M8[unit]` / `<m8[unit]` (numpy datetime64 / timedelta64, every unit and scale):
//!   zarrs knows them only by their v3 names (`numpy.datetime64`, `numpy.timedelta64`);
//! - `null_terminated_bytes` (numpy `S{n}`, v2 `|S{n}`) and `raw_bytes` (numpy `V{n}`, as
//!   zarr-python 3 names it in v3);
//! - `struct` (zarr-python 3's v3 structured type), read as whole records of raw bytes;
//! - v2 metadata zarrs refuses as written: structured dtypes (`[["a", "<i4"], ["b", "<f8"]]`,
//!   read as raw records) and `"fill_value": null` for types whose null zarrs rejects.

mod null_terminated_bytes;
mod numpy_time_v2;
mod raw_bytes;
mod size_guard;
mod structure;
mod v2_fallback;

pub(crate) use null_terminated_bytes::NullTerminatedBytesDataType;
pub(crate) use size_guard::register as register_size_guard;
pub(crate) use structure::StructDataType;
pub(crate) use v2_fallback::v2_metadata_fallback;
