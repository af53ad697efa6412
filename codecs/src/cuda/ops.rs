//! The operations, enqueued on a CUDA stream.

use super::kernels::{BLOCK, CudaKernels, TILE, WORDS};
use super::params::{
    DST_ALIGNED, KernelLayout, KernelPattern, MAX_PATTERN, SRC_ALIGNED, Side, all_aligned,
    transpose_plan, widen,
};
use crate::error::{CodecError, Result, invalid};
use crate::host::PermutePlan;
use crate::layout::{Plan, Strided, check_swap_unit};
use crate::scalar::ScalarKind;
use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};

impl CudaKernels {
    /// Enqueues `dst[i] = src[i]` (optionally byte-swapped by `swap_unit`) for every index `i`
    /// of `shape` on `stream`: the device twin of [`host::strided_copy`](crate::host::strided_copy),
    /// with the same layout rules and byte-identical results.
    ///
    /// `src` and `dst` are device pointers (`CUdeviceptr`) to regions of `src_len` and
    /// `dst_len` bytes; both views are checked against them on the host before anything is
    /// enqueued. A fully contiguous copy without swap becomes `cuMemcpyDtoDAsync`; otherwise
    /// contiguous rows are copied in the widest aligned words (up to 16 bytes). Returns once
    /// the work is enqueued; zero elements enqueue nothing.
    ///
    /// # Safety
    ///
    /// * `src` must be valid for reads of `src_len` bytes and `dst` for writes of `dst_len`
    ///   bytes, both in this context, until the enqueued work has completed.
    /// * The regions must not overlap, except `src == dst` with identical views (in place).
    /// * No other work may write the source or access the destination concurrently
    ///   (other streams included) unless ordered with events.
    ///
    /// ```no_run
    /// use cudarc::driver::CudaContext;
    /// use cudarc::driver::{DevicePtr, DevicePtrMut};
    /// use zarrbuf_codecs::{cuda::CudaKernels, Strided};
    /// let ctx = CudaContext::new(0)?;
    /// let stream = ctx.default_stream();
    /// let k = CudaKernels::for_context(&ctx)?;
    /// let src = stream.clone_htod(&[1u8, 2, 3, 4])?;
    /// let mut dst = stream.alloc_zeros::<u8>(4)?;
    /// {
    ///     let (s, _g1) = src.device_ptr(&stream);
    ///     let (d, _g2) = dst.device_ptr_mut(&stream);
    ///     let v = Strided { offset: 0, strides: &[2] };
    ///     // SAFETY: both allocations are live, 4 bytes, distinct, used only on `stream`.
    ///     unsafe { k.strided_copy(&stream, s, 4, v, d, 4, v, &[2], 2, 2)? };
    /// }
    /// assert_eq!(stream.clone_dtoh(&dst)?, [2, 1, 4, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn strided_copy(
        &self,
        stream: &CudaStream,
        src: u64,
        src_len: usize,
        src_view: Strided<'_>,
        dst: u64,
        dst_len: usize,
        dst_view: Strided<'_>,
        shape: &[usize],
        elem_size: usize,
        swap_unit: usize,
    ) -> Result<()> {
        self.check_stream(stream)?;
        let unit = check_swap_unit(swap_unit, elem_size)?;
        let Some(mut plan) = Plan::new(
            src_len, src_view, elem_size, dst_len, dst_view, elem_size, shape,
        )?
        else {
            return Ok(());
        };
        if src == 0 || dst == 0 {
            return Err(invalid("null device pointer for a non-empty region"));
        }
        let same = src == dst
            && src_view.offset == dst_view.offset
            && src_view.strides == dst_view.strides;
        if same && unit == 1 {
            return Ok(());
        }
        let s = src + plan.src_offset as u64;
        let d = dst + plan.dst_offset as u64;
        let (n, sa, sb) = plan.inner();
        if unit == 1 && plan.ndim() == 1 && sa == elem_size as isize && sb == elem_size as isize {
            bind(stream)?;
            // SAFETY: both ranges are in bounds of their regions (Plan::new) and disjoint
            // (caller, `same` excluded above); the caller keeps them valid until completion.
            return unsafe {
                cudarc::driver::result::memcpy_dtod_async(d, s, n * elem_size, stream.cu_stream())
            }
            .map_err(|e| CodecError::Cuda(format!("cuMemcpyDtoDAsync failed: {e}")));
        }
        let es = widen(&mut plan, s, d, elem_size);
        let word = WORDS.iter().position(|&w| w == es);
        if let (Some(i), Some(tp)) = (word, transpose_plan(&plan, es, TILE / 2))
            && all_aligned(&tp, s, es, Side::Source)
            && all_aligned(&tp, d, es, Side::Destination)
        {
            let mut layout = KernelLayout::from_plan(&tp, es, unit);
            let k = tp.ndim() - 2;
            let tiles = |n: usize| n.div_ceil(TILE) as u64;
            layout.n = (tp.numel / (tp.shape[k] * tp.shape[k + 1])) as u64
                * tiles(tp.shape[k])
                * tiles(tp.shape[k + 1]);
            let cfg = LaunchConfig {
                grid_dim: (layout.n.min(self.max_blocks as u64) as u32, 1, 1),
                block_dim: (TILE as u32, 8, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the kernel moves every element of `tp` (the same elements as `plan`,
            // dims reordered) from `s` to `d`, all in bounds (Plan::new); the caller
            // guarantees validity and disjointness (in place never gets here: identical
            // views cannot have a contiguous destination and strided source innermost).
            let r = unsafe {
                stream
                    .launch_builder(&self.transpose[i])
                    .arg(&s)
                    .arg(&d)
                    .arg(&layout)
                    .launch(cfg)
            };
            return launched(r);
        }
        let layout = KernelLayout::from_plan(&plan, es, unit);
        let func = match word {
            Some(i)
                if all_aligned(&plan, s, es, Side::Source)
                    && all_aligned(&plan, d, es, Side::Destination) =>
            {
                &self.copy[i]
            }
            _ => &self.copy_bytes,
        };
        // SAFETY: the kernel reads `layout.n` elements at `s` and writes them at `d` exactly
        // as the plan describes, all in bounds (Plan::new); the caller guarantees validity.
        let r = unsafe {
            stream
                .launch_builder(func)
                .arg(&s)
                .arg(&d)
                .arg(&layout)
                .launch(self.config(layout.n))
        };
        launched(r)
    }

    /// Enqueues a fill of every element of `shape` at `view` in the device region `dst`
    /// (`dst_len` bytes) with `pattern`: the twin of [`host::fill`](crate::host::fill).
    ///
    /// A contiguous fill with a pattern of equal bytes becomes `cuMemsetD8Async`. Patterns
    /// longer than 16 bytes need the byte-wise kernel, which takes at most 256 bytes
    /// ([`CodecError::Unsupported`] beyond that).
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes of `dst_len` bytes in this context until the enqueued
    /// work has completed, and not accessed concurrently by other work.
    ///
    /// ```no_run
    /// use cudarc::driver::{CudaContext, DevicePtrMut};
    /// use zarrbuf_codecs::{cuda::CudaKernels, Strided};
    /// let ctx = CudaContext::new(0)?;
    /// let stream = ctx.default_stream();
    /// let k = CudaKernels::for_context(&ctx)?;
    /// let mut buf = stream.alloc_zeros::<u8>(8)?;
    /// {
    ///     let (d, _g) = buf.device_ptr_mut(&stream);
    ///     // SAFETY: the allocation is live, 8 bytes, used only on `stream`.
    ///     unsafe { k.fill(&stream, d, 8, Strided { offset: 0, strides: &[2] }, &[4], &[1, 2])? };
    /// }
    /// assert_eq!(stream.clone_dtoh(&buf)?, [1, 2, 1, 2, 1, 2, 1, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub unsafe fn fill(
        &self,
        stream: &CudaStream,
        dst: u64,
        dst_len: usize,
        view: Strided<'_>,
        shape: &[usize],
        pattern: &[u8],
    ) -> Result<()> {
        self.check_stream(stream)?;
        let es = pattern.len();
        if es == 0 {
            return Err(invalid("fill pattern is empty (element size 0)"));
        }
        let Some(mut plan) = Plan::new(dst_len, view, es, dst_len, view, es, shape)? else {
            return Ok(());
        };
        if dst == 0 {
            return Err(invalid("null device pointer for a non-empty region"));
        }
        let d = dst + plan.dst_offset as u64;
        let (n, _, sb) = plan.inner();
        if plan.ndim() == 1 && sb == es as isize && pattern.iter().all(|&b| b == pattern[0]) {
            bind(stream)?;
            // SAFETY: the range is in bounds of the region (Plan::new); the caller keeps it
            // valid until completion.
            return unsafe {
                cudarc::driver::result::memset_d8_async(d, pattern[0], n * es, stream.cu_stream())
            }
            .map_err(|e| CodecError::Cuda(format!("cuMemsetD8Async failed: {e}")));
        }
        let w = widen(&mut plan, d, d, es);
        let layout = KernelLayout::from_plan(&plan, w, 1);
        match WORDS.iter().position(|&x| x == w) {
            Some(i) if all_aligned(&plan, d, w, Side::Destination) => {
                let mut word = [0u8; 16];
                for (k, b) in word[..w].iter_mut().enumerate() {
                    *b = pattern[k % es];
                }
                let lo = u64::from_le_bytes(word[..8].try_into().unwrap_or_default());
                let hi = u64::from_le_bytes(word[8..].try_into().unwrap_or_default());
                // SAFETY: the kernel writes `layout.n` words at `d` as the plan describes,
                // all in bounds (Plan::new); the caller guarantees validity.
                let r = unsafe {
                    stream
                        .launch_builder(&self.fill[i])
                        .arg(&d)
                        .arg(&layout)
                        .arg(&lo)
                        .arg(&hi)
                        .launch(self.config(layout.n))
                };
                launched(r)
            }
            _ => {
                if es > MAX_PATTERN {
                    return Err(CodecError::Unsupported(format!(
                        "CUDA fill of unaligned or strided {es}-byte elements: patterns longer \
                         than {MAX_PATTERN} bytes are not supported"
                    )));
                }
                let mut p = KernelPattern {
                    bytes: [0; MAX_PATTERN],
                };
                p.bytes[..es].copy_from_slice(pattern);
                // SAFETY: as above, element by element.
                let r = unsafe {
                    stream
                        .launch_builder(&self.fill_bytes)
                        .arg(&d)
                        .arg(&layout)
                        .arg(&p)
                        .launch(self.config(layout.n))
                };
                launched(r)
            }
        }
    }

    /// Enqueues a converting copy from `src_kind` to `dst_kind`: the twin of
    /// [`host::cast`](crate::host::cast), with the same conversion rules and identical
    /// results (NaN payloads aside).
    ///
    /// # Safety
    ///
    /// As [`strided_copy`](Self::strided_copy); the regions must not overlap.
    ///
    /// ```no_run
    /// use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
    /// use zarrbuf_codecs::{cuda::CudaKernels, ScalarKind, Strided};
    /// let ctx = CudaContext::new(0)?;
    /// let stream = ctx.default_stream();
    /// let k = CudaKernels::for_context(&ctx)?;
    /// let src = stream.clone_htod(&[1.5f32, -2.5])?;
    /// let mut dst = stream.alloc_zeros::<i16>(2)?;
    /// {
    ///     let (s, _g1) = src.device_ptr(&stream);
    ///     let (d, _g2) = dst.device_ptr_mut(&stream);
    ///     // SAFETY: both allocations are live, distinct, used only on `stream`.
    ///     unsafe {
    ///         k.cast(&stream, s, 8, Strided { offset: 0, strides: &[4] }, ScalarKind::F32,
    ///                d, 4, Strided { offset: 0, strides: &[2] }, ScalarKind::I16, &[2])?
    ///     };
    /// }
    /// assert_eq!(stream.clone_dtoh(&dst)?, [1, -2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn cast(
        &self,
        stream: &CudaStream,
        src: u64,
        src_len: usize,
        src_view: Strided<'_>,
        src_kind: ScalarKind,
        dst: u64,
        dst_len: usize,
        dst_view: Strided<'_>,
        dst_kind: ScalarKind,
        shape: &[usize],
    ) -> Result<()> {
        self.check_stream(stream)?;
        let (ses, des) = (src_kind.size(), dst_kind.size());
        let Some(plan) = Plan::new(src_len, src_view, ses, dst_len, dst_view, des, shape)? else {
            return Ok(());
        };
        if src == 0 || dst == 0 {
            return Err(invalid("null device pointer for a non-empty region"));
        }
        let s = src + plan.src_offset as u64;
        let d = dst + plan.dst_offset as u64;
        let mut layout = KernelLayout::from_plan(&plan, ses, 1);
        layout.src_kind = src_kind.code();
        layout.dst_kind = dst_kind.code();
        if all_aligned(&plan, s, ses.min(8), Side::Source) {
            layout.flags |= SRC_ALIGNED;
        }
        if all_aligned(&plan, d, des.min(8), Side::Destination) {
            layout.flags |= DST_ALIGNED;
        }
        // SAFETY: the kernel reads `ses`-byte elements at `s` and writes `des`-byte elements
        // at `d` as the plan describes, all in bounds (Plan::new); the caller guarantees
        // validity and disjointness.
        let r = unsafe {
            stream
                .launch_builder(&self.cast)
                .arg(&s)
                .arg(&d)
                .arg(&layout)
                .launch(self.config(layout.n))
        };
        launched(r)
    }

    /// Enqueues an in-place byte swap of the `len`-byte device region `data`, reversing every
    /// `swap_unit`-byte group: the twin of [`host::byte_swap`](crate::host::byte_swap).
    ///
    /// # Safety
    ///
    /// `data` must be valid for reads and writes of `len` bytes in this context until the
    /// enqueued work has completed, and not accessed concurrently by other work.
    ///
    /// ```no_run
    /// use cudarc::driver::{CudaContext, DevicePtrMut};
    /// let ctx = CudaContext::new(0)?;
    /// let stream = ctx.default_stream();
    /// let k = zarrbuf_codecs::cuda::CudaKernels::for_context(&ctx)?;
    /// let mut buf = stream.clone_htod(&[1u8, 2, 3, 4])?;
    /// {
    ///     let (d, _g) = buf.device_ptr_mut(&stream);
    ///     // SAFETY: the allocation is live, 4 bytes, used only on `stream`.
    ///     unsafe { k.byte_swap(&stream, d, 4, 4)? };
    /// }
    /// assert_eq!(stream.clone_dtoh(&buf)?, [4, 3, 2, 1]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub unsafe fn byte_swap(
        &self,
        stream: &CudaStream,
        data: u64,
        len: usize,
        swap_unit: usize,
    ) -> Result<()> {
        self.check_stream(stream)?;
        let unit = check_swap_unit(swap_unit, swap_unit.max(1))?;
        if !len.is_multiple_of(unit) {
            return Err(invalid(format!(
                "{len} bytes are not a whole number of {unit}-byte swap units"
            )));
        }
        if unit == 1 || len == 0 {
            return Ok(());
        }
        let strides = [unit as isize];
        let v = Strided {
            offset: 0,
            strides: &strides,
        };
        // SAFETY: an identical-view in-place copy of the caller's valid region.
        unsafe {
            self.strided_copy(
                stream,
                data,
                len,
                v,
                data,
                len,
                v,
                &[len / unit],
                unit,
                unit,
            )
        }
    }

    /// Enqueues the transpose of the C-contiguous device block `src` (shape `src_shape`) into
    /// `dst` in C order, like `numpy.transpose(x, axes).copy()`: the twin of
    /// [`host::permute`](crate::host::permute). Both regions must hold at least
    /// `product(src_shape) * elem_size` bytes.
    ///
    /// # Safety
    ///
    /// As [`strided_copy`](Self::strided_copy); the regions must not overlap.
    ///
    /// ```no_run
    /// use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
    /// let ctx = CudaContext::new(0)?;
    /// let stream = ctx.default_stream();
    /// let k = zarrbuf_codecs::cuda::CudaKernels::for_context(&ctx)?;
    /// let src = stream.clone_htod(&[0u8, 1, 2, 3, 4, 5])?;
    /// let mut dst = stream.alloc_zeros::<u8>(6)?;
    /// {
    ///     let (s, _g1) = src.device_ptr(&stream);
    ///     let (d, _g2) = dst.device_ptr_mut(&stream);
    ///     // SAFETY: both allocations are live, 6 bytes, distinct, used only on `stream`.
    ///     unsafe { k.permute(&stream, s, 6, d, 6, &[2, 3], &[1, 0], 1)? };
    /// }
    /// assert_eq!(stream.clone_dtoh(&dst)?, [0, 3, 1, 4, 2, 5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn permute(
        &self,
        stream: &CudaStream,
        src: u64,
        src_len: usize,
        dst: u64,
        dst_len: usize,
        src_shape: &[usize],
        axes: &[usize],
        elem_size: usize,
    ) -> Result<()> {
        let p = PermutePlan::new(src_shape, axes, elem_size)?;
        if src_len < p.bytes || dst_len < p.bytes {
            return Err(invalid(format!(
                "permute of shape {src_shape:?} needs {} bytes on each side, got {src_len} \
                 (src) and {dst_len} (dst)",
                p.bytes
            )));
        }
        // SAFETY: forwarded caller guarantees; the views are checked by strided_copy.
        unsafe {
            self.strided_copy(
                stream,
                src,
                src_len,
                Strided {
                    offset: 0,
                    strides: &p.src_strides,
                },
                dst,
                dst_len,
                Strided {
                    offset: 0,
                    strides: &p.dst_strides,
                },
                &p.dst_shape,
                elem_size,
                0,
            )
        }
    }

    /// Grid-stride launch configuration for `n` elements (`n` > 0: a plan is never empty).
    pub(crate) fn config(&self, n: u64) -> LaunchConfig {
        let blocks = n.div_ceil(BLOCK as u64).min(self.max_blocks as u64).max(1) as u32;
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// Maps a launch result to this crate's error.
fn launched<T>(r: std::result::Result<T, cudarc::driver::DriverError>) -> Result<()> {
    r.map(|_| ())
        .map_err(|e| CodecError::Cuda(format!("cuLaunchKernel failed: {e}")))
}

/// Makes the stream's context current on this thread (needed before raw driver calls).
fn bind(stream: &CudaStream) -> Result<()> {
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| CodecError::Cuda(format!("cuCtxSetCurrent failed: {e}")))
}
