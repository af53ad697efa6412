//! The launcher of `zb_copy_batch`: many strided copies into one destination, one launch.

use super::kernels::{BLOCK, CudaKernels, WORDS};
use super::params::{Side, all_aligned, widen};
use crate::copy_batch::{CopyItem, plan_batch};
use crate::error::{CodecError, Result, invalid};
use crate::layout::{MAX_DIMS, Plan};
use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};

/// Bytes of one item descriptor (`struct ZbCopyItem` in kernels/copy_batch.cu).
const ITEM_BYTES: usize = 48 + 3 * 8 * MAX_DIMS;

/// Elements of an item one block copies per step (`ZB_BATCH_RUN` in kernels/copy_batch.cu).
const RUN: usize = 2048;

/// Bytes of descriptor memory (host staging and device) a batch of `items` items needs:
/// what [`CudaKernels::strided_copy_batch`] takes.
///
/// ```
/// assert_eq!(zarrbuf_codecs::cuda::copy_batch_desc_bytes(0), 0);
/// assert!(zarrbuf_codecs::cuda::copy_batch_desc_bytes(2) > 0);
/// ```
pub fn copy_batch_desc_bytes(items: usize) -> usize {
    items.saturating_mul(ITEM_BYTES)
}

/// Writes one item descriptor at `out` (exactly [`ITEM_BYTES`] long).
fn write_item(out: &mut [u8], plan: &Plan, src: u64, dst: u64, word: usize, es: usize, run0: u64) {
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        out[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    put(&(src + plan.src_offset as u64).to_ne_bytes());
    put(&(dst + plan.dst_offset as u64).to_ne_bytes());
    put(&(plan.numel as u64).to_ne_bytes());
    put(&run0.to_ne_bytes());
    put(&(plan.ndim() as u32).to_ne_bytes());
    put(&(word as u32).to_ne_bytes());
    put(&(es as u32).to_ne_bytes());
    put(&u32::from(plan.numel > u32::MAX as usize).to_ne_bytes());
    for d in 0..MAX_DIMS {
        put(&(plan.shape.get(d).copied().unwrap_or(1) as u64).to_ne_bytes());
    }
    for d in 0..MAX_DIMS {
        put(&(plan.src.get(d).copied().unwrap_or(0) as i64).to_ne_bytes());
    }
    for d in 0..MAX_DIMS {
        put(&(plan.dst.get(d).copied().unwrap_or(0) as i64).to_ne_bytes());
    }
}

/// Writes the descriptor of every planned item into `out` (room for all checked by the
/// caller): each plan widened to the widest aligned word as for `strided_copy`, the typed
/// path where every address is aligned to the word, the byte-wise path otherwise, and its
/// runs numbered after the previous items'. Returns the item and run counts.
fn describe(
    plans: Vec<(usize, Plan)>,
    items: &[CopyItem<'_>],
    dst: u64,
    elem_size: usize,
    out: &mut [u8],
) -> (u64, u64) {
    let mut runs = 0u64;
    let count = plans.len() as u64;
    for (k, (i, mut plan)) in plans.into_iter().enumerate() {
        let (s, d) = (
            items[i].src + plan.src_offset as u64,
            dst + plan.dst_offset as u64,
        );
        let es = widen(&mut plan, s, d, elem_size);
        let typed = WORDS.contains(&es)
            && all_aligned(&plan, s, es, Side::Source)
            && all_aligned(&plan, d, es, Side::Destination);
        let word = if typed { es } else { 0 };
        let at = &mut out[k * ITEM_BYTES..(k + 1) * ITEM_BYTES];
        write_item(at, &plan, items[i].src, dst, word, es, runs);
        runs += plan.numel.div_ceil(RUN) as u64;
    }
    (count, runs)
}

impl CudaKernels {
    /// Enqueues the copy of every item of `items` into the `dst_len`-byte device region
    /// `dst` in ONE kernel launch: the twin of
    /// [`host::strided_copy_batch`](crate::host::strided_copy_batch), with its rules (every
    /// item checked before anything is enqueued, the first bad one named in the error) and
    /// byte-identical results where items write distinct elements.
    ///
    /// The item descriptors are written into `desc_host` and copied on `stream` into the
    /// device region `desc_dev` (`desc_dev_len` bytes); both must hold
    /// [`copy_batch_desc_bytes`]`(items.len())` bytes. Returns once the work is enqueued;
    /// a batch with nothing to copy enqueues nothing.
    ///
    /// # Safety
    ///
    /// * Each item's `src` must be valid device memory for reads of `src_len` bytes and
    ///   `dst` for writes of `dst_len` bytes, in this context, until the enqueued work has
    ///   completed; no other work may write the sources or access the destination
    ///   concurrently (other streams included) unless ordered with events.
    /// * `desc_host` must be page-locked (pinned) host memory, and neither it nor the
    ///   `desc_dev_len` bytes of device memory at `desc_dev` may be read or written by anyone
    ///   else until the enqueued work has completed: the copy and the kernel read them
    ///   after this call returns.
    ///
    /// ```no_run
    /// use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
    /// use zarrbuf_codecs::{cuda::{CudaKernels, copy_batch_desc_bytes}, CopyItem, Strided};
    /// let ctx = CudaContext::new(0)?;
    /// let stream = ctx.default_stream();
    /// let k = CudaKernels::for_context(&ctx)?;
    /// let src = stream.clone_htod(&[1u8, 2, 3, 4])?;
    /// let mut dst = stream.alloc_zeros::<u8>(4)?;
    /// let bytes = copy_batch_desc_bytes(2);
    /// let mut desc_dev = stream.alloc_zeros::<u8>(bytes)?;
    /// // SAFETY: u8 has no invalid bit patterns.
    /// let mut desc_host = unsafe { ctx.alloc_pinned::<u8>(bytes)? };
    /// {
    ///     let (s, _g1) = src.device_ptr(&stream);
    ///     let (d, _g2) = dst.device_ptr_mut(&stream);
    ///     let (dd, _g3) = desc_dev.device_ptr_mut(&stream);
    ///     let item = |at| CopyItem {
    ///         src: s, src_len: 4,
    ///         src_view: Strided { offset: at, strides: &[1] },
    ///         dst_view: Strided { offset: 2 - at, strides: &[1] },
    ///         shape: &[2],
    ///     };
    ///     // SAFETY: every allocation is live and used only on `stream`, which is
    ///     // synchronized below before any of them is touched again.
    ///     unsafe {
    ///         k.strided_copy_batch(&stream, &[item(0), item(2)], d, 4, 1, 0,
    ///                              desc_host.as_mut_slice()?, dd, bytes)?
    ///     };
    /// }
    /// assert_eq!(stream.clone_dtoh(&dst)?, [3, 4, 1, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn strided_copy_batch(
        &self,
        stream: &CudaStream,
        items: &[CopyItem<'_>],
        dst: u64,
        dst_len: usize,
        elem_size: usize,
        swap_unit: usize,
        desc_host: &mut [u8],
        desc_dev: u64,
        desc_dev_len: usize,
    ) -> Result<()> {
        self.check_stream(stream)?;
        let batch = plan_batch(items, dst, dst_len, elem_size, swap_unit)?;
        if batch.plans.is_empty() {
            return Ok(());
        }
        let bytes = copy_batch_desc_bytes(batch.plans.len());
        if desc_host.len() < bytes || desc_dev_len < bytes || desc_dev == 0 {
            return Err(invalid(format!(
                "a batched copy of {} items needs {bytes} bytes of descriptors, got {} (host) \
                 and {desc_dev_len} (device at {desc_dev:#x})",
                batch.plans.len(),
                desc_host.len()
            )));
        }
        let (count, runs) = describe(batch.plans, items, dst, elem_size, desc_host);
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| CodecError::Cuda(format!("cuCtxSetCurrent failed: {e}")))?;
        // SAFETY: `desc_dev` holds at least `bytes` bytes and `desc_host` is pinned memory of
        // at least as many (checked above); the caller keeps both untouched until the
        // stream has passed this copy and the kernel after it.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(
                desc_dev,
                &desc_host[..bytes],
                stream.cu_stream(),
            )
        }
        .map_err(|e| CodecError::Cuda(format!("cuMemcpyHtoDAsync failed: {e}")))?;
        let cfg = LaunchConfig {
            grid_dim: (runs.min(self.max_blocks as u64).max(1) as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let unit = batch.unit as u32;
        // SAFETY: the descriptors (copied above, on this stream) describe validated plans:
        // every element each item addresses lies inside its source region and the
        // destination (plan_batch), the typed path is taken only where every address is
        // aligned to the word, sources are disjoint from the destination (plan_batch), and
        // the caller keeps every region valid until the stream has passed the kernel.
        let r = unsafe {
            stream
                .launch_builder(&self.copy_batch)
                .arg(&desc_dev)
                .arg(&count)
                .arg(&runs)
                .arg(&unit)
                .launch(cfg)
        };
        r.map(|_| ())
            .map_err(|e| CodecError::Cuda(format!("cuLaunchKernel failed: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy_batch::plan_batch;
    use crate::layout::Strided;

    fn field(d: &[u8], at: usize, bytes: usize) -> u64 {
        let mut w = [0u8; 8];
        w[..bytes].copy_from_slice(&d[at..at + bytes]);
        u64::from_ne_bytes(w)
    }

    #[test]
    fn descriptors_have_the_kernels_layout() {
        // Item 0: 5000 contiguous f32 at 16-aligned addresses (widened to 1250 16-byte
        // words, one run); item 1: 3 x 2 elements of 3 bytes, transposed (byte-wise path).
        let (src, dst) = (0x10_0000u64, 0x20_0000u64);
        let items = [
            CopyItem {
                src,
                src_len: 20_000,
                src_view: Strided {
                    offset: 0,
                    strides: &[4],
                },
                dst_view: Strided {
                    offset: 32,
                    strides: &[4],
                },
                shape: &[5000],
            },
            CopyItem {
                src: src + 0x8000,
                src_len: 18,
                src_view: Strided {
                    offset: 0,
                    strides: &[3, 9],
                },
                dst_view: Strided {
                    offset: 20_100,
                    strides: &[6, 3],
                },
                shape: &[3, 2],
            },
        ];
        let es = 4;
        let batch = plan_batch(&items[..1], dst, 40_000, es, 4).expect("valid");
        let mut out = vec![0u8; copy_batch_desc_bytes(1)];
        let (count, runs) = describe(batch.plans, &items[..1], dst, es, &mut out);
        assert_eq!((count, runs), (1, 1));
        assert_eq!(field(&out, 0, 8), src);
        assert_eq!(field(&out, 8, 8), dst + 32);
        assert_eq!(field(&out, 16, 8), 1250, "elements after widening");
        assert_eq!(field(&out, 24, 8), 0, "first run");
        assert_eq!(field(&out, 32, 4), 1, "ndim");
        assert_eq!(field(&out, 36, 4), 16, "word");
        assert_eq!(field(&out, 40, 4), 16, "element size");
        assert_eq!(field(&out, 44, 4), 0, "32-bit indices");
        assert_eq!(field(&out, 48, 8), 1250, "shape[0]");
        assert_eq!(field(&out, 48 + 8, 8), 1, "shape[1] (unused) is 1");
        assert_eq!(field(&out, 48 + 128, 8), 16, "src_strides[0]");
        assert_eq!(field(&out, 48 + 256, 8), 16, "dst_strides[0]");
        assert_eq!(ITEM_BYTES, 432);
        // 3-byte elements are never widened (no word is a multiple of 3): both items take
        // the byte-wise path, the first in 3 runs (6000 elements), the second in 1.
        let items3 = [
            CopyItem {
                src_view: Strided {
                    offset: 0,
                    strides: &[3],
                },
                dst_view: Strided {
                    offset: 32,
                    strides: &[3],
                },
                shape: &[6000],
                ..items[0]
            },
            items[1],
        ];
        let batch = plan_batch(&items3, dst, 40_000, 3, 0).expect("valid");
        let mut out = vec![0u8; copy_batch_desc_bytes(2)];
        let (count, runs) = describe(batch.plans, &items3, dst, 3, &mut out);
        assert_eq!((count, runs), (2, 4));
        assert_eq!(field(&out, 16, 8), 6000);
        assert_eq!(field(&out, 36, 4), 0, "byte-wise path");
        let second = &out[ITEM_BYTES..];
        assert_eq!(field(second, 0, 8), src + 0x8000);
        assert_eq!(field(second, 8, 8), dst + 20_100);
        assert_eq!(field(second, 16, 8), 6);
        assert_eq!(field(second, 24, 8), 3, "first run of the second item");
        assert_eq!(field(second, 36, 4), 0, "byte-wise path");
        assert_eq!(field(second, 40, 4), 3);
    }
}
