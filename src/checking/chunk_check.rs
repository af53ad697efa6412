//! Checking one stored (unsharded) chunk from its encoded bytes, as the fetch stage hands
//! them over: a header checked against the chunk's size first where zarrs would decode
//! unbounded, then the decode itself (a variable-length chunk as a read decodes it), then
//! the utf-8 of strings. The stored size is checked before (`check_chunks.rs`).

use super::finding::{Finding, Problem, guarded};
use super::vlen_check::VlenCheck;
use crate::stores::DynArray;
use std::borrow::Cow;
use zarrs::array::{ArrayToBytesCodecTraits, CodecOptions};

/// The findings of the chunk at `indices` (stored under `key`) whose encoded bytes are
/// `encoded`; a variable-length chunk is decoded as a read decodes it (`vlen`).
pub(super) fn check_chunk(
    array: &DynArray,
    key: &str,
    indices: &[u64],
    encoded: Vec<u8>,
    vlen: Option<&VlenCheck>,
) -> Vec<Finding> {
    match decode_chunk(array, indices, encoded, vlen) {
        Ok(()) => Vec::new(),
        Err((problem, detail)) => vec![Finding {
            key: key.to_string(),
            inner: None,
            problem,
            detail,
        }],
    }
}

/// Decodes `encoded`, the chunk at `indices`; why it fails.
fn decode_chunk(
    array: &DynArray,
    indices: &[u64],
    encoded: Vec<u8>,
    vlen: Option<&VlenCheck>,
) -> Result<(), (Problem, String)> {
    let shape = array
        .chunk_shape(indices)
        .map_err(|e| (Problem::Undecodable, e.to_string()))?;
    if let Some(vlen) = vlen {
        return vlen.check(array, encoded, &shape);
    }
    let codecs = array.codecs();
    let (data_type, fill_value) = (array.data_type(), array.fill_value());
    if crate::zarr::has_unbounded_codec(&codecs) {
        // zarrs would decode this chunk unbounded: check its header against its size first.
        crate::zarr::precheck_chunk(&codecs, &shape, data_type, fill_value, &encoded)
            .map_err(|why| (Problem::WrongSize, why))?;
    }
    let options = CodecOptions::default().with_concurrent_target(1);
    // As zarrs' `retrieve_chunk` decodes a stored chunk (a panic on damaged bytes is a
    // finding, `guarded`).
    let decoded = guarded(|| {
        codecs
            .decode(Cow::Owned(encoded), &shape, data_type, fill_value, &options)
            .map(|bytes| bytes.into_owned())
            .map_err(zarrs::array::ArrayError::CodecError)
    })?;
    match crate::zarr::invalid_utf8(array, &decoded) {
        Some(why) => Err((Problem::Undecodable, why)),
        None => Ok(()),
    }
}
