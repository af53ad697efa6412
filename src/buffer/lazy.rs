//! Lazy allocation (morok's `Buffer`): a buffer described by its size and where it will live,
//! with memory behind it only from the first operation that writes it.
//!
//! A [`LazyCell`] is shared by every view of one lazily made buffer. It holds the storage id
//! the views report (fixed when the buffer is described, so it does not change when memory
//! arrives) and, once allocated, the region every view slices.

use crate::errors::{Error, Result};
use crate::memory::{Region, next_id};
use crate::place::Memory;
use std::sync::{Mutex, OnceLock};

/// Makes the memory of a lazy buffer: `len` zero bytes in the described memory. Called at
/// most once successfully; a failure (out of memory) leaves the cell unallocated, and the
/// next operation tries again.
pub(crate) type Allocate = Box<dyn Fn() -> Result<Region> + Send + Sync>;

/// The shared state of one lazily allocated buffer.
pub(crate) struct LazyCell {
    storage_id: u64,
    len: usize,
    memory: Memory,
    allocate: Allocate,
    /// Serialises allocation so two threads never both allocate.
    allocating: Mutex<()>,
    region: OnceLock<Region>,
}

impl LazyCell {
    pub(crate) fn new(len: usize, memory: Memory, allocate: Allocate) -> Self {
        LazyCell {
            storage_id: next_id(),
            len,
            memory,
            allocate,
            allocating: Mutex::new(()),
            region: OnceLock::new(),
        }
    }

    pub(crate) fn storage_id(&self) -> u64 {
        self.storage_id
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn memory(&self) -> Memory {
        self.memory
    }

    /// The whole allocation, when there is one.
    pub(crate) fn allocated(&self) -> Option<&Region> {
        self.region.get()
    }

    /// The whole allocation, made now if there is none yet.
    pub(crate) fn get_or_allocate(&self) -> Result<&Region> {
        if let Some(r) = self.region.get() {
            return Ok(r);
        }
        let _one_at_a_time = self.allocating.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = self.region.get() {
            return Ok(r);
        }
        let region = (self.allocate)()?;
        if region.len() != self.len || region.memory() != self.memory {
            return Err(Error::InvalidArgument(format!(
                "the lazy buffer's allocation returned {} bytes of {} for {} bytes of {} (a prototype's allocator broke its contract)",
                region.len(),
                region.memory(),
                self.len,
                self.memory
            )));
        }
        Ok(self.region.get_or_init(|| region))
    }
}
