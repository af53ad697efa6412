//! The conformance cases for Buffer / NDBuffer / BufferPrototype, written once and run
//! against every prototype: by zarrbuf's `tests/it/conformance.rs` (CPU always; pinned and
//! CUDA when a GPU is present) and by the GPU check binary (`zarrbuf-gpucheck`). Ported from
//! zarr-python's buffer tests (tests/test_buffer.py: zero-length buffers, `create` +
//! `as_scalar`, integer indexing, `empty` for shapes × dtypes × orders, `all_equal` against a
//! full scan) plus zarrbuf's own promises (zero-copy promotion, borrow rules, device-side
//! operations).
//!
//! Every case makes its buffers with the prototype under test and moves host data in with
//! `set` / `copy_from`, so on CUDA the same code exercises the device kernels. Expected
//! values are always computed here, independently of the library (Rust `as` casts, explicit
//! index arithmetic, element-by-element scans).
// One-range subsets of 1-d arrays are the API's shape, not a mistaken range literal.
#![allow(clippy::single_range_in_vec_init)]

use crate::{Case, e};
use half::{bf16, f16};
use num_complex::Complex;
use std::ops::Range;
use zarrbuf::dtype::ByteOrder;
use zarrbuf::{Buffer, BufferPrototype, DataType, Element, Error, Memory, NDBuffer, Order};

/// Calls `$m! { case, case, ... }` with the name of every conformance case, in order: the
/// one list of the cases. [`all`] is built from it, and so are zarrbuf's tests, one
/// `#[test]` per case named after it (`tests/it/conformance.rs`). Each name is a function of
/// [`conformance`](crate::conformance).
#[macro_export]
macro_rules! conformance_cases {
    ($m:ident) => {
        $m! {
            zero_length_buffers,
            empty_shapes_dtypes_orders,
            create_and_as_scalar,
            integer_indexing_gives_views,
            all_equal_matches_a_full_scan,
            array_equal_matches_a_full_scan,
            zero_copy_promotion,
            slices_and_bounds,
            concat_and_combine,
            copies_between_memories,
            host_access_rules,
            borrow_rules,
            read_only_bytes,
            fill_and_fill_with,
            set_subsets_from_host,
            transpose_views_and_copies,
            reshape_and_squeeze,
            astype_matches_rust_casts,
            with_type_views,
            byte_order_round_trips,
            ndarray_round_trips,
            item_of_every_type,
            lazy_allocation,
            memory_resource,
        }
    };
}

/// `(name, case)` for each name given.
macro_rules! case_table {
    ($($name:ident),* $(,)?) => {
        vec![$((stringify!($name), $name as Case)),*]
    };
}

/// Every case, by name, in the order of [`conformance_cases!`].
pub fn all() -> Vec<(&'static str, Case)> {
    crate::conformance_cases!(case_table)
}

// ---------------------------------------------------------------------------------------
// helpers

mod features;
pub use features::{lazy_allocation, memory_resource};

/// Fixed-seed pseudo-random numbers (SplitMix64), so failures reproduce. A local generator
/// rather than `rand`, so the cases' inputs stay the same whatever rand's version.
struct TestRng(u64);

impl TestRng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

fn rng(seed: u64) -> TestRng {
    TestRng(seed)
}

fn full(shape: &[usize]) -> Vec<Range<usize>> {
    shape.iter().map(|&n| 0..n).collect()
}

/// Byte strides computed here (not by the library): C = last axis fastest.
fn strides_of(shape: &[usize], size: usize, order: Order) -> Vec<isize> {
    let d = shape.len();
    let mut out = vec![0isize; d];
    let mut step = size;
    let axes: Vec<usize> = match order {
        Order::C => (0..d).rev().collect(),
        Order::F => (0..d).collect(),
    };
    for k in axes {
        out[k] = step as isize;
        step *= shape[k].max(1);
    }
    out
}

/// The C-order multi-index of flat position `i`.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        idx[k] = i % shape[k];
        i /= shape[k];
    }
    idx
}

/// The C-order flat position of a multi-index.
fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// `data` (C-order logical values) moved into a new array of the prototype with storage
/// order `order`, through `set` from a host array.
fn upload<T: Element>(
    data: &[T],
    shape: &[usize],
    order: Order,
    proto: &BufferPrototype,
) -> Result<NDBuffer, String> {
    let host = NDBuffer::from_vec(data.to_vec(), shape).map_err(e)?;
    let mut out = NDBuffer::empty(shape, T::DTYPE, order, proto).map_err(e)?;
    out.set(&full(shape), &host).map_err(e)?;
    ensure!(
        out.memory() == proto.memory(),
        "upload landed in {} instead of {}",
        out.memory(),
        proto.memory()
    );
    Ok(out)
}

/// Raw element bytes (native order, C-order logical) moved into the prototype.
fn upload_bytes(
    raw: &[u8],
    dtype: DataType,
    shape: &[usize],
    order: Order,
    proto: &BufferPrototype,
) -> Result<NDBuffer, String> {
    let host =
        NDBuffer::from_buffer(Buffer::from_vec(raw.to_vec()), dtype, shape, Order::C).map_err(e)?;
    let mut out = NDBuffer::empty(shape, dtype, order, proto).map_err(e)?;
    out.set(&full(shape), &host).map_err(e)?;
    Ok(out)
}

fn eq<T: PartialEq>(a: T, b: T) -> bool {
    a == b
}

fn bits_eq_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn bits_eq_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

// ---------------------------------------------------------------------------------------
// zero-length buffers, empty, create, as_scalar, indexing

/// Zero-length buffers (zarr-python's `create_zero_length`, `empty(0)`, zero-length slices)
/// and arrays with a zero-length dimension: their geometry, and every read of them empty.
pub fn zero_length_buffers(proto: &BufferPrototype) -> Result<(), String> {
    let z = Buffer::create_zero_length();
    ensure!(
        z.is_empty() && z.memory() == Memory::Host,
        "create_zero_length: {z:?}"
    );
    ensure!(
        z.to_bytes().map_err(e)?.is_empty(),
        "to_bytes of a zero-length buffer"
    );
    for b in [
        Buffer::empty(0, proto).map_err(e)?,
        Buffer::zeros(0, proto).map_err(e)?,
        Buffer::from_slice(&[], proto).map_err(e)?,
        Buffer::concat(&[], proto).map_err(e)?,
    ] {
        ensure!(
            b.is_empty() && b.memory() == proto.memory(),
            "zero-length buffer in {} (asked {})",
            b.memory(),
            proto.memory()
        );
        ensure!(b.to_bytes().map_err(e)?.is_empty(), "to_bytes of empty(0)");
        ensure!(b.to_vec().map_err(e)?.is_empty(), "to_vec of empty(0)");
        let mut c = b.clone();
        c.fill_bytes(1).map_err(e)?;
        c.copy_from(&z).map_err(e)?;
        ensure!(c.content_eq(&z).map_err(e)?, "empty buffers are equal");
    }
    // A zero-length view of a non-empty buffer.
    let b = Buffer::from_slice(&[1, 2, 3], proto).map_err(e)?;
    let s = b.try_slice(3..3).map_err(e)?;
    ensure!(
        s.is_empty() && s.to_bytes().map_err(e)?.is_empty() && s.storage_id() == b.storage_id(),
        "zero-length slice"
    );
    // Arrays with a zero-length dimension.
    for shape in [vec![0], vec![0, 3], vec![3, 0, 2]] {
        for order in [Order::C, Order::F] {
            let mut nd = NDBuffer::empty(&shape, DataType::Float32, order, proto).map_err(e)?;
            ensure!(
                nd.is_empty() && nd.nbytes() == 0 && nd.shape() == shape,
                "{shape:?} {order:?}: empty array geometry"
            );
            ensure!(
                nd.to_vec::<f32>().map_err(e)?.is_empty(),
                "{shape:?}: to_vec"
            );
            ensure!(
                nd.to_ndarray::<f32>().map_err(e)?.shape() == shape.as_slice(),
                "{shape:?}: to_ndarray shape"
            );
            nd.fill_with(1.0f32).map_err(e)?;
            ensure!(
                nd.all_equal(&1.0f32.to_ne_bytes(), false).map_err(e)?,
                "{shape:?}: all_equal of no elements is true"
            );
            let c = nd.copy().map_err(e)?;
            let t = nd.astype(DataType::Int64).map_err(e)?;
            ensure!(
                c.shape() == shape && t.shape() == shape && t.dtype() == DataType::Int64,
                "{shape:?}: copy / astype of an empty array"
            );
            let host = NDBuffer::from_vec(Vec::<f32>::new(), &shape).map_err(e)?;
            nd.set(&full(&shape), &host).map_err(e)?;
            ensure!(
                nd.array_equal(&host, false).map_err(e)?,
                "{shape:?}: empty arrays are equal"
            );
        }
    }
    Ok(())
}

/// `empty` for every data type (and a raw-bits one) × shapes with 0, 1 and several
/// dimensions, zero-sized among them × C and F order: geometry and strides computed here.
pub fn empty_shapes_dtypes_orders(proto: &BufferPrototype) -> Result<(), String> {
    let shapes: [&[usize]; 7] = [&[], &[5], &[1], &[3, 4], &[2, 3, 4], &[4, 1, 3], &[2, 0, 3]];
    for dtype in DataType::ALL.into_iter().chain([DataType::RawBits(3)]) {
        let size = match dtype {
            DataType::Bool | DataType::Int8 | DataType::UInt8 => 1,
            DataType::Int16 | DataType::UInt16 | DataType::Float16 | DataType::BFloat16 => 2,
            DataType::RawBits(n) => n,
            DataType::Int32 | DataType::UInt32 | DataType::Float32 => 4,
            DataType::Complex128 => 16,
            _ => 8,
        };
        ensure!(dtype.size() == size, "{dtype}: size {}", dtype.size());
        for shape in shapes {
            for order in [Order::C, Order::F] {
                let a = NDBuffer::empty(shape, dtype, order, proto).map_err(e)?;
                let n: usize = shape.iter().product();
                ensure!(
                    a.shape() == shape && a.dtype() == dtype && a.ndim() == shape.len(),
                    "{dtype} {shape:?}: shape/dtype"
                );
                ensure!(
                    a.nbytes() == n * size && a.len() == n && a.buffer().len() == n * size,
                    "{dtype} {shape:?}: nbytes {} len {}",
                    a.nbytes(),
                    a.len()
                );
                let want = strides_of(shape, size, order);
                ensure!(
                    a.strides() == want.as_slice(),
                    "{dtype} {shape:?} {order:?}: strides {:?}, want {want:?}",
                    a.strides()
                );
                // Contiguity: both for ≤ 1 non-trivial axis or no elements, else only `order`.
                let long_axes = shape.iter().filter(|&&k| k > 1).count();
                let both = long_axes <= 1 || n == 0;
                let (c, f) = (a.is_c_contiguous(), a.is_f_contiguous());
                let ok = match order {
                    Order::C => c && (f == both),
                    Order::F => f && (c == both),
                };
                ensure!(
                    ok && a.is_contiguous(),
                    "{dtype} {shape:?} {order:?}: c {c} f {f}"
                );
                ensure!(
                    a.memory() == proto.memory()
                        && a.byte_order() == ByteOrder::native()
                        && a.offset() == 0,
                    "{dtype} {shape:?} {order:?}: memory/byte order/offset"
                );
            }
        }
    }
    Ok(())
}

