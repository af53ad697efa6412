//! The process's cache of decoded shard indexes: a read of a sharded array reads each
//! shard's index once per opened store, and later reads through the same store (the same
//! `Arc` — one `zarrbuf.open`, one zarr-python array through zarrbuf's pipeline) reuse it.
//!
//! Entries are keyed by the store object, the array's path, the shard's grid indices and the
//! index's layout (everything [`super::ShardIndex`] decodes and checks it by), so arrays,
//! stores and layouts never share one. The store is held by a `Weak`: its address cannot be
//! reused by another store while an entry names it, and entries of dropped stores are swept
//! out. Only indexes that decoded and passed [`super::ShardIndex::check`] are kept (a missing
//! or damaged shard is fetched again next time). The cache holds at most
//! [`DEFAULT_LIMIT_BYTES`] of decoded indexes, least recently used out first.
//!
//! Writes through zarrbuf ([`forget_written`], called by both write routes after they
//! stored) drop the entries of the shards they touch, and every entry of other store objects
//! zarrbuf opened at an overlapping location. What another process, or zarrs called
//! directly, writes into a store this process holds open is not seen by the indexes cached
//! for it: open the store again (a new store object starts with no entries).

use crate::process_local::ProcessLocal;
use crate::stores::{Location, location_of};
use crate::zarr::plan_chunks;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use zarrs::array::Array;

/// Bytes of decoded indexes the cache keeps at most (16 bytes per inner chunk): 64 MiB,
/// four million inner chunks, e.g. 4096 shards of 1024 inner chunks.
pub(crate) const DEFAULT_LIMIT_BYTES: u64 = 64 << 20;

/// What an index was decoded and checked by: two readers that agree on it read the same
/// pairs from the same bytes.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Layout {
    pub(crate) chunks_per_shard: Vec<u64>,
    pub(crate) encoded_size: u64,
    pub(crate) at_start: bool,
    pub(crate) max_inner_bytes: u64,
    pub(crate) validate_checksums: bool,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    path: String,
    shard: Vec<u64>,
    layout: Layout,
}

struct Entry {
    index: Arc<Vec<u64>>,
    stamp: u64,
}

/// The entries of one store object.
struct StoreEntries {
    alive: Arc<dyn Fn() -> bool + Send + Sync>,
    /// Where zarrbuf opened the store (canonical), if it did: a write through another store
    /// object at an overlapping location drops these entries too.
    location: Option<Location>,
    entries: HashMap<Key, Entry>,
    /// The shortest index request through this store object: about one round trip to it.
    round_trip: Option<Duration>,
}

#[derive(Default)]
struct Cache {
    stores: HashMap<usize, StoreEntries>,
    /// Use order: stamp → (store, key), the oldest first.
    order: BTreeMap<u64, (usize, Key)>,
    clock: u64,
    bytes: u64,
    limit: Option<u64>,
    hits: u64,
    misses: u64,
}

fn cache() -> MutexGuard<'static, Cache> {
    // One per process: a forked child does not lock what its parent's threads held.
    static CACHE: ProcessLocal<Mutex<Cache>> = ProcessLocal::new(Mutex::default);
    // The maps agree between any two statements, so a panic elsewhere leaves them usable.
    CACHE.get().lock().unwrap_or_else(|p| p.into_inner())
}

fn entry_bytes(index: &[u64]) -> u64 {
    (index.len() as u64).saturating_mul(8)
}

impl Cache {
    fn limit(&self) -> u64 {
        self.limit.unwrap_or(DEFAULT_LIMIT_BYTES)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn remove(&mut self, store: usize, key: &Key) {
        let Some(s) = self.stores.get_mut(&store) else {
            return;
        };
        if let Some(e) = s.entries.remove(key) {
            self.order.remove(&e.stamp);
            self.bytes -= entry_bytes(&e.index);
        }
        if s.entries.is_empty() {
            self.stores.remove(&store);
        }
    }

    /// Drops the entries of stores that are gone, then the least recently used entries
    /// until the cache is within its limit.
    fn trim(&mut self) {
        let dead: Vec<usize> = self
            .stores
            .iter()
            .filter(|(_, s)| !(s.alive)())
            .map(|(&a, _)| a)
            .collect();
        for store in dead {
            if let Some(s) = self.stores.remove(&store) {
                for e in s.entries.values() {
                    self.order.remove(&e.stamp);
                    self.bytes -= entry_bytes(&e.index);
                }
            }
        }
        while self.bytes > self.limit() {
            let Some((_, (store, key))) = self.order.pop_first() else {
                break;
            };
            self.remove(store, &key);
        }
    }
}

/// The shared indexes of one array's shards in one store object, for one index layout.
pub(crate) struct SharedIndexes {
    store: usize,
    alive: Arc<dyn Fn() -> bool + Send + Sync>,
    locate: Arc<dyn Fn() -> Option<Location> + Send + Sync>,
    path: String,
    layout: Layout,
}

impl SharedIndexes {
    /// The indexes of the array at `path` in `store`, read with `layout`.
    pub(crate) fn new<S: ?Sized + Send + Sync + 'static>(
        store: &Arc<S>,
        path: &str,
        layout: Layout,
    ) -> Self {
        let weak: Weak<S> = Arc::downgrade(store);
        let found = weak.clone();
        SharedIndexes {
            store: store_address(store),
            alive: Arc::new(move || weak.strong_count() > 0),
            locate: Arc::new(move || {
                let store = found.upgrade()?;
                location_of(store.as_ref()).map(|l| l.canonical())
            }),
            path: path.to_string(),
            layout,
        }
    }

