//! The hybrid scheduler: one queue of a read's units shared by the device decoder and the
//! CPU decoding threads, so that a read decoded by both finishes about when the faster
//! would alone have, or sooner — never long after.
//!
//! The units lie in one row. The device takes *batches* from the front (the worker threads
//! fetch and check those units and hand them over still compressed); the CPU threads take
//! single units from the back and decode them themselves; the two ends meet. How large the
//! device's next batch is, and whether a CPU thread should start another unit at all, is
//! [`decide`]'s call, from the rates observed so far in this read:
//!
//! - the CPU's: the mean time of one unit on one thread, times the threads;
//! - the device's: every finished batch's (chunks, seconds), read as an upper bound on any
//!   batch's time under the affine model `latency + chunks / rate` ([`DeviceModel`]).
//!
//! The device's batch is as large as the plan allows ([`super::batch_plan`]) while there is
//! plenty of work, and shrinks at the end so that the device's open batches plus the new one
//! finish no later than the CPU threads would finish the rest; a CPU thread starts a unit
//! only when it would finish it before the device could finish everything left. Until the
//! device has finished a batch its speed is unknown: it gets one *probe* batch of at most
//! 1/`probe_share` of the units (the tuning's, default 8: [`super::tuning`]), so a device
//! even several times slower than the CPU cannot hold the read up.
//!
//! The type knows nothing of CUDA, chunks or buffers: [`WorkQueue::next`] hands out units,
//! the callers report what they finished. Its tests drive it with simulated decoders.

use super::tuning::Tuning;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Finished batches the device model remembers (the newest).
const DEVICE_OBSERVATIONS: usize = 8;

/// Who decodes a read's units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    /// The CPU threads, every unit, front to back.
    Cpu,
    /// The device, every unit, in batches as large as allowed; the threads only fetch.
    Device,
    /// Both: the device from the front, the CPU threads from the back ([`decide`]).
    Both,
}

/// A batch the device took: its id and its number of units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BatchId {
    pub id: u64,
    pub len: usize,
}

/// One unit handed to a worker thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Decode unit `.0` on this thread.
    Cpu(usize),
    /// Fetch unit `unit` for the device's batch `batch`, and hand it over compressed.
    Device { unit: usize, batch: BatchId },
}

/// What the device's finished batches say about its speed: each `(chunks, seconds)` bounds
/// the time of any batch under `latency + chunks / rate` (latency and rate unknown, neither
/// negative): a batch of at most `chunks` takes at most `seconds`, a larger one at most
/// `seconds × n / chunks`. The prediction is the tightest of those bounds — pessimistic for
/// the device, so misjudging it costs the CPU a little work, never the read a late batch.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeviceModel {
    seen: VecDeque<(usize, f64)>,
}

impl DeviceModel {
    /// Records a batch of `chunks` that took `seconds` on the device.
    pub(crate) fn observe(&mut self, chunks: usize, seconds: f64) {
        if chunks == 0 || !seconds.is_finite() || seconds < 0.0 {
            return;
        }
        if self.seen.len() == DEVICE_OBSERVATIONS {
            self.seen.pop_front();
        }
        self.seen.push_back((chunks, seconds));
    }

    /// True once a batch has finished.
    pub(crate) fn is_measured(&self) -> bool {
        !self.seen.is_empty()
    }

    /// Seconds a batch of `chunks` takes, at most (`None` before any batch finished).
    pub(crate) fn predict(&self, chunks: usize) -> Option<f64> {
        if chunks == 0 {
            return Some(0.0);
        }
        self.seen
            .iter()
            .map(|&(b, t)| {
                if chunks <= b {
                    t
                } else {
                    t * chunks as f64 / b as f64
                }
            })
            .reduce(f64::min)
    }
}

