//! [`Region`]: a byte range of one shared [`Storage`], the handle device operations take.
//!
//! `crate::Buffer` is a `Region` plus a handle id and the public API; the device layer works
//! on `Region`s so that it sits below the buffer types instead of beside them.

use super::init::Init;
use super::{CudaAlloc, HostAlloc, PinnedAlloc, ReadGuard, Storage, StorageKind, WriteGuard};
use crate::errors::{Error, Result};
use crate::place::Memory;
use std::sync::Arc;

/// `len` bytes at `offset` of one allocation. Cloning shares the allocation.
#[derive(Clone)]
pub(crate) struct Region {
    storage: Arc<Storage>,
    offset: usize,
    len: usize,
}

/// Guards held while a host operation reads one region and writes another.
pub(crate) struct PairGuard<'a> {
    _read: Option<ReadGuard<'a>>,
    _write: WriteGuard<'a>,
}

impl Region {
    /// The whole of a new storage.
    pub(crate) fn new(kind: StorageKind) -> Self {
        let storage = Arc::new(Storage::new(kind));
        let len = storage.len();
        Region {
            storage,
            offset: 0,
            len,
        }
    }

    /// `len` bytes of host memory holding what `init` says.
    pub(crate) fn alloc_host(len: usize, init: Init) -> Result<Self> {
        let alloc = HostAlloc::new(len, init)?;
        Ok(Self::new(StorageKind::Host(alloc)))
    }

    /// `len` bytes of pinned host memory registered with CUDA device `ordinal`.
    pub(crate) fn alloc_pinned(ordinal: usize, len: usize, init: Init) -> Result<Self> {
        let alloc = PinnedAlloc::new(ordinal, len, init)?;
        Ok(Self::new(StorageKind::Pinned(alloc)))
    }

    /// `len` bytes of memory on CUDA device `ordinal`, usable in stream order once its
    /// allocation fence has passed (every device operation orders itself after it).
    pub(crate) fn alloc_cuda(ordinal: usize, len: usize, init: Init) -> Result<Self> {
        let (alloc, fence) = CudaAlloc::new(ordinal, len, init)?;
        let storage = Arc::new(Storage::with_fence(StorageKind::Cuda(alloc), fence));
        Ok(Region {
            len: storage.len(),
            storage,
            offset: 0,
        })
    }

    /// `len` bytes of memory on CUDA device `ordinal` from `cuMemAlloc`, never from a memory
    /// pool, so that CUDA IPC can export it; usable at once (no allocation fence).
    pub(crate) fn alloc_cuda_unpooled(ordinal: usize, len: usize, init: Init) -> Result<Self> {
        let alloc = CudaAlloc::new_unpooled(ordinal, len, init)?;
        Ok(Self::new(StorageKind::Cuda(alloc)))
    }

    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    pub(crate) fn memory(&self) -> Memory {
        self.storage.memory()
    }

    /// Bytes `start..end` of this region (the caller checked `start <= end <= len`).
    pub(crate) fn sub(&self, start: usize, end: usize) -> Region {
        debug_assert!(start <= end && end <= self.len);
        Region {
            storage: self.storage.clone(),
            offset: self.offset + start,
            len: end - start,
        }
    }

    /// Blocks the host until the device work in flight on this memory (its completion
    /// fences: the allocation, asynchronous copies) is done; afterwards any stream or the
    /// host may use it.
    pub(crate) fn settle(&self) -> Result<()> {
        self.storage.completion().wait_all()
    }

    /// Host address of the first byte, `None` for device memory.
    pub(crate) fn host_ptr(&self) -> Option<*mut u8> {
        self.storage.host_ptr().map(|p| p.wrapping_add(self.offset))
    }

    /// Device address of the first byte (device memory, or pinned memory through unified
    /// addressing), `None` for pageable host memory.
    pub(crate) fn device_addr(&self) -> Option<u64> {
        self.storage.device_ptr().map(|p| p + self.offset as u64)
    }

    /// Shared host access to the bytes, with the guard that keeps them valid.
    pub(crate) fn host_bytes(&self) -> Result<(ReadGuard<'_>, &[u8])> {
        if !self.memory().is_host_accessible() {
            return Err(Error::NotHostAccessible(format!(
                "host read of {} bytes of {}",
                self.len,
                self.memory()
            )));
        }
        self.storage.host_bytes(self.offset, self.len)
    }

    /// Runs `f` with exclusive host access to the bytes.
    pub(crate) fn with_host_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> Result<R>) -> Result<R> {
        if !self.memory().is_host_accessible() {
            return Err(Error::NotHostAccessible(format!(
                "host write to {} bytes of {}",
                self.len,
                self.memory()
            )));
        }
        self.storage.with_host_bytes_mut(self.offset, self.len, f)
    }

    /// Guards for reading `self` and writing `dst` (one write guard when they share storage).
    pub(crate) fn lock_pair<'a>(&'a self, dst: &'a Region) -> Result<PairGuard<'a>> {
        let write = dst.storage.write()?;
        let read = if Arc::ptr_eq(&self.storage, &dst.storage) {
            None
        } else {
            Some(self.storage.read()?)
        };
        Ok(PairGuard {
            _read: read,
            _write: write,
        })
    }

    /// A typed host ndarray view; `offset` is relative to this region's first byte.
    pub(crate) fn ndarray_view<T: crate::data_types::Element>(
        &self,
        offset: usize,
        shape: &[usize],
        elem_strides: &[usize],
    ) -> Result<(ReadGuard<'_>, ndarray::ArrayViewD<'_, T>)> {
        self.storage
            .ndarray_view::<T>(self.offset + offset, shape, elem_strides)
    }

    /// A typed, mutable ndarray view; `offset` is relative to this region's first byte.
    pub(crate) fn ndarray_view_mut<T: crate::data_types::Element>(
        &self,
        offset: usize,
        shape: &[usize],
        elem_strides: &[usize],
    ) -> Result<(WriteGuard<'_>, ndarray::ArrayViewMutD<'_, T>)> {
        self.storage
            .ndarray_view_mut::<T>(self.offset + offset, shape, elem_strides)
    }

    /// The `Vec` behind this region when it wraps one and no other handle shares it.
    pub(crate) fn into_vec(self) -> Option<Vec<u8>> {
        Arc::try_unwrap(self.storage)
            .ok()
            .and_then(Storage::into_vec)
    }
}
