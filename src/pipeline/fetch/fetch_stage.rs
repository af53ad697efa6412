//! The fetch seam: how a read gets one unit's encoded bytes, as one value ([`FetchStage`]).
//!
//! Every read route and the fetch-ahead stage (`fetch_ahead.rs`) fetch through it, and every
//! front makes it with one of its constructors, never field by field:
//!
//! - [`FetchStage::for_sync_store`]: a sync store, fetched on the calling thread
//!   (`fetch_unit.rs`), shard requests led ahead on it too;
//! - [`FetchStage::for_async_store`]: an async store read from a blocking thread
//!   ([`AsyncUnits`]): waited for by a worker, or driven as futures on the read's runtime by
//!   the fetch-ahead stage;
//! - [`FetchStage::from_fetch`]: any other fetch (a small read's shared fetches, a check's
//!   whole objects), optionally with futures of its own ([`FetchStage::with_async`]).
//!
//! Decorators wrap a stage: [`FetchStage::shared_through`] takes each unit from the reads
//! of a stream that claimed it too (`chunk_share.rs`), [`FetchStage::cancelled_by`] checks
//! a read given up before every fetch.

use super::fetch_unit::{fetch_unit, fetch_unit_async, run_ahead_async, run_ahead_sync};
use super::shard_reads::Ahead;
use crate::errors::Result;
use crate::pipeline::{Cancel, Claim, ShardReads};
use crate::zarr::{Unit, UnitPlan};
use bytes::Bytes;
use futures::future::BoxFuture;
use zarrs::array::Array;
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

/// Fetches one unit's encoded bytes (`None`: not stored); called on pipeline worker threads
/// and on the fetch-ahead stage's I/O threads.
pub(crate) type Fetch<'a> =
    dyn Fn(&UnitPlan, Option<&ShardReads>, &Unit) -> Result<Option<Bytes>> + Sync + 'a;

/// Runs one shard request a fetch-ahead thread leads (an index or a merged range), on the
/// read's store; its outcome is published to the workers through the leader it carries.
pub(crate) type RunAhead<'a> = dyn Fn(&ShardReads, Ahead<'_>) + Sync + 'a;

/// Whether the read was given up: an error once it was.
type Check<'a> = dyn Fn() -> Result<()> + Sync + 'a;

/// Fetches for the fetch-ahead stage of an async store: one I/O thread drives every request
/// in flight as a future on the read's runtime, instead of a thread blocked per request
/// (measured on 2 cores: 512 threads each waiting for one request read 32³ chunks at a
/// quarter of the rate of 32, with no delay at all).
pub(crate) trait AsyncFetch: Sync {
    /// Runs `fut` to completion from this (blocking) thread, on the read's runtime.
    fn block_on(&self, fut: BoxFuture<'_, ()>);
    /// The encoded bytes of `unit` (`None`: not stored).
    fn fetch<'a>(
        &'a self,
        plan: &'a UnitPlan,
        shards: Option<&'a ShardReads>,
        unit: &'a Unit,
    ) -> BoxFuture<'a, Result<Option<Bytes>>>;
}

/// How a read fetches: the plain fetch its workers call, and what the fetch-ahead stage
/// may use besides (for object stores). See the module docs for its constructors.
pub(crate) struct FetchStage<'a> {
    /// One unit's bytes, on the calling thread.
    fetch: Box<Fetch<'a>>,
    /// Runs a shard request led ahead (sharded reads that merge ranges).
    run_ahead: Option<Box<RunAhead<'a>>>,
    /// Fetches plain units as futures (async stores).
    fetch_async: Option<&'a dyn AsyncFetch>,
    /// Whether the read was given up (its future dropped): checked before a worker takes a
    /// unit fetched ahead, as the plain fetch checks before fetching.
    check: Box<Check<'a>>,
}

