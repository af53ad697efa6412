//! [`Storage`]: one allocation (or one wrapped foreign region), its identity and its host
//! borrow state. Handles ([`super::Region`], and above it `Buffer`) hold it behind an `Arc`.

use super::borrow::BorrowFlag;
use super::completion::{Completion, Fence};
use super::{CudaAlloc, ForeignCuda, ForeignHost, HostAlloc, PinnedAlloc, ReadGuard, WriteGuard};
use crate::errors::{Error, Result};
use crate::place::Memory;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};

/// The owner of one region of memory.
pub(crate) enum StorageKind {
    Host(HostAlloc),
    Pinned(PinnedAlloc),
    Cuda(CudaAlloc),
    ForeignHost(ForeignHost),
    ForeignCuda(ForeignCuda),
}

/// One allocation plus its identity, host borrow state and the device work in flight on it.
///
/// Host borrows wait for that work first; dropping the storage releases the memory only
/// after it (stream-ordered for device memory, a host wait otherwise), and leaks the
/// memory rather than free it while the device may still use it when a wait fails.
pub(crate) struct Storage {
    id: u64,
    /// Dropped by hand in `Drop`, after the completion fences.
    kind: ManuallyDrop<StorageKind>,
    borrow: BorrowFlag,
    completion: Completion,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh process-unique id (storages and buffer handles share the counter).
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

impl Storage {
    pub(crate) fn new(kind: StorageKind) -> Self {
        Storage {
            id: next_id(),
            kind: ManuallyDrop::new(kind),
            borrow: BorrowFlag::default(),
            completion: Completion::default(),
        }
    }

    /// A new storage whose memory is usable once `fence` has passed (stream-ordered allocation).
    pub(crate) fn with_fence(kind: StorageKind, fence: Option<Fence>) -> Self {
        let s = Self::new(kind);
        if let Some(f) = fence {
            s.completion.add(f);
        }
        s
    }

    /// The device work in flight on this storage.
    pub(crate) fn completion(&self) -> &Completion {
        &self.completion
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn len(&self) -> usize {
        match &*self.kind {
            StorageKind::Host(a) => a.len(),
            StorageKind::Pinned(a) => a.len(),
            StorageKind::Cuda(a) => a.len(),
            StorageKind::ForeignHost(a) => a.len(),
            StorageKind::ForeignCuda(a) => a.len(),
        }
    }

    pub(crate) fn memory(&self) -> Memory {
        match &*self.kind {
            StorageKind::Host(_) | StorageKind::ForeignHost(_) => Memory::Host,
            StorageKind::Pinned(a) => Memory::Pinned(a.ordinal()),
            StorageKind::Cuda(a) => Memory::Cuda(a.ordinal()),
            StorageKind::ForeignCuda(a) => Memory::Cuda(a.ordinal()),
        }
    }

    /// True for memory zarrbuf wraps but did not allocate (a `Vec`, `Bytes`, a raw pointer
    /// with its owner).
    pub(crate) fn is_foreign(&self) -> bool {
        matches!(
            &*self.kind,
            StorageKind::ForeignHost(_) | StorageKind::ForeignCuda(_)
        )
    }

    /// Base pointer for host access; `None` for device memory.
    pub(crate) fn host_ptr(&self) -> Option<*mut u8> {
        match &*self.kind {
            StorageKind::Host(a) => Some(a.ptr()),
            StorageKind::Pinned(a) => Some(a.ptr()),
            StorageKind::ForeignHost(a) => Some(a.ptr()),
            StorageKind::Cuda(_) | StorageKind::ForeignCuda(_) => None,
        }
    }

    /// Base address for device access (device memory, or pinned memory through UVA).
    pub(crate) fn device_ptr(&self) -> Option<u64> {
        match &*self.kind {
            StorageKind::Cuda(a) => Some(a.ptr()),
            StorageKind::ForeignCuda(a) => Some(a.ptr()),
            StorageKind::Pinned(a) => Some(a.ptr() as u64),
            StorageKind::Host(_) | StorageKind::ForeignHost(_) => None,
        }
    }

    /// Shared host access; fails while a writer is active. Waits for device work in flight
    /// on the memory (an asynchronous copy into pinned memory) before it returns.
    pub(crate) fn read(&self) -> Result<ReadGuard<'_>> {
        // The guard first: no new asynchronous copy can start writing once it is held.
        let guard = self.borrow.read()?;
        self.completion.wait_all()?;
        Ok(guard)
    }

