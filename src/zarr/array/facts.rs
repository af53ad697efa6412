//! The facts every read of an array needs and its metadata alone decides — zarrbuf's data
//! type (with the chunk-shape checks), the inner chunk shape and codec chain of shards, how
//! the units of a read decode, the metadata fingerprint a chunk cache files chunks under —
//! worked out once per array and kept in a process-wide memo, not once per read.
//!
//! zarrs rebuilds them from the metadata on every call (`Array::subchunk_shape` deserializes
//! the sharding configuration each time, a fingerprint serializes the metadata to JSON), and
//! that was half of a cached read of a patch of a sharded array.
//!
//! # Why an entry is never served for another array, or for a changed one
//!
//! Users hand zarrbuf `&Array<S>` values, which they may change between reads, and which
//! come and go. An entry is found by the address of the array's codec chain (the
//! `Arc<CodecChain>` of `Array::codecs`), and served only when all of these hold:
//!
//! - **the same codec chain**: the entry keeps a `Weak` of that chain. A live `Weak` keeps
//!   the allocation, so no other chain can be allocated at that address while the entry
//!   exists: an array whose chain lives at the entry's address has *that* chain. zarrs
//!   shares one chain between arrays only through `Array::with_storage` (and its
//!   conversions between store kinds), which copies the rest of the array with it: data
//!   type, fill value, chunk grid, metadata. A setter that changes the chain
//!   (`set_codec_specific_options`) makes a new `Arc`.
//! - **the same chunk grid**: the entry keeps a `Weak` of the array's chunk grid (an
//!   `Arc` inside zarrs' `ChunkGrid`), compared by address in the same way. The grid holds
//!   the shape and the chunk shape, and each setter of zarrs 0.23's `Array` that keeps the
//!   chain and changes metadata a fact depends on builds a new grid: `set_shape` and
//!   `set_shape_and_chunk_grid`.
//! - **the same shape**, compared by value, in case a zarrs to come changes a shape in
//!   place.
//!
//! The other setters change nothing memoized: `attributes_mut` changes the attributes,
//! which no fact reads (the fingerprint leaves them out); `set_dimension_names` changes
//! zarrs' own field, not `Array::metadata`; `set_codec_options` and `set_metadata_options`
//! are options, not metadata. The data type, fill value, chunk key encoding, storage
//! transformers and the codecs' metadata have no setter. A mismatch recomputes the facts
//! and replaces the entry. (Comparing the whole metadata instead cost 8% of a cached read:
//! the sharding configuration is nested JSON.) When zarrs is upgraded, its `Array`'s
//! `&mut self` methods are the list to check against this one.
//!
//! Every fact here follows from the chain and the metadata alone, never from the store or
//! the node path: arrays of equal metadata in two stores (`with_storage`) may share facts,
//! and the chunk cache's `ArrayId` adds the store and path itself on every call. Errors are
//! not memoized: an array zarrbuf refuses is refused by a fresh check each time, so the
//! error names that array.
//!
//! The memo holds at most [`MAX_ENTRIES`] entries. Each insertion drops the entries whose
//! chain is gone (their arrays were dropped), then, when still full, the least recently
//! used. Nothing memoized holds the array's own chain strongly (a plan over it is rebuilt
//! around the caller's `Arc`), so an entry never keeps its array's codecs alive.

use super::data_type::checked_data_type;
use crate::data_types::DataType;
use crate::errors::{Error, Result};
use crate::process_local::ProcessLocal;
use crate::zarr::{ChainPlan, EncodedLayout};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use zarrs::array::codec::ShardingCodecConfiguration;
use zarrs::array::{
    Array, ArrayShardedExt, ChunkGrid, ChunkGridTraits, ChunkShape, CodecChain,
    CodecMetadataOptions,
};
use zarrs::metadata::ConfigurationSerialize;

/// Arrays the memo remembers at most (a process reads a few arrays over and over; an entry
/// is a few small values, and the inner codec chain and grid of inner chunks of shards).
pub(crate) const MAX_ENTRIES: usize = 256;

/// The chain a read's units decode with, as memoized: the array's own chain is not held
/// (see the module docs), only the inner chain of shards, which the memo built itself.
#[derive(Clone)]
enum PlanChain {
    Outer,
    Inner(Arc<CodecChain>),
}

/// How the units of a read decode, for elements of the array's data type.
#[derive(Clone)]
struct MemoUnits {
    /// `None`: zarrs decodes whole chunks (a chain zarrbuf cannot split).
    plan: Option<(PlanChain, EncodedLayout)>,
    /// The grid of inner chunks when the units are the inner chunks of shards; `None`: the
    /// units are the chunks (of the array's own grid).
    subchunk_grid: Option<ChunkGrid>,
}

