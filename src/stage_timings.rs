//! Stage timings of the staged read's device-decode route: what each stage took (time and
//! bytes), the reads' end-to-end time and the time the device was busy, summed over every
//! read that carries the same accumulator ([`ReadOptions::with_stage_timings`]).
//!
//! The stages, and the bytes each counts:
//!
//! - `fetch`: the store reads of the chunks (or inner chunks), bytes as fetched; timed on
//!   the worker that asks (with the fetch-ahead stage of object stores: its wait);
//! - `walk`: the header walk of each chunk's framing (sizes, block headers, checksums) that
//!   the device decoder trusts, bytes walked (as fetched);
//! - `stage`: the copy of each chunk's compressed payload into its staging slot (pinned on
//!   CUDA), bytes copied;
//! - `h2d`: the copy of those bytes into the batch's input buffer in device memory;
//! - `nvcomp`: the batched decompression (nvCOMP on CUDA, the host twin's CPU decoder on the
//!   host), decoded bytes written;
//! - `scatter`: what follows a batch's decompression (blosc's unshuffle, the batched strided
//!   copy into the output), decoded bytes placed in the output (0 for chunks decoded
//!   straight into their place).
//!
//! The host-side stages (fetch, walk, stage) are timed with the host clock on the worker
//! threads, so their time is summed over threads; the device-side ones (h2d, nvcomp,
//! scatter) with CUDA events on a GPU and with the host clock on the host twin (whose work
//! runs when it is enqueued). Reads without an accumulator time nothing.
//!
//! [`ReadOptions::with_stage_timings`]: crate::options::ReadOptions::with_stage_timings

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One stage of the device-decode route (see the module docs of [`StageTimings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Store reads of the chunks.
    Fetch,
    /// The framing's header walk.
    Walk,
    /// The copy of compressed bytes into staging memory.
    Staging,
    /// The host-to-device copy.
    H2d,
    /// The batched decompression.
    Nvcomp,
    /// The scatter into the output.
    Scatter,
}

impl Stage {
    /// Every stage, in the route's order.
    pub const ALL: [Stage; 6] = [
        Stage::Fetch,
        Stage::Walk,
        Stage::Staging,
        Stage::H2d,
        Stage::Nvcomp,
        Stage::Scatter,
    ];

    /// The stage's name in the check binary's `gpu-stages:` line.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Fetch => "fetch",
            Stage::Walk => "walk",
            Stage::Staging => "stage",
            Stage::H2d => "h2d",
            Stage::Nvcomp => "nvcomp",
            Stage::Scatter => "scatter",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// An accumulator of stage timings that reads fill when their options carry it (see the
/// module docs for the stages). Shared between threads: every counter is an atomic.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::options::{ReadOptions, StageTimings};
/// let timings = Arc::new(StageTimings::default());
/// let opts = ReadOptions::default().with_stage_timings(timings.clone());
/// // ... reads with `opts` ...
/// let report = timings.report();
/// assert_eq!(report.reads, 0);
/// ```
#[derive(Debug, Default)]
pub struct StageTimings {
    nanos: [AtomicU64; 6],
    bytes: [AtomicU64; 6],
    wall_nanos: AtomicU64,
    busy_nanos: AtomicU64,
    overhead_nanos: AtomicU64,
    reads: AtomicU64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl StageTimings {
    /// Adds `elapsed` and `bytes` to `stage`.
    pub(crate) fn add(&self, stage: Stage, elapsed: Duration, bytes: u64) {
        let i = stage.index();
        self.nanos[i].fetch_add(nanos(elapsed), Ordering::Relaxed);
        self.bytes[i].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Adds one read that took `wall` from start to end.
    pub(crate) fn add_read(&self, wall: Duration) {
        self.wall_nanos.fetch_add(nanos(wall), Ordering::Relaxed);
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds time the device was busy (any of its stages running).
    pub(crate) fn add_device_busy(&self, busy: Duration) {
        self.busy_nanos.fetch_add(nanos(busy), Ordering::Relaxed);
    }

    /// Adds time the reads spent reading their own timing marks (left out of their
    /// end-to-end time).
    pub(crate) fn add_timing_overhead(&self, spent: Duration) {
        self.overhead_nanos
            .fetch_add(nanos(spent), Ordering::Relaxed);
    }

    /// What was accumulated so far.
    pub fn report(&self) -> StageReport {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut stages = [StageTotal::default(); 6];
        for (i, s) in stages.iter_mut().enumerate() {
            *s = StageTotal {
                time: Duration::from_nanos(load(&self.nanos[i])),
                bytes: load(&self.bytes[i]),
            };
        }
        let overhead = load(&self.overhead_nanos);
        StageReport {
            stages,
            wall: Duration::from_nanos(load(&self.wall_nanos).saturating_sub(overhead)),
            device_busy: Duration::from_nanos(load(&self.busy_nanos)),
            timing_overhead: Duration::from_nanos(overhead),
            reads: load(&self.reads),
        }
    }

    /// Sets every counter back to zero.
    pub fn reset(&self) {
        for a in self.nanos.iter().chain(&self.bytes) {
            a.store(0, Ordering::Relaxed);
        }
        for a in [
            &self.wall_nanos,
            &self.busy_nanos,
            &self.overhead_nanos,
            &self.reads,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }
}

/// One stage's total: its time (summed over the threads that ran it) and its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTotal {
    /// The stage's time.
    pub time: Duration,
    /// The bytes it moved (see the module docs for which).
    pub bytes: u64,
}

/// A snapshot of a [`StageTimings`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageReport {
    /// Per stage, in the order of [`Stage::ALL`].
    pub stages: [StageTotal; 6],
    /// The reads' end-to-end time (from planning their units to their last batch checked),
    /// less their timing overhead.
    pub wall: Duration,
    /// The time the device was busy with any stage of its own (h2d, nvcomp, scatter): the
    /// union of their intervals, per read.
    pub device_busy: Duration,
    /// The time the reads spent reading their device timing marks once their batches were
    /// done (on CUDA, two driver calls a timed piece of work), left out of `wall`.
    pub timing_overhead: Duration,
    /// Reads accumulated.
    pub reads: u64,
}

impl StageReport {
    /// `stage`'s total.
    pub fn stage(&self, stage: Stage) -> StageTotal {
        self.stages[stage.index()]
    }

    /// `stage`'s rate on its own: its bytes over its time, in GB/s (0 for a stage with no
    /// bytes).
    pub fn rate_gbps(&self, stage: Stage) -> f64 {
        let s = self.stage(stage);
        if s.bytes == 0 {
            return 0.0;
        }
        s.bytes as f64 / s.time.as_secs_f64().max(1e-9) / 1e9
    }

    /// `stage`'s time as a share of the end-to-end time (may pass 1 for a stage that worker
    /// threads run at once).
    pub fn share(&self, stage: Stage) -> f64 {
        ratio(self.stage(stage).time, self.wall)
    }

    /// The share of the end-to-end time the device was busy.
    pub fn gpu_busy(&self) -> f64 {
        ratio(self.device_busy, self.wall)
    }

    /// The share of the stages' summed time that ran alongside other stage time (other
    /// stages, or the same stage on other threads): `1 − wall / Σ stage time`, at least 0.
    /// 0 when the stages ran one at a time.
    pub fn overlap(&self) -> f64 {
        let sum: Duration = self.stages.iter().map(|s| s.time).sum();
        if sum.is_zero() {
            return 0.0;
        }
        (1.0 - self.wall.as_secs_f64() / sum.as_secs_f64()).max(0.0)
    }
}

/// `a / b`, 0 when `b` is zero.
fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        0.0
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_sums_every_addition_and_derives_rates_and_shares() {
        let t = StageTimings::default();
        t.add(Stage::Fetch, Duration::from_millis(30), 3_000_000);
        t.add(Stage::Fetch, Duration::from_millis(10), 1_000_000);
        t.add(Stage::Nvcomp, Duration::from_millis(20), 8_000_000);
        t.add_read(Duration::from_millis(53));
        t.add_timing_overhead(Duration::from_millis(3));
        t.add_device_busy(Duration::from_millis(25));
        let r = t.report();
        assert_eq!(
            r.stage(Stage::Fetch),
            StageTotal {
                time: Duration::from_millis(40),
                bytes: 4_000_000
            }
        );
        assert_eq!(r.reads, 1);
        // The timing overhead is left out of the end-to-end time.
        assert_eq!(
            (r.wall, r.timing_overhead),
            (Duration::from_millis(50), Duration::from_millis(3))
        );
        assert!((r.rate_gbps(Stage::Fetch) - 0.1).abs() < 1e-9);
        assert!((r.rate_gbps(Stage::Nvcomp) - 0.4).abs() < 1e-9);
        assert_eq!(r.rate_gbps(Stage::Walk), 0.0);
        assert!((r.share(Stage::Fetch) - 0.8).abs() < 1e-9);
        assert!((r.gpu_busy() - 0.5).abs() < 1e-9);
        // 60 ms of stages in 50 ms: a sixth of it ran alongside other stages.
        assert!((r.overlap() - 1.0 / 6.0).abs() < 1e-9);
        t.reset();
        assert_eq!(t.report(), StageReport::default());
        assert_eq!(StageReport::default().overlap(), 0.0);
        assert_eq!(StageReport::default().gpu_busy(), 0.0);
    }

    #[test]
    fn stage_names_follow_the_route() {
        let names: Vec<_> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            ["fetch", "walk", "stage", "h2d", "nvcomp", "scatter"]
        );
        for (i, s) in Stage::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
        }
    }
}
