//! The fetch-ahead stage: requests to an object store issued ahead of the decoders, by I/O
//! threads of their own, under a limit on requests in flight and on bytes fetched but not
//! yet decoded.
//!
//! Why: a worker that fetches its own unit waits a whole round trip (20–80 ms on S3) before
//! it decodes anything, so a read with one worker per core keeps only that many requests in
//! flight — 2 on a 2-core machine, where a link with 80 ms to first byte needs 30–130 to be
//! filled (requests in flight ≈ latency × throughput ÷ chunk size). Here the decoders ask for
//! a unit and usually find it fetched already.
//!
//! Two kinds of work run ahead, in the order the workers take units (the staged read's queue
//! hands units out from the front):
//! - plain chunks: each I/O thread takes the next unit nobody has asked for, fetches it with
//!   the read's own fetch and parks the outcome (bytes or error) for the worker that wants it;
//!   a worker that finds its unit not started yet fetches it itself, as one of the
//!   requests in flight (it waits for a free one), so the limit holds for the whole read;
//! - inner chunks of shards ([`ShardReads`] merging their byte ranges): the I/O threads lead
//!   the shards' requests — every shard's index as soon as a thread is free, so the index
//!   requests of many shards are in flight together, then each shard's merged ranges as its
//!   index arrives. The workers' own fetches then find each request led or done and wait for
//!   it or take their slice of it.
//!
//! How many requests are in flight: the caller's `io_concurrency`, or by default a window
//! that follows the store's time to first byte (`stores/store_latency.rs`, measured on every
//! request): 128 for a store 80 ms away, proportionally fewer for a nearer one, at least 16
//! (see [`window`]). A panic in a fetch on an I/O thread fails the units it had in flight
//! rather than leaving their workers waiting.
//!
//! The bytes fetched and not yet taken stay under the read's budget: no new request starts
//! while they (plus the requests in flight, at the average size seen so far) exceed it,
//! except that one request may always run. When the read ends, for any reason, the I/O threads
//! finish the request they are in and stop.

use super::fetch_stage::{AsyncFetch, Fetch, FetchStage, RunAhead};
use crate::errors::Result;
use crate::pipeline::ShardReads;
use crate::zarr::{Unit, UnitPlan};
use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How far a read's fetch stage runs ahead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AheadLimits {
    /// Requests in flight at most (a thread each, except for an async store's futures).
    pub requests: usize,
    /// The caller did not choose `requests`: plain units may take more requests in flight
    /// when they are small (see [`AUTO_BYTES_IN_FLIGHT`]).
    pub auto: bool,
    /// Bytes fetched and not yet taken by a decoder, at most (one request may always run).
    pub bytes: u64,
    /// The object store's origin, whose time to first byte (`stores::latency_of_origin`,
    /// measured on every request) sizes the default limit: a store nearer than
    /// [`FAR_STORE_LATENCY`] keeps that much fewer requests in flight (see [`window`]).
    pub origin: Option<std::sync::Arc<str>>,
}

/// With the default limit, plain units keep about this many bytes in flight once their size
/// is known: up to [`AUTO_MAX_REQUESTS`] requests for small chunks (a 32³ float32 chunk
/// compresses to about 120 KB; 128 of them in flight carry only 0.19 GB/s at 80 ms).
const AUTO_BYTES_IN_FLIGHT: u64 = 64 << 20;
/// The most requests in flight the default limit grows to.
const AUTO_MAX_REQUESTS: usize = 512;

/// The time to first byte the default limit is sized for (see `DEFAULT_IO_CONCURRENCY`): a
/// store that answers sooner needs fewer requests in flight to keep the decoders as busy
/// (requests in flight ≈ the time a request takes × throughput ÷ chunk size), and fewer is
/// better there: 128 requests to a store on the same machine contend with the decoders for
/// the CPU and park bodies nobody decodes yet. The window shrinks with the square root of
/// the latency's share of this, not in proportion: the least answer leaves out the
/// queueing a busy read's requests see (at the server, for the CPU), which a near store's
/// requests add to their time. At 20 ms (`zarrbuf bench URL --io-concurrency N`, 256 MiB,
/// 2 cores with the server beside them) v3 64³ chunks read at 0.97–1.07 GB/s with 32
/// requests (the proportional share), 1.14–1.17 with 64, 1.19–1.22 with 128; 32³ chunks at
/// 0.65–0.68 with 128, 0.86–0.88 with 256, 0.89–0.90 with 512; with no delay 16 requests
/// stayed the best (32³: 1.06–1.09 GB/s against 0.98–0.99 with 256).
const FAR_STORE_LATENCY: Duration = Duration::from_millis(80);
/// However near the store, the default limit keeps at least this many requests in flight…
const NEAR_STORE_REQUESTS: u64 = 16;
/// …and at least this many bytes' worth of them (small chunks).
const NEAR_STORE_BYTES: u64 = 4 << 20;

