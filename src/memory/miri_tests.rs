//! Tests of the unsafe memory layer through the crate's own API, sized to run under Miri
//! (`scripts/miri.sh`): every raw pointer the layer hands out — host allocations, recycled
//! cache blocks, foreign owners, slices, ndarray views, the host kernels' strided copies —
//! is used here in small, checkable ways, so that Miri can see out-of-bounds or misaligned
//! accesses, reads of uninitialised bytes, aliasing violations, data races on the borrow flag,
//! leaks and double frees. They run natively with `cargo test` as well.
//!
//! Sizes stay tiny except for the block cache, whose 4 MiB floor (`cache::MIN_CACHED`) is
//! kept: under Miri a block of that size costs little as long as no test walks it byte by
//! byte (compare whole slices instead: `==` on `[u8]` is one memcmp for Miri).

// `&[0..2]` is a subset of a 1-d array (one range per dimension), not a mistaken range.
#![allow(clippy::single_range_in_vec_init)]

use super::cache::{self, BlockKind};
use super::host_alloc::MIN_ALIGN;
use super::{HostAlloc, Init};
use crate::data_types::ByteOrder;
use crate::{Buffer, BufferPrototype, DataType, Error, NDBuffer, Order};
use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

fn cpu() -> BufferPrototype {
    BufferPrototype::cpu()
}

// ---- Buffer -------------------------------------------------------------------------------

#[test]
fn slices_share_storage_and_stay_in_bounds() {
    let b = Buffer::from_vec((0u8..16).collect());
    let tail = b.slice(4..);
    let mid = tail.slice(2..6);
    assert_eq!((mid.offset(), mid.len(), mid.total_size()), (6, 4, 16));
    assert_eq!(mid.storage_id(), b.storage_id());
    assert_ne!(mid.id(), b.id());
    assert_eq!(&*mid.as_host_bytes().unwrap(), &[6, 7, 8, 9]);
    assert!(matches!(b.try_slice(10..17), Err(Error::OutOfBounds(_))));
    assert!(matches!(tail.try_slice(0..13), Err(Error::OutOfBounds(_))));
    assert!(matches!(
        b.try_slice(..=usize::MAX),
        Err(Error::OutOfBounds(_))
    ));
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = b.try_slice(5..4);
    assert!(matches!(reversed, Err(Error::OutOfBounds(_))));
    // Zero-length views, at the end and of nothing at all.
    assert!(b.slice(16..).as_host_bytes().unwrap().is_empty());
    assert!(Buffer::create_zero_length().to_vec().unwrap().is_empty());
    assert!(
        Buffer::zeros(0, &cpu())
            .unwrap()
            .to_vec()
            .unwrap()
            .is_empty()
    );
    // Public constructors hand out initialised memory, even `empty`.
    assert_eq!(
        Buffer::empty(5, &cpu()).unwrap().to_vec().unwrap(),
        vec![0; 5]
    );

    // A write through one handle is seen through every view.
    let mut w = b.clone();
    w.with_host_bytes_mut(|bytes| {
        bytes[6] = 60;
        Ok(())
    })
    .unwrap();
    assert_eq!(mid.to_vec().unwrap(), vec![60, 7, 8, 9]);
    assert_eq!(mid.to_bytes().unwrap().as_ref(), &[60, 7, 8, 9]);
}

