//! Host output memory written by several threads at once, each into its own elements.
//!
//! A staged read into host memory scatters every unit on the worker thread that decoded it
//! (the units of a request are disjoint, so their writes are too). The borrow flag allows
//! one writer per storage, so the read takes the write guard once, for the whole run, and
//! shares it with its workers through this handle.

use super::{Region, WriteGuard};
use crate::errors::{Error, Result};
use zarrbuf_codecs::{Strided, host};

/// Exclusive host write access to one region for the length of a run, shared by threads
/// whose writes select disjoint bytes (see [`SharedHostOutput::new`]). Every write is
/// checked against the region's bounds.
pub(crate) struct SharedHostOutput<'a> {
    ptr: *mut u8,
    len: usize,
    /// Memory zarrbuf does not own (see [`Self::prefault`]).
    foreign: bool,
    _guard: WriteGuard<'a>,
}

// SAFETY: the handle is a pointer into a live allocation (the guard borrows its storage)
// that excludes every other host reader and writer while it lives; the contract of `new`
// makes the writes of different threads select disjoint bytes, so sharing it between
// threads cannot race.
unsafe impl Send for SharedHostOutput<'_> {}
// SAFETY: as for `Send`.
unsafe impl Sync for SharedHostOutput<'_> {}

impl<'a> SharedHostOutput<'a> {
    /// Takes the write guard of `region`'s storage (after the device work in flight on it)
    /// for as long as the handle lives.
    ///
    /// # Errors
    /// `NotHostAccessible` for device memory; `Busy` while another handle reads or writes it.
    ///
    /// # Safety
    /// While the handle lives, no two calls of [`Self::strided_copy`] or
    /// [`Self::contiguous_mut`] that can run at the same time (on different threads) may
    /// select a common byte, and a slice from `contiguous_mut` counts as selecting its bytes
    /// for as long as it lives.
    pub(crate) unsafe fn new(region: &'a Region) -> Result<Self> {
        let ptr = region.host_ptr().ok_or_else(|| {
            Error::NotHostAccessible(format!("a host scatter into {}", region.memory()))
        })?;
        let guard = region.storage().write()?;
        Ok(SharedHostOutput {
            ptr,
            len: region.len(),
            foreign: region.storage().is_foreign(),
            _guard: guard,
        })
    }

    /// Element-wise strided copy from `src` into this output, with optional byte swap (see
    /// `zarrbuf_codecs::host::strided_copy`); both views are checked against their lengths.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn strided_copy(
        &self,
        src: &[u8],
        src_view: Strided<'_>,
        dst_view: Strided<'_>,
        shape: &[usize],
        elem_size: usize,
        swap_unit: usize,
    ) -> Result<()> {
        // SAFETY: `src` is a live slice distinct from this output (a worker's staging slot,
        // never the output); the output is live for `len` bytes while the guard is held; the
        // kernel checks every element of both views against the lengths before it copies;
        // no other thread touches the bytes this view selects (the contract of `new`).
        unsafe {
            host::strided_copy(
                src.as_ptr(),
                src.len(),
                src_view,
                self.ptr,
                self.len,
                dst_view,
                shape,
                elem_size,
                swap_unit,
            )?
        };
        Ok(())
    }

    /// Bytes `start..start + len` of this output as a slice, for decoding straight into a
    /// contiguous run of it.
    ///
    /// # Errors
    /// `OutOfBounds` when the range does not lie inside the region.
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn contiguous_mut(&self, start: usize, len: usize) -> Result<&mut [u8]> {
        if start.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(Error::OutOfBounds(format!(
                "bytes {start}..+{len} of an output of {} bytes",
                self.len
            )));
        }
        // SAFETY: in bounds of the live region (checked above) while the guard is held; the
        // contract of `new` gives this slice's bytes to this caller alone while it lives.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) })
    }

    /// Maps the pages of bytes `start..start + len` (the whole pages inside them) writable
    /// ahead of the writes, without touching their contents (`MADV_POPULATE_WRITE`, Linux
    /// 5.14 and later): the page faults and the kernel's zeroing of new pages happen here,
    /// on whichever thread calls this, instead of in the middle of a worker's scatter.
    /// Memory zarrbuf does not own (a NumPy array zarr-python allocated for this read) is
    /// first advised for small pages where fresh memory should keep to them
    /// ([`super::fresh_memory_keeps_small_pages`]: NumPy advises its large arrays for huge
    /// pages, which such a machine faults in 4–20× slower); zarrbuf's own blocks keep
    /// theirs, being reused read after read.
    /// Returns whether the kernel did it (false: not Linux, an older kernel, a range outside
    /// the region, or memory that cannot be populated — the writes then fault as usual).
    pub(crate) fn prefault(&self, start: usize, len: usize) -> bool {
        if start.checked_add(len).is_none_or(|end| end > self.len) {
            return false;
        }
        prefault_pages(self.ptr as usize + start, len, self.foreign)
    }
}