/// Where one unit's fetch stands.
enum Entry {
    /// Nobody asked for it and no I/O thread took it.
    Waiting,
    /// An I/O thread is fetching it.
    InFlight,
    /// Fetched, not yet taken by its worker.
    Parked(Result<Option<Bytes>>),
    /// Its worker fetches it itself (no I/O thread had started it); the request counts
    /// against the limit on requests in flight like the I/O threads' own.
    WorkerFetching,
    /// Its worker has it.
    Taken,
}

struct State {
    entries: Vec<Entry>,
    /// The first unit an I/O thread may take.
    next: usize,
    /// Bytes parked.
    parked: u64,
    /// Requests in flight and the bytes the finished ones brought, for the estimate.
    in_flight: u64,
    fetched: u64,
    finished: u64,
    /// The share of the default limit's requests allowed in flight now (1 with a limit the
    /// caller chose): the store's time to first byte over [`FAR_STORE_LATENCY`], followed
    /// as requests come back.
    scale: f64,
    /// The read is over: I/O threads stop.
    stop: bool,
}

/// The fetch-ahead of one read; shared by its I/O threads and its workers.
pub(crate) struct FetchAhead<'a> {
    units: &'a [Unit],
    position: HashMap<&'a [u64], usize>,
    plan: &'a UnitPlan,
    shards: Option<&'a ShardReads>,
    fetch: &'a Fetch<'a>,
    run_ahead: Option<&'a RunAhead<'a>>,
    /// Plain units of an async store: fetched as futures by one I/O thread.
    fetch_async: Option<&'a dyn AsyncFetch>,
    check: &'a (dyn Fn() -> Result<()> + Sync),
    limits: AheadLimits,
    state: Mutex<State>,
    /// The async driver's twin of `room` (it waits on the runtime, not on a condvar).
    room_async: tokio::sync::Notify,
    /// Signalled when a unit is parked: the workers waiting for one look again.
    arrived: Condvar,
    /// Signalled when a request may start (bytes were taken, the read ended): idle I/O
    /// threads wait here, and each one woken wakes the next while there is room, so a
    /// finished fetch does not wake hundreds of threads at once.
    room: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<'a> FetchAhead<'a> {
    /// Runs `body` while I/O threads fetch `units` ahead (see the module docs); `body` gets
    /// the fetch its workers call instead of `fetch`. The I/O threads are joined before this
    /// returns.
    pub(crate) fn run<R>(
        plan: &'a UnitPlan,
        units: &'a [Unit],
        shards: Option<&'a ShardReads>,
        stage: &'a FetchStage<'a>,
        limits: AheadLimits,
        body: impl FnOnce(&FetchAhead<'a>) -> R,
    ) -> R {
        let (fetch, run_ahead, fetch_async, check) = stage.parts();
        let scale = scale_for(&limits);
        let ahead = FetchAhead {
            units,
            position: units
                .iter()
                .enumerate()
                .map(|(i, u)| (u.indices.as_slice(), i))
                .collect(),
            plan,
            shards,
            fetch,
            run_ahead,
            fetch_async,
            check,
            limits,
            room_async: tokio::sync::Notify::new(),
            state: Mutex::new(State {
                entries: units.iter().map(|_| Entry::Waiting).collect(),
                next: 0,
                parked: 0,
                in_flight: 0,
                fetched: 0,
                finished: 0,
                scale,
                stop: false,
            }),
            arrived: Condvar::new(),
            room: Condvar::new(),
        };
        let threads = if ahead.drives_futures() {
            1
        } else if ahead.leads_shard_requests() {
            // A thread per shard request in flight: as many as the window allows when the
            // read starts (each idle one polls for work, so a near store gets few).
            let window = window(&ahead.limits, None, false, scale);
            usize::try_from(window).map_or(ahead.limits.requests, |w| w.max(1))
        } else {
            // Threads waiting for room take part as the window allows.
            ahead.limits.requests.clamp(1, units.len().max(1))
        };
        std::thread::scope(|scope| {
            let ahead = &ahead;
            for _ in 0..threads {
                // A thread that cannot start leaves its share to the others (and the workers).
                let _ = std::thread::Builder::new()
                    .name("zarrbuf-fetch".into())
                    .spawn_scoped(scope, move || ahead.io_thread_caught());
            }
            // Stops the I/O threads however `body` ends (a panic included), so the scope can
            // join them.
            struct StopOnExit<'s, 'a>(&'s FetchAhead<'a>);
            impl Drop for StopOnExit<'_, '_> {
                fn drop(&mut self) {
                    lock(&self.0.state).stop = true;
                    self.0.room.notify_all();
                    self.0.room_async.notify_one();
                }
            }
            let _stop = StopOnExit(ahead);
            body(ahead)
        })
    }

    /// The encoded bytes of `unit` for a worker: parked by an I/O thread, awaited while one
    /// fetches it, or fetched here when no I/O thread has started it — as one of the
    /// requests in flight, so that the read never has more than the limit (it waits for one
    /// to finish when they are all taken; they finish without any worker's help).
    pub(crate) fn fetch(&self, unit: &Unit) -> Result<Option<Bytes>> {
        (self.check)()?;
        let own = || (self.fetch)(self.plan, self.shards, unit);
        if self.leads_shard_requests() {
            // The I/O threads lead the shards' requests; the worker's fetch joins them.
            return own();
        }
        let Some(&i) = self.position.get(unit.indices.as_slice()) else {
            return own();
        };
        let mut state = lock(&self.state);
        loop {
            match std::mem::replace(&mut state.entries[i], Entry::Taken) {
                Entry::Waiting if state.in_flight >= self.allowed_requests(&state) => {
                    // Every request slot is taken: wait for one (an I/O thread may start
                    // this unit meanwhile).
                    state.entries[i] = Entry::Waiting;
                    state = self.arrived.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                Entry::Waiting => {
                    state.entries[i] = Entry::WorkerFetching;
                    state.in_flight += 1;
                    drop(state);
                    // Gives the request slot back however the fetch ends: a panic (a bug,
                    // which the worker's pool reports) must not keep it, or a read with one
                    // slot would wait for it for ever.
                    let _slot = WorkerSlot { ahead: self, i };
                    return own();
                }
                // Asked for twice (not done by the staged read): fetched again.
                Entry::WorkerFetching | Entry::Taken => {
                    drop(state);
                    return own();
                }
                Entry::InFlight => {
                    state.entries[i] = Entry::InFlight;
                    state = self.arrived.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                Entry::Parked(outcome) => {
                    state.parked -= parked_bytes(&outcome);
                    drop(state);
                    self.room.notify_one();
                    self.room_async.notify_one();
                    return outcome;
                }
            }
        }
    }

    /// Whether the I/O threads lead shard requests (a sharded read with a way to run them)
    /// rather than fetch whole units.
    fn leads_shard_requests(&self) -> bool {
        self.shards.is_some() && self.run_ahead.is_some()
    }

    /// Whether one I/O thread drives every request as a future (plain units of an async
    /// store) rather than a thread per request.
    fn drives_futures(&self) -> bool {
        self.fetch_async.is_some() && !self.leads_shard_requests()
    }

    /// [`Self::io_thread`], with a panic in it (a bug: a fetch returns its errors) turned
    /// into an error for each unit it had in flight — their workers would otherwise wait
    /// for ever — rather than taken on to the scope, which would panic the read.
    fn io_thread_caught(&self) {
        let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| self.io_thread())) else {
            return;
        };
        // A thread fetching plain units one at a time catches its own (`fetch_units`), and
        // a shard request's leader fails its flight as it unwinds: what is left in flight
        // here was the futures of the one thread that drives them all.
        let why = panic_text(panic.as_ref());
        let mut state = lock(&self.state);
        let mut failed = 0;
        for entry in &mut state.entries {
            if matches!(entry, Entry::InFlight) {
                *entry = Entry::Parked(Err(fetch_panicked(&why)));
                failed += 1;
            }
        }
        state.in_flight -= failed;
        state.finished += failed;
        drop(state);
        self.arrived.notify_all();
        self.room.notify_all();
    }

    /// What one I/O thread does until the read ends or nothing is left to fetch.
    fn io_thread(&self) {
        if let (Some(shards), Some(run)) = (self.shards, self.run_ahead) {
            self.lead_shard_requests(shards, run);
        } else if let Some(source) = self.fetch_async {
            source.block_on(Box::pin(self.drive_futures(source)));
        } else {
            self.fetch_units();
        }
    }

    /// Claims the next unit nobody took, if a request may start now.
    fn claim_next(&self, state: &mut State) -> Claim {
        if state.stop {
            return Claim::Stop;
        }
        while state.next < state.entries.len()
            && !matches!(state.entries[state.next], Entry::Waiting)
        {
            state.next += 1;
        }
        if state.next >= state.entries.len() {
            return Claim::Done;
        }
        if self.over_budget(state) || state.in_flight >= self.allowed_requests(state) {
            return Claim::NoRoom;
        }
        let i = state.next;
        state.next += 1;
        state.entries[i] = Entry::InFlight;
        state.in_flight += 1;
        Claim::Unit(i)
    }

    /// Parks a fetched unit's outcome for its worker.
    fn park(&self, i: usize, outcome: Result<Option<Bytes>>) {
        let mut state = lock(&self.state);
        let bytes = parked_bytes(&outcome);
        state.in_flight -= 1;
        state.finished += 1;
        state.fetched += bytes;
        state.parked += bytes;
        state.entries[i] = Entry::Parked(outcome);
        // The store's latency as its answers tell it now (its requests are timed as they
        // come back): a store slower than its first answers said gets a larger window.
        state.scale = scale_for(&self.limits);
        drop(state);
        self.arrived.notify_all();
    }

    /// Plain units of an async store: every request in flight is a future polled here,
    /// started in read order while there is room, parked as it completes. Returning drops
    /// (cancels) the requests still in flight.
    async fn drive_futures(&self, source: &dyn AsyncFetch) {
        let mut in_flight = FuturesUnordered::new();
        loop {
            loop {
                let claim = self.claim_next(&mut lock(&self.state));
                match claim {
                    Claim::Unit(i) => {
                        let unit = &self.units[i];
                        let fetch = source.fetch(self.plan, self.shards, unit);
                        in_flight.push(async move { (i, fetch.await) });
                    }
                    Claim::Stop => return,
                    Claim::Done if in_flight.is_empty() => return,
                    Claim::Done | Claim::NoRoom => break,
                }
            }
            if in_flight.is_empty() {
                // No room (bytes parked): wait until a worker takes some, or the read ends.
                self.room_async.notified().await;
                continue;
            }
            tokio::select! {
                done = in_flight.next() => {
                    if let Some((i, outcome)) = done {
                        self.park(i, outcome);
                    }
                }
                () = self.room_async.notified() => {}
            }
        }
    }

    /// Plain units: the next one nobody took, within the byte budget.
    fn fetch_units(&self) {
        let mut state = lock(&self.state);
        loop {
            let i = match self.claim_next(&mut state) {
                Claim::Unit(i) => i,
                Claim::NoRoom => {
                    state = self.room.wait(state).unwrap_or_else(|p| p.into_inner());
                    continue;
                }
                Claim::Done | Claim::Stop => return,
            };
            if state.in_flight < self.allowed_requests(&state) && !self.over_budget(&state) {
                // Room for one more: pass the wake-up on.
                self.room.notify_one();
            }
            drop(state);
            let fetch = || (self.fetch)(self.plan, self.shards, &self.units[i]);
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(fetch))
                .unwrap_or_else(|panic| Err(fetch_panicked(&panic_text(panic.as_ref()))));
            self.park(i, outcome);
            state = lock(&self.state);
        }
    }

    /// Requests in flight allowed now (see [`window`]).
    fn allowed_requests(&self, state: &State) -> u64 {
        window(
            &self.limits,
            average(state),
            self.drives_futures(),
            state.scale,
        )
    }

    /// Whether starting one more request could take the parked bytes over the budget: the
    /// parked bytes plus the requests in flight and the new one, each at the average size
    /// fetched so far (1 MiB before any is back). One request may always run.
    fn over_budget(&self, state: &State) -> bool {
        if state.parked == 0 && state.in_flight == 0 {
            return false;
        }
        // Before the first request is back, each counts as a 1 MiB chunk.
        let average = state.fetched.checked_div(state.finished).unwrap_or(1 << 20);
        state.parked + (state.in_flight + 1) * average > self.limits.bytes
    }

    /// Sharded units: the shards' index requests and merged ranges, led here in read order
    /// (see [`ShardReads::lead_ahead`]), each run by `run` on the read's store.
    fn lead_shard_requests(&self, shards: &ShardReads, run: &RunAhead<'_>) {
        let mut idle = Duration::from_micros(200);
        loop {
            if lock(&self.state).stop {
                return;
            }
            match shards.lead_ahead() {
                super::shard_reads::LeadAhead::Job(job) => {
                    // A panic fails the job's flight as its leader unwinds (its waiters
                    // get the error); this thread goes on to the next.
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| run(shards, job)));
                    idle = Duration::from_micros(200);
                }
                super::shard_reads::LeadAhead::Done => return,
                super::shard_reads::LeadAhead::Later => {
                    // Over the byte budget, or every remaining request waits for an index in
                    // flight: look again shortly (the decoders free bytes as they take them).
                    let state = lock(&self.state);
                    if state.stop {
                        return;
                    }
                    let _ = self
                        .room
                        .wait_timeout(state, idle)
                        .unwrap_or_else(|p| p.into_inner());
                    idle = (idle * 2).min(Duration::from_millis(5));
                }
            }
        }
    }
}

