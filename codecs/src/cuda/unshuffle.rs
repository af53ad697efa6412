//! Blosc's shuffle filters undone on the device: the launcher of `zb_blosc_unshuffle`.

use super::kernels::CudaKernels;
use crate::error::{Result, invalid};
use crate::host::{Shuffle, check_unshuffle};
use cudarc::driver::{CudaStream, PushKernelArg};

impl CudaKernels {
    /// Enqueues the undoing of blosc's `shuffle` over the first `nbytes` bytes of the device
    /// region `src` into `dst`, block by block (`blocksize`-byte blocks, the last one possibly
    /// shorter, elements of `typesize` bytes): the twin of
    /// [`host::blosc_unshuffle`](crate::host::blosc_unshuffle), byte for byte.
    ///
    /// # Safety
    ///
    /// * `src` must be valid for reads of `src_len` bytes and `dst` for writes of `dst_len`
    ///   bytes, both in this context, until the enqueued work has completed.
    /// * The regions must not overlap, and no other work may access them concurrently unless
    ///   ordered with events.
    ///
    /// ```no_run
    /// use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
    /// use zarrbuf_codecs::host::Shuffle;
    /// let ctx = CudaContext::new(0)?;
    /// let stream = ctx.default_stream();
    /// let k = zarrbuf_codecs::cuda::CudaKernels::for_context(&ctx)?;
    /// let src = stream.clone_htod(&[1u8, 3, 2, 4])?;
    /// let mut dst = stream.alloc_zeros::<u8>(4)?;
    /// {
    ///     let (s, _g1) = src.device_ptr(&stream);
    ///     let (d, _g2) = dst.device_ptr_mut(&stream);
    ///     // SAFETY: both allocations are live, 4 bytes, distinct, used only on `stream`.
    ///     unsafe { k.blosc_unshuffle(&stream, s, 4, d, 4, 4, Shuffle::Byte, 2, 4)? };
    /// }
    /// assert_eq!(stream.clone_dtoh(&dst)?, [1, 2, 3, 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn blosc_unshuffle(
        &self,
        stream: &CudaStream,
        src: u64,
        src_len: usize,
        dst: u64,
        dst_len: usize,
        nbytes: usize,
        shuffle: Shuffle,
        typesize: usize,
        blocksize: usize,
    ) -> Result<()> {
        self.check_stream(stream)?;
        check_unshuffle(src_len, dst_len, nbytes, typesize, blocksize)?;
        if nbytes == 0 {
            return Ok(());
        }
        if src == 0 || dst == 0 {
            return Err(invalid("null device pointer for a non-empty region"));
        }
        let (src_end, dst_end) = (src + src_len as u64, dst + dst_len as u64);
        if src < dst_end && dst < src_end {
            return Err(invalid("the unshuffle's source and destination overlap"));
        }
        let (n, block, ts, bit) = (
            nbytes as u64,
            blocksize as u64,
            typesize as u32,
            shuffle.code(),
        );
        // SAFETY: the kernel reads bytes [0, nbytes) of `src` and writes bytes [0, nbytes) of
        // `dst` (each index it forms lies in the block of the byte it computes, inside
        // [0, nbytes)); both regions hold at least `nbytes` (checked above) and are valid and
        // disjoint by the caller's contract and the check above.
        let r = unsafe {
            stream
                .launch_builder(&self.blosc_unshuffle)
                .arg(&src)
                .arg(&dst)
                .arg(&n)
                .arg(&block)
                .arg(&ts)
                .arg(&bit)
                .launch(self.config(n))
        };
        r.map(|_| ())
            .map_err(|e| crate::error::CodecError::Cuda(format!("cuLaunchKernel failed: {e}")))
    }
}
