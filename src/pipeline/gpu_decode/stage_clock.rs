//! The device side of a read's stage timings ([`crate::options::StageTimings`]): each
//! timed piece of device work (a chunk's host-to-device copy, a batch's decompression, its
//! scatter) between two timing marks of its queue, kept until the read's batches are done
//! and only then read (on CUDA two driver calls a mark pair, thousands a read: not while
//! the coordinator has batches to feed), with the union of those intervals — the time the
//! device was busy. The time spent reading them is the read's timing overhead, left out of
//! its end-to-end time.

use crate::device::{DeviceOps, Mark, Queue};
use crate::errors::Result;
use crate::stage_timings::{Stage, StageTimings};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Device work enqueued between two marks, not yet read.
pub(super) struct Timed {
    pub(super) stage: Stage,
    pub(super) bytes: u64,
    pub(super) start: Mark,
    pub(super) end: Mark,
}

/// One read's device-side timings.
pub(super) struct DeviceClock {
    timings: Arc<StageTimings>,
    /// Every interval is measured from this mark (seconds), so those of different queues
    /// can be merged.
    origin: Mark,
    /// Finished work not read yet.
    done: Vec<Timed>,
}

impl DeviceClock {
    /// A clock for a read whose device work runs on `q` (and queues like it), adding to
    /// `timings`.
    pub(super) fn new(ops: &dyn DeviceOps, q: &Queue, timings: Arc<StageTimings>) -> Result<Self> {
        Ok(DeviceClock {
            timings,
            origin: ops.mark(q)?,
            done: Vec::new(),
        })
    }

    /// Keeps finished work (its queue has passed its end marks) for [`Self::finish`].
    pub(super) fn settle(&mut self, done: Vec<Timed>) {
        self.done.extend(done);
    }

    /// Reads every piece of finished work into the timings, with the time the device was
    /// busy (the union of their intervals) and the time this took.
    pub(super) fn finish(&mut self) -> Result<()> {
        let started = Instant::now();
        let mut busy = Vec::with_capacity(self.done.len());
        for t in std::mem::take(&mut self.done) {
            let secs = t.end.secs_since(&t.start)?.max(0.0);
            self.timings
                .add(t.stage, Duration::from_secs_f64(secs), t.bytes);
            let from = t.start.secs_since(&self.origin)?;
            busy.push((from, from + secs));
        }
        let busy = union_secs(&mut busy);
        self.timings.add_device_busy(Duration::from_secs_f64(busy));
        self.timings.add_timing_overhead(started.elapsed());
        Ok(())
    }
}

/// The length of the union of `intervals` (start, end), in seconds.
pub(super) fn union_secs(intervals: &mut [(f64, f64)]) -> f64 {
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut open: Option<(f64, f64)> = None;
    for &(s, e) in intervals.iter() {
        open = match open {
            Some((os, oe)) if s <= oe => Some((os, oe.max(e))),
            Some((os, oe)) => {
                total += oe - os;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    total + open.map_or(0.0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::HostOps;

    #[test]
    fn the_union_counts_overlapping_intervals_once() {
        let mut v = vec![(5.0, 6.0), (0.0, 2.0), (1.0, 3.0), (3.0, 4.0)];
        assert!((union_secs(&mut v) - 5.0).abs() < 1e-12);
        assert_eq!(union_secs(&mut []), 0.0);
    }

    #[test]
    fn settled_work_adds_its_time_bytes_and_busy_union() {
        let timings = Arc::new(StageTimings::default());
        let ops = HostOps;
        let q = ops.default_queue();
        let mut clock = DeviceClock::new(&ops, &q, timings.clone()).unwrap();
        let t0 = Instant::now() + Duration::from_millis(1);
        let at = |ms: u64| Mark::Host(t0 + Duration::from_millis(ms));
        clock.settle(vec![
            Timed {
                stage: Stage::H2d,
                bytes: 10,
                start: at(0),
                end: at(4),
            },
            Timed {
                stage: Stage::Nvcomp,
                bytes: 40,
                start: at(2),
                end: at(8),
            },
        ]);
        clock.finish().unwrap();
        let r = timings.report();
        assert_eq!(r.stage(Stage::H2d).bytes, 10);
        assert_eq!(r.stage(Stage::H2d).time, Duration::from_millis(4));
        assert_eq!(r.stage(Stage::Nvcomp).time, Duration::from_millis(6));
        assert!((r.device_busy.as_secs_f64() - 0.008).abs() < 1e-6);
    }
}
