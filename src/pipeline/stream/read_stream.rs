//! The reads behind a read stream ([`crate::stream::ReadStream`]): subsets admitted lazily up to the
//! prefetch bound, each planned once when admitted and read on a blocking thread of its own
//! through the read core (`read_shared`: the host cache, else the staged pipeline),
//! encoded chunks shared between the reads in flight ([`ChunkShare`]), results yielded in
//! order, and every read stopped (and waited for) when the stream is dropped. The public
//! types and their documented behaviour are in `api/read_stream.rs`.

use crate::buffer::{BufferPrototype, NDBuffer};
use crate::data_types::{DataType, Order};
use crate::errors::{Error, Result};
use crate::options::{ReadOptions, StreamOptions};
use crate::pipeline::{
    AsyncUnits, Cancel, ChunkShare, Claim, FetchStage, FinishOnDrop, InnerFetch, ReadRequest,
    StopOnDrop, read_shared,
};
use crate::process_local::MadeIn;
use crate::zarr::{UnitPlan, check_subset, data_type_of, plan_units};
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
    /// Checks `subset`; its data type and the units its read will fetch (their keys are
    /// claimed in the stream's chunk share, and the read runs them, planned once).
    fn plan(&self, subset: &[Range<u64>]) -> Result<(DataType, UnitPlan)>;
    /// Reads `subset` into `out` (on a blocking thread), its units `plan`, fetching through
    /// `claim`.
    fn read(
        &self,
        subset: &[Range<u64>],
        out: &NDBuffer,
        opts: &ReadOptions,
        plan: UnitPlan,
        claim: &Claim,
        cancel: &Cancel,
    ) -> Result<()>;
    /// Runs `job` on a blocking thread.
    fn spawn(&self, job: Box<dyn FnOnce() + Send>);
}

fn plan_of<S: ?Sized>(array: &Array<S>, subset: &[Range<u64>]) -> Result<(DataType, UnitPlan)> {
    check_subset(array.shape(), subset, array.path().as_str())?;
    let dtype = data_type_of(array)?;
    Ok((dtype, plan_units(array, subset, dtype.size())?))
}

struct SyncSource<S: ?Sized>(Arc<Array<S>>);

