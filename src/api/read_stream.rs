//! Read streams: many subsets of one array (a training loop's minibatches), read ahead with
//! a bounded number in flight and yielded in order.
//!
//! - **Order.** Items come out in the order the subsets went in, whatever order the reads
//!   finish in.
//! - **In flight.** At most [`StreamOptions::prefetch`] subsets are being read or wait to be
//!   taken. The subsets' iterator is pulled lazily (one subset per read started), so memory
//!   is bounded by the options, not by the iterator's length.
//! - **Sharing.** Each read claims the chunks it will fetch when it starts; a chunk claimed
//!   by several reads in flight is fetched once and its encoded bytes are kept only until
//!   the last of them took it (see `pipeline/chunk_share.rs`). Each read decodes for itself.
//! - **Cancellation.** Dropping the stream stops every read in flight (a fetch in flight on
//!   an async store is abandoned, the others stop at their next chunk) and returns only once
//!   none of them runs any more.
//! - **Errors.** A failed subset is an `Err(`[`Error::StreamItem`]`)` item naming its
//!   position and ranges, with the reason as its source; the stream goes on with the next
//!   subset (stop by dropping it).
//!
//! Each read runs on a blocking thread of its own (the async runtime's blocking pool for
//! async stores, a plain thread for sync stores) through the same staged pipeline as
//! [`crate::ArrayReadAsyncExt::read_into_async`].

use crate::buffer::{BufferPrototype, NDBuffer};
use crate::dtype::{DataType, Order};
use crate::error::{Error, Result};
use crate::options::{ReadOptions, StreamOptions};
use crate::pipeline::{
    Cancel, ChunkShare, Claim, InnerFetch, StopOnDrop, fetch_unit, fetch_unit_async, run_staged,
};
use crate::zarr::{check_subset, data_type_of, plan_units};
use futures::Stream;
use futures::channel::oneshot;
use std::collections::VecDeque;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use zarrs::array::Array;
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

/// How one subset is planned and read, for a sync or an async store.
trait Source: Send + Sync + 'static {
    /// Checks `subset`; its data type and the keys of the units its read will fetch.
    fn plan(&self, subset: &[Range<u64>]) -> Result<(DataType, Vec<Vec<u64>>)>;
    /// Reads `subset` into `out` (on a blocking thread), fetching through `claim`.
    fn read(
        &self,
        subset: &[Range<u64>],
        out: &NDBuffer,
        opts: &ReadOptions,
        claim: &Claim,
        cancel: &Cancel,
    ) -> Result<()>;
    /// Runs `job` on a blocking thread.
    fn spawn(&self, job: Box<dyn FnOnce() + Send>);
}

fn plan_of<S: ?Sized>(
    array: &Array<S>,
    subset: &[Range<u64>],
) -> Result<(DataType, Vec<Vec<u64>>)> {
    check_subset(array.shape(), subset, array.path().as_str())?;
    let dtype = data_type_of(array)?;
    let plan = plan_units(array, subset, dtype.size())?;
    Ok((dtype, plan.units.into_iter().map(|u| u.indices).collect()))
}

struct SyncSource<S: ?Sized>(Arc<Array<S>>);

impl<S: ?Sized + ReadableStorageTraits + 'static> Source for SyncSource<S> {
    fn plan(&self, subset: &[Range<u64>]) -> Result<(DataType, Vec<Vec<u64>>)> {
        plan_of(&self.0, subset)
    }

    fn read(
        &self,
        subset: &[Range<u64>],
        out: &NDBuffer,
        opts: &ReadOptions,
        claim: &Claim,
        cancel: &Cancel,
    ) -> Result<()> {
        let array = self.0.as_ref();
        run_staged(
            array,
            subset,
            out,
            opts,
            InnerFetch::PerChunk,
            &|plan, shards, unit| {
                cancel.check("read stream")?;
                claim.get(&unit.indices, || fetch_unit(array, plan, shards, unit))
            },
        )
    }

    fn spawn(&self, job: Box<dyn FnOnce() + Send>) {
        // A thread that cannot start drops `job`: its item becomes an error (see `launch`).
        let _ = std::thread::Builder::new()
            .name("zarrbuf-stream".into())
            .spawn(job);
    }
}

