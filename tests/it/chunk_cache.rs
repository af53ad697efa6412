#![allow(clippy::single_range_in_vec_init)] // one range per dimension of 1-d arrays
//! Reads through a decoded-chunk cache (`zarrbuf::cache::ChunkCache`): the same bytes as
//! uncached reads on every fixture and route, hits and misses counted, eviction within the
//! capacity, invalidation by writes through zarrbuf (from any handle on the array),
//! identities across opens and re-creations, concurrent readers, and damaged chunks never
//! kept.

use crate::common::{Fixture, fixtures};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use zarrbuf::cache::{ArrayId, ChunkCache, ChunkKey};
use zarrbuf::options::{PipelineMode, ReadOptions, StreamOptions, WriteOptions};
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer, Order};
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::store::MemoryStore;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("chunk-cache")
        .join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn expected(f: &Fixture) -> NDBuffer {
    zarrbuf::npy::read(&f.npy_path()).unwrap_or_else(|e| panic!("{}: {e}", f.name))
}

fn bytes(a: &NDBuffer) -> Vec<u8> {
    a.to_native_bytes().unwrap()
}

fn usize_ranges(subset: &[Range<u64>]) -> Vec<Range<usize>> {
    subset
        .iter()
        .map(|r| r.start as usize..r.end as usize)
        .collect()
}

/// The whole array, its middle, a corner crossing chunk edges, one element.
fn subsets(shape: &[u64]) -> Vec<Vec<Range<u64>>> {
    vec![
        shape.iter().map(|&n| 0..n).collect(),
        shape.iter().map(|&n| n / 4..n - n / 4).collect(),
        shape.iter().map(|&n| n.saturating_sub(3)..n).collect(),
        shape.iter().map(|&n| n / 2..(n / 2 + 1).min(n)).collect(),
    ]
}

/// A float32 array in memory, written with 0, 1, 2, ...
fn counting(shape: &[u64], chunks: &[u64]) -> Array<MemoryStore> {
    let store = Arc::new(MemoryStore::new());
    let array = ArrayBuilder::new(
        shape.to_vec(),
        chunks.to_vec(),
        data_type::float32(),
        0.0f32,
    )
    .build(store, "/x")
    .unwrap();
    let n: u64 = shape.iter().product();
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    array
        .write_all(
            &NDBuffer::from_vec((0..n).map(|v| v as f32).collect::<Vec<_>>(), &dims).unwrap(),
        )
        .unwrap();
    array
}

#[test]
fn every_fixture_reads_the_same_through_a_cache_cold_and_warm() {
    let all = fixtures();
    assert!(all.len() >= 40, "the manifest lists {} fixtures", all.len());
    for f in &all {
        let array =
            zarrbuf::open(&f.store_path(), &f.path).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let want = expected(f);
        let cache = ChunkCache::new(64 << 20);
        let mut staged = ReadOptions::default().with_cache(cache.clone());
        for mode in [PipelineMode::Auto, PipelineMode::Staged] {
            staged = staged.with_mode(mode);
            for subset in subsets(array.shape()) {
                let w = bytes(&want.get(&usize_ranges(&subset)).unwrap());
                for pass in ["cold", "warm"] {
                    let got = array
                        .read_opt(&subset, &BufferPrototype::cpu(), &staged)
                        .unwrap_or_else(|e| panic!("{} {subset:?} {pass}: {e}", f.name));
                    assert!(bytes(&got) == w, "{} {subset:?} {pass} {mode:?}", f.name);
                }
                // Into an F-order output: the copy out of the cache follows its strides.
                let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
                let mut out =
                    NDBuffer::empty(&shape, got_dtype(&array), Order::F, &BufferPrototype::cpu())
                        .unwrap();
                array.read_into_opt(&subset, &mut out, &staged).unwrap();
                assert!(bytes(&out) == w, "{} {subset:?} into F order", f.name);
            }
        }
        let s = cache.stats();
        assert!(s.hits > 0 && s.misses > 0, "{}: {s:?}", f.name);
        // The whole array was read first: every later lookup hit.
        assert_eq!(s.misses, s.entries, "{}: {s:?}", f.name);
    }
}

fn got_dtype<S: ?Sized + zarrs::storage::ReadableStorageTraits + 'static>(
    array: &Array<S>,
) -> zarrbuf::DataType {
    array.zarrbuf_data_type().unwrap()
}

