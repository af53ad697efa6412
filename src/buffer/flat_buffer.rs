//! [`Buffer`]: a flat, contiguous, untyped block of bytes in any memory.

use super::lazy::{Allocate, LazyCell};
use crate::device::Stream;
use crate::device::{CudaOps, DeviceOps, Queue, ops_for, ops_for_pair, track};
use crate::errors::{Error, Result};
use crate::memory::{
    ForeignCuda, ForeignHost, ReadGuard, Region, StorageKind, WriteGuard, next_id,
};
use crate::place::{Device, Memory};
use bytes::Bytes;
use std::any::Any;
use std::ops::{Bound, Deref, RangeBounds};
use std::sync::{Arc, OnceLock};

/// A flat, untyped, byte-indexed block of memory: host, pinned host or CUDA device memory.
///
/// A `Buffer` is a cheap handle: `Arc<storage>` + byte offset + length. Clones and slices share
/// the storage ([`storage_id`](Self::storage_id) is equal) and see each other's writes, like
/// numpy views; each handle has its own [`id`](Self::id). Device memory never derefs to
/// `&[u8]`: copying it to the host is an explicit call ([`to_bytes`](Self::to_bytes)).
///
/// ```
/// use zarrbuf::{Buffer, BufferPrototype};
/// let b = Buffer::from_vec(vec![1u8, 2, 3, 4]);
/// let tail = b.slice(2..);
/// assert_eq!(&*tail.as_host_bytes()?, &[3, 4]);
/// assert_eq!(tail.storage_id(), b.storage_id());
/// assert_ne!(tail.id(), b.id());
/// // Already host memory: promotion to a CPU prototype is free.
/// let same = Buffer::from_buffer(&b, &BufferPrototype::cpu())?;
/// assert_eq!(same.storage_id(), b.storage_id());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub struct Buffer {
    id: u64,
    backing: Backing,
    /// Who made the memory, type-erased so that this layer does not name the prototype's
    /// `Allocator` (the prototype stores and reads it back; see `Buffer::memory_resource`).
    origin: Option<Origin>,
}

/// A handle's memory: a region of an allocation, or a range of a lazily allocated buffer.
enum Backing {
    Ready(Region),
    Lazy {
        cell: Arc<LazyCell>,
        offset: usize,
        len: usize,
        /// This handle's range of the allocation, once there is one.
        view: OnceLock<Region>,
    },
}

/// What made a buffer's memory (the prototype's allocator), kept without naming its type.
pub(crate) type Origin = Arc<dyn Any + Send + Sync>;

impl Clone for Backing {
    fn clone(&self) -> Self {
        match self {
            Backing::Ready(r) => Backing::Ready(r.clone()),
            Backing::Lazy {
                cell,
                offset,
                len,
                view,
            } => Backing::Lazy {
                cell: cell.clone(),
                offset: *offset,
                len: *len,
                view: view.clone(),
            },
        }
    }
}

impl Clone for Buffer {
    fn clone(&self) -> Self {
        Buffer {
            id: next_id(),
            backing: self.backing.clone(),
            origin: self.origin.clone(),
        }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Buffer({} bytes at +{} of storage {} in {}{})",
            self.len(),
            self.offset(),
            self.storage_id(),
            self.memory(),
            if self.is_allocated() {
                ""
            } else {
                ", not allocated yet"
            }
        )
    }
}

/// Shared host access to a buffer's bytes; writes through other handles fail while it lives.
///
/// ```
/// let b = zarrbuf::Buffer::from_vec(vec![7u8; 3]);
/// let bytes = b.as_host_bytes()?;
/// assert_eq!(bytes.len(), 3);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub struct HostBytes<'a> {
    _guard: ReadGuard<'a>,
    bytes: &'a [u8],
}

impl Deref for HostBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl AsRef<[u8]> for HostBytes<'_> {
    fn as_ref(&self) -> &[u8] {
        self.bytes
    }
}

fn resolve_range(range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e)),
        (s, e) => Err(Error::OutOfBounds(format!(
            "byte range {}..{} of a buffer of {len} bytes",
            s.map_or("overflow".into(), |v| v.to_string()),
            e.map_or("overflow".into(), |v| v.to_string()),
        ))),
    }
}

