//! The batched strided copy's cases of the CUDA self-test: random batches on the device
//! against the host twin, and a batch with a bad item refused with nothing written.

use super::copy_batch::copy_batch_desc_bytes;
use super::self_test::{
    Layout, Rng, Tester, compare, cuda_err, medium_shape, random_layout, random_shape, valid_units,
};
use crate::copy_batch::CopyItem;
use crate::error::{CodecError, Result};
use crate::host;
use crate::layout::Strided;
use cudarc::driver::{DevicePtr, DevicePtrMut};

/// One random batch: each item's source layout in a source buffer of its own range, its
/// destination layout in a range of the destination of its own.
struct Batch {
    shapes: Vec<Vec<usize>>,
    /// (start of the item's range in the source buffer, its layout there)
    src: Vec<(usize, Layout)>,
    /// (start of the item's range in the destination, its layout there)
    dst: Vec<(usize, Layout)>,
    src_len: usize,
    dst_len: usize,
}

impl Batch {
    fn random(rng: &mut Rng, es: usize, large: bool) -> Batch {
        let count = if large {
            1 + rng.below(4)
        } else if rng.chance(0.1) {
            200 + rng.below(200)
        } else {
            1 + rng.below(8)
        };
        let mut b = Batch {
            shapes: vec![],
            src: vec![],
            dst: vec![],
            src_len: 0,
            dst_len: 0,
        };
        for _ in 0..count {
            let shape = if large {
                medium_shape(rng)
            } else {
                // at most ~20k elements an item, so batches of hundreds stay small
                let mut shape = random_shape(rng);
                while shape.iter().product::<usize>() > 20_000 {
                    if let Some(n) = shape.iter_mut().max() {
                        *n = n.div_ceil(2);
                    }
                }
                shape
            };
            let sl = random_layout(rng, &shape, es, true);
            let dl = random_layout(rng, &shape, es, false);
            let (s_at, d_at) = (b.src_len, b.dst_len);
            b.src_len += sl.len + rng.below(9);
            b.dst_len += dl.len + rng.below(9);
            b.src.push((s_at, sl));
            b.dst.push((d_at, dl));
            b.shapes.push(shape);
        }
        b
    }

    /// The items, with sources at `src_base` (an address) and destination offsets into one
    /// region.
    fn items<'a>(&'a self, src_base: u64, dst_views: &'a [Vec<isize>]) -> Vec<CopyItem<'a>> {
        (0..self.shapes.len())
            .map(|k| {
                let (s_at, sl) = &self.src[k];
                let (d_at, dl) = &self.dst[k];
                CopyItem {
                    src: src_base + *s_at as u64,
                    src_len: sl.len,
                    src_view: sl.view(),
                    dst_view: Strided {
                        offset: d_at + dl.offset,
                        strides: &dst_views[k],
                    },
                    shape: &self.shapes[k],
                }
            })
            .collect()
    }
}

impl Tester<'_> {
    /// Runs `items_for(src_addr)` as one batch on device copies of `src` and `init`; returns
    /// the call's outcome and the destination's bytes afterwards.
    fn batch_on_device<'a>(
        &self,
        src: &[u8],
        init: &[u8],
        items_for: impl Fn(u64) -> Vec<CopyItem<'a>>,
        es: usize,
        unit: usize,
    ) -> Result<(Result<()>, Vec<u8>)> {
        let s = self.upload(src)?;
        let mut d = self.upload(init)?;
        let bytes = copy_batch_desc_bytes(items_for(0).len()).max(1);
        let mut desc = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(cuda_err("cuMemAllocAsync"))?;
        // SAFETY: u8 has no invalid bit patterns; the memory is written before it is read.
        let mut pinned = unsafe { self.stream.context().alloc_pinned::<u8>(bytes) }
            .map_err(cuda_err("cuMemHostAlloc"))?;
        let r = {
            let (sp, _gs) = s.device_ptr(self.stream);
            let (dp, _gd) = d.device_ptr_mut(self.stream);
            let (descp, _gdesc) = desc.device_ptr_mut(self.stream);
            let host = pinned.as_mut_slice().map_err(cuda_err("cuMemHostAlloc"))?;
            let items = items_for(sp);
            // SAFETY: fresh device copies of `src`/`init` (lengths as given, distinct), and
            // descriptor memory of `bytes` bytes on both sides, untouched until the stream is
            // synchronized below.
            unsafe {
                self.k.strided_copy_batch(
                    self.stream,
                    &items,
                    dp,
                    init.len(),
                    es,
                    unit,
                    host,
                    descp,
                    bytes,
                )
            }
        };
        let out = self.download(&d)?;
        self.stream
            .synchronize()
            .map_err(cuda_err("cuStreamSynchronize"))?;
        drop(pinned);
        Ok((r, out))
    }

    pub(super) fn copy_batch_case(&self, rng: &mut Rng, case: usize, large: bool) -> Result<()> {
        let es = rng.pick(&[1usize, 2, 3, 4, 6, 8, 12, 16]);
        let unit = rng.pick(&valid_units(es));
        let b = Batch::random(rng, es, large);
        let src = rng.bytes(b.src_len.max(1));
        let init = rng.bytes(b.dst_len.max(1));
        let dst_views: Vec<Vec<isize>> = b.dst.iter().map(|(_, l)| l.strides.clone()).collect();
        let mut want = init.clone();
        let host_items = b.items(src.as_ptr() as u64, &dst_views);
        // SAFETY: the items' sources are ranges of `src` (within its length), `want` is a
        // distinct live buffer of its length.
        unsafe { host::strided_copy_batch(&host_items, want.as_mut_ptr(), want.len(), es, unit)? };
        let (r, got) = self.batch_on_device(&src, &init, |a| b.items(a, &dst_views), es, unit)?;
        r?;
        compare(&got, &want, || {
            format!(
                "strided_copy_batch case {case}: {} items, elem {es}, swap {unit}, shapes {:?}",
                b.shapes.len(),
                &b.shapes[..b.shapes.len().min(4)]
            )
        })
    }

    /// A batch whose last item ends past the destination: refused, nothing written.
    pub(super) fn copy_batch_refused(&self) -> Result<()> {
        let src = vec![7u8; 64];
        let init = vec![0u8; 64];
        let strides = [1isize];
        let item = |a: u64, at: usize| CopyItem {
            src: a,
            src_len: 64,
            src_view: Strided {
                offset: 0,
                strides: &strides,
            },
            dst_view: Strided {
                offset: at,
                strides: &strides,
            },
            shape: &[32],
        };
        let (r, got) =
            self.batch_on_device(&src, &init, |a| vec![item(a, 0), item(a, 40)], 1, 0)?;
        match r {
            Err(CodecError::InvalidLayout(msg)) if msg.contains("item 1") => {}
            other => {
                return Err(CodecError::Cuda(format!(
                    "self-test: a batch with an out-of-bounds item was not refused as expected: \
                     {other:?}"
                )));
            }
        }
        compare(&got, &init, || {
            "strided_copy_batch refusal: the destination changed".into()
        })
    }
}
