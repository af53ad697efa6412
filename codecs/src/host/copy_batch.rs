//! The host twin of the batched strided copy.

use super::copy::run;
use super::stream_store::Stores;
use crate::copy_batch::{CopyItem, plan_batch};
use crate::error::Result;

/// Copies every item of `items` into the `dst_len`-byte destination region `dst`: for each,
/// what [`strided_copy`](super::strided_copy) does with the item's source region and views,
/// all with `elem_size`-byte elements and the same `swap_unit` (0 or 1: no swap). The
/// reference of the CUDA kernel
/// [`CudaKernels::strided_copy_batch`](crate::cuda::CudaKernels::strided_copy_batch).
///
/// Every item is checked first (views in bounds, no source overlapping the destination);
/// when one fails, the error names it and nothing is written. Items run in order, so where
/// two items write the same destination element the later one's value stays.
///
/// # Safety
///
/// * Each item's `src` must be the address of host memory valid for reads of `src_len` bytes
///   (it may be 0 when the item's shape is empty), and `dst` valid for writes of `dst_len`
///   bytes.
/// * Nothing else may write the sources or access the destination during the call.
///
/// ```
/// use zarrbuf_codecs::{host, CopyItem, Strided};
/// let (a, b) = ([1u8, 2], [3u8, 4]);
/// let mut dst = [0u8; 4];
/// let item = |s: &[u8; 2], at| CopyItem {
///     src: s.as_ptr() as u64,
///     src_len: 2,
///     src_view: Strided { offset: 0, strides: &[1] },
///     dst_view: Strided { offset: at, strides: &[1] },
///     shape: &[2],
/// };
/// // SAFETY: the sources and `dst` are live arrays of the stated lengths, all distinct.
/// unsafe { host::strided_copy_batch(&[item(&b, 0), item(&a, 2)], dst.as_mut_ptr(), 4, 1, 0)? };
/// assert_eq!(dst, [3, 4, 1, 2]);
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub unsafe fn strided_copy_batch(
    items: &[CopyItem<'_>],
    dst: *mut u8,
    dst_len: usize,
    elem_size: usize,
    swap_unit: usize,
) -> Result<()> {
    let batch = plan_batch(items, dst as u64, dst_len, elem_size, swap_unit)?;
    let stores = Stores::for_destination(dst_len);
    for (i, plan) in &batch.plans {
        let src = items[*i].src as usize as *const u8;
        // SAFETY: the plan's elements are in bounds of the item's source region and of the
        // destination (plan_batch), which are valid (caller) and disjoint (plan_batch).
        unsafe { run(plan, src, dst, elem_size, batch.unit, false, stores) };
    }
    stores.finish();
    Ok(())
}

/// Safe form of [`strided_copy_batch`]: item `i` reads `sources[i]` (its `src` and
/// `src_len` fields are ignored and replaced by the slice's).
///
/// ```
/// use zarrbuf_codecs::{host, CopyItem, Strided};
/// let src = 0x0102u16.to_le_bytes();
/// let mut dst = [0u8; 4];
/// let item = CopyItem {
///     src: 0,
///     src_len: 0,
///     src_view: Strided { offset: 0, strides: &[0] },
///     dst_view: Strided { offset: 0, strides: &[2] },
///     shape: &[2],
/// };
/// host::strided_copy_batch_slices(&[&src], &[item], &mut dst, 2, 2)?;
/// assert_eq!(dst, [1, 2, 1, 2]);
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn strided_copy_batch_slices(
    sources: &[&[u8]],
    items: &[CopyItem<'_>],
    dst: &mut [u8],
    elem_size: usize,
    swap_unit: usize,
) -> Result<()> {
    if sources.len() != items.len() {
        return Err(crate::error::invalid(format!(
            "{} sources for {} items of a batched copy",
            sources.len(),
            items.len()
        )));
    }
    let items: Vec<CopyItem<'_>> = items
        .iter()
        .zip(sources)
        .map(|(it, s)| CopyItem {
            src: s.as_ptr() as u64,
            src_len: s.len(),
            ..*it
        })
        .collect();
    // SAFETY: every source is a live slice of its length, and shared slices cannot overlap
    // the mutable destination.
    unsafe { strided_copy_batch(&items, dst.as_mut_ptr(), dst.len(), elem_size, swap_unit) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Strided;
    use crate::host::strided_copy_slices;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A random item: shape, a source view (any order, a reversed or broadcast axis) over a
    /// source of its own, and a destination view at `dst_at` (C order, some axes reversed).
    struct Case {
        src: Vec<u8>,
        src_off: usize,
        src_strides: Vec<isize>,
        dst_off: usize,
        dst_strides: Vec<isize>,
        shape: Vec<usize>,
    }

    fn case(rng: &mut StdRng, es: usize, dst_at: usize) -> (Case, usize) {
        let ndim = rng.random_range(1..=4);
        let shape: Vec<usize> = (0..ndim).map(|_| rng.random_range(1..=5)).collect();
        // source: a permuted C layout with padding, one axis maybe reversed or broadcast
        let mut order: Vec<usize> = (0..ndim).collect();
        order.sort_by_key(|_| rng.random::<u32>());
        let mut src_strides = vec![0isize; ndim];
        let mut acc = es + es * rng.random_range(0..2);
        for &d in order.iter().rev() {
            src_strides[d] = acc as isize;
            acc *= shape[d];
        }
        let mut src_off = rng.random_range(0..3) * es;
        let src_len = src_off + acc + rng.random_range(0..8);
        let d = rng.random_range(0..ndim);
        match rng.random_range(0..3) {
            0 => {
                src_off += (shape[d] - 1) * src_strides[d] as usize;
                src_strides[d] = -src_strides[d];
            }
            1 => src_strides[d] = 0,
            _ => {}
        }
        let mut dst_strides = vec![0isize; ndim];
        let mut acc = es;
        for k in (0..ndim).rev() {
            dst_strides[k] = acc as isize;
            acc *= shape[k];
        }
        let mut dst_off = dst_at;
        if rng.random_bool(0.3) {
            let k = rng.random_range(0..ndim);
            dst_off += (shape[k] - 1) * dst_strides[k] as usize;
            dst_strides[k] = -dst_strides[k];
        }
        let src = (0..src_len).map(|_| rng.random()).collect();
        let c = Case {
            src,
            src_off,
            src_strides,
            dst_off,
            dst_strides,
            shape,
        };
        (c, acc)
    }

    fn item(c: &Case) -> CopyItem<'_> {
        CopyItem {
            src: c.src.as_ptr() as u64,
            src_len: c.src.len(),
            src_view: Strided {
                offset: c.src_off,
                strides: &c.src_strides,
            },
            dst_view: Strided {
                offset: c.dst_off,
                strides: &c.dst_strides,
            },
            shape: &c.shape,
        }
    }

    #[test]
    fn batch_equals_separate_copies() {
        let mut rng = StdRng::seed_from_u64(30);
        // Under Miri (scripts/miri.sh), two rounds of each element size: every path, in
        // minutes rather than hours.
        let rounds = if cfg!(miri) { 14 } else { 300 };
        for round in 0..rounds {
            let es = [1, 2, 3, 4, 8, 12, 16][round % 7];
            let units: Vec<usize> = [0, 1, 2, 4, 8, 16]
                .into_iter()
                .filter(|&u| u < 2 || es % u == 0)
                .collect();
            let unit = units[rng.random_range(0..units.len())];
            let mut cases = Vec::new();
            let mut at = rng.random_range(0..2) * es;
            for _ in 0..rng.random_range(0..6) {
                let (c, bytes) = case(&mut rng, es, at);
                at += bytes + rng.random_range(0..3) * es;
                cases.push(c);
            }
            let len = at + 5;
            let mut want = vec![0xa5u8; len];
            for c in &cases {
                let it = item(c);
                strided_copy_slices(
                    &c.src,
                    it.src_view,
                    &mut want,
                    it.dst_view,
                    &c.shape,
                    es,
                    unit,
                )
                .expect("a valid copy");
            }
            let items: Vec<CopyItem<'_>> = cases.iter().map(item).collect();
            let mut got = vec![0xa5u8; len];
            // SAFETY: every source is a live Vec of its stated length, distinct from `got`.
            unsafe { strided_copy_batch(&items, got.as_mut_ptr(), len, es, unit) }
                .expect("a valid batch");
            assert_eq!(got, want, "round {round}: es {es}, swap {unit}");
        }
    }

    #[test]
    fn out_of_bounds_item_refused_and_nothing_written() {
        let src = [7u8; 8];
        let ok = CopyItem {
            src: src.as_ptr() as u64,
            src_len: 8,
            src_view: Strided {
                offset: 0,
                strides: &[1],
            },
            dst_view: Strided {
                offset: 0,
                strides: &[1],
            },
            shape: &[8],
        };
        let past_end = CopyItem {
            dst_view: Strided {
                offset: 4,
                strides: &[1],
            },
            ..ok
        };
        let mut dst = [0u8; 10];
        let err = strided_copy_batch_slices(&[&src, &src], &[ok, past_end], &mut dst, 1, 0)
            .expect_err("item 1 ends past the destination");
        let msg = err.to_string();
        assert!(
            msg.contains("item 1") && msg.contains("destination"),
            "{msg}"
        );
        assert_eq!(dst, [0; 10], "nothing written");
        let src_past = CopyItem {
            src_view: Strided {
                offset: 1,
                strides: &[1],
            },
            ..ok
        };
        let err = strided_copy_batch_slices(&[&src, &src], &[ok, src_past], &mut dst, 1, 0)
            .expect_err("item 1 reads past its source");
        assert!(err.to_string().contains("item 1"), "{err}");
        assert_eq!(dst, [0; 10]);
        let err = strided_copy_batch_slices(&[&src], &[ok], &mut dst, 2, 4)
            .expect_err("swap unit 4 does not divide 2");
        assert!(err.to_string().contains("swap unit"), "{err}");
    }

    #[test]
    fn source_overlapping_destination_refused() {
        let mut buf = [1u8; 16];
        let p = buf.as_mut_ptr();
        let it = CopyItem {
            src: p as u64 + 8,
            src_len: 8,
            src_view: Strided {
                offset: 0,
                strides: &[1],
            },
            dst_view: Strided {
                offset: 0,
                strides: &[1],
            },
            shape: &[8],
        };
        // SAFETY: both ranges are inside `buf`; the call must refuse before touching them.
        let err = unsafe { strided_copy_batch(&[it], p, 16, 1, 0) }.expect_err("overlap");
        assert!(err.to_string().contains("overlaps"), "{err}");
        assert_eq!(buf, [1; 16]);
    }

    #[test]
    fn empty_items_and_batches_do_nothing() {
        let mut dst = [3u8; 4];
        strided_copy_batch_slices(&[], &[], &mut dst, 4, 4).expect("empty batch");
        let empty = CopyItem {
            src: 0,
            src_len: 0,
            src_view: Strided {
                offset: 0,
                strides: &[4],
            },
            dst_view: Strided {
                offset: 0,
                strides: &[4],
            },
            shape: &[0],
        };
        // SAFETY: the only item is empty (a null source is allowed for it).
        unsafe { strided_copy_batch(&[empty], dst.as_mut_ptr(), 4, 4, 4) }.expect("empty item");
        assert_eq!(dst, [3; 4]);
    }
}
