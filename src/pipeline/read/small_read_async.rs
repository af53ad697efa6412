//! Small async reads: the small-read route (`small_read.rs`) for async stores.
//!
//! The read is planned as the sync route plans it ([`SmallRead`]: the same reads taken, the
//! same bounded decoders, the same errors); its units' encoded bytes are fetched on the
//! runtime, concurrently (each shard's index once, through the shared index cache, then
//! every unit — only its needed byte ranges when it is stored uncompressed, as the sync route
//! fetches them; a unit another async read is fetching is taken from it, `fetch_flight.rs`);
//! then the units decode. Decoding does not hold a runtime worker for long: a read whose
//! units decode to at most [`INLINE_DECODE_BYTES`] in all decodes on the task (tens of
//! microseconds, less than a hand-off to another thread costs); larger ones decode on a
//! blocking thread with the pool's helpers, as the sync route does, and a dropped future
//! waits until that thread has stopped writing into the output. No pipeline, slots or
//! per-read threads are started.

use super::small_read::SmallRead;
use crate::buffer::NDBuffer;
use crate::errors::{Error, Result};
use crate::options::ReadOptions;
use crate::pipeline::cancel::Cancel;
use crate::pipeline::fetch::fetch_unit::fetch_units_async;
use crate::zarr::{ShardIndex, UnitSource};
use bytes::Bytes;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

/// Decoded bytes a small async read decodes on its task at most (above: on a blocking
/// thread). zstd and blosc decode at about 1 GB/s on one core here, so 64 KiB is about
/// 60 µs, the order of one `spawn_blocking` hand-off and back; a 64³ float32 chunk (1 MiB,
/// about 1 ms) is handed off.
pub(crate) const INLINE_DECODE_BYTES: usize = 64 << 10;

/// One unit's fetched bytes (`None`: not stored), or why they could not be fetched.
type Fetched = Result<Option<Bytes>>;

/// Reads `subset` of `array` into `out` by the small async route, as `small` planned it (the
/// read [`SmallRead::of`] took).
pub(crate) async fn read_small_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Arc<Array<S>>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    opts: &ReadOptions,
    mut small: SmallRead,
) -> Result<()> {
    let index = match small.unit_plan().source {
        UnitSource::Subchunk => {
            let index = ShardIndex::with_limit(array, opts.validate_checksums, opts.max_bytes)?
                .shared_with(array.as_ref());
            // Shard by shard, as the sync route orders them (the first error is the same).
            small.order_by_shard(&index);
            Some(index)
        }
        _ => None,
    };
    let fetched = fetch_units_async(array.as_ref(), small.unit_plan(), index.as_ref(), &|unit| {
        small.unit_ranges(unit)
    })
    .await;
    let decoded_bytes: usize = small
        .unit_plan()
        .units
        .iter()
        .zip(&fetched)
        .filter(|(_, f)| matches!(f, Ok(Some(_))))
        .map(|(u, _)| u.num_elements().saturating_mul(out.dtype().size()))
        .sum();
    let slots: Vec<Mutex<Option<Fetched>>> =
        fetched.into_iter().map(|f| Mutex::new(Some(f))).collect();
    let take = move |i: usize| -> Result<Option<Bytes>> {
        slots
            .get(i)
            .and_then(|s| s.lock().unwrap_or_else(|p| p.into_inner()).take())
            .unwrap_or_else(|| {
                Err(Error::InvalidArgument(
                    "internal error: a unit of a small read was taken twice (please report)".into(),
                ))
            })
    };
    if decoded_bytes <= INLINE_DECODE_BYTES {
        let units = &small.unit_plan().units;
        let decoded = (0..units.len())
            .map(|i| small.decode(array.as_ref(), &units[i], take(i)?))
            .collect::<Result<Vec<_>>>()?;
        return small.place_all(subset, out, decoded);
    }
    // Dropping this future waits until the blocking thread has stopped writing into `out`.
    let (_stop, finish) = Cancel::pair();
    let (array, subset, out) = (array.clone(), subset.to_vec(), out.clone());
    let task = tokio::task::spawn_blocking(move || -> Result<()> {
        let decoded = small.decode_all(array.as_ref(), &take)?;
        finish.cancel().check("read")?;
        small.place_all(&subset, &out, decoded)
    });
    task.await
        .map_err(|e| Error::Cancelled(format!("the read task stopped: {e}")))?
}
