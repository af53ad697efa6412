//! Completion tracking: the device work still in flight on each allocation.
//!
//! An operation that zarrbuf enqueues on a CUDA stream and does not wait for (an
//! asynchronous copy, the stream-ordered allocation itself) leaves a [`Fence`] on every
//! allocation it touches. Before anything else uses the allocation, zarrbuf waits for those
//! fences: the host before it borrows the bytes, recycles or frees the block, or drops a
//! foreign owner; another stream before it runs work on the allocation (`cuStreamWaitEvent`,
//! no host stall). That is what makes handing a buffer to other code — another stream, a
//! dropped future — sound.
//!
//! Work on one stream completes in order, so an allocation keeps at most one fence per
//! stream: the newest.

use crate::errors::{Error, Result};
use cudarc::driver::{CudaEvent, CudaStream};
use std::sync::{Arc, Mutex, MutexGuard};

/// A point in one CUDA stream: the work enqueued on it before the fence.
#[derive(Clone)]
pub(crate) struct Fence {
    /// Keeps the stream alive while the fence exists (its handle is the fence's key).
    stream: Arc<CudaStream>,
    event: Arc<CudaEvent>,
}

impl Fence {
    /// Records a fence at the current end of `stream`.
    pub(crate) fn record(stream: &Arc<CudaStream>) -> Result<Self> {
        let event = stream
            .record_event(None)
            .map_err(|e| Error::cuda("cuEventRecord", e))?;
        Ok(Fence {
            stream: stream.clone(),
            event: Arc::new(event),
        })
    }

    fn same_stream(&self, other: &Fence) -> bool {
        self.stream.cu_stream() == other.stream.cu_stream()
    }

    fn is_on(&self, stream: &CudaStream) -> bool {
        self.stream.cu_stream() == stream.cu_stream()
    }

    /// Blocks the host until the work before the fence is done.
    pub(crate) fn wait(&self) -> Result<()> {
        self.event
            .synchronize()
            .map_err(|e| Error::cuda("cuEventSynchronize", e))
    }

    /// Makes `stream` wait (on the device) for the work before the fence.
    pub(crate) fn order_before(&self, stream: &CudaStream) -> Result<()> {
        if self.is_on(stream) {
            return Ok(());
        }
        stream
            .wait(&self.event)
            .map_err(|e| Error::cuda("cuStreamWaitEvent", e))
    }

    fn is_complete(&self) -> bool {
        self.event.is_complete()
    }
}

/// The fences of one allocation.
#[derive(Default)]
pub(crate) struct Completion {
    fences: Mutex<Vec<Fence>>,
}

impl Completion {
    fn lock(&self) -> MutexGuard<'_, Vec<Fence>> {
        // A panic while holding this lock cannot leave the list inconsistent (every update
        // is a single push, retain or take), so a poisoned lock is still usable.
        self.fences.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `fence`, replacing an older fence of the same stream and dropping completed ones.
    pub(crate) fn add(&self, fence: Fence) {
        let mut fences = self.lock();
        fences.retain(|f| !f.same_stream(&fence) && !f.is_complete());
        fences.push(fence);
    }

    /// True when no recorded work is outstanding (never blocks).
    pub(crate) fn is_idle(&self) -> bool {
        let mut fences = self.lock();
        fences.retain(|f| !f.is_complete());
        fences.is_empty()
    }

    /// Blocks the host until every fence has passed, then forgets them. On an error the
    /// fences that were not reached stay, so nobody treats the memory as idle.
    pub(crate) fn wait_all(&self) -> Result<()> {
        let pending: Vec<Fence> = self.lock().clone();
        for f in &pending {
            f.wait()?;
        }
        self.lock()
            .retain(|f| !pending.iter().any(|p| Arc::ptr_eq(&p.event, &f.event)));
        Ok(())
    }

    /// Makes `stream` wait for every fence recorded on other streams.
    pub(crate) fn order_before(&self, stream: &CudaStream) -> Result<()> {
        let pending: Vec<Fence> = self.lock().clone();
        pending.iter().try_for_each(|f| f.order_before(stream))
    }

    /// Takes every fence (for a release that orders itself after them).
    pub(crate) fn take(&self) -> Vec<Fence> {
        std::mem::take(&mut *self.lock())
    }
}