/// `create` with and without a fill value in C and F order (a fill of the wrong size
/// refused), and `as_scalar` / `item` of one-element arrays (refused for any other size).
pub fn create_and_as_scalar(proto: &BufferPrototype) -> Result<(), String> {
    for order in [Order::C, Order::F] {
        let a = NDBuffer::create(
            &[2, 3],
            DataType::Int32,
            order,
            Some(&7i32.to_ne_bytes()),
            proto,
        )
        .map_err(e)?;
        ensure!(
            a.to_vec::<i32>().map_err(e)? == vec![7; 6] && a.memory() == proto.memory(),
            "create fill {order:?}"
        );
        ensure!(
            matches!(a.as_scalar(), Err(Error::ShapeMismatch(_))),
            "as_scalar on 6 elements must fail"
        );
        ensure!(
            matches!(a.item::<i32>(), Err(Error::ShapeMismatch(_))),
            "item on 6 elements must fail"
        );
    }
    let c = NDBuffer::create(
        &[2, 2],
        DataType::Complex128,
        Order::F,
        Some(
            &[
                1.5f64.to_ne_bytes().as_slice(),
                (-0.25f64).to_ne_bytes().as_slice(),
            ]
            .concat(),
        ),
        proto,
    )
    .map_err(e)?;
    ensure!(
        c.to_vec::<Complex<f64>>().map_err(e)? == vec![Complex::new(1.5, -0.25); 4],
        "create complex fill"
    );
    ensure!(
        matches!(
            NDBuffer::create(&[2], DataType::Int32, Order::C, Some(&[1u8, 2]), proto),
            Err(Error::DataType(_))
        ),
        "a fill value of the wrong size must fail"
    );
    let none = NDBuffer::create(&[4], DataType::UInt16, Order::C, None, proto).map_err(e)?;
    ensure!(none.shape() == [4], "create without fill");
    let zero = NDBuffer::empty(&[0, 2], DataType::UInt8, Order::C, proto).map_err(e)?;
    ensure!(
        matches!(zero.as_scalar(), Err(Error::ShapeMismatch(_))),
        "as_scalar on 0 elements must fail"
    );
    for shape in [&[][..], &[1][..], &[1, 1, 1][..]] {
        let one = NDBuffer::create(
            shape,
            DataType::Float64,
            Order::F,
            Some(&2.5f64.to_ne_bytes()),
            proto,
        )
        .map_err(e)?;
        ensure!(
            one.as_scalar().map_err(e)? == 2.5f64.to_ne_bytes().to_vec(),
            "as_scalar value {shape:?}"
        );
        ensure!(one.item::<f64>().map_err(e)? == 2.5, "item {shape:?}");
        ensure!(
            matches!(one.item::<f32>(), Err(Error::DataType(_))),
            "item of the wrong type must fail"
        );
    }
    Ok(())
}