struct AsyncSource<S: ?Sized> {
    array: Arc<Array<S>>,
    handle: tokio::runtime::Handle,
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> Source for AsyncSource<S> {
    fn plan(&self, subset: &[Range<u64>]) -> Result<(DataType, Vec<Vec<u64>>)> {
        plan_of(&self.array, subset)
    }

    fn read(
        &self,
        subset: &[Range<u64>],
        out: &NDBuffer,
        opts: &ReadOptions,
        claim: &Claim,
        cancel: &Cancel,
    ) -> Result<()> {
        let array = self.array.as_ref();
        run_staged(
            array,
            subset,
            out,
            opts,
            InnerFetch::for_async_store(array),
            &|plan, shards, unit| {
                cancel.check("read stream")?;
                claim.get(&unit.indices, || {
                    // This worker waits for the fetch anyway: local files are read on it.
                    crate::zarr::reading_inline(|| {
                        self.handle.block_on(cancel.unless_dropped(
                            "read stream",
                            fetch_unit_async(array, plan, shards, unit),
                        ))
                    })
                })
            },
        )
    }

    fn spawn(&self, job: Box<dyn FnOnce() + Send>) {
        // Dropped unrun if the runtime shuts down: its item becomes an error.
        drop(self.handle.spawn_blocking(job));
    }
}

/// One subset admitted: its result to come, and the guard that cancels its read.
struct InFlight {
    index: usize,
    subset: Vec<Range<u64>>,
    result: oneshot::Receiver<Result<NDBuffer>>,
    /// `None` when the subset failed before a read started.
    stop: Option<StopOnDrop>,
}

/// A stream of the NDBuffers of many subsets of one array, read ahead and yielded in order
/// (see [`StreamOptions`] for the bound on reads in flight, and the crate's README for the
/// design). Made by [`crate::ArrayReadAsyncExt::read_stream`] (async stores) or
/// [`crate::ArrayReadExt::read_stream`] (sync stores, as a [`BlockingReadStream`]).
///
/// The subsets' iterator is pulled while the stream is polled, so it should not block.
/// Dropping the stream cancels the reads in flight and waits until they have stopped.
///
/// ```
/// # fn main() -> zarrbuf::Result<()> {
/// use futures::StreamExt;
/// use zarrbuf::{ArrayReadAsyncExt, ArrayWriteExt, BufferPrototype, NDBuffer, StreamOptions};
/// use zarrs::array::{ArrayBuilder, data_type};
/// # let dir = std::env::temp_dir().join(format!("zarrbuf-doc-stream-{}", std::process::id()));
/// # let err = |e: &dyn std::fmt::Display| zarrbuf::Error::InvalidArgument(e.to_string());
/// // A 16 x 4 array in chunks of 4 rows, written with the sync API.
/// let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(&dir).map_err(|e| err(&e))?);
/// let array = ArrayBuilder::new(vec![16, 4], vec![4, 4], data_type::int32(), 0i32)
///     .build(store, "/x").map_err(|e| err(&e))?;
/// array.store_metadata().map_err(|e| err(&e))?;
/// array.write_all(&NDBuffer::from_vec((0..64).collect::<Vec<i32>>(), &[16, 4])?)?;
///
/// let rt = tokio::runtime::Runtime::new().map_err(|e| err(&e))?;
/// rt.block_on(async {
///     let url = format!("file://{}", dir.display());
///     let array = zarrbuf::open_async(&url, "x").await?;
///     // Minibatches of 2 rows, in a shuffled order; 3 reads in flight.
///     let order = [5u64, 0, 7, 2];
///     let subsets = order.map(|b| vec![b * 2..b * 2 + 2, 0..4]);
///     let opts = StreamOptions::default().with_prefetch(3);
///     let mut stream = array.read_stream(subsets, &BufferPrototype::cpu(), &opts)?;
///     let mut firsts = Vec::new();
///     while let Some(batch) = stream.next().await {
///         firsts.push(batch?.to_vec::<i32>()?[0]);
///     }
///     assert_eq!(firsts, vec![40, 0, 56, 16]); // in the order asked
///     Ok::<(), zarrbuf::Error>(())
/// })?;
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(()) }
/// ```
pub struct ReadStream {
    subsets: Box<dyn Iterator<Item = Vec<Range<u64>>> + Send>,
    source: Arc<dyn Source>,
    proto: BufferPrototype,
    opts: StreamOptions,
    share: Arc<ChunkShare>,
    in_flight: VecDeque<InFlight>,
    next_index: usize,
    exhausted: bool,
}

