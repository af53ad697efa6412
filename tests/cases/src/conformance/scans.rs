//! Conformance cases: `all_equal` and `array_equal` against an element-by-element scan.

use super::*;

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
