//! The decoded-chunk cache on the staged device read path, run by the device trait's host
//! twin (`PipelineMode::Staged` into host memory: the staged pipeline's slots, copies and
//! scatter kernel, and with `Decode::Gpu` the device decoder's batches — the code a CUDA
//! read runs, with host memory as the device's). A read with a cache places hits from the
//! cache with the scatter kernel and sends only misses through the pipeline, each decoded
//! into a buffer of its own that the cache keeps.
//!
//! Checked: every fixture reads exactly the same with a cache as without, whole and by
//! subsets that cut through chunks, on both decoders, and a second read is all hits; a
//! second epoch fetches nothing from the store (`Counting`, a zarrs store over a memory
//! store that counts chunk requests) for plain and sharded arrays and missing chunks;
//! capacity evicts; entries are filed under the memory they live in, host apart from CUDA; a
//! chunk the device decoder rejects is never kept; a write through zarrbuf is seen; readers
//! on several threads share one cache.

use crate::common::fixtures;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use zarrbuf::cache::{ArrayId, ChunkCache, ChunkKey};
use zarrbuf::options::{Decode, PipelineMode, Progress, ReadOptions};
use zarrbuf::{ArrayReadExt, ArrayWriteExt, Buffer, BufferPrototype, Device, NDBuffer};
use zarrs::array::codec::{GzipCodec, ZstdCodec};
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey};

/// The staged route on the host twin, decoded by `decode`, through `cache`.
fn cached(cache: &ChunkCache, decode: Decode) -> ReadOptions {
    uncached(decode).with_cache(cache.clone())
}

fn uncached(decode: Decode) -> ReadOptions {
    ReadOptions::default()
        .with_mode(PipelineMode::Staged)
        .with_decode(decode)
        .with_concurrency(2)
}

fn bytes(b: &NDBuffer) -> Vec<u8> {
    b.to_native_bytes().unwrap()
}

/// Subsets of an array of `shape` that cut through chunks: the middle half, a corner, one
/// element, a slab one element thick.
fn subsets(shape: &[u64]) -> Vec<Vec<Range<u64>>> {
    let mid: Vec<Range<u64>> = shape.iter().map(|&n| n / 4..n - n / 4).collect();
    let corner: Vec<Range<u64>> = shape.iter().map(|&n| n.saturating_sub(3)..n).collect();
    let one: Vec<Range<u64>> = shape.iter().map(|&n| n / 2..(n / 2 + 1).min(n)).collect();
    let mut slab: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
    if let Some(first) = slab.first_mut() {
        *first = shape[0] / 3..(shape[0] / 3 + 1).min(shape[0]);
    }
    vec![mid, corner, one, slab]
}