/// What a read's units are and how they decode ([`unit_codecs`]).
pub(crate) struct UnitCodecs {
    /// The plan of each unit's chain; `None`: zarrs decodes whole chunks.
    pub plan: Option<ChainPlan>,
    /// The units are the inner chunks of shards (else the chunks).
    pub subchunks: bool,
    /// The grid the units are cells of.
    pub grid: ChunkGrid,
}

/// The memoized facts of one array (see the module docs).
struct ArrayFacts {
    /// [`checked_data_type`]'s answer; `None` when it refused the array.
    dtype: Option<DataType>,
    /// zarrs' `subchunk_shape`: the inner chunk shape of a sharded array.
    subchunk_shape: Option<ChunkShape>,
    /// [`build_inner_chain`]'s answer (its error a sentence), for sharded arrays.
    inner: Option<std::result::Result<Arc<CodecChain>, String>>,
    /// How units of elements of `dtype` decode; `None` when that was an error.
    units: Option<MemoUnits>,
    /// Worked out when first asked for (reads without a chunk cache never ask); any array
    /// the entry serves has the same metadata, attributes aside.
    fingerprint: OnceLock<u64>,
}

impl ArrayFacts {
    fn compute<S: ?Sized>(array: &Array<S>) -> ArrayFacts {
        let dtype = checked_data_type(array).ok();
        let inner = array.is_sharded().then(|| build_inner_chain(array));
        // Only for arrays whose chunk shapes passed the checks: zarrs builds the grid of
        // inner chunks with an `expect` on their dimensionality.
        let units = dtype.and_then(|t| {
            let u = fresh_unit_codecs(array, t.size(), inner.clone()).ok()?;
            let plan = match u.plan {
                None => None,
                Some(p) if u.subchunks => Some((PlanChain::Inner(p.chain), p.layout)),
                Some(p) => Some((PlanChain::Outer, p.layout)),
            };
            Some(MemoUnits {
                plan,
                subchunk_grid: u.subchunks.then_some(u.grid),
            })
        });
        ArrayFacts {
            dtype,
            subchunk_shape: array.subchunk_shape(),
            inner,
            units,
            fingerprint: OnceLock::new(),
        }
    }
}

struct Entry {
    chain: Weak<CodecChain>,
    grid: Weak<dyn ChunkGridTraits>,
    shape: Vec<u64>,
    facts: Arc<ArrayFacts>,
}

impl Entry {
    fn new<S: ?Sized>(array: &Array<S>, chain: &Arc<CodecChain>, facts: Arc<ArrayFacts>) -> Self {
        Entry {
            chain: Arc::downgrade(chain),
            grid: Arc::downgrade(grid_arc(array)),
            shape: array.shape().to_vec(),
            facts,
        }
    }

    /// Whether this entry is `array`'s, whose chain is `chain` (see the module docs).
    fn serves<S: ?Sized>(&self, array: &Array<S>, chain: &Arc<CodecChain>) -> bool {
        std::ptr::eq(self.chain.as_ptr(), Arc::as_ptr(chain))
            && std::ptr::addr_eq(self.grid.as_ptr(), Arc::as_ptr(grid_arc(array)))
            && self.shape == array.shape()
    }
}

/// The `Arc` inside the array's chunk grid.
fn grid_arc<S: ?Sized>(array: &Array<S>) -> &Arc<dyn ChunkGridTraits> {
    array.chunk_grid()
}

#[derive(Default)]
struct Memo {
    /// Chain address -> the entry and when it was last used.
    entries: HashMap<usize, (Arc<Entry>, u64)>,
    tick: u64,
}

impl Memo {
    /// The entry filed at chain address `at`, marked as used.
    fn get(&mut self, at: usize) -> Option<Arc<Entry>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(&at).map(|(entry, used)| {
            *used = tick;
            entry.clone()
        })
    }

    /// Files `entry` at chain address `at` (replacing the entry there), after dropping the
    /// entries of dropped arrays and, when the memo is still full, the least recently used.
    fn insert(&mut self, at: usize, entry: Arc<Entry>) {
        self.entries.retain(|_, (e, _)| e.chain.strong_count() > 0);
        if self.entries.len() >= MAX_ENTRIES
            && !self.entries.contains_key(&at)
            && let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k)
        {
            self.entries.remove(&oldest);
        }
        self.tick += 1;
        self.entries.insert(at, (entry, self.tick));
    }
}

