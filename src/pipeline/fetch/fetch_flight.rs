//! Encoded chunks shared by concurrent independent reads: a process-wide single-flight table.
//!
//! Several threads or tasks reading the same array at once (a DataLoader's workers) often
//! need the same chunk. The first read to fetch a unit *leads*: it records a flight under
//! the unit's key and fetches; a read that wants the same unit while the flight is open
//! waits for it and takes a copy of its bytes, or of its error. When the leader finishes, the
//! flight leaves the table at once: the table holds fetches in flight only, never finished
//! ones (it is not a cache), and at most [`MAX_FLIGHTS`] of them (beyond that a fetch runs
//! unshared), so it cannot grow under any pattern of reads.
//!
//! Keys: the store object (its address: the leader holds the store while its flight is
//! open, so the address is not reused meanwhile), the unit's store key (with the inner
//! chunk and shard layout for sharded arrays), the write epoch
//! ([`crate::cache::write_epoch`], moved by every write through zarrbuf when it begins and
//! when it ends: a read that began after a write ended never joins a fetch from before it),
//! and whether the read is sync or async. Sync readers wait on a condition variable and
//! only for sync leaders, which always run; async readers await a notification and only for
//! async leaders, so a sync wait can never block a runtime thread an async leader needs.
//!
//! Cancellation: a waiter that is dropped (its future) just lets go of the flight; a leader
//! that is dropped before it finishes (its future cancelled, or a panic) marks the flight
//! abandoned, and its waiters fetch the unit themselves (one of them leading anew). An
//! async leader is a future like any other: one that was polled and is then kept without
//! being polled (neither awaited nor dropped) keeps its waiters waiting, as a held lock would.

use super::unit_ranges::UnitRanges;
use crate::errors::{Error, Result};
use crate::process_local::ProcessLocal;
use crate::zarr::{ShardIndex, Unit};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use zarrs::array::Array;

/// Fetches in flight the table tracks at most; a fetch beyond runs on its own.
pub(crate) const MAX_FLIGHTS: usize = 4096;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a flight's readers are sync or async: each kind shares flights only with its own
/// (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Readers {
    /// Sync reads: they wait on a condition variable.
    Sync,
    /// Async reads: they await a notification.
    Async,
}

/// What a flight is filed under (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct FlightKey {
    store: usize,
    unit: String,
    epoch: u64,
    readers: Readers,
}

impl FlightKey {
    /// The key of unit `unit` (a store key, with whatever else names the bytes) of `array`
    /// for sync or async `readers`, under the write epoch of now.
    pub(crate) fn new<S: ?Sized>(array: &Array<S>, unit: String, readers: Readers) -> Self {
        FlightKey {
            store: Arc::as_ptr(&array.storage()).cast::<()>() as usize,
            unit,
            epoch: crate::cache::write_epoch(),
            readers,
        }
    }
}

/// What names a unit's encoded bytes in the store, for sharing its fetch between
/// concurrent reads (`fetch_flight.rs`): a chunk's key; an inner chunk's shard key, its
/// place in the shard and the shard's layout; and for a fetch of byte ranges of it
/// (`unit_ranges.rs`) the ranges, so that it never shares bytes with a whole-unit fetch or
/// one of other ranges.
pub(crate) fn flight_unit<S: ?Sized>(
    array: &Array<S>,
    index: Option<&ShardIndex>,
    unit: &Unit,
    ranges: Option<&UnitRanges>,
) -> String {
    let whole = whole_flight_unit(array, index, unit);
    match ranges {
        None => whole,
        Some(r) => format!("{whole} bytes {:?} of {}", r.requests(), r.unit_len()),
    }
}

fn whole_flight_unit<S: ?Sized>(
    array: &Array<S>,
    index: Option<&ShardIndex>,
    unit: &Unit,
) -> String {
    match index {
        None => array.chunk_key(&unit.indices).to_string(),
        Some(index) => {
            let (shard, within) = index.split(&unit.indices);
            format!(
                "{}#{within:?}/{:?}/{}",
                array.chunk_key(&shard),
                index.chunks_per_shard(),
                index.at_start()
            )
        }
    }
}