#[test]
fn every_fixture_reads_the_same_through_a_device_cache_and_hits_the_second_time() {
    let mut hit_fixtures = 0;
    for f in &fixtures() {
        let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
        let cpu = BufferPrototype::cpu();
        for decode in [Decode::Cpu, Decode::Gpu] {
            let want = array.read_opt(&all, &cpu, &uncached(decode)).unwrap();
            let cache = ChunkCache::new(256 << 20);
            let opts = cached(&cache, decode);
            let what = |s: &str| format!("{} ({decode:?}): {s}", f.name);
            let first = array
                .read_opt(&all, &cpu, &opts)
                .unwrap_or_else(|e| panic!("{}: {e}", what("first read")));
            assert!(
                bytes(&first) == bytes(&want),
                "{}",
                what("first read differs")
            );
            let after_first = cache.stats();
            assert_eq!(after_first.hits, 0, "{}", what("a fresh cache hit"));
            assert_eq!(
                after_first.entries,
                after_first.misses,
                "{}",
                what("every missed unit is kept")
            );
            let second = array.read_opt(&all, &cpu, &opts).unwrap();
            assert!(
                bytes(&second) == bytes(&want),
                "{}",
                what("second read differs")
            );
            let after_second = cache.stats();
            assert_eq!(
                (after_second.misses, after_second.hits),
                (after_first.misses, after_first.misses),
                "{}",
                what("the second read is not all hits")
            );
            // Subsets cutting through chunks, from the cache, and from a fresh one (where the
            // whole read that follows mixes hits and misses).
            let fresh = ChunkCache::new(256 << 20);
            for subset in subsets(array.shape()) {
                let ranges: Vec<Range<usize>> = subset
                    .iter()
                    .map(|r| r.start as usize..r.end as usize)
                    .collect();
                let part = want.get(&ranges).unwrap();
                for (name, c) in [("warm", &cache), ("fresh", &fresh)] {
                    let got = array
                        .read_opt(&subset, &cpu, &cached(c, decode))
                        .unwrap_or_else(|e| panic!("{}: {e}", what(&format!("{subset:?}"))));
                    assert!(
                        bytes(&got) == bytes(&part),
                        "{}",
                        what(&format!("{subset:?} from the {name} cache differs"))
                    );
                }
            }
            assert_eq!(cache.stats().misses, after_first.misses, "{}", what("warm"));
            let mixed = array.read_opt(&all, &cpu, &cached(&fresh, decode)).unwrap();
            assert!(
                bytes(&mixed) == bytes(&want),
                "{}",
                what("mixed read differs")
            );
            if after_first.misses > 0 {
                hit_fixtures += 1;
            }
        }
    }
    assert!(
        hit_fixtures >= 60,
        "only {hit_fixtures} fixture reads cached anything"
    );
}

/// A zarrs store over a memory store that counts the requests for chunk (and shard) keys.
struct Counting {
    inner: Arc<MemoryStore>,
    gets: Mutex<HashMap<String, usize>>,
}

impl Counting {
    fn new(inner: Arc<MemoryStore>) -> Arc<Self> {
        Arc::new(Counting {
            inner,
            gets: Mutex::default(),
        })
    }

    fn chunk_requests(&self) -> usize {
        self.gets.lock().unwrap().values().sum()
    }

    fn count(&self, key: &StoreKey) {
        let name = key.as_str();
        if !name.ends_with("zarr.json") {
            *self.gets.lock().unwrap().entry(name.into()).or_default() += 1;
        }
    }
}

impl ReadableStorageTraits for Counting {
    fn get(&self, key: &StoreKey) -> Result<zarrs::storage::MaybeBytes, StorageError> {
        self.count(key);
        self.inner.get(key)
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        self.count(key);
        self.inner.get_partial_many(key, byte_ranges)
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.count(key);
        self.inner.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

/// How a test array is stored.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Zstd,
    Gzip,
    /// zstd inner chunks of 2 × 2 × 2 in each shard.
    Sharded,
}

const SHAPE: [u64; 3] = [20, 30, 44];
const CHUNK: [u64; 3] = [8, 8, 16];

/// A float32 array of [`SHAPE`] (value = C-order index) in chunks of [`CHUNK`] (edge
/// chunks cut by the array's end), stored as `kind`, with the chunks listed in `holes` never
/// written (they read as the fill value, 7); opened again through a [`Counting`] store.
fn counted_array(kind: Kind, holes: &[[u64; 3]]) -> (Array<Counting>, Arc<Counting>, NDBuffer) {
    let memory = Arc::new(MemoryStore::new());
    let mut builder = match kind {
        Kind::Sharded => {
            let shard: Vec<u64> = CHUNK.iter().map(|n| 2 * n).collect();
            let mut b = ArrayBuilder::new(SHAPE.to_vec(), shard, data_type::float32(), 7.0f32);
            b.subchunk_shape(CHUNK.to_vec());
            b
        }
        _ => ArrayBuilder::new(SHAPE.to_vec(), CHUNK.to_vec(), data_type::float32(), 7.0f32),
    };
    match kind {
        Kind::Gzip => builder.bytes_to_bytes_codecs(vec![Arc::new(GzipCodec::new(1).unwrap())]),
        _ => builder.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]),
    };
    let writer = builder.build(memory.clone(), "/a").unwrap();
    writer.store_metadata().unwrap();
    let n = SHAPE.iter().product::<u64>() as usize;
    let mut values: Vec<f32> = (0..n).map(|v| v as f32).collect();
    let dims = SHAPE.map(|n| n as usize);
    let data = NDBuffer::from_vec(values.clone(), &dims).unwrap();
    writer.write_all(&data).unwrap();
    for hole in holes {
        writer.erase_chunk(hole).unwrap();
        // What the array holds now: the fill value there.
        let grid = match kind {
            Kind::Sharded => CHUNK.map(|c| 2 * c),
            _ => CHUNK,
        };
        for (i, v) in values.iter_mut().enumerate() {
            let at = [i / (dims[1] * dims[2]), i / dims[2] % dims[1], i % dims[2]];
            if (0..3).all(|d| at[d] as u64 / grid[d] == hole[d]) {
                *v = 7.0;
            }
        }
    }
    let counting = Counting::new(memory);
    let array = Array::open(counting.clone(), "/a").unwrap();
    (array, counting, NDBuffer::from_vec(values, &dims).unwrap())
}