/// One per process: a forked child does not lock what its parent's threads held.
static MEMO: ProcessLocal<Mutex<Memo>> = ProcessLocal::new(Mutex::default);

fn memo() -> MutexGuard<'static, Memo> {
    MEMO.get().lock().unwrap_or_else(|p| p.into_inner())
}

fn address(chain: &Arc<CodecChain>) -> usize {
    Arc::as_ptr(chain) as usize
}

/// The facts of `array`, from the memo when its entry serves it (see the module docs),
/// else computed and remembered.
fn facts_of<S: ?Sized>(array: &Array<S>) -> Arc<ArrayFacts> {
    let chain = array.codecs();
    let at = address(&chain);
    let found = memo().get(at);
    // Compared outside the lock: concurrent reads of other arrays do not wait on it.
    if let Some(entry) = found
        && entry.serves(array, &chain)
    {
        return entry.facts.clone();
    }
    let facts = Arc::new(ArrayFacts::compute(array));
    memo().insert(at, Arc::new(Entry::new(array, &chain, facts.clone())));
    facts
}

/// zarrbuf's data type for a zarrs array, checked to be one zarrbuf can read and write:
/// `Unsupported` for variable-length types, `Zarr` for chunks too large to exist or
/// inner chunks that do not fit their shards (see `data_type.rs`, where the check is). The
/// verdict is memoized per array; a refusal is checked afresh, so its error names `array`.
pub(crate) fn data_type_of<S: ?Sized>(array: &Array<S>) -> Result<DataType> {
    match facts_of(array).dtype {
        Some(dtype) => Ok(dtype),
        None => checked_data_type(array),
    }
}

/// The inner chunk shape of a sharded array (zarrs' `subchunk_shape`), memoized.
pub(crate) fn subchunk_shape_of<S: ?Sized>(array: &Array<S>) -> Option<ChunkShape> {
    facts_of(array).subchunk_shape.clone()
}

/// The codec chain of the inner chunks of a sharded array, memoized.
pub(crate) fn inner_chain<S: ?Sized>(
    array: &Array<S>,
) -> std::result::Result<Arc<CodecChain>, String> {
    match &facts_of(array).inner {
        Some(inner) => inner.clone(),
        None => build_inner_chain(array),
    }
}

/// A hash of the array's metadata as JSON, attributes left out (they do not change what a
/// chunk decodes to, and a writer that updates them must still reach a reader's entries):
/// what a chunk cache tells arrays re-created at one node apart by. Memoized.
pub(crate) fn metadata_fingerprint<S: ?Sized>(array: &Array<S>) -> u64 {
    *facts_of(array)
        .fingerprint
        .get_or_init(|| fresh_fingerprint(array))
}

/// What the units of a read of `array` with elements of `elem` bytes are, and how each
/// decodes: the inner chunks of shards with the inner chain's plan, the chunks with the
/// array's chain's plan, or (chains zarrbuf cannot split) the chunks decoded by zarrs.
/// Memoized for the array's own element size.
pub(crate) fn unit_codecs<S: ?Sized>(array: &Array<S>, elem: usize) -> Result<UnitCodecs> {
    let facts = facts_of(array);
    match (&facts.units, facts.dtype) {
        (Some(u), Some(dtype)) if dtype.size() == elem => Ok(UnitCodecs {
            plan: u.plan.as_ref().map(|(chain, layout)| ChainPlan {
                chain: match chain {
                    PlanChain::Outer => array.codecs(),
                    PlanChain::Inner(inner) => inner.clone(),
                },
                layout: layout.clone(),
            }),
            subchunks: u.subchunk_grid.is_some(),
            grid: u
                .subchunk_grid
                .clone()
                .unwrap_or_else(|| array.chunk_grid().clone()),
        }),
        _ => fresh_unit_codecs(array, elem, facts.inner.clone()),
    }
}

/// [`unit_codecs`] worked out from the metadata; `inner` is the inner chain of a sharded
/// array when the caller has it.
fn fresh_unit_codecs<S: ?Sized>(
    array: &Array<S>,
    elem: usize,
    inner: Option<std::result::Result<Arc<CodecChain>, String>>,
) -> Result<UnitCodecs> {
    let zerr = |e: String| Error::zarr(array.path().as_str(), e, None);
    if array.is_exclusively_sharded() {
        let inner = inner
            .unwrap_or_else(|| build_inner_chain(array))
            .map_err(zerr)?;
        if let Some(plan) = ChainPlan::new(inner, elem, array.dimensionality())? {
            return Ok(UnitCodecs {
                plan: Some(plan),
                subchunks: true,
                grid: array.subchunk_grid(),
            });
        }
        return Ok(UnitCodecs {
            plan: None,
            subchunks: false,
            grid: array.chunk_grid().clone(),
        });
    }
    Ok(UnitCodecs {
        plan: ChainPlan::new(array.codecs(), elem, array.dimensionality())?,
        subchunks: false,
        grid: array.chunk_grid().clone(),
    })
}