/// What [`decide`] decides from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Facts<'a> {
    /// Units nobody has taken yet.
    pub remaining: usize,
    /// Most units in one device batch (the batch plan's `chunks_per_batch`).
    pub max_batch: usize,
    /// Device batches taken and not finished.
    pub open_batches: usize,
    /// Seconds until the device has finished its open batches (estimated; 0 when idle).
    pub device_busy: f64,
    /// The device's finished batches.
    pub device: &'a DeviceModel,
    /// Mean seconds one CPU thread takes per unit (`None` before one finished).
    pub cpu_unit_secs: Option<f64>,
    /// CPU threads decoding.
    pub cpu_threads: usize,
    /// Batches in flight and the probe's share ([`super::tuning`]).
    pub tuning: Tuning,
}

/// What the next caller of [`WorkQueue::next`] should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The device takes a batch of this many units from the front.
    Device(usize),
    /// The caller decodes one unit from the back.
    Cpu,
    /// Nothing worth starting: wait for the device to finish a batch.
    Wait,
}

/// The hybrid policy (see the module docs): how the next unit of work is split.
///
/// 1. No device batch has finished: the device gets one probe batch of at most
///    `remaining / probe_share` units (at least one); everything else goes to the CPU.
/// 2. The device can take a batch (fewer than `batches_in_flight` open): the largest `b` up
///    to `max_batch` with `device_busy + t(b) ≤ cpu(remaining − b)`, i.e. the device's work
///    ends no later than the CPU threads' (`t` from [`DeviceModel`]; `cpu(k)` is
///    `ceil(k / threads)` rounds of the mean unit time; before a CPU unit finished,
///    `b = max_batch`), or one unit more when that ends the read sooner.
/// 3. Otherwise a CPU thread starts a unit if it would finish it (one mean unit time)
///    before the device could finish everything left (`device_busy + t(remaining)`); if
///    not, the device takes the rest when it can, and the thread waits when it cannot.
pub(crate) fn decide(f: &Facts<'_>) -> Decision {
    let cap = f.max_batch.max(1).min(f.remaining);
    if cap == 0 {
        return Decision::Wait;
    }
    let device_can = f.open_batches < f.tuning.batches_in_flight.max(1);
    if !f.device.is_measured() {
        return if device_can && f.open_batches == 0 {
            let probe = f.remaining.div_ceil(f.tuning.probe_share.max(1));
            Decision::Device(cap.min(probe).max(1))
        } else {
            Decision::Cpu
        };
    }
    let t = |b: usize| f.device.predict(b).unwrap_or(f64::INFINITY);
    // The CPU threads' time for `k` units: rounds of one unit per thread.
    let cpu = |k: usize| {
        f.cpu_unit_secs
            .map(|s| k.div_ceil(f.cpu_threads.max(1)) as f64 * s)
    };
    if device_can {
        let b = match f.cpu_unit_secs {
            None => cap,
            Some(_) => {
                let device = |b: usize| f.device_busy + t(b);
                let cpu = |b: usize| cpu(f.remaining - b).unwrap_or(0.0);
                // The device's work ends no later than the CPU's; one more unit for the
                // device when that ends the read sooner (the CPU's last round is a whole
                // unit's time on a thread).
                let b = largest(cap, |b| device(b) <= cpu(b));
                let end = |b: usize| {
                    let d = if b == 0 { f.device_busy } else { device(b) };
                    d.max(cpu(b))
                };
                if b < cap && end(b + 1) < end(b) {
                    b + 1
                } else {
                    b
                }
            }
        };
        if b > 0 {
            return Decision::Device(b);
        }
    }
    let cpu_worth_it = match f.cpu_unit_secs {
        None => true,
        Some(s) => s < f.device_busy + t(f.remaining),
    };
    match (cpu_worth_it, device_can) {
        (true, _) => Decision::Cpu,
        (false, true) => Decision::Device(cap),
        (false, false) => Decision::Wait,
    }
}

/// The largest `b` in `0..=cap` with `fits(b)`, for a `fits` true up to some point and
/// false after (0 when only `fits(0)` holds, which is taken as true).
fn largest(cap: usize, fits: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, cap);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// A device batch taken and not yet finished.
struct Open {
    id: u64,
    len: usize,
    /// Next unit to hand out, and one past the batch's last.
    next: usize,
    end: usize,
    /// Units neither decoded by the device nor given back.
    unfinished: usize,
    /// When the device should have finished it (estimated when taken).
    done_by: Option<Instant>,
}