/// Patches that cut through chunks (and shards), like a training loop's.
fn patches() -> Vec<Vec<Range<u64>>> {
    vec![
        vec![3..4, 5..21, 10..40],
        vec![0..20, 0..30, 0..44],
        vec![19..20, 29..30, 43..44],
        vec![7..9, 7..9, 15..17],
        vec![10..18, 20..30, 0..44],
    ]
}

fn part(want: &NDBuffer, subset: &[Range<u64>]) -> Vec<u8> {
    let r: Vec<Range<usize>> = subset
        .iter()
        .map(|r| r.start as usize..r.end as usize)
        .collect();
    bytes(&want.get(&r).unwrap())
}

#[test]
fn the_second_epoch_reads_nothing_from_the_store() {
    let cpu = BufferPrototype::cpu();
    for kind in [Kind::Zstd, Kind::Gzip, Kind::Sharded] {
        for decode in [Decode::Cpu, Decode::Gpu] {
            let (array, store, want) = counted_array(kind, &[[1, 1, 1]]);
            let cache = ChunkCache::new(64 << 20);
            let reports = Arc::new(Mutex::new(Vec::<Progress>::new()));
            let seen = reports.clone();
            let opts = cached(&cache, decode).with_progress(move |p| seen.lock().unwrap().push(p));
            for p in patches() {
                let got = array.read_opt(&p, &cpu, &opts).unwrap();
                assert!(bytes(&got) == part(&want, &p), "{kind:?} {decode:?} {p:?}");
            }
            let epoch1 = (store.chunk_requests(), cache.stats());
            assert!(epoch1.0 > 0 && epoch1.1.entries > 0, "{kind:?}: {epoch1:?}");
            reports.lock().unwrap().clear();
            for p in patches() {
                let got = array.read_opt(&p, &cpu, &opts).unwrap();
                assert!(
                    bytes(&got) == part(&want, &p),
                    "{kind:?} {decode:?} {p:?} cached"
                );
            }
            let stats = cache.stats();
            assert_eq!(
                store.chunk_requests(),
                epoch1.0,
                "{kind:?} {decode:?}: the second epoch went to the store"
            );
            assert_eq!(stats.misses, epoch1.1.misses, "{kind:?} {decode:?}");
            assert_eq!(stats.hits - epoch1.1.hits, epoch1.1.misses + epoch1.1.hits);
            // Progress still counts every unit of every read, each read reaching its end.
            let reports = reports.lock().unwrap();
            let ends: Vec<&Progress> = reports
                .iter()
                .filter(|p| p.chunks_done == p.chunks_total)
                .collect();
            assert_eq!(
                ends.len(),
                patches().len(),
                "{kind:?} {decode:?}: {reports:?}"
            );
            let units: u64 = ends.iter().map(|p| p.chunks_total as u64).sum();
            assert_eq!(units, stats.hits - epoch1.1.hits);
        }
    }
}

