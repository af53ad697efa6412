//! [`ChunkCache`]: decoded chunks kept in memory, shared by the arrays and reads given it.

use super::key::{ArrayId, ChunkKey, Node};
use super::policy::{Policy, PolicyKind};
use super::registry::{Invalidate, register};
use crate::buffer::Buffer;
use crate::option_types::{CacheHandle, ReadOptions};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What a cache has done since it was made (or since [`ChunkCache::clear`] for the
/// resident figures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found their chunk.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Bytes of every chunk kept so far (a chunk larger than the capacity is not kept).
    pub inserted_bytes: u64,
    /// Bytes held now (at most the capacity).
    pub resident_bytes: u64,
    /// Chunks evicted to make room (not counting invalidations).
    pub evictions: u64,
    /// Chunks held now.
    pub entries: u64,
}

struct State {
    entries: HashMap<ChunkKey, Buffer>,
    policy: Box<dyn Policy<ChunkKey>>,
    stats: CacheStats,
    /// Bumped by [`ChunkCache::clear`]: a chunk decoded before it is not inserted after it.
    epoch: u64,
    /// The same per node, bumped by every invalidation of the node (writes to other arrays
    /// leave the reads of this one alone).
    node_epochs: HashMap<Node, u64>,
}

pub(crate) struct Shared {
    capacity: u64,
    state: Mutex<State>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves at worst a policy out of step with the
        // entries (a victim already gone, an entry never evicted): still no wrong bytes.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn remove(&mut self, key: &ChunkKey) {
        if let Some(b) = self.entries.remove(key) {
            self.policy.removed(key);
            self.stats.resident_bytes -= b.len() as u64;
            self.stats.entries -= 1;
        }
    }

    /// Removes the entries of `array`'s node for which `stale` holds, and bumps its epoch.
    fn remove_where(&mut self, array: &ArrayId, stale: impl Fn(&ChunkKey) -> bool) {
        let keys: Vec<ChunkKey> = self
            .entries
            .keys()
            .filter(|k| k.array.same_node(array) && stale(k))
            .cloned()
            .collect();
        for k in &keys {
            self.remove(k);
        }
        if self.node_epochs.len() >= MAX_NODE_EPOCHS && !self.node_epochs.contains_key(array.node())
        {
            // Forget the nodes' epochs, bumping the cache's: at worst a read in flight of
            // another array does not keep what it decoded.
            self.node_epochs.clear();
            self.epoch += 1;
        }
        *self.node_epochs.entry(array.node().clone()).or_insert(0) += 1;
    }

    fn epoch_of(&self, array: &ArrayId) -> Epoch {
        Epoch(
            self.epoch,
            self.node_epochs.get(array.node()).copied().unwrap_or(0),
        )
    }
}

/// Arrays whose invalidations a cache counts one by one (a process writing many arrays
/// keeps the count bounded).
const MAX_NODE_EPOCHS: usize = 4096;

/// Where a cache's invalidations stood when a read began (see [`ChunkCache::epoch`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Epoch(u64, u64);

impl Invalidate for Shared {
    fn invalidate_written(&self, array: &ArrayId, chunks: Option<&HashSet<Vec<u64>>>) {
        self.state().remove_where(array, |k| {
            !k.array.same_metadata(array) || chunks.is_none_or(|c| c.contains(&k.chunk))
        });
    }
}

