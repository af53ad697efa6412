//! Read streams (`ArrayReadAsyncExt::read_stream`, `ArrayReadExt::read_stream`): order kept
//! when later subsets finish first, at most `prefetch` reads in flight with the subsets pulled
//! lazily, chunks shared by neighbouring subsets fetched once, dropping cancels, bad subsets
//! named in their errors, and every fixture written by zarr-python read exactly.
//!
//! The instrument is `Counting`, an async zarrs store over a `MemoryStore` that delays each
//! chunk request (by a rule per test) and records how many requests each key got, how many
//! run at once, and the order they finished in.

#![allow(clippy::single_range_in_vec_init)] // 1-D subsets: one range in a Vec, on purpose

use crate::common::{Fixture, fixtures};
use futures::StreamExt;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zarrbuf::options::StreamOptions;
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, ArrayWriteExt, BufferPrototype, Error, NDBuffer};
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, MaybeBytes, ReadableStorageTraits,
    StorageError, StoreKey,
};

type Delay = Box<dyn Fn(&str) -> Duration + Send + Sync>;

/// A counting, delaying async store over a memory store (see the module docs).
struct Counting {
    inner: Arc<MemoryStore>,
    delay: Delay,
    gets: Mutex<HashMap<String, usize>>,
    finished: Mutex<Vec<String>>,
    active: AtomicUsize,
    max_active: AtomicUsize,
}

/// Decrements the active count when a request ends, finished or dropped (cancelled).
struct Active<'a>(&'a AtomicUsize);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn is_chunk(key: &str) -> bool {
    !key.ends_with("zarr.json")
}

impl Counting {
    fn new(
        inner: Arc<MemoryStore>,
        delay: impl Fn(&str) -> Duration + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Counting {
            inner,
            delay: Box::new(delay),
            gets: Mutex::default(),
            finished: Mutex::default(),
            active: AtomicUsize::new(0),
            max_active: AtomicUsize::new(0),
        })
    }

    fn chunk_gets(&self) -> usize {
        self.gets.lock().unwrap().values().sum()
    }

    fn max_gets_per_key(&self) -> usize {
        self.gets
            .lock()
            .unwrap()
            .values()
            .copied()
            .max()
            .unwrap_or(0)
    }
}

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for Counting {
    async fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        let name = key.as_str().to_string();
        if !is_chunk(&name) {
            return ReadableStorageTraits::get(self.inner.as_ref(), key);
        }
        *self.gets.lock().unwrap().entry(name.clone()).or_default() += 1;
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        let _active = Active(&self.active);
        tokio::time::sleep((self.delay)(&name)).await;
        let got = ReadableStorageTraits::get(self.inner.as_ref(), key);
        self.finished.lock().unwrap().push(name);
        got
    }

    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        let Some(all) = self.get(key).await? else {
            return Ok(None);
        };
        let parts: Vec<Result<bytes::Bytes, StorageError>> = byte_ranges
            .map(|r| {
                let r = r.to_range(all.len() as u64);
                Ok(all.slice(r.start as usize..r.end as usize))
            })
            .collect();
        Ok(Some(futures::stream::iter(parts).boxed()))
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        ReadableStorageTraits::size_key(self.inner.as_ref(), key)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

/// A 1-D float32 array of `n` elements (value = index) in chunks of `chunk`, zstd-free,
/// written to a memory store; returns the store.
fn memory_array(n: u64, chunk: u64) -> Arc<MemoryStore> {
    let store = Arc::new(MemoryStore::new());
    let array = ArrayBuilder::new(vec![n], vec![chunk], data_type::float32(), 0.0f32)
        .build(store.clone(), "/x")
        .unwrap();
    array.store_metadata().unwrap();
    let values: Vec<f32> = (0..n).map(|v| v as f32).collect();
    array
        .write_all(&NDBuffer::from_vec(values, &[n as usize]).unwrap())
        .unwrap();
    store
}

async fn open_counting(store: &Arc<Counting>) -> Array<Counting> {
    Array::async_open(store.clone(), "/x").await.unwrap()
}

fn values(b: &NDBuffer) -> Vec<f32> {
    b.to_vec::<f32>().unwrap()
}

