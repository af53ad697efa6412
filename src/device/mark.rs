//! Timing marks in a queue, for the staged read's stage timings: a CUDA event that records
//! time on a GPU, the host clock on the host (whose work runs when it is enqueued, so the
//! moment of enqueueing is the moment the queue reaches the mark).

use crate::errors::{Error, Result};
use cudarc::driver::CudaEvent;
use std::sync::Arc;
use std::time::Instant;

/// A point in a queue whose time can be read once the queue has passed it.
#[derive(Clone)]
pub(crate) enum Mark {
    Host(Instant),
    /// Created with timing enabled (the pipeline's other events are not).
    Cuda(Arc<CudaEvent>),
}

impl Mark {
    /// A mark on the host clock, now.
    pub(crate) fn now() -> Mark {
        Mark::Host(Instant::now())
    }

    /// True once the queue has passed the mark (never blocks; host marks always are).
    pub(crate) fn is_complete(&self) -> bool {
        match self {
            Mark::Host(_) => true,
            Mark::Cuda(e) => e.is_complete(),
        }
    }

    /// Seconds from `earlier` to this mark, negative when this one came first (marks of two
    /// CUDA streams). Waits for both marks on CUDA.
    pub(crate) fn secs_since(&self, earlier: &Mark) -> Result<f64> {
        match (earlier, self) {
            (Mark::Host(a), Mark::Host(b)) => Ok(if b >= a {
                b.duration_since(*a).as_secs_f64()
            } else {
                -a.duration_since(*b).as_secs_f64()
            }),
            (Mark::Cuda(a), Mark::Cuda(b)) => a
                .elapsed_ms(b)
                .map(|ms| f64::from(ms) / 1e3)
                .map_err(|e| Error::cuda("cuEventElapsedTime", e)),
            _ => Err(Error::InvalidArgument(
                "timing marks of a host queue and a CUDA stream compared (internal error: \
                 please report)"
                    .into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn host_marks_measure_either_way_and_refuse_cuda_ones_only() {
        let a = Instant::now();
        let b = a + Duration::from_millis(5);
        let (ma, mb) = (Mark::Host(a), Mark::Host(b));
        assert!((mb.secs_since(&ma).unwrap() - 0.005).abs() < 1e-12);
        assert!((ma.secs_since(&mb).unwrap() + 0.005).abs() < 1e-12);
        assert!(Mark::now().secs_since(&ma).unwrap() >= 0.0);
        assert!(ma.is_complete());
    }
}
