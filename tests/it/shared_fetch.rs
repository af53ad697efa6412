//! Encoded chunks shared by concurrent independent reads (`pipeline/fetch/fetch_flight.rs`):
//! threads or tasks reading overlapping patches of one array at the same time fetch each
//! chunk (and each shard's index) fewer times than they read it and all get the exact data; a damaged chunk is the
//! same error, naming it, for every reader; a read that starts after a write through
//! zarrbuf ended is never handed bytes fetched before it; and small async reads equal
//! sync ones.
//!
//! The instrument is `Slow`, a memory store (sync and async) that counts chunk requests and
//! holds each one for a while after taking its bytes, so concurrent reads overlap.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;
use zarrbuf::options::ReadOptions;
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
use zarrs::array::codec::ZstdCodec;
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, Bytes, MaybeBytesIterator,
    ReadableStorageTraits, StorageError, StoreKey, WritableStorageTraits,
};

/// A counting memory store whose chunk requests take their bytes, then wait `delay`.
struct Slow {
    inner: MemoryStore,
    delay: Duration,
    gets: AtomicUsize,
    index_gets: AtomicUsize,
}

impl Slow {
    fn new(delay: Duration) -> Arc<Self> {
        Arc::new(Slow {
            inner: MemoryStore::new(),
            delay,
            gets: AtomicUsize::new(0),
            index_gets: AtomicUsize::new(0),
        })
    }

    fn gets(&self) -> usize {
        self.gets.load(Ordering::SeqCst)
    }

    /// Requests for a shard's index (a suffix of a chunk key).
    fn index_gets(&self) -> usize {
        self.index_gets.load(Ordering::SeqCst)
    }

    /// The bytes of `ranges` of `key` now, counted when they are a chunk's or an inner
    /// chunk's (not metadata, not a shard's index, read as a suffix, which `index_gets` counts).
    fn take(
        &self,
        key: &StoreKey,
        ranges: Vec<ByteRange>,
    ) -> Result<Option<Vec<Bytes>>, StorageError> {
        let index = ranges.iter().any(|r| matches!(r, ByteRange::Suffix(_)));
        if Self::is_chunk(key) && !index {
            self.gets.fetch_add(1, Ordering::SeqCst);
        }
        if Self::is_chunk(key) && index {
            self.index_gets.fetch_add(1, Ordering::SeqCst);
        }
        match self
            .inner
            .get_partial_many(key, Box::new(ranges.into_iter()))?
        {
            None => Ok(None),
            Some(parts) => Ok(Some(parts.collect::<Result<Vec<_>, _>>()?)),
        }
    }

    fn is_chunk(key: &StoreKey) -> bool {
        !key.as_str().ends_with("zarr.json")
    }
}