#[test]
fn copies_fills_and_concat() {
    let mut dst = Buffer::zeros(8, &cpu()).unwrap();
    assert_eq!(
        dst.as_host_bytes().unwrap().as_ptr() as usize % MIN_ALIGN,
        0
    );
    dst.slice(2..5)
        .copy_from(&Buffer::from_vec(vec![1, 2, 3]))
        .unwrap();
    assert_eq!(dst.to_vec().unwrap(), vec![0, 0, 1, 2, 3, 0, 0, 0]);
    assert!(matches!(
        dst.copy_from(&Buffer::from_vec(vec![1; 3])),
        Err(Error::ShapeMismatch(_))
    ));
    // Overlapping copies within one allocation (memmove semantics), both directions.
    dst.slice(0..6).copy_from(&dst.slice(2..8)).unwrap();
    assert_eq!(dst.to_vec().unwrap(), vec![1, 2, 3, 0, 0, 0, 0, 0]);
    dst.slice(1..8).copy_from(&dst.slice(0..7)).unwrap();
    assert_eq!(dst.to_vec().unwrap(), vec![1, 1, 2, 3, 0, 0, 0, 0]);
    dst.slice(4..).fill_bytes(9).unwrap();
    assert_eq!(dst.to_vec().unwrap(), vec![1, 1, 2, 3, 9, 9, 9, 9]);

    let parts = [
        Buffer::from_vec(vec![1]),
        Buffer::create_zero_length(),
        dst.slice(6..8),
        Buffer::from_bytes(Bytes::from_static(b"xy")),
    ];
    let all = Buffer::concat(&parts, &cpu()).unwrap();
    assert_eq!(all.to_vec().unwrap(), vec![1, 9, 9, b'x', b'y']);
    let both = parts[0].combine(&parts[2..]).unwrap();
    assert!(both.content_eq(&all).unwrap());
    let copy = all.copy_to_new(&cpu()).unwrap();
    assert_ne!(copy.storage_id(), all.storage_id());
    assert!(copy.content_eq(&all).unwrap());
    assert_eq!(
        Buffer::from_buffer(&all, &cpu()).unwrap().storage_id(),
        all.storage_id()
    );
    let mut target = Buffer::zeros(5, &cpu()).unwrap();
    all.copy_to(&mut target).unwrap();
    assert_eq!(target.to_vec().unwrap(), all.to_vec().unwrap());
    assert_eq!(
        Buffer::from_slice(&[4, 5], &cpu())
            .unwrap()
            .to_vec()
            .unwrap(),
        vec![4, 5]
    );
}

#[test]
fn immutable_bytes_are_never_written() {
    let b = Buffer::from_bytes(Bytes::from_static(b"abcdef"));
    let mut part = b.slice(1..3);
    assert!(matches!(part.fill_bytes(0), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        part.with_host_bytes_mut(|_| Ok(())),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        part.copy_from(&Buffer::from_vec(vec![1, 2])),
        Err(Error::InvalidArgument(_))
    ));
    let mut nd = NDBuffer::from_buffer(part, DataType::UInt8, &[2], Order::C).unwrap();
    assert!(matches!(nd.fill_with(1u8), Err(Error::InvalidArgument(_))));
    assert_eq!(b.to_vec().unwrap(), b"abcdef");
    // Heap-backed Bytes: the copy owns new memory, the original is untouched.
    let heap = Buffer::from_bytes(Bytes::from(vec![1u8, 2, 3]));
    let mut copy = heap.copy_to_new(&cpu()).unwrap();
    copy.fill_bytes(0).unwrap();
    assert_eq!(heap.to_vec().unwrap(), vec![1, 2, 3]);
}

/// An owner that counts its drops, holding the memory a buffer wraps.
struct CountingOwner {
    _data: Vec<u64>,
    drops: Arc<AtomicUsize>,
}