/// Integer indexing (`at`) gives views of the parent, element by element against explicit
/// index arithmetic, in C and F order.
pub fn integer_indexing_gives_views(proto: &BufferPrototype) -> Result<(), String> {
    let shape = [2usize, 3, 4];
    for order in [Order::C, Order::F] {
        let data: Vec<i32> = (0..24).collect();
        let mut a = upload(&data, &shape, order, proto)?;
        for i in 0..24 {
            let idx = unravel(i, &shape);
            let v = a.at(&idx).map_err(e)?;
            ensure!(
                v.shape().is_empty() && v.item::<i32>().map_err(e)? == i as i32,
                "{order:?} a{idx:?}"
            );
            ensure!(
                v.buffer().storage_id() == a.buffer().storage_id(),
                "{order:?} a{idx:?} is not a view"
            );
        }
        // Writes through an element view are visible in the parent.
        let mut el = a.at(&[1, 2, 0]).map_err(e)?;
        el.fill_with(-5i32).map_err(e)?;
        // Writes through a sub-array view are visible in the parent.
        let mut row = a.get(&[0..1, 1..3, 1..4]).map_err(e)?;
        ensure!(
            row.shape() == [1, 2, 3] && row.buffer().storage_id() == a.buffer().storage_id(),
            "get is not a view"
        );
        row.fill_with(-1i32).map_err(e)?;
        let want: Vec<i32> = (0..24)
            .map(|i| {
                let idx = unravel(i, &shape);
                if idx == [1, 2, 0] {
                    -5
                } else if idx[0] == 0 && (1..3).contains(&idx[1]) && idx[2] >= 1 {
                    -1
                } else {
                    i as i32
                }
            })
            .collect();
        let got = a.to_vec::<i32>().map_err(e)?;
        ensure!(
            got == want,
            "{order:?}: writes through views: {got:?}, want {want:?}"
        );
        // Writes into the parent are visible in an earlier view.
        let view = a.get(&[1..2, 0..3, 2..3]).map_err(e)?;
        let host = NDBuffer::from_vec(vec![100i32, 101, 102], &[1, 3, 1]).map_err(e)?;
        a.set(&[1..2, 0..3, 2..3], &host).map_err(e)?;
        ensure!(
            view.to_vec::<i32>().map_err(e)? == vec![100, 101, 102],
            "{order:?}: a view sees writes into its parent"
        );
        // Indexing a view: offsets compose.
        let inner = a.get(&[1..2, 1..3, 0..4]).map_err(e)?;
        let x = inner.at(&[0, 1, 3]).map_err(e)?;
        ensure!(
            x.item::<i32>().map_err(e)? == want[ravel(&[1, 2, 3], &shape)],
            "{order:?}: index of a view"
        );
        ensure!(
            matches!(a.at(&[2, 0, 0]), Err(Error::OutOfBounds(_)))
                && matches!(a.at(&[0, 3, 0]), Err(Error::OutOfBounds(_)))
                && a.at(&[0, 0]).is_err()
                && a.at(&[0, 0, 0, 0]).is_err(),
            "bad indices must fail"
        );
        ensure!(
            matches!(a.get(&[0..3, 0..3, 0..4]), Err(Error::OutOfBounds(_)))
                && a.get(&[0..1, 0..1]).is_err(),
            "bad subsets must fail"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// all_equal / array_equal against a full scan

/// The five data types of zarr-python's all_equal test.
const SCAN_DTYPES: [DataType; 5] = [
    DataType::Float16,
    DataType::Float32,
    DataType::Float64,
    DataType::Complex64,
    DataType::Int32,
];

const SPECIALS: [f64; 4] = [0.0, -0.0, f64::NAN, 1.0];

/// One value of the special set as an element of `dtype` (native bytes). Complex values
/// are `v + (1 − v)i`, so 0.0 and −0.0 differ in the real part only; integers map NaN to −1.
fn encode(dtype: DataType, v: f64) -> Vec<u8> {
    match dtype {
        DataType::Float16 => f16::from_f64(v).to_ne_bytes().to_vec(),
        DataType::Float32 => (v as f32).to_ne_bytes().to_vec(),
        DataType::Float64 => v.to_ne_bytes().to_vec(),
        DataType::Complex64 => {
            [(v as f32).to_ne_bytes(), ((1.0 - v) as f32).to_ne_bytes()].concat()
        }
        DataType::Int32 => (if v.is_nan() { -1 } else { v as i32 })
            .to_ne_bytes()
            .to_vec(),
        other => unreachable!("{other}"),
    }
}

/// zarr semantics: floats by value, −0.0 ≠ 0.0, NaN == NaN only with equal_nan.
fn float_equal(x: f64, y: f64, equal_nan: bool) -> bool {
    if x.is_nan() || y.is_nan() {
        return equal_nan && x.is_nan() && y.is_nan();
    }
    x == y && x.is_sign_negative() == y.is_sign_negative()
}

/// Whether two special-set values are equal as elements of `dtype`.
fn special_equal(dtype: DataType, x: f64, y: f64, equal_nan: bool) -> bool {
    match dtype {
        DataType::Int32 => {
            let i = |v: f64| if v.is_nan() { -1 } else { v as i32 };
            i(x) == i(y)
        }
        DataType::Complex64 => {
            float_equal(x, y, equal_nan) && float_equal(1.0 - x, 1.0 - y, equal_nan)
        }
        _ => float_equal(x, y, equal_nan),
    }
}

/// A view of logical shape `view_shape` built in the prototype: its parent (of `parent_shape`
/// in storage order `order`) is uploaded from host values, then `make` derives the view;
/// `to_parent` maps a view index to the parent index it reads.
struct Layout {
    name: &'static str,
    view_shape: &'static [usize],
    parent_shape: &'static [usize],
    order: Order,
    make: fn(&NDBuffer) -> zarrbuf::Result<NDBuffer>,
    to_parent: fn(&[usize]) -> Vec<usize>,
}

const LAYOUTS: [Layout; 5] = [
    Layout {
        name: "1-d",
        view_shape: &[12],
        parent_shape: &[12],
        order: Order::C,
        make: |a| Ok(a.clone()),
        to_parent: |i| i.to_vec(),
    },
    Layout {
        name: "C 2-d",
        view_shape: &[3, 4],
        parent_shape: &[3, 4],
        order: Order::C,
        make: |a| Ok(a.clone()),
        to_parent: |i| i.to_vec(),
    },
    Layout {
        name: "F 2-d",
        view_shape: &[3, 4],
        parent_shape: &[3, 4],
        order: Order::F,
        make: |a| Ok(a.clone()),
        to_parent: |i| i.to_vec(),
    },
    Layout {
        name: "strided sub-view",
        view_shape: &[3, 4],
        parent_shape: &[5, 7],
        order: Order::C,
        make: |a| a.get(&[1..4, 2..6]),
        to_parent: |i| vec![i[0] + 1, i[1] + 2],
    },
    Layout {
        name: "transposed sub-view of F",
        view_shape: &[3, 4],
        parent_shape: &[6, 5],
        order: Order::F,
        make: |a| a.get(&[1..5, 0..3])?.transpose(&[1, 0]),
        to_parent: |i| vec![i[1] + 1, i[0]],
    },
];

/// Builds `layout` in the prototype holding `values` (view C order) and checks the view's
/// contents; the parent elements outside the view hold `outside`.
fn build_view(
    layout: &Layout,
    dtype: DataType,
    values: &[f64],
    outside: f64,
    proto: &BufferPrototype,
) -> Result<NDBuffer, String> {
    let pn: usize = layout.parent_shape.iter().product();
    let mut parent_vals = vec![outside; pn];
    for (i, &v) in values.iter().enumerate() {
        let p = (layout.to_parent)(&unravel(i, layout.view_shape));
        parent_vals[ravel(&p, layout.parent_shape)] = v;
    }
    let raw: Vec<u8> = parent_vals.iter().flat_map(|&v| encode(dtype, v)).collect();
    let parent = upload_bytes(&raw, dtype, layout.parent_shape, layout.order, proto)?;
    let view = (layout.make)(&parent).map_err(e)?;
    ensure!(
        view.shape() == layout.view_shape
            && view.buffer().storage_id() == parent.buffer().storage_id(),
        "{}: view geometry {:?}",
        layout.name,
        view.shape()
    );
    let want: Vec<u8> = values.iter().flat_map(|&v| encode(dtype, v)).collect();
    ensure!(
        view.to_native_bytes().map_err(e)? == want,
        "{} {dtype}: the view does not hold the values put there",
        layout.name
    );
    Ok(view)
}

/// `all_equal` against an element-by-element scan: every scanned data type, strided and
/// offset views, special values (NaN, signed zeros) with and without `equal_nan`.
pub fn all_equal_matches_a_full_scan(proto: &BufferPrototype) -> Result<(), String> {
    for dtype in SCAN_DTYPES {
        for layout in &LAYOUTS {
            let n: usize = layout.view_shape.iter().product();
            for &base in &SPECIALS {
                // The parent's elements outside the view never equal `base`.
                let outside = if base == 1.0 { 0.0 } else { 1.0 };
                for mismatch in [None, Some(0), Some(n - 1)] {
                    let others: &[f64] = if mismatch.is_some() {
                        &SPECIALS
                    } else {
                        &[0.0]
                    };
                    for &other in others {
                        let mut values = vec![base; n];
                        if let Some(i) = mismatch {
                            values[i] = other;
                        }
                        let view = build_view(layout, dtype, &values, outside, proto)?;
                        for &probe in &SPECIALS {
                            for equal_nan in [false, true] {
                                // The full scan, element by element.
                                let mut expect = true;
                                for &v in &values {
                                    if !special_equal(dtype, v, probe, equal_nan) {
                                        expect = false;
                                        break;
                                    }
                                }
                                let got = view
                                    .all_equal(&encode(dtype, probe), equal_nan)
                                    .map_err(e)?;
                                ensure!(
                                    got == expect,
                                    "{dtype} {}: base {base} other {other} at {mismatch:?} == {probe} (equal_nan {equal_nan}): got {got}, the full scan says {expect}",
                                    layout.name
                                );
                            }
                        }
                    }
                }
            }
        }
        // Wrong-size comparison values are refused.
        let a = NDBuffer::zeros(&[3], dtype, Order::C, proto).map_err(e)?;
        ensure!(
            matches!(a.all_equal(&[0u8; 3], true), Err(Error::DataType(_))),
            "{dtype}: a 3-byte comparison value must fail"
        );
    }
    Ok(())
}

/// `array_equal` against an element-by-element scan on random pairs of layouts and values
/// of every scanned data type.
pub fn array_equal_matches_a_full_scan(proto: &BufferPrototype) -> Result<(), String> {
    let mut r = rng(11);
    for dtype in SCAN_DTYPES {
        for trial in 0..40 {
            let la = &LAYOUTS[trial % LAYOUTS.len()];
            let lb = &LAYOUTS[(trial / LAYOUTS.len() + trial) % LAYOUTS.len()];
            if la.view_shape != lb.view_shape {
                continue;
            }
            let n: usize = la.view_shape.iter().product();
            let a_vals: Vec<f64> = (0..n).map(|_| SPECIALS[r.below(4)]).collect();
            let mut b_vals = a_vals.clone();
            for _ in 0..r.below(3) {
                b_vals[r.below(n)] = SPECIALS[r.below(4)];
            }
            let a = build_view(la, dtype, &a_vals, 1.0, proto)?;
            let b = build_view(lb, dtype, &b_vals, 0.0, proto)?;
            for equal_nan in [false, true] {
                let mut expect = true;
                for (&x, &y) in a_vals.iter().zip(&b_vals) {
                    expect &= special_equal(dtype, x, y, equal_nan);
                }
                let got = a.array_equal(&b, equal_nan).map_err(e)?;
                ensure!(
                    got == expect,
                    "{dtype} {} vs {} (equal_nan {equal_nan}): got {got}, the full scan says {expect}; a {a_vals:?} b {b_vals:?}",
                    la.name,
                    lb.name
                );
                // Symmetric, and every array equals itself unless it holds NaN and !equal_nan.
                ensure!(
                    b.array_equal(&a, equal_nan).map_err(e)? == expect,
                    "{dtype}: array_equal is not symmetric"
                );
                let self_eq = a_vals
                    .iter()
                    .all(|&x| special_equal(dtype, x, x, equal_nan));
                ensure!(
                    a.array_equal(&a, equal_nan).map_err(e)? == self_eq,
                    "{dtype}: a == a"
                );
            }
        }
        let a = NDBuffer::zeros(&[3, 4], dtype, Order::C, proto).map_err(e)?;
        let other_shape = NDBuffer::zeros(&[4, 3], dtype, Order::C, proto).map_err(e)?;
        let other_type = NDBuffer::zeros(&[3, 4], DataType::UInt8, Order::C, proto).map_err(e)?;
        ensure!(
            !a.array_equal(&other_shape, true).map_err(e)?
                && !a.array_equal(&other_type, true).map_err(e)?,
            "{dtype}: different shapes or data types are not equal"
        );
        let host_zeros =
            NDBuffer::zeros(&[3, 4], dtype, Order::F, &BufferPrototype::cpu()).map_err(e)?;
        ensure!(
            a.array_equal(&host_zeros, false).map_err(e)?,
            "{dtype}: zeros in {} vs zeros on the host",
            proto.memory()
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Buffer: promotion, slices, concat, copies, host access, borrows, read-only bytes

/// Whether memory `m` satisfies a prototype for `want`, by the rule written here: a CPU
/// prototype takes any host-readable memory; pinned and CUDA prototypes need exactly theirs.
fn satisfies(want: Memory, m: Memory) -> bool {
    match want {
        Memory::Host => matches!(m, Memory::Host | Memory::Pinned(_)),
        _ => want == m,
    }
}

/// Promotion to another memory is zero-copy exactly when the source already satisfies it,
/// and copies otherwise.
pub fn zero_copy_promotion(proto: &BufferPrototype) -> Result<(), String> {
    let data: Vec<u8> = (0..200u32).map(|i| (i * 7 % 251) as u8).collect();
    let cpu = BufferPrototype::cpu();
    let sources = [
        ("host", Buffer::from_vec(data.clone())),
        ("proto", Buffer::from_slice(&data, proto).map_err(e)?),
        (
            "proto slice",
            Buffer::from_slice(&[vec![0u8; 5], data.clone()].concat(), proto)
                .map_err(e)?
                .slice(5..),
        ),
    ];
    for (sname, src) in &sources {
        for (tname, target) in [("cpu", &cpu), ("proto", proto)] {
            let out = Buffer::from_buffer(src, target).map_err(e)?;
            let same = satisfies(target.memory(), src.memory());
            ensure!(
                (out.storage_id() == src.storage_id()) == same,
                "{sname} in {} → {tname} ({}): zero copy expected {same}, storage {} vs {}",
                src.memory(),
                target.memory(),
                out.storage_id(),
                src.storage_id()
            );
            ensure!(
                out.id() != src.id() && out.len() == src.len(),
                "{sname} → {tname}: a new handle of the same length"
            );
            ensure!(
                out.to_vec().map_err(e)? == data,
                "{sname} → {tname}: contents"
            );
            if same {
                ensure!(
                    out.memory() == src.memory() && out.offset() == src.offset(),
                    "{sname} → {tname}: promoted view moved"
                );
            } else {
                ensure!(
                    out.memory() == target.memory(),
                    "{sname} → {tname}: copy made in {}",
                    out.memory()
                );
            }
            // A promoted handle shares writes; a copy does not.
            let mut w = out.clone();
            w.fill_bytes(0xAB).map_err(e)?;
            let src_now = src.to_vec().map_err(e)?;
            ensure!(
                (src_now == vec![0xAB; data.len()]) == same,
                "{sname} → {tname}: writes through the result reached the source: {}",
                src_now == vec![0xAB; data.len()]
            );
            // Restore the source.
            let mut s = src.clone();
            s.copy_from(&Buffer::from_vec(data.clone())).map_err(e)?;
        }
    }
    // NDBuffer::to_prototype / to_host follow the same rule.
    let vals: Vec<u16> = (0..12).map(|i| i * 3 + 1).collect();
    let nd = upload(&vals, &[3, 4], Order::F, proto)?;
    for (tname, target) in [("cpu", &cpu), ("proto", proto)] {
        let out = nd.to_prototype(target).map_err(e)?;
        let same = satisfies(target.memory(), nd.memory());
        ensure!(
            (out.buffer().storage_id() == nd.buffer().storage_id()) == same,
            "NDBuffer in {} → {tname}: zero copy expected {same}",
            nd.memory()
        );
        ensure!(
            out.to_vec::<u16>().map_err(e)? == vals && out.shape() == [3, 4],
            "NDBuffer → {tname}: values"
        );
        if !same {
            ensure!(
                out.memory() == target.memory() && out.is_c_contiguous(),
                "NDBuffer copy → {tname} layout"
            );
        }
    }
    let h = nd.to_host().map_err(e)?;
    ensure!(
        h.buffer().is_host_accessible()
            && (h.buffer().storage_id() == nd.buffer().storage_id())
                == nd.memory().is_host_accessible(),
        "to_host"
    );
    Ok(())
}

/// Buffer slices: their geometry, views of the parent, slices of slices, writes through a
/// slice, and out-of-bounds, reversed and overflowing ranges refused.
pub fn slices_and_bounds(proto: &BufferPrototype) -> Result<(), String> {
    let data: Vec<u8> = (0u8..100).collect();
    let b = Buffer::from_slice(&data, proto).map_err(e)?;
    let s = b.try_slice(10..20).map_err(e)?;
    ensure!(
        s.len() == 10 && s.total_size() >= 100 && s.offset() == b.offset() + 10,
        "slice geometry: len {} total {} offset {}",
        s.len(),
        s.total_size(),
        s.offset()
    );
    ensure!(
        s.storage_id() == b.storage_id() && s.id() != b.id() && s.memory() == b.memory(),
        "slice is not a view"
    );
    ensure!(s.to_vec().map_err(e)? == data[10..20], "slice contents");
    // Slices of slices, all range forms.
    let ss = s.try_slice(2..=4).map_err(e)?;
    ensure!(ss.to_vec().map_err(e)? == data[12..15], "slice of a slice");
    ensure!(
        b.try_slice(..).map_err(e)?.to_vec().map_err(e)? == data,
        ".."
    );
    ensure!(
        b.try_slice(95..).map_err(e)?.to_vec().map_err(e)? == data[95..],
        "95.."
    );
    ensure!(
        b.try_slice(..3).map_err(e)?.to_vec().map_err(e)? == data[..3],
        "..3"
    );
    ensure!(
        b.slice(40..42).to_vec().map_err(e)? == data[40..42],
        "slice()"
    );
    // Writes through a slice land at its offset only.
    let mut w = b.slice(50..53);
    w.fill_bytes(255).map_err(e)?;
    let mut want = data.clone();
    want[50..53].fill(255);
    ensure!(b.to_vec().map_err(e)? == want, "a write through a slice");
    // Bounds.
    for (what, r) in [
        ("past the end", s.try_slice(5..11)),
        ("past the end of the parent", b.try_slice(90..101)),
        ("start past the end", b.try_slice(101..)),
        ("inclusive end", b.try_slice(0..=100)),
    ] {
        ensure!(
            matches!(r, Err(Error::OutOfBounds(_))),
            "{what}: expected OutOfBounds, got {:?}",
            r.map(|b| b.len())
        );
    }
    ensure!(
        matches!(
            b.try_slice((
                std::ops::Bound::Included(50usize),
                std::ops::Bound::Excluded(40usize)
            )),
            Err(Error::OutOfBounds(_))
        ),
        "a reversed range must fail"
    );
    ensure!(
        matches!(
            b.try_slice((
                std::ops::Bound::Excluded(usize::MAX),
                std::ops::Bound::Unbounded
            )),
            Err(Error::OutOfBounds(_))
        ),
        "an overflowing range must fail"
    );
    // `slice` documents a panic for the same input.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.slice(0..200)));
    ensure!(panicked.is_err(), "slice(0..200) of 100 bytes must panic");
    Ok(())
}

/// `concat` of buffers from host memory, the prototype's memory and slices gives new memory
/// with their bytes in order; `combine` (zarr-python's `+`) leaves its operand alone.
pub fn concat_and_combine(proto: &BufferPrototype) -> Result<(), String> {
    let mut r = rng(3);
    let parts_data: Vec<Vec<u8>> = [0usize, 1, 17, 4096, 3, 0, 255]
        .iter()
        .map(|&n| (0..n).map(|_| r.byte()).collect())
        .collect();
    let want: Vec<u8> = parts_data.concat();
    // Alternate between host memory and the prototype's memory, and a slice.
    let mut parts = Vec::new();
    for (i, d) in parts_data.iter().enumerate() {
        parts.push(if i % 2 == 0 {
            Buffer::from_slice(d, proto).map_err(e)?
        } else {
            let padded = Buffer::from_vec([vec![9u8; 3], d.clone(), vec![9u8; 2]].concat());
            padded.slice(3..3 + d.len())
        });
    }
    for (tname, target) in [("cpu", BufferPrototype::cpu()), ("proto", proto.clone())] {
        let c = Buffer::concat(&parts, &target).map_err(e)?;
        ensure!(
            c.memory() == target.memory() && c.len() == want.len(),
            "concat into {tname}: {}",
            c.memory()
        );
        ensure!(
            c.to_vec().map_err(e)? == want,
            "concat into {tname}: contents"
        );
        ensure!(
            parts.iter().all(|p| p.storage_id() != c.storage_id()),
            "concat must make new memory"
        );
    }
    let first = Buffer::from_slice(&[1, 2], proto).map_err(e)?;
    let d = first.combine(&parts).map_err(e)?;
    ensure!(
        d.memory() == first.memory()
            && d.to_vec().map_err(e)? == [vec![1, 2], want.clone()].concat(),
        "combine (zarr-python's +)"
    );
    ensure!(
        first.to_vec().map_err(e)? == vec![1, 2],
        "combine must not change its operand"
    );
    let alone = first.combine(&[]).map_err(e)?;
    ensure!(
        alone.to_vec().map_err(e)? == vec![1, 2] && alone.storage_id() != first.storage_id(),
        "combine with nothing is a copy"
    );
    Ok(())
}

/// `copy_from` between host memory and the prototype's memory, each way, byte-exact.
pub fn copies_between_memories(proto: &BufferPrototype) -> Result<(), String> {
    let mut r = rng(5);
    let data: Vec<u8> = (0..10_000).map(|_| r.byte()).collect();
    let cpu = BufferPrototype::cpu();
    let protos = [("cpu", &cpu), ("proto", proto)];
    for (sname, sp) in protos {
        for (dname, dp) in protos {
            let src = Buffer::from_slice(&data, sp).map_err(e)?;
            let mut dst = Buffer::zeros(data.len(), dp).map_err(e)?;
            dst.copy_from(&src).map_err(e)?;
            ensure!(
                dst.to_vec().map_err(e)? == data && dst.memory() == dp.memory(),
                "{sname} → {dname}: copy_from"
            );
            ensure!(
                dst.content_eq(&src).map_err(e)? && src.content_eq(&dst).map_err(e)?,
                "{sname} → {dname}: content_eq"
            );
            // Sub-ranges at odd offsets, both ends sliced.
            let mut dst2 = Buffer::zeros(data.len(), dp).map_err(e)?;
            let mut window = dst2.slice(1001..3003);
            src.slice(17..2019).copy_to(&mut window).map_err(e)?;
            let mut want = vec![0u8; data.len()];
            want[1001..3003].copy_from_slice(&data[17..2019]);
            ensure!(
                dst2.to_vec().map_err(e)? == want,
                "{sname} → {dname}: copy of a sub-range into a sub-range"
            );
            ensure!(
                !dst2.content_eq(&src).map_err(e)?,
                "{sname} → {dname}: content_eq of different bytes"
            );
            ensure!(
                dst2.copy_from(&src.slice(1..)).is_err(),
                "{sname} → {dname}: a length mismatch must fail"
            );
            ensure!(
                dst2.slice(1001..3003).to_vec().map_err(e)? == data[17..2019],
                "{sname} → {dname}: a failed copy must not write"
            );
            let fresh = src.copy_to_new(dp).map_err(e)?;
            ensure!(
                fresh.memory() == dp.memory()
                    && fresh.storage_id() != src.storage_id()
                    && fresh.to_vec().map_err(e)? == data,
                "{sname} → {dname}: copy_to_new"
            );
            src.sync().map_err(e)?;
        }
    }
    // Copying within one allocation (overlap-free halves).
    let b = Buffer::from_slice(&data[..100], proto).map_err(e)?;
    let mut hi = b.slice(50..100);
    hi.copy_from(&b.slice(0..50)).map_err(e)?;
    ensure!(
        b.to_vec().map_err(e)? == [&data[..50], &data[..50]].concat(),
        "copy between halves of one buffer"
    );
    Ok(())
}

/// Which memories the host and the device may access: host reads and writes of memory the
/// host cannot reach refused, explicit copies to the host always working.
pub fn host_access_rules(proto: &BufferPrototype) -> Result<(), String> {
    let b = Buffer::from_slice(&[1, 2, 3], proto).map_err(e)?;
    let (host_ok, device_ok) = match proto.memory() {
        Memory::Host => (true, false),
        Memory::Pinned(_) => (true, true),
        Memory::Cuda(_) => (false, true),
    };
    ensure!(
        b.is_host_accessible() == host_ok && b.is_device_accessible() == device_ok,
        "{}: host {} device {}",
        b.memory(),
        b.is_host_accessible(),
        b.is_device_accessible()
    );
    ensure!(
        b.device()
            == match proto.memory() {
                Memory::Cuda(n) => zarrbuf::Device::Cuda(n),
                _ => zarrbuf::Device::Cpu,
            },
        "device() of {}",
        b.memory()
    );
    let nd = upload(&[1i32, 2, 3, 4], &[2, 2], Order::C, proto)?;
    match (host_ok, b.as_host_bytes()) {
        (true, Ok(bytes)) => ensure!(*bytes == [1, 2, 3], "host bytes {:?}", &*bytes),
        (false, Err(Error::NotHostAccessible(msg))) => {
            ensure!(!msg.is_empty(), "an empty message")
        }
        (want, got) => {
            return Err(format!(
                "as_host_bytes on {}: host access {want}, got {:?}",
                b.memory(),
                got.map(|g| g.to_vec())
            ));
        }
    }
    match (host_ok, nd.as_ndarray::<i32>()) {
        (true, Ok(v)) => ensure!(v[[1, 0]] == 3, "as_ndarray value"),
        (false, Err(Error::NotHostAccessible(_))) => {}
        (want, got) => {
            return Err(format!(
                "as_ndarray on {}: host access {want}, got {:?}",
                nd.memory(),
                got.map(|v| v.to_owned())
            ));
        }
    }
    let mut w = b.clone();
    let r = w.with_host_bytes_mut(|bytes| {
        bytes[0] = 42;
        Ok(())
    });
    match (host_ok, r) {
        (true, Ok(())) => ensure!(b.to_vec().map_err(e)? == vec![42, 2, 3], "host write"),
        (false, Err(Error::NotHostAccessible(_))) => {}
        (want, got) => {
            return Err(format!(
                "with_host_bytes_mut on {}: host access {want}, got {got:?}",
                b.memory()
            ));
        }
    }
    ensure!(
        b.host_ptr().is_some() == host_ok,
        "host_ptr on {}",
        b.memory()
    );
    // Explicit copies always work, from any memory.
    ensure!(
        b.to_bytes().map_err(e)?.len() == 3 && nd.to_vec::<i32>().map_err(e)? == vec![1, 2, 3, 4],
        "explicit copies to the host"
    );
    let mut b2 = b.clone();
    b2.fill_bytes(9).map_err(e)?;
    ensure!(
        b.to_vec().map_err(e)? == vec![9, 9, 9],
        "writes through a clone are shared"
    );
    Ok(())
}

/// Borrows: a buffer borrowed for host access, or an array with a live ndarray view, refuses
/// writes through every other handle; reads stay shared.
pub fn borrow_rules(proto: &BufferPrototype) -> Result<(), String> {
    let data: Vec<u8> = (0..64).collect();
    let dev = Buffer::from_slice(&data, proto).map_err(e)?;
    // A host buffer borrowed with as_host_bytes refuses writes through every other handle,
    // including copies from the prototype's memory into it.
    let host = Buffer::from_vec(data.clone());
    {
        let guard = host.as_host_bytes().map_err(e)?;
        let mut other = host.clone();
        let mut part = host.slice(60..64);
        ensure!(
            matches!(other.fill_bytes(0), Err(Error::Busy(_))),
            "fill_bytes while borrowed"
        );
        ensure!(
            matches!(part.fill_bytes(0), Err(Error::Busy(_))),
            "fill_bytes of a disjoint slice while borrowed"
        );
        ensure!(
            matches!(other.copy_from(&dev), Err(Error::Busy(_))),
            "copy from {} into a borrowed host buffer",
            dev.memory()
        );
        ensure!(
            matches!(other.with_host_bytes_mut(|_| Ok(())), Err(Error::Busy(_))),
            "with_host_bytes_mut while borrowed"
        );
        // Reads are shared.
        let second = host.as_host_bytes().map_err(e)?;
        ensure!(
            *second == *guard && host.to_vec().map_err(e)? == data,
            "reads while borrowed"
        );
        let mut into_dev = Buffer::empty(64, proto).map_err(e)?;
        into_dev.copy_from(&host).map_err(e)?;
        ensure!(
            into_dev.to_vec().map_err(e)? == data,
            "copying out of a borrowed buffer"
        );
        ensure!(*guard == data[..], "the borrowed bytes did not change");
    }
    let mut other = host.clone();
    other.fill_bytes(1).map_err(e)?;
    ensure!(
        host.to_vec().map_err(e)? == vec![1; 64],
        "writes work again once the borrow ends"
    );
    // The same rules for the prototype's own memory, where the host can borrow it.
    match dev.as_host_bytes() {
        Ok(guard) => {
            let mut other = dev.clone();
            ensure!(
                matches!(other.fill_bytes(0), Err(Error::Busy(_))),
                "{}: fill_bytes while borrowed",
                dev.memory()
            );
            ensure!(*guard == data[..], "{}: borrowed bytes", dev.memory());
        }
        Err(err) => ensure!(
            matches!(err, Error::NotHostAccessible(_)) && !proto.memory().is_host_accessible(),
            "{}: {err}",
            dev.memory()
        ),
    }
    // NDBuffer: an ndarray view keeps the array borrowed.
    let nd = upload(
        &[1i32, 2, 3, 4, 5, 6],
        &[2, 3],
        Order::C,
        &BufferPrototype::cpu(),
    )?;
    let src = upload(&[7i32, 8, 9], &[1, 3], Order::C, proto)?;
    {
        let view = nd.as_ndarray::<i32>().map_err(e)?;
        let mut w = nd.clone();
        ensure!(
            matches!(w.set(&[1..2, 0..3], &src), Err(Error::Busy(_))),
            "set from {} while an ndarray view lives",
            src.memory()
        );
        let mut f = nd.get(&[0..1, 0..1]).map_err(e)?;
        ensure!(
            matches!(f.fill_with(0i32), Err(Error::Busy(_))),
            "fill while an ndarray view lives"
        );
        ensure!(view[[1, 2]] == 6, "the view did not change");
    }
    let mut w = nd.clone();
    w.set(&[1..2, 0..3], &src).map_err(e)?;
    ensure!(
        nd.to_vec::<i32>().map_err(e)? == vec![1, 2, 3, 7, 8, 9],
        "set after the view is dropped"
    );
    Ok(())
}

/// Buffers over read-only `Bytes`: readable and copyable, every write refused and leaving
/// them unchanged.
pub fn read_only_bytes(proto: &BufferPrototype) -> Result<(), String> {
    let ro = Buffer::from_bytes(bytes::Bytes::from_static(b"abcdefgh"));
    ensure!(
        &*ro.as_host_bytes().map_err(e)? == b"abcdefgh" && ro.memory() == Memory::Host,
        "reading Bytes"
    );
    let src = Buffer::from_slice(b"12345678", proto).map_err(e)?;
    let mut w = ro.clone();
    ensure!(
        matches!(w.fill_bytes(0), Err(Error::InvalidArgument(_))),
        "fill_bytes on Bytes"
    );
    ensure!(
        matches!(w.copy_from(&src), Err(Error::InvalidArgument(_))),
        "copy_from {} into Bytes",
        src.memory()
    );
    ensure!(
        matches!(
            w.slice(2..4).with_host_bytes_mut(|_| Ok(())),
            Err(Error::InvalidArgument(_))
        ),
        "with_host_bytes_mut on Bytes"
    );
    let mut nd = NDBuffer::from_buffer(ro.clone(), DataType::UInt16, &[4], Order::C).map_err(e)?;
    let v = NDBuffer::from_vec(vec![1u16], &[1]).map_err(e)?;
    ensure!(
        matches!(nd.set(&[0..1], &v), Err(Error::InvalidArgument(_))),
        "set into Bytes"
    );
    ensure!(
        matches!(nd.fill_with(3u16), Err(Error::InvalidArgument(_))),
        "fill of Bytes"
    );
    ensure!(
        &*ro.as_host_bytes().map_err(e)? == b"abcdefgh",
        "failed writes must not change Bytes"
    );
    // Reading works everywhere: into the prototype, and the copy is writable.
    let mut moved = Buffer::from_buffer(&ro, proto).map_err(e)?;
    if moved.storage_id() == ro.storage_id() {
        moved = ro.copy_to_new(proto).map_err(e)?;
    }
    moved.fill_bytes(b'z').map_err(e)?;
    ensure!(
        moved.to_vec().map_err(e)? == b"zzzzzzzz"
            && &*ro.as_host_bytes().map_err(e)? == b"abcdefgh",
        "a copy of Bytes is writable and separate"
    );
    let dst = nd.to_prototype(proto).map_err(e)?;
    let want: Vec<u16> = b"abcdefgh"
        .chunks(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect();
    ensure!(
        dst.to_vec::<u16>().map_err(e)? == want,
        "NDBuffer over Bytes → prototype"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// fill, set

/// `fill_with` and `fill` in C and F order, on whole arrays and strided windows.
pub fn fill_and_fill_with(proto: &BufferPrototype) -> Result<(), String> {
    fn typed<T: Element + PartialEq + std::fmt::Debug>(
        value: T,
        zero: T,
        proto: &BufferPrototype,
    ) -> Result<(), String> {
        let shape = [4usize, 5, 3];
        for order in [Order::C, Order::F] {
            let n = 60;
            let mut a = upload(&vec![zero; n], &shape, order, proto)?;
            a.fill_with(value).map_err(e)?;
            ensure!(
                a.to_vec::<T>().map_err(e)? == vec![value; n],
                "{} {order:?}: fill_with",
                T::DTYPE
            );
            // Fill a strided window with zero again, through `fill` with bytes.
            let mut part = a.get(&[1..3, 0..5, 1..2]).map_err(e)?;
            part.fill(&zero.to_ne_bytes_vec()).map_err(e)?;
            let want: Vec<T> = (0..n)
                .map(|i| {
                    let idx = unravel(i, &shape);
                    if (1..3).contains(&idx[0]) && idx[2] == 1 {
                        zero
                    } else {
                        value
                    }
                })
                .collect();
            ensure!(
                a.to_vec::<T>().map_err(e)? == want,
                "{} {order:?}: fill of a strided window",
                T::DTYPE
            );
            // And a transposed view.
            let mut t = a.transpose(&[2, 0, 1]).map_err(e)?;
            t.fill_with(value).map_err(e)?;
            ensure!(
                a.to_vec::<T>().map_err(e)? == vec![value; n],
                "{} {order:?}: fill through a transpose",
                T::DTYPE
            );
        }
        Ok(())
    }
    typed(true, false, proto)?;
    typed(-3i8, 0, proto)?;
    typed(0x1234i16, 0, proto)?;
    typed(-7_000_000i32, 0, proto)?;
    typed(0x0102_0304_0506_0708i64, 0, proto)?;
    typed(200u8, 0, proto)?;
    typed(60000u16, 0, proto)?;
    typed(0xdead_beefu32, 0, proto)?;
    typed(u64::MAX - 5, 0, proto)?;
    typed(f16::from_f32(-1.5), f16::ZERO, proto)?;
    typed(bf16::from_f32(3.25), bf16::ZERO, proto)?;
    typed(-0.0f32, 1.0, proto)?;
    typed(std::f64::consts::PI, 0.0, proto)?;
    typed(Complex::new(1.5f32, -2.5), Complex::new(0.0, 0.0), proto)?;
    typed(Complex::new(-1e300f64, 7.0), Complex::new(0.0, 0.0), proto)?;
    let mut a = NDBuffer::zeros(&[3], DataType::Float32, Order::C, proto).map_err(e)?;
    ensure!(
        matches!(a.fill_with(1.0f64), Err(Error::DataType(_))),
        "fill_with of the wrong type must fail"
    );
    ensure!(
        matches!(a.fill(&[0u8; 8]), Err(Error::DataType(_))),
        "fill with the wrong number of bytes must fail"
    );
    ensure!(
        a.to_vec::<f32>().map_err(e)? == vec![0.0; 3],
        "failed fills must not write"
    );
    Ok(())
}

/// `src` (C-order bytes of `sub_shape`) as a host array laid out by `round`: C order, F
/// order (through `copy_to`), or a transposed view of the reversed-axes array.
fn host_source(
    src: &[u8],
    dtype: DataType,
    sub_shape: &[usize],
    round: usize,
) -> Result<NDBuffer, String> {
    let (size, m) = (dtype.size(), sub_shape.iter().product::<usize>());
    let host_c = NDBuffer::from_buffer(Buffer::from_vec(src.to_vec()), dtype, sub_shape, Order::C)
        .map_err(e)?;
    Ok(match round % 3 {
        0 => host_c,
        1 => host_c
            .copy_to(&BufferPrototype::cpu(), Order::F)
            .map_err(e)?,
        _ => {
            // Build the transposed (reversed-axes) array, then view it back.
            let rev: Vec<usize> = sub_shape.iter().rev().copied().collect();
            let mut tb = vec![0u8; m * size];
            for i in 0..m {
                let idx = unravel(i, sub_shape);
                let ridx: Vec<usize> = idx.iter().rev().copied().collect();
                let j = ravel(&ridx, &rev);
                tb[j * size..(j + 1) * size].copy_from_slice(&src[i * size..(i + 1) * size]);
            }
            NDBuffer::from_buffer(Buffer::from_vec(tb), dtype, &rev, Order::C)
                .map_err(e)?
                .transpose(&[2, 1, 0])
                .map_err(e)?
        }
    })
}

/// Sets into `a` (a 5×7×3 array of `dtype` holding `reference`) that must fail: a wrong
/// shape, a wrong data type, out of bounds; none may write.
fn failed_sets_write_nothing(
    a: &mut NDBuffer,
    dtype: DataType,
    reference: &[u8],
) -> Result<(), String> {
    // Errors: wrong shape, wrong type, out of bounds; nothing is written.
    let wrong_shape =
        NDBuffer::zeros(&[2, 2, 2], dtype, Order::C, &BufferPrototype::cpu()).map_err(e)?;
    ensure!(
        matches!(
            a.set(&[0..2, 0..2, 0..1], &wrong_shape),
            Err(Error::ShapeMismatch(_))
        ),
        "{dtype}: set with a wrong shape"
    );
    let other_dtype = if dtype == DataType::UInt8 {
        DataType::Int8
    } else {
        DataType::UInt8
    };
    let wrong_type =
        NDBuffer::zeros(&[2, 2, 1], other_dtype, Order::C, &BufferPrototype::cpu()).map_err(e)?;
    ensure!(
        matches!(
            a.set(&[0..2, 0..2, 0..1], &wrong_type),
            Err(Error::DataType(_))
        ),
        "{dtype}: set with a wrong data type"
    );
    let fits = NDBuffer::zeros(&[2, 2, 1], dtype, Order::C, &BufferPrototype::cpu()).map_err(e)?;
    ensure!(
        matches!(
            a.set(&[4..6, 0..2, 0..1], &fits),
            Err(Error::OutOfBounds(_))
        ),
        "{dtype}: set out of bounds"
    );
    ensure!(
        a.to_native_bytes().map_err(e)? == reference,
        "{dtype}: failed sets must not write"
    );
    Ok(())
}

/// `set` of random subsets from host arrays and between arrays of the prototype, checked
/// byte by byte against C-order references; failed sets write nothing.
pub fn set_subsets_from_host(proto: &BufferPrototype) -> Result<(), String> {
    let mut r = rng(7);
    for dtype in [
        DataType::UInt8,
        DataType::Int16,
        DataType::Float32,
        DataType::Float64,
        DataType::Complex128,
    ] {
        let size = dtype.size();
        let shape = [5usize, 7, 3];
        let n: usize = shape.iter().product();
        for order in [Order::C, Order::F] {
            let mut a = NDBuffer::zeros(&shape, dtype, order, proto).map_err(e)?;
            // The reference: C-order bytes of every element.
            let mut reference = vec![0u8; n * size];
            for round in 0..8 {
                let lo: Vec<usize> = shape.iter().map(|&k| r.below(k)).collect();
                let hi: Vec<usize> = lo
                    .iter()
                    .zip(&shape)
                    .map(|(&l, &k)| l + 1 + r.below(k - l))
                    .collect();
                let sub: Vec<Range<usize>> = lo.iter().zip(&hi).map(|(&l, &h)| l..h).collect();
                let sub_shape: Vec<usize> = sub.iter().map(|s| s.len()).collect();
                let m: usize = sub_shape.iter().product();
                let src: Vec<u8> = (0..m * size).map(|_| r.byte()).collect();
                let host = host_source(&src, dtype, &sub_shape, round)?;
                a.set(&sub, &host).map_err(e)?;
                for i in 0..m {
                    let idx = unravel(i, &sub_shape);
                    let at: Vec<usize> = idx.iter().zip(&lo).map(|(&x, &l)| x + l).collect();
                    let j = ravel(&at, &shape);
                    reference[j * size..(j + 1) * size]
                        .copy_from_slice(&src[i * size..(i + 1) * size]);
                }
                ensure!(
                    a.to_native_bytes().map_err(e)? == reference,
                    "{dtype} {order:?} round {round}: set of subset {sub:?}"
                );
            }
            failed_sets_write_nothing(&mut a, dtype, &reference)?;
            // Set from the prototype's own memory, between two of its arrays.
            let mut b = NDBuffer::zeros(&shape, dtype, Order::C, proto).map_err(e)?;
            let window = a.get(&[1..4, 2..7, 0..2]).map_err(e)?;
            b.set(&[2..5, 0..5, 1..3], &window).map_err(e)?;
            let got = b.to_native_bytes().map_err(e)?;
            for i in 0..n {
                let idx = unravel(i, &shape);
                let want: Vec<u8> = if (2..5).contains(&idx[0]) && idx[1] < 5 && idx[2] >= 1 {
                    let j = ravel(&[idx[0] - 1, idx[1] + 2, idx[2] - 1], &shape);
                    reference[j * size..(j + 1) * size].to_vec()
                } else {
                    vec![0; size]
                };
                ensure!(
                    got[i * size..(i + 1) * size] == want[..],
                    "{dtype} {order:?}: set from {} at {idx:?}",
                    window.memory()
                );
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// transpose, reshape, squeeze

/// `transpose` by every axis permutation gives views, and their copies hold the permuted
/// elements, in C and F order.
pub fn transpose_views_and_copies(proto: &BufferPrototype) -> Result<(), String> {
    let shape = [2usize, 3, 4];
    let data: Vec<i64> = (0..24).map(|i| i * 11 - 50).collect();
    for order in [Order::C, Order::F] {
        let a = upload(&data, &shape, order, proto)?;
        for axes in [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ] {
            let t = a.transpose(&axes).map_err(e)?;
            let tshape: Vec<usize> = axes.iter().map(|&k| shape[k]).collect();
            ensure!(
                t.shape() == tshape && t.buffer().storage_id() == a.buffer().storage_id(),
                "{order:?} {axes:?}: transpose is a view"
            );
            // t[j] = a[i] where i[axes[k]] = j[k].
            let want: Vec<i64> = (0..24)
                .map(|f| {
                    let j = unravel(f, &tshape);
                    let mut i = [0usize; 3];
                    for k in 0..3 {
                        i[axes[k]] = j[k];
                    }
                    data[ravel(&i, &shape)]
                })
                .collect();
            ensure!(
                t.to_vec::<i64>().map_err(e)? == want,
                "{order:?} {axes:?}: transposed values"
            );
            let m = t.copy().map_err(e)?;
            ensure!(
                m.is_c_contiguous()
                    && m.memory() == proto.memory()
                    && m.buffer().storage_id() != a.buffer().storage_id()
                    && m.strides() == strides_of(&tshape, 8, Order::C).as_slice(),
                "{order:?} {axes:?}: materialised transpose layout"
            );
            ensure!(
                m.buffer().to_vec().map_err(e)?
                    == want
                        .iter()
                        .flat_map(|v| v.to_ne_bytes())
                        .collect::<Vec<u8>>(),
                "{order:?} {axes:?}: materialised bytes"
            );
            let f = t.copy_to(&BufferPrototype::cpu(), Order::F).map_err(e)?;
            ensure!(
                f.is_f_contiguous() && f.to_vec::<i64>().map_err(e)? == want,
                "{order:?} {axes:?}: copy_to F on the host"
            );
        }
        // Double transpose is the identity; writes through a transpose reach the parent.
        let back = a
            .transpose(&[2, 0, 1])
            .map_err(e)?
            .transpose(&[1, 2, 0])
            .map_err(e)?;
        ensure!(
            back.shape() == shape && back.strides() == a.strides(),
            "{order:?}: transpose of a transpose"
        );
        let mut t = a.transpose(&[2, 1, 0]).map_err(e)?;
        let mut el = t.at(&[3, 2, 1]).map_err(e)?;
        el.fill_with(999i64).map_err(e)?;
        ensure!(
            a.at(&[1, 2, 3]).map_err(e)?.item::<i64>().map_err(e)? == 999,
            "{order:?}: a write through a transpose"
        );
        t.fill_with(0i64).map_err(e)?;
        ensure!(
            a.to_vec::<i64>().map_err(e)? == vec![0; 24],
            "{order:?}: fill through a transpose"
        );
        ensure!(
            matches!(a.transpose(&[0, 1]), Err(Error::InvalidArgument(_)))
                && matches!(a.transpose(&[0, 1, 1]), Err(Error::InvalidArgument(_)))
                && matches!(a.transpose(&[0, 1, 3]), Err(Error::InvalidArgument(_))),
            "bad axes must fail"
        );
    }
    Ok(())
}

/// `reshape` of contiguous arrays gives views, of other layouts copies in C element order;
/// `squeeze` of all or listed length-1 axes gives views.
pub fn reshape_and_squeeze(proto: &BufferPrototype) -> Result<(), String> {
    let data: Vec<u32> = (0..12).map(|i| i * 5 + 1).collect();
    let a = upload(&data, &[3, 4], Order::C, proto)?;
    for shape in [&[2, 6][..], &[12], &[2, 2, 3], &[1, 12, 1], &[3, 4]] {
        let r = a.reshape(shape).map_err(e)?;
        ensure!(
            r.shape() == shape
                && r.buffer().storage_id() == a.buffer().storage_id()
                && r.is_c_contiguous(),
            "contiguous reshape to {shape:?} must be a view"
        );
        ensure!(
            r.to_vec::<u32>().map_err(e)? == data,
            "reshape to {shape:?}: values in C order"
        );
    }
    // A reshape view shares writes.
    let mut r = a.reshape(&[12]).map_err(e)?;
    let mut el = r.at(&[7]).map_err(e)?;
    el.fill_with(0u32).map_err(e)?;
    ensure!(
        a.at(&[1, 3]).map_err(e)?.item::<u32>().map_err(e)? == 0,
        "a write through a reshape view"
    );
    r.set(
        &[7..8],
        &NDBuffer::from_vec(vec![data[7]], &[1]).map_err(e)?,
    )
    .map_err(e)?;
    // A non-contiguous array reshapes through a copy, in C order of its elements.
    let t = a.transpose(&[1, 0]).map_err(e)?;
    let tr = t.reshape(&[2, 6]).map_err(e)?;
    let want: Vec<u32> = (0..4)
        .flat_map(|j| (0..3).map(move |i| i * 4 + j))
        .map(|k| data[k])
        .collect();
    ensure!(
        tr.buffer().storage_id() != a.buffer().storage_id() && tr.memory() == proto.memory(),
        "non-contiguous reshape must copy, in the same memory"
    );
    ensure!(
        tr.to_vec::<u32>().map_err(e)? == want,
        "reshape of a transpose"
    );
    let f = upload(&data, &[3, 4], Order::F, proto)?;
    let fr = f.reshape(&[4, 3]).map_err(e)?;
    ensure!(
        fr.to_vec::<u32>().map_err(e)? == data,
        "reshape of an F-order array keeps C-order element order"
    );
    let sub = a.get(&[0..3, 1..3]).map_err(e)?.reshape(&[6]).map_err(e)?;
    ensure!(
        sub.to_vec::<u32>().map_err(e)?
            == vec![data[1], data[2], data[5], data[6], data[9], data[10]],
        "reshape of a strided sub-view"
    );
    for bad in [&[5][..], &[3, 5], &[0], &[13]] {
        ensure!(
            matches!(a.reshape(bad), Err(Error::ShapeMismatch(_))),
            "reshape to {bad:?} must fail"
        );
    }
    let one = upload(&[9u32], &[1, 1], Order::C, proto)?;
    let scalar = one.reshape(&[]).map_err(e)?;
    ensure!(
        scalar.shape().is_empty() && scalar.item::<u32>().map_err(e)? == 9,
        "reshape to a 0-d array"
    );
    // squeeze
    let s = upload(&[1u8, 2, 3], &[1, 3, 1], Order::C, proto)?;
    let all = s.squeeze(&[]).map_err(e)?;
    ensure!(
        all.shape() == [3]
            && all.buffer().storage_id() == s.buffer().storage_id()
            && all.to_vec::<u8>().map_err(e)? == vec![1, 2, 3],
        "squeeze all"
    );
    ensure!(
        s.squeeze(&[2]).map_err(e)?.shape() == [1, 3]
            && s.squeeze(&[0]).map_err(e)?.shape() == [3, 1]
            && s.squeeze(&[0, 2]).map_err(e)?.shape() == [3],
        "squeeze listed axes"
    );
    ensure!(
        matches!(s.squeeze(&[1]), Err(Error::InvalidArgument(_)))
            && matches!(s.squeeze(&[3]), Err(Error::InvalidArgument(_))),
        "squeezing a long or missing axis must fail"
    );
    let mut sq = s.squeeze(&[]).map_err(e)?;
    sq.fill_with(4u8).map_err(e)?;
    ensure!(
        s.to_vec::<u8>().map_err(e)? == vec![4, 4, 4],
        "writes through a squeezed view"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// astype, with_type, byte order, ndarray, item

/// Uploads `src` as a transposed (F-stored) 2-d array and as 1-d, converts to `to`, and
/// compares every element with `f`.
fn check_cast<S: Element, D: Element + std::fmt::Debug>(
    src: &[S],
    to: DataType,
    f: impl Fn(S) -> D,
    same: impl Fn(D, D) -> bool,
    proto: &BufferPrototype,
) -> Result<(), String> {
    let n = src.len();
    ensure!(n.is_multiple_of(2), "test data must have an even length");
    let want: Vec<D> = src.iter().map(|&x| f(x)).collect();
    let flat = upload(src, &[n], Order::C, proto)?;
    // A 2-d array of shape [2, n/2] holding src in C order, viewed through a transpose of an
    // F-order array of shape [n/2, 2]: non-contiguous for the cast kernel.
    let rows: Vec<S> = (0..n).map(|i| src[(i % 2) * (n / 2) + i / 2]).collect();
    let tr = upload(&rows, &[n / 2, 2], Order::F, proto)?
        .transpose(&[1, 0])
        .map_err(e)?;
    for (what, a) in [("1-d", flat), ("transposed", tr)] {
        let c = a.astype(to).map_err(e)?;
        ensure!(
            c.dtype() == to
                && c.memory() == proto.memory()
                && c.is_c_contiguous()
                && c.shape() == a.shape(),
            "{} → {to} {what}: result layout",
            S::DTYPE
        );
        let got = c.to_vec::<D>().map_err(e)?;
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            ensure!(
                same(g, w),
                "{} → {to} {what}: element {i}: got {g:?}, Rust gives {w:?}",
                S::DTYPE
            );
        }
    }
    Ok(())
}

/// The floats `astype_matches_rust_casts` converts: the edges of every integer and float
/// type, NaN and the infinities, then 46 drawn from `r`.
fn cast_floats(r: &mut TestRng) -> Vec<f64> {
    let mut floats: Vec<f64> = vec![
        0.0,
        -0.0,
        0.49,
        -0.51,
        1.5,
        -1.5,
        2.5,
        -2.5,
        127.9,
        128.0,
        -128.9,
        -129.0,
        255.5,
        256.0,
        300.7,
        -300.7,
        32767.5,
        -32769.0,
        65504.0,
        65519.0,
        65520.0,
        70000.0,
        2147483647.0,
        -2147483649.0,
        1e10,
        -1e10,
        1.8e19,
        3.0e38,
        3.5e38,
        1e300,
        -1e300,
        1e-8,
        6e-8,
        1e-40,
        1e-320,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    floats.extend((0..26).map(|_| r.uniform(-1e5, 1e5)));
    floats.extend((0..20).map(|_| r.uniform(-300.0, 300.0)));
    floats
}

/// The integers `astype_matches_rust_casts` converts: the edges of every integer type and of
/// exact float integers, then 40 drawn from `r`.
fn cast_ints(r: &mut TestRng) -> Vec<i64> {
    let mut ints: Vec<i64> = vec![
        0,
        1,
        -1,
        127,
        128,
        -128,
        -129,
        255,
        256,
        32767,
        -32768,
        65535,
        65536,
        1 << 31,
        -(1 << 31),
        (1 << 53) + 1,
        i64::MAX,
        i64::MIN,
        2049,
        -2049,
    ];
    ints.extend((0..20).map(|_| r.next_u64() as i64));
    ints.extend((0..20).map(|_| r.below(140_000) as i64 - 70_000));
    ints
}

/// `astype` between numeric data types gives what Rust's `as` casts give, special and
/// out-of-range values included.
pub fn astype_matches_rust_casts(proto: &BufferPrototype) -> Result<(), String> {
    let mut r = rng(13);
    let floats = cast_floats(&mut r);
    let f32s: Vec<f32> = floats.iter().map(|&x| x as f32).collect();
    let f16s: Vec<f16> = floats.iter().map(|&x| f16::from_f64(x)).collect();
    let ints = cast_ints(&mut r);
    let i16s: Vec<i16> = ints.iter().map(|&x| x as i16).collect();
    let i32s: Vec<i32> = ints.iter().map(|&x| x as i32).collect();
    let u64s: Vec<u64> = ints.iter().map(|&x| x as u64).collect();
    let u8s: Vec<u8> = ints.iter().map(|&x| x as u8).collect();
    let i8s: Vec<i8> = ints.iter().map(|&x| x as i8).collect();
    let bools: Vec<bool> = ints.iter().map(|&x| x % 3 == 0).collect();
    let c64s: Vec<Complex<f32>> = f32s
        .iter()
        .zip(f32s.iter().rev())
        .map(|(&a, &b)| Complex::new(a, b))
        .collect();
    let c128s: Vec<Complex<f64>> = floats
        .iter()
        .zip(floats.iter().rev())
        .map(|(&a, &b)| Complex::new(a, b))
        .collect();
    let f32_eq = |a: f32, b: f32| bits_eq_f32(a, b);
    let f64_eq = |a: f64, b: f64| bits_eq_f64(a, b);
    let f16_eq = |a: f16, b: f16| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    // float → float
    check_cast(&floats, DataType::Float32, |x| x as f32, f32_eq, proto)?;
    check_cast(&f32s, DataType::Float64, |x| x as f64, f64_eq, proto)?;
    check_cast(&floats, DataType::Float16, f16::from_f64, f16_eq, proto)?;
    check_cast(&f32s, DataType::Float16, f16::from_f32, f16_eq, proto)?;
    check_cast(&f16s, DataType::Float32, |x| x.to_f32(), f32_eq, proto)?;
    check_cast(&f16s, DataType::Float64, |x| x.to_f64(), f64_eq, proto)?;
    check_cast(
        &f32s,
        DataType::BFloat16,
        bf16::from_f32,
        |a: bf16, b: bf16| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
        proto,
    )?;
    // float → integer: truncation, saturation, NaN → 0
    check_cast(&floats, DataType::Int64, |x| x as i64, eq, proto)?;
    check_cast(&floats, DataType::UInt16, |x| x as u16, eq, proto)?;
    check_cast(&floats, DataType::Int8, |x| x as i8, eq, proto)?;
    check_cast(&f32s, DataType::Int32, |x| x as i32, eq, proto)?;
    check_cast(&f32s, DataType::UInt8, |x| x as u8, eq, proto)?;
    check_cast(&f32s, DataType::UInt64, |x| x as u64, eq, proto)?;
    check_cast(&f16s, DataType::Int16, |x| x.to_f64() as i16, eq, proto)?;
    // integer → integer: wrap-around
    check_cast(&ints, DataType::Int32, |x| x as i32, eq, proto)?;
    check_cast(&ints, DataType::UInt8, |x| x as u8, eq, proto)?;
    check_cast(&i16s, DataType::UInt8, |x| x as u8, eq, proto)?;
    check_cast(&i8s, DataType::UInt64, |x| x as u64, eq, proto)?;
    check_cast(&u64s, DataType::Int16, |x| x as i16, eq, proto)?;
    check_cast(&u8s, DataType::Int8, |x| x as i8, eq, proto)?;
    // integer → float: round to nearest
    check_cast(&ints, DataType::Float64, |x| x as f64, f64_eq, proto)?;
    check_cast(&ints, DataType::Float32, |x| x as f32, f32_eq, proto)?;
    check_cast(&u64s, DataType::Float32, |x| x as f32, f32_eq, proto)?;
    check_cast(&u8s, DataType::Float64, |x| x as f64, f64_eq, proto)?;
    check_cast(
        &i32s,
        DataType::Float16,
        |x| f16::from_f64(x as f64),
        f16_eq,
        proto,
    )?;
    // bool
    check_cast(&i16s, DataType::Bool, |x| x != 0, eq, proto)?;
    check_cast(&floats, DataType::Bool, |x| x != 0.0, eq, proto)?;
    check_cast(&bools, DataType::Int32, |x| x as i32, eq, proto)?;
    check_cast(&bools, DataType::Float32, |x| x as u8 as f32, f32_eq, proto)?;
    // complex
    check_cast(&c64s, DataType::Float32, |x| x.re, f32_eq, proto)?;
    check_cast(&c64s, DataType::Int32, |x| x.re as i32, eq, proto)?;
    check_cast(
        &f32s,
        DataType::Complex64,
        |x| Complex::new(x, 0.0),
        |a: Complex<f32>, b: Complex<f32>| f32_eq(a.re, b.re) && f32_eq(a.im, b.im),
        proto,
    )?;
    check_cast(
        &c128s,
        DataType::Complex64,
        |x| Complex::new(x.re as f32, x.im as f32),
        |a: Complex<f32>, b: Complex<f32>| f32_eq(a.re, b.re) && f32_eq(a.im, b.im),
        proto,
    )?;
    check_cast(
        &c64s,
        DataType::Bool,
        |x| x.re != 0.0 || x.im != 0.0,
        eq,
        proto,
    )?;
    // Non-native byte order sources convert by value.
    let big = upload(&i32s, &[i32s.len()], Order::C, proto)?
        .to_byte_order(ByteOrder::Big)
        .map_err(e)?;
    ensure!(
        big.astype(DataType::Int64)
            .map_err(e)?
            .to_vec::<i64>()
            .map_err(e)?
            == i32s.iter().map(|&x| x as i64).collect::<Vec<_>>(),
        "big-endian i32 → i64"
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

/// `with_type` reinterprets the same storage (a view with the same shape and strides);
/// another element size is refused.
pub fn with_type_views(proto: &BufferPrototype) -> Result<(), String> {
    let vals = [1.0f32, -2.0, f32::NAN, 0.1];
    let a = upload(&vals, &[2, 2], Order::F, proto)?;
    let bits = a.with_type(DataType::UInt32).map_err(e)?;
    ensure!(
        bits.buffer().storage_id() == a.buffer().storage_id()
            && bits.shape() == a.shape()
            && bits.strides() == a.strides()
            && bits.dtype() == DataType::UInt32,
        "with_type is a view"
    );
    ensure!(
        bits.to_vec::<u32>().map_err(e)? == vals.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "with_type bits"
    );
    let mut w = bits.get(&[1..2, 0..2]).map_err(e)?;
    w.fill_with(3.5f32.to_bits()).map_err(e)?;
    let got = a.to_vec::<f32>().map_err(e)?;
    ensure!(
        got[0] == 1.0 && got[1] == -2.0 && got[2] == 3.5 && got[3] == 3.5,
        "writes through with_type: {got:?}"
    );
    let c = upload(
        &[Complex::new(1.0f32, 2.0), Complex::new(-3.0, 4.0)],
        &[2],
        Order::C,
        proto,
    )?;
    let u = c.with_type(DataType::UInt64).map_err(e)?;
    let want: Vec<u64> = [(1.0f32, 2.0f32), (-3.0, 4.0)]
        .iter()
        .map(|&(re, im)| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&re.to_ne_bytes());
            b[4..].copy_from_slice(&im.to_ne_bytes());
            u64::from_ne_bytes(b)
        })
        .collect();
    ensure!(u.to_vec::<u64>().map_err(e)? == want, "complex64 as uint64");
    ensure!(
        matches!(a.with_type(DataType::Int16), Err(Error::DataType(_)))
            && matches!(a.with_type(DataType::Float64), Err(Error::DataType(_))),
        "with_type to another size must fail"
    );
    let raw = a.with_type(DataType::RawBits(4)).map_err(e)?;
    ensure!(
        raw.to_native_bytes().map_err(e)? == a.to_native_bytes().map_err(e)?,
        "with_type to raw bits"
    );
    Ok(())
}

/// Each element's bytes in big-endian order, swapping `unit`-byte parts.
fn to_big(native: &[u8], unit: usize) -> Vec<u8> {
    let mut out = native.to_vec();
    if cfg!(target_endian = "little") {
        for c in out.chunks_mut(unit) {
            c.reverse();
        }
    }
    out
}

/// `to_byte_order` to big-endian and back for every element size (complex types by
/// component), `set` from big-endian host arrays, and `fill` of big-endian arrays.
pub fn byte_order_round_trips(proto: &BufferPrototype) -> Result<(), String> {
    let mut r = rng(17);
    for (dtype, unit) in [
        (DataType::UInt8, 1),
        (DataType::Int16, 2),
        (DataType::Float16, 2),
        (DataType::UInt32, 4),
        (DataType::Float64, 8),
        (DataType::Complex64, 4),
        (DataType::Complex128, 8),
    ] {
        let size = dtype.size();
        let shape = [3usize, 5];
        let n = 15;
        let raw: Vec<u8> = (0..n * size).map(|_| r.byte()).collect();
        let a = upload_bytes(&raw, dtype, &shape, Order::F, proto)?;
        for (what, src, want_native) in [
            ("whole", a.clone(), raw.clone()),
            ("transposed", a.transpose(&[1, 0]).map_err(e)?, {
                let mut t = vec![0u8; n * size];
                for i in 0..n {
                    let [p, q] = unravel(i, &[5, 3])[..] else {
                        unreachable!()
                    };
                    let j = ravel(&[q, p], &shape);
                    t[i * size..(i + 1) * size].copy_from_slice(&raw[j * size..(j + 1) * size]);
                }
                t
            }),
        ] {
            let big = src.to_byte_order(ByteOrder::Big).map_err(e)?;
            ensure!(
                big.byte_order() == ByteOrder::Big
                    && big.memory() == proto.memory()
                    && big.shape() == src.shape()
                    && big.buffer().storage_id() != a.buffer().storage_id(),
                "{dtype} {what}: to_byte_order(Big) is a new array"
            );
            ensure!(
                big.buffer().to_vec().map_err(e)? == to_big(&want_native, unit),
                "{dtype} {what}: big-endian bytes"
            );
            ensure!(
                big.to_native_bytes().map_err(e)? == want_native,
                "{dtype} {what}: values read back from big-endian"
            );
            let back = big.to_byte_order(ByteOrder::Little).map_err(e)?;
            let little = if cfg!(target_endian = "little") {
                want_native.clone()
            } else {
                to_big(&want_native, unit)
            };
            ensure!(
                back.byte_order() == ByteOrder::Little
                    && back.buffer().to_vec().map_err(e)? == little,
                "{dtype} {what}: round trip to little-endian"
            );
            ensure!(
                back.array_equal(&src, true).map_err(e)?
                    && big.array_equal(&src, true).map_err(e)?
                    || dtype.is_float(),
                "{dtype} {what}: round trip compares equal"
            );
        }
        // A big-endian host array set into native memory of the prototype, and back.
        let host_big = NDBuffer::from_parts(
            Buffer::from_vec(to_big(&raw, unit)),
            dtype,
            &shape,
            &strides_of(&shape, size, Order::C),
            0,
            ByteOrder::Big,
        )
        .map_err(e)?;
        let mut dst = NDBuffer::zeros(&shape, dtype, Order::C, proto).map_err(e)?;
        dst.set(&full(&shape), &host_big).map_err(e)?;
        ensure!(
            dst.byte_order() == ByteOrder::native() && dst.buffer().to_vec().map_err(e)? == raw,
            "{dtype}: set from a big-endian host array swaps"
        );
        // Fill of a big-endian array takes a native value.
        let mut fb = big_zeros(dtype, &shape, proto)?;
        fb.fill(&raw[..size]).map_err(e)?;
        ensure!(
            fb.buffer().to_vec().map_err(e)? == to_big(&raw[..size], unit).repeat(n)
                && fb.all_equal(&raw[..size], true).map_err(e)? | dtype.is_float(),
            "{dtype}: fill of a big-endian array"
        );
    }
    Ok(())
}

fn big_zeros(
    dtype: DataType,
    shape: &[usize],
    proto: &BufferPrototype,
) -> Result<NDBuffer, String> {
    NDBuffer::zeros(shape, dtype, Order::C, proto)
        .map_err(e)?
        .to_byte_order(ByteOrder::Big)
        .map_err(e)
}

/// `from_ndarray` (taking an owned standard-layout array's memory) and `to_ndarray` /
/// `as_ndarray` of every layout round-trip the elements.
pub fn ndarray_round_trips(proto: &BufferPrototype) -> Result<(), String> {
    let arr =
        ndarray::Array3::<i16>::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as i16);
    let host = NDBuffer::from_ndarray(arr.clone()).map_err(e)?;
    ensure!(
        host.buffer().host_ptr().is_some()
            && host.shape() == [2, 3, 4]
            && host.dtype() == DataType::Int16,
        "from_ndarray geometry"
    );
    // from_ndarray of an owned standard-layout array takes its memory.
    let owned = ndarray::Array2::<f32>::from_shape_fn((3, 5), |(i, j)| i as f32 - j as f32 * 0.5);
    let owned_ptr = owned.as_ptr() as *mut u8;
    let taken = NDBuffer::from_ndarray(owned.clone()).map_err(e)?;
    let taken2 = NDBuffer::from_ndarray(owned).map_err(e)?;
    ensure!(
        taken2.buffer().host_ptr() == Some(owned_ptr),
        "from_ndarray of an owned standard-layout array must not copy"
    );
    ensure!(
        taken.to_vec::<f32>().map_err(e)? == taken2.to_vec::<f32>().map_err(e)?,
        "from_ndarray contents"
    );
    // Into the prototype and back.
    let dev = host.to_prototype(proto).map_err(e)?;
    let back = dev.to_ndarray::<i16>().map_err(e)?;
    ensure!(
        back == arr.clone().into_dyn()
            && dev.memory().is_host_accessible() == proto.memory().is_host_accessible(),
        "to_ndarray from {}",
        proto.memory()
    );
    let mut into = NDBuffer::empty(&[2, 3, 4], DataType::Int16, Order::F, proto).map_err(e)?;
    into.set(&full(&[2, 3, 4]), &host).map_err(e)?;
    ensure!(
        into.to_ndarray::<i16>().map_err(e)? == arr.clone().into_dyn(),
        "to_ndarray of an F-order array in {}",
        proto.memory()
    );
    let tview = into.transpose(&[2, 1, 0]).map_err(e)?;
    ensure!(
        tview.to_ndarray::<i16>().map_err(e)? == arr.view().reversed_axes().into_dyn(),
        "to_ndarray of a transposed view"
    );
    let sub = into.get(&[1..2, 0..3, 1..3]).map_err(e)?;
    ensure!(
        sub.to_ndarray::<i16>().map_err(e)?
            == arr
                .slice(ndarray::s![1..2, 0..3, 1..3])
                .to_owned()
                .into_dyn(),
        "to_ndarray of a sub-view"
    );
    match into.as_ndarray::<i16>() {
        Ok(view) => ensure!(
            proto.memory().is_host_accessible() && *view == arr.view().into_dyn(),
            "as_ndarray view"
        ),
        Err(err) => ensure!(
            matches!(err, Error::NotHostAccessible(_)) && !proto.memory().is_host_accessible(),
            "{err}"
        ),
    }
    ensure!(
        matches!(host.as_ndarray::<u16>(), Err(Error::DataType(_)))
            && matches!(dev.to_ndarray::<u16>(), Err(Error::DataType(_))),
        "ndarray of the wrong type must fail"
    );
    let t = arr.view().reversed_axes().to_owned();
    let from_t = NDBuffer::from_ndarray(t.clone()).map_err(e)?;
    ensure!(
        from_t.to_ndarray::<i16>().map_err(e)? == t.clone().into_dyn(),
        "from_ndarray of a non-standard layout"
    );
    let from_t_dev = from_t.to_prototype(proto).map_err(e)?;
    ensure!(
        from_t_dev.to_ndarray::<i16>().map_err(e)? == t.into_dyn(),
        "non-standard layout through {}",
        proto.memory()
    );
    Ok(())
}

/// `item` of a 0-d array of every element type.
pub fn item_of_every_type(proto: &BufferPrototype) -> Result<(), String> {
    fn one<T: Element + PartialEq + std::fmt::Debug>(
        v: T,
        proto: &BufferPrototype,
    ) -> Result<(), String> {
        let a = upload(&[v], &[], Order::C, proto)?;
        ensure!(
            a.item::<T>().map_err(e)? == v,
            "{}: item of a 0-d array",
            T::DTYPE
        );
        ensure!(
            a.as_scalar().map_err(e)? == v.to_ne_bytes_vec(),
            "{}: as_scalar bytes",
            T::DTYPE
        );
        let b = upload(&[v, v, v], &[3], Order::C, proto)?;
        let el = b.at(&[2]).map_err(e)?;
        ensure!(
            el.item::<T>().map_err(e)? == v,
            "{}: item of an indexed element",
            T::DTYPE
        );
        ensure!(
            matches!(b.item::<T>(), Err(Error::ShapeMismatch(_))),
            "{}: item of 3 elements",
            T::DTYPE
        );
        Ok(())
    }
    one(true, proto)?;
    one(-100i8, proto)?;
    one(-30000i16, proto)?;
    one(i32::MIN, proto)?;
    one(i64::MAX, proto)?;
    one(255u8, proto)?;
    one(65535u16, proto)?;
    one(u32::MAX - 1, proto)?;
    one(u64::MAX, proto)?;
    one(f16::from_f32(0.333), proto)?;
    one(bf16::from_f32(-7.5), proto)?;
    one(1e-30f32, proto)?;
    one(-1e300f64, proto)?;
    one(Complex::new(0.5f32, -0.25), proto)?;
    one(Complex::new(1e100f64, -1e-100), proto)?;
    let a = upload(&[1u8], &[1], Order::C, proto)?;
    ensure!(
        matches!(a.item::<i8>(), Err(Error::DataType(_))),
        "item of the wrong type"
    );
    Ok(())
}