/// The codec chain of the inner chunks of a sharded array, built from its configuration.
fn build_inner_chain<S: ?Sized>(array: &Array<S>) -> std::result::Result<Arc<CodecChain>, String> {
    let cfg = array
        .codecs()
        .array_to_bytes_codec()
        .configuration_v3(&CodecMetadataOptions::default())
        .ok_or("the sharding codec has no configuration")?;
    let ShardingCodecConfiguration::V1(sc) =
        ShardingCodecConfiguration::try_from_configuration(cfg)
            .map_err(|e| format!("sharding configuration: {e}"))?
    else {
        return Err("unknown sharding configuration version".into());
    };
    CodecChain::from_metadata(&sc.codecs)
        .map(Arc::new)
        .map_err(|e| format!("inner codecs of the shards: {e}"))
}

/// [`metadata_fingerprint`] worked out: the metadata serialized and hashed.
fn fresh_fingerprint<S: ?Sized>(array: &Array<S>) -> u64 {
    let mut json = serde_json::to_value(array.metadata()).unwrap_or(serde_json::Value::Null);
    if let Some(map) = json.as_object_mut() {
        map.remove("attributes");
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    json.to_string().hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use zarrs::array::{ArrayBuilder, data_type};
    use zarrs::storage::store::MemoryStore;

    fn sharded(path: &str, shape: u64) -> Array<MemoryStore> {
        let store = Arc::new(MemoryStore::new());
        let mut b = ArrayBuilder::new(vec![shape, 8], vec![4, 8], data_type::float32(), 0f32);
        b.subchunk_shape(vec![2, 4]);
        b.build(store, path).unwrap()
    }

    fn plain(path: &str) -> Array<MemoryStore> {
        let store = Arc::new(MemoryStore::new());
        ArrayBuilder::new(vec![8, 8], vec![4, 4], data_type::uint16(), 0u16)
            .build(store, path)
            .unwrap()
    }

    fn is_memoized<S: ?Sized>(array: &Array<S>) -> bool {
        memo().entries.contains_key(&address(&array.codecs()))
    }

    /// The memo gives what a fresh computation gives, for sharded and plain arrays, and the
    /// second lookup is the memo's entry.
    #[test]
    fn memoized_facts_are_the_fresh_ones() {
        for array in [sharded("/s", 10), plain("/p")] {
            let first = facts_of(&array);
            assert!(
                Arc::ptr_eq(&first, &facts_of(&array)),
                "the second lookup hits"
            );
            assert_eq!(data_type_of(&array).ok(), checked_data_type(&array).ok());
            assert_eq!(subchunk_shape_of(&array), array.subchunk_shape());
            assert_eq!(metadata_fingerprint(&array), fresh_fingerprint(&array));
            let dtype = checked_data_type(&array).unwrap();
            let (memo, fresh) = (
                unit_codecs(&array, dtype.size()).unwrap(),
                fresh_unit_codecs(&array, dtype.size(), None).unwrap(),
            );
            assert_eq!(memo.subchunks, fresh.subchunks);
            assert_eq!(memo.grid.grid_shape(), fresh.grid.grid_shape());
            let (m, f) = (memo.plan.unwrap(), fresh.plan.unwrap());
            assert_eq!(m.layout, f.layout);
            assert_eq!(
                m.chain.create_metadatas(&Default::default()),
                f.chain.create_metadatas(&Default::default())
            );
        }
        let s = sharded("/s2", 10);
        assert_eq!(
            inner_chain(&s)
                .unwrap()
                .create_metadatas(&Default::default()),
            build_inner_chain(&s)
                .unwrap()
                .create_metadatas(&Default::default())
        );
        assert!(inner_chain(&plain("/p2")).is_err());
    }

    /// After `set_shape` the memoized facts that depend on the shape follow it: the
    /// fingerprint and the grid of inner chunks.
    #[test]
    fn facts_follow_set_shape() {
        let mut array = sharded("/grow", 8);
        let before = metadata_fingerprint(&array);
        let grid_before = unit_codecs(&array, 4).unwrap().grid.grid_shape().to_vec();
        assert_eq!(grid_before, vec![4, 2]);
        array.set_shape(vec![16, 8]).unwrap();
        assert_ne!(metadata_fingerprint(&array), before);
        assert_eq!(metadata_fingerprint(&array), fresh_fingerprint(&array));
        assert_eq!(
            unit_codecs(&array, 4).unwrap().grid.grid_shape(),
            &[8, 2],
            "the grid of inner chunks covers the new shape"
        );
    }

    /// Attributes are left out of the fingerprint: a change to them keeps the entry, and
    /// the memoized fingerprint is still the fresh one.
    #[test]
    fn attributes_change_no_fact() {
        let mut array = plain("/attrs");
        let before = facts_of(&array);
        array
            .attributes_mut()
            .insert("units".into(), serde_json::json!("m"));
        assert!(Arc::ptr_eq(&before, &facts_of(&array)));
        assert_eq!(metadata_fingerprint(&array), fresh_fingerprint(&array));
    }

    /// Arrays sharing one chain (`with_storage`) with other shapes each get their own facts.
    #[test]
    fn arrays_sharing_a_chain_keep_their_own_facts() {
        let a = sharded("/shared", 8);
        let mut b = a.with_storage(Arc::new(MemoryStore::new()));
        b.set_shape(vec![12, 8]).unwrap();
        for _ in 0..2 {
            assert_eq!(unit_codecs(&a, 4).unwrap().grid.grid_shape(), &[4, 2]);
            assert_eq!(unit_codecs(&b, 4).unwrap().grid.grid_shape(), &[6, 2]);
            assert_ne!(metadata_fingerprint(&a), metadata_fingerprint(&b));
        }
    }

    /// A refused array is refused afresh, naming itself; an element size other than the
    /// array's is planned afresh.
    #[test]
    fn errors_and_other_element_sizes_are_not_memoized() {
        let store = Arc::new(MemoryStore::new());
        let huge = ArrayBuilder::new(vec![u64::MAX], vec![u64::MAX], data_type::float64(), 0f64)
            .build(store, "/huge")
            .unwrap();
        for _ in 0..2 {
            let e = data_type_of(&huge).unwrap_err().to_string();
            assert!(e.contains("/huge") && e.contains("2^64"), "{e}");
        }
        let array = plain("/elem");
        let two = unit_codecs(&array, 2).unwrap().plan.unwrap();
        let one = unit_codecs(&array, 1).unwrap().plan.unwrap();
        assert_eq!(two.layout, one.layout);
        assert!(Arc::ptr_eq(&two.chain, &array.codecs()));
    }

    /// A dropped array's entry goes at the next insertion; the entry never held its chain.
    #[test]
    fn entries_of_dropped_arrays_are_pruned() {
        let array = plain("/dropped");
        data_type_of(&array).unwrap();
        assert!(is_memoized(&array));
        let weak = Arc::downgrade(&array.codecs());
        let at = address(&array.codecs());
        drop(array);
        assert_eq!(
            weak.strong_count(),
            0,
            "the memo does not keep the chain alive"
        );
        let other = sharded("/other", 8);
        data_type_of(&other).unwrap();
        // (Another test's chain may since have been allocated at the freed address.)
        let dead = memo()
            .entries
            .get(&at)
            .is_some_and(|(e, _)| e.chain.strong_count() == 0);
        assert!(!dead, "the dropped array's entry is gone");
    }

    /// A memo stays within its bound, the least recently used entry leaving first.
    #[test]
    fn the_memo_is_bounded() {
        let mut memo = Memo::default();
        let arrays: Vec<_> = (0..=MAX_ENTRIES)
            .map(|i| plain(&format!("/b{i}")))
            .collect();
        let entry = |a: &Array<MemoryStore>| {
            Arc::new(Entry::new(a, &a.codecs(), Arc::new(ArrayFacts::compute(a))))
        };
        for a in &arrays[..MAX_ENTRIES] {
            memo.insert(address(&a.codecs()), entry(a));
        }
        assert!(memo.get(address(&arrays[0].codecs())).is_some());
        let last = &arrays[MAX_ENTRIES];
        memo.insert(address(&last.codecs()), entry(last));
        assert_eq!(memo.entries.len(), MAX_ENTRIES);
        assert!(memo.get(address(&last.codecs())).is_some());
        assert!(
            memo.get(address(&arrays[0].codecs())).is_some(),
            "used last, kept"
        );
        assert!(
            memo.get(address(&arrays[1].codecs())).is_none(),
            "the least recently used left"
        );
    }
}
