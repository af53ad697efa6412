//! Where new buffers are made: [`BufferPrototype`], the process-wide default, and pluggable allocators.

use super::Buffer;
use crate::device::Stream;
use crate::errors::{Error, Result};
use crate::memory::{Init, Region};
use crate::place::Device;
use crate::place::Memory;
use std::sync::{Arc, RwLock};

/// A source of memory a user can plug into a prototype (a pool, another library's allocator).
///
/// `allocate` must return a buffer of exactly `len` bytes in `memory`; wrap foreign memory
/// with [`Buffer::from_host_owner`] or [`Buffer::from_device_ptr`] so that dropping the last
/// view hands the block back.
///
/// ```
/// use zarrbuf::{Buffer, BufferPrototype, Memory, Result};
/// use zarrbuf::alloc::Allocator;
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// /// Counts allocations and otherwise uses plain host memory.
/// struct Counting(AtomicUsize);
/// impl Allocator for Counting {
///     fn allocate(&self, len: usize, memory: Memory) -> Result<Buffer> {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         Buffer::empty(len, &BufferPrototype::for_memory(memory))
///     }
/// }
/// let counting = Arc::new(Counting(AtomicUsize::new(0)));
/// let proto = BufferPrototype::cpu().with_allocator(counting.clone());
/// let b = Buffer::zeros(16, &proto)?;
/// assert_eq!(b.len(), 16);
/// assert_eq!(counting.0.load(Ordering::Relaxed), 1);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub trait Allocator: Send + Sync {
    /// Returns `len` bytes in `memory` (any contents: [`Buffer::empty`] clears them).
    fn allocate(&self, len: usize, memory: Memory) -> Result<Buffer>;
}

/// Says where new buffers are made: host, pinned host, or a CUDA device (optionally on a
/// stream, optionally from a user allocator). Passed per call, like zarr-python's prototypes.
///
/// ```
/// use zarrbuf::{BufferPrototype, Device, Memory};
/// let p = BufferPrototype::cpu();
/// assert_eq!(p.memory(), Memory::Host);
/// assert_eq!(BufferPrototype::cuda(1).device(), Device::Cuda(1));
/// assert_eq!(BufferPrototype::pinned(0).device(), Device::Cpu);
/// ```
#[derive(Clone)]
pub struct BufferPrototype {
    memory: Memory,
    stream: Option<Stream>,
    allocator: Option<Arc<dyn Allocator>>,
}

impl BufferPrototype {
    /// Ordinary host memory (large blocks advised for huge pages).
    pub fn cpu() -> Self {
        Self::for_memory(Memory::Host)
    }

    /// Page-locked host memory registered with CUDA device `ordinal`.
    pub fn pinned(ordinal: usize) -> Self {
        Self::for_memory(Memory::Pinned(ordinal))
    }

    /// Memory on CUDA device `ordinal`.
    pub fn cuda(ordinal: usize) -> Self {
        Self::for_memory(Memory::Cuda(ordinal))
    }

    /// A prototype for a given kind of memory.
    ///
    /// ```
    /// let p = zarrbuf::BufferPrototype::for_memory(zarrbuf::Memory::Pinned(0));
    /// assert_eq!(p.memory(), zarrbuf::Memory::Pinned(0));
    /// ```
    pub fn for_memory(memory: Memory) -> Self {
        BufferPrototype {
            memory,
            stream: None,
            allocator: None,
        }
    }