impl ReadStream {
    fn new(
        source: Arc<dyn Source>,
        subsets: Box<dyn Iterator<Item = Vec<Range<u64>>> + Send>,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Self {
        ReadStream {
            subsets,
            source,
            proto: proto.clone(),
            opts: opts.clone(),
            share: Arc::new(ChunkShare::default()),
            in_flight: VecDeque::new(),
            next_index: 0,
            exhausted: false,
        }
    }

    /// Subsets admitted and not yet yielded: being read, or read and waiting to be taken.
    /// Never more than [`StreamOptions::prefetch`] (at least 1).
    ///
    /// ```
    /// # use zarrbuf::{ArrayReadExt, BufferPrototype, StreamOptions};
    /// # use zarrs::array::{ArrayBuilder, data_type};
    /// # let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// # let array = ArrayBuilder::new(vec![8], vec![2], data_type::uint8(), 0u8).build(store, "/a").unwrap();
    /// let subsets = (0..4u64).map(|i| vec![i * 2..i * 2 + 2]);
    /// let mut batches = array.read_stream(subsets, &BufferPrototype::cpu(), &StreamOptions::default().with_prefetch(2));
    /// assert_eq!(batches.in_flight(), 0); // nothing is read before the first pull
    /// batches.next().unwrap()?;
    /// assert!(batches.in_flight() <= 2);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Encoded chunks currently kept for sharing between the reads in flight (a chunk is
    /// kept only while a read in flight still needs it).
    ///
    /// ```
    /// # use zarrbuf::{ArrayReadExt, BufferPrototype, StreamOptions};
    /// # use zarrs::array::{ArrayBuilder, data_type};
    /// # let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// # let array = ArrayBuilder::new(vec![8], vec![2], data_type::uint8(), 0u8).build(store, "/a").unwrap();
    /// let mut batches = array.read_stream([vec![0..1], vec![1..2]], &BufferPrototype::cpu(), &StreamOptions::default());
    /// while let Some(b) = batches.next() { b?; }
    /// assert_eq!(batches.shared_chunks(), 0); // nothing is kept once the reads are done
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn shared_chunks(&self) -> usize {
        self.share.kept()
    }

    /// Turns this stream into a blocking iterator (for code outside async tasks). The reads
    /// keep running on the runtime the stream was made in.
    ///
    /// ```
    /// # fn main() -> zarrbuf::Result<()> {
    /// use zarrbuf::{ArrayReadAsyncExt, ArrayWriteExt, BufferPrototype, NDBuffer, StreamOptions};
    /// use zarrs::array::{ArrayBuilder, data_type};
    /// # let dir = std::env::temp_dir().join(format!("zarrbuf-doc-blocking-{}", std::process::id()));
    /// # let err = |e: &dyn std::fmt::Display| zarrbuf::Error::InvalidArgument(e.to_string());
    /// let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(&dir).map_err(|e| err(&e))?);
    /// let array = ArrayBuilder::new(vec![6], vec![2], data_type::uint8(), 0u8).build(store, "/v").map_err(|e| err(&e))?;
    /// array.store_metadata().map_err(|e| err(&e))?;
    /// array.write_all(&NDBuffer::from_vec((0..6u8).collect::<Vec<_>>(), &[6])?)?;
    ///
    /// let rt = tokio::runtime::Runtime::new().map_err(|e| err(&e))?;
    /// let _enter = rt.enter(); // the stream's reads run on `rt`
    /// let array = rt.block_on(zarrbuf::open_async(&format!("file://{}", dir.display()), "v"))?;
    /// let stream = array.read_stream([vec![4..6], vec![0..2]], &BufferPrototype::cpu(), &StreamOptions::default())?;
    /// let values: Vec<Vec<u8>> = stream.blocking().map(|b| b?.to_vec::<u8>()).collect::<zarrbuf::Result<_>>()?;
    /// assert_eq!(values, vec![vec![4, 5], vec![0, 1]]);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(()) }
    /// ```
    pub fn blocking(self) -> BlockingReadStream {
        BlockingReadStream(self)
    }

    /// Starts reads until `prefetch` are in flight or the subsets run out.
    fn fill(&mut self) {
        while !self.exhausted && self.in_flight.len() < self.opts.in_flight() {
            match self.subsets.next() {
                Some(subset) => self.launch(subset),
                None => self.exhausted = true,
            }
        }
    }

    fn launch(&mut self, subset: Vec<Range<u64>>) {
        let index = self.next_index;
        self.next_index += 1;
        let (tx, rx) = oneshot::channel();
        let stop = match self.source.plan(&subset) {
            Err(e) => {
                let _ = tx.send(Err(e));
                None
            }
            Ok((dtype, keys)) => {
                let claim = self.share.claim(keys);
                let (stop, finish) = Cancel::pair();
                let (source, proto) = (self.source.clone(), self.proto.clone());
                let (opts, ranges) = (self.opts.read.clone(), subset.clone());
                self.source.spawn(Box::new(move || {
                    let result = read_one(
                        source.as_ref(),
                        &ranges,
                        dtype,
                        &proto,
                        &opts,
                        &claim,
                        &finish,
                    );
                    drop(claim);
                    let _ = tx.send(result);
                    // `finish` drops last: once the stream's drop has waited for it, the read
                    // holds nothing of the array (or its store) any more.
                    drop((source, proto, opts, ranges));
                    drop(finish);
                }));
                Some(stop)
            }
        };
        self.in_flight.push_back(InFlight {
            index,
            subset,
            result: rx,
            stop,
        });
    }
}

/// One subset's read, on its blocking thread.
fn read_one(
    source: &dyn Source,
    subset: &[Range<u64>],
    dtype: DataType,
    proto: &BufferPrototype,
    opts: &ReadOptions,
    claim: &Claim,
    finish: &crate::pipeline::FinishOnDrop,
) -> Result<NDBuffer> {
    let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
    // Every element is written by the read; on an error `out` is dropped, never returned.
    let out = NDBuffer::empty_unwritten(&shape, dtype, Order::C, proto)?;
    if out.is_empty() {
        return Ok(out);
    }
    if let Some(s) = proto.stream() {
        // Ordered after the prototype stream's earlier work (see ArrayReadExt::read).
        s.synchronize()?;
    }
    source.read(subset, &out, opts, claim, finish.cancel())?;
    Ok(out)
}

fn ranges_text(subset: &[Range<u64>]) -> String {
    let parts: Vec<String> = subset
        .iter()
        .map(|r| format!("{}..{}", r.start, r.end))
        .collect();
    format!("[{}]", parts.join(", "))
}

impl Stream for ReadStream {
    type Item = Result<NDBuffer>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.fill();
        let Some(front) = this.in_flight.front_mut() else {
            return Poll::Ready(None);
        };
        let got = match Pin::new(&mut front.result).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(got) => got,
        };
        let Some(done) = this.in_flight.pop_front() else {
            return Poll::Ready(None);
        };
        // The next read starts now, not at the next poll.
        this.fill();
        let wrap = |source: Error| Error::StreamItem {
            index: done.index,
            subset: ranges_text(&done.subset),
            source: Box::new(source),
        };
        Poll::Ready(Some(match got {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(wrap(e)),
            Err(oneshot::Canceled) => Err(wrap(Error::Cancelled(
                "the read stopped before it finished (its thread could not start, or the \
                 runtime shut down); read the subset again"
                    .into(),
            ))),
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.exhausted {
            return (self.in_flight.len(), Some(self.in_flight.len()));
        }
        let (lo, hi) = self.subsets.size_hint();
        let n = self.in_flight.len();
        (lo.saturating_add(n), hi.and_then(|h| h.checked_add(n)))
    }
}

impl Drop for ReadStream {
    fn drop(&mut self) {
        // Stop every read first, so they stop together; each guard then waits for its own.
        for f in &self.in_flight {
            if let Some(stop) = &f.stop {
                stop.signal();
            }
        }
        self.in_flight.clear();
    }
}

/// A [`ReadStream`] as a blocking iterator: `next()` waits (on the calling thread) for the
/// next subset in order while the reads ahead of it go on. Made by
/// [`crate::ArrayReadExt::read_stream`] for sync stores, or [`ReadStream::blocking`].
/// Dropping it cancels the reads in flight, as for [`ReadStream`].
///
/// ```
/// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer, StreamOptions};
/// use zarrs::array::{ArrayBuilder, data_type};
/// let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
/// let array = ArrayBuilder::new(vec![12], vec![4], data_type::float32(), 0.0f32)
///     .build(store, "/x").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// array.write_all(&NDBuffer::from_vec((0..12).map(|v| v as f32).collect::<Vec<_>>(), &[12])?)?;
/// let subsets = vec![vec![8..10], vec![0..3], vec![10..20], vec![3..5]];
/// let items: Vec<_> = array.read_stream(subsets, &BufferPrototype::cpu(), &StreamOptions::default()).collect();
/// assert_eq!(items[0].as_ref().unwrap().to_vec::<f32>()?, vec![8.0, 9.0]);
/// assert_eq!(items[1].as_ref().unwrap().to_vec::<f32>()?, vec![0.0, 1.0, 2.0]);
/// let err = items[2].as_ref().unwrap_err();               // out of bounds: named, and the stream goes on
/// assert!(err.to_string().contains("item 2 (subset [10..20])"), "{err}");
/// assert_eq!(items[3].as_ref().unwrap().to_vec::<f32>()?, vec![3.0, 4.0]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub struct BlockingReadStream(ReadStream);

impl BlockingReadStream {
    /// Subsets admitted and not yet yielded (see [`ReadStream::in_flight`]).
    ///
    /// ```
    /// # use zarrbuf::{ArrayReadExt, BufferPrototype, StreamOptions};
    /// # use zarrs::array::{ArrayBuilder, data_type};
    /// # let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// # let array = ArrayBuilder::new(vec![8], vec![2], data_type::uint8(), 0u8).build(store, "/a").unwrap();
    /// let batches = array.read_stream([vec![0..2]], &BufferPrototype::cpu(), &StreamOptions::default());
    /// assert_eq!(batches.in_flight(), 0);
    /// ```
    pub fn in_flight(&self) -> usize {
        self.0.in_flight()
    }

    /// Encoded chunks kept for sharing (see [`ReadStream::shared_chunks`]).
    ///
    /// ```
    /// # use zarrbuf::{ArrayReadExt, BufferPrototype, StreamOptions};
    /// # use zarrs::array::{ArrayBuilder, data_type};
    /// # let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// # let array = ArrayBuilder::new(vec![8], vec![2], data_type::uint8(), 0u8).build(store, "/a").unwrap();
    /// let batches = array.read_stream([vec![0..2]], &BufferPrototype::cpu(), &StreamOptions::default());
    /// assert_eq!(batches.shared_chunks(), 0);
    /// ```
    pub fn shared_chunks(&self) -> usize {
        self.0.shared_chunks()
    }
}

impl Iterator for BlockingReadStream {
    type Item = Result<NDBuffer>;

    fn next(&mut self) -> Option<Self::Item> {
        futures::executor::block_on(futures::StreamExt::next(&mut self.0))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

/// The stream of a sync array's subsets (see [`crate::ArrayReadExt::read_stream`]).
pub(crate) fn sync_stream<S, I>(
    array: &Array<S>,
    subsets: I,
    proto: &BufferPrototype,
    opts: &StreamOptions,
) -> BlockingReadStream
where
    S: ?Sized + ReadableStorageTraits + 'static,
    I: IntoIterator<Item = Vec<Range<u64>>>,
    I::IntoIter: Send + 'static,
{
    let source = SyncSource(Arc::new(array.with_storage(array.storage())));
    let subsets = Box::new(subsets.into_iter());
    BlockingReadStream(ReadStream::new(Arc::new(source), subsets, proto, opts))
}

/// The stream of an async array's subsets (see [`crate::ArrayReadAsyncExt::read_stream`]).
pub(crate) fn async_stream<S, I>(
    array: &Array<S>,
    subsets: I,
    proto: &BufferPrototype,
    opts: &StreamOptions,
) -> Result<ReadStream>
where
    S: ?Sized + AsyncReadableStorageTraits + 'static,
    I: IntoIterator<Item = Vec<Range<u64>>>,
    I::IntoIter: Send + 'static,
{
    let handle = tokio::runtime::Handle::try_current().map_err(|_| {
        Error::InvalidArgument(
            "read streams of async arrays need a tokio runtime: make them inside one \
             (in a task, or after `runtime.enter()`)"
                .into(),
        )
    })?;
    let source = AsyncSource {
        array: Arc::new(array.with_storage(array.storage())),
        handle,
    };
    let subsets = Box::new(subsets.into_iter());
    Ok(ReadStream::new(Arc::new(source), subsets, proto, opts))
}
