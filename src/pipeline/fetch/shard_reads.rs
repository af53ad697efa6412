//! Fetching the inner chunks of sharded arrays with few requests: per read, each shard's
//! index is fetched once (however many workers want it at the same moment), and the byte
//! ranges of the inner chunks the read needs are merged into as few requests as a bounded
//! gap allows. The first worker that needs a merged range fetches it; the others wait for it
//! and take their slices; the bytes are dropped once every inner chunk in them was taken.
//!
//! Both the sync and the async fetch stage use it: the async leader awaits its request, and
//! waiting workers block their (pipeline worker) threads, never an async runtime thread.

use crate::zarr::{ShardIndex, Unit};
use bytes::Bytes;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;
use zarrs::array::Array;

/// How a read fetches the inner chunks of a sharded array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InnerFetch {
    /// One request per inner chunk, issued by the workers in parallel: what local files
    /// want (parallel reads of the page cache or a disk beat one large sequential read).
    PerChunk,
    /// The inner chunks a read needs merged into as few requests as a bounded gap allows:
    /// what object stores want (each request is a round trip).
    Merged,
}

impl InnerFetch {
    /// The fetch for a read of `array` through a sync store: merged for object stores
    /// (`store::fetches_are_remote`), per chunk for everything else.
    pub(crate) fn for_store<S: ?Sized + 'static>(array: &Array<S>) -> InnerFetch {
        if crate::stores::fetches_are_remote(array.storage().as_ref()) {
            InnerFetch::Merged
        } else {
            InnerFetch::PerChunk
        }
    }

    /// The fetch for an async read of `array`: per chunk when its store is a
    /// [`crate::store::RemoteStore`] reading local files (`file://`), merged for object stores and
    /// for stores zarrbuf cannot see into. On two cores a merged local read left one worker
    /// idle while the other read a whole shard's bytes, which cost async reads of sharded
    /// local arrays about a sixth of the sync rate.
    pub(crate) fn for_async_store<S: ?Sized + 'static>(array: &Array<S>) -> InnerFetch {
        if crate::stores::RemoteStore::reads_local_files(array.storage().as_ref()) {
            InnerFetch::PerChunk
        } else {
            InnerFetch::Merged
        }
    }
}

/// Ranges closer than this are always fetched together (object_store's own coalescing gap).
pub(crate) const MAX_GAP: u64 = 1 << 20;
/// The rate one connection to an object store is assumed to carry when gaps are sized: S3
/// across regions (within one region it is about twice that, which makes merging cheaper).
const CONNECTION_BYTES_PER_SECOND: f64 = 50.0 * (1 << 20) as f64;

/// The gap up to which two ranges of a shard are merged into one request: what one
/// connection carries in one round trip to the store (`round_trip`, measured on the read's
/// index requests), so that fetching the gap costs no more than the request it saves —
/// [`MAX_GAP`] at 20 ms, 4 MiB at 80 ms —, at least [`MAX_GAP`] and at most half of
/// [`MAX_REQUEST`].
pub(crate) fn merge_gap(round_trip: Option<std::time::Duration>) -> u64 {
    let carried = round_trip.map_or(0.0, |rt| rt.as_secs_f64() * CONNECTION_BYTES_PER_SECOND);
    (carried as u64).clamp(MAX_GAP, MAX_REQUEST / 2)
}
/// No merged request grows beyond this (a single inner chunk may still be larger). Object
/// stores give one connection 50–100 MB/s, so a whole shard in one request reads at that
/// rate however many cores wait for it: 8 MiB ranges (S3's own advice for large objects is
/// 8–16 MB byte-range GETs in parallel) let the fetch-ahead stage keep many of a shard's
/// parts in flight at once. At 80 ms and 50 MiB/s per connection, four 58 MiB shards read at
/// 0.095 GB/s in one request each.
pub(crate) const MAX_REQUEST: u64 = 8 << 20;