impl<'a> FetchStage<'a> {
    /// The fetch stage of a sync store: each unit fetched on the thread that asks
    /// (`fetch_unit`), shard requests led ahead on the fetch-ahead stage's threads.
    pub(crate) fn for_sync_store<S: ?Sized + ReadableStorageTraits + 'static>(
        array: &'a Array<S>,
    ) -> Self {
        FetchStage {
            fetch: Box::new(move |plan, shards, unit| fetch_unit(array, plan, shards, unit)),
            run_ahead: Some(Box::new(move |shards, job| {
                run_ahead_sync(array, shards, job)
            })),
            fetch_async: None,
            check: Box::new(|| Ok(())),
        }
    }

    /// The fetch stage of an async store read from a blocking thread: a worker waits for its
    /// unit on the read's runtime; the fetch-ahead stage drives plain units as futures and
    /// leads shard requests there; every fetch is given up once the read's future is dropped.
    pub(crate) fn for_async_store<S: ?Sized + AsyncReadableStorageTraits + 'static>(
        units: &'a AsyncUnits<'a, S>,
    ) -> Self {
        FetchStage {
            fetch: Box::new(move |plan, shards, unit| units.fetch_blocking(plan, shards, unit)),
            run_ahead: Some(Box::new(move |shards, job| units.run_ahead(shards, job))),
            fetch_async: Some(units),
            check: Box::new(move || units.check()),
        }
    }

    /// A stage of `fetch` alone: no shard requests led ahead, no futures, never given up.
    pub(crate) fn from_fetch(
        fetch: impl Fn(&UnitPlan, Option<&ShardReads>, &Unit) -> Result<Option<Bytes>> + Sync + 'a,
    ) -> Self {
        FetchStage {
            fetch: Box::new(fetch),
            run_ahead: None,
            fetch_async: None,
            check: Box::new(|| Ok(())),
        }
    }

    /// This stage, its plain units fetched ahead as futures by `fetch_async`.
    pub(crate) fn with_async(mut self, fetch_async: &'a dyn AsyncFetch) -> Self {
        self.fetch_async = Some(fetch_async);
        self
    }

    /// This stage, each unit shared with the other reads of a stream that claimed it
    /// (`claim`). The fetch-ahead stage then runs the workers' fetch on its threads rather
    /// than futures of its own, so that what it fetches is shared too.
    pub(crate) fn shared_through(self, claim: &'a Claim) -> Self {
        let FetchStage {
            fetch,
            run_ahead,
            check,
            ..
        } = self;
        FetchStage {
            fetch: Box::new(move |plan, shards, unit| {
                claim.get(&unit.indices, || fetch(plan, shards, unit))
            }),
            run_ahead,
            fetch_async: None,
            check,
        }
    }

    /// This stage, given up once `check` fails: checked before every fetch and before a
    /// worker takes a unit fetched ahead.
    pub(crate) fn cancelled_by(self, check: impl Fn() -> Result<()> + Sync + Clone + 'a) -> Self {
        let FetchStage {
            fetch,
            run_ahead,
            fetch_async,
            ..
        } = self;
        let before = check.clone();
        FetchStage {
            fetch: Box::new(move |plan, shards, unit| {
                before()?;
                fetch(plan, shards, unit)
            }),
            run_ahead,
            fetch_async,
            check: Box::new(check),
        }
    }

    /// `unit`'s encoded bytes (`None`: not stored), fetched on this thread.
    pub(crate) fn fetch(
        &self,
        plan: &UnitPlan,
        shards: Option<&ShardReads>,
        unit: &Unit,
    ) -> Result<Option<Bytes>> {
        (self.fetch)(plan, shards, unit)
    }

    /// The parts the fetch-ahead stage runs: the plain fetch, the shard requests led ahead,
    /// the futures of plain units and the check.
    pub(super) fn parts(
        &'a self,
    ) -> (
        &'a Fetch<'a>,
        Option<&'a RunAhead<'a>>,
        Option<&'a dyn AsyncFetch>,
        &'a Check<'a>,
    ) {
        (
            &*self.fetch,
            self.run_ahead.as_deref(),
            self.fetch_async,
            &*self.check,
        )
    }
}

/// How a read of an async store fetches from a blocking thread: its units (as futures for the
/// fetch-ahead stage, or waited for by a worker) and its shard requests led ahead, on the
/// read's runtime, each given up when the read's future is dropped.
pub(crate) struct AsyncUnits<'a, S: ?Sized> {
    pub array: &'a Array<S>,
    pub handle: &'a tokio::runtime::Handle,
    pub cancel: &'a Cancel,
    /// What the cancellation error calls the operation ("read", "read stream").
    pub what: &'static str,
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> AsyncUnits<'_, S> {
    /// An error once the read's future was dropped.
    pub(crate) fn check(&self) -> Result<()> {
        self.cancel.check(self.what)
    }

    /// `unit`'s encoded bytes, waited for on this (worker) thread.
    pub(crate) fn fetch_blocking(
        &self,
        plan: &UnitPlan,
        shards: Option<&ShardReads>,
        unit: &Unit,
    ) -> Result<Option<Bytes>> {
        // This worker waits for the fetch anyway: local files are read on it.
        crate::stores::reading_inline(|| self.handle.block_on(self.fetch(plan, shards, unit)))
    }

    /// Runs a shard request led ahead of the workers; its outcome, a cancellation included,
    /// reaches them through the leader it carries.
    pub(crate) fn run_ahead(&self, shards: &ShardReads, job: Ahead<'_>) {
        let _ = crate::stores::reading_inline(|| {
            self.handle
                .block_on(self.cancel.unless_dropped(self.what, async {
                    run_ahead_async(self.array, shards, job).await;
                    Ok(())
                }))
        });
    }
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> AsyncFetch for AsyncUnits<'_, S> {
    fn block_on(&self, fut: BoxFuture<'_, ()>) {
        crate::stores::reading_inline(|| self.handle.block_on(fut));
    }

    fn fetch<'b>(
        &'b self,
        plan: &'b UnitPlan,
        shards: Option<&'b ShardReads>,
        unit: &'b Unit,
    ) -> BoxFuture<'b, Result<Option<Bytes>>> {
        Box::pin(async move {
            self.check()?;
            self.cancel
                .unless_dropped(self.what, fetch_unit_async(self.array, plan, shards, unit))
                .await
        })
    }
}
