//! The store stage of staged writes: encoded chunks are handed to a pool of store threads,
//! so the compressing workers go on with the next chunk while stores wait.
//!
//! Storing a chunk mostly waits: a file system store syncs every file it writes (zarrs'
//! `FilesystemStore` calls `fsync`), an object store waits a round trip. On the 2-core
//! development machine one thread syncing 1 MiB files wrote 0.26 GB/s, two 0.32 and eight
//! 0.46, so stores run on more threads than chunks are compressed on. The bytes queued or
//! being stored are bounded (at least one chunk always goes through), and the first store
//! error stops the write: chunks stored before it stay stored.

use crate::errors::{Error, Result};
use crate::pipeline::ChunkSink;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::Scope;

/// One store for a store thread.
enum StoreJob {
    /// Stores the fully encoded bytes of the chunk at `indices`.
    Encoded {
        indices: Vec<u64>,
        encoded: bytes::Bytes,
    },
    /// Erases the chunk at `indices` (it holds only the fill value).
    Erase { indices: Vec<u64> },
}

impl StoreJob {
    fn bytes(&self) -> usize {
        match self {
            StoreJob::Encoded { encoded, .. } => encoded.len(),
            StoreJob::Erase { .. } => 0,
        }
    }
}

/// Bytes queued or being stored, and the first store error.
struct State {
    in_flight: usize,
    error: Option<Error>,
}

/// The queue the compressing workers put encoded chunks on; store threads (spawned in the
/// caller's thread scope with [`StoreQueue::spawn_stores`]) take them off.
pub(crate) struct StoreQueue {
    sender: Mutex<Option<SyncSender<StoreJob>>>,
    receiver: Mutex<Receiver<StoreJob>>,
    threads: usize,
    state: Mutex<State>,
    /// Signalled when stored bytes leave the queue (or a store fails).
    space: Condvar,
    budget: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A store thread that panicked already failed the write (see `Taken`); the state is
    // still consistent.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A job a store thread took: its bytes leave the budget when this drops, also when the
/// store panics (which fails the write instead of leaving `finish` waiting).
struct Taken<'a> {
    queue: &'a StoreQueue,
    bytes: usize,
    result: Result<()>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let mut state = lock(&self.queue.state);
        state.in_flight -= self.bytes;
        let result = std::mem::replace(&mut self.result, Ok(()));
        if let Err(e) = result {
            state.error.get_or_insert(e);
        } else if std::thread::panicking() {
            state.error.get_or_insert(Error::Cancelled(
                "a store thread panicked while storing a chunk (internal error: please report)"
                    .into(),
            ));
        }
        drop(state);
        self.queue.space.notify_all();
    }
}

impl StoreQueue {
    /// A queue for `threads` store threads (at least 1) with at most `budget` encoded bytes
    /// queued or being stored at once.
    pub(crate) fn new(threads: usize, budget: usize) -> StoreQueue {
        let threads = threads.max(1);
        let (tx, rx) = sync_channel::<StoreJob>(threads);
        StoreQueue {
            sender: Mutex::new(Some(tx)),
            receiver: Mutex::new(rx),
            threads,
            state: Mutex::new(State {
                in_flight: 0,
                error: None,
            }),
            space: Condvar::new(),
            budget,
        }
    }