    /// Exclusive access; fails while any reader or writer is active, or for read-only memory.
    pub(crate) fn write(&self) -> Result<WriteGuard<'_>> {
        if let StorageKind::ForeignHost(f) = &*self.kind
            && !f.writable()
        {
            return Err(Error::InvalidArgument(
                    "this buffer wraps immutable bytes::Bytes and cannot be written; copy it first (copy_to_new)".into(),
                ));
        }
        let guard = self.borrow.write()?;
        self.completion.wait_all()?;
        Ok(guard)
    }

    /// Shared host slice of `len` bytes at `offset`, with the guard that keeps it valid.
    pub(crate) fn host_bytes(&self, offset: usize, len: usize) -> Result<(ReadGuard<'_>, &[u8])> {
        let ptr = self.host_range(offset, len)?;
        let guard = self.read()?;
        // SAFETY: host_range checked that [ptr, ptr+len) lies inside this live allocation; the
        // read guard excludes writers through every handle while the slice is alive.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
        Ok((guard, bytes))
    }

    /// Runs `f` with exclusive access to `len` bytes at `offset`.
    pub(crate) fn with_host_bytes_mut<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> Result<R>,
    ) -> Result<R> {
        let ptr = self.host_range(offset, len)?;
        let _guard = self.write()?;
        // SAFETY: in bounds of the live allocation; the write guard excludes every other host
        // reader and writer of this storage while `f` runs.
        let bytes = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        f(bytes)
    }

    fn host_range(&self, offset: usize, len: usize) -> Result<*mut u8> {
        let base = self
            .host_ptr()
            .ok_or_else(|| Error::NotHostAccessible(format!("{len} bytes of {}", self.memory())))?;
        if offset.checked_add(len).is_none_or(|end| end > self.len()) {
            return Err(Error::OutOfBounds(format!(
                "bytes {offset}..{} of an allocation of {} bytes",
                offset.saturating_add(len),
                self.len()
            )));
        }
        Ok(base.wrapping_add(offset))
    }

    /// A typed ndarray view of host memory: `shape` elements with element `strides`, the first
    /// at byte `offset`. The caller has checked that every element lies inside the storage
    /// (NDBuffer's invariant); alignment and bounds are checked again here.
    pub(crate) fn ndarray_view<T: crate::data_types::Element>(
        &self,
        offset: usize,
        shape: &[usize],
        strides: &[usize],
    ) -> Result<(ReadGuard<'_>, ndarray::ArrayViewD<'_, T>)> {
        let size = std::mem::size_of::<T>();
        let count: usize = shape.iter().product();
        let extent = if count == 0 {
            0
        } else {
            shape
                .iter()
                .zip(strides)
                .map(|(&n, &s)| (n - 1) * s)
                .sum::<usize>()
                * size
                + size
        };
        if count == 0 {
            // No element is ever read: an empty view needs no (aligned) memory at all.
            let view = ndarray::ArrayViewD::from_shape(ndarray::IxDyn(shape), &[])
                .map_err(|e| Error::ShapeMismatch(e.to_string()))?;
            return Ok((self.read()?, view));
        }
        let ptr = self.host_range(offset, extent)?;
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::InvalidArgument(format!(
                "the data at byte offset {offset} is not aligned for {}; copy it (to_ndarray) instead",
                T::DTYPE
            )));
        }
        let guard = self.read()?;
        let dims = ndarray::ShapeBuilder::strides(ndarray::IxDyn(shape), ndarray::IxDyn(strides));
        // SAFETY: every element lies in [ptr, ptr+extent), checked above; ptr is aligned for T;
        // every bit pattern is a valid T for the sealed Element types except bool, whose bytes
        // zarrbuf only ever writes as 0 or 1; the read guard excludes writers while it lives.
        let view = unsafe { ndarray::ArrayViewD::from_shape_ptr(dims, ptr as *const T) };
        Ok((guard, view))
    }

    /// A typed, mutable ndarray view of host memory (see [`Self::ndarray_view`]), with the
    /// write guard that keeps every other host reader and writer out while it lives. Views
    /// whose elements overlap (a zero stride, strides shorter than the axes below them) are
    /// refused: two `&mut` to one element would be undefined behaviour.
    pub(crate) fn ndarray_view_mut<T: crate::data_types::Element>(
        &self,
        offset: usize,
        shape: &[usize],
        strides: &[usize],
    ) -> Result<(WriteGuard<'_>, ndarray::ArrayViewMutD<'_, T>)> {
        let size = std::mem::size_of::<T>();
        let count: usize = shape.iter().product();
        if count == 0 {
            let view = ndarray::ArrayViewMutD::from_shape(ndarray::IxDyn(shape), &mut [])
                .map_err(|e| Error::ShapeMismatch(e.to_string()))?;
            return Ok((self.write()?, view));
        }
        // No self-overlap: taking the axes by increasing stride, each steps past everything
        // the axes before it reach.
        let mut axes: Vec<(usize, usize)> = shape
            .iter()
            .zip(strides)
            .filter(|(n, _)| **n > 1)
            .map(|(&n, &s)| (s, n))
            .collect();
        axes.sort_unstable();
        let mut reach = 1usize;
        for &(s, n) in &axes {
            if s < reach {
                return Err(Error::InvalidArgument(format!(
                    "a mutable view needs elements that do not overlap, but strides {strides:?} \
                     (in elements) for shape {shape:?} make some coincide; copy the array first"
                )));
            }
            reach += s * (n - 1);
        }
        let extent = (reach - 1) * size + size;
        let ptr = self.host_range(offset, extent)?;
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::InvalidArgument(format!(
                "the data at byte offset {offset} is not aligned for {}; copy it first",
                T::DTYPE
            )));
        }
        let guard = self.write()?;
        let dims = ndarray::ShapeBuilder::strides(ndarray::IxDyn(shape), ndarray::IxDyn(strides));
        if T::DTYPE == crate::data_types::DataType::Bool {
            // A bool view over another byte would be undefined behaviour: look at the bytes
            // first (as bytes, under the guard already held).
            // SAFETY: as below, with u8 (size and alignment 1, every byte valid); this view
            // is dropped before the typed one is made.
            let bytes =
                unsafe { ndarray::ArrayViewD::from_shape_ptr(dims.clone(), ptr as *const u8) };
            if let Some(b) = bytes.iter().find(|&&b| b > 1) {
                return Err(Error::DataType(format!(
                    "a bool element holds the byte {b}, which is neither 0 nor 1"
                )));
            }
        }
        // SAFETY: every element lies in [ptr, ptr+extent) (bounds checked above) and no two
        // elements overlap (checked above); ptr is aligned for T; every bit pattern is a valid
        // T for the sealed Element types, and bool bytes were checked above; the write guard
        // excludes every other host access through any handle while the view lives.
        let view = unsafe { ndarray::ArrayViewMutD::from_shape_ptr(dims, ptr as *mut T) };
        Ok((guard, view))
    }

    /// The Vec this storage wraps, if it is one (used to hand host copies back without copying).
    pub(crate) fn into_vec(self) -> Option<Vec<u8>> {
        if !matches!(&*self.kind, StorageKind::ForeignHost(_)) || !self.completion.is_idle() {
            return None;
        }
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (ManuallyDrop), so `kind` is taken exactly once
        // and its other fields (plain data and an empty fence list) need no drop.
        let kind = unsafe { ManuallyDrop::take(&mut this.kind) };
        match kind {
            StorageKind::ForeignHost(f) => f.into_vec(),
            _ => None,
        }
    }

    /// True for device memory zarrbuf allocated from a stream-ordered memory pool
    /// (`cuMemAllocAsync`), which legacy CUDA IPC (`cuIpcGetMemHandle`) cannot export.
    pub(crate) fn is_pool_allocation(&self) -> bool {
        matches!(&*self.kind, StorageKind::Cuda(a) if a.is_stream_ordered())
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        let fences = self.completion.take();
        let released = match &mut *self.kind {
            // Device memory is freed in stream order after the fences: no host stall.
            StorageKind::Cuda(a) => a.release_after(&fences),
            // Pinned blocks are recycled or freed, and foreign owners dropped, only once the
            // host has seen every fence pass.
            _ => fences.iter().all(|f| f.wait().is_ok()),
        };
        if released {
            // SAFETY: `kind` is dropped exactly once, here; the storage is being dropped.
            unsafe { ManuallyDrop::drop(&mut self.kind) }
        }
        // Otherwise the device may still use the memory: it is leaked, never freed under it.
    }
}