#[test]
fn missing_chunks_are_cached_as_the_fill_value() {
    let cpu = BufferPrototype::cpu();
    for decode in [Decode::Cpu, Decode::Gpu] {
        let (array, store, want) = counted_array(Kind::Zstd, &[[0, 0, 0], [2, 3, 2]]);
        let cache = ChunkCache::new(64 << 20);
        let opts = cached(&cache, decode);
        let all: Vec<Range<u64>> = SHAPE.iter().map(|&n| 0..n).collect();
        let first = array.read_opt(&all, &cpu, &opts).unwrap();
        assert!(bytes(&first) == bytes(&want));
        let before = store.chunk_requests();
        let key = |c: Vec<u64>| ChunkKey::new(ArrayId::of(&array), c, Device::Cpu);
        let hole = cache
            .get(&key(vec![2, 3, 2]))
            .expect("the missing chunk is kept");
        // An edge chunk, cut at the array's end: 4 × 6 × 12 elements of 7.0.
        assert_eq!(hole.len(), 4 * 6 * 12 * 4);
        assert!(
            hole.to_vec()
                .unwrap()
                .chunks(4)
                .all(|v| v == 7f32.to_ne_bytes())
        );
        let again = array.read_opt(&all, &cpu, &opts).unwrap();
        assert!(bytes(&again) == bytes(&want));
        assert_eq!(
            store.chunk_requests(),
            before,
            "{decode:?}: missing chunks fetched again"
        );
    }
}

#[test]
fn capacity_evicts_and_oversized_chunks_are_not_kept() {
    let cpu = BufferPrototype::cpu();
    let chunk_bytes = CHUNK.iter().product::<u64>() * 4;
    let all: Vec<Range<u64>> = SHAPE.iter().map(|&n| 0..n).collect();
    for decode in [Decode::Cpu, Decode::Gpu] {
        let (array, _, want) = counted_array(Kind::Zstd, &[]);
        let cache = ChunkCache::new(3 * chunk_bytes);
        let opts = cached(&cache, decode);
        for _ in 0..2 {
            let got = array.read_opt(&all, &cpu, &opts).unwrap();
            assert!(bytes(&got) == bytes(&want), "{decode:?}");
            let s = cache.stats();
            assert!(s.resident_bytes <= 3 * chunk_bytes, "{decode:?}: {s:?}");
            // 36 units (edge ones smaller), room for 3 whole chunks: most were evicted.
            assert!(s.evictions >= 30 && s.entries >= 3, "{decode:?}: {s:?}");
        }
        // A cache smaller than every chunk (the smallest, at the corner, holds 4 × 6 × 12
        // float32) keeps nothing, and reads stay exact.
        let tiny = ChunkCache::new(4 * 6 * 12 * 4 - 1);
        let got = array.read_opt(&all, &cpu, &cached(&tiny, decode)).unwrap();
        assert!(bytes(&got) == bytes(&want));
        let s = tiny.stats();
        assert_eq!((s.entries, s.inserted_bytes), (0, 0), "{decode:?}: {s:?}");
    }
}

#[test]
fn host_and_device_entries_of_a_chunk_are_kept_apart() {
    let cpu = BufferPrototype::cpu();
    let (array, _, want) = counted_array(Kind::Zstd, &[]);
    let id = ArrayId::of(&array);
    let cache = ChunkCache::new(64 << 20);
    let chunk = vec![1u64, 1, 1];
    let chunk_bytes = (CHUNK.iter().product::<u64>() * 4) as usize;
    // What a CUDA read would have kept on device 0 (bytes that are not the chunk's): a
    // read on the host twin, whose device memory is host memory, never takes it.
    cache.insert(
        ChunkKey::new(id.clone(), chunk.clone(), Device::Cuda(0)),
        Buffer::from_vec(vec![0xee; chunk_bytes]),
    );
    let subset = [8..16, 8..16, 16..32];
    for decode in [Decode::Cpu, Decode::Gpu] {
        let got = array
            .read_opt(&subset, &cpu, &cached(&cache, decode))
            .unwrap();
        assert!(bytes(&got) == part(&want, &subset), "{decode:?}");
    }
    let host = cache
        .get(&ChunkKey::new(id.clone(), chunk.clone(), Device::Cpu))
        .expect("the host twin keeps the chunk under host memory");
    assert_eq!(host.to_vec().unwrap(), part(&want, &subset));
    let device = cache
        .get(&ChunkKey::new(id, chunk, Device::Cuda(0)))
        .expect("the device entry stays");
    assert_eq!(device.to_vec().unwrap(), vec![0xee; chunk_bytes]);
}