impl Drop for CountingOwner {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn foreign_owner_is_dropped_exactly_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    // A Vec, not a Box: moving a Box retags it as unique (Stacked Borrows), which would
    // invalidate the pointer taken before the move; a Vec's heap block is not retagged.
    let mut data = vec![1u64, 2, 3, 4];
    let ptr = data.as_mut_ptr().cast::<u8>();
    let owner = CountingOwner {
        _data: data,
        drops: drops.clone(),
    };
    // SAFETY: the Vec's 32 bytes are owned by `owner` and written only through zarrbuf
    // handles from here on (moving the Vec does not move its heap block).
    let b = unsafe { Buffer::from_host_owner(ptr, 32, Box::new(owner)) };
    let view = b.slice(8..24);
    let clone = b.clone();
    drop(b);
    let mut nd = NDBuffer::from_buffer(view.clone(), DataType::UInt64, &[2], Order::C).unwrap();
    drop(view);
    nd.fill_with(7u64).unwrap();
    assert_eq!(nd.as_ndarray::<u64>().unwrap()[[1]], 7);
    let whole = NDBuffer::from_buffer(clone.clone(), DataType::UInt64, &[4], Order::C).unwrap();
    assert_eq!(whole.to_vec::<u64>().unwrap(), vec![1, 7, 7, 4]);
    drop((clone, whole));
    assert_eq!(drops.load(Ordering::SeqCst), 0, "a view is still alive");
    let copy = nd.copy().unwrap();
    drop(nd);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(copy.to_vec::<u64>().unwrap(), vec![7, 7]);
    drop(copy);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_live_host_borrow_makes_writes_busy() {
    let b = Buffer::from_vec(vec![0u8; 8]);
    let mut other = b.slice(4..);
    {
        let guard = b.as_host_bytes().unwrap();
        assert!(matches!(other.fill_bytes(1), Err(Error::Busy(_))));
        assert!(matches!(
            other.with_host_bytes_mut(|_| Ok(())),
            Err(Error::Busy(_))
        ));
        assert!(matches!(
            other.copy_from(&Buffer::from_vec(vec![1; 4])),
            Err(Error::Busy(_))
        ));
        // Readers share: a second borrow and copies out of the borrowed memory work.
        let second = other.as_host_bytes().unwrap();
        assert_eq!(&guard[4..], &second[..]);
        let mut out = Buffer::zeros(4, &cpu()).unwrap();
        out.copy_from(&other).unwrap();
        assert_eq!(guard[0], 0);
    }
    other.fill_bytes(1).unwrap();

    // While a write runs, every other handle is refused, readers and writers alike.
    let mut w = b.clone();
    w.with_host_bytes_mut(|bytes| {
        assert!(matches!(b.as_host_bytes(), Err(Error::Busy(_))));
        assert!(matches!(other.clone().fill_bytes(2), Err(Error::Busy(_))));
        assert!(matches!(b.to_vec(), Err(Error::Busy(_))));
        bytes[0] = 7;
        Ok(())
    })
    .unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![7, 0, 0, 0, 1, 1, 1, 1]);

    // An ndarray view holds the same borrow as `as_host_bytes`.
    let nd = NDBuffer::from_buffer(b.clone(), DataType::UInt8, &[2, 4], Order::C).unwrap();
    let view = nd.as_ndarray::<u8>().unwrap();
    assert!(matches!(nd.clone().fill_with(3u8), Err(Error::Busy(_))));
    let row = NDBuffer::from_vec(vec![5u8; 4], &[1, 4]).unwrap();
    assert!(matches!(
        nd.clone().set(&[0..1, 0..4], &row),
        Err(Error::Busy(_))
    ));
    assert_eq!(view[[1, 3]], 1);
    drop(view);
    nd.clone().set(&[0..1, 0..4], &row).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![5, 5, 5, 5, 1, 1, 1, 1]);
}

