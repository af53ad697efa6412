#![no_main]
//! Fuzz target `vlen_decode`: see `zarrbuf_fuzz::vlen_decode`. Arbitrary bytes go to the
//! variable-length decoders (vlen-utf8, vlen-bytes, v2 VLenUTF8/VLenBytes, a zstd chunk, a
//! shard of vlen inner chunks) as a stored chunk; a counting global allocator fails the
//! input when, for a layout whose chunk is not compressed, any single allocation during the
//! reads exceeds [`LIMIT`] (a decoder that trusted a count or a length prefix would
//! allocate what it claims, up to gigabytes).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The largest allocation a read of one chunk of a few kilobytes may make: the reads' own
/// buffers and thread pools with room to spare.
const LIMIT: usize = 8 << 20;

struct Counting;

static ARMED: AtomicBool = AtomicBool::new(false);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counter only
// records sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `alloc_zeroed` is passed on as it is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            LARGEST.fetch_max(new_size, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `realloc` is passed on as it is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc` is passed on as it is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let counted = !zarrbuf_fuzz::vlen_layout_is_compressed(data);
    LARGEST.store(0, Ordering::Relaxed);
    ARMED.store(counted, Ordering::Relaxed);
    let _ = zarrbuf_fuzz::vlen_decode(data);
    ARMED.store(false, Ordering::Relaxed);
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest <= LIMIT,
        "a read of a {}-byte vlen chunk allocated {largest} bytes at once (limit {LIMIT})",
        data.len().saturating_sub(1)
    );
});
