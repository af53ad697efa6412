//! The conformance cases for Buffer / NDBuffer / BufferPrototype, written once and run
//! against every prototype: by `tests/conformance.rs` (CPU always; pinned and CUDA when a
//! GPU is present) and by the GPU check binary. Ported from zarr-python's buffer tests
//! (tests/test_buffer.py) plus zarrbuf's own promises (zero-copy promotion, device-side ops).
#![allow(dead_code)]

use std::ops::Range;
use zarrbuf::{Buffer, BufferPrototype, ByteOrder, DataType, Error, Memory, NDBuffer, Order};

/// A conformance case: runs against one prototype.
pub type Case = fn(&BufferPrototype) -> Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)*) => {
        if !$cond {
            return Err(format!($($msg)*));
        }
    };
}

fn e(err: Error) -> String {
    err.to_string()
}

/// Host data moved into the prototype's memory through `set` (device kernels on CUDA).
fn filled<T: zarrbuf::Element>(
    data: Vec<T>,
    shape: &[usize],
    order: Order,
    proto: &BufferPrototype,
) -> Result<NDBuffer, String> {
    let host = NDBuffer::from_vec(data, shape).map_err(e)?;
    let mut out = NDBuffer::empty(shape, T::DTYPE, order, proto).map_err(e)?;
    let all: Vec<Range<usize>> = shape.iter().map(|&n| 0..n).collect();
    out.set(&all, &host).map_err(e)?;
    Ok(out)
}

/// Deterministic pseudo-random numbers (xorshift), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub fn all() -> Vec<(&'static str, Case)> {
    vec![
        ("zero_length_buffers", zero_length_buffers),
        ("empty_shapes_dtypes_orders", empty_shapes_dtypes_orders),
        ("create_and_as_scalar", create_and_as_scalar),
        ("integer_indexing_gives_views", integer_indexing_gives_views),
        (
            "all_equal_matches_a_full_scan",
            all_equal_matches_a_full_scan,
        ),
        ("zero_copy_promotion", zero_copy_promotion),
        ("slices_and_bounds", slices_and_bounds),
        ("concat_and_combine", concat_and_combine),
        ("copies_between_memories", copies_between_memories),
        ("host_access_rules", host_access_rules),
        ("fill_and_set_subsets", fill_and_set_subsets),
        ("transpose_views_and_copies", transpose_views_and_copies),
        ("reshape_and_squeeze", reshape_and_squeeze),
        ("astype_matches_rust_casts", astype_matches_rust_casts),
        ("with_type_and_byte_order", with_type_and_byte_order),
        ("ndarray_round_trips", ndarray_round_trips),
    ]
}

pub fn zero_length_buffers(proto: &BufferPrototype) -> Result<(), String> {
    let z = Buffer::create_zero_length();
    ensure!(
        z.is_empty() && z.to_bytes().map_err(e)?.is_empty(),
        "zero-length buffer not empty"
    );
    let b = Buffer::empty(0, proto).map_err(e)?;
    ensure!(
        b.is_empty() && b.memory() == proto.memory(),
        "empty(0) in {}",
        b.memory()
    );
    ensure!(
        b.to_vec().map_err(e)?.is_empty(),
        "empty(0) copied to host is not empty"
    );
    let nd = NDBuffer::empty(&[0, 3], DataType::Float32, Order::C, proto).map_err(e)?;
    ensure!(
        nd.is_empty() && nd.nbytes() == 0 && nd.to_vec::<f32>().map_err(e)?.is_empty(),
        "0x3 array"
    );
    Ok(())
}

