//! The memory limit of a read's new output ([`ReadOptions::max_bytes`]), checked before the
//! output is allocated, by every read that allocates one: sync, async and read streams.

use crate::buffer::BufferPrototype;
use crate::data_types::DataType;
use crate::errors::{Error, Result};
use crate::options::ReadOptions;
use std::ops::Range;

/// Refuses a read of `subset` of `array` (its name in the message) into a new output made
/// by `proto` that would take more than the read's memory limit: [`ReadOptions::max_bytes`], or by default, for host and pinned
/// outputs, the memory this process may still take (device allocations report their own
/// out-of-memory). Runs before anything is allocated, so a read of a terabyte-sized array is
/// refused at once.
pub(crate) fn check_output_size(
    array: &str,
    subset: &[Range<u64>],
    dtype: DataType,
    proto: &BufferPrototype,
    opts: &ReadOptions,
) -> Result<()> {
    let (limit, limit_from) = match opts.max_bytes {
        Some(n) => (n, "the read's max_bytes"),
        None if proto.memory().is_host_accessible() => match crate::memory_limit::available_bytes()
        {
            Some(n) => (n, "the memory this process may still take"),
            None => return Ok(()),
        },
        None => return Ok(()),
    };
    let bytes = subset
        .iter()
        .try_fold(dtype.size() as u64, |n, r| n.checked_mul(r.end - r.start))
        .unwrap_or(u64::MAX);
    if bytes > limit {
        return Err(Error::TooLarge {
            what: format!("the read of subset {subset:?} of {array} ({dtype})"),
            bytes,
            limit,
            limit_from: limit_from.into(),
            advice: "read a subset of it (--subset, or smaller ranges), or raise the limit \
                     (--memory, ReadOptions::with_max_bytes) if the memory is there"
                .into(),
        });
    }
    Ok(())
}