#[test]
fn borrow_flag_orders_threads() {
    // Threads write and read one allocation through their own handles; the borrow flag must
    // order every access (Miri checks for data races), and refusals are `Busy`, never torn.
    let b = Buffer::zeros(4, &cpu()).unwrap();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || {
                let mut written = 0;
                while written < 3 {
                    let mut w = b.clone();
                    let r = w.with_host_bytes_mut(|bytes| {
                        for x in bytes.iter_mut() {
                            *x += 1;
                        }
                        Ok(())
                    });
                    match r {
                        Ok(()) => written += 1,
                        Err(Error::Busy(_)) => std::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                    match b.as_host_bytes() {
                        Ok(bytes) => assert!(bytes.iter().all(|&x| x == bytes[0])),
                        Err(Error::Busy(_)) => std::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(b.to_vec().unwrap(), vec![6; 4]);
}

#[test]
fn cuda_is_absent_under_miri() {
    if !cfg!(miri) {
        return;
    }
    assert!(matches!(
        crate::cuda::cuda_device_count(),
        Err(Error::DeviceUnavailable(_))
    ));
    assert!(matches!(
        Buffer::zeros(8, &BufferPrototype::cuda(0)),
        Err(Error::DeviceUnavailable(_))
    ));
    assert!(!crate::Device::Cuda(0).is_available());
}

// ---- NDBuffer -----------------------------------------------------------------------------

#[test]
fn ndbuffer_views() {
    let a = NDBuffer::from_vec((0i32..12).collect(), &[3, 4]).unwrap();
    let t = a.transpose(&[1, 0]).unwrap();
    assert_eq!(t.shape(), &[4, 3]);
    assert!(t.is_f_contiguous() && !t.is_c_contiguous());
    assert_eq!(t.to_ndarray::<i32>().unwrap()[[3, 2]], 11);
    let sub = a.get(&[1..3, 1..3]).unwrap();
    assert_eq!(sub.buffer().storage_id(), a.buffer().storage_id());
    assert_eq!(sub.to_vec::<i32>().unwrap(), vec![5, 6, 9, 10]);
    let sub_t = sub.transpose(&[1, 0]).unwrap().copy().unwrap();
    assert!(sub_t.is_c_contiguous());
    assert_eq!(sub_t.to_vec::<i32>().unwrap(), vec![5, 9, 6, 10]);
    let r = a.reshape(&[2, 6]).unwrap();
    assert_eq!(r.buffer().storage_id(), a.buffer().storage_id());
    assert_eq!(r.at(&[1, 0]).unwrap().item::<i32>().unwrap(), 6);
    let flat = t.reshape(&[12]).unwrap();
    assert_eq!(flat.to_vec::<i32>().unwrap()[..4], [0, 4, 8, 1]);
    assert_eq!(a.squeeze(&[]).unwrap().shape(), &[3, 4]);
    assert!(matches!(a.get(&[0..4, 0..1]), Err(Error::OutOfBounds(_))));
    assert!(matches!(a.get(&[0..1]), Err(Error::ShapeMismatch(_))));
    assert!(matches!(a.at(&[3, 0]), Err(Error::OutOfBounds(_))));
    assert!(a.reshape(&[5, 2]).is_err());

    {
        let v = a.as_ndarray::<i32>().unwrap();
        assert_eq!(v[[2, 3]], 11);
        assert_eq!(v.sum(), 66);
        let vt = t.as_ndarray::<i32>().unwrap();
        assert_eq!(vt[[3, 2]], 11);
        let vs = sub.as_ndarray::<i32>().unwrap();
        assert_eq!(vs.iter().copied().collect::<Vec<_>>(), vec![5, 6, 9, 10]);
    }
    assert!(matches!(a.as_ndarray::<u32>(), Err(Error::DataType(_))));
    assert!(a.array_equal(&a.copy().unwrap(), false).unwrap());
    assert!(t.array_equal(&t.copy().unwrap(), false).unwrap());
    assert!(!a.array_equal(&t, false).unwrap());
    assert!(!a.array_equal(&r, false).unwrap());

    // Zero-sized and 0-d arrays.
    let e = NDBuffer::zeros(&[0, 3], DataType::Float64, Order::C, &cpu()).unwrap();
    assert_eq!(e.as_ndarray::<f64>().unwrap().len(), 0);
    assert!(e.to_vec::<f64>().unwrap().is_empty());
    assert!(e.get(&[0..0, 1..2]).unwrap().is_empty());
    assert!(e.copy().unwrap().array_equal(&e, false).unwrap());
    let s = NDBuffer::from_vec(vec![2.5f32], &[]).unwrap();
    assert_eq!(s.item::<f32>().unwrap(), 2.5);
    assert_eq!(s.as_ndarray::<f32>().unwrap()[[]], 2.5);
    assert_eq!(s.as_scalar().unwrap(), 2.5f32.to_ne_bytes());
}

#[test]
fn ndbuffer_writes_casts_and_byte_orders() {
    let mut z = NDBuffer::zeros(&[2, 3], DataType::UInt16, Order::F, &cpu()).unwrap();
    assert!(z.is_f_contiguous());
    z.fill_with(7u16).unwrap();
    let src = NDBuffer::from_vec(vec![1u16, 2, 3, 4], &[2, 2]).unwrap();
    z.set(&[0..2, 1..3], &src).unwrap();
    assert_eq!(z.to_vec::<u16>().unwrap(), vec![7, 1, 2, 7, 3, 4]);
    // A source that views the destination's own memory is copied out first.
    let own = z.get(&[0..2, 0..2]).unwrap();
    z.set(&[0..2, 1..3], &own).unwrap();
    assert_eq!(z.to_vec::<u16>().unwrap(), vec![7, 7, 1, 7, 7, 3]);
    assert!(matches!(
        z.set(&[0..1, 0..2], &src),
        Err(Error::ShapeMismatch(_))
    ));
    assert!(matches!(z.to_vec::<u32>(), Err(Error::DataType(_))));
    assert!(matches!(z.fill(&[1]), Err(Error::DataType(_))));

    let big = z.to_byte_order(ByteOrder::Big).unwrap();
    assert_eq!(big.to_vec::<u16>().unwrap(), z.to_vec::<u16>().unwrap());
    assert_eq!(&big.buffer().to_vec().unwrap()[..2], &[0, 7]);
    if ByteOrder::native() != ByteOrder::Big {
        assert!(matches!(
            big.as_ndarray::<u16>(),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(big.array_equal(&z, false).unwrap());
    let mut big_w = big.clone();
    big_w.fill_with(0x0102u16).unwrap();
    assert_eq!(&big.buffer().to_vec().unwrap()[..2], &[1, 2]);

    let f = NDBuffer::from_vec(vec![1.5f32, -2.5, 300.0, f32::NAN], &[4]).unwrap();
    assert_eq!(
        f.astype(DataType::Int32).unwrap().to_vec::<i32>().unwrap()[..3],
        [1, -2, 300]
    );
    let wide = f.astype(DataType::Float64).unwrap();
    assert!(wide.array_equal(&wide.copy().unwrap(), true).unwrap());
    assert!(!wide.array_equal(&wide.copy().unwrap(), false).unwrap());
    assert!(
        big.astype(DataType::Float32)
            .unwrap()
            .all_equal(&258.0f32.to_ne_bytes(), false)
            .unwrap()
    );
    let strided = f.get(&[1..4]).unwrap().astype(DataType::Float64).unwrap();
    assert_eq!(strided.to_vec::<f64>().unwrap()[..2], [-2.5, 300.0]);

    // The checks of from_parts: extents, dimensions and strides.
    let bytes = Buffer::from_vec(vec![0u8; 8]);
    let native = ByteOrder::native();
    assert!(matches!(
        NDBuffer::from_parts(bytes.clone(), DataType::UInt16, &[2, 3], &[6, 2], 0, native),
        Err(Error::OutOfBounds(_))
    ));
    assert!(matches!(
        NDBuffer::from_parts(bytes.clone(), DataType::UInt16, &[2], &[2, 2], 0, native),
        Err(Error::ShapeMismatch(_))
    ));
    assert!(matches!(
        NDBuffer::from_parts(bytes.clone(), DataType::UInt16, &[2], &[-2], 2, native),
        Err(Error::InvalidArgument(_))
    ));
    let odd = NDBuffer::from_parts(bytes, DataType::UInt16, &[2], &[3], 1, native).unwrap();
    assert!(matches!(
        odd.as_ndarray::<u16>(),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(odd.to_vec::<u16>().unwrap(), vec![0, 0]);
}

#[test]
fn bool_arrays_never_expose_other_bytes() {
    let bools = NDBuffer::from_buffer(
        Buffer::from_vec(vec![0, 1, 2]),
        DataType::Bool,
        &[3],
        Order::C,
    )
    .unwrap();
    assert!(matches!(
        bools.as_ndarray::<bool>(),
        Err(Error::DataType(_))
    ));
    assert!(bools.to_vec::<bool>().is_err());
    let ok = bools.get(&[0..2]).unwrap();
    assert_eq!(ok.to_vec::<bool>().unwrap(), vec![false, true]);
    let mut owned = NDBuffer::from_vec(vec![true, false], &[2]).unwrap();
    owned.fill_with(true).unwrap();
    assert!(owned.as_ndarray::<bool>().unwrap()[[1]]);
}

#[test]
fn misaligned_elements_are_copied_not_viewed() {
    // u16 elements starting at an odd address inside a 64-byte aligned allocation.
    let b = Buffer::zeros(10, &cpu()).unwrap();
    let mut odd = NDBuffer::from_buffer(b.slice(1..9), DataType::UInt16, &[4], Order::C).unwrap();
    odd.fill_with(0x0101u16).unwrap();
    assert!(matches!(
        odd.as_ndarray::<u16>(),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(odd.to_vec::<u16>().unwrap(), vec![0x0101; 4]);
    assert_eq!(odd.to_ndarray::<u16>().unwrap()[[3]], 0x0101);
    assert!(odd.array_equal(&odd.copy().unwrap(), false).unwrap());
    assert_eq!(b.to_vec().unwrap()[9], 0);
}

#[test]
fn decode_targets_write_only_their_window() {
    use zarrs::array::{ArrayBytesDecodeIntoTarget, ArraySubset};
    // A 3x4 uint16 parent in an 8-byte-offset slice of a larger buffer; zarrs writes the
    // window [1..3, 1..3] through the target.
    let b = Buffer::zeros(8 + 24 + 8, &cpu()).unwrap();
    let mut parent = b.slice(8..32);
    let src: Vec<u8> = (1u16..=4).flat_map(|v| v.to_ne_bytes()).collect();
    parent
        .with_host_bytes_mut(|bytes| {
            let window = ArraySubset::new_with_ranges(&[1..3, 1..3]);
            super::with_decode_target(bytes, 2, &[3, 4], window, |target| {
                let ArrayBytesDecodeIntoTarget::Fixed(view) = target else {
                    panic!("a fixed-size target");
                };
                view.copy_from_slice(&src).unwrap();
                assert!(view.copy_from_slice(&src[..6]).is_err());
                Ok(())
            })
        })
        .unwrap();
    let a = NDBuffer::from_buffer(parent.clone(), DataType::UInt16, &[3, 4], Order::C).unwrap();
    assert_eq!(
        a.to_vec::<u16>().unwrap(),
        vec![0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0]
    );
    assert_eq!(b.to_vec().unwrap()[..8], [0; 8]);
    assert_eq!(b.to_vec().unwrap()[32..], [0; 8]);
    // A window outside the parent, or bytes that do not match its shape, are errors.
    parent
        .with_host_bytes_mut(|bytes| {
            let outside = ArraySubset::new_with_ranges(&[2..4, 0..1]);
            let r = super::with_decode_target(bytes, 2, &[3, 4], outside, |_| Ok(()));
            assert!(matches!(r, Err(Error::ShapeMismatch(_))));
            let window = ArraySubset::new_with_ranges(&[0..1, 0..1]);
            let r = super::with_decode_target(bytes, 2, &[4, 4], window, |_| Ok(()));
            assert!(matches!(r, Err(Error::ShapeMismatch(_))));
            Ok(())
        })
        .unwrap();
}

// ---- The block cache ----------------------------------------------------------------------

#[test]
fn cached_blocks_are_recycled_once_and_freed_once() {
    if cache::limit() < 2 * cache::MIN_CACHED {
        return;
    }
    // A size no other test asks for, so tests running in parallel do not take the block
    // (nor a block of theirs: the cache hands out blocks up to twice the size asked for).
    let len = cache::MIN_CACHED + 7 * 4096 + 3 * 64;
    let a = HostAlloc::new(len, Init::Zeroed).unwrap();
    let first = a.ptr();
    drop(a); // parked in the cache, not freed
    let b = HostAlloc::new(len - 64, Init::Unwritten).unwrap();
    assert_eq!(b.ptr(), first, "the parked block should come back");
    assert_eq!(b.len(), len - 64);
    drop(b);

    // Through Buffer: an explicitly zeroed buffer on a recycled block holds only zeros, and
    // its last byte is writable.
    let z = Buffer::zeros(len, &cpu()).unwrap();
    {
        let bytes = z.as_host_bytes().unwrap();
        assert!(*bytes == *vec![0u8; len]);
    }
    z.slice(len - 1..).fill_bytes(0xAB).unwrap();
    drop(z);
    // `Buffer::empty` is public: a recycled block comes back cleared, never with the bytes
    // of its last user (Miri would also see a read of never-written bytes here).
    let e = Buffer::empty(len, &cpu()).unwrap();
    assert!(*e.as_host_bytes().unwrap() == *vec![0u8; len]);
    let first_buffer = e.host_ptr().unwrap();
    drop(e);

    // Taken out of the cache by hand, blocks are no longer recycled: dropping them frees them.
    let mut taken = Vec::new();
    while let Some(block) = cache::take(BlockKind::Host, len) {
        let block = block
            .into_any()
            .downcast::<HostAlloc>()
            .unwrap_or_else(|_| panic!("a host block"));
        taken.push(block.ptr());
    }
    assert!(
        taken.contains(&first_buffer),
        "the buffer's block was parked"
    );
    // Small blocks are never cached.
    assert!(cache::take(BlockKind::Host, 64).is_none());
}
