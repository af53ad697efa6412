//! The one ordered prefetch engine behind every read stream ([`crate::stream::ReadStream`],
//! of `NDBuffer`s or `VarLenBuffer`s, sync or async store): subsets admitted lazily up to
//! the prefetch bound, each planned once when admitted (on the consumer's thread) and read
//! on a blocking thread of its own, encoded chunks shared between the reads in flight
//! ([`ChunkShare`]), results yielded in order, and every read stopped (and waited for) when
//! the stream is dropped. What one read is comes from its [`StreamSource`]; the public
//! types and their documented behaviour are in `api/read_stream.rs`.

use crate::errors::{Error, Result};
use crate::options::StreamOptions;
use crate::pipeline::{Cancel, ChunkShare, Claim, StopOnDrop};
use crate::process_local::MadeIn;
use futures::channel::oneshot;
use std::collections::VecDeque;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The subsets of a stream, pulled lazily.
pub(crate) type Subsets = Box<dyn Iterator<Item = Vec<Range<u64>>> + Send>;

/// A planned subset's read: run on its blocking thread, fetching shared units through the
/// claim and stopping at its next chunk once cancelled.
pub(crate) type ReadJob<T> = Box<dyn FnOnce(&Claim, &Cancel) -> Result<T> + Send>;

/// One subset checked and planned: the units its read will fetch (claimed in the stream's
/// chunk share before the read starts) and the read itself, run on a blocking thread,
/// fetching shared units through the claim and stopping at its next chunk once cancelled.
pub(crate) struct PlannedRead<T> {
    pub(crate) units: Vec<Vec<u64>>,
    pub(crate) read: ReadJob<T>,
}

/// What one read of a stream is: how a subset is planned and read into a `T`, and where
/// its blocking thread comes from.
pub(crate) trait StreamSource<T>: Send + Sync + 'static {
    /// Checks and plans `subset` (an error becomes the subset's item).
    fn plan(self: Arc<Self>, subset: &[Range<u64>]) -> Result<PlannedRead<T>>;
    /// Runs `job` on a blocking thread: a plain thread of its own for sync stores, the
    /// runtime's blocking pool for async ones. A job that cannot start is dropped unrun,
    /// and its subset's item becomes an error.
    fn spawn(&self, job: Box<dyn FnOnce() + Send>);
}

/// One subset admitted: its result to come, and the guard that cancels its read.
struct InFlight<T> {
    index: usize,
    subset: Vec<Range<u64>>,
    result: oneshot::Receiver<Result<T>>,
    /// `None` when the subset failed before a read started.
    stop: Option<StopOnDrop>,
}

/// The reads of one stream: the subsets still to admit, and those in flight in order.
pub(crate) struct StreamReads<T> {
    subsets: Subsets,
    source: Arc<dyn StreamSource<T>>,
    prefetch: usize,
    share: Arc<ChunkShare>,
    in_flight: VecDeque<InFlight<T>>,
    next_index: usize,
    exhausted: bool,
    /// Where the reads' threads run (see `Drop`).
    made_in: MadeIn,
}

impl<T: Send + 'static> StreamReads<T> {
    /// The reads of `subsets`, each planned and read by `source`, at most
    /// `opts.in_flight()` at once.
    pub(crate) fn new(
        source: Arc<dyn StreamSource<T>>,
        subsets: Subsets,
        opts: &StreamOptions,
    ) -> Self {
        StreamReads {
            subsets,
            source,
            prefetch: opts.in_flight(),
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
        while !self.exhausted && self.in_flight.len() < self.prefetch {
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
        let stop = match self.source.clone().plan(&subset) {
            Err(e) => {
                let _ = tx.send(Err(e));
                None
            }
            Ok(PlannedRead { units, read }) => {
                let claim = self.share.claim(units);
                let (stop, finish) = Cancel::pair();
                self.source.spawn(Box::new(move || {
                    // Calling `read` consumes it: what it holds of the array (or its store)
                    // is dropped when it returns.
                    let result = read(&claim, finish.cancel());
                    drop(claim);
                    let _ = tx.send(result);
                    // `finish` drops last: once the stream's drop has waited for it, the
                    // read holds nothing of the array any more.
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
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T>>> {
        self.fill();
        let Some(front) = self.in_flight.front_mut() else {
            return Poll::Ready(None);
        };
        let got = match Pin::new(&mut front.result).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(got) => got,
        };
        let Some(done) = self.in_flight.pop_front() else {
            return Poll::Ready(None);
        };
        // The next read starts now, not at the next poll.
        self.fill();
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
        let n = self.in_flight.len();
        if self.exhausted {
            return (n, Some(n));
        }
        let (lo, hi) = self.subsets.size_hint();
        (lo.saturating_add(n), hi.and_then(|h| h.checked_add(n)))
    }
}

impl<T> Drop for StreamReads<T> {
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

/// `[a..b, c..d]`: a subset as an item's error names it.
fn ranges_text(subset: &[Range<u64>]) -> String {
    let parts: Vec<String> = subset
        .iter()
        .map(|r| format!("{}..{}", r.start, r.end))
        .collect();
    format!("[{}]", parts.join(", "))
}