    /// The natural prototype of a device: host memory for the CPU, device memory for CUDA.
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, Device, Memory};
    /// assert_eq!(BufferPrototype::for_device(Device::Cuda(0)).memory(), Memory::Cuda(0));
    /// ```
    pub fn for_device(device: Device) -> Self {
        match device {
            Device::Cpu => Self::cpu(),
            Device::Cuda(n) => Self::cuda(n),
        }
    }

    /// Runs copies into buffers made by this prototype on `stream`.
    ///
    /// ```no_run
    /// let s = zarrbuf::cuda::Stream::new(zarrbuf::Device::Cuda(0))?;
    /// let p = zarrbuf::BufferPrototype::cuda(0).with_stream(s);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn with_stream(mut self, stream: Stream) -> Self {
        self.stream = Some(stream);
        self
    }

    /// Takes new memory from `allocator` instead of zarrbuf's own.
    pub fn with_allocator(mut self, allocator: Arc<dyn Allocator>) -> Self {
        self.allocator = Some(allocator);
        self
    }

    /// The memory new buffers live in.
    pub fn memory(&self) -> Memory {
        self.memory
    }

    /// The device that computes on new buffers (the CPU for host and pinned memory).
    pub fn device(&self) -> Device {
        self.memory.device()
    }

    /// The stream given with [`with_stream`](Self::with_stream), if any.
    pub fn stream(&self) -> Option<&Stream> {
        self.stream.as_ref()
    }

    /// True when memory `m` already is what this prototype makes (no copy needed).
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, Memory};
    /// assert!(BufferPrototype::cpu().is_satisfied_by(Memory::Pinned(0)));
    /// assert!(!BufferPrototype::pinned(0).is_satisfied_by(Memory::Host));
    /// assert!(!BufferPrototype::cuda(0).is_satisfied_by(Memory::Cuda(1)));
    /// ```
    pub fn is_satisfied_by(&self, m: Memory) -> bool {
        match self.memory {
            Memory::Host => m.is_host_accessible(),
            want => want == m,
        }
    }

    /// Allocates `len` zero bytes the way this prototype says, ready for the host and any
    /// stream (the stream-ordered allocation and clearing are waited for).
    pub(crate) fn allocate(&self, len: usize) -> Result<Buffer> {
        let mut b = if self.allocator.is_some() {
            self.allocate_unwritten(len)?
        } else {
            self.allocate_raw(len, Init::Zeroed)?
        };
        if self.allocator.is_some() {
            b.fill_bytes(0)?;
        }
        b.region()?.settle()?;
        Ok(b)
    }

    /// Allocates `len` bytes that may hold a recycled block's old bytes (see `Init::Unwritten`
    /// for the invariant its callers keep).
    pub(crate) fn allocate_unwritten(&self, len: usize) -> Result<Buffer> {
        self.allocate_raw(len, Init::Unwritten)
    }

    fn allocate_raw(&self, len: usize, init: Init) -> Result<Buffer> {
        if let Some(a) = &self.allocator {
            let b = a.allocate(len, self.memory)?;
            if b.len() != len || b.memory() != self.memory {
                return Err(Error::InvalidArgument(format!(
                    "the prototype's allocator returned {} bytes of {} for a request of {len} bytes of {}",
                    b.len(),
                    b.memory(),
                    self.memory
                )));
            }
            return Ok(b.with_origin(Arc::new(a.clone())));
        }
        match self.memory {
            Memory::Host => Region::alloc_host(len, init),
            Memory::Pinned(n) => Region::alloc_pinned(n, len, init),
            Memory::Cuda(n) => Region::alloc_cuda(n, len, init),
        }
        .map(Buffer::from_region)
    }
}

impl std::fmt::Debug for BufferPrototype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPrototype")
            .field("memory", &self.memory)
            .field("stream", &self.stream)
            .field("allocator", &self.allocator.as_ref().map(|_| "custom"))
            .finish()
    }
}

static DEFAULT: RwLock<Option<BufferPrototype>> = RwLock::new(None);

/// Sets the process-wide default prototype (what `ZARRBUF_DEVICE` sets at start-up).
///
/// ```
/// use zarrbuf::{BufferPrototype, Memory};
/// use zarrbuf::alloc::{default_prototype, set_default_prototype};
/// set_default_prototype(BufferPrototype::cpu());
/// assert_eq!(default_prototype()?.memory(), Memory::Host);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn set_default_prototype(proto: BufferPrototype) {
    *DEFAULT.write().unwrap_or_else(|p| p.into_inner()) = Some(proto);
}