/// A byte-limited cache of decoded chunks, shared by every read given it (through
/// [`ReadOptions::with_cache`]) and by every array those reads are on, like tensorstore's
/// `cache_pool` shared by the arrays of a context. Clones share one cache.
///
/// A read with a cache looks up each chunk it touches (each inner chunk, for sharded
/// arrays); a hit is copied from the cache into the output, a miss is decoded whole, kept
/// and copied. Each chunk is kept as a [`Buffer`] holding its elements inside the array (an
/// edge chunk is cut at the array's end) in C order, native byte order, in the array's
/// element layout. A chunk that failed to decode is never kept; a chunk the store does not
/// hold (read as the fill value) is kept like any other. When an insertion would go over
/// the capacity, chunks are evicted by the policy (CLOCK by default; docs/caching.md has
/// the measurements) until it fits; a chunk larger than the capacity is not kept. The
/// cache's memory is counted against its capacity only: not against a read's
/// `staging_bytes` or `max_bytes`.
///
/// Writes through zarrbuf remove the chunks they write from every live cache. Writes by
/// another process (or through zarrs directly) are not seen: a cache is a snapshot of what
/// it read; [`invalidate_array`](Self::invalidate_array), [`clear`](Self::clear) or a new
/// cache see them. The cached `Buffer`s that [`get`](Self::get) returns share memory with the
/// cache: do not write into them.
///
/// ```
/// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
/// use zarrbuf::cache::ChunkCache;
/// use zarrbuf::options::ReadOptions;
/// use zarrs::array::{ArrayBuilder, data_type};
/// let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
/// let array = ArrayBuilder::new(vec![8, 8], vec![4, 4], data_type::int32(), 0i32)
///     .build(store, "/x").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// array.write_all(&NDBuffer::from_vec((0..64).collect::<Vec<i32>>(), &[8, 8])?)?;
/// let cache = ChunkCache::new(64 << 20);
/// let opts = ReadOptions::default().with_cache(cache.clone());
/// let first = array.read_opt(&[1..3, 2..6], &BufferPrototype::cpu(), &opts)?;
/// let again = array.read_opt(&[1..3, 2..6], &BufferPrototype::cpu(), &opts)?;
/// assert_eq!(first.to_vec::<i32>()?, vec![10, 11, 12, 13, 18, 19, 20, 21]);
/// assert_eq!(again.to_vec::<i32>()?, first.to_vec::<i32>()?);
/// let stats = cache.stats();
/// assert_eq!((stats.misses, stats.hits, stats.entries), (2, 2, 2));
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone)]
pub struct ChunkCache {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache")
            .field("capacity", &self.shared.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

impl ChunkCache {
    /// A cache holding at most `capacity_bytes` of decoded chunks, with the default policy.
    pub fn new(capacity_bytes: u64) -> ChunkCache {
        ChunkCache::with_policy(capacity_bytes, PolicyKind::Clock)
    }

    /// A cache with the eviction policy `policy` (for comparing them; [`ChunkCache::new`]
    /// takes the measured better one).
    ///
    /// ```
    /// use zarrbuf::cache::{ChunkCache, PolicyKind};
    /// let c = ChunkCache::with_policy(1 << 20, PolicyKind::Lru);
    /// assert_eq!(c.capacity(), 1 << 20);
    /// ```
    pub fn with_policy(capacity_bytes: u64, policy: PolicyKind) -> ChunkCache {
        let shared = Arc::new(Shared {
            capacity: capacity_bytes,
            state: Mutex::new(State {
                entries: HashMap::new(),
                policy: policy.build(),
                stats: CacheStats::default(),
                epoch: 0,
                node_epochs: HashMap::new(),
            }),
        });
        let weak = Arc::downgrade(&shared);
        register(weak);
        ChunkCache { shared }
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.shared.capacity
    }

    /// The cached decoded chunk `key`, if the cache holds it (counted as a hit or a miss).
    pub fn get(&self, key: &ChunkKey) -> Option<Buffer> {
        let mut s = self.shared.state();
        match s.entries.get(key).cloned() {
            Some(b) => {
                s.policy.touched(key);
                s.stats.hits += 1;
                Some(b)
            }
            None => {
                s.stats.misses += 1;
                None
            }
        }
    }

    /// Keeps `chunk` (a decoded chunk, as described on [`ChunkCache`]) under `key`,
    /// replacing what was there, charging `chunk.len()` bytes and evicting until it fits;
    /// a chunk larger than the capacity is not kept.
    ///
    /// ```
    /// use zarrbuf::{Buffer, Device};
    /// use zarrbuf::cache::{ArrayId, ChunkCache, ChunkKey};
    /// use zarrs::array::{ArrayBuilder, data_type};
    /// let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// let a = ArrayBuilder::new(vec![8], vec![4], data_type::uint8(), 0u8)
    ///     .build(store, "/a").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
    /// let cache = ChunkCache::new(6);
    /// let key = |i| ChunkKey::new(ArrayId::of(&a), vec![i], Device::Cpu);
    /// cache.insert(key(0), Buffer::from_vec(vec![1, 2, 3, 4]));
    /// cache.insert(key(1), Buffer::from_vec(vec![5, 6, 7, 8]));
    /// assert!(cache.get(&key(0)).is_none());
    /// assert_eq!(cache.get(&key(1)).unwrap().to_vec()?, vec![5, 6, 7, 8]);
    /// assert_eq!(cache.stats().evictions, 1);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn insert(&self, key: ChunkKey, chunk: Buffer) {
        let mut s = self.shared.state();
        self.insert_locked(&mut s, key, chunk);
    }

    /// The write epoch of `array`: take it before decoding its chunks, give it to
    /// [`insert_since`](Self::insert_since).
    pub(crate) fn epoch(&self, array: &ArrayId) -> Epoch {
        self.shared.state().epoch_of(array)
    }

    /// [`insert`](Self::insert), unless the cache was cleared or the key's array invalidated
    /// since `epoch` (the chunk may have been decoded from bytes a write has since replaced).
    pub(crate) fn insert_since(&self, key: ChunkKey, chunk: Buffer, epoch: Epoch) {
        let mut s = self.shared.state();
        if s.epoch_of(&key.array) == epoch {
            self.insert_locked(&mut s, key, chunk);
        }
    }

    fn insert_locked(&self, s: &mut State, key: ChunkKey, chunk: Buffer) {
        let size = chunk.len() as u64;
        s.remove(&key);
        if size > self.shared.capacity {
            return;
        }
        while s.stats.resident_bytes + size > self.shared.capacity {
            let Some(victim) = s.policy.evict() else {
                break;
            };
            if let Some(b) = s.entries.remove(&victim) {
                s.stats.resident_bytes -= b.len() as u64;
                s.stats.entries -= 1;
                s.stats.evictions += 1;
            }
        }
        s.policy.inserted(key.clone());
        s.entries.insert(key, chunk);
        s.stats.resident_bytes += size;
        s.stats.inserted_bytes += size;
        s.stats.entries += 1;
    }

    /// Drops every chunk of `array` (any metadata) from this cache.
    pub fn invalidate_array(&self, array: &ArrayId) {
        self.shared.state().remove_where(array, |_| true);
    }

    /// Drops one chunk.
    pub fn invalidate_chunk(&self, key: &ChunkKey) {
        self.shared.state().remove_where(&key.array, |k| {
            k.chunk == key.chunk && k.memory == key.memory
        });
    }

    /// The counters (see [`CacheStats`]).
    pub fn stats(&self) -> CacheStats {
        self.shared.state().stats
    }

    /// Drops every chunk (the hit, miss, insertion and eviction counts stay).
    pub fn clear(&self) {
        let mut s = self.shared.state();
        s.entries.clear();
        s.policy.clear();
        s.stats.resident_bytes = 0;
        s.stats.entries = 0;
        s.epoch += 1;
    }

    fn handle(&self) -> CacheHandle {
        CacheHandle::new(self.shared.clone())
    }

    fn from_handle(handle: &CacheHandle) -> Option<ChunkCache> {
        handle.get::<Shared>().map(|shared| ChunkCache { shared })
    }
}

/// The cache option lives in `option_types` (a leaf that may not name the cache); its
/// setter and getter live here.
impl ReadOptions {
    /// Reads through `cache` (see [`ChunkCache`]). Caches are given per read rather than
    /// through [`crate::options::OpenOptions`]: reads are methods on zarrs' `Array`, which
    /// keeps no zarrbuf state, so the read's options are where a cache reaches every route
    /// (sync, async, streams, `multi`).
    ///
    /// ```
    /// use zarrbuf::cache::ChunkCache;
    /// let cache = ChunkCache::new(1 << 30);
    /// let o = zarrbuf::options::ReadOptions::default().with_cache(cache.clone());
    /// assert_eq!(o.chunk_cache().unwrap().capacity(), 1 << 30);
    /// ```
    pub fn with_cache(mut self, cache: ChunkCache) -> Self {
        self.cache = Some(cache.handle());
        self
    }

