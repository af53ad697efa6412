//! Read streams of variable-length arrays (`read_stream_as::<VarLenBuffer, _>`, the one
//! stream engine of fixed-size reads too): items
//! equal `read_as::<VarLenBuffer>` of the same subsets, in order, when later subsets finish first; at
//! most `prefetch` reads in flight with the subsets pulled lazily; a bad subset or a damaged
//! chunk is an `Err` item and later items still arrive; dropping the stream stops the reads
//! in flight at their next chunk and returns once they have stopped; a chunk claimed by
//! several reads in flight is fetched once.
//!
//! The instrument is `Slow`, a sync zarrs store over a `MemoryStore` that delays each chunk
//! request (by a rule per test) and counts the requests, how many run at once, and the
//! largest number that ran at once.

#![allow(clippy::single_range_in_vec_init)] // 1-D subsets: one range in a Vec, on purpose

use futures::StreamExt;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zarrbuf::options::StreamOptions;
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, BufferPrototype, Error, VarLenBuffer};
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, MaybeBytes, MaybeBytesIterator,
    ReadableStorageTraits, StorageError, StoreKey, WritableStorageTraits,
};

type Delay = Box<dyn Fn(u64) -> Duration + Send + Sync>;

/// A delaying, counting sync store over a memory store (see the module docs).
struct Slow {
    inner: Arc<MemoryStore>,
    /// The delay of chunk `i`'s request.
    delay: Delay,
    gets: AtomicUsize,
    active: AtomicUsize,
    max_active: AtomicUsize,
    finished: Mutex<Vec<u64>>,
}

/// The chunk index of a chunk key (`s/c/7`), `None` for metadata.
fn chunk_of(key: &StoreKey) -> Option<u64> {
    let name = key.as_str();
    if name.ends_with("zarr.json") {
        return None;
    }
    name.rsplit('/').next()?.parse().ok()
}

impl Slow {
    fn new(
        inner: Arc<MemoryStore>,
        delay: impl Fn(u64) -> Duration + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Slow {
            inner,
            delay: Box::new(delay),
            gets: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            max_active: AtomicUsize::new(0),
            finished: Mutex::default(),
        })
    }

    /// Waits as chunk `key`'s rule says, counting the request while it waits.
    fn wait(&self, key: &StoreKey) {
        let Some(chunk) = chunk_of(key) else { return };
        self.gets.fetch_add(1, Ordering::SeqCst);
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep((self.delay)(chunk));
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.finished.lock().unwrap().push(chunk);
    }
}