#[test]
fn sharded_arrays_cache_inner_chunks() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_shard_end")
        .unwrap();
    let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let cache = ChunkCache::new(1 << 20);
    let opts = ReadOptions::default().with_cache(cache.clone());
    // 23 x 30 in shards of 10 x 16 holding inner chunks of 5 x 8: 5 x 4 inner chunks.
    array.read_all_opt(&BufferPrototype::cpu(), &opts).unwrap();
    assert_eq!(cache.stats().entries, 20);
    let one = ChunkKey::new(ArrayId::of(&array), vec![4, 3], zarrbuf::Device::Cpu);
    // The last inner chunk, cut at the array's end: 3 x 6 elements.
    let chunk = cache.get(&one).expect("inner chunk [4, 3] is cached");
    assert_eq!(chunk.len(), 3 * 6 * got_dtype(&array).size());
}

#[test]
fn hits_misses_and_eviction_within_the_capacity() {
    // 64 x 64 float32 in 16 x 16 chunks: 16 chunks of 1 KiB; room for 4.
    let array = counting(&[64, 64], &[16, 16]);
    let cache = ChunkCache::new(4 << 10);
    let opts = ReadOptions::default().with_cache(cache.clone());
    let cpu = BufferPrototype::cpu();
    let plain = array.read(&[0..16, 0..64], &cpu).unwrap();
    for _ in 0..2 {
        let got = array.read_opt(&[0..16, 0..64], &cpu, &opts).unwrap();
        assert_eq!(bytes(&got), bytes(&plain));
    }
    let s = cache.stats();
    assert_eq!((s.misses, s.hits, s.entries, s.evictions), (4, 4, 4, 0));
    assert_eq!(s.resident_bytes, 4 << 10);
    let got = array.read_opt(&[16..32, 0..64], &cpu, &opts).unwrap();
    assert_eq!(
        bytes(&got),
        bytes(&array.read(&[16..32, 0..64], &cpu).unwrap())
    );
    let s = cache.stats();
    assert_eq!((s.misses, s.entries, s.evictions), (8, 4, 4));
    assert!(s.resident_bytes <= cache.capacity());
    assert_eq!(s.inserted_bytes, 8 << 10);
    cache.clear();
    assert_eq!(cache.stats().entries, 0);
    // A cache smaller than one chunk keeps nothing and still reads right.
    let tiny = ChunkCache::new(100);
    let got = array
        .read_opt(
            &[3..40, 5..9],
            &cpu,
            &ReadOptions::default().with_cache(tiny.clone()),
        )
        .unwrap();
    assert_eq!(
        bytes(&got),
        bytes(&array.read(&[3..40, 5..9], &cpu).unwrap())
    );
    assert_eq!(tiny.stats().entries, 0);
}

#[test]
fn missing_chunks_are_cached_as_their_fill_value_until_a_write() {
    let store = Arc::new(MemoryStore::new());
    let array = ArrayBuilder::new(vec![8, 8], vec![4, 4], data_type::int32(), -5i32)
        .build(store, "/m")
        .unwrap();
    let cache = ChunkCache::new(1 << 20);
    let opts = ReadOptions::default().with_cache(cache.clone());
    let cpu = BufferPrototype::cpu();
    for _ in 0..2 {
        let got = array.read_opt(&[0..4, 0..8], &cpu, &opts).unwrap();
        assert_eq!(got.to_vec::<i32>().unwrap(), vec![-5; 32]);
    }
    assert_eq!((cache.stats().misses, cache.stats().hits), (2, 2));
    array
        .write_opt(
            &[1..2, 5..7],
            &NDBuffer::from_vec(vec![7i32, 8], &[1, 2]).unwrap(),
            &WriteOptions::default(),
        )
        .unwrap();
    let got = array.read_opt(&[1..2, 4..8], &cpu, &opts).unwrap();
    assert_eq!(got.to_vec::<i32>().unwrap(), vec![-5, 7, 8, -5]);
    // The untouched chunk [0, 0] is still cached; [0, 1] was dropped by the write.
    assert_eq!(cache.stats().entries, 2);
}

/// A directory array of 32 x 32 int32 in 8 x 8 chunks (zstd), written 0, 1, 2, ...
fn directory_array(name: &str) -> (PathBuf, Vec<i32>) {
    directory_array_of(name, 32, 8)
}

