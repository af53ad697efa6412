//! Aligned host allocations, advised for transparent huge pages when large.
//!
//! Fresh 4 KiB pages are written at ~2.7 GB/s per core (one page fault each); huge pages
//! take 12+ GB/s, and whole-array reads are bound by that first write.

use crate::error::{Error, Result};
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
}

// SAFETY: HostAlloc owns its memory exclusively; concurrent access is governed by the
// storage borrow flag, so sending or sharing the owner across threads is sound.
unsafe impl Send for HostAlloc {}
// SAFETY: see Send above.
unsafe impl Sync for HostAlloc {}

impl HostAlloc {
    /// Allocates `len` bytes, zeroed when `zeroed` (zeroing fresh pages from the OS is free).
    pub(crate) fn new(len: usize, zeroed: bool, huge_pages: bool) -> Result<Self> {
        if len == 0 {
            return Ok(HostAlloc {
                ptr: NonNull::<[u8; MIN_ALIGN]>::dangling().cast(),
                len: 0,
                layout: None,
            });
        }
        let large = huge_pages && len >= HUGE_PAGE_THRESHOLD;
        let align = if large { HUGE_PAGE } else { MIN_ALIGN };
        let layout = Layout::from_size_align(len, align).map_err(|_| {
            Error::InvalidSize(format!(
                "{len} bytes exceeds the largest host allocation this platform allows"
            ))
        })?;
        // SAFETY: layout has non-zero size (len > 0 checked above).
        let raw = unsafe {
            if zeroed {
                std::alloc::alloc_zeroed(layout)
            } else {
                std::alloc::alloc(layout)
            }
        };
        let ptr = NonNull::new(raw).ok_or_else(|| Error::OutOfMemory {
            device: crate::Device::Cpu,
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
        })
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    // SAFETY: [ptr, ptr+len) is one live allocation we own; madvise only changes paging
    // policy and cannot invalidate it. Failure (THP disabled) is harmless and ignored.
    unsafe {
        libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _len: usize) {}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: ptr was returned by alloc/alloc_zeroed with exactly this layout.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_and_zeroing() {
        for len in [0, 1, 100, HUGE_PAGE_THRESHOLD] {
            let a = HostAlloc::new(len, true, true).unwrap();
            assert_eq!(a.ptr() as usize % MIN_ALIGN, 0);
            // SAFETY: a owns len bytes.
            let bytes = unsafe { std::slice::from_raw_parts(a.ptr(), a.len()) };
            assert!(bytes.iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn impossible_size_is_an_error() {
        assert!(HostAlloc::new(usize::MAX - 10, false, true).is_err());
    }
}