    /// Starts the store threads in `scope`, storing into `sink`. They stop once
    /// [`finish`](Self::finish) has closed the queue and every queued job is done.
    pub(crate) fn spawn_stores<'scope, 'env: 'scope>(
        &'env self,
        scope: &'scope Scope<'scope, 'env>,
        sink: &'env dyn ChunkSink,
    ) {
        for _ in 0..self.threads {
            scope.spawn(move || self.store_until_closed(sink));
        }
    }

    fn store_until_closed(&self, sink: &dyn ChunkSink) {
        loop {
            let job = match lock(&self.receiver).recv() {
                Ok(job) => job,
                // Closed: every queued job is taken.
                Err(_) => return,
            };
            let mut taken = Taken {
                queue: self,
                bytes: job.bytes(),
                result: Ok(()),
            };
            // Jobs queued before a failure are still stored (the chunks before the failing
            // one stay written); `push` refuses new ones.
            taken.result = match job {
                // SAFETY: whoever queued the job vouched for `encoded` (see `store_encoded`).
                StoreJob::Encoded { indices, encoded } => unsafe {
                    sink.store_encoded(&indices, encoded)
                },
                StoreJob::Erase { indices } => sink.erase(&indices),
            };
        }
    }

    /// Queues the store of `encoded` as chunk `indices`, waiting while the budget is spent.
    /// Fails once a store has failed ([`finish`](Self::finish) gives that store's error).
    ///
    /// # Safety
    /// `encoded` must be a valid encoding of the chunk under the array's codec chain (as for
    /// [`ChunkSink::store_encoded`]).
    pub(crate) unsafe fn store_encoded(
        &self,
        indices: &[u64],
        encoded: bytes::Bytes,
    ) -> Result<()> {
        self.push(StoreJob::Encoded {
            indices: indices.to_vec(),
            encoded,
        })
    }

    /// Queues erasing chunk `indices`.
    pub(crate) fn erase(&self, indices: &[u64]) -> Result<()> {
        self.push(StoreJob::Erase {
            indices: indices.to_vec(),
        })
    }

    fn push(&self, job: StoreJob) -> Result<()> {
        let stopped =
            || Error::Cancelled("the write stopped because storing an earlier chunk failed".into());
        let bytes = job.bytes();
        let mut state = lock(&self.state);
        // At least one job is always let through, however large.
        while state.error.is_none() && state.in_flight > 0 && state.in_flight + bytes > self.budget
        {
            state = self
                .space
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        if state.error.is_some() {
            return Err(stopped());
        }
        state.in_flight += bytes;
        drop(state);
        let sent = lock(&self.sender)
            .as_ref()
            .is_some_and(|tx| tx.send(job).is_ok());
        if sent {
            return Ok(());
        }
        lock(&self.state).in_flight -= bytes;
        self.space.notify_all();
        Err(stopped())
    }

    /// Closes the queue, waits for every queued store, and gives the first store error.
    /// Called after the last chunk is queued (also after a failed run), inside the scope
    /// the store threads run in.
    pub(crate) fn finish(&self) -> Result<()> {
        lock(&self.sender).take();
        let mut state = lock(&self.state);
        while state.in_flight > 0 {
            state = self
                .space
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        match state.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use zarrs::array::{ArraySubset, CodecOptions};

    /// A sink that records what it stores, tracks the bytes being stored at once, and fails
    /// (or panics on) chosen chunks.
    #[derive(Default)]
    struct Recording {
        stored: Mutex<Vec<Vec<u64>>>,
        erased: Mutex<Vec<Vec<u64>>>,
        busy: AtomicUsize,
        most_busy: AtomicUsize,
        fail: Option<u64>,
        panic: Option<u64>,
    }

    impl ChunkSink for Recording {
        fn erase(&self, indices: &[u64]) -> Result<()> {
            lock(&self.erased).push(indices.to_vec());
            Ok(())
        }

        unsafe fn store_encoded(&self, indices: &[u64], encoded: bytes::Bytes) -> Result<()> {
            let now = self.busy.fetch_add(encoded.len(), Ordering::SeqCst) + encoded.len();
            self.most_busy.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
            self.busy.fetch_sub(encoded.len(), Ordering::SeqCst);
            if self.panic == Some(indices[0]) {
                panic!("test panic in a store");
            }
            if self.fail == Some(indices[0]) {
                return Err(Error::InvalidArgument(format!("chunk {indices:?} refused")));
            }
            lock(&self.stored).push(indices.to_vec());
            Ok(())
        }

        fn store_subset(
            &self,
            _: &[u64],
            _: &ArraySubset,
            _: &[u8],
            _: &CodecOptions,
        ) -> Result<()> {
            unreachable!("the store queue never stores subsets")
        }
    }

    /// Queues chunks 0..n of `len` bytes (every third erased) and finishes.
    fn run(sink: &Recording, n: u64, len: usize, threads: usize, budget: usize) -> Result<()> {
        let queue = StoreQueue::new(threads, budget);
        std::thread::scope(|scope| {
            queue.spawn_stores(scope, sink);
            let mut queued = Ok(());
            for i in 0..n {
                let r = if i % 3 == 2 {
                    queue.erase(&[i])
                } else {
                    // SAFETY: the recording sink accepts any bytes.
                    unsafe { queue.store_encoded(&[i], bytes::Bytes::from(vec![0u8; len])) }
                };
                if let Err(e) = r {
                    queued = Err(e);
                    break;
                }
            }
            queue.finish().and(queued)
        })
    }

    #[test]
    fn every_chunk_is_stored_or_erased_within_the_budget() {
        let sink = Recording::default();
        run(&sink, 60, 1000, 8, 3000).unwrap();
        let mut stored = lock(&sink.stored).clone();
        stored.sort();
        let expected: Vec<Vec<u64>> = (0..60).filter(|i| i % 3 != 2).map(|i| vec![i]).collect();
        assert_eq!(stored, expected);
        assert_eq!(lock(&sink.erased).len(), 20);
        assert!(sink.most_busy.load(Ordering::SeqCst) <= 3000);
        // More than one store at once (8 threads, room for 3 chunks).
        assert!(sink.most_busy.load(Ordering::SeqCst) >= 2000);
    }

    #[test]
    fn a_chunk_larger_than_the_budget_still_goes_through_alone() {
        let sink = Recording::default();
        run(&sink, 5, 5000, 4, 1000).unwrap();
        assert_eq!(lock(&sink.stored).len(), 4);
        assert_eq!(sink.most_busy.load(Ordering::SeqCst), 5000);
    }

    #[test]
    fn the_first_store_error_stops_the_write_and_is_returned() {
        let sink = Recording {
            fail: Some(10),
            ..Default::default()
        };
        let err = run(&sink, 200, 100, 2, 200).unwrap_err().to_string();
        assert!(err.contains("chunk [10] refused"), "{err}");
        let stored = lock(&sink.stored).clone();
        // Chunks before the failure were stored; the queue stopped soon after it.
        assert!(stored.contains(&vec![0]) && stored.contains(&vec![9]));
        assert!(stored.len() < 150, "{} stored", stored.len());
    }

    #[test]
    fn a_panicking_store_fails_the_write_instead_of_hanging() {
        let sink = Recording {
            panic: Some(4),
            ..Default::default()
        };
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&sink, 50, 10, 3, 100)));
        // The scope re-raises the store thread's panic once every thread has stopped.
        assert!(outcome.is_err());
    }
}