/// The average size of the requests back so far (`None` before any, or when all were empty).
fn average(state: &State) -> Option<u64> {
    state.fetched.checked_div(state.finished).filter(|&a| a > 0)
}

/// The share of the default limit allowed in flight: the square root of the store's time to
/// first byte now over [`FAR_STORE_LATENCY`] (all of it when the caller chose the limit, or
/// the store's latency is not known).
fn scale_for(limits: &AheadLimits) -> f64 {
    let latency = match &limits.origin {
        Some(origin) if limits.auto => crate::stores::latency_of_origin(origin),
        _ => None,
    };
    latency.map_or(1.0, |latency| {
        (latency.as_secs_f64() / FAR_STORE_LATENCY.as_secs_f64())
            .min(1.0)
            .sqrt()
    })
}

/// Requests in flight allowed: the caller's limit as it is; the default limit as many as
/// keep about [`AUTO_BYTES_IN_FLIGHT`] in flight at the `average` size fetched so far
/// (plain units of an async store, whose requests are futures rather than threads), times
/// `scale` for a store nearer than [`FAR_STORE_LATENCY`] — but at least
/// [`NEAR_STORE_REQUESTS`] and [`NEAR_STORE_BYTES`]' worth.
fn window(limits: &AheadLimits, average: Option<u64>, futures: bool, scale: f64) -> u64 {
    let limit = limits.requests as u64;
    if !limits.auto {
        return limit;
    }
    let ceiling = match average {
        Some(average) if futures => {
            (AUTO_BYTES_IN_FLIGHT / average).clamp(limit, AUTO_MAX_REQUESTS as u64)
        }
        _ => limit,
    };
    if scale >= 1.0 {
        return ceiling;
    }
    let floor = NEAR_STORE_REQUESTS.max(average.map_or(0, |a| NEAR_STORE_BYTES / a));
    // The product is at most `ceiling` (≤ AUTO_MAX_REQUESTS): the cast cannot truncate.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let scaled = (ceiling as f64 * scale).ceil() as u64;
    scaled.max(floor).min(ceiling)
}