/// How a flight ended.
#[derive(Clone)]
enum Outcome {
    Fetched(Option<Bytes>),
    Failed(Arc<Error>),
    /// The leader stopped before it fetched (cancelled): waiters fetch themselves.
    Abandoned,
}

#[derive(Default)]
struct Flight {
    outcome: Mutex<Option<Outcome>>,
    cv: Condvar,
    notify: tokio::sync::Notify,
}

impl Flight {
    fn publish(&self, outcome: Outcome) {
        *lock(&self.outcome) = Some(outcome);
        self.cv.notify_all();
        self.notify.notify_waiters();
    }

    fn wait_sync(&self) -> Outcome {
        let mut got = lock(&self.outcome);
        loop {
            if let Some(o) = got.as_ref() {
                return o.clone();
            }
            got = self.cv.wait(got).unwrap_or_else(|p| p.into_inner());
        }
    }

    async fn wait_async(&self) -> Outcome {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the outcome is looked at: a publish in between wakes it.
            notified.as_mut().enable();
            if let Some(o) = lock(&self.outcome).as_ref() {
                return o.clone();
            }
            notified.await;
        }
    }
}

/// The table, one per process: a forked child must not wait on flights its parent's threads
/// were leading when it forked (they do not exist in the child).
static FLIGHTS: ProcessLocal<Mutex<HashMap<FlightKey, Arc<Flight>>>> =
    ProcessLocal::new(Mutex::default);

fn flights() -> MutexGuard<'static, HashMap<FlightKey, Arc<Flight>>> {
    lock(FLIGHTS.get())
}

/// Readers waiting on the flight under `key` (`None`: no flight).
#[cfg(test)]
fn waiters(key: &FlightKey) -> Option<usize> {
    // One reference is the table's, one the leader's.
    flights()
        .get(key)
        .map(|f| Arc::strong_count(f).saturating_sub(2))
}

/// The leader's hold on its flight; dropped unfinished, it abandons the flight.
struct Lead {
    key: FlightKey,
    flight: Arc<Flight>,
    finished: bool,
}

impl Lead {
    /// Takes the flight out of the table (no reader joins it from now on), hands the
    /// outcome to its waiters and returns the leader's own result.
    fn finish(mut self, result: Result<Option<Bytes>>) -> Result<Option<Bytes>> {
        self.finished = true;
        let waited = {
            let mut table = flights();
            table.remove(&self.key);
            // The table's reference is gone: any other is a waiter's.
            Arc::strong_count(&self.flight) > 1
        };
        if !waited {
            return result;
        }
        match result {
            Ok(bytes) => {
                self.flight.publish(Outcome::Fetched(bytes.clone()));
                Ok(bytes)
            }
            Err(e) => {
                let e = Arc::new(e);
                self.flight.publish(Outcome::Failed(e.clone()));
                Err(retold(&e))
            }
        }
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        if !self.finished {
            {
                let mut table = flights();
                if table
                    .get(&self.key)
                    .is_some_and(|f| Arc::ptr_eq(f, &self.flight))
                {
                    table.remove(&self.key);
                }
            }
            self.flight.publish(Outcome::Abandoned);
        }
    }
}

enum Join {
    Lead(Lead),
    Wait(Arc<Flight>),
    /// The table is full: fetch without sharing.
    Alone,
}

fn join(key: &FlightKey) -> Join {
    let mut table = flights();
    if let Some(f) = table.get(key) {
        return Join::Wait(f.clone());
    }
    if table.len() >= MAX_FLIGHTS {
        return Join::Alone;
    }
    let flight = Arc::new(Flight::default());
    table.insert(key.clone(), flight.clone());
    Join::Lead(Lead {
        key: key.clone(),
        flight,
        finished: false,
    })
}

