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
//!
//! The cases are in one file per topic (`arrays`, `scans`, `buffers`, `fill_set`, `shapes`,
//! `types`, `features`), listed once in [`conformance_cases!`]; the helpers they share are
//! here.
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

mod arrays;
mod buffers;
mod features;
mod fill_set;
mod scans;
mod shapes;
mod types;

pub use arrays::*;
pub use buffers::*;
pub use features::{lazy_allocation, memory_resource};
pub use fill_set::*;
pub use scans::*;
pub use shapes::*;
pub use types::*;

// ---------------------------------------------------------------------------------------
// helpers

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
