//! Aligned host allocations, advised for transparent huge pages when large.
//!
//! Fresh 4 KiB pages are written at ~2.7 GB/s per core (one page fault each); huge pages
//! take 12+ GB/s, and whole-array reads are bound by that first write.

use super::cache::{self, BlockKind, Reusable};
use super::init::Init;
use crate::errors::{Error, Result};
use std::alloc::Layout;
use std::ptr::NonNull;

/// Smallest alignment of every host allocation: a cache line, enough for any element and SIMD.
pub(crate) const MIN_ALIGN: usize = 64;
/// Allocations at least this large are 2 MiB aligned and advised for huge pages.
pub(crate) const HUGE_PAGE_THRESHOLD: usize = 4 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// An owned, aligned host allocation.
pub(crate) struct HostAlloc {
    ptr: NonNull<u8>,
    len: usize,
    layout: Option<Layout>,
    /// Return the block to the cache on drop (false while it sits in the cache).
    recycle: bool,
}

// SAFETY: HostAlloc owns its memory exclusively; concurrent access is governed by the
// storage borrow flag, so sending or sharing the owner across threads is sound.
unsafe impl Send for HostAlloc {}
// SAFETY: see Send above.
unsafe impl Sync for HostAlloc {}

impl HostAlloc {
    /// Allocates `len` bytes (advised for huge pages when large), holding what `init` says:
    /// [`Init::Zeroed`] clears a recycled block (a fresh one comes zeroed from the OS for
    /// free); with [`Init::Unwritten`] a recycled block holds its last user's bytes (see
    /// there for who may ask for that).
    pub(crate) fn new(len: usize, init: Init) -> Result<Self> {
        if len == 0 {
            return Ok(HostAlloc {
                // A well-aligned dangling pointer: never dereferenced (len 0), never freed.
                ptr: NonNull::new(std::ptr::without_provenance_mut(MIN_ALIGN)).expect("non-null"),
                len: 0,
                layout: None,
                recycle: false,
            });
        }
        if let Some(block) = cache::take(BlockKind::Host, len)
            && let Ok(mut a) = block.into_any().downcast::<HostAlloc>()
        {
            a.recycle = true;
            if init == Init::Zeroed {
                // SAFETY: [ptr, ptr+len) lies in this live block (len <= its capacity),
                // which nothing else references while it is handed out.
                unsafe { std::ptr::write_bytes(a.ptr.as_ptr(), 0, a.len) };
            }
            return Ok(*a);
        }
        let large = len >= HUGE_PAGE_THRESHOLD;
        let align = if large { HUGE_PAGE } else { MIN_ALIGN };
        let layout = Layout::from_size_align(len, align).map_err(|_| {
            Error::InvalidSize(format!(
                "{len} bytes exceeds the largest host allocation this platform allows"
            ))
        })?;
        // SAFETY: layout has non-zero size (len > 0 checked above).
        let raw = unsafe {
            if init == Init::Zeroed {
                std::alloc::alloc_zeroed(layout)
            } else {
                std::alloc::alloc(layout)
            }
        };
        let ptr = NonNull::new(raw).ok_or_else(|| Error::OutOfMemory {
            device: crate::place::Device::Cpu,
            requested: len,
            detail: "the system allocator returned null".into(),
        })?;
        if large {
            advise_huge_pages(ptr.as_ptr(), len);
        }
        Ok(HostAlloc {
            ptr,
            len,
            layout: Some(layout),
            recycle: true,
        })
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

// Miri cannot run `madvise(MADV_HUGEPAGE)` (an FFI call it does not model); the advice is
// only a paging hint, so under Miri large blocks are simply not advised.
// Not when `ZARRBUF_HUGE_PAGES=off` (`huge_pages`).
#[cfg(all(target_os = "linux", not(miri)))]
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    if !super::huge_pages_advised() {
        return;
    }
    // SAFETY: [ptr, ptr+len) is one live allocation we own; madvise only changes paging
    // policy and cannot invalidate it. Failure (THP disabled) is harmless and ignored.
    unsafe {
        libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(any(not(target_os = "linux"), miri))]
fn advise_huge_pages(_ptr: *mut u8, _len: usize) {}

impl Reusable for HostAlloc {
    fn capacity(&self) -> usize {
        self.layout.map_or(0, |l| l.size())
    }

    fn kind(&self) -> BlockKind {
        BlockKind::Host
    }

    fn set_len(&mut self, len: usize) {
        self.len = len.min(self.capacity());
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        let Some(layout) = self.layout.take() else {
            return;
        };
        if self.recycle {
            let parked = HostAlloc {
                ptr: self.ptr,
                len: self.len,
                layout: Some(layout),
                recycle: false,
            };
            // A block the cache refuses comes back with `recycle: false` and is freed.
            drop(cache::give(Box::new(parked)));
            return;
        }
        // SAFETY: ptr was returned by alloc/alloc_zeroed with exactly this layout, and the
        // layout was taken out of `self`, so it is freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_and_zeroing() {
        for len in [0, 1, 100, HUGE_PAGE_THRESHOLD] {
            let a = HostAlloc::new(len, Init::Zeroed).unwrap();
            assert_eq!(a.ptr() as usize % MIN_ALIGN, 0);
            // SAFETY: a owns len bytes.
            let bytes = unsafe { std::slice::from_raw_parts(a.ptr(), a.len()) };
            assert!(bytes == vec![0u8; len].as_slice()); // memcmp: fast under Miri too
        }
    }

    #[test]
    fn large_freed_blocks_are_reused() {
        if super::cache::limit() == 0 {
            return;
        }
        // An odd size no other test asks for.
        let len = (9 << 20) + 4096 * 3;
        let a = HostAlloc::new(len, Init::Unwritten).unwrap();
        let first = a.ptr();
        drop(a);
        let b = HostAlloc::new(len - 4096, Init::Unwritten).unwrap();
        assert_eq!(b.ptr(), first, "the freed block should come back");
        assert_eq!(b.len(), len - 4096);
        // A much smaller request does not take a block twice its size.
        drop(b);
        let c = HostAlloc::new(len / 4, Init::Unwritten).unwrap();
        assert_ne!(c.ptr(), first);
    }

    #[test]
    fn impossible_size_is_an_error() {
        assert!(HostAlloc::new(usize::MAX - 10, Init::Unwritten).is_err());
    }
}