/// What [`FetchAhead::claim_next`] found.
enum Claim {
    /// Fetch this unit.
    Unit(usize),
    /// The byte budget or the request limit is reached.
    NoRoom,
    /// Every unit was taken.
    Done,
    /// The read is over.
    Stop,
}

/// The error a unit gets when the fetch that had it in flight panicked.
fn fetch_panicked(why: &str) -> crate::errors::Error {
    crate::errors::Error::InvalidArgument(format!(
        "a fetch-ahead thread panicked ({why}) while the unit was in flight \
         (internal error: please report)"
    ))
}

/// A request slot a worker holds while it fetches unit `i` itself; dropped, it frees the
/// slot and wakes whoever waits for one.
struct WorkerSlot<'s, 'a> {
    ahead: &'s FetchAhead<'a>,
    i: usize,
}

impl Drop for WorkerSlot<'_, '_> {
    fn drop(&mut self) {
        let mut state = lock(&self.ahead.state);
        state.in_flight -= 1;
        state.entries[self.i] = Entry::Taken;
        drop(state);
        self.ahead.arrived.notify_all();
        self.ahead.room.notify_one();
        self.ahead.room_async.notify_one();
    }
}

/// A panic's message, or a word that it had none.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    crate::errors::panic_message(panic).unwrap_or_else(|| "no message".into())
}

