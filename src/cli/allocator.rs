//! The CLI's allocator: mimalloc, told to keep the memory it frees (and, on a virtual
//! machine that hands free memory back to its host, to keep to small pages).
//!
//! The CLI's Rust allocations (encoded chunks as stores read them — object_store's local
//! files zero-fill each one first —, zarrs' per-chunk decode buffers) come from mimalloc,
//! which keeps freed memory for reuse. With glibc's malloc those ~1 MiB buffers were trimmed
//! back to the OS when freed, so every chunk faulted fresh pages in again: a third of the
//! time of an async read of an uncompressed 256 MiB array was the kernel zeroing pages.
//! Output buffers are zarrbuf's own (block cache) either way.
//!
//! mimalloc too hands freed memory back to the OS ("purges" it) after a short delay, and an
//! object-store read frees its response bodies (~1 MiB each, 128 in flight) on the decoding
//! threads, not the fetching thread that allocated them: `zarrbuf bench URL --reps 9` of a
//! 256 MiB array of 64³ zstd-1 chunks (nginx on 127.0.0.1, no delay) took 47,000 page faults
//! and a quarter of its CPU time was the kernel zeroing huge pages. With purging off it took
//! 1,300 page faults and 15% less CPU time. So the CLI keeps what it frees mapped (its peak
//! is bounded by the read's staging and in-flight budgets). `MIMALLOC_PURGE_DELAY` in the
//! environment still decides, when set.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc 3.x's `mi_option_t` (libmimalloc-sys has no constant
/// for it); [`keep_freed_memory`] checks the version and the option's default first.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// The option's default in the mimalloc 3.x measured (milliseconds; `src/options.c`).
const PURGE_DELAY_DEFAULT: std::ffi::c_long = 1000;

/// Turns mimalloc's purging off, unless `MIMALLOC_PURGE_DELAY` is set or the linked mimalloc
/// is not the 3.x this was measured with (the option's number or default differ); returns
/// whether it did.
pub(crate) fn keep_freed_memory() -> bool {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return false;
    }
    // SAFETY: these mimalloc calls take and return plain integers; options are atomics that
    // mimalloc reads each time it decides whether to purge, so setting one at any time, from
    // any thread, is allowed.
    unsafe {
        if libmimalloc_sys::mi_version() / 10_000 != 3
            || libmimalloc_sys::mi_option_get(PURGE_DELAY) != PURGE_DELAY_DEFAULT
        {
            return false;
        }
        libmimalloc_sys::mi_option_set(PURGE_DELAY, -1);
    }
    true
}

/// Keeps the whole process to small pages when `ZARRBUF_HUGE_PAGES=off`, or when it is not
/// set and this machine hands free memory back to its host
/// (`zarrbuf::alloc::fresh_memory_keeps_small_pages`): a CLI read faults all its memory in fresh,
/// and there a huge page freed a few seconds earlier is 4–20× slower to fault in than a
/// small one. mimalloc advises its arenas for huge pages when it reserves them, before
/// `main` runs, so the advice is overruled for the process (`PR_SET_THP_DISABLE`, which
/// also overrules zarrbuf's own) rather than not given. Returns whether it did.
#[cfg(target_os = "linux")]
pub(crate) fn follow_huge_page_choice() -> bool {
    if !zarrbuf::alloc::fresh_memory_keeps_small_pages() {
        return false;
    }
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and only sets a flag of this process
    // (inherited by its children) that the kernel consults when it faults pages in; no
    // memory is touched. A failure (an old kernel) leaves huge pages on and is ignored.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn follow_huge_page_choice() -> bool {
    false
}

#[cfg(test)]
mod tests {
    /// The mimalloc linked is the 3.x whose option numbering `PURGE_DELAY` assumes: when
    /// libmimalloc-sys moves on, check `mi_option_purge_delay` in its `mimalloc.h`.
    #[test]
    fn the_linked_mimalloc_is_the_measured_one() {
        // SAFETY: plain integer calls (see keep_freed_memory).
        let version = unsafe { libmimalloc_sys::mi_version() };
        assert_eq!(version / 10_000, 3, "mimalloc {version}");
        assert_eq!(libmimalloc_sys::_mi_option_last, 47);
    }
}