    fn key(&self, shard: &[u64]) -> Key {
        Key {
            path: self.path.clone(),
            shard: shard.to_vec(),
            layout: self.layout.clone(),
        }
    }

    /// The cached index of `shard`, if one is.
    pub(crate) fn get(&self, shard: &[u64]) -> Option<Arc<Vec<u64>>> {
        let key = self.key(shard);
        let mut c = cache();
        let stamp = c.tick();
        let found = c
            .stores
            .get_mut(&self.store)
            .and_then(|s| s.entries.get_mut(&key))
            .map(|e| (std::mem::replace(&mut e.stamp, stamp), e.index.clone()));
        match found {
            Some((old, index)) => {
                c.order.remove(&old);
                c.order.insert(stamp, (self.store, key));
                c.hits += 1;
                Some(index)
            }
            None => {
                c.misses += 1;
                None
            }
        }
    }

    /// Notes that an index request through this store object took `took` (kept once an
    /// index of the store is cached: the shortest is about one round trip).
    pub(crate) fn note_round_trip(&self, took: Duration) {
        if let Some(s) = cache().stores.get_mut(&self.store) {
            s.round_trip = Some(s.round_trip.map_or(took, |rt| rt.min(took)));
        }
    }

    /// The shortest index request through this store object seen so far.
    pub(crate) fn round_trip(&self) -> Option<Duration> {
        cache().stores.get(&self.store)?.round_trip
    }

    /// Keeps the decoded, checked index of `shard` (not when it alone exceeds the limit).
    pub(crate) fn put(&self, shard: &[u64], index: Arc<Vec<u64>>) {
        let key = self.key(shard);
        let mut c = cache();
        if entry_bytes(&index) > c.limit() {
            return;
        }
        c.remove(self.store, &key);
        // Where the store lives, once per store object (it may resolve links on disk).
        let location = if c.stores.contains_key(&self.store) {
            None
        } else {
            drop(c);
            let found = (self.locate)();
            c = cache();
            found
        };
        let stamp = c.tick();
        c.bytes += entry_bytes(&index);
        c.order.insert(stamp, (self.store, key.clone()));
        c.stores
            .entry(self.store)
            .or_insert_with(|| StoreEntries {
                alive: self.alive.clone(),
                location,
                entries: HashMap::new(),
                round_trip: None,
            })
            .entries
            .insert(key, Entry { index, stamp });
        c.trim();
    }
}

/// The address that names a store object in the cache.
fn store_address<S: ?Sized>(store: &Arc<S>) -> usize {
    Arc::as_ptr(store).cast::<()>() as usize
}

/// Drops the cached indexes of the shards `shards` (grid indices) of the array at `path` in
/// `store`, whatever their layout: a write through zarrbuf stored (or erased) them.
pub(crate) fn forget<S: ?Sized>(store: &Arc<S>, path: &str, shards: &[Vec<u64>]) {
    let address = store_address(store);
    let mut c = cache();
    let Some(s) = c.stores.get(&address) else {
        return;
    };
    let doomed: Vec<Key> = s
        .entries
        .keys()
        .filter(|k| k.path == path && shards.contains(&k.shard))
        .cloned()
        .collect();
    for key in doomed {
        c.remove(address, &key);
    }
}

/// Drops every cached index of the array at `path` in `store` (its metadata or all its
/// shards were replaced).
pub(crate) fn forget_array<S: ?Sized>(store: &Arc<S>, path: &str) {
    let address = store_address(store);
    let mut c = cache();
    let Some(s) = c.stores.get(&address) else {
        return;
    };
    let doomed: Vec<Key> = s
        .entries
        .keys()
        .filter(|k| k.path == path)
        .cloned()
        .collect();
    for key in doomed {
        c.remove(address, &key);
    }
}

/// Drops the cached indexes of the shards a write of `subset` into `array` stored: every
/// write route calls it after storing, whatever the outcome (a failed write may have stored
/// some shards).
pub(crate) fn forget_written<S: ?Sized>(array: &Array<S>, subset: &[Range<u64>]) {
    let store = array.storage();
    if cache().stores.is_empty() {
        return;
    }
    // Other store objects opened at an overlapping location see the same files: their
    // entries all go (their array paths need not be this one's).
    if let Some(here) = location_of(store.as_ref()).map(|l| l.canonical()) {
        let address = store_address(&store);
        let mut c = cache();
        let others: Vec<usize> = c
            .stores
            .iter()
            .filter(|(a, s)| {
                **a != address && s.location.as_ref().is_some_and(|l| l.overlaps(&here))
            })
            .map(|(a, _)| *a)
            .collect();
        for other in others {
            let keys: Vec<Key> = c
                .stores
                .get(&other)
                .map(|s| s.entries.keys().cloned().collect())
                .unwrap_or_default();
            for key in keys {
                c.remove(other, &key);
            }
        }
    }
    if !cache().stores.contains_key(&store_address(&store)) {
        return;
    }
    let path = array.path().as_str();
    match plan_chunks(array, subset) {
        Ok(chunks) => {
            let shards: Vec<Vec<u64>> = chunks.into_iter().map(|c| c.indices).collect();
            forget(&store, path, &shards);
        }
        Err(_) => forget_array(&store, path),
    }
}

