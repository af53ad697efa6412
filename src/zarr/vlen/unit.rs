//! Decoding one unit of a variable-length array (a chunk, or a shard's inner chunk): its
//! bytes-to-bytes codecs (decompressors, checksums) held to a byte budget, then the element
//! check of [`super::scan`]. Reads and `check` both decode through here, so a unit a read
//! refuses (trailing bytes, a cut last element, a count that is not the chunk's) is one
//! `check` reports, and neither runs zarrs' own variable-length decoder on damaged bytes.

use super::format::{VlenIndex, scan};
use crate::data_types::VarLenKind;
use crate::zarr::ChainPlan;
use std::borrow::Cow;
use std::num::NonZeroU64;
use zarrs::array::{CodecError, CodecOptions, DataType, FillValue};

/// Why a unit does not decode: its codecs fail, or its elements are malformed.
#[derive(Debug)]
pub(crate) enum UnitFault {
    /// A bytes-to-bytes codec failed (or produced more than the budget).
    Codec(CodecError),
    /// The decoded bytes are not a valid variable-length encoding of the unit.
    Elements(String),
}

impl std::fmt::Display for UnitFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnitFault::Codec(e) => write!(f, "{e}"),
            UnitFault::Elements(why) => write!(f, "{why}"),
        }
    }
}

/// What one unit is and how to decode it: the chain's plan, the element kind, and the
/// array's data type and fill value (which zarrs' codecs are given).
pub(crate) struct UnitCodec<'a> {
    pub chain: &'a ChainPlan,
    pub kind: VarLenKind,
    pub data_type: &'a DataType,
    pub fill_value: &'a FillValue,
}

impl UnitCodec<'_> {
    /// Decodes `encoded`, a unit of `shape`, with every decoder held to `cap` bytes (where
    /// given; the process's memory otherwise), and checks its elements.
    pub(crate) fn decode(
        &self,
        encoded: Vec<u8>,
        shape: &[NonZeroU64],
        options: &CodecOptions,
        cap: Option<u64>,
    ) -> Result<(Vec<u8>, VlenIndex), UnitFault> {
        let count = shape
            .iter()
            .try_fold(1usize, |n, d| n.checked_mul(usize::try_from(d.get()).ok()?))
            .ok_or_else(|| {
                UnitFault::Elements(format!(
                    "its shape {shape:?} holds more elements than this machine can address"
                ))
            })?;
        let run = || {
            self.chain.decode_bytes(
                Cow::Owned(encoded),
                shape,
                self.data_type,
                self.fill_value,
                options,
            )
        };
        let bytes = match cap {
            Some(cap) => crate::memory_limit::with_decode_cap(cap, run),
            None => run(),
        }
        .map_err(UnitFault::Codec)?;
        let index = scan(&bytes, count, self.kind).map_err(UnitFault::Elements)?;
        Ok((bytes, index))
    }
}