impl ReadableStorageTraits for Slow {
    fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        self.wait(key);
        self.inner.get(key)
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        self.wait(key);
        self.inner.get_partial_many(key, byte_ranges)
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.inner.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

/// Element `i` of the test arrays: multi-byte characters, empty strings, varying lengths.
fn element(i: u64) -> String {
    match i % 3 {
        0 => String::new(),
        1 => format!("s{i}"),
        _ => format!("ß∂{i}😀"),
    }
}

/// A 1-D string array of `n` elements (`element(i)`) in chunks of `chunk`, in a memory
/// store; returns the store.
fn memory_strings(n: u64, chunk: u64) -> Arc<MemoryStore> {
    let store = Arc::new(MemoryStore::new());
    let array = ArrayBuilder::new(vec![n], vec![chunk], data_type::string(), "")
        .build(store.clone(), "/s")
        .unwrap();
    array.store_metadata().unwrap();
    for c in 0..n.div_ceil(chunk) {
        let items: Vec<String> = (c * chunk..(c + 1) * chunk).map(element).collect();
        let items: Vec<&str> = items.iter().map(String::as_str).collect();
        array.store_chunk(&[c], items).unwrap();
    }
    store
}

fn open_slow(store: &Arc<Slow>) -> Array<Slow> {
    Array::open(store.clone(), "/s").unwrap()
}

fn strings(v: &VarLenBuffer) -> Vec<String> {
    v.iter_str().unwrap().map(|s| s.unwrap()).collect()
}

fn expect_range(r: &Range<u64>) -> Vec<String> {
    (r.start..r.end).map(element).collect()
}

#[test]
fn items_equal_read_varlen_in_order_when_later_subsets_finish_first() {
    // Chunk i's request takes (16 - i) x 4 ms: within a window of reads, later ones finish first.
    let store = Slow::new(memory_strings(64, 4), |i| {
        Duration::from_millis((16 - i) * 4)
    });
    let array = open_slow(&store);
    let subsets: Vec<Vec<Range<u64>>> = vec![
        vec![60..64],
        vec![0..5],
        vec![30..31],
        vec![3..45],
        vec![10..10],
        vec![0..64],
        vec![47..52],
    ];
    let opts = StreamOptions::default().with_prefetch(3);
    let items: Vec<VarLenBuffer> = array
        .read_stream_as::<VarLenBuffer, _>(subsets.clone(), &BufferPrototype::cpu(), &opts)
        .collect::<zarrbuf::Result<_>>()
        .unwrap();
    assert_eq!(items.len(), subsets.len());
    for (item, subset) in items.iter().zip(&subsets) {
        let direct = array
            .read_as::<VarLenBuffer>(subset, &BufferPrototype::cpu())
            .unwrap();
        assert_eq!(strings(item), strings(&direct), "subset {subset:?}");
        assert_eq!(strings(item), expect_range(&subset[0]), "subset {subset:?}");
        assert_eq!(item.shape(), direct.shape());
        assert_eq!(
            item.offsets().to_vec().unwrap(),
            direct.offsets().to_vec().unwrap()
        );
    }
    // The reads ran ahead and overlapped: some chunk finished out of subset order.
    let finished = store.finished.lock().unwrap().clone();
    assert!(
        finished.windows(2).any(|w| w[0] > w[1]),
        "the reads overlapped: {finished:?}"
    );
}

#[test]
fn at_most_prefetch_reads_are_in_flight_and_subsets_are_pulled_lazily() {
    let store = Slow::new(memory_strings(64, 4), |_| Duration::from_millis(15));
    let array = open_slow(&store);
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    // One chunk per subset: one request per read.
    let subsets = (0..16u64).map(move |i| {
        counter.fetch_add(1, Ordering::SeqCst);
        vec![i * 4..i * 4 + 4]
    });
    let prefetch = 3;
    let opts = StreamOptions::default().with_prefetch(prefetch);
    let mut stream =
        array.read_stream_as::<VarLenBuffer, _>(subsets, &BufferPrototype::cpu(), &opts);
    assert_eq!(
        pulled.load(Ordering::SeqCst),
        0,
        "nothing is pulled before the first next()"
    );
    assert_eq!(stream.size_hint(), (16, Some(16)));
    let mut n = 0u64;
    while let Some(item) = stream.next() {
        assert_eq!(strings(&item.unwrap()), expect_range(&(n * 4..n * 4 + 4)));
        n += 1;
        assert!(stream.in_flight() <= prefetch);
        assert!(pulled.load(Ordering::SeqCst) as u64 <= n + prefetch as u64);
        // A slow consumer: the reads ahead must still stop at `prefetch`.
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(n, 16);
    let max = store.max_active.load(Ordering::SeqCst);
    assert!(
        max <= prefetch,
        "{max} requests ran at once, prefetch {prefetch}"
    );
    assert!(
        max >= 2,
        "the reads ran ahead: at most {max} request at once"
    );
    assert_eq!(store.gets.load(Ordering::SeqCst), 16);
}

#[test]
fn bad_subsets_and_damaged_chunks_are_err_items_and_the_stream_goes_on() {
    let inner = memory_strings(16, 4);
    // Chunk 2 is damaged: a count of 4 elements, then a length past the end.
    let mut bad = 4u32.to_le_bytes().to_vec();
    bad.extend_from_slice(&1000u32.to_le_bytes());
    inner
        .set(&StoreKey::new("s/c/2").unwrap(), bad.into())
        .unwrap();
    let store = Slow::new(inner, |_| Duration::ZERO);
    let array = open_slow(&store);
    let subsets = vec![
        vec![0..4],
        vec![10..20],     // past the end
        vec![0..2, 0..2], // two dimensions for a 1-D array
        vec![6..10],      // reaches the damaged chunk 2
        vec![12..16],
    ];
    let items: Vec<_> = array
        .read_stream_as::<VarLenBuffer, _>(
            subsets,
            &BufferPrototype::cpu(),
            &StreamOptions::default(),
        )
        .collect();
    assert_eq!(items.len(), 5);
    assert_eq!(strings(items[0].as_ref().unwrap()), expect_range(&(0..4)));
    for (k, ranges) in [(1, "[10..20]"), (2, "[0..2, 0..2]"), (3, "[6..10]")] {
        let err = items[k].as_ref().unwrap_err();
        assert!(
            matches!(err, Error::StreamItem { index, .. } if *index == k),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("item {k} (subset {ranges})")),
            "{text}"
        );
    }
    let damaged = items[3].as_ref().unwrap_err().to_string();
    assert!(
        damaged.contains("c/2") || damaged.contains("[2]"),
        "names the chunk: {damaged}"
    );
    assert_eq!(strings(items[4].as_ref().unwrap()), expect_range(&(12..16)));
}

#[test]
fn dropping_the_stream_stops_the_reads_in_flight() {
    // 32 chunks per subset; the first subset's chunks come at once, every other takes 100 ms,
    // so the reads behind it would take seconds to finish.
    let store = Slow::new(memory_strings(640, 4), |i| {
        if i < 32 {
            Duration::ZERO
        } else {
            Duration::from_millis(100)
        }
    });
    let array = open_slow(&store);
    let subsets = (0..5u64).map(|i| vec![i * 128..(i + 1) * 128]);
    let opts = StreamOptions::default().with_prefetch(4);
    let mut stream =
        array.read_stream_as::<VarLenBuffer, _>(subsets, &BufferPrototype::cpu(), &opts);
    let first = stream.next().unwrap().unwrap();
    assert_eq!(strings(&first), expect_range(&(0..128)));
    // The reads of subsets 1 to 4 are in flight; wait until they fetch.
    let t = Instant::now();
    while store.active.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(stream.in_flight(), 4);
    let t = Instant::now();
    drop(stream);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the drop took {took:?}: the reads went on"
    );
    assert_eq!(
        store.active.load(Ordering::SeqCst),
        0,
        "no request outlives the stream"
    );
    let gets = store.gets.load(Ordering::SeqCst);
    assert!(
        gets < 32 + 4 * 32,
        "the reads stopped early: {gets} requests"
    );
    // The reads' threads held the store through their array; all of them are gone.
    assert_eq!(
        Arc::strong_count(&store),
        2,
        "only the test and its array hold the store"
    );
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(
        store.gets.load(Ordering::SeqCst),
        gets,
        "no request started after the drop"
    );
}