pub fn empty_shapes_dtypes_orders(proto: &BufferPrototype) -> Result<(), String> {
    for dtype in DataType::ALL {
        for shape in [vec![], vec![5], vec![3, 4], vec![2, 3, 4]] {
            for order in [Order::C, Order::F] {
                let a = NDBuffer::empty(&shape, dtype, order, proto).map_err(e)?;
                let n: usize = shape.iter().product();
                ensure!(
                    a.shape() == shape.as_slice() && a.dtype() == dtype,
                    "{dtype} {shape:?}"
                );
                ensure!(
                    a.nbytes() == n * dtype.size() && a.len() == n,
                    "{dtype} {shape:?} nbytes"
                );
                ensure!(
                    a.strides() == order.strides(&shape, dtype.size()).as_slice(),
                    "{dtype} {shape:?} {order:?} strides {:?}",
                    a.strides()
                );
                let contiguous = match order {
                    Order::C => a.is_c_contiguous(),
                    Order::F => a.is_f_contiguous(),
                };
                ensure!(
                    contiguous && a.memory() == proto.memory(),
                    "{dtype} {shape:?} {order:?} layout"
                );
            }
        }
    }
    Ok(())
}

pub fn create_and_as_scalar(proto: &BufferPrototype) -> Result<(), String> {
    let a = NDBuffer::create(
        &[2, 3],
        DataType::Int32,
        Order::C,
        Some(&7i32.to_ne_bytes()),
        proto,
    )
    .map_err(e)?;
    ensure!(a.to_vec::<i32>().map_err(e)? == vec![7; 6], "create fill");
    ensure!(
        matches!(a.as_scalar(), Err(Error::ShapeMismatch(_))),
        "as_scalar on 6 elements must fail"
    );
    let one = NDBuffer::create(
        &[1, 1],
        DataType::Float64,
        Order::F,
        Some(&2.5f64.to_ne_bytes()),
        proto,
    )
    .map_err(e)?;
    ensure!(
        one.as_scalar().map_err(e)? == 2.5f64.to_ne_bytes().to_vec(),
        "as_scalar value"
    );
    ensure!(one.item::<f64>().map_err(e)? == 2.5, "item");
    ensure!(
        one.item::<f32>().is_err(),
        "item of the wrong type must fail"
    );
    Ok(())
}

pub fn integer_indexing_gives_views(proto: &BufferPrototype) -> Result<(), String> {
    let a = filled((0..24).collect::<Vec<i32>>(), &[2, 3, 4], Order::C, proto)?;
    let v = a.at(&[1, 2, 3]).map_err(e)?;
    ensure!(
        v.shape().is_empty() && v.item::<i32>().map_err(e)? == 23,
        "a[1,2,3]"
    );
    ensure!(
        v.buffer().storage_id() == a.buffer().storage_id(),
        "index is not a view"
    );
    let mut row = a.get(&[1..2, 0..1, 0..4]).map_err(e)?;
    row.fill(&(-1i32).to_ne_bytes()).map_err(e)?;
    let all = a.to_vec::<i32>().map_err(e)?;
    let want: Vec<i32> = (0..24)
        .map(|i| if (12..16).contains(&i) { -1 } else { i })
        .collect();
    ensure!(
        all == want,
        "writes through a view are not visible: {all:?}"
    );
    ensure!(
        a.at(&[2, 0, 0]).is_err() && a.at(&[0, 0]).is_err(),
        "bad indices must fail"
    );
    Ok(())
}

/// zarr semantics: floats by value with −0.0 ≠ 0.0, NaN == NaN only with equal_nan.
fn reference_equal(x: f64, y: f64, equal_nan: bool) -> bool {
    if x.is_nan() || y.is_nan() {
        return equal_nan && x.is_nan() && y.is_nan();
    }
    x == y && x.is_sign_negative() == y.is_sign_negative()
}

fn bytes_of(dtype: DataType, v: f64) -> Vec<u8> {
    match dtype {
        DataType::Float16 => half::f16::from_f64(v).to_ne_bytes().to_vec(),
        DataType::Float32 => (v as f32).to_ne_bytes().to_vec(),
        DataType::Float64 => v.to_ne_bytes().to_vec(),
        DataType::Complex64 => [(v as f32).to_ne_bytes(), (v as f32).to_ne_bytes()].concat(),
        DataType::Int32 => (if v.is_nan() { 0 } else { v as i32 })
            .to_ne_bytes()
            .to_vec(),
        _ => unreachable!(),
    }
}

