//! The caches alive in this process, so that a write through zarrbuf removes the chunks it
//! wrote from every one of them, whether or not the write was given a cache.

use super::key::ArrayId;
use crate::zarr::{data_type_of, plan_units};
use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use zarrs::array::Array;

/// Writes through zarrbuf so far, counted twice each (when a write begins and when it ends).
static WRITES: AtomicU64 = AtomicU64::new(0);

/// The process's write epoch: it moves whenever a write through zarrbuf (to any array)
/// begins or ends, so a fetch of encoded bytes taken under one epoch is never handed to a
/// read that began after a write ended (`pipeline/fetch/fetch_flight.rs`).
pub(crate) fn write_epoch() -> u64 {
    WRITES.load(Ordering::SeqCst)
}

/// What a write needs of a cache.
pub(crate) trait Invalidate: Send + Sync {
    /// Removes the entries of the node `array` names that a write of `chunks` made stale:
    /// those chunks of entries with `array`'s metadata, and every entry of that node with
    /// other metadata (their chunk grid may differ). `None` is every chunk.
    fn invalidate_written(&self, array: &ArrayId, chunks: Option<&HashSet<Vec<u64>>>);
}

static LIVE: Mutex<Vec<Weak<dyn Invalidate>>> = Mutex::new(Vec::new());

/// Records a new cache (dropping the records of caches gone since).
pub(crate) fn register(cache: Weak<dyn Invalidate>) {
    let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    live.retain(|c| c.strong_count() > 0);
    live.push(cache);
}

/// The caches alive now.
fn live() -> Vec<Arc<dyn Invalidate>> {
    let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    live.iter().filter_map(Weak::upgrade).collect()
}

/// Removes from every live cache the chunks of `array` (inner chunks, for sharded arrays:
/// the units reads cache) that a write of `subset` touches; every chunk of the array when
/// they cannot be planned. Writes call it before they store anything and again when they
/// end, whether they succeeded or not (chunks stored before a failure changed too), and
/// each call moves the write epoch ([`write_epoch`]) first; a read
/// that decoded a chunk before the write and inserts it after is refused by the caches'
/// write epoch (see `ChunkCache::insert_since`).
pub(crate) fn invalidate_written<S: ?Sized + Send + Sync + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
) {
    WRITES.fetch_add(1, Ordering::SeqCst);
    let caches = live();
    if caches.is_empty() {
        return;
    }
    let id = ArrayId::of(array);
    let chunks: Option<HashSet<Vec<u64>>> = data_type_of(array)
        .and_then(|dtype| plan_units(array, subset, dtype.size()))
        .ok()
        .map(|plan| plan.units.into_iter().map(|u| u.indices).collect());
    for cache in caches {
        cache.invalidate_written(&id, chunks.as_ref());
    }
}

/// Removes every chunk of the node `array` is at (whatever its metadata) from every live
/// cache: the array there was replaced.
pub(crate) fn invalidate_node<S: ?Sized + Send + Sync + 'static>(array: &Array<S>) {
    WRITES.fetch_add(1, Ordering::SeqCst);
    let caches = live();
    if caches.is_empty() {
        return;
    }
    let id = ArrayId::of(array);
    for cache in caches {
        cache.invalidate_written(&id, None);
    }
}
