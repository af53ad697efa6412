//! The reads behind a variable-length read stream ([`crate::VarLenReadStream`]): subsets
//! admitted lazily up to the prefetch bound, each read on a plain thread of its own by the
//! function the stream was made with (`api/read_varlen.rs`: through `read_varlen`;
//! `api/read_varlen_async.rs`: on the tokio runtime), results yielded in order, and every read stopped (and waited for) when
//! the stream is dropped. Unlike the fixed-size [`crate::pipeline::StreamReads`], the reads share no
//! encoded chunks: each fetches its own.

use super::read_stream::ranges_text;
use crate::buffer::VarLenBuffer;
use crate::errors::{Error, Result};
use crate::options::StreamOptions;
use crate::pipeline::{Cancel, StopOnDrop};
use crate::process_local::MadeIn;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, mpsc};

/// Reads one subset (on its thread), stopping at its next chunk once `cancel` is signalled.
pub(crate) type VarLenReadOne =
    dyn Fn(&[Range<u64>], &Cancel) -> Result<VarLenBuffer> + Send + Sync;

/// One subset admitted: its result to come, and the guard that cancels its read.
struct InFlight {
    index: usize,
    subset: Vec<Range<u64>>,
    result: mpsc::Receiver<Result<VarLenBuffer>>,
    stop: StopOnDrop,
}

/// The reads of one variable-length stream: the subsets still to admit, and those in
/// flight in order.
pub(crate) struct VarLenStreamReads {
    subsets: Box<dyn Iterator<Item = Vec<Range<u64>>> + Send>,
    read: Arc<VarLenReadOne>,
    prefetch: usize,
    in_flight: VecDeque<InFlight>,
    next_index: usize,
    exhausted: bool,
    /// Where the reads' threads run (see `Drop`).
    made_in: MadeIn,
}

impl VarLenStreamReads {
    /// The reads of `subsets`, each by `read` on a plain thread of its own.
    pub(crate) fn new(
        read: Arc<VarLenReadOne>,
        subsets: Box<dyn Iterator<Item = Vec<Range<u64>>> + Send>,
        opts: &StreamOptions,
    ) -> Self {
        VarLenStreamReads {
            subsets,
            read,
            prefetch: opts.in_flight(),
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
        let (tx, rx) = mpsc::sync_channel(1);
        let (stop, finish) = Cancel::pair();
        let (read, ranges) = (self.read.clone(), subset.clone());
        let job = move || {
            let result = read(&ranges, finish.cancel());
            let _ = tx.send(result);
            // `finish` drops last: once the stream's drop has waited for it, the read holds
            // nothing of the array (or its store) any more.
            drop((read, ranges));
            drop(finish);
        };
        // A thread that cannot start drops `job` (and `tx`): its item becomes an error.
        let _ = std::thread::Builder::new()
            .name("zarrbuf-varlen-stream".into())
            .spawn(job);
        self.in_flight.push_back(InFlight {
            index,
            subset,
            result: rx,
            stop,
        });
    }

    /// The next subset's result, in order, waiting for it on this thread.
    pub(crate) fn next_blocking(&mut self) -> Option<Result<VarLenBuffer>> {
        self.fill();
        let done = self.in_flight.pop_front()?;
        let got = done.result.recv();
        // The next read starts now, not at the next call.
        self.fill();
        let wrap = |source: Error| Error::StreamItem {
            index: done.index,
            subset: ranges_text(&done.subset),
            source: Box::new(source),
        };
        Some(match got {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(wrap(e)),
            Err(mpsc::RecvError) => Err(wrap(Error::Cancelled(
                "the read stopped before it finished (its thread could not start); read the \
                 subset again"
                    .into(),
            ))),
        })
    }

    /// Bounds on the results still to come (see `Iterator::size_hint`).
    pub(crate) fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.in_flight.len();
        if self.exhausted {
            return (n, Some(n));
        }
        let (lo, hi) = self.subsets.size_hint();
        (lo.saturating_add(n), hi.and_then(|h| h.checked_add(n)))
    }
}

impl Drop for VarLenStreamReads {
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
            f.stop.signal();
        }
        self.in_flight.clear();
    }
}