impl ReadableStorageTraits for Slow {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let got = self.take(key, byte_ranges.collect())?;
        if Self::is_chunk(key) {
            std::thread::sleep(self.delay);
        }
        Ok(got.map(|parts| Box::new(parts.into_iter().map(Ok)) as _))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.inner.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for Slow {
    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        let got = self.take(key, byte_ranges.collect())?;
        if Self::is_chunk(key) {
            tokio::time::sleep(self.delay).await;
        }
        use futures::StreamExt;
        Ok(got.map(|parts| futures::stream::iter(parts.into_iter().map(Ok)).boxed()))
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.inner.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

crate::common::writable_through_inner!(Slow);

const N: u64 = 128;

fn values(seed: f32) -> Vec<f32> {
    (0..N * N).map(|v| v as f32 + seed).collect()
}

/// A 128×128 float32 array of 32×32 zstd chunks, holding `values(0.0)`; with `inner`,
/// sharded into 64×64 shards of 32×32 inner chunks.
fn array(store: &Arc<Slow>, inner: bool) -> Array<Slow> {
    let chunk = if inner { 64 } else { 32 };
    let mut b = ArrayBuilder::new(vec![N, N], vec![chunk, chunk], data_type::float32(), 0.0f32);
    if inner {
        b.subchunk_shape(vec![32u64, 32]);
    }
    b.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
    let a = b.build(store.clone(), "/a").unwrap();
    a.write_all(&NDBuffer::from_vec(values(0.0), &[N as usize, N as usize]).unwrap())
        .unwrap();
    a
}

fn cut(values: &[f32], subset: &[Range<u64>]) -> Vec<f32> {
    let mut out = Vec::new();
    for y in subset[0].clone() {
        for x in subset[1].clone() {
            out.push(values[(y * N + x) as usize]);
        }
    }
    out
}

/// Reader `t`'s patch: two or three chunks of the first chunk row, overlapping the others'.
fn patch(t: usize) -> Vec<Range<u64>> {
    let x = (t as u64 % 3) * 16;
    vec![4..20, x..x + 48]
}

const READERS: usize = 8;

#[test]
fn threads_reading_overlapping_patches_fetch_shared_chunks_once() {
    for inner in [false, true] {
        let store = Slow::new(Duration::from_millis(300));
        let a = array(&store, inner);
        let expected = values(0.0);
        let before = store.gets();
        let start = Barrier::new(READERS);
        let results: Vec<Vec<f32>> = std::thread::scope(|s| {
            let readers: Vec<_> = (0..READERS)
                .map(|t| {
                    let (a, start) = (&a, &start);
                    s.spawn(move || {
                        start.wait();
                        a.read(&patch(t), &BufferPrototype::cpu()).unwrap()
                    })
                })
                .collect();
            readers
                .into_iter()
                .map(|r| r.join().unwrap().to_vec::<f32>().unwrap())
                .collect()
        });
        for (t, got) in results.iter().enumerate() {
            assert_eq!(
                got,
                &cut(&expected, &patch(t)),
                "reader {t}, sharded {inner}"
            );
        }
        // Each patch touches two chunks (or inner chunks) of three.
        let reads = 2 * READERS;
        let fetched = store.gets() - before;
        assert!(
            fetched < reads / 2,
            "sharded {inner}: {fetched} chunk requests for {reads} chunk reads"
        );
    }
}

#[test]
fn tasks_reading_overlapping_patches_fetch_shared_chunks_once() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for inner in [false, true] {
        let store = Slow::new(Duration::from_millis(300));
        let a = Arc::new(array(&store, inner));
        let expected = values(0.0);
        let before = store.gets();
        let indexes_before = store.index_gets();
        let results: Vec<Vec<f32>> = rt.block_on(async {
            let tasks: Vec<_> = (0..READERS)
                .map(|t| {
                    let a = a.clone();
                    tokio::spawn(async move {
                        a.read_async(&patch(t), &BufferPrototype::cpu())
                            .await
                            .unwrap()
                    })
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap().to_vec::<f32>().unwrap());
            }
            out
        });
        for (t, got) in results.iter().enumerate() {
            assert_eq!(got, &cut(&expected, &patch(t)), "task {t}, sharded {inner}");
        }
        let fetched = store.gets() - before;
        assert!(
            fetched < READERS,
            "sharded {inner}: {fetched} chunk requests for {READERS} reads of 2-3 chunks"
        );
        let indexes = store.index_gets() - indexes_before;
        assert!(
            indexes < READERS,
            "sharded {inner}: {indexes} index requests by {READERS} first reads of 2 shards"
        );
    }
}

/// Reader `t`'s inner chunk of shard [0, 0]: four readers, four distinct inner chunks, so
/// only the shard's index is wanted by more than one of them.
fn inner_chunk(t: usize) -> Vec<Range<u64>> {
    let (y, x) = ((t as u64 / 2) * 32, (t as u64 % 2) * 32);
    vec![y..y + 32, x..x + 32]
}

#[test]
fn first_reads_of_distinct_inner_chunks_fetch_their_shards_index_once() {
    const QUARTET: usize = 4;
    let store = Slow::new(Duration::from_millis(300));
    let a = Arc::new(array(&store, true));
    let expected = values(0.0);
    let check = |got: Vec<Vec<f32>>, how: &str| {
        for (t, g) in got.iter().enumerate() {
            assert_eq!(g, &cut(&expected, &inner_chunk(t)), "{how} reader {t}");
        }
    };
    // Threads: the index is not cached (the write dropped it), each wants it at once.
    let before = store.index_gets();
    let start = Barrier::new(QUARTET);
    let got = std::thread::scope(|s| {
        let readers: Vec<_> = (0..QUARTET)
            .map(|t| {
                let (a, start) = (&a, &start);
                s.spawn(move || {
                    start.wait();
                    let b = a.read(&inner_chunk(t), &BufferPrototype::cpu()).unwrap();
                    b.to_vec::<f32>().unwrap()
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    check(got, "sync");
    let sync = store.index_gets() - before;
    assert!(sync < QUARTET, "{sync} index requests by {QUARTET} threads");
    // Tasks, on a fresh store object (its own index cache).
    let store = Slow::new(Duration::from_millis(300));
    let a = Arc::new(array(&store, true));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let before = store.index_gets();
    let got = rt.block_on(async {
        let tasks: Vec<_> = (0..QUARTET)
            .map(|t| {
                let a = a.clone();
                tokio::spawn(async move {
                    let p = inner_chunk(t);
                    let b = a.read_async(&p, &BufferPrototype::cpu()).await.unwrap();
                    b.to_vec::<f32>().unwrap()
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    check(got, "async");
    let tasks = store.index_gets() - before;
    assert!(tasks < QUARTET, "{tasks} index requests by {QUARTET} tasks");
}

#[test]
fn a_damaged_chunk_is_the_same_error_for_every_waiting_reader() {
    let store = Slow::new(Duration::from_millis(300));
    let a = array(&store, false);
    let key = a.chunk_key(&[0, 1]);
    store
        .inner
        .set(&key, Bytes::from(vec![0x28u8, 0xb5, 0x2f, 0xfd, 1, 2, 3]))
        .unwrap();
    let before = store.gets();
    let start = Barrier::new(READERS);
    let errors: Vec<String> = std::thread::scope(|s| {
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let (a, start) = (&a, &start);
                s.spawn(move || {
                    start.wait();
                    a.read(&[0..8, 40..50], &BufferPrototype::cpu())
                        .unwrap_err()
                        .to_string()
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for e in &errors {
        assert!(e.contains("chunk [0, 1]") && e.contains("/a"), "{e}");
    }
    assert!(
        store.gets() - before < READERS,
        "the damaged chunk was fetched by every reader"
    );
    // The async small route names the same chunk.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let e = rt
        .block_on(a.read_async(&[0..8, 40..50], &BufferPrototype::cpu()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("chunk [0, 1]") && e.contains("/a"), "{e}");
}

#[test]
fn a_read_after_a_write_is_not_handed_bytes_fetched_before_it() {
    let store = Slow::new(Duration::from_millis(1500));
    let a = array(&store, false);
    let fresh = values(1000.0);
    let p = vec![0..32u64, 0..32];
    std::thread::scope(|s| {
        let before = store.gets();
        // An early reader takes chunk [0, 0]'s old bytes and holds its request open.
        let early = s.spawn(|| a.read(&p, &BufferPrototype::cpu()).unwrap());
        while store.gets() == before {
            std::thread::sleep(Duration::from_millis(1));
        }
        a.write(&p, &NDBuffer::from_vec(cut(&fresh, &p), &[32, 32]).unwrap())
            .unwrap();
        assert!(
            !early.is_finished(),
            "the early read ended before the write: no overlap"
        );
        // Begun after the write ended: its own fetch, the new values.
        let late = a.read(&p, &BufferPrototype::cpu()).unwrap();
        assert!(
            late.to_vec::<f32>().unwrap() == cut(&fresh, &p),
            "the read begun after the write got the values from before it"
        );
        assert_eq!(store.gets() - before, 2);
        early.join().unwrap();
    });
}

#[test]
fn small_async_reads_equal_sync_ones_with_and_without_a_cache() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cache = zarrbuf::cache::ChunkCache::new(64 << 20);
    for inner in [false, true] {
        let store = Slow::new(Duration::ZERO);
        let a = array(&store, inner);
        // A missing chunk reads as the fill value.
        store.inner.erase(&a.chunk_key(&[1, 1])).unwrap();
        for p in [
            vec![0..1u64, 0..1],
            vec![30..70, 10..100],
            vec![60..70, 60..70],
            vec![0..128, 127..128],
        ] {
            let sync = a
                .read(&p, &BufferPrototype::cpu())
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            for opts in [
                ReadOptions::default(),
                ReadOptions::default().with_cache(cache.clone()),
            ] {
                for _ in 0..2 {
                    let got = rt
                        .block_on(a.read_opt_async(&p, &BufferPrototype::cpu(), &opts))
                        .unwrap();
                    assert_eq!(got.to_vec::<f32>().unwrap(), sync, "{p:?}, sharded {inner}");
                }
            }
        }
    }
}