/// A waiter's copy of the leader's error: the same message (a `Zarr` error keeps its
/// variant and names the same array and chunk), without the leader's source chain.
fn retold(e: &Error) -> Error {
    match e {
        Error::Zarr { array, message, .. } => Error::zarr(array.clone(), message.clone(), None),
        other => Error::zarr("(shared fetch)", other.to_string(), None),
    }
}

/// What a waiter gets from a finished flight; `None` when it was abandoned.
fn taken(outcome: Outcome) -> Option<Result<Option<Bytes>>> {
    match outcome {
        Outcome::Fetched(bytes) => Some(Ok(bytes)),
        Outcome::Failed(e) => Some(Err(retold(&e))),
        Outcome::Abandoned => None,
    }
}

/// The unit's encoded bytes for a sync read: fetched here with `fetch`, or taken from a
/// sync read fetching the same unit now.
pub(crate) fn fetch_shared(
    key: &FlightKey,
    fetch: impl FnOnce() -> Result<Option<Bytes>>,
) -> Result<Option<Bytes>> {
    loop {
        match join(key) {
            Join::Alone => return fetch(),
            Join::Lead(lead) => return lead.finish(fetch()),
            Join::Wait(flight) => {
                if let Some(got) = taken(flight.wait_sync()) {
                    return got;
                }
            }
        }
    }
}

