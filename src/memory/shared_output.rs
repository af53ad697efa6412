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
}