/// `ranges` merged into requests: ranges at most `max_gap` apart join one request while it
/// stays within `max_len`. Returns the requests, ascending.
pub(crate) fn coalesce(ranges: &[Range<u64>], max_gap: u64, max_len: u64) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.to_vec();
    sorted.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<Range<u64>> = Vec::new();
    for r in sorted {
        match out.last_mut() {
            Some(last)
                if r.start <= last.end.saturating_add(max_gap)
                    && r.end.max(last.end) - last.start <= max_len =>
            {
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

/// What a fetch produced: the bytes of a range (`None`: the shard is not stored).
pub(crate) type Fetched = std::result::Result<Option<Bytes>, String>;

/// One request in flight or done, shared by the workers that need it.
pub(crate) struct Flight {
    state: Mutex<Option<Fetched>>,
    done: Condvar,
    /// Inner chunks still to take their bytes from it (group flights).
    remaining: Mutex<usize>,
}

impl Flight {
    fn new(remaining: usize) -> Arc<Self> {
        Arc::new(Flight {
            state: Mutex::new(None),
            done: Condvar::new(),
            remaining: Mutex::new(remaining),
        })
    }

    fn wait(&self) -> Fetched {
        let mut state = lock(&self.state);
        loop {
            if let Some(result) = state.as_ref() {
                return result.clone();
            }
            state = self.done.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn finish(&self, result: Fetched) {
        *lock(&self.state) = Some(result);
        self.done.notify_all();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum FlightKey {
    Index(Vec<u64>),
    Group(Vec<u64>, u64),
}

/// The worker that runs a request. Finishing is up to it; if it is dropped first (its future
/// was cancelled, it returned early), the waiting workers get an error instead of waiting
/// forever.
pub(crate) struct Leader<'a> {
    reads: &'a ShardReads,
    key: FlightKey,
    flight: Arc<Flight>,
    finished: bool,
    /// Bytes reserved in `reads.reserved` by the fetch-ahead stage, released when it ends.
    reserved: u64,
    /// When the request was taken on (index requests time the store's round trip).
    started: Instant,
}

impl Leader<'_> {
    fn release_reservation(&mut self) {
        let reserved = std::mem::take(&mut self.reserved);
        if reserved > 0 {
            self.reads.reserved.fetch_sub(reserved, Ordering::Relaxed);
        }
    }

    fn finish(mut self, result: Fetched) {
        self.flight.finish(result);
        self.finished = true;
        self.release_reservation();
        if matches!(self.key, FlightKey::Index(_)) {
            // The index is cached by now: later workers find it there.
            lock(&self.reads.flights).remove(&self.key);
        }
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        self.release_reservation();
        if !self.finished {
            // Unwinding: the request's fetch panicked (a bug), which its waiters should be
            // told rather than that somebody cancelled the read.
            let why = if std::thread::panicking() {
                "the thread leading the request panicked (internal error: please report)"
            } else {
                "the request was abandoned (the read was cancelled)"
            };
            self.flight.finish(Err(why.into()));
            lock(&self.reads.flights).remove(&self.key);
        }
    }
}

/// Either run the request (and then [`ShardReads::finish_index`] / `finish_group`), or
/// wait for the worker that does.
pub(crate) enum Role<'a> {
    Lead(Leader<'a>),
    Wait(Arc<Flight>),
}

/// How one inner chunk's bytes are got: not stored, or a slice of a merged request.
pub(crate) enum InnerPlan {
    Missing,
    InGroup {
        /// The merged request that holds it.
        group: Range<u64>,
        /// Its bytes in the shard object.
        range: Range<u64>,
    },
}

/// A shard's merged requests, each with how many needed inner chunks it holds.
type Groups = Arc<Vec<(Range<u64>, usize)>>;

/// The per-read state for fetching inner chunks of one sharded array.
pub(crate) struct ShardReads {
    index: ShardIndex,
    /// For each shard the read touches, the inner chunks (within the shard) it needs.
    needed: HashMap<Vec<u64>, Vec<Vec<u64>>>,
    /// Each shard's merged requests and how many needed inner chunks each holds.
    groups: Mutex<HashMap<Vec<u64>, Groups>>,
    flights: Mutex<HashMap<FlightKey, Arc<Flight>>>,
    /// Every request some worker has led: fetching ahead never sends one again.
    started: Mutex<HashSet<FlightKey>>,
    /// Merge neighbouring inner chunks into one request (object stores), or fetch each on
    /// its own (local files).
    fetch: InnerFetch,
    /// The units in read order, and where each one is in it (for fetching ahead).
    order: Vec<Vec<u64>>,
    position: HashMap<Vec<u64>, usize>,
    /// Bytes of merged requests fetched and not yet taken by all their inner chunks; no
    /// request is started ahead while this exceeds `budget`.
    alive: AtomicU64,
    budget: u64,
    /// Bytes of the merged requests the fetch-ahead stage leads and has not finished.
    reserved: AtomicU64,
    /// The first unit (in read order) whose requests the fetch-ahead stage may still have to
    /// lead ([`ShardReads::lead_ahead`]).
    ahead_from: Mutex<usize>,
}

/// What the fetch-ahead stage should do next for a sharded read ([`ShardReads::lead_ahead`]).
pub(crate) enum LeadAhead<'a> {
    /// Run this request.
    Job(Ahead<'a>),
    /// Nothing to start now: the byte budget is spent, or the remaining requests wait for a
    /// shard index in flight.
    Later,
    /// Every request the read needs was started.
    Done,
}

/// How far ahead of its own inner chunk a waiting worker looks for a request to start.
const LOOK_AHEAD: usize = 256;

/// A request a waiting worker starts ahead of the workers that need it.
pub(crate) enum Ahead<'a> {
    Index {
        shard: Vec<u64>,
        leader: Leader<'a>,
    },
    Group {
        shard: Vec<u64>,
        group: Range<u64>,
        leader: Leader<'a>,
    },
}

impl ShardReads {
    /// Orders `units` shard by shard (so each shard's merged requests are consumed soon
    /// after they arrive) and records what each shard needs.
    /// With [`InnerFetch::Merged`], the inner chunks of each shard are merged into few
    /// requests, and up to `budget` bytes of them may be fetched ahead of the workers that
    /// decode them.
    pub(crate) fn new(
        index: ShardIndex,
        units: &mut [Unit],
        fetch: InnerFetch,
        budget: u64,
    ) -> Self {
        units.sort_by_cached_key(|u| {
            let (shard, within) = index.split(&u.indices);
            (shard, within)
        });
        let mut needed: HashMap<Vec<u64>, Vec<Vec<u64>>> = HashMap::new();
        for u in units.iter() {
            let (shard, within) = index.split(&u.indices);
            needed.entry(shard).or_default().push(within);
        }
        ShardReads {
            index,
            needed,
            groups: Mutex::new(HashMap::new()),
            flights: Mutex::new(HashMap::new()),
            started: Mutex::new(HashSet::new()),
            fetch,
            order: units.iter().map(|u| u.indices.clone()).collect(),
            position: units
                .iter()
                .enumerate()
                .map(|(i, u)| (u.indices.clone(), i))
                .collect(),
            alive: AtomicU64::new(0),
            budget,
            reserved: AtomicU64::new(0),
            ahead_from: Mutex::new(0),
        }
    }

    /// A request for a unit after `inner` (in read order) that nobody has started: its
    /// shard's index, or the merged range that holds it, within the byte budget. For a
    /// worker about to wait on a request in flight: the stores see several requests at once
    /// while merged ranges keep their number low. `None` when there is nothing to start.
    pub(crate) fn next_to_lead(&self, inner: &[u64]) -> Option<Ahead<'_>> {
        if self.fetch == InnerFetch::PerChunk {
            return None;
        }
        let from = self.position.get(inner).copied()? + 1;
        for unit in self.order.iter().skip(from).take(LOOK_AHEAD) {
            let (shard, within) = self.index.split(unit);
            let index = match self.index.cached(&shard) {
                Some(Some(index)) => index,
                Some(None) => continue,
                None => {
                    let Some(leader) = self.join_ahead(FlightKey::Index(shard.clone()), 0) else {
                        continue;
                    };
                    if self.index.cached(&shard).is_some() {
                        // Cached since the look-up: nothing to fetch.
                        leader.finish(Ok(None));
                        continue;
                    }
                    return Some(Ahead::Index { shard, leader });
                }
            };
            let Ok(InnerPlan::InGroup { group, .. }) = self.plan_inner(&shard, &index, &within)
            else {
                continue;
            };
            let key = FlightKey::Group(shard.clone(), group.start);
            if lock(&self.flights).contains_key(&key) || lock(&self.started).contains(&key) {
                continue;
            }
            if self.alive.load(Ordering::Relaxed) + (group.end - group.start) > self.budget {
                return None;
            }
            let users = self.users_of(&shard, &group);
            if let Some(leader) = self.join_ahead(key, users) {
                return Some(Ahead::Group {
                    shard,
                    group,
                    leader,
                });
            }
        }
        None
    }

    /// The next request the fetch-ahead stage (`fetch_ahead.rs`) should lead, in read order:
    /// a shard's index nobody has asked for, else a merged range of a shard whose index is
    /// known, nobody has started and the read's byte budget has room for (the bytes fetched
    /// and not yet taken plus those being fetched ahead; one request may always run). Index requests
    /// need no room: they are small, and a read's indexes all go out while the first data
    /// arrives. Only for merged reads (object stores); local reads get `Done`.
    pub(crate) fn lead_ahead(&self) -> LeadAhead<'_> {
        if self.fetch == InnerFetch::PerChunk {
            return LeadAhead::Done;
        }
        let mut from = lock(&self.ahead_from);
        // `from` moves on while every unit before the one looked at needs nothing more
        // from the stage (a shard whose index is in flight holds it back).
        let mut settled = true;
        let mut waiting = false;
        let mut i = *from;
        while let Some(unit) = self.order.get(i) {
            let (shard, within) = self.index.split(unit);
            let index = match self.index.cached(&shard) {
                Some(Some(index)) => index,
                // Not stored: nothing to fetch.
                Some(None) => {
                    i += 1;
                    if settled {
                        *from = i;
                    }
                    continue;
                }
                None => {
                    if let Some(leader) = self.join_ahead(FlightKey::Index(shard.clone()), 0) {
                        if self.index.cached(&shard).is_some() {
                            leader.finish(Ok(None));
                            continue;
                        }
                        return LeadAhead::Job(Ahead::Index { shard, leader });
                    }
                    // Its index is on its way (or failed: the workers report that): skip
                    // the shard for now and come back to it.
                    settled = false;
                    waiting = true;
                    i = self.next_shard_after(i, &shard);
                    continue;
                }
            };
            let planned = self.plan_inner(&shard, &index, &within);
            let Ok(InnerPlan::InGroup { group, .. }) = planned else {
                i += 1;
                if settled {
                    *from = i;
                }
                continue;
            };
            let key = FlightKey::Group(shard.clone(), group.start);
            if lock(&self.flights).contains_key(&key) || lock(&self.started).contains(&key) {
                i += 1;
                if settled {
                    *from = i;
                }
                continue;
            }
            let len = group.end - group.start;
            let busy = self.alive.load(Ordering::Relaxed) + self.reserved.load(Ordering::Relaxed);
            if busy > 0 && busy + len > self.budget {
                return LeadAhead::Later;
            }
            let users = self.users_of(&shard, &group);
            if let Some(mut leader) = self.join_ahead(key, users) {
                self.reserved.fetch_add(len, Ordering::Relaxed);
                leader.reserved = len;
                return LeadAhead::Job(Ahead::Group {
                    shard,
                    group,
                    leader,
                });
            }
        }
        if waiting {
            LeadAhead::Later
        } else {
            LeadAhead::Done
        }
    }

    /// The position of the first unit after `i` (in read order) in another shard than `shard`.
    fn next_shard_after(&self, mut i: usize, shard: &[u64]) -> usize {
        while let Some(unit) = self.order.get(i) {
            if self.index.split(unit).0 != shard {
                break;
            }
            i += 1;
        }
        i
    }

    /// The shard index decoder and cache.
    pub(crate) fn index(&self) -> &ShardIndex {
        &self.index
    }

    fn join(&self, key: FlightKey, remaining: usize) -> Role<'_> {
        let mut flights = lock(&self.flights);
        if let Some(f) = flights.get(&key) {
            return Role::Wait(f.clone());
        }
        lock(&self.started).insert(key.clone());
        let flight = Flight::new(remaining);
        flights.insert(key.clone(), flight.clone());
        Role::Lead(Leader {
            reads: self,
            key,
            flight,
            finished: false,
            reserved: 0,
            started: Instant::now(),
        })
    }

    /// Leads `key` for a worker fetching ahead, only if no worker ever started it: a request
    /// already finished and taken (its flight gone) is not sent again.
    fn join_ahead(&self, key: FlightKey, remaining: usize) -> Option<Leader<'_>> {
        let flights = lock(&self.flights);
        if flights.contains_key(&key) || lock(&self.started).contains(&key) {
            return None;
        }
        drop(flights);
        match self.join(key, remaining) {
            Role::Lead(leader) => Some(leader),
            Role::Wait(_) => None,
        }
    }

    /// The cached decoded index of `shard`, or the role to get it: lead the request of the
    /// encoded index (then [`finish_index`](Self::finish_index)), or wait for it.
    pub(crate) fn index_of(
        &self,
        shard: &[u64],
    ) -> std::result::Result<Option<Option<Arc<Vec<u64>>>>, Role<'_>> {
        if let Some(hit) = self.index.cached(shard) {
            return Ok(Some(hit));
        }
        match self.join(FlightKey::Index(shard.to_vec()), 0) {
            // It may have been cached between the look-up and joining.
            Role::Lead(leader) => match self.index.cached(shard) {
                Some(hit) => {
                    leader.finish(Ok(None));
                    Ok(Some(hit))
                }
                None => Err(Role::Lead(leader)),
            },
            wait => Err(wait),
        }
    }

    /// Decodes and caches the encoded index the leader fetched, and releases the waiters.
    pub(crate) fn finish_index(
        &self,
        leader: Leader<'_>,
        shard: &[u64],
        encoded: Fetched,
    ) -> std::result::Result<Option<Arc<Vec<u64>>>, String> {
        if encoded.is_ok() {
            self.index.note_round_trip(leader.started.elapsed());
        }
        let decoded = encoded.and_then(|e| self.index.remember(shard, e.as_deref()));
        leader.finish(decoded.as_ref().map(|_| None).map_err(Clone::clone));
        decoded
    }

    /// The index a waiter was waiting for (cached by the leader), or the leader's error.
    pub(crate) fn waited_index(
        &self,
        flight: &Flight,
        shard: &[u64],
    ) -> std::result::Result<Option<Arc<Vec<u64>>>, String> {
        flight.wait()?;
        self.index
            .cached(shard)
            .ok_or_else(|| "the shard index was not cached (internal error: please report)".into())
    }

    /// Where inner chunk `within` of `shard` (with decoded `index`) lies, and the merged
    /// request that holds it.
    pub(crate) fn plan_inner(
        &self,
        shard: &[u64],
        index: &[u64],
        within: &[u64],
    ) -> std::result::Result<InnerPlan, String> {
        let Some(range) = self.index.inner_range(index, within)? else {
            return Ok(InnerPlan::Missing);
        };
        let groups = self.groups_of(shard, index)?;
        let group = groups
            .iter()
            .find(|(g, _)| g.start <= range.start && range.end <= g.end)
            .map(|(g, _)| g.clone())
            // An inner chunk the plan did not list (cannot happen): fetch it alone.
            .unwrap_or_else(|| range.clone());
        Ok(InnerPlan::InGroup { group, range })
    }

    fn groups_of(&self, shard: &[u64], index: &[u64]) -> std::result::Result<Groups, String> {
        if let Some(g) = lock(&self.groups).get(shard) {
            return Ok(g.clone());
        }
        let mut ranges = Vec::new();
        for within in self.needed.get(shard).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(r) = self.index.inner_range(index, within)? {
                ranges.push(r);
            }
        }
        let merged = if self.fetch == InnerFetch::Merged {
            coalesce(&ranges, merge_gap(self.index.round_trip()), MAX_REQUEST)
        } else {
            coalesce(&ranges, 0, 0)
        };
        let counted: Vec<(Range<u64>, usize)> = merged
            .into_iter()
            .map(|g| {
                let n = ranges
                    .iter()
                    .filter(|r| g.start <= r.start && r.end <= g.end)
                    .count();
                (g, n)
            })
            .collect();
        let counted = Arc::new(counted);
        lock(&self.groups)
            .entry(shard.to_vec())
            .or_insert(counted.clone());
        Ok(counted)
    }

    /// The role for the merged request `group` of `shard`: lead it or wait for it.
    pub(crate) fn join_group(&self, shard: &[u64], group: &Range<u64>) -> Role<'_> {
        let users = self.users_of(shard, group);
        self.join(FlightKey::Group(shard.to_vec(), group.start), users)
    }

    /// How many of the read's inner chunks merged request `group` of `shard` holds.
    fn users_of(&self, shard: &[u64], group: &Range<u64>) -> usize {
        lock(&self.groups)
            .get(shard)
            .and_then(|gs| gs.iter().find(|(g, _)| g == group).map(|(_, n)| *n))
            .unwrap_or(1)
    }

    /// Publishes the leader's bytes of a merged request to its waiters.
    pub(crate) fn finish_group(&self, leader: Leader<'_>, fetched: Fetched) {
        if let Ok(Some(bytes)) = &fetched {
            self.alive.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
        leader.finish(fetched);
    }

    /// The bytes a waiter was waiting for.
    pub(crate) fn waited_group(&self, flight: &Flight) -> Fetched {
        flight.wait()
    }

    /// Takes inner chunk `range` out of the fetched bytes of merged request `group`, and
    /// lets the flight's hold on them go once every inner chunk in them was taken. The inner
    /// chunk is a view of the request's bytes, not a copy: they are freed when the last
    /// inner chunk taken from them is decoded.
    pub(crate) fn take(
        &self,
        shard: &[u64],
        group: &Range<u64>,
        bytes: Bytes,
        range: &Range<u64>,
    ) -> std::result::Result<Bytes, String> {
        let key = FlightKey::Group(shard.to_vec(), group.start);
        // The map's guard is dropped before the map is locked again to remove the entry.
        let flight = lock(&self.flights).get(&key).cloned();
        if let Some(flight) = flight {
            let all_taken = {
                let mut left = lock(&flight.remaining);
                *left = left.saturating_sub(1);
                *left == 0
            };
            if all_taken {
                lock(&self.flights).remove(&key);
                // A compare-exchange loop rather than `fetch_update`, which nightly
                // deprecates in favour of a `try_update` stable does not have yet.
                let mut alive = self.alive.load(Ordering::Relaxed);
                loop {
                    let left = alive.saturating_sub(bytes.len() as u64);
                    match self.alive.compare_exchange_weak(
                        alive,
                        left,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => break,
                        Err(now) => alive = now,
                    }
                }
            }
        }
        check_length(group, bytes.len())?;
        let from = (range.start - group.start) as usize;
        let to = (range.end - group.start) as usize;
        Ok(bytes.slice(from..to))
    }
}