/// The process-wide default prototype: the one set in code, else the device named by the
/// `ZARRBUF_DEVICE` environment variable (`cpu`, `cuda`, `cuda:N`), else the CPU.
///
/// # Errors
/// `InvalidArgument` when `ZARRBUF_DEVICE` holds something other than a device name. A CUDA
/// device that is absent is reported at the first allocation (`DeviceUnavailable`).
///
/// ```
/// let p = zarrbuf::alloc::default_prototype()?;
/// println!("new buffers go to {}", p.memory());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn default_prototype() -> Result<BufferPrototype> {
    if let Some(p) = DEFAULT.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return Ok(p.clone());
    }
    match std::env::var("ZARRBUF_DEVICE") {
        Ok(v) if !v.trim().is_empty() => {
            let device: Device = v.parse().map_err(|_| {
                Error::InvalidArgument(format!(
                    "ZARRBUF_DEVICE={v:?} is not a device; use cpu, cuda or cuda:N"
                ))
            })?;
            Ok(BufferPrototype::for_device(device))
        }
        _ => Ok(BufferPrototype::cpu()),
    }
}

/// The ways to make a [`Buffer`] that need a prototype: new memory, and copies into it.
impl Buffer {
    /// `len` bytes made by `proto` (zarr-python's `Buffer.empty`). Unlike zarr-python's, the
    /// bytes are never another allocation's: they are zero (fresh pages from the OS are zero
    /// already, and a block recycled from zarrbuf's cache or a prototype's allocator is
    /// cleared), so `empty` and [`zeros`](Self::zeros) hand out the same thing.
    ///
    /// ```
    /// let b = zarrbuf::Buffer::empty(1024, &zarrbuf::BufferPrototype::cpu())?;
    /// assert_eq!(b.len(), 1024);
    /// assert!(b.to_vec()?.iter().all(|&x| x == 0));
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn empty(len: usize, proto: &BufferPrototype) -> Result<Self> {
        proto.allocate(len)
    }