#[test]
fn a_write_through_zarrbuf_is_seen_by_the_next_cached_read() {
    let cpu = BufferPrototype::cpu();
    for decode in [Decode::Cpu, Decode::Gpu] {
        let store = Arc::new(MemoryStore::new());
        let array = ArrayBuilder::new(SHAPE.to_vec(), CHUNK.to_vec(), data_type::float32(), 0f32)
            .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))])
            .build(store, "/w")
            .unwrap();
        array.store_metadata().unwrap();
        let cache = ChunkCache::new(64 << 20);
        let opts = cached(&cache, decode);
        let subset = [0..8, 0..8, 0..16];
        let zeros = array.read_opt(&subset, &cpu, &opts).unwrap();
        assert!(bytes(&zeros).iter().all(|&b| b == 0));
        let ones = NDBuffer::from_vec(vec![1f32; 8 * 8 * 16], &[8, 8, 16]).unwrap();
        array.write(&subset, &ones).unwrap();
        let got = array.read_opt(&subset, &cpu, &opts).unwrap();
        assert!(
            bytes(&got) == bytes(&ones),
            "{decode:?}: a stale chunk was read"
        );
    }
}

#[test]
fn a_chunk_the_device_decoder_rejects_is_not_kept() {
    // The frame header is intact, the compressed blocks are not: only the decoder finds it,
    // after its batch has run.
    let store = crate::device_decode::damaged("v3_large_3d", "cached", "c/1/1/1", |b| {
        let n = b.len();
        for x in &mut b[n / 2..n - 4] {
            *x ^= 0x5a;
        }
    });
    let array = zarrbuf::open(store.to_str().unwrap(), "").unwrap();
    let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
    let cache = ChunkCache::new(256 << 20);
    let e = array
        .read_opt(&all, &BufferPrototype::cpu(), &cached(&cache, Decode::Gpu))
        .expect_err("a damaged chunk fails the read");
    assert!(e.to_string().contains("[1, 1, 1]"), "{e}");
    let key = ChunkKey::new(ArrayId::of(&array), vec![1, 1, 1], Device::Cpu);
    assert!(cache.get(&key).is_none(), "the rejected chunk was kept");
    // The read reports the damage again rather than a cached chunk.
    let again = array.read_opt(&all, &BufferPrototype::cpu(), &cached(&cache, Decode::Gpu));
    assert!(again.is_err());
}

#[test]
fn concurrent_readers_share_one_device_cache() {
    let (array, store, want) = counted_array(Kind::Sharded, &[[0, 1, 0]]);
    let array = Arc::new(array);
    let cache = ChunkCache::new(64 << 20);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (array, cache, want) = (array.clone(), cache.clone(), &want);
            s.spawn(move || {
                let decode = if t % 2 == 0 { Decode::Cpu } else { Decode::Gpu };
                for round in 0..3 {
                    for p in patches().iter().cycle().skip(t).take(5) {
                        let got = array
                            .read_opt(p, &BufferPrototype::cpu(), &cached(&cache, decode))
                            .unwrap();
                        assert!(
                            bytes(&got) == part(want, p),
                            "thread {t} round {round} {p:?}"
                        );
                    }
                }
            });
        }
    });
    // Every unit was kept by someone: one more epoch fetches nothing.
    let before = store.chunk_requests();
    for p in patches() {
        let got = array.read_opt(&p, &BufferPrototype::cpu(), &cached(&cache, Decode::Cpu));
        assert!(bytes(&got.unwrap()) == part(&want, &p));
    }
    assert_eq!(store.chunk_requests(), before);
}