impl Buffer {
    /// A new handle on `region`.
    pub(crate) fn from_region(region: Region) -> Self {
        Buffer {
            id: next_id(),
            backing: Backing::Ready(region),
            origin: None,
        }
    }

    /// A buffer of `len` bytes in `memory` with no memory behind it yet: `allocate` makes it
    /// on first write (see [`crate::Buffer::lazy`]).
    pub(crate) fn from_lazy(len: usize, memory: Memory, allocate: Allocate) -> Self {
        Buffer {
            id: next_id(),
            backing: Backing::Lazy {
                cell: Arc::new(LazyCell::new(len, memory, allocate)),
                offset: 0,
                len,
                view: OnceLock::new(),
            },
            origin: None,
        }
    }

    /// Records what made this buffer's memory (see `Buffer::memory_resource`).
    pub(crate) fn with_origin(mut self, origin: Origin) -> Self {
        self.origin = Some(origin);
        self
    }

    pub(crate) fn origin(&self) -> Option<&Origin> {
        self.origin.as_ref()
    }

    /// True when the memory is foreign (wrapped, not allocated by zarrbuf); a lazy buffer
    /// that has no memory yet is not.
    pub(crate) fn is_foreign_memory(&self) -> bool {
        self.allocated_region()
            .is_some_and(|r| r.storage().is_foreign())
    }

    fn from_storage(kind: StorageKind) -> Self {
        Self::from_region(Region::new(kind))
    }

    /// The region of memory this handle views, for operations that write it: a lazy
    /// buffer is allocated (zeroed) here on first use.
    pub(crate) fn region(&self) -> Result<&Region> {
        match &self.backing {
            Backing::Ready(r) => Ok(r),
            Backing::Lazy {
                cell,
                offset,
                len,
                view,
            } => {
                if let Some(r) = view.get() {
                    return Ok(r);
                }
                let whole = cell.get_or_allocate()?;
                Ok(view.get_or_init(|| whole.sub(*offset, *offset + *len)))
            }
        }
    }

    /// The region of memory this handle views, for operations that only read it: a lazy
    /// buffer nothing has written yet is `NotAllocated` (its bytes were never written, and
    /// handing out zeros nobody wrote would hide a missing write).
    pub(crate) fn written_region(&self, what: &str) -> Result<&Region> {
        match &self.backing {
            Backing::Ready(r) => Ok(r),
            Backing::Lazy { cell, .. } if cell.allocated().is_some() => self.region(),
            Backing::Lazy { len, .. } => Err(Error::NotAllocated(format!(
                "{what} of {len} bytes of {}",
                self.memory()
            ))),
        }
    }

    /// The region, when memory is behind this handle (no allocation is made).
    fn allocated_region(&self) -> Option<&Region> {
        match &self.backing {
            Backing::Ready(r) => Some(r),
            Backing::Lazy { cell, .. } if cell.allocated().is_some() => self.region().ok(),
            Backing::Lazy { .. } => None,
        }
    }

    /// True when memory is behind this buffer: always, except for a [lazy](Self::lazy)
    /// buffer that nothing has written yet.
    ///
    /// ```
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// assert!(Buffer::from_vec(vec![1u8]).is_allocated());
    /// let lazy = Buffer::lazy(1 << 20, &BufferPrototype::cpu());
    /// assert!(!lazy.is_allocated());
    /// ```
    pub fn is_allocated(&self) -> bool {
        match &self.backing {
            Backing::Ready(_) => true,
            Backing::Lazy { cell, .. } => cell.allocated().is_some(),
        }
    }