struct State {
    /// Units `front..back` are not taken yet.
    front: usize,
    back: usize,
    open: VecDeque<Open>,
    next_id: u64,
    max_batch: usize,
    cpu_units: usize,
    cpu_secs: f64,
    device: DeviceModel,
    device_units: usize,
    device_batches: usize,
    stopped: bool,
}

/// What a read's units went to, for tests.
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Units decoded by the CPU threads.
    pub cpu_units: usize,
    /// Units the device took (including any given back).
    pub device_units: usize,
    /// Batches the device took.
    pub device_batches: usize,
}

/// The queue of one read's units `0..units` (see the module docs). Shared by the worker
/// threads (`next`, `cpu_done`, `device_skipped`) and the thread that submits and checks
/// the device's batches (`device_done`).
pub(crate) struct WorkQueue {
    split: Split,
    cpu_threads: usize,
    tuning: Tuning,
    state: Mutex<State>,
    wake: Condvar,
}

impl WorkQueue {
    /// A queue of `units` units split as `split`, device batches of at most `max_batch`,
    /// `cpu_threads` threads decoding, and the default [`Tuning`] (see [`Self::with_tuning`]).
    pub(crate) fn new(units: usize, split: Split, max_batch: usize, cpu_threads: usize) -> Self {
        WorkQueue {
            split,
            cpu_threads: cpu_threads.max(1),
            tuning: Tuning::DEFAULT,
            state: Mutex::new(State {
                front: 0,
                back: units,
                open: VecDeque::new(),
                next_id: 0,
                max_batch: max_batch.max(1),
                cpu_units: 0,
                cpu_secs: 0.0,
                device: DeviceModel::default(),
                device_units: 0,
                device_batches: 0,
                stopped: false,
            }),
            wake: Condvar::new(),
        }
    }

