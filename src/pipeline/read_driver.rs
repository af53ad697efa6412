//! The read driver: plans a request's units, then fetches each one (through the caller's
//! fetch stage, sync or async) and decodes it on the worker that fetched it, into the staged
//! read's slots.

use super::{Produced, StagedRead};
use crate::buffer::NDBuffer;
use crate::device::ops_for;
use crate::error::{BoxError, Result};
use crate::options::ReadOptions;
use crate::zarr::{ShardIndex, Unit, UnitPlan, UnitSource, chunk_error, fill_bytes, plan_units};
use std::borrow::Cow;
use std::ops::Range;
use zarrs::array::{Array, CodecOptions};

/// Fetches one unit's encoded bytes (`None`: not stored); called on pipeline worker threads.
pub(crate) type Fetch<'a> =
    dyn Fn(&UnitPlan, Option<&ShardIndex>, &Unit) -> Result<Option<Vec<u8>>> + Sync + 'a;

/// Plans the units of `subset` and runs the staged pipeline into `out`, fetching each unit
/// with `fetch` and decoding it on the worker thread that fetched it.
pub(crate) fn run_staged<S: ?Sized + Send + Sync>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    opts: &ReadOptions,
    fetch: &Fetch<'_>,
) -> Result<()> {
    let elem = out.dtype().size();
    let plan = plan_units(array, subset, elem)?;
    let staged = StagedRead {
        ops: ops_for(out.memory())?,
        units: &plan.units,
        layout: plan.layout(),
        request_start: subset.iter().map(|r| r.start).collect(),
        fill_value: fill_bytes(array),
        staging_bytes: opts.staging_bytes,
        threads: opts.threads(),
        progress: opts.progress.clone(),
    };
    // Chunks are decoded in parallel, so each codec runs single-threaded.
    let codec_opts = CodecOptions::default()
        .with_validate_checksums(opts.validate_checksums)
        .with_concurrent_target(1);
    let shards = match plan.source {
        UnitSource::Subchunk => Some(ShardIndex::new(array)?),
        _ => None,
    };
    let produce = |unit: &Unit, slot: &mut [u8]| -> Result<Produced> {
        match fetch(&plan, shards.as_ref(), unit)? {
            None => Ok(Produced::Missing),
            Some(encoded) => decode_unit(array, &plan, &codec_opts, unit, encoded, slot),
        }
    };
    staged.run(out, &produce)
}

/// Runs the CPU half of a unit's codecs on its encoded bytes, into `slot`: only the
/// bytes-to-bytes codecs when the device can do the rest, else the whole chain.
pub(crate) fn decode_unit<S: ?Sized>(
    array: &Array<S>,
    plan: &UnitPlan,
    codec_opts: &CodecOptions,
    unit: &Unit,
    encoded: Vec<u8>,
    slot: &mut [u8],
) -> Result<Produced> {
    let fail = |e: BoxError| chunk_error(array, &unit.indices, e);
    let decoded: Vec<u8> = match &plan.chain {
        Some(chain) => chain
            .decode_bytes(
                Cow::Owned(encoded),
                &unit.shape,
                array.data_type(),
                array.fill_value(),
                codec_opts,
            )
            .map_err(|e| fail(e.into()))?,
        None => {
            use zarrs::array::ArrayToBytesCodecTraits;
            array
                .codecs()
                .decode(
                    Cow::Owned(encoded),
                    &unit.shape,
                    array.data_type(),
                    array.fill_value(),
                    codec_opts,
                )
                .map_err(|e| fail(e.into()))?
                .into_fixed()
                .map_err(|e| fail(e.into()))?
                .into_owned()
        }
    };
    let capacity = slot.len();
    let dst = slot.get_mut(..decoded.len()).ok_or_else(|| {
        fail(BoxError::from(format!(
            "decoded to {} bytes, more than the {capacity} a chunk of shape {:?} holds",
            decoded.len(),
            unit.shape
        )))
    })?;
    dst.copy_from_slice(&decoded);
    Ok(Produced::Decoded(decoded.len()))
}