pub fn all_equal_matches_a_full_scan(proto: &BufferPrototype) -> Result<(), String> {
    let values = [0.0, -0.0, f64::NAN, 1.0];
    let dtypes = [
        DataType::Float16,
        DataType::Float32,
        DataType::Float64,
        DataType::Complex64,
        DataType::Int32,
    ];
    for dtype in dtypes {
        let size = dtype.size();
        for &base in &values {
            for &other in &values {
                for &probe in &values {
                    for mismatch in [None, Some(0usize), Some(usize::MAX)] {
                        for layout in ["1d", "c", "f", "strided"] {
                            let (shape, order): (Vec<usize>, Order) = match layout {
                                "1d" => (vec![12], Order::C),
                                "c" | "strided" => (vec![3, 4], Order::C),
                                _ => (vec![3, 4], Order::F),
                            };
                            let n: usize = shape.iter().product();
                            let mut raw: Vec<u8> =
                                (0..n).flat_map(|_| bytes_of(dtype, base)).collect();
                            let at = mismatch.map(|m| m.min(n - 1));
                            if let Some(i) = at {
                                raw[i * size..(i + 1) * size]
                                    .copy_from_slice(&bytes_of(dtype, other));
                            }
                            let host = NDBuffer::from_buffer(
                                Buffer::from_vec(raw.clone()),
                                dtype,
                                &shape,
                                order,
                            )
                            .map_err(e)?;
                            let mut a = NDBuffer::empty(&shape, dtype, order, proto).map_err(e)?;
                            let all: Vec<Range<usize>> = shape.iter().map(|&k| 0..k).collect();
                            a.set(&all, &host).map_err(e)?;
                            let a = if layout == "strided" {
                                a.get(&[0..3, 1..3]).map_err(e)?
                            } else {
                                a
                            };
                            // The elements `a` covers, in storage order of `raw`.
                            let covered: Vec<usize> = if layout == "strided" {
                                (0..3)
                                    .flat_map(|r| (1..3).map(move |c| r * 4 + c))
                                    .collect()
                            } else {
                                (0..n).collect()
                            };
                            let probe_bytes = bytes_of(dtype, probe);
                            for equal_nan in [false, true] {
                                let expect = covered.iter().all(|&i| {
                                    let el = &raw[i * size..(i + 1) * size];
                                    element_value_equal(dtype, el, &probe_bytes, equal_nan)
                                });
                                let got = a.all_equal(&probe_bytes, equal_nan).map_err(e)?;
                                ensure!(
                                    got == expect,
                                    "{dtype} {layout} base {base} other {other} at {at:?} probe {probe} equal_nan {equal_nan}: got {got}, full scan says {expect}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn element_value_equal(dtype: DataType, a: &[u8], b: &[u8], equal_nan: bool) -> bool {
    let f = |x: &[u8]| -> Vec<f64> {
        match dtype {
            DataType::Float16 => vec![half::f16::from_ne_bytes([x[0], x[1]]).to_f64()],
            DataType::Float32 => vec![f32::from_ne_bytes(x[..4].try_into().unwrap()) as f64],
            DataType::Float64 => vec![f64::from_ne_bytes(x[..8].try_into().unwrap())],
            DataType::Complex64 => vec![
                f32::from_ne_bytes(x[..4].try_into().unwrap()) as f64,
                f32::from_ne_bytes(x[4..8].try_into().unwrap()) as f64,
            ],
            _ => vec![i32::from_ne_bytes(x[..4].try_into().unwrap()) as f64],
        }
    };
    if dtype == DataType::Int32 {
        return a == b;
    }
    f(a).iter()
        .zip(f(b))
        .all(|(&x, y)| reference_equal(x, y, equal_nan))
}

pub fn zero_copy_promotion(proto: &BufferPrototype) -> Result<(), String> {
    let b = Buffer::empty(64, proto).map_err(e)?;
    let same = Buffer::from_buffer(&b, proto).map_err(e)?;
    ensure!(
        same.storage_id() == b.storage_id() && same.id() != b.id(),
        "promotion to the same prototype copied"
    );
    let host = Buffer::from_vec(vec![3u8; 64]);
    let moved = Buffer::from_buffer(&host, proto).map_err(e)?;
    let copied = !proto.is_satisfied_by(Memory::Host);
    ensure!(
        (moved.storage_id() != host.storage_id()) == copied,
        "host → {}: copy expected {copied}",
        proto.memory()
    );
    ensure!(
        moved.to_vec().map_err(e)? == vec![3u8; 64],
        "promoted contents"
    );
    let back = Buffer::from_buffer(&moved, &BufferPrototype::cpu()).map_err(e)?;
    ensure!(
        (back.storage_id() == moved.storage_id()) == moved.is_host_accessible(),
        "promotion back to cpu"
    );
    let nd = filled(vec![1u16, 2, 3], &[3], Order::C, proto)?;
    ensure!(
        nd.to_prototype(proto).map_err(e)?.buffer().storage_id() == nd.buffer().storage_id(),
        "NDBuffer promotion copied"
    );
    Ok(())
}

pub fn slices_and_bounds(proto: &BufferPrototype) -> Result<(), String> {
    let b = Buffer::from_slice(&(0u8..100).collect::<Vec<_>>(), proto).map_err(e)?;
    let s = b.try_slice(10..20).map_err(e)?;
    ensure!(
        s.len() == 10 && s.total_size() == 100 && s.offset() == 10,
        "slice geometry"
    );
    ensure!(s.storage_id() == b.storage_id(), "slice is not a view");
    ensure!(
        s.to_vec().map_err(e)? == (10u8..20).collect::<Vec<_>>(),
        "slice contents"
    );
    ensure!(
        s.try_slice(5..11).is_err() && b.try_slice(90..101).is_err(),
        "out-of-bounds slices must fail"
    );
    ensure!(
        matches!(
            b.try_slice((
                std::ops::Bound::Included(50usize),
                std::ops::Bound::Excluded(40usize)
            )),
            Err(Error::OutOfBounds(_))
        ),
        "reversed range must fail"
    );
    Ok(())
}

pub fn concat_and_combine(proto: &BufferPrototype) -> Result<(), String> {
    let a = Buffer::from_slice(&[1, 2], proto).map_err(e)?;
    let b = Buffer::from_vec(vec![3, 4, 5]);
    let c =
        Buffer::concat(&[a.clone(), b.clone(), Buffer::create_zero_length()], proto).map_err(e)?;
    ensure!(
        c.memory() == proto.memory() && c.to_vec().map_err(e)? == vec![1, 2, 3, 4, 5],
        "concat"
    );
    let d = a.combine(&[b]).map_err(e)?;
    ensure!(
        d.memory() == a.memory() && d.to_vec().map_err(e)? == vec![1, 2, 3, 4, 5],
        "combine"
    );
    Ok(())
}

pub fn copies_between_memories(proto: &BufferPrototype) -> Result<(), String> {
    let data: Vec<u8> = (0..=255).cycle().take(5000).collect();
    let host = Buffer::from_vec(data.clone());
    let mut dev = Buffer::empty(data.len(), proto).map_err(e)?;
    dev.copy_from(&host).map_err(e)?;
    let mut dev2 = Buffer::empty(data.len(), proto).map_err(e)?;
    dev2.copy_from(&dev).map_err(e)?;
    let mut back = Buffer::from_vec(vec![0; data.len()]);
    dev2.copy_to(&mut back).map_err(e)?;
    ensure!(
        back.to_vec().map_err(e)? == data && dev.content_eq(&host).map_err(e)?,
        "round trip through {}",
        proto.memory()
    );
    ensure!(
        dev.copy_from(&Buffer::from_vec(vec![0; 3])).is_err(),
        "length mismatch must fail"
    );
    let fresh = dev.copy_to_new(&BufferPrototype::cpu()).map_err(e)?;
    ensure!(
        fresh.memory() == Memory::Host && fresh.to_vec().map_err(e)? == data,
        "copy_to_new"
    );
    Ok(())
}

pub fn host_access_rules(proto: &BufferPrototype) -> Result<(), String> {
    let b = Buffer::from_slice(&[1, 2, 3], proto).map_err(e)?;
    match b.as_host_bytes() {
        Ok(bytes) => {
            ensure!(b.is_host_accessible() && *bytes == [1, 2, 3], "host bytes");
            let mut other = b.clone();
            ensure!(
                matches!(other.fill_bytes(0), Err(Error::Busy(_))),
                "a write while borrowed must be refused"
            );
        }
        Err(err) => ensure!(
            !b.is_host_accessible() && matches!(err, Error::NotHostAccessible(_)),
            "{err}"
        ),
    }
    let mut b2 = b.clone();
    b2.fill_bytes(9).map_err(e)?;
    ensure!(
        b.to_vec().map_err(e)? == vec![9, 9, 9],
        "writes through a clone are shared"
    );
    let ro = Buffer::from_bytes(bytes::Bytes::from_static(b"abc"));
    ensure!(
        matches!(ro.clone().fill_bytes(0), Err(Error::InvalidArgument(_))),
        "Bytes are read-only"
    );
    Ok(())
}

pub fn fill_and_set_subsets(proto: &BufferPrototype) -> Result<(), String> {
    let mut rng = Rng(7);
    for dtype in [
        DataType::UInt8,
        DataType::Int16,
        DataType::Float32,
        DataType::Float64,
        DataType::Complex128,
    ] {
        let size = dtype.size();
        let shape = [5usize, 7, 3];
        let mut a = NDBuffer::zeros(&shape, dtype, Order::F, proto).map_err(e)?;
        let mut reference = vec![0u8; 105 * size];
        for _ in 0..6 {
            let lo: Vec<usize> = shape
                .iter()
                .map(|&n| rng.below(n as u64) as usize)
                .collect();
            let hi: Vec<usize> = lo
                .iter()
                .zip(&shape)
                .map(|(&l, &n)| l + 1 + rng.below((n - l) as u64) as usize)
                .collect();
            let sub: Vec<Range<usize>> = lo.iter().zip(&hi).map(|(&l, &h)| l..h).collect();
            let sub_shape: Vec<usize> = sub.iter().map(|r| r.len()).collect();
            let m: usize = sub_shape.iter().product();
            let src: Vec<u8> = (0..m * size).map(|_| rng.next() as u8).collect();
            let host =
                NDBuffer::from_buffer(Buffer::from_vec(src.clone()), dtype, &sub_shape, Order::C)
                    .map_err(e)?;
            a.set(&sub, &host).map_err(e)?;
            let mut k = 0;
            for i in sub[0].clone() {
                for j in sub[1].clone() {
                    for l in sub[2].clone() {
                        let at = (i * 21 + j * 3 + l) * size;
                        reference[at..at + size].copy_from_slice(&src[k * size..(k + 1) * size]);
                        k += 1;
                    }
                }
            }
        }
        ensure!(
            a.to_native_bytes().map_err(e)? == reference,
            "{dtype}: set of random subsets into an F-order array"
        );
        let pattern: Vec<u8> = (0..size as u8)
            .map(|b| b.wrapping_mul(31).wrapping_add(1))
            .collect();
        let mut part = a.get(&[1..4, 2..3, 0..3]).map_err(e)?;
        part.fill(&pattern).map_err(e)?;
        ensure!(
            part.all_equal(&pattern, true).map_err(e)? || dtype.is_float(),
            "{dtype}: fill"
        );
        ensure!(
            part.to_native_bytes().map_err(e)? == pattern.repeat(9),
            "{dtype}: filled bytes"
        );
    }
    Ok(())
}

pub fn transpose_views_and_copies(proto: &BufferPrototype) -> Result<(), String> {
    let a = filled((0..24).collect::<Vec<i64>>(), &[2, 3, 4], Order::C, proto)?;
    let t = a.transpose(&[2, 0, 1]).map_err(e)?;
    ensure!(
        t.shape() == [4, 2, 3] && t.buffer().storage_id() == a.buffer().storage_id(),
        "transpose is a view"
    );
    let m = t.copy().map_err(e)?;
    ensure!(
        m.is_c_contiguous() && m.memory() == proto.memory(),
        "materialised transpose layout"
    );
    let got = m.to_vec::<i64>().map_err(e)?;
    let want: Vec<i64> = (0..4)
        .flat_map(|k| (0..2).flat_map(move |i| (0..3).map(move |j| (i * 12 + j * 4 + k) as i64)))
        .collect();
    ensure!(got == want, "materialised transpose values {got:?}");
    ensure!(
        a.transpose(&[0, 1]).is_err() && a.transpose(&[0, 1, 1]).is_err(),
        "bad axes must fail"
    );
    Ok(())
}

pub fn reshape_and_squeeze(proto: &BufferPrototype) -> Result<(), String> {
    let a = filled((0..12).collect::<Vec<u32>>(), &[3, 4], Order::C, proto)?;
    let r = a.reshape(&[2, 6]).map_err(e)?;
    ensure!(
        r.buffer().storage_id() == a.buffer().storage_id(),
        "contiguous reshape must be a view"
    );
    let t = a.transpose(&[1, 0]).map_err(e)?.reshape(&[12]).map_err(e)?;
    ensure!(
        t.buffer().storage_id() != a.buffer().storage_id(),
        "non-contiguous reshape must copy"
    );
    let want: Vec<u32> = (0..4)
        .flat_map(|j| (0..3).map(move |i| i * 4 + j))
        .collect();
    ensure!(
        t.to_vec::<u32>().map_err(e)? == want,
        "reshape of a transpose"
    );
    ensure!(
        matches!(a.reshape(&[5]), Err(Error::ShapeMismatch(_))),
        "reshape to a different size must fail"
    );
    let s = filled(vec![1u8, 2], &[1, 2, 1], Order::C, proto)?;
    ensure!(
        s.squeeze(&[]).map_err(e)?.shape() == [2] && s.squeeze(&[2]).map_err(e)?.shape() == [1, 2],
        "squeeze"
    );
    ensure!(s.squeeze(&[1]).is_err(), "squeezing a long axis must fail");
    Ok(())
}

pub fn astype_matches_rust_casts(proto: &BufferPrototype) -> Result<(), String> {
    let f: Vec<f32> = vec![1.7, -2.2, 300.5, -0.0, 65535.9, 0.49];
    let a = filled(f.clone(), &[2, 3], Order::C, proto)?;
    let i = a.astype(DataType::Int32).map_err(e)?;
    ensure!(i.memory() == proto.memory(), "astype left the memory");
    ensure!(
        i.to_vec::<i32>().map_err(e)? == f.iter().map(|&v| v as i32).collect::<Vec<_>>(),
        "f32 → i32"
    );
    let d = a.astype(DataType::Float64).map_err(e)?;
    ensure!(
        d.to_vec::<f64>().map_err(e)? == f.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        "f32 → f64"
    );
    let u: Vec<i16> = vec![-3, 0, 7, 300, -300, 32767];
    let b = filled(u.clone(), &[6], Order::C, proto)?;
    ensure!(
        b.astype(DataType::UInt8)
            .map_err(e)?
            .to_vec::<u8>()
            .map_err(e)?
            == u.iter().map(|&v| v as u8).collect::<Vec<_>>(),
        "i16 → u8 wraps"
    );
    ensure!(
        b.astype(DataType::Bool)
            .map_err(e)?
            .to_vec::<bool>()
            .map_err(e)?
            == u.iter().map(|&v| v != 0).collect::<Vec<_>>(),
        "i16 → bool"
    );
    let t = b
        .transpose(&[0])
        .map_err(e)?
        .astype(DataType::Float32)
        .map_err(e)?;
    ensure!(
        t.to_vec::<f32>().map_err(e)? == u.iter().map(|&v| v as f32).collect::<Vec<_>>(),
        "i16 → f32"
    );
    ensure!(
        matches!(
            NDBuffer::zeros(&[1], DataType::RawBits(3), Order::C, proto)
                .map_err(e)?
                .astype(DataType::Int8),
            Err(Error::Unsupported(_))
        ),
        "raw bits have no value"
    );
    Ok(())
}

pub fn with_type_and_byte_order(proto: &BufferPrototype) -> Result<(), String> {
    let a = filled(vec![1.0f32, -2.0], &[2], Order::C, proto)?;
    let bits = a.with_type(DataType::UInt32).map_err(e)?;
    ensure!(
        bits.buffer().storage_id() == a.buffer().storage_id(),
        "with_type is a view"
    );
    ensure!(
        bits.to_vec::<u32>().map_err(e)? == vec![1.0f32.to_bits(), (-2.0f32).to_bits()],
        "with_type bits"
    );
    ensure!(
        a.with_type(DataType::Int16).is_err(),
        "with_type to another size must fail"
    );
    let big = a.to_byte_order(ByteOrder::Big).map_err(e)?;
    ensure!(
        big.byte_order() == ByteOrder::Big && big.memory() == proto.memory(),
        "to_byte_order"
    );
    ensure!(
        big.buffer().to_vec().map_err(e)?
            == [1.0f32.to_be_bytes(), (-2.0f32).to_be_bytes()].concat(),
        "big-endian bytes"
    );
    let back = big.to_byte_order(ByteOrder::Little).map_err(e)?;
    ensure!(
        back.to_vec::<f32>().map_err(e)? == vec![1.0, -2.0]
            && big.to_vec::<f32>().map_err(e)? == vec![1.0, -2.0],
        "values survive byte swaps"
    );
    Ok(())
}

pub fn ndarray_round_trips(proto: &BufferPrototype) -> Result<(), String> {
    let arr =
        ndarray::Array3::<i16>::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as i16);
    let host = NDBuffer::from_ndarray(arr.clone()).map_err(e)?;
    let dev = host.to_prototype(proto).map_err(e)?;
    let back = dev.to_ndarray::<i16>().map_err(e)?;
    ensure!(
        back == arr.clone().into_dyn(),
        "to_ndarray from {}",
        proto.memory()
    );
    match dev.as_ndarray::<i16>() {
        Ok(view) => ensure!(
            dev.buffer().is_host_accessible() && *view == arr.view().into_dyn(),
            "as_ndarray view"
        ),
        Err(err) => ensure!(matches!(err, Error::NotHostAccessible(_)), "{err}"),
    }
    ensure!(
        matches!(host.as_ndarray::<u16>(), Err(Error::DataType(_))),
        "as_ndarray of the wrong type must fail"
    );
    let t = arr.view().reversed_axes().to_owned();
    let from_t = NDBuffer::from_ndarray(t.clone()).map_err(e)?;
    ensure!(
        from_t.to_ndarray::<i16>().map_err(e)? == t.into_dyn(),
        "from_ndarray of a non-standard layout"
    );
    Ok(())
}