/// A `side`×`side` int32 array of `chunk`×`chunk` zstd chunks in a new directory, holding
/// 0, 1, 2, … in C order.
fn directory_array_of(name: &str, side: u64, chunk: u64) -> (PathBuf, Vec<i32>) {
    let dir = scratch(name);
    let store = zarrbuf::store::open_store(dir.to_str().unwrap()).unwrap();
    let array = ArrayBuilder::new(
        vec![side, side],
        vec![chunk, chunk],
        data_type::int32(),
        0i32,
    )
    .bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(
        1, false,
    ))])
    .build(store, "/a")
    .unwrap();
    array.store_metadata().unwrap();
    let data: Vec<i32> = (0..(side * side) as i32).collect();
    array
        .write_all(&NDBuffer::from_vec(data.clone(), &[side as usize, side as usize]).unwrap())
        .unwrap();
    (dir, data)
}

#[test]
fn writes_through_any_handle_invalidate_and_opens_share_entries() {
    let (dir, mut data) = directory_array("writes");
    let reader = zarrbuf::open(dir.to_str().unwrap(), "/a").unwrap();
    let writer = zarrbuf::open(dir.to_str().unwrap(), "a").unwrap();
    assert_eq!(ArrayId::of(&reader), ArrayId::of(&writer));
    let cache = ChunkCache::new(1 << 20);
    let opts = ReadOptions::default().with_cache(cache.clone());
    let cpu = BufferPrototype::cpu();
    let all = [0..32, 0..32];
    assert_eq!(
        reader
            .read_opt(&all, &cpu, &opts)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        data
    );
    // The other handle (another open of the same directory) hits the same entries.
    let before = cache.stats().hits;
    writer.read_opt(&[0..8, 0..8], &cpu, &opts).unwrap();
    assert_eq!(cache.stats().hits, before + 1);
    // Writes through the other handle, without a cache, by both write routes.
    for (k, mode) in [PipelineMode::Direct, PipelineMode::Staged]
        .into_iter()
        .enumerate()
    {
        let value = 1000 + k as i32;
        let patch: Vec<i32> = vec![value; 12 * 20];
        writer
            .write_opt(
                &[5..17, 3..23],
                &NDBuffer::from_vec(patch, &[12, 20]).unwrap(),
                &WriteOptions::default().with_mode(mode),
            )
            .unwrap();
        for r in 5..17 {
            for c in 3..23 {
                data[r * 32 + c] = value;
            }
        }
        let got = reader.read_opt(&all, &cpu, &opts).unwrap();
        assert_eq!(got.to_vec::<i32>().unwrap(), data, "after a {mode:?} write");
    }
    // 16 chunks cached; the writes touched 3 x 3 of them each time.
    let s = cache.stats();
    assert_eq!(s.entries, 16);
    assert_eq!(s.misses, 16 + 9 + 9, "{s:?}");
}

#[test]
fn an_array_recreated_with_other_metadata_never_hits_the_old_entries() {
    let store = Arc::new(MemoryStore::new());
    let cpu = BufferPrototype::cpu();
    let cache = ChunkCache::new(1 << 20);
    let opts = ReadOptions::default().with_cache(cache.clone());
    let old = ArrayBuilder::new(vec![8], vec![4], data_type::int32(), 1i32)
        .build(store.clone(), "/r")
        .unwrap();
    assert_eq!(
        old.read_opt(&[0..8], &cpu, &opts)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![1; 8]
    );
    let new = ArrayBuilder::new(vec![8], vec![4], data_type::int32(), 2i32)
        .build(store.clone(), "/r")
        .unwrap();
    assert_ne!(ArrayId::of(&old), ArrayId::of(&new));
    assert_eq!(
        new.read_opt(&[0..8], &cpu, &opts)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![2; 8]
    );
    // Another store with an array at the same path and metadata is another array.
    let other = ArrayBuilder::new(vec![8], vec![4], data_type::int32(), 1i32)
        .build(Arc::new(MemoryStore::new()), "/r")
        .unwrap();
    other
        .write_all(&NDBuffer::from_vec(vec![9i32; 8], &[8]).unwrap())
        .unwrap();
    assert_eq!(
        other
            .read_opt(&[0..8], &cpu, &opts)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![9; 8]
    );
    assert_eq!(cache.stats().hits, 0);
}