    /// The cache this read goes through, if any.
    pub fn chunk_cache(&self) -> Option<ChunkCache> {
        self.cache.as_ref().and_then(ChunkCache::from_handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::place::Device;
    use zarrs::array::{ArrayBuilder, data_type};

    fn array(path: &str, chunk: u64) -> zarrs::array::Array<zarrs::storage::store::MemoryStore> {
        let store = Arc::new(zarrs::storage::store::MemoryStore::new());
        ArrayBuilder::new(vec![64], vec![chunk], data_type::uint8(), 0u8)
            .build(store, path)
            .unwrap()
    }

    #[test]
    fn evicts_to_capacity_and_counts() {
        let a = ArrayId::of(&array("/a", 8));
        let cache = ChunkCache::with_policy(10, PolicyKind::Lru);
        let key = |i| ChunkKey::new(a.clone(), vec![i], Device::Cpu);
        cache.insert(key(0), Buffer::from_vec(vec![0; 4]));
        cache.insert(key(1), Buffer::from_vec(vec![1; 4]));
        assert!(cache.get(&key(0)).is_some());
        cache.insert(key(2), Buffer::from_vec(vec![2; 4]));
        assert!(cache.get(&key(1)).is_none(), "the least recently used went");
        assert!(cache.get(&key(0)).is_some());
        cache.insert(key(3), Buffer::from_vec(vec![3; 11]));
        assert!(
            cache.get(&key(3)).is_none(),
            "larger than the capacity: not kept"
        );
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.evictions, s.entries), (2, 2, 1, 2));
        assert_eq!((s.resident_bytes, s.inserted_bytes), (8, 12));
        cache.clear();
        assert_eq!(cache.stats().resident_bytes, 0);
    }

