//! Descriptor memory for batched strided copies on CUDA: each batch's item descriptors are
//! written into pinned host memory and copied on the batch's stream into device memory,
//! which the kernel reads. Both must stay untouched until that work is done, so a pair is
//! reused only once the fences its last batch left on it have passed; until then later
//! batches take another pair (or a new one), never blocking.

use crate::errors::Result;
use crate::memory::{Init, Region};
use std::sync::Mutex;

/// Host staging and device memory for one batch's descriptors.
pub(crate) struct CopyDesc {
    pub(crate) host: Region,
    pub(crate) device: Region,
}

impl CopyDesc {
    /// True when no work recorded on either half is still in flight.
    fn is_idle(&self) -> bool {
        self.host.storage().completion().is_idle() && self.device.storage().completion().is_idle()
    }
}

/// Descriptor pairs of one CUDA device, handed out to one batch at a time.
pub(crate) struct CopyDescPool {
    ordinal: usize,
    pairs: Mutex<Vec<CopyDesc>>,
}

/// The smallest pair allocated (fits 150 items of `zb_copy_batch`).
const MIN_BYTES: usize = 64 << 10;

/// Pairs kept for reuse at most; more in flight at once are freed after their use.
const KEEP: usize = 16;

impl CopyDescPool {
    pub(crate) fn new(ordinal: usize) -> Self {
        CopyDescPool {
            ordinal,
            pairs: Mutex::new(Vec::new()),
        }
    }

    /// A pair of at least `bytes` bytes that no queued work still reads: an idle one of the
    /// pool, or a new one.
    pub(crate) fn take(&self, bytes: usize) -> Result<CopyDesc> {
        {
            let mut pairs = self.pairs.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = pairs
                .iter()
                .position(|p| p.host.len() >= bytes && p.is_idle())
            {
                return Ok(pairs.swap_remove(i));
            }
        }
        let len = bytes.max(MIN_BYTES).next_power_of_two();
        // The kernel reads only the descriptors copied in before it, never the rest of the
        // device half; the host half is handed to safe code, so it starts zeroed.
        let device = Region::alloc_cuda(self.ordinal, len, Init::Unwritten)?;
        device.settle()?;
        Ok(CopyDesc {
            host: Region::alloc_pinned(self.ordinal, len, Init::Zeroed)?,
            device,
        })
    }

    /// Returns a pair after its use (its fences recorded on it).
    pub(crate) fn give(&self, pair: CopyDesc) {
        let mut pairs = self.pairs.lock().unwrap_or_else(|p| p.into_inner());
        if pairs.len() < KEEP {
            pairs.push(pair);
        }
    }
}