    /// Allocates the memory of a [lazy](Self::lazy) buffer now (zero bytes, as
    /// [`Buffer::zeros`] makes them); a no-op when it has memory. Every view of the buffer
    /// sees the allocation.
    ///
    /// # Errors
    /// What the prototype's allocation reports: `OutOfMemory`, `DeviceUnavailable`, ….
    ///
    /// ```
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let lazy = Buffer::lazy(4, &BufferPrototype::cpu());
    /// let view = lazy.slice(2..);
    /// view.ensure_allocated()?;
    /// assert!(lazy.is_allocated());
    /// assert_eq!(lazy.to_vec()?, vec![0; 4]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn ensure_allocated(&self) -> Result<()> {
        self.region().map(|_| ())
    }

    /// A buffer of no bytes (host memory, no allocation).
    ///
    /// ```
    /// let b = zarrbuf::Buffer::create_zero_length();
    /// assert!(b.is_empty());
    /// assert_eq!(b.to_bytes()?.len(), 0);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn create_zero_length() -> Self {
        Self::from_vec(Vec::new())
    }

    /// Wraps `bytes::Bytes` without copying. The memory is read-only (a `Bytes` may be
    /// shared); writes through the buffer fail with `InvalidArgument`.
    ///
    /// ```
    /// let b = zarrbuf::Buffer::from_bytes(bytes::Bytes::from_static(b"abc"));
    /// assert_eq!(&*b.as_host_bytes()?, b"abc");
    /// assert!(b.clone().fill_bytes(0).is_err());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_bytes(bytes: Bytes) -> Self {
        Self::from_storage(StorageKind::ForeignHost(ForeignHost::from_bytes(bytes)))
    }

    /// Wraps a `Vec<u8>` without copying.
    ///
    /// ```
    /// let b = zarrbuf::Buffer::from_vec(vec![1u8, 2]);
    /// assert_eq!(b.len(), 2);
    /// ```
    pub fn from_vec(vec: Vec<u8>) -> Self {
        Self::from_storage(StorageKind::ForeignHost(ForeignHost::from_vec(vec)))
    }

    /// Takes a typed Vec without copying (its elements' bytes, native order).
    pub(crate) fn from_typed_vec<T: crate::data_types::Element>(vec: Vec<T>) -> Self {
        Self::from_storage(StorageKind::ForeignHost(ForeignHost::from_typed_vec(vec)))
    }

    /// Wraps host memory owned by `owner` (dropped with the last view).
    ///
    /// # Safety
    /// `[ptr, ptr+len)` must be valid for reads and writes while `owner` lives, and must not
    /// be written by anything but zarrbuf handles meanwhile.
    ///
    /// ```
    /// let v = vec![5u8; 4];
    /// let ptr = v.as_ptr() as *mut u8;
    /// // SAFETY: the Vec is the owner and keeps the block alive.
    /// let b = unsafe { zarrbuf::Buffer::from_host_owner(ptr, 4, Box::new(v)) };
    /// assert_eq!(b.to_vec()?, vec![5; 4]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub unsafe fn from_host_owner(
        ptr: *mut u8,
        len: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Self {
        // SAFETY: forwarded to the caller.
        let foreign = unsafe { ForeignHost::new(ptr, len, owner) };
        Self::from_storage(StorageKind::ForeignHost(foreign))
    }

    /// Wraps device memory of CUDA device `ordinal` owned by `owner` (cuda.core's `from_handle`).
    ///
    /// # Safety
    /// `[ptr, ptr+len)` must be device memory of that device, valid while `owner` lives.
    ///
    /// ```no_run
    /// # let (ptr, len) = (0u64, 0usize);
    /// // SAFETY: ptr is a live allocation of `len` bytes on cuda:0 kept alive by the owner.
    /// let b = unsafe { zarrbuf::Buffer::from_device_ptr(ptr, len, 0, Box::new(())) };
    /// ```
    pub unsafe fn from_device_ptr(
        ptr: u64,
        len: usize,
        ordinal: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Self {
        // SAFETY: forwarded to the caller.
        let foreign = unsafe { ForeignCuda::new(ptr, len, ordinal, owner) };
        Self::from_storage(StorageKind::ForeignCuda(foreign))
    }

    /// Number of bytes in this view.
    pub fn len(&self) -> usize {
        match &self.backing {
            Backing::Ready(r) => r.len(),
            Backing::Lazy { len, .. } => *len,
        }
    }

    /// True when the view has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size of the whole underlying allocation (≥ `len()` for slices).
    ///
    /// ```
    /// let b = zarrbuf::Buffer::from_vec(vec![0u8; 10]);
    /// assert_eq!(b.slice(2..4).total_size(), 10);
    /// ```
    pub fn total_size(&self) -> usize {
        match &self.backing {
            Backing::Ready(r) => r.storage().len(),
            Backing::Lazy { cell, .. } => cell.len(),
        }
    }

    /// Byte offset of this view in its allocation.
    pub fn offset(&self) -> usize {
        match &self.backing {
            Backing::Ready(r) => r.offset(),
            Backing::Lazy { offset, .. } => *offset,
        }
    }

    /// Id of this handle (unique per clone or slice).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Id of the underlying allocation, shared by all views of it.
    /// A [lazy](Self::lazy) buffer's id is fixed when it is described and stays the same
    /// once memory is allocated for it.
    pub fn storage_id(&self) -> u64 {
        match &self.backing {
            Backing::Ready(r) => r.storage().id(),
            Backing::Lazy { cell, .. } => cell.storage_id(),
        }
    }

    /// Where the memory lives.
    pub fn memory(&self) -> Memory {
        match &self.backing {
            Backing::Ready(r) => r.memory(),
            Backing::Lazy { cell, .. } => cell.memory(),
        }
    }

    /// The device that computes on this memory (CPU for host and pinned memory).
    pub fn device(&self) -> Device {
        self.memory().device()
    }

    /// The host can read and write these bytes.
    pub fn is_host_accessible(&self) -> bool {
        self.memory().is_host_accessible()
    }

    /// A CUDA device can read and write these bytes.
    pub fn is_device_accessible(&self) -> bool {
        self.memory().is_device_accessible()
    }

    /// A view of bytes `range` sharing this storage.
    ///
    /// # Panics
    /// When the range is outside the buffer; [`try_slice`](Self::try_slice) returns an error instead.
    ///
    /// ```
    /// let b = zarrbuf::Buffer::from_vec((0u8..10).collect());
    /// assert_eq!(b.slice(3..5).to_vec().unwrap(), vec![3, 4]);
    /// ```
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Buffer {
        match self.try_slice(range) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        }
    }

    /// A view of bytes `range`, or `OutOfBounds`.
    ///
    /// ```
    /// let b = zarrbuf::Buffer::from_vec(vec![0u8; 4]);
    /// assert!(b.try_slice(1..3).is_ok());
    /// assert!(b.try_slice(3..9).is_err());
    /// ```
    pub fn try_slice(&self, range: impl RangeBounds<usize>) -> Result<Buffer> {
        let (start, end) = resolve_range(range, self.len())?;
        let backing = match &self.backing {
            Backing::Ready(r) => Backing::Ready(r.sub(start, end)),
            Backing::Lazy { cell, offset, .. } => Backing::Lazy {
                cell: cell.clone(),
                offset: offset + start,
                len: end - start,
                view: OnceLock::new(),
            },
        };
        Ok(Buffer {
            id: next_id(),
            backing,
            origin: self.origin.clone(),
        })
    }

    /// Borrows the bytes on the host: `NotHostAccessible` for device memory (never a hidden
    /// copy), `Busy` while a write through another handle is in progress.
    ///
    /// ```
    /// let b = zarrbuf::Buffer::from_vec(vec![9u8, 8]);
    /// assert_eq!(b.as_host_bytes()?[1], 8);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn as_host_bytes(&self) -> Result<HostBytes<'_>> {
        if !self.is_host_accessible() {
            return Err(Error::NotHostAccessible(format!(
                "as_host_bytes on {} bytes of {}",
                self.len(),
                self.memory()
            )));
        }
        let (guard, bytes) = self.written_region("as_host_bytes")?.host_bytes()?;
        Ok(HostBytes {
            _guard: guard,
            bytes,
        })
    }

    /// Runs `f` with exclusive host access to the bytes.
    ///
    /// ```
    /// let mut b = zarrbuf::Buffer::from_vec(vec![0u8; 3]);
    /// b.with_host_bytes_mut(|bytes| { bytes[1] = 5; Ok(()) })?;
    /// assert_eq!(b.to_vec()?, vec![0, 5, 0]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn with_host_bytes_mut<R>(&mut self, f: impl FnOnce(&mut [u8]) -> Result<R>) -> Result<R> {
        self.with_host_mut(f)
    }

    pub(crate) fn with_host_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> Result<R>) -> Result<R> {
        self.region()?.with_host_mut(f)
    }

    /// A typed host ndarray view (see [`crate::NDBuffer::as_ndarray`]); offset relative to this handle.
    pub(crate) fn storage_view<T: crate::data_types::Element>(
        &self,
        offset: usize,
        shape: &[usize],
        elem_strides: &[usize],
    ) -> Result<(ReadGuard<'_>, ndarray::ArrayViewD<'_, T>)> {
        self.written_region("a host ndarray view")?
            .ndarray_view::<T>(offset, shape, elem_strides)
    }

    /// A typed, mutable host ndarray view (see [`crate::NDBuffer::as_ndarray_mut`]).
    pub(crate) fn storage_view_mut<T: crate::data_types::Element>(
        &self,
        offset: usize,
        shape: &[usize],
        elem_strides: &[usize],
    ) -> Result<(WriteGuard<'_>, ndarray::ArrayViewMutD<'_, T>)> {
        self.region()?
            .ndarray_view_mut::<T>(offset, shape, elem_strides)
    }

    /// Host address of the first byte, `None` for device memory. Dereferencing it is unsafe:
    /// the caller must respect the buffer's length and not race other handles.
    pub fn host_ptr(&self) -> Option<*mut u8> {
        self.allocated_region().and_then(Region::host_ptr)
    }

    /// Device address of the first byte (device memory, or pinned memory through unified
    /// addressing), `None` for pageable host memory. For passing to CUDA kernels.
    pub fn device_addr(&self) -> Option<u64> {
        self.allocated_region().and_then(Region::device_addr)
    }

    /// A host copy of the bytes (a device-to-host copy for device memory).
    ///
    /// ```
    /// let b = zarrbuf::Buffer::from_vec(vec![1u8, 2]);
    /// assert_eq!(b.to_bytes()?.as_ref(), &[1, 2]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_bytes(&self) -> Result<Bytes> {
        Ok(Bytes::from(self.to_vec()?))
    }

    /// A host copy of the bytes as a `Vec<u8>` (one copy, also from device memory).
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        if self.is_host_accessible() {
            return Ok(self.as_host_bytes()?.to_vec());
        }
        let host = Region::new(StorageKind::ForeignHost(ForeignHost::from_vec(vec![
            0u8;
            self.len()
        ])));
        Buffer::from_region(host.clone()).copy_from_inner(self)?;
        host.into_vec().ok_or_else(|| {
            Error::Busy("the host copy is still shared (internal error: please report)".into())
        })
    }

    /// Copies `src` (same length, any memory) into this buffer and waits for the copy.
    ///
    /// ```
    /// let mut dst = zarrbuf::Buffer::from_vec(vec![0u8; 3]);
    /// dst.copy_from(&zarrbuf::Buffer::from_vec(vec![4u8, 5, 6]))?;
    /// assert_eq!(dst.to_vec()?, vec![4, 5, 6]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn copy_from(&mut self, src: &Buffer) -> Result<()> {
        self.copy_from_inner(src)
    }

    pub(crate) fn copy_from_inner(&self, src: &Buffer) -> Result<()> {
        let ops = ops_for_pair(src.memory(), self.memory())?;
        let q = ops.default_queue();
        ops.copy(&q, src.written_region("a copy")?, self.region()?)?;
        ops.synchronize(&q)
    }

    /// Enqueues the copy of `src` into this buffer on `stream` without waiting.
    ///
    /// The copy starts after zarrbuf's work in flight on either buffer, and leaves a fence on
    /// both: the host waits for it before it borrows their bytes (`as_host_bytes`, `to_vec`,
    /// ndarray views), another stream's zarrbuf work is ordered after it, and the memory is
    /// recycled or freed only after it — dropping every handle right away is fine. To order
    /// your own work on another stream after the copy, use `stream` or synchronize it.
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype, Device};
    /// use zarrbuf::cuda::Stream;
    /// let s = Stream::new(Device::Cuda(0))?;
    /// let src = Buffer::from_vec(vec![1u8; 64]);
    /// let mut dst = Buffer::empty(64, &BufferPrototype::cuda(0))?;
    /// dst.copy_from_on(&src, &s)?;
    /// assert_eq!(dst.to_vec()?, vec![1u8; 64]); // waits for the copy
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn copy_from_on(&mut self, src: &Buffer, stream: &Stream) -> Result<()> {
        let ops = CudaOps::new(stream.device_ordinal())?;
        let q = Queue::Cuda(stream.inner.clone());
        let (from, to) = (src.written_region("a copy")?, self.region()?);
        ops.copy(&q, from, to)?;
        track(&q, &[from, to])
    }

    /// Releases this handle with stream-ordered semantics (cuda.core's `Buffer.close`): when
    /// it is the last handle of device memory, the memory goes back to the device's pool
    /// once the work enqueued on `stream` so far — and zarrbuf's own work in flight on it —
    /// is done, without blocking the host. Other handles keep the memory alive as usual.
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype, Device};
    /// use zarrbuf::cuda::Stream;
    /// let s = Stream::new(Device::Cuda(0))?;
    /// let b = Buffer::zeros(1 << 20, &BufferPrototype::cuda(0))?;
    /// // ... enqueue your own kernels that use `b` on `s` ...
    /// b.close(&s)?;
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` when `stream` belongs to another device than the memory.
    pub fn close(self, stream: &Stream) -> Result<()> {
        match self.memory() {
            Memory::Cuda(n) | Memory::Pinned(n) if n != stream.device_ordinal() => {
                Err(Error::InvalidArgument(format!(
                    "close on {}: the stream belongs to cuda:{}; pass a stream of cuda:{n}",
                    self.memory(),
                    stream.device_ordinal()
                )))
            }
            Memory::Cuda(_) | Memory::Pinned(_) => {
                // The release (stream-ordered free, or the host wait before a pinned block is
                // recycled) comes after this fence and every other one on the memory.
                match self.allocated_region() {
                    Some(r) => track(&Queue::Cuda(stream.inner.clone()), &[r]),
                    None => Ok(()),
                }
            }
            Memory::Host => Ok(()),
        }
    }

    /// Copies this buffer into `dst` (same length, any memory).
    pub fn copy_to(&self, dst: &mut Buffer) -> Result<()> {
        dst.copy_from(self)
    }

    /// Sets every byte to `value` (on the device for device memory).
    ///
    /// ```
    /// let mut b = zarrbuf::Buffer::from_vec(vec![0u8; 2]);
    /// b.fill_bytes(7)?;
    /// assert_eq!(b.to_vec()?, vec![7, 7]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn fill_bytes(&mut self, value: u8) -> Result<()> {
        let ops = ops_for(self.memory())?;
        let q = ops.default_queue();
        let shape = [self.len()];
        let strides = [1isize];
        ops.fill(
            &q,
            self.region()?,
            zarrbuf_codecs::Strided {
                offset: 0,
                strides: &strides,
            },
            &shape,
            &[value],
        )?;
        ops.synchronize(&q)
    }

    /// True when both buffers hold the same bytes (device memory is copied to the host to compare).
    pub fn content_eq(&self, other: &Buffer) -> Result<bool> {
        if self.len() != other.len() {
            return Ok(false);
        }
        Ok(self.to_vec()? == other.to_vec()?)
    }

    /// Waits for zarrbuf's work in flight on this buffer (asynchronous copies, the
    /// stream-ordered allocation) and for all queued work on its device (a no-op for host
    /// memory). Call it before passing [`device_addr`](Self::device_addr) to your own kernels
    /// on a stream zarrbuf does not know.
    ///
    /// ```
    /// zarrbuf::Buffer::from_vec(vec![1u8]).sync()?;
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn sync(&self) -> Result<()> {
        let Some(region) = self.allocated_region() else {
            return Ok(());
        };
        region.settle()?;
        match self.memory() {
            Memory::Cuda(n) | Memory::Pinned(n) => crate::driver::cuda_context(n)?
                .synchronize()
                .map_err(|e| Error::cuda("cuCtxSynchronize", e)),
            Memory::Host => Ok(()),
        }
    }
}