impl<S: ?Sized + ReadableStorageTraits + 'static> Source for SyncSource<S> {
    fn plan(&self, subset: &[Range<u64>]) -> Result<(DataType, UnitPlan)> {
        plan_of(&self.0, subset)
    }

    fn read(
        &self,
        subset: &[Range<u64>],
        out: &NDBuffer,
        opts: &ReadOptions,
        plan: UnitPlan,
        claim: &Claim,
        cancel: &Cancel,
    ) -> Result<()> {
        let array = self.0.as_ref();
        read_shared(
            ReadRequest::new(array, subset, out, opts).with_plan(Some(plan)),
            InnerFetch::for_store(array),
            &FetchStage::for_sync_store(array)
                .shared_through(claim)
                .cancelled_by(|| cancel.check("read stream")),
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
    fn plan(&self, subset: &[Range<u64>]) -> Result<(DataType, UnitPlan)> {
        plan_of(&self.array, subset)
    }

    fn read(
        &self,
        subset: &[Range<u64>],
        out: &NDBuffer,
        opts: &ReadOptions,
        plan: UnitPlan,
        claim: &Claim,
        cancel: &Cancel,
    ) -> Result<()> {
        let array = self.array.as_ref();
        let units = AsyncUnits {
            array,
            handle: &self.handle,
            cancel,
            what: "read stream",
        };
        read_shared(
            ReadRequest::new(array, subset, out, opts).with_plan(Some(plan)),
            InnerFetch::for_async_store(array),
            // Stream reads share chunks through `claim`: the fetch-ahead stage runs the
            // workers' fetch on its threads rather than futures of its own.
            &FetchStage::for_async_store(&units)
                .shared_through(claim)
                .cancelled_by(|| units.check()),
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

/// The reads of one stream: the subsets still to admit, and those in flight in order.
pub(crate) struct StreamReads {
    subsets: Box<dyn Iterator<Item = Vec<Range<u64>>> + Send>,
    source: Arc<dyn Source>,
    proto: BufferPrototype,
    opts: StreamOptions,
    share: Arc<ChunkShare>,
    in_flight: VecDeque<InFlight>,
    next_index: usize,
    exhausted: bool,
    /// Where the reads' threads run (see `Drop`).
    made_in: MadeIn,
}

impl StreamReads {
    /// The reads of a sync array's subsets, each on a plain thread of its own.
    pub(crate) fn of_sync_array<S, I>(
        array: &Array<S>,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Self
    where
        S: ?Sized + ReadableStorageTraits + 'static,
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static,
    {
        let source = SyncSource(Arc::new(array.with_storage(array.storage())));
        let subsets = Box::new(subsets.into_iter());
        StreamReads::new(Arc::new(source), subsets, proto, opts)
    }

    /// The reads of an async array's subsets, on the blocking pool of the tokio runtime this
    /// is called in (an error outside one).
    pub(crate) fn of_async_array<S, I>(
        array: &Array<S>,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Result<Self>
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
        Ok(StreamReads::new(Arc::new(source), subsets, proto, opts))
    }

    fn new(
        source: Arc<dyn Source>,
        subsets: Box<dyn Iterator<Item = Vec<Range<u64>>> + Send>,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> Self {
        StreamReads {
            subsets,
            source,
            proto: proto.clone(),
            opts: opts.clone(),
            share: Arc::new(ChunkShare::default()),
            in_flight: VecDeque::new(),
            next_index: 0,
            exhausted: false,
            made_in: MadeIn::here(),
        }
    }

    /// Subsets admitted and not yet yielded: being read, or read and waiting to be taken.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Encoded chunks kept for sharing between the reads in flight.
    pub(crate) fn shared_chunks(&self) -> usize {
        self.share.kept()
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
            Ok((dtype, plan)) => {
                let claim = self
                    .share
                    .claim(plan.units.iter().map(|u| u.indices.clone()).collect());
                let (stop, finish) = Cancel::pair();
                let (source, proto) = (self.source.clone(), self.proto.clone());
                let (opts, ranges) = (self.opts.read.clone(), subset.clone());
                self.source.spawn(Box::new(move || {
                    let result = read_one(
                        source.as_ref(),
                        &ranges,
                        (dtype, plan),
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

    /// The next subset's result, in order (see `Stream::poll_next`).
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<NDBuffer>>> {
        let this = self;
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

    /// Bounds on the results still to come (see `Stream::size_hint`).
    pub(crate) fn size_hint(&self) -> (usize, Option<usize>) {
        if self.exhausted {
            return (self.in_flight.len(), Some(self.in_flight.len()));
        }
        let (lo, hi) = self.subsets.size_hint();
        let n = self.in_flight.len();
        (lo.saturating_add(n), hi.and_then(|h| h.checked_add(n)))
    }
}

impl Drop for StreamReads {
    fn drop(&mut self) {
        if self.made_in.is_another_process() {
            // A forked child dropping its parent's stream: the reads ran on parent threads
            // that do not exist here, and what they share may be locked by them for good.
            // Leave it all alone (leaked) rather than wait on it.
            std::mem::forget(std::mem::take(&mut self.in_flight));
            return;
        }
        // Stop every read first, so they stop together; each guard then waits for its own.
        for f in &self.in_flight {
            if let Some(stop) = &f.stop {
                stop.signal();
            }
        }
        self.in_flight.clear();
    }
}

/// One subset's read, on its blocking thread.
fn read_one(
    source: &dyn Source,
    subset: &[Range<u64>],
    (dtype, plan): (DataType, UnitPlan),
    proto: &BufferPrototype,
    opts: &ReadOptions,
    claim: &Claim,
    finish: &FinishOnDrop,
) -> Result<NDBuffer> {
    let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
    crate::pipeline::check_output_size("the stream's array", subset, dtype, proto, opts)?;
    // Every element is written by the read; on an error `out` is dropped, never returned.
    let out = NDBuffer::empty_unwritten(&shape, dtype, Order::C, proto)?;
    if out.is_empty() {
        return Ok(out);
    }
    if let Some(s) = proto.stream() {
        // Ordered after the prototype stream's earlier work (see ArrayReadExt::read).
        s.synchronize()?;
    }
    source.read(subset, &out, opts, plan, claim, finish.cancel())?;
    Ok(out)
}

pub(crate) fn ranges_text(subset: &[Range<u64>]) -> String {
    let parts: Vec<String> = subset
        .iter()
        .map(|r| format!("{}..{}", r.start, r.end))
        .collect();
    format!("[{}]", parts.join(", "))
}