/// Entries and decoded bytes cached for `store`.
#[cfg(test)]
pub(crate) fn cached_for<S: ?Sized>(store: &Arc<S>) -> (usize, u64) {
    let c = cache();
    c.stores.get(&store_address(store)).map_or((0, 0), |s| {
        (
            s.entries.len(),
            s.entries.values().map(|e| entry_bytes(&e.index)).sum(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(n: u64) -> Layout {
        Layout {
            chunks_per_shard: vec![n],
            encoded_size: 16 * n + 4,
            at_start: false,
            max_inner_bytes: 1 << 20,
            validate_checksums: true,
        }
    }

    #[test]
    fn entries_are_per_store_path_and_layout_and_forgotten() {
        let (a, b) = (Arc::new(1u8), Arc::new(2u8));
        let ia = SharedIndexes::new(&a, "/x", layout(2));
        ia.put(&[0], Arc::new(vec![0, 8, 8, 8]));
        assert_eq!(ia.get(&[0]).as_deref(), Some(&vec![0, 8, 8, 8]));
        assert!(ia.get(&[1]).is_none());
        assert!(SharedIndexes::new(&b, "/x", layout(2)).get(&[0]).is_none());
        assert!(SharedIndexes::new(&a, "/y", layout(2)).get(&[0]).is_none());
        assert!(SharedIndexes::new(&a, "/x", layout(4)).get(&[0]).is_none());
        assert_eq!(cached_for(&a), (1, 32));
        forget(&a, "/x", &[vec![1]]);
        assert!(ia.get(&[0]).is_some());
        forget(&a, "/x", &[vec![0]]);
        assert!(ia.get(&[0]).is_none());
        assert_eq!(cached_for(&a), (0, 0));
        ia.put(&[3], Arc::new(vec![0, 8]));
        forget_array(&a, "/x");
        assert!(ia.get(&[3]).is_none());
    }

    #[test]
    fn the_shortest_round_trip_is_kept_per_store_object() {
        let (a, b) = (Arc::new(11u8), Arc::new(12u8));
        let ia = SharedIndexes::new(&a, "/rt", layout(1));
        let ms = Duration::from_millis;
        // Nothing cached for the store yet: nothing to keep it with.
        ia.note_round_trip(ms(5));
        assert_eq!(ia.round_trip(), None);
        ia.put(&[0], Arc::new(vec![0, 8]));
        ia.note_round_trip(ms(90));
        ia.note_round_trip(ms(80));
        ia.note_round_trip(ms(200));
        assert_eq!(ia.round_trip(), Some(ms(80)));
        // Another array of the same store object knows it; another store does not.
        assert_eq!(
            SharedIndexes::new(&a, "/other", layout(2)).round_trip(),
            Some(ms(80))
        );
        assert_eq!(SharedIndexes::new(&b, "/rt", layout(1)).round_trip(), None);
        forget_array(&a, "/rt");
    }

    #[test]
    fn entries_of_dropped_stores_go() {
        let a = Arc::new(7u32);
        let ia = SharedIndexes::new(&a, "/x", layout(1));
        ia.put(&[0], Arc::new(vec![0, 8]));
        let weak = Arc::downgrade(&a);
        drop(a);
        assert!(weak.upgrade().is_none());
        // Any later insertion sweeps the dead store out.
        let b = Arc::new(8u32);
        SharedIndexes::new(&b, "/x", layout(1)).put(&[0], Arc::new(vec![0, 8]));
        assert!(
            !cache()
                .stores
                .contains_key(&(Weak::as_ptr(&weak).cast::<()>() as usize))
        );
        forget_array(&b, "/x");
    }

    #[test]
    fn least_recently_used_entries_leave_first() {
        let a = Arc::new(3u64);
        let ia = SharedIndexes::new(&a, "/lru", layout(1));
        // Each entry takes 8 MiB; the default limit holds 8 of them.
        let big = || Arc::new(vec![0u64; 1 << 20]);
        for k in 0..8u64 {
            ia.put(&[k], big());
        }
        assert!(ia.get(&[0]).is_some()); // now the most recently used
        ia.put(&[8], big());
        assert!(ia.get(&[0]).is_some());
        assert!(ia.get(&[1]).is_none(), "the least recently used entry left");
        assert!(cached_for(&a).1 <= DEFAULT_LIMIT_BYTES);
        forget_array(&a, "/lru");
    }
}