fn expect_range(r: &Range<u64>) -> Vec<f32> {
    (r.start..r.end).map(|v| v as f32).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_come_in_order_when_later_subsets_finish_first() {
    // Chunk i's request takes (16 - i) x 8 ms: within a window of reads, later ones finish first.
    let store = Counting::new(memory_array(64, 4), |key| {
        let i: u64 = key.rsplit('/').next().unwrap().parse().unwrap();
        Duration::from_millis((16 - i) * 8)
    });
    let array = open_counting(&store).await;
    let subsets: Vec<Vec<Range<u64>>> = (0..16u64).map(|i| vec![i * 4..i * 4 + 4]).collect();
    let opts = StreamOptions::default().with_prefetch(8);
    let mut stream = array
        .read_stream(subsets.clone(), &BufferPrototype::cpu(), &opts)
        .unwrap();
    let mut k = 0;
    while let Some(item) = stream.next().await {
        assert_eq!(
            values(&item.unwrap()),
            expect_range(&subsets[k][0]),
            "item {k}"
        );
        k += 1;
    }
    assert_eq!(k, 16);
    let finished = store.finished.lock().unwrap().clone();
    let mut sorted = finished.clone();
    sorted.sort_by_key(|k| k.rsplit('/').next().unwrap().parse::<u64>().unwrap());
    assert_ne!(finished, sorted, "the requests did finish out of order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_prefetch_reads_are_in_flight_and_subsets_are_pulled_lazily() {
    let store = Counting::new(memory_array(400, 4), |_| Duration::from_millis(20));
    let array = open_counting(&store).await;
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    // 100 subsets, one chunk each; the iterator counts how far it was pulled.
    let subsets = (0..100u64).map(move |i| {
        counter.fetch_add(1, Ordering::SeqCst);
        vec![i * 4..i * 4 + 4]
    });
    let prefetch = 3;
    let opts = StreamOptions::default().with_prefetch(prefetch);
    let mut stream = array
        .read_stream(subsets, &BufferPrototype::cpu(), &opts)
        .unwrap();
    assert_eq!(
        pulled.load(Ordering::SeqCst),
        0,
        "nothing pulled before the first poll"
    );
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(values(&first), expect_range(&(0..4)));
    assert!(
        pulled.load(Ordering::SeqCst) <= prefetch + 1,
        "pulled {} subsets after one item",
        pulled.load(Ordering::SeqCst)
    );
    let mut n = 1;
    while let Some(item) = stream.next().await {
        assert!(stream.in_flight() <= prefetch);
        let item = item.unwrap();
        assert_eq!(values(&item)[0], (n * 4) as f32);
        n += 1;
        if n % 10 == 0 {
            // A slow consumer: the reads ahead must still stop at `prefetch`.
            tokio::time::sleep(Duration::from_millis(30)).await;
            assert!(pulled.load(Ordering::SeqCst) <= n + prefetch);
        }
    }
    assert_eq!(n, 100);
    let max = store.max_active.load(Ordering::SeqCst);
    assert!(
        max <= prefetch,
        "{max} requests ran at once, prefetch {prefetch}"
    );
    assert!(
        max >= 2,
        "the stream read ahead ({max} request at once at most)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neighbouring_subsets_share_chunk_fetches() {
    // 4 chunks of 8 elements; 16 subsets of 2 elements, 4 per chunk, in order.
    let subsets: Vec<Vec<Range<u64>>> = (0..16u64).map(|i| vec![i * 2..i * 2 + 2]).collect();
    for (prefetch, want_gets) in [(4, 4), (1, 16)] {
        let store = Counting::new(memory_array(32, 8), |_| Duration::from_millis(40));
        let array = open_counting(&store).await;
        let opts = StreamOptions::default().with_prefetch(prefetch);
        let mut stream = array
            .read_stream(subsets.clone(), &BufferPrototype::cpu(), &opts)
            .unwrap();
        let mut k = 0;
        while let Some(item) = stream.next().await {
            assert_eq!(values(&item.unwrap()), expect_range(&subsets[k][0]));
            k += 1;
        }
        assert_eq!(k, 16);
        assert_eq!(
            store.chunk_gets(),
            want_gets,
            "prefetch {prefetch}: requests per chunk {:?}",
            store.gets.lock().unwrap()
        );
        assert_eq!(stream.shared_chunks(), 0, "nothing kept after the reads");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subset_spanning_chunks_shares_both_with_its_neighbours() {
    // Subsets straddle chunk boundaries: [6..10] needs chunks 0 and 1, [2..6] chunk 0...
    let store = Counting::new(memory_array(32, 8), |_| Duration::from_millis(40));
    let array = open_counting(&store).await;
    let subsets: Vec<Vec<Range<u64>>> = vec![
        vec![2..6],
        vec![6..10],
        vec![10..14],
        vec![14..18],
        vec![18..22],
    ];
    let opts = StreamOptions::default().with_prefetch(5);
    let items: Vec<_> = array
        .read_stream(subsets.clone(), &BufferPrototype::cpu(), &opts)
        .unwrap()
        .collect()
        .await;
    for (item, s) in items.iter().zip(&subsets) {
        assert_eq!(values(item.as_ref().unwrap()), expect_range(&s[0]));
    }
    assert_eq!(
        store.max_gets_per_key(),
        1,
        "{:?}",
        store.gets.lock().unwrap()
    );
    assert_eq!(store.chunk_gets(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_cancels_the_reads_in_flight() {
    let store = Counting::new(memory_array(64, 4), |_| Duration::from_secs(5));
    let array = open_counting(&store).await;
    let subsets = (0..16u64).map(|i| vec![i * 4..i * 4 + 4]);
    let opts = StreamOptions::default().with_prefetch(4);
    let mut stream = array
        .read_stream(subsets, &BufferPrototype::cpu(), &opts)
        .unwrap();
    // One poll starts the reads; none can finish for 5 s.
    assert!(futures::poll!(stream.next()).is_pending());
    let t = Instant::now();
    while store.active.load(Ordering::SeqCst) < 4 && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        store.active.load(Ordering::SeqCst),
        4,
        "four requests in flight"
    );
    let held = Arc::strong_count(&store);
    let t = Instant::now();
    drop(stream);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the drop took {took:?}: requests were not abandoned"
    );
    assert_eq!(
        store.active.load(Ordering::SeqCst),
        0,
        "no request outlives the stream"
    );
    // The reads' threads held the store through their array; all of them are gone.
    assert!(
        Arc::strong_count(&store) < held,
        "the reads released the store"
    );
    assert_eq!(
        Arc::strong_count(&store),
        2,
        "only the test and its array hold the store"
    );
    let gets = store.chunk_gets();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        store.chunk_gets(),
        gets,
        "no request started after the drop"
    );
    assert_eq!(gets, 4);
}

#[test]
fn bad_subsets_are_named_and_the_stream_goes_on() {
    let store = memory_array(32, 8);
    // A chunk whose bytes are not a chunk: a decode error naming the chunk.
    zarrs::storage::WritableStorageTraits::set(
        store.as_ref(),
        &StoreKey::new("x/c/3").unwrap(),
        bytes::Bytes::from_static(b"not a chunk"),
    )
    .unwrap();
    let array = Array::open(store, "/x").unwrap();
    #[allow(clippy::reversed_empty_ranges)]
    let subsets: Vec<Vec<Range<u64>>> = vec![
        vec![0..4],
        vec![0..4, 0..1], // two ranges for a 1-D array
        vec![30..40],     // beyond the end
        vec![5..3],       // reversed
        vec![24..28],     // the damaged chunk
        vec![4..8],
    ];
    let items: Vec<zarrbuf::Result<NDBuffer>> = array
        .read_stream(subsets, &BufferPrototype::cpu(), &StreamOptions::default())
        .collect();
    assert_eq!(items.len(), 6, "the stream went on past its errors");
    assert_eq!(values(items[0].as_ref().unwrap()), expect_range(&(0..4)));
    assert_eq!(values(items[5].as_ref().unwrap()), expect_range(&(4..8)));
    let text = |k: usize| -> String {
        let e = items[k].as_ref().unwrap_err();
        assert!(
            matches!(e, Error::StreamItem { index, .. } if *index == k),
            "{e:?}"
        );
        e.to_string()
    };
    let t = text(1);
    assert!(
        t.contains("item 1 (subset [0..4, 0..1])") && t.contains("1 dimensions"),
        "{t}"
    );
    let t = text(2);
    assert!(t.contains("[30..40]") && t.contains("outside array"), "{t}");
    let t = text(3);
    assert!(t.contains("[5..3]") && t.contains("outside array"), "{t}");
    let t = text(4);
    assert!(
        t.contains("[24..28]") && t.contains("[3]"),
        "names the subset and chunk: {t}"
    );
    let source = std::error::Error::source(items[4].as_ref().unwrap_err()).unwrap();
    assert!(
        source.to_string().contains("chunk [3]"),
        "the source names the chunk: {source}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn async_streams_made_outside_a_runtime_are_a_clear_error() {
    // Made inside a runtime: fine; made outside one: a clear error.
    let store = Counting::new(memory_array(8, 4), |_| Duration::ZERO);
    let array = open_counting(&store).await;
    let err = std::thread::scope(|s| {
        s.spawn(|| {
            array
                .read_stream(
                    [vec![0..4]],
                    &BufferPrototype::cpu(),
                    &StreamOptions::default(),
                )
                .err()
        })
        .join()
        .unwrap()
    })
    .expect("outside a runtime the stream cannot be made");
    assert!(err.to_string().contains("tokio runtime"), "{err}");
}

/// Row blocks of the array (axis 0), whose C-order bytes tile the whole array.
fn row_blocks(shape: &[u64]) -> Vec<Vec<Range<u64>>> {
    if shape.is_empty() {
        return vec![vec![]];
    }
    let n = shape[0];
    let step = (n / 3).max(1);
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let end = (start + step).min(n);
        let mut s = vec![start..end];
        s.extend(shape[1..].iter().map(|&m| 0..m));
        out.push(s);
        start = end;
    }
    out
}

/// The bytes of the whole array put together from row blocks read in a shuffled order.
fn assemble(
    f: &Fixture,
    shape: &[u64],
    blocks: &[Vec<Range<u64>>],
    items: Vec<zarrbuf::Result<NDBuffer>>,
    total: usize,
) -> Vec<u8> {
    let mut whole = vec![0u8; total];
    let row_bytes = if shape.is_empty() {
        total
    } else {
        total / (shape[0].max(1) as usize)
    };
    assert_eq!(items.len(), blocks.len(), "{}", f.name);
    for (item, block) in items.into_iter().zip(blocks) {
        let got = item
            .unwrap_or_else(|e| panic!("{}: {e}", f.name))
            .to_native_bytes()
            .unwrap();
        let at = block
            .first()
            .map(|r| r.start as usize * row_bytes)
            .unwrap_or(0);
        whole[at..at + got.len()].copy_from_slice(&got);
    }
    whole
}

#[test]
fn every_fixture_streams_exactly() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let all = fixtures();
    assert!(all.len() >= 40);
    for f in &all {
        let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
        let want_bytes = want.to_native_bytes().unwrap();
        let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let shape = array.shape().to_vec();
        let mut blocks = row_blocks(&shape);
        blocks.reverse(); // not the storage order
        if blocks.len() > 2 {
            blocks.swap(0, 1);
        }
        let opts = StreamOptions::default().with_prefetch(2);
        let items: Vec<_> = array
            .read_stream(blocks.clone(), &BufferPrototype::cpu(), &opts)
            .collect();
        let got = assemble(f, &shape, &blocks, items, want_bytes.len());
        assert!(
            got == want_bytes,
            "{}: sync stream differs from the .npy",
            f.name
        );

        // The same through the async store (object_store `file://`).
        let url = format!("file://{}", f.store_path());
        let _enter = rt.enter();
        let async_array = rt
            .block_on(zarrbuf::open_async(&url, &f.path))
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let items: Vec<_> = async_array
            .read_stream(blocks.clone(), &BufferPrototype::cpu(), &opts)
            .unwrap()
            .blocking()
            .collect();
        let got = assemble(f, &shape, &blocks, items, want_bytes.len());
        assert!(
            got == want_bytes,
            "{}: async stream differs from the .npy",
            f.name
        );
    }
}