/// `madvise(MADV_POPULATE_WRITE)` on the whole pages inside `addr..addr + len`, after
/// `MADV_NOHUGEPAGE` for memory not zarrbuf's own where fresh memory keeps to small pages.
// Miri cannot run madvise (an FFI call it does not model); populating is only a paging
// hint, so under Miri nothing is populated.
#[cfg(all(target_os = "linux", not(miri)))]
fn prefault_pages(addr: usize, len: usize, foreign: bool) -> bool {
    const PAGE: usize = 4096;
    let first = addr.next_multiple_of(PAGE);
    let end = (addr + len) / PAGE * PAGE;
    if end <= first {
        return true;
    }
    if foreign && super::fresh_memory_keeps_small_pages() {
        // SAFETY: as below, [first, end) lies inside one live allocation; MADV_NOHUGEPAGE
        // only sets the paging policy of those pages (the kernel may split the mapping's
        // bookkeeping), never their contents or whether they are mapped. A failure leaves
        // the policy as it was and is ignored.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                end - first,
                libc::MADV_NOHUGEPAGE,
            );
        }
    }
    // SAFETY: [first, end) lies inside one live allocation (the caller's bounds check and
    // the held write guard). MADV_POPULATE_WRITE only faults pages in as a write would,
    // without reading or writing their contents, so it cannot race the workers' writes
    // into the same bytes nor change what any byte holds; it never unmaps or frees memory.
    // A failure (EINVAL before Linux 5.14, EFAULT/ENOMEM for memory it cannot populate)
    // leaves the mapping as it was.
    unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            end - first,
            libc::MADV_POPULATE_WRITE,
        ) == 0
    }
}

#[cfg(any(not(target_os = "linux"), miri))]
fn prefault_pages(_addr: usize, _len: usize, _foreign: bool) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::SharedHostOutput;
    use crate::{Buffer, BufferPrototype};

    /// Prefaulting maps pages in without changing a byte: a buffer's contents, fresh pages
    /// and written ones alike, read back the same; a range outside the region is refused.
    #[test]
    fn prefaulting_leaves_every_byte_as_it_was() {
        // Large enough for whole (huge) pages; small under Miri, which interprets every byte.
        let len = if cfg!(miri) { 64 << 10 } else { 8 << 20 };
        let written: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        for buffer in [
            Buffer::from_vec(written.clone()),
            Buffer::empty(len, &BufferPrototype::cpu()).unwrap(),
        ] {
            let before = buffer.to_vec().unwrap();
            {
                let region = buffer.region().unwrap();
                // SAFETY: nothing writes through the handle.
                let shared = unsafe { SharedHostOutput::new(region) }.unwrap();
                let populated = shared.prefault(3, len - 5);
                if cfg!(all(target_os = "linux", not(miri))) {
                    // MADV_POPULATE_WRITE since Linux 5.14; older kernels refuse it.
                    let modern = kernel_at_least(5, 14);
                    assert_eq!(populated, modern, "prefault on a kernel >= 5.14: {modern}");
                }
                assert!(!shared.prefault(len - 4, 8), "a range past the end");
                assert!(!shared.prefault(usize::MAX, 2), "an overflowing range");
                if cfg!(all(target_os = "linux", not(miri))) && populated {
                    // A Vec's memory is not zarrbuf's: advised for small pages exactly where
                    // fresh memory keeps to them; zarrbuf's own block never is.
                    let middle = region.host_ptr().unwrap() as usize + len / 2;
                    let foreign = region.storage().is_foreign();
                    let small = foreign && crate::memory::fresh_memory_keeps_small_pages();
                    assert_eq!(
                        mapping_flags(middle).contains(&"nh".to_string()),
                        small,
                        "foreign {foreign}: MADV_NOHUGEPAGE should be set iff {small}"
                    );
                }
            }
            assert!(
                buffer.to_vec().unwrap() == before,
                "prefaulting changed bytes"
            );
        }
    }

    /// The `VmFlags` of the mapping that holds `addr` (`/proc/self/smaps`).
    fn mapping_flags(addr: usize) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = range.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&addr);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.split_whitespace().map(str::to_string).collect();
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    /// Whether the running kernel is `major.minor` or later (from `uname -r`'s numbers).
    fn kernel_at_least(major: u32, minor: u32) -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut parts = release
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|p| p.parse::<u32>().ok());
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
    }
}
