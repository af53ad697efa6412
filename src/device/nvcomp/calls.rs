//! The calls: batched decompression and compression of chunks already in device memory, on
//! a CUDA stream.

use super::bindings::*;
use super::loader::{CompressFormat, Format, Nvcomp};
use crate::errors::{Error, Result};
use cudarc::driver::sys::CUstream;
use std::ffi::{CStr, c_void};

impl Nvcomp {
    /// nvCOMP's own words for a status code.
    pub(crate) fn describe(&self, status: i32) -> String {
        // SAFETY: nvcompGetStatusString returns a static C string (or null) for any value.
        let p = unsafe { (self.status_string)(status) };
        if p.is_null() {
            return format!("nvCOMP status {status}");
        }
        // SAFETY: non-null, NUL-terminated and static, per nvCOMP's documentation.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy();
        format!("{s} (nvCOMP status {status})")
    }

    /// Bytes of device scratch `format` needs for a batch.
    pub(crate) fn temp_bytes(
        &self,
        format: Format,
        chunks: usize,
        max_chunk: usize,
        total: usize,
        stream: CUstream,
    ) -> Result<usize> {
        let mut bytes = 0usize;
        // SAFETY: plain values and a valid out-pointer; the stream is live.
        let st = unsafe {
            (format.temp_size)(
                chunks,
                max_chunk,
                DECOMPRESS_OPTS,
                &mut bytes,
                total,
                stream,
            )
        };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*DecompressGetTempSize",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(bytes)
    }

    /// Enqueues one batched decompression on `stream`.
    ///
    /// # Safety
    /// Every pointer is a device address (or a device array of `n` device addresses and
    /// sizes, as nvCOMP documents) that stays valid until the stream has passed this call;
    /// the input chunks are in `format`, their framing validated on the CPU (the CUDA
    /// backend, which [`DECOMPRESS_OPTS`] selects, reports a chunk it cannot decompress in
    /// its status; nvCOMP's documentation gives no such promise for malformed framing); each
    /// output buffer holds the size given for it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn decompress(
        &self,
        format: Format,
        in_ptrs: u64,
        in_bytes: u64,
        out_capacity: u64,
        out_actual: u64,
        n: usize,
        temp: u64,
        temp_bytes: usize,
        out_ptrs: u64,
        statuses: u64,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        let st = unsafe {
            (format.decompress)(
                in_ptrs as *const *const c_void,
                in_bytes as *const usize,
                out_capacity as *const usize,
                out_actual as *mut usize,
                n,
                temp as *mut c_void,
                temp_bytes,
                out_ptrs as *const *mut c_void,
                DECOMPRESS_OPTS,
                statuses as *mut i32,
                stream,
            )
        };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*DecompressAsync",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(())
    }

    /// The size of the output buffer each chunk of up to `max_chunk` bytes needs.
    pub(crate) fn max_compressed_bytes(
        &self,
        format: CompressFormat,
        max_chunk: usize,
        opts: CompressOpts,
    ) -> Result<usize> {
        let mut bytes = 0usize;
        // SAFETY: plain values and a valid out-pointer.
        let st = unsafe { (format.max_output)(max_chunk, opts, &mut bytes) };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*CompressGetMaxOutputChunkSize",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(bytes)
    }

    /// Bytes of device scratch a compression batch needs.
    pub(crate) fn compress_temp_bytes(
        &self,
        format: CompressFormat,
        chunks: usize,
        max_chunk: usize,
        total: usize,
        opts: CompressOpts,
        stream: CUstream,
    ) -> Result<usize> {
        let mut bytes = 0usize;
        // SAFETY: plain values and a valid out-pointer; the stream is live.
        let st = unsafe { (format.temp_size)(chunks, max_chunk, opts, &mut bytes, total, stream) };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*CompressGetTempSize",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(bytes)
    }

    /// Enqueues one batched compression on `stream`.
    ///
    /// # Safety
    /// `in_ptrs`, `in_bytes`, `out_ptrs`, `out_bytes` and `statuses` are device arrays of
    /// `n` entries (device addresses of the chunks, their sizes, device addresses of the
    /// output buffers, room for the compressed sizes and statuses); every chunk is at most
    /// `max_chunk` bytes and aligned as nvCOMP requires (allocations' starts are); every
    /// output buffer holds [`Self::max_compressed_bytes`] for `max_chunk`; `temp` holds
    /// `temp_bytes` ([`Self::compress_temp_bytes`]); all stay valid until the stream has
    /// passed this call.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn compress(
        &self,
        format: CompressFormat,
        in_ptrs: u64,
        in_bytes: u64,
        max_chunk: usize,
        n: usize,
        temp: u64,
        temp_bytes: usize,
        out_ptrs: u64,
        out_bytes: u64,
        opts: CompressOpts,
        statuses: u64,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        let st = unsafe {
            (format.compress)(
                in_ptrs as *const *const c_void,
                in_bytes as *const usize,
                max_chunk,
                n,
                temp as *mut c_void,
                temp_bytes,
                out_ptrs as *const *mut c_void,
                out_bytes as *mut usize,
                opts,
                statuses as *mut i32,
                stream,
            )
        };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*CompressAsync",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(())
    }
}