    /// The same queue with `tuning`'s batches in flight and probe share.
    pub(crate) fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next unit for a worker thread, `None` when every unit has been handed out (or
    /// the queue was stopped). Blocks while the only useful work is the device's and it has
    /// no room for another batch.
    pub(crate) fn next(&self) -> Option<Take> {
        let mut s = self.lock();
        loop {
            if s.stopped {
                return None;
            }
            // Units of a batch the device took go first: the device waits for them.
            if let Some(o) = s.open.iter_mut().find(|o| o.next < o.end) {
                let unit = o.next;
                o.next += 1;
                let batch = BatchId {
                    id: o.id,
                    len: o.len,
                };
                return Some(Take::Device { unit, batch });
            }
            let remaining = s.back - s.front;
            if remaining == 0 {
                return None;
            }
            let now = Instant::now();
            let decision = match self.split {
                Split::Cpu => Decision::Cpu,
                Split::Device if s.open.len() < self.tuning.batches_in_flight.max(1) => {
                    Decision::Device(s.max_batch.min(remaining))
                }
                Split::Device => Decision::Wait,
                Split::Both => decide(&Facts {
                    remaining,
                    max_batch: s.max_batch,
                    open_batches: s.open.len(),
                    device_busy: device_busy(&s, now),
                    device: &s.device,
                    cpu_unit_secs: (s.cpu_units > 0).then(|| s.cpu_secs / s.cpu_units as f64),
                    cpu_threads: self.cpu_threads,
                    tuning: self.tuning,
                }),
            };
            match decision {
                Decision::Device(n) => {
                    let n = n.clamp(1, remaining);
                    let start = s
                        .open
                        .back()
                        .and_then(|o| o.done_by)
                        .map_or(now, |t| t.max(now));
                    let done_by = s.device.predict(n).map(|t| start + secs(t));
                    let (id, front) = (s.next_id, s.front);
                    s.next_id += 1;
                    s.front += n;
                    s.device_units += n;
                    s.device_batches += 1;
                    s.open.push_back(Open {
                        id,
                        len: n,
                        next: front,
                        end: front + n,
                        unfinished: n,
                        done_by,
                    });
                }
                Decision::Cpu => {
                    let unit = if self.split == Split::Cpu {
                        s.front += 1;
                        s.front - 1
                    } else {
                        s.back -= 1;
                        s.back
                    };
                    return Some(Take::Cpu(unit));
                }
                Decision::Wait => {
                    s = self.wake.wait(s).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
    }

    /// A CPU thread decoded one unit in `elapsed`.
    pub(crate) fn cpu_done(&self, elapsed: Duration) {
        let mut s = self.lock();
        s.cpu_units += 1;
        s.cpu_secs += elapsed.as_secs_f64();
    }

    /// The device decoded `chunks` units of batch `batch` in `elapsed` (from the batch's
    /// start on the device — its submission, or the end of the batch before it — to its
    /// end). A batch may be reported in parts.
    pub(crate) fn device_done(&self, batch: u64, chunks: usize, elapsed: Duration) {
        let mut s = self.lock();
        s.device.observe(chunks, elapsed.as_secs_f64());
        finish(&mut s, batch, chunks);
        drop(s);
        self.wake.notify_all();
    }

    /// A unit of batch `batch` did not go to the device after all (missing, or decoded on
    /// the CPU for a reason of its own).
    pub(crate) fn device_skipped(&self, batch: u64) {
        let mut s = self.lock();
        finish(&mut s, batch, 1);
        drop(s);
        self.wake.notify_all();
    }

    /// Sets the most units of a device batch from now on (at least 1).
    pub(crate) fn set_max_batch(&self, n: usize) {
        self.lock().max_batch = n.max(1);
    }

    /// Hands out nothing more; wakes every waiting thread.
    pub(crate) fn stop(&self) {
        self.lock().stopped = true;
        self.wake.notify_all();
    }

    /// What the units went to so far.
    #[cfg(test)]
    pub(crate) fn tally(&self) -> Tally {
        let s = self.lock();
        Tally {
            cpu_units: s.cpu_units,
            device_units: s.device_units,
            device_batches: s.device_batches,
        }
    }
}

/// Seconds until the device should have finished its open batches.
fn device_busy(s: &State, now: Instant) -> f64 {
    s.open
        .iter()
        .filter_map(|o| o.done_by)
        .max()
        .map_or(0.0, |t| t.saturating_duration_since(now).as_secs_f64())
}

/// `n` more units of batch `id` are finished; a batch with none left is closed.
fn finish(s: &mut State, id: u64, n: usize) {
    if let Some(k) = s.open.iter().position(|o| o.id == id) {
        let o = &mut s.open[k];
        o.unfinished = o.unfinished.saturating_sub(n);
        if o.unfinished == 0 && o.next == o.end {
            s.open.remove(k);
        }
    }
}

fn secs(t: f64) -> Duration {
    Duration::try_from_secs_f64(t).unwrap_or(Duration::MAX / 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn model(seen: &[(usize, f64)]) -> DeviceModel {
        let mut m = DeviceModel::default();
        for &(b, t) in seen {
            m.observe(b, t);
        }
        m
    }

    fn facts(
        remaining: usize,
        open: usize,
        busy: f64,
        device: &DeviceModel,
        cpu: Option<f64>,
    ) -> Facts<'_> {
        Facts {
            remaining,
            max_batch: 32,
            open_batches: open,
            device_busy: busy,
            device,
            cpu_unit_secs: cpu,
            cpu_threads: 2,
            tuning: Tuning::DEFAULT,
        }
    }

    #[test]
    fn the_tuning_sets_the_probe_and_the_batches_in_flight() {
        let none = DeviceModel::default();
        let tuned = |probe_share, batches_in_flight, open| Facts {
            max_batch: 1000,
            tuning: Tuning {
                chunks_per_sm: 4,
                batches_in_flight,
                probe_share,
            },
            ..facts(400, open, 0.0, &none, None)
        };
        assert_eq!(decide(&tuned(8, 2, 0)), Decision::Device(50));
        assert_eq!(decide(&tuned(2, 2, 0)), Decision::Device(200));
        let m = model(&[(32, 0.020)]);
        let measured = |batches_in_flight, open| Facts {
            tuning: Tuning {
                chunks_per_sm: 4,
                batches_in_flight,
                probe_share: 8,
            },
            ..facts(400, open, 0.02, &m, None)
        };
        // Two open batches: a third only when three may be in flight.
        assert_eq!(decide(&measured(2, 2)), Decision::Cpu);
        assert_eq!(decide(&measured(3, 2)), Decision::Device(32));
    }

    #[test]
    fn the_device_model_bounds_every_batch_from_above() {
        let m = model(&[(32, 0.020)]);
        // Smaller batches: at most the observed time (all of it may be latency).
        assert_eq!(m.predict(8), Some(0.020));
        // Larger: at most linear (none of it may be latency).
        assert_eq!(m.predict(64), Some(0.040));
        // A second size tightens the bound.
        let m = model(&[(32, 0.020), (8, 0.008)]);
        assert_eq!(m.predict(8), Some(0.008));
        assert_eq!(m.predict(4), Some(0.008));
        assert_eq!(m.predict(16), Some(0.016));
        assert!(DeviceModel::default().predict(1).is_none());
        assert_eq!(DeviceModel::default().predict(0), Some(0.0));
    }

    #[test]
    fn an_unmeasured_device_gets_one_probe_batch() {
        let m = DeviceModel::default();
        assert_eq!(decide(&facts(400, 0, 0.0, &m, None)), Decision::Device(32));
        assert_eq!(decide(&facts(80, 0, 0.0, &m, None)), Decision::Device(10));
        assert_eq!(
            decide(&facts(3, 0, 0.0, &m, Some(0.01))),
            Decision::Device(1)
        );
        // While it runs, the CPU takes everything else.
        assert_eq!(decide(&facts(400, 1, 0.0, &m, None)), Decision::Cpu);
        assert_eq!(decide(&facts(400, 1, 0.0, &m, Some(0.004))), Decision::Cpu);
    }

    #[test]
    fn a_fast_device_takes_full_batches_until_the_end() {
        // 32 units in 21 ms: 3x two CPU threads at 4 ms per unit.
        let m = model(&[(32, 0.021)]);
        assert_eq!(
            decide(&facts(300, 0, 0.0, &m, Some(0.004))),
            Decision::Device(32)
        );
        assert_eq!(
            decide(&facts(300, 1, 0.021, &m, Some(0.004))),
            Decision::Device(32)
        );
        // Ring full: the CPU helps while the device has more than a unit's time of work.
        assert_eq!(
            decide(&facts(300, 2, 0.042, &m, Some(0.004))),
            Decision::Cpu
        );
        // Near the end the batch shrinks: 20 units left, the CPU would take 40 ms for them,
        // the device 21 ms for any batch up to 32, after 10 ms of work in flight:
        // 0.031 <= ceil((20 - b) / 2) * 0.004 holds up to b = 5, and b = 6 ends sooner
        // (31 ms against 32).
        assert_eq!(
            decide(&facts(20, 1, 0.010, &m, Some(0.004))),
            Decision::Device(6)
        );
        // 4 units left and the device busy for 30 ms: not worth a batch; the CPU takes them.
        assert_eq!(decide(&facts(4, 1, 0.030, &m, Some(0.004))), Decision::Cpu);
    }

    #[test]
    fn a_slow_cpu_leaves_the_tail_to_the_device() {
        // CPU threads at 100 ms per unit, the device at 32 units per 10 ms.
        let m = model(&[(32, 0.010)]);
        // 8 units left: 7 for the device and 1 for a thread would end after 100 ms; all 8
        // on the device, after 15 ms.
        assert_eq!(
            decide(&facts(8, 0, 0.0, &m, Some(0.1))),
            Decision::Device(8)
        );
        // The device is full: starting a unit on the CPU would end after everything the
        // device can do, so the thread waits.
        assert_eq!(decide(&facts(8, 2, 0.015, &m, Some(0.1))), Decision::Wait);
        // With room, the device takes the rest.
        assert_eq!(
            decide(&facts(8, 1, 0.005, &m, Some(0.1))),
            Decision::Device(8)
        );
    }

    #[test]
    fn a_slow_device_gets_what_it_can_finish_with_the_cpu() {
        // The device at 1/3 of two threads' rate: 32 units in 192 ms; CPU 500 units/s.
        let m = model(&[(32, 0.192)]);
        assert_eq!(
            decide(&facts(300, 0, 0.0, &m, Some(0.004))),
            Decision::Device(32)
        );
        // 100 left: 0.192 <= ceil((100 - b) / 2) * 0.004 up to b = 5.
        assert_eq!(
            decide(&facts(100, 0, 0.0, &m, Some(0.004))),
            Decision::Device(5)
        );
        // 90 left: the device cannot finish any batch before the CPU finishes the rest.
        assert_eq!(decide(&facts(90, 0, 0.0, &m, Some(0.004))), Decision::Cpu);
    }

    /// Drains a queue from `threads` threads, each reporting its units at once.
    fn drain(q: &WorkQueue, threads: usize) -> Vec<Take> {
        let taken = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    while let Some(t) = q.next() {
                        match t {
                            Take::Cpu(_) => q.cpu_done(Duration::from_micros(100)),
                            Take::Device { batch, .. } => {
                                q.device_done(batch.id, 1, Duration::from_micros(10))
                            }
                        }
                        taken.lock().unwrap().push(t);
                    }
                });
            }
        });
        taken.into_inner().unwrap()
    }

    fn units(takes: &[Take]) -> HashSet<usize> {
        takes
            .iter()
            .map(|t| match *t {
                Take::Cpu(u) | Take::Device { unit: u, .. } => u,
            })
            .collect()
    }

    #[test]
    fn every_unit_is_handed_out_once_in_every_split() {
        for split in [Split::Cpu, Split::Device, Split::Both] {
            for n in [0, 1, 2, 33, 500] {
                let q = WorkQueue::new(n, split, 16, 3);
                let takes = drain(&q, 3);
                assert_eq!(takes.len(), n, "{split:?} {n}");
                assert_eq!(units(&takes), (0..n).collect(), "{split:?} {n}");
                let device = takes
                    .iter()
                    .filter(|t| matches!(t, Take::Device { .. }))
                    .count();
                match split {
                    Split::Cpu => assert_eq!(device, 0),
                    Split::Device => assert_eq!(device, n),
                    Split::Both => {}
                }
            }
        }
    }

    #[test]
    fn the_device_takes_from_the_front_and_the_cpu_from_the_back() {
        let q = WorkQueue::new(100, Split::Both, 16, 1);
        // The probe: 100 / 8 → 13 units from the front, handed out first.
        for u in 0..13 {
            assert!(
                matches!(q.next(), Some(Take::Device { unit, batch }) if unit == u && batch.len == 13)
            );
        }
        assert_eq!(q.next(), Some(Take::Cpu(99)));
        assert_eq!(q.next(), Some(Take::Cpu(98)));
        q.device_skipped(0);
        assert_eq!(q.tally().device_batches, 1);
    }

    #[test]
    fn device_only_batches_follow_the_plan_and_wait_for_room() {
        let q = WorkQueue::new(100, Split::Device, 40, 2);
        let mut batches = Vec::new();
        for _ in 0..80 {
            match q.next() {
                Some(Take::Device { batch, .. }) => batches.push(batch),
                other => panic!("{other:?}"),
            }
        }
        // Two batches of 40 are open: the next caller waits until one finishes.
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| q.next());
            std::thread::sleep(Duration::from_millis(50));
            assert!(!waiter.is_finished(), "a third batch while two are open");
            q.device_done(batches[0].id, 40, Duration::from_millis(1));
            let t = waiter.join().unwrap();
            assert!(matches!(t, Some(Take::Device { unit: 80, batch }) if batch.len == 20));
        });
        assert_eq!(batches[0].len, 40);
        assert_eq!(batches[79].len, 40);
    }

    #[test]
    fn stop_wakes_waiting_threads() {
        let q = WorkQueue::new(100, Split::Device, 10, 1);
        for _ in 0..20 {
            q.next();
        }
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| q.next());
            std::thread::sleep(Duration::from_millis(20));
            q.stop();
            assert_eq!(waiter.join().unwrap(), None);
        });
    }
}