/// Whether `read` bytes fetched for the request `range` of a shard are all of it (a shard
/// shorter than its index says is truncated).
pub(crate) fn check_length(range: &Range<u64>, read: usize) -> std::result::Result<(), String> {
    let want = range.end - range.start;
    if (read as u64) < want {
        return Err(format!(
            "the shard is truncated: {want} bytes at {}..{} expected, {read} read",
            range.start, range.end
        ));
    }
    Ok(())
}

/// The decoded index of `shard` (`None`: the shard is not stored), for the sync stage: the
/// cached one, or fetched by this worker with `get_index` (then cached), or waited for.
pub(crate) fn shard_index_sync(
    reads: &ShardReads,
    shard: &[u64],
    get_index: &dyn Fn() -> Fetched,
) -> std::result::Result<Option<Arc<Vec<u64>>>, String> {
    Ok(match reads.index_of(shard) {
        Ok(hit) => hit,
        Err(Role::Lead(leader)) => Some(reads.finish_index(leader, shard, get_index())?),
        Err(Role::Wait(flight)) => Some(reads.waited_index(&flight, shard)?),
    }
    .flatten())
}

/// The inner chunk's bytes given its plan and a way to run one request, for the sync stage.
pub(crate) fn inner_chunk_sync(
    reads: &ShardReads,
    shard: &[u64],
    within: &[u64],
    get: &dyn Fn(Range<u64>) -> Fetched,
    get_index: &dyn Fn() -> Fetched,
) -> std::result::Result<Option<Bytes>, String> {
    let Some(index) = shard_index_sync(reads, shard, get_index)? else {
        return Ok(None);
    };
    let InnerPlan::InGroup { group, range } = reads.plan_inner(shard, &index, within)? else {
        return Ok(None);
    };
    let fetched = match reads.join_group(shard, &group) {
        Role::Lead(leader) => {
            let got = get(group.clone());
            reads.finish_group(leader, got.clone());
            got
        }
        Role::Wait(flight) => reads.waited_group(&flight),
    }?;
    let bytes = fetched.ok_or("the shard disappeared while it was being read")?;
    reads.take(shard, &group, bytes, &range).map(Some)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::single_range_in_vec_init)]
    use super::{MAX_GAP, MAX_REQUEST, coalesce, merge_gap};

    #[test]
    fn ranges_merge_across_small_gaps_only() {
        let r = vec![0..10, 10..20, 25..30, 5000..5010];
        assert_eq!(coalesce(&r, 5, 1000), vec![0..30, 5000..5010]);
        assert_eq!(coalesce(&r, 0, 1000), vec![0..20, 25..30, 5000..5010]);
        // Unsorted input, overlaps.
        assert_eq!(coalesce(&[40..50, 0..45], 0, 1000), vec![0..50]);
    }

    #[test]
    fn the_merge_gap_grows_with_the_round_trip() {
        use std::time::Duration;
        let ms = |n| Some(Duration::from_millis(n));
        // Unknown, local-fast or 20 ms: object_store's 1 MiB.
        assert_eq!(merge_gap(None), MAX_GAP);
        assert_eq!(merge_gap(ms(1)), MAX_GAP);
        assert_eq!(merge_gap(ms(20)), MAX_GAP);
        // 40 and 80 ms: what 50 MiB/s carries meanwhile.
        assert_eq!(merge_gap(ms(40)), 2 << 20);
        assert_eq!(merge_gap(ms(80)), 4 << 20);
        // Never beyond half a request.
        assert_eq!(merge_gap(ms(5000)), MAX_REQUEST / 2);
        // A 3 MiB gap: two requests at 20 ms, one at 80 ms.
        let r = [0..(1 << 20), (4 << 20)..(5 << 20)];
        assert_eq!(coalesce(&r, merge_gap(ms(20)), MAX_REQUEST).len(), 2);
        assert_eq!(
            coalesce(&r, merge_gap(ms(80)), MAX_REQUEST),
            vec![0..(5 << 20)]
        );
    }

    #[test]
    fn merged_requests_stay_within_the_length_cap() {
        let r: Vec<_> = (0..10u64).map(|i| i * 100..i * 100 + 100).collect();
        let got = coalesce(&r, 0, 350);
        assert_eq!(got, vec![0..300, 300..600, 600..900, 900..1000]);
        // One range over the cap stays whole.
        let one = [0..5000];
        assert_eq!(coalesce(&one, 0, 100), one.to_vec());
    }

    /// The waiters of a request whose leader panicked are told so, not that the read was
    /// cancelled (which a leader dropped unfinished otherwise means).
    #[test]
    fn waiters_learn_that_their_leader_panicked() {
        use super::{InnerFetch, Role, ShardReads};
        use crate::zarr::ShardIndex;
        use std::sync::Arc;
        use zarrs::array::{ArrayBuilder, data_type};
        let nz = |n: u64| std::num::NonZeroU64::new(n).unwrap();
        let sharding =
            zarrs::array::codec::ShardingCodecBuilder::new(vec![nz(4)], &data_type::uint8())
                .build_arc();
        let array = ArrayBuilder::new(vec![16], vec![8], data_type::uint8(), 0u8)
            .array_to_bytes_codec(sharding)
            .build(Arc::new(zarrs::storage::store::MemoryStore::new()), "/s")
            .unwrap();
        let reads = ShardReads::new(
            ShardIndex::with_limit(&array, false, None).unwrap(),
            &mut [],
            InnerFetch::Merged,
            1 << 20,
        );
        let outcome = |leader_panics: bool| {
            let Err(Role::Lead(leader)) = reads.index_of(&[0]) else {
                panic!("the first asker leads");
            };
            let Err(Role::Wait(flight)) = reads.index_of(&[0]) else {
                panic!("the second asker waits");
            };
            if leader_panics {
                let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                    let _held = leader;
                    panic!("a fetch bug");
                }));
                assert!(unwound.is_err());
            } else {
                drop(leader);
            }
            flight.wait().unwrap_err()
        };
        let (panicked, dropped) = (outcome(true), outcome(false));
        assert!(panicked.contains("panicked"), "{panicked}");
        assert!(dropped.contains("cancelled"), "{dropped}");
    }
}
