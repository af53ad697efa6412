//! Adler-32 on the device, in pieces: the launcher of `zb_adler32_pieces`.

use super::kernels::CudaKernels;
use crate::error::{Result, invalid};
use crate::host::{adler32_piece_count, check_adler32};
use cudarc::driver::{CudaStream, PushKernelArg};

impl CudaKernels {
    /// Enqueues the Adler-32 sums of each `piece`-byte piece of the first `nbytes` bytes of
    /// the device region `src` into the device region `out` (two `u32` per piece, `out_len`
    /// bytes in all): the twin of [`host::adler32_pieces`](crate::host::adler32_pieces), word
    /// for word. [`host::adler32_combine`](crate::host::adler32_combine) turns the sums into
    /// the checksum.
    ///
    /// # Safety
    ///
    /// * `src` must be valid for reads of `src_len` bytes and `out` for writes of `out_len`
    ///   bytes, 4-byte aligned, both in this context, until the enqueued work has completed.
    /// * The regions must not overlap, and no other work may access them concurrently unless
    ///   ordered with events.
    ///
    /// ```no_run
    /// use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
    /// let ctx = CudaContext::new(0)?;
    /// let stream = ctx.default_stream();
    /// let k = zarrbuf_codecs::cuda::CudaKernels::for_context(&ctx)?;
    /// let src = stream.clone_htod(b"Wikipedia")?;
    /// let mut sums = stream.alloc_zeros::<u32>(4)?;
    /// {
    ///     let (s, _g1) = src.device_ptr(&stream);
    ///     let (d, _g2) = sums.device_ptr_mut(&stream);
    ///     // SAFETY: both allocations are live, distinct, used only on `stream`.
    ///     unsafe { k.adler32_pieces(&stream, s, 9, 9, 5, d, 16)? };
    /// }
    /// let sums = stream.clone_dtoh(&sums)?;
    /// assert_eq!(zarrbuf_codecs::host::adler32_combine(&sums, 9, 5), 0x11e6_0398);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn adler32_pieces(
        &self,
        stream: &CudaStream,
        src: u64,
        src_len: usize,
        nbytes: usize,
        piece: usize,
        out: u64,
        out_len: usize,
    ) -> Result<()> {
        self.check_stream(stream)?;
        check_adler32(src_len, nbytes, piece, out_len / 4)?;
        let pieces = adler32_piece_count(nbytes, piece) as u64;
        if pieces == 0 {
            return Ok(());
        }
        if src == 0 || out == 0 {
            return Err(invalid("null device pointer for a non-empty region"));
        }
        if !out.is_multiple_of(4) {
            return Err(invalid("the Adler-32 sums' address is not 4-byte aligned"));
        }
        let (src_end, out_end) = (src + src_len as u64, out + out_len as u64);
        if src < out_end && out < src_end {
            return Err(invalid("the Adler-32 source and its sums overlap"));
        }
        let (n, p) = (nbytes as u64, piece as u64);
        // SAFETY: the kernel reads bytes [0, nbytes) of `src` and writes words
        // [0, 2 * pieces) of `out`; both regions hold that much (checked above), `out` is
        // aligned, and they are valid and disjoint by the caller's contract and the check
        // above.
        let r = unsafe {
            stream
                .launch_builder(&self.adler32_pieces)
                .arg(&src)
                .arg(&n)
                .arg(&p)
                .arg(&out)
                .launch(self.config(pieces))
        };
        r.map(|_| ())
            .map_err(|e| crate::error::CodecError::Cuda(format!("cuLaunchKernel failed: {e}")))
    }
}
