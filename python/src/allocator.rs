//! The extension's allocator: mimalloc, told to keep the memory it frees (and to keep its
//! new arenas to small pages when `ZARRBUF_HUGE_PAGES=off`).
//!
//! The extension's Rust allocations (zarrs' per-chunk buffers, encoded bytes, small outputs)
//! come from mimalloc, which keeps freed memory for reuse. With glibc's malloc every small
//! read paid for its buffers twice: a freed 4 MiB decode buffer at the top of the heap was
//! trimmed back to the OS, and the next read faulted fresh zeroed pages in (a loop of
//! 64-row reads from 4 MiB chunks spent 60% of its time in the kernel). Python's own
//! allocations are not affected.
//!
//! mimalloc too hands freed memory back to the OS ("purges" it) a second after it is freed,
//! and an object-store read frees its response bodies (~1 MiB each, 128 in flight) on the
//! decoding threads, not the fetching thread that allocated them: reading a 256 MiB array of
//! 64³ zstd-1 chunks from nginx on 127.0.0.1 six times with `zarrbuf.open(url).read()` took
//! 38,000–45,000 page faults, and 4,800 with purging off. So the extension keeps what it
//! frees mapped, as the CLI does (`src/cli/allocator.rs`): the process keeps the peak of
//! its reads' staging and in-flight bytes, as it keeps its block cache
//! (`zarrbuf.release_cached_memory()` does not return this memory). `MIMALLOC_PURGE_DELAY`
//! in the environment still decides, when set.

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
    set_measured_option(PURGE_DELAY, PURGE_DELAY_DEFAULT, -1)
}

/// Sets mimalloc option `option` to `value` if the linked mimalloc is the 3.x measured and
/// the option still holds `measured_default` (else its number or meaning may differ, or
/// someone set it); returns whether it did.
fn set_measured_option(
    option: libmimalloc_sys::mi_option_t,
    measured_default: std::ffi::c_long,
    value: std::ffi::c_long,
) -> bool {
    // SAFETY: these mimalloc calls take and return plain integers; options are atomics that
    // mimalloc reads each time it uses them (when it decides whether to purge, when it maps
    // memory from the OS), so setting one at any time, from any thread, is allowed.
    unsafe {
        if libmimalloc_sys::mi_version() / 10_000 != 3
            || libmimalloc_sys::mi_option_get(option) != measured_default
        {
            return false;
        }
        libmimalloc_sys::mi_option_set(option, value);
    }
    true
}

/// `mi_option_allow_thp` in mimalloc 3.x's `mi_option_t` (no constant in libmimalloc-sys).
const ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// Stops mimalloc advising the arenas it reserves from now on for huge pages when
/// `ZARRBUF_HUGE_PAGES=off` (zarrbuf's own large buffers follow the same setting). Not by
/// default: a long-lived process reuses its memory, and there huge pages read faster even
/// where the host takes free memory back (`zarrbuf::alloc::huge_pages_advised`). Unlike the
/// CLI it leaves the interpreter's other libraries alone (no process-wide
/// `PR_SET_THP_DISABLE`), so an arena reserved before the module was imported keeps its
/// advice. Does nothing when `MIMALLOC_ALLOW_THP` is set or the option is not at its
/// measured default; returns whether it changed it.
pub(crate) fn follow_huge_page_choice() -> bool {
    if zarrbuf::alloc::huge_pages_advised() || std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return false;
    }
    set_measured_option(ALLOW_THP, 1, 0)
}

#[cfg(test)]
mod tests {
    /// The mimalloc linked is the 3.x whose option numbering `PURGE_DELAY` assumes: when
    /// libmimalloc-sys moves on, check `mi_option_purge_delay` and `mi_option_allow_thp` in
    /// its `mimalloc.h`.
    #[test]
    fn the_linked_mimalloc_is_the_measured_one() {
        // SAFETY: plain integer calls (see keep_freed_memory).
        let version = unsafe { libmimalloc_sys::mi_version() };
        assert_eq!(version / 10_000, 3, "mimalloc {version}");
        assert_eq!(libmimalloc_sys::_mi_option_last, 47);
    }
}
