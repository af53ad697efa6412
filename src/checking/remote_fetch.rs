//! How a check of a remote array fetches its chunks: through the pipeline's fetch-ahead
//! stage, up to `CheckOptions::io_concurrency` requests in flight (as reads keep) and at
//! most [`AHEAD_BYTES`] (or a quarter of the memory this process may still take) fetched and
//! not yet checked — not one request per decoding thread, which leaves a link at 20–80 ms
//! nearly idle.
//!
//! An object store's chunks are fetched as futures that one I/O thread drives on the
//! runtime of zarrbuf's blocking stores (`AsyncFetch`), each the key's whole value, a
//! missing key `None`; a key that cannot be fetched after object_store's retries (and its
//! timeouts, so a stalled server cannot hang the check) is the error its finding carries.
//! An icechunk repository at a URL is fetched through its own store, a thread per request.

use super::check_chunks::{Checked, Fetching, StoredChunk, check_chunks};
use super::check_options::CheckOptions;
use super::remote_keys::ObjectKeys;
use crate::errors::{Error, Result};
use crate::options::{io_concurrency, io_concurrency_is_default};
use crate::pipeline::{AheadLimits, AsyncFetch, FetchStage, ShardReads, encoded_chunk};
use crate::stores::{DynArray, WaitOnRuntime};
use crate::zarr::{Unit, UnitPlan};
use bytes::Bytes;
use futures::future::BoxFuture;
use object_store::{GetOptions, ObjectStore};
use zarrs::storage::storage_adapter::async_to_sync::AsyncToSyncBlockOn;

/// Bytes fetched and not yet checked, at most (one request may always run): the staging
/// budget reads take by default.
pub(super) const AHEAD_BYTES: u64 = 256 << 20;

/// Checks `chunks` of `array` (at the object-store URL `location`) fetched ahead of the
/// decoders: through `objects` (an object store), or through the array's own store (an
/// icechunk repository).
pub(super) fn check_fetched_ahead(
    array: &DynArray,
    chunks: Vec<StoredChunk>,
    opts: &CheckOptions,
    location: &str,
    objects: Option<&ObjectKeys>,
) -> Result<Checked> {
    let limits = ahead_limits(
        opts,
        crate::stores::latency_origin(array.storage().as_ref()),
    );
    match objects {
        Some(objects) => {
            let fetch = ObjectFetch {
                array,
                store: objects.store().as_ref(),
                location,
                runtime: WaitOnRuntime::new()?,
            };
            let blocking = |_: &UnitPlan, _: Option<&ShardReads>, unit: &Unit| {
                fetch.runtime.block_on(fetch.get(&unit.indices))
            };
            let stage = FetchStage::from_fetch(blocking).with_async(&fetch);
            check_chunks(array, chunks, opts, &Fetching::Ahead(stage, limits))
        }
        None => {
            // Whole, with no size check first: a wrong size is the check's to report.
            let blocking = |_: &UnitPlan, _: Option<&ShardReads>, unit: &Unit| {
                encoded_chunk(array, &unit.indices)
            };
            let stage = FetchStage::from_fetch(blocking);
            check_chunks(array, chunks, opts, &Fetching::Ahead(stage, limits))
        }
    }
}

/// How far a check fetches ahead: `opts.io_concurrency` requests (as reads: the option,
/// `ZARRBUF_IO_CONCURRENCY`, else 128, more for small chunks when neither chose), and
/// [`AHEAD_BYTES`] or a quarter of the memory this process may still take, the lesser; the
/// default limit smaller for a store that answers sooner than 80 ms (as reads; `origin`
/// times it).
fn ahead_limits(opts: &CheckOptions, origin: Option<std::sync::Arc<str>>) -> AheadLimits {
    let room = crate::memory_limit::available_bytes().map_or(AHEAD_BYTES, |n| n / 4);
    AheadLimits {
        requests: io_concurrency(opts.io_concurrency),
        auto: io_concurrency_is_default(opts.io_concurrency),
        bytes: AHEAD_BYTES.min(room).max(1),
        origin,
    }
}

/// Whole chunks from an object store, as futures on the blocking stores' runtime.
struct ObjectFetch<'a> {
    array: &'a DynArray,
    store: &'a dyn ObjectStore,
    location: &'a str,
    runtime: WaitOnRuntime,
}

impl ObjectFetch<'_> {
    /// The whole stored value of the chunk at `indices` (`None`: not stored).
    async fn get(&self, indices: &[u64]) -> Result<Option<Bytes>> {
        let key = self.array.chunk_key(indices);
        let path = object_store::path::Path::from(key.as_str());
        let failed = |e: object_store::Error| {
            // One line: a server's error page spans many.
            let why = e
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            Error::store(
                self.location,
                format!("cannot be fetched (after the store's retries): {why}"),
                Some(Box::new(e)),
            )
        };
        let got = match self.store.get_opts(&path, GetOptions::default()).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(failed(e)),
        };
        // Stores hand over the buffer they read into: taken as it is where it is not shared.
        got.bytes().await.map(Some).map_err(failed)
    }
}

impl AsyncFetch for ObjectFetch<'_> {
    fn block_on(&self, fut: BoxFuture<'_, ()>) {
        self.runtime.block_on(fut);
    }

    fn fetch<'a>(
        &'a self,
        _plan: &'a UnitPlan,
        _shards: Option<&'a ShardReads>,
        unit: &'a Unit,
    ) -> BoxFuture<'a, Result<Option<Bytes>>> {
        Box::pin(self.get(&unit.indices))
    }
}