/// `Slow` as an async store: the delay is a tokio sleep, so a dropped request is abandoned.
struct SlowAsync(Arc<Slow>);

/// Ends an async request's count when it finishes or is dropped.
struct Active<'a>(&'a AtomicUsize);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for SlowAsync {
    async fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        let s = &self.0;
        if let Some(chunk) = chunk_of(key) {
            s.gets.fetch_add(1, Ordering::SeqCst);
            let now = s.active.fetch_add(1, Ordering::SeqCst) + 1;
            s.max_active.fetch_max(now, Ordering::SeqCst);
            let _active = Active(&s.active);
            tokio::time::sleep((s.delay)(chunk)).await;
        }
        s.inner.get(key)
    }

    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        let Some(all) = self.get(key).await? else {
            return Ok(None);
        };
        let parts: Vec<Result<zarrs::storage::Bytes, StorageError>> = byte_ranges
            .map(|r| {
                let r = r.to_range(all.len() as u64);
                Ok(all.slice(r.start as usize..r.end as usize))
            })
            .collect();
        Ok(Some(futures::stream::iter(parts).boxed()))
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.0.inner.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

#[test]
fn async_streams_equal_async_reads_and_dropping_abandons_the_fetches() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _enter = rt.enter();
    // Chunks 0 to 7 come at once; the others take 5 s each.
    let slow = Slow::new(memory_strings(64, 4), |i| {
        if i < 8 {
            Duration::ZERO
        } else {
            Duration::from_secs(5)
        }
    });
    let store = Arc::new(SlowAsync(slow.clone()));
    let array = rt.block_on(Array::async_open(store.clone(), "/s")).unwrap();
    let subsets = vec![
        vec![30..32],
        vec![0..9],
        vec![2..3],
        vec![5..40],
        vec![0..0],
    ];
    let items: Vec<_> = array
        .read_stream_as::<VarLenBuffer, _>(
            subsets[..3].to_vec(),
            &BufferPrototype::cpu(),
            &StreamOptions::default(),
        )
        .unwrap()
        .blocking()
        .collect();
    for (item, subset) in items.iter().zip(&subsets) {
        let direct = rt
            .block_on(array.read_as_async::<VarLenBuffer>(subset, &BufferPrototype::cpu()))
            .unwrap();
        assert_eq!(
            strings(item.as_ref().unwrap()),
            strings(&direct),
            "{subset:?}"
        );
        assert_eq!(strings(&direct), expect_range(&subset[0]));
    }
    // Subset 1 is in flight for 5 s: dropping the stream abandons its fetches.
    let mut stream = array
        .read_stream_as::<VarLenBuffer, _>(
            subsets[2..].to_vec(),
            &BufferPrototype::cpu(),
            &StreamOptions::default(),
        )
        .unwrap()
        .blocking();
    assert_eq!(
        strings(&stream.next().unwrap().unwrap()),
        expect_range(&(2..3))
    );
    let t = Instant::now();
    while slow.active.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        slow.active.load(Ordering::SeqCst) > 0,
        "the slow read is fetching"
    );
    let t = Instant::now();
    drop(stream);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the drop took {took:?}: fetches were not abandoned"
    );
    assert_eq!(
        slow.active.load(Ordering::SeqCst),
        0,
        "no request outlives the stream"
    );
    // Outside a runtime the stream is refused with a sentence.
    drop(_enter);
    let err = array
        .read_stream_as::<VarLenBuffer, _>(
            [vec![0..1]],
            &BufferPrototype::cpu(),
            &StreamOptions::default(),
        )
        .err()
        .unwrap();
    assert!(err.to_string().contains("need a tokio runtime"), "{err}");
}