#[test]
fn concurrent_readers_share_one_cache() {
    let array = Arc::new(counting(&[96, 96], &[16, 16]));
    let cpu = BufferPrototype::cpu();
    let whole = array.read(&[0..96, 0..96], &cpu).unwrap();
    // Room for half the chunks: readers evict each other's chunks as they go.
    let cache = ChunkCache::new(18 << 10);
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let (array, cache, whole) = (array.clone(), cache.clone(), whole.clone());
            std::thread::spawn(move || {
                let opts = ReadOptions::default().with_cache(cache).with_concurrency(1);
                for k in 0..40u64 {
                    let r = (t * 13 + k * 7) % 80;
                    let c = (t * 5 + k * 11) % 70;
                    let subset = [r..r + 16, c..c + 26];
                    let got = array
                        .read_opt(&subset, &BufferPrototype::cpu(), &opts)
                        .unwrap();
                    let want = whole.get(&usize_ranges(&subset)).unwrap();
                    assert_eq!(bytes(&got), bytes(&want), "thread {t} read {k}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = cache.stats();
    assert!(s.hits > 0 && s.evictions > 0, "{s:?}");
    assert!(s.resident_bytes <= cache.capacity());
}

#[test]
fn a_damaged_chunk_is_an_error_and_is_not_kept() {
    let (dir, data) = directory_array("damaged");
    let chunk = dir.join("a/c/1/2");
    assert!(chunk.is_file(), "{chunk:?}");
    std::fs::write(&chunk, b"not zstd at all").unwrap();
    let array = zarrbuf::open(dir.to_str().unwrap(), "a").unwrap();
    let cache = ChunkCache::new(1 << 20);
    let cpu = BufferPrototype::cpu();
    for mode in [PipelineMode::Auto, PipelineMode::Staged] {
        let opts = ReadOptions::default()
            .with_cache(cache.clone())
            .with_mode(mode);
        let err = array.read_opt(&[8..16, 16..24], &cpu, &opts).unwrap_err();
        assert!(err.to_string().contains("c/1/2"), "{err}");
        assert!(array.read_opt(&[0..16, 8..24], &cpu, &opts).is_err());
    }
    let s = cache.stats();
    let damaged = ChunkKey::new(ArrayId::of(&array), vec![1, 2], zarrbuf::Device::Cpu);
    assert!(cache.get(&damaged).is_none());
    // Only whole good chunks were kept: the good ones of the second read.
    assert!(s.entries <= 3, "{s:?}");
    let good = array
        .read_opt(
            &[0..8, 0..8],
            &cpu,
            &ReadOptions::default().with_cache(cache.clone()),
        )
        .unwrap();
    let want: Vec<i32> = (0..8)
        .flat_map(|r| data[r * 32..r * 32 + 8].to_vec())
        .collect();
    assert_eq!(good.to_vec::<i32>().unwrap(), want);
}

#[test]
fn async_reads_streams_and_multi_consult_the_cache() {
    let (dir, data) = directory_array("routes");
    let cache = ChunkCache::new(1 << 20);
    let opts = ReadOptions::default().with_cache(cache.clone());
    let cpu = BufferPrototype::cpu();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let remote = rt
        .block_on(zarrbuf::open_async(dir.to_str().unwrap(), "a"))
        .unwrap();
    for pass in 0..2 {
        let got = rt
            .block_on(remote.read_opt_async(&[0..32, 0..32], &cpu, &opts))
            .unwrap();
        assert_eq!(got.to_vec::<i32>().unwrap(), data, "async pass {pass}");
    }
    assert_eq!((cache.stats().misses, cache.stats().hits), (16, 16));
    // A sync open of the same directory hits what the async reads kept, by stream and multi.
    let array = zarrbuf::open(dir.to_str().unwrap(), "a").unwrap();
    let batches: Vec<Vec<Range<u64>>> = (0..4u64).map(|b| vec![b * 8..b * 8 + 8, 0..32]).collect();
    let stream_opts = StreamOptions::default().with_read(opts.clone());
    for (b, got) in array.read_stream(batches, &cpu, &stream_opts).enumerate() {
        let got = got.unwrap();
        assert_eq!(
            got.to_vec::<i32>().unwrap(),
            data[b * 256..b * 256 + 256].to_vec()
        );
    }
    let async_batches: Vec<Vec<Range<u64>>> = vec![vec![0..32, 4..12]];
    let got = {
        let _runtime = rt.enter();
        let mut stream = remote
            .read_stream(async_batches, &cpu, &stream_opts)
            .unwrap()
            .blocking();
        stream.next().unwrap().unwrap()
    };
    let want: Vec<i32> = (0..32)
        .flat_map(|r| data[r * 32 + 4..r * 32 + 12].to_vec())
        .collect();
    assert_eq!(got.to_vec::<i32>().unwrap(), want);
    let multi = zarrbuf::multi::read_opt(
        &array,
        &[0..32, 0..32],
        &zarrbuf::multi::MultiPrototype::host(2).unwrap(),
        zarrbuf::multi::Placement::Replicate,
        &opts,
    )
    .unwrap();
    assert_eq!(multi.parts()[0].to_vec::<i32>().unwrap(), data);
    let s = cache.stats();
    assert_eq!(s.misses, 16, "nothing decoded twice: {s:?}");
    assert_eq!(s.hits, 16 + 16 + 8 + 16);
}

#[test]
fn async_reads_of_only_hits_finish_on_their_task() {
    let (dir, data) = directory_array("inline_hits");
    let cache = ChunkCache::new(1 << 20);
    let opts = ReadOptions::default().with_cache(cache.clone());
    let cpu = BufferPrototype::cpu();
    // One blocking thread: once a task holds it, nothing else can hand off to one.
    let rt = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let remote = rt
        .block_on(zarrbuf::open_async(dir.to_str().unwrap(), "a"))
        .unwrap();
    let top = [0..8u64, 0..32];
    rt.block_on(remote.read_opt_async(&top, &cpu, &opts))
        .unwrap();
    assert_eq!((cache.stats().misses, cache.stats().hits), (4, 0));
    let (release, held) = std::sync::mpsc::channel::<()>();
    let blocker = rt.spawn_blocking(move || held.recv_timeout(std::time::Duration::from_secs(60)));
    let got = rt
        .block_on(async {
            let read = remote.read_opt_async(&top, &cpu, &opts);
            tokio::time::timeout(std::time::Duration::from_secs(10), read).await
        })
        .expect("a read of cache hits waited for a blocking thread")
        .unwrap();
    assert_eq!(got.to_vec::<i32>().unwrap(), data[..256].to_vec());
    assert_eq!((cache.stats().misses, cache.stats().hits), (4, 4));
    release.send(()).unwrap();
    rt.block_on(blocker).unwrap().unwrap();
    // A read with hits and misses: each unit counted once, the misses kept.
    let got = rt
        .block_on(remote.read_opt_async(&[4..16, 0..32], &cpu, &opts))
        .unwrap();
    assert_eq!(got.to_vec::<i32>().unwrap(), data[4 * 32..16 * 32].to_vec());
    assert_eq!((cache.stats().misses, cache.stats().hits), (8, 8));
    // A read larger than the task copies (1 MiB): looked up and finished on a blocking
    // thread, cold and warm, each unit counted once.
    let (dir, data) = directory_array_of("large_hits", 512, 64);
    let large = rt
        .block_on(zarrbuf::open_async(dir.to_str().unwrap(), "a"))
        .unwrap();
    // A cache of its own, holding the whole 1 MiB array.
    let cache = ChunkCache::new(4 << 20);
    let opts = ReadOptions::default().with_cache(cache.clone());
    for pass in 0..2 {
        let got = rt
            .block_on(large.read_opt_async(&[0..512, 0..512], &cpu, &opts))
            .unwrap();
        let got = got.to_vec::<i32>().unwrap();
        assert!(got == data, "large read, pass {pass}: other values");
    }
    assert_eq!((cache.stats().misses, cache.stats().hits), (64, 64));
}

#[test]
fn an_array_replaced_by_create_like_is_dropped_from_the_caches() {
    let src = zarrbuf::open(
        crate::common::root()
            .join("data/v3_int8.zarr")
            .to_str()
            .unwrap(),
        "",
    )
    .unwrap();
    let store: Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits> =
        Arc::new(MemoryStore::new());
    let layout = zarrbuf::ArrayLayout::default();
    let dst = zarrbuf::create_like(&src, src.shape(), store.clone(), "/c", &layout, false).unwrap();
    let data = src.read_all(&BufferPrototype::cpu()).unwrap();
    dst.write_all(&data).unwrap();
    let cache = ChunkCache::new(1 << 20);
    let opts = ReadOptions::default().with_cache(cache.clone());
    let got = dst.read_all_opt(&BufferPrototype::cpu(), &opts).unwrap();
    assert_eq!(bytes(&got), bytes(&data));
    assert!(cache.stats().entries > 0);
    // The same metadata at the same path: only the replacement tells the cache.
    let again = zarrbuf::create_like(&src, src.shape(), store, "/c", &layout, true).unwrap();
    assert_eq!(ArrayId::of(&again), ArrayId::of(&dst));
    assert_eq!(cache.stats().entries, 0);
    let fill = again.read_all_opt(&BufferPrototype::cpu(), &opts).unwrap();
    assert!(fill.to_vec::<i8>().unwrap().iter().all(|&v| v == 0));
}