    #[test]
    fn write_invalidation_reaches_every_live_cache() {
        let arr = array("/w", 8);
        let id = ArrayId::of(&arr);
        let (one, two) = (ChunkCache::new(1 << 20), ChunkCache::new(1 << 20));
        for c in [&one, &two] {
            for i in 0..8 {
                c.insert(
                    ChunkKey::new(id.clone(), vec![i], Device::Cpu),
                    Buffer::from_vec(vec![0; 8]),
                );
            }
        }
        let epoch = one.epoch(&id);
        #[allow(clippy::single_range_in_vec_init)] // one range per dimension
        super::super::registry::invalidate_written(&arr, &[9..17]);
        for c in [&one, &two] {
            assert_eq!(c.stats().entries, 6);
            assert!(
                c.get(&ChunkKey::new(id.clone(), vec![1], Device::Cpu))
                    .is_none()
            );
            assert!(
                c.get(&ChunkKey::new(id.clone(), vec![3], Device::Cpu))
                    .is_some()
            );
        }
        // A chunk decoded before the write is not inserted after it.
        one.insert_since(
            ChunkKey::new(id.clone(), vec![1], Device::Cpu),
            Buffer::from_vec(vec![0; 8]),
            epoch,
        );
        assert_eq!(one.stats().entries, 6);
        one.invalidate_array(&id);
        assert_eq!(one.stats().entries, 0);
    }

    #[test]
    fn options_carry_the_cache() {
        let cache = ChunkCache::new(100);
        let opts = ReadOptions::default().with_cache(cache.clone());
        let back = opts.chunk_cache().unwrap();
        back.insert(
            ChunkKey::new(ArrayId::of(&array("/o", 8)), vec![0], Device::Cpu),
            Buffer::from_vec(vec![1]),
        );
        assert_eq!(cache.stats().entries, 1, "clones share entries");
    }
}