#[test]
fn a_chunk_claimed_by_several_reads_in_flight_is_fetched_once() {
    // Four chunks of 4 strings; three overlapping subsets admitted together touch chunks
    // {0, 1}, {1, 2}, {2, 3}: six fetches without sharing, four with it.
    let store = Slow::new(memory_strings(16, 4), |_| Duration::from_millis(20));
    let array = open_slow(&store);
    let subsets = vec![vec![0..8], vec![4..12], vec![8..16]];
    let opts = StreamOptions::default().with_prefetch(3);
    let mut stream =
        array.read_stream_as::<VarLenBuffer, _>(subsets.clone(), &BufferPrototype::cpu(), &opts);
    for subset in &subsets {
        let item = stream.next().unwrap().unwrap();
        assert_eq!(strings(&item), expect_range(&subset[0]));
    }
    assert!(stream.next().is_none());
    assert_eq!(
        store.gets.load(Ordering::SeqCst),
        4,
        "each chunk fetched once"
    );
    assert_eq!(
        stream.shared_chunks(),
        0,
        "nothing is kept once the reads are done"
    );
}

#[test]
#[allow(deprecated)]
fn the_deprecated_read_varlen_stream_and_varlen_kind_are_the_new_calls() {
    use zarrbuf::{ArrayReadVarLenExt, stream::VarLenReadStream};
    let store = Slow::new(memory_strings(16, 4), |_| Duration::ZERO);
    let array = open_slow(&store);
    let subsets = vec![vec![2..7], vec![0..1]];
    let opts = StreamOptions::default();
    let stream: VarLenReadStream =
        array.read_varlen_stream(subsets.clone(), &BufferPrototype::cpu(), &opts);
    let items: Vec<VarLenBuffer> = stream.collect::<zarrbuf::Result<_>>().unwrap();
    for (item, subset) in items.iter().zip(&subsets) {
        assert_eq!(strings(item), expect_range(&subset[0]));
    }
    // So is the method that says which kind reads an array.
    assert_eq!(array.varlen_kind(), zarrbuf::varlen_kind(&array));
    assert!(array.varlen_kind().is_some());
}