/// [`fetch_shared`] for an async read: waits by awaiting, never by blocking.
pub(crate) async fn fetch_shared_async(
    key: &FlightKey,
    fetch: impl Future<Output = Result<Option<Bytes>>>,
) -> Result<Option<Bytes>> {
    loop {
        match join(key) {
            Join::Alone => return fetch.await,
            Join::Lead(lead) => return lead.finish(fetch.await),
            Join::Wait(flight) => {
                if let Some(got) = taken(flight.wait_async().await) {
                    return got;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The single-flight table: waiters share the leader's bytes and its error, an abandoned
    //! flight is fetched again by its waiters, nothing stays in the table, and a full table
    //! fetches unshared.

    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// The tests run one at a time: a full table (the last test) would keep the others' readers
    /// from sharing.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn key(name: &str, readers: Readers) -> FlightKey {
        FlightKey {
            store: 1,
            unit: format!("fetch_flight_tests/{name}"),
            epoch: 0,
            readers,
        }
    }

    /// Waits (at most 20 s) until `n` readers wait on `key`'s flight.
    fn until_waiting(key: &FlightKey, n: usize) {
        let start = Instant::now();
        while waiters(key) != Some(n) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the waiters never arrived"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn concurrent_sync_readers_fetch_once_and_share_bytes() {
        let _serial = lock(&SERIAL);
        let k = key("sync", Readers::Sync);
        let fetches = AtomicUsize::new(0);
        let got: Vec<_> = std::thread::scope(|s| {
            let readers: Vec<_> = (0..6)
                .map(|_| {
                    s.spawn(|| {
                        fetch_shared(&k, || {
                            fetches.fetch_add(1, Ordering::SeqCst);
                            // The leader fetches until the five others wait on it.
                            until_waiting(&k, 5);
                            Ok(Some(Bytes::from(vec![7u8; 100])))
                        })
                    })
                })
                .collect();
            readers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        for g in got {
            assert_eq!(g.unwrap(), Some(Bytes::from(vec![7u8; 100])));
        }
        assert_eq!(waiters(&k), None, "a finished flight left the table");
    }

    #[test]
    fn the_leaders_error_reaches_every_waiter() {
        let _serial = lock(&SERIAL);
        let k = key("error", Readers::Sync);
        let got: Vec<_> = std::thread::scope(|s| {
            let readers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        fetch_shared(&k, || {
                            until_waiting(&k, 3);
                            Err(Error::zarr("/a", "chunk [3]: damaged", None))
                        })
                    })
                })
                .collect();
            readers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        for g in got {
            let e = g.unwrap_err().to_string();
            assert!(e.contains("/a") && e.contains("chunk [3]: damaged"), "{e}");
        }
        assert_eq!(waiters(&k), None);
    }

    #[test]
    fn a_dropped_async_leader_leaves_no_waiter_hanging() {
        let _serial = lock(&SERIAL);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(dropped_leader());
    }

    async fn dropped_leader() {
        let k = key("abandoned", Readers::Async);
        let leader = {
            let k = k.clone();
            tokio::spawn(async move {
                fetch_shared_async(&k, async {
                    tokio::time::sleep(Duration::from_secs(600)).await;
                    Ok(Some(Bytes::from(vec![1u8])))
                })
                .await
            })
        };
        while waiters(&k).is_none() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let waiter = {
            let k = k.clone();
            tokio::spawn(async move {
                fetch_shared_async(&k, async { Ok(Some(Bytes::from(vec![2u8]))) }).await
            })
        };
        while waiters(&k) != Some(1) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // A waiter dropped meanwhile changes nothing for the others.
        let dropped = {
            let k = k.clone();
            tokio::spawn(async move { fetch_shared_async(&k, async { Ok(None) }).await })
        };
        while waiters(&k) != Some(2) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        dropped.abort();
        leader.abort();
        // The waiter fetches the unit itself.
        let got = tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("the waiter hung after its leader was dropped")
            .unwrap();
        assert_eq!(got.unwrap(), Some(Bytes::from(vec![2u8])));
        assert_eq!(waiters(&k), None);
    }

    #[test]
    fn a_full_table_fetches_unshared() {
        let _serial = lock(&SERIAL);
        let held: Vec<Join> = (0..MAX_FLIGHTS)
            .map(|i| join(&key(&format!("full/{i}"), Readers::Sync)))
            .collect();
        let alone = join(&key("full/extra", Readers::Sync));
        assert!(
            matches!(alone, Join::Alone),
            "the table grew past its bound"
        );
        drop(held);
        for i in [0, MAX_FLIGHTS - 1] {
            assert_eq!(waiters(&key(&format!("full/{i}"), Readers::Sync)), None);
        }
    }

    /// A fetch of byte ranges of a unit is a flight of its own: never shared with the whole
    /// unit's fetch, nor with a fetch of other ranges of it; the same ranges share.
    #[test]
    fn ranged_fetches_are_flights_of_their_own() {
        use super::super::unit_ranges::RangePolicy;
        use std::num::NonZeroU64;
        let meta = r#"{"zarr_format": 3, "node_type": "array", "shape": [8, 8], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 8]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes"}]}"#;
        let store = Arc::new(zarrs::storage::store::MemoryStore::new());
        let array =
            Array::new_with_metadata(store, "/", serde_json::from_str(meta).unwrap()).unwrap();
        let shape: Vec<NonZeroU64> = [4u64, 8]
            .iter()
            .filter_map(|&n| NonZeroU64::new(n))
            .collect();
        let row = |y: u64| Unit {
            indices: vec![0, 0],
            origin: vec![0, 0],
            shape: shape.clone(),
            region: vec![y..y + 1, 0..8],
        };
        let ranges = |u: &Unit| UnitRanges::of_unit(u, 1, RangePolicy::LOCAL).unwrap();
        let (one, two) = (row(1), row(2));
        let whole = flight_unit(&array, None, &one, None);
        let first = flight_unit(&array, None, &one, Some(&ranges(&one)));
        let second = flight_unit(&array, None, &two, Some(&ranges(&two)));
        assert_ne!(whole, first);
        assert_ne!(first, second);
        assert_eq!(
            first,
            flight_unit(&array, None, &row(1), Some(&ranges(&row(1))))
        );
        assert_eq!(whole, flight_unit(&array, None, &two, None));
    }
}