    /// `len` bytes that will live where `proto` says, with no memory behind them yet (lazy
    /// allocation, as morok's `Buffer`): describing a buffer is free, and memory is made
    /// (zeroed, by `proto`, with its allocator) by the first operation that needs it.
    ///
    /// - **Allocate on first use** — everything that writes: `copy_from`, `fill_bytes`,
    ///   `with_host_bytes_mut`, reading a zarr array into it (`read_into`), `as_ndarray_mut`,
    ///   and [`ensure_allocated`](Self::ensure_allocated), which allocates deliberately.
    /// - **`NotAllocated` error** — everything that only reads: `as_host_bytes`, `to_vec`,
    ///   `to_bytes`, `content_eq`, `as_ndarray`, copies *from* it, writing it to a zarr
    ///   array, DLPack export. Nothing has written the bytes yet, so reading them would hand
    ///   out zeros nobody wrote and hide a missing write; call `ensure_allocated` first when
    ///   zeros are what you want.
    /// - **No memory needed** — `len`, `memory`, `device`, slicing (views share the lazy
    ///   storage, its [`storage_id`](Self::storage_id), and see the allocation once it
    ///   happens), `sync` and `close` (no-ops). [`host_ptr`](Self::host_ptr) and
    ///   [`device_addr`](Self::device_addr) are `None` until memory is allocated.
    ///
    /// ```
    /// use zarrbuf::{Buffer, BufferPrototype, Error};
    /// let lazy = Buffer::lazy(8, &BufferPrototype::cpu());
    /// let tail = lazy.slice(4..);
    /// assert!(matches!(lazy.to_vec(), Err(Error::NotAllocated(_))));
    /// tail.clone().fill_bytes(9)?; // the first write allocates, for every view
    /// assert!(lazy.is_allocated());
    /// assert_eq!(lazy.to_vec()?, vec![0, 0, 0, 0, 9, 9, 9, 9]);
    /// assert_eq!(tail.storage_id(), lazy.storage_id());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn lazy(len: usize, proto: &BufferPrototype) -> Buffer {
        let maker = proto.clone();
        let buffer = Buffer::from_lazy(
            len,
            proto.memory(),
            Box::new(move || maker.allocate(len)?.region().cloned()),
        );
        match &proto.allocator {
            Some(a) => buffer.with_origin(Arc::new(a.clone())),
            None => buffer,
        }
    }

    /// `len` bytes made by `proto` that may hold a recycled block's old bytes.
    ///
    /// Only for zarrbuf's own writers, under the invariant that every byte is written before
    /// the buffer reaches safe code (a failed write drops the buffer instead of returning it).
    pub(crate) fn empty_unwritten(len: usize, proto: &BufferPrototype) -> Result<Self> {
        proto.allocate_unwritten(len)
    }

    /// `len` zero bytes made by `proto`.
    ///
    /// ```
    /// let b = zarrbuf::Buffer::zeros(8, &zarrbuf::BufferPrototype::cpu())?;
    /// assert_eq!(b.to_bytes()?.as_ref(), &[0u8; 8]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn zeros(len: usize, proto: &BufferPrototype) -> Result<Self> {
        proto.allocate(len)
    }

    /// Copies host bytes into a new buffer made by `proto`.
    ///
    /// ```
    /// let b = zarrbuf::Buffer::from_slice(&[1, 2, 3], &zarrbuf::BufferPrototype::cpu())?;
    /// assert_eq!(b.to_vec()?, vec![1, 2, 3]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_slice(data: &[u8], proto: &BufferPrototype) -> Result<Self> {
        let src = Self::from_vec(data.to_vec());
        Self::from_buffer(&src, proto)
    }

    /// Copies this buffer into new memory made by `proto`.
    ///
    /// ```
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let a = Buffer::from_vec(vec![1u8, 2]);
    /// let b = a.copy_to_new(&BufferPrototype::cpu())?;
    /// assert_ne!(a.storage_id(), b.storage_id());
    /// assert!(a.content_eq(&b)?);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn copy_to_new(&self, proto: &BufferPrototype) -> Result<Buffer> {
        // Every byte is written by the copy below before `out` is returned.
        let mut out = Buffer::empty_unwritten(self.len(), proto)?;
        match proto.stream() {
            Some(s) => {
                out.copy_from_on(self, s)?;
                s.synchronize()?;
            }
            None => out.copy_from(self)?,
        }
        Ok(out)
    }

    /// Zero-copy promotion: `b` itself (same storage) when its memory already satisfies
    /// `proto`, else a copy made by `proto`.
    ///
    /// ```
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let b = Buffer::from_vec(vec![1u8]);
    /// assert_eq!(Buffer::from_buffer(&b, &BufferPrototype::cpu())?.storage_id(), b.storage_id());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_buffer(b: &Buffer, proto: &BufferPrototype) -> Result<Buffer> {
        if proto.is_satisfied_by(b.memory()) {
            Ok(b.clone())
        } else {
            b.copy_to_new(proto)
        }
    }

    /// Concatenates `parts` into one new buffer made by `proto`.
    ///
    /// ```
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let ab = Buffer::concat(&[Buffer::from_vec(vec![1]), Buffer::from_vec(vec![2, 3])], &BufferPrototype::cpu())?;
    /// assert_eq!(ab.to_vec()?, vec![1, 2, 3]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn concat(parts: &[Buffer], proto: &BufferPrototype) -> Result<Buffer> {
        let total = parts
            .iter()
            .try_fold(0usize, |acc, p| acc.checked_add(p.len()))
            .ok_or_else(|| Error::InvalidSize("the concatenated length overflows usize".into()))?;
        // The parts cover every byte; a failed copy drops `out`.
        let out = Buffer::empty_unwritten(total, proto)?;
        let mut at = 0;
        for p in parts {
            out.try_slice(at..at + p.len())?.copy_from_inner(p)?;
            at += p.len();
        }
        Ok(out)
    }

    /// This buffer followed by `others`, in this buffer's kind of memory (zarr-python's `+`).
    ///
    /// ```
    /// let a = zarrbuf::Buffer::from_vec(vec![1u8]);
    /// let ab = a.combine(&[zarrbuf::Buffer::from_vec(vec![2u8])])?;
    /// assert_eq!(ab.to_vec()?, vec![1, 2]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn combine(&self, others: &[Buffer]) -> Result<Buffer> {
        let mut parts = Vec::with_capacity(others.len() + 1);
        parts.push(self.clone());
        parts.extend(others.iter().cloned());
        Buffer::concat(&parts, &BufferPrototype::for_memory(self.memory()))
    }
}