/// The bytes a parked outcome holds.
fn parked_bytes(outcome: &Result<Option<Bytes>>) -> u64 {
    match outcome {
        Ok(Some(bytes)) => bytes.len() as u64,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn limits(requests: usize, auto: bool, origin: Option<&str>) -> AheadLimits {
        AheadLimits {
            requests,
            auto,
            bytes: 256 << 20,
            origin: origin.map(Arc::from),
        }
    }

    /// Eight one-element units of a plain chunk plan.
    fn plan() -> UnitPlan {
        let one = std::num::NonZeroU64::MIN;
        UnitPlan {
            source: crate::zarr::UnitSource::Chunk,
            chain: None,
            units: (0..8u64)
                .map(|k| Unit {
                    indices: vec![k],
                    origin: vec![k],
                    shape: vec![one],
                    region: std::iter::once(k..k + 1).collect(),
                })
                .collect(),
        }
    }

    /// The fetch of unit `[k]`: its index as one byte, but a panic for unit 3 on an I/O
    /// thread of the fetch-ahead stage.
    fn bytes_or_panic(unit: &Unit) -> Result<Option<Bytes>> {
        let k = unit.indices[0];
        if k == 3 && std::thread::current().name() == Some("zarrbuf-fetch") {
            panic!("a fetch bug");
        }
        Ok(Some(Bytes::from(vec![u8::try_from(k).unwrap()])))
    }

    /// Futures driven by one I/O thread, as an async store's are.
    struct PanickingFutures;

    impl AsyncFetch for PanickingFutures {
        fn block_on(&self, fut: futures::future::BoxFuture<'_, ()>) {
            futures::executor::block_on(fut);
        }
        fn fetch<'a>(
            &'a self,
            _: &'a UnitPlan,
            _: Option<&'a ShardReads>,
            unit: &'a Unit,
        ) -> futures::future::BoxFuture<'a, Result<Option<Bytes>>> {
            Box::pin(async move { bytes_or_panic(unit) })
        }
    }

    /// Every unit's outcome from a read whose fetches panic on unit 3 (threads, or one
    /// thread driving futures), or a failure when the read has not ended within a minute.
    fn outcomes(futures: bool) -> Vec<Result<Option<Bytes>>> {
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let plan = plan();
            let driver = PanickingFutures;
            let mut stage = FetchStage::from_fetch(|_, _, unit| bytes_or_panic(unit));
            if futures {
                stage = stage.with_async(&driver);
            }
            let got = FetchAhead::run(
                &plan,
                &plan.units,
                None,
                &stage,
                limits(8, false, None),
                |ahead| {
                    // Every unit taken by an I/O thread before the "worker" asks (it would
                    // fetch one nobody took itself).
                    while lock(&ahead.state)
                        .entries
                        .iter()
                        .any(|e| matches!(e, Entry::Waiting))
                    {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    plan.units
                        .iter()
                        .map(|u| ahead.fetch(u))
                        .collect::<Vec<_>>()
                },
            );
            let _ = done.send(got);
        });
        wait.recv_timeout(Duration::from_secs(60))
            .expect("a read whose fetch panicked never ended")
    }

    /// Unit 3 failed with the panic's message; every other unit has its byte, or (futures:
    /// in flight on the thread that panicked) the same error.
    fn assert_only_the_panic_failed(got: &[Result<Option<Bytes>>], others_may_fail: bool) {
        for (k, outcome) in got.iter().enumerate() {
            match outcome {
                Err(e) if k == 3 || others_may_fail => {
                    assert!(
                        e.to_string().contains("panicked (a fetch bug)"),
                        "unit {k}: {e}"
                    );
                }
                Ok(Some(b)) if k != 3 => assert_eq!(b.as_ref(), [k as u8]),
                other => panic!("unit {k}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_panicking_fetch_fails_its_unit_instead_of_hanging_the_read() {
        assert_only_the_panic_failed(&outcomes(false), false);
    }

    #[test]
    fn a_panicking_future_fails_the_units_in_flight_instead_of_hanging_the_read() {
        assert_only_the_panic_failed(&outcomes(true), true);
    }

    /// A worker whose own fetch panics gives its request slot back: with one slot, the rest
    /// of the read goes on (before, every later fetch waited for that slot for ever).
    #[test]
    fn a_workers_panicking_fetch_gives_its_request_slot_back() {
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let plan = plan();
            // Unit 3 panics when a worker fetches it (the I/O thread never does here).
            let stage = FetchStage::from_fetch(|_, _, unit| {
                let k = unit.indices[0];
                if k == 3 && std::thread::current().name() != Some("zarrbuf-fetch") {
                    panic!("a fetch bug");
                }
                Ok(Some(Bytes::from(vec![u8::try_from(k).unwrap()])))
            });
            // One request at a time, one byte parked at most: the I/O thread fetches unit
            // 0 and then waits for room, so the worker fetches unit 3 itself.
            let mut one = limits(1, false, None);
            one.bytes = 1;
            let got = FetchAhead::run(&plan, &plan.units, None, &stage, one, |ahead| {
                while !matches!(lock(&ahead.state).entries[0], Entry::Parked(_)) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let mut got = Vec::new();
                for k in [3, 0, 1, 2, 4, 5, 6, 7] {
                    let fetch = || ahead.fetch(&plan.units[k]);
                    got.push((k, std::panic::catch_unwind(AssertUnwindSafe(fetch)).ok()));
                }
                got
            });
            let _ = done.send(got);
        });
        let got = wait
            .recv_timeout(Duration::from_secs(60))
            .expect("the read waited for ever for the slot of a fetch that panicked");
        for (k, outcome) in got {
            match outcome {
                None => assert_eq!(k, 3, "only unit 3 panics"),
                Some(Ok(Some(b))) => assert_eq!(b.as_ref(), [k as u8]),
                Some(other) => panic!("unit {k}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_chosen_limit_is_kept_however_near_the_store() {
        let chosen = limits(128, false, None);
        assert_eq!(window(&chosen, Some(900_000), true, 0.01), 128);
        assert_eq!(window(&chosen, Some(1_000), true, 1.0), 128);
    }

    #[test]
    fn the_default_limit_shrinks_with_the_stores_latency_down_to_a_floor() {
        let auto = limits(128, true, None);
        // A far store (80 ms or more): the default, or more requests for small chunks.
        assert_eq!(window(&auto, Some(900_000), true, 1.0), 128);
        assert_eq!(window(&auto, Some(120_000), true, 1.0), 512);
        // A quarter of it (5 ms).
        assert_eq!(window(&auto, Some(900_000), true, 0.25), 32);
        assert_eq!(window(&auto, Some(120_000), true, 0.25), 128);
        // Next door: the floor, in requests or in bytes, whichever is more.
        assert_eq!(
            window(&auto, Some(900_000), true, 0.002),
            NEAR_STORE_REQUESTS
        );
        assert_eq!(window(&auto, None, true, 0.002), NEAR_STORE_REQUESTS);
        assert_eq!(
            window(&auto, Some(120_000), true, 0.002),
            NEAR_STORE_BYTES / 120_000
        );
        // The floor never takes the window past the limit itself.
        assert_eq!(
            window(&limits(4, true, None), Some(900_000), false, 0.002),
            4
        );
        // Threads, not futures: the limit is the ceiling whatever the chunks' size.
        assert_eq!(window(&auto, Some(120_000), false, 0.5), 64);
    }

    #[test]
    fn the_share_follows_the_origins_time_to_first_byte() {
        let origin = "http://fetch-ahead-scale-test:7";
        // Not timed yet, or a chosen limit: all of it.
        assert_eq!(scale_for(&limits(128, true, Some(origin))), 1.0);
        crate::stores::observe_latency(
            origin,
            crate::stores::AnswerKind::Data,
            Duration::from_millis(20),
        );
        // 20 ms: a quarter of 80, half of the window.
        assert!((scale_for(&limits(128, true, Some(origin))) - 0.5).abs() < 1e-9);
        assert_eq!(scale_for(&limits(128, false, Some(origin))), 1.0);
        assert_eq!(scale_for(&limits(128, true, None)), 1.0);
        // Farther than the default is sized for: all of it, no more.
        let far = "http://fetch-ahead-scale-test-far:7";
        crate::stores::observe_latency(
            far,
            crate::stores::AnswerKind::Data,
            Duration::from_millis(300),
        );
        assert_eq!(scale_for(&limits(128, true, Some(far))), 1.0);
    }
}
