//! Checking one unit (a chunk, or a shard's inner chunk) of a variable-length array the way
//! a read decodes it (`zarr::UnitCodec`): trailing bytes after the last element, a cut last
//! element or a wrong count are findings exactly when a read refuses the unit, and zarrs'
//! own variable-length decoder (which panics on some of them) never sees damaged bytes.

use super::finding::{Problem, problem_of};
use crate::data_types::VarLenKind;
use crate::stores::DynArray;
use crate::zarr::{ChainPlan, UnitCodec, UnitFault, vlen_chain, vlen_kind};
use std::num::NonZeroU64;
use zarrs::array::{ArrayError, CodecOptions};

/// How the units of one variable-length array decode.
pub(super) struct VlenCheck {
    kind: VarLenKind,
    chain: ChainPlan,
}

impl VlenCheck {
    /// The check of `array`'s units, or `None` for arrays of fixed-size elements and for
    /// variable-length encodings reads refuse (those are decoded by zarrs as before).
    pub(super) fn of(array: &DynArray) -> Option<Self> {
        vlen_kind(array)?;
        let (kind, chain) = vlen_chain(array).ok()?;
        Some(VlenCheck { kind, chain })
    }

    /// Decodes `encoded`, a unit of `shape`, as a read would; the finding when it fails.
    pub(super) fn check(
        &self,
        array: &DynArray,
        encoded: Vec<u8>,
        shape: &[NonZeroU64],
    ) -> Result<(), (Problem, String)> {
        let codec = UnitCodec {
            chain: &self.chain,
            kind: self.kind,
            data_type: array.data_type(),
            fill_value: array.fill_value(),
        };
        let options = CodecOptions::default().with_concurrent_target(1);
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            codec.decode(encoded, shape, &options, None)
        }));
        match decoded {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(UnitFault::Codec(e))) => {
                let e = ArrayError::CodecError(e);
                Err((problem_of(&e), e.to_string()))
            }
            Ok(Err(UnitFault::Elements(why))) => Err((Problem::Undecodable, why)),
            Err(_) => Err((
                Problem::Undecodable,
                "a codec failed on damaged data".into(),
            )),
        }
    }
}
