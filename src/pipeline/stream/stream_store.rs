//! How a stream's reads reach the store: [`SyncStreamStore`] (each read on a plain thread
//! of its own, fetching on it) or [`AsyncStreamStore`] (each read on the tokio runtime's
//! blocking pool, fetching through the runtime). Both fetch every unit through the stream's
//! chunk share and stop at their next chunk once cancelled.

use crate::errors::{Error, Result};
use crate::pipeline::{AsyncUnits, Cancel, Claim, FetchStage, InnerFetch};
use zarrs::array::Array;
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

/// What the cancellation error calls a stream's read.
const WHAT: &str = "read stream";

/// The store side of a stream's reads.
pub(crate) trait StreamStore: Send + Sync + 'static {
    type Storage: ?Sized + Send + Sync + 'static;

    /// The array the stream reads.
    fn array(&self) -> &Array<Self::Storage>;

    /// How a sharded array's inner chunks are fetched (merged into few requests from
    /// object stores).
    fn inner_fetch(&self) -> InnerFetch;

    /// Runs `read` with this store's fetch stage: units fetched through `claim` (fetched
    /// once for all the reads in flight that claimed them), stopped by `cancel`.
    fn with_stage<R>(
        &self,
        claim: &Claim,
        cancel: &Cancel,
        read: impl FnOnce(&Array<Self::Storage>, &FetchStage<'_>) -> R,
    ) -> R;

    /// Runs `job` on a blocking thread (dropped unrun if none can start).
    fn spawn(&self, job: Box<dyn FnOnce() + Send>);
}

/// A sync store's stream: reads on plain threads.
pub(crate) struct SyncStreamStore<S: ?Sized>(Array<S>);

impl<S: ?Sized + ReadableStorageTraits + 'static> SyncStreamStore<S> {
    pub(crate) fn new(array: &Array<S>) -> Self {
        SyncStreamStore(array.with_storage(array.storage()))
    }
}

impl<S: ?Sized + ReadableStorageTraits + 'static> StreamStore for SyncStreamStore<S> {
    type Storage = S;

    fn array(&self) -> &Array<S> {
        &self.0
    }

    fn inner_fetch(&self) -> InnerFetch {
        InnerFetch::for_store(&self.0)
    }

    fn with_stage<R>(
        &self,
        claim: &Claim,
        cancel: &Cancel,
        read: impl FnOnce(&Array<S>, &FetchStage<'_>) -> R,
    ) -> R {
        let stage = FetchStage::for_sync_store(&self.0)
            .shared_through(claim)
            .cancelled_by(|| cancel.check(WHAT));
        read(&self.0, &stage)
    }

    fn spawn(&self, job: Box<dyn FnOnce() + Send>) {
        // A thread that cannot start drops `job`: its item becomes an error.
        let _ = std::thread::Builder::new()
            .name("zarrbuf-stream".into())
            .spawn(job);
    }
}

/// An async store's stream: reads on the blocking pool of the runtime it was made in.
pub(crate) struct AsyncStreamStore<S: ?Sized> {
    array: Array<S>,
    handle: tokio::runtime::Handle,
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> AsyncStreamStore<S> {
    /// An error outside a tokio runtime.
    pub(crate) fn new(array: &Array<S>) -> Result<Self> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::InvalidArgument(
                "read streams of async arrays need a tokio runtime: make them inside one \
                 (in a task, or after `runtime.enter()`)"
                    .into(),
            )
        })?;
        Ok(AsyncStreamStore {
            array: array.with_storage(array.storage()),
            handle,
        })
    }
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> StreamStore for AsyncStreamStore<S> {
    type Storage = S;

    fn array(&self) -> &Array<S> {
        &self.array
    }

    fn inner_fetch(&self) -> InnerFetch {
        InnerFetch::for_async_store(&self.array)
    }

    fn with_stage<R>(
        &self,
        claim: &Claim,
        cancel: &Cancel,
        read: impl FnOnce(&Array<S>, &FetchStage<'_>) -> R,
    ) -> R {
        let units = AsyncUnits {
            array: &self.array,
            handle: &self.handle,
            cancel,
            what: WHAT,
        };
        // Shared units go through `claim`: the fetch-ahead stage runs the workers' fetch on
        // its threads rather than futures of its own.
        let stage = FetchStage::for_async_store(&units)
            .shared_through(claim)
            .cancelled_by(|| units.check());
        read(&self.array, &stage)
    }

    fn spawn(&self, job: Box<dyn FnOnce() + Send>) {
        // Dropped unrun if the runtime shuts down: its item becomes an error.
        drop(self.handle.spawn_blocking(job));
    }
}
