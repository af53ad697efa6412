//! Host implementations against naive reference implementations written here, on random
//! shapes, strides, offsets, element sizes, swap units and scalar kinds (fixed seeds).

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, RngCore, SeedableRng};
use zarrbuf_codecs::{CodecError, MAX_DIMS, ScalarKind, Strided, host, merge_dims};

// ---------------------------------------------------------------- random layouts

struct Layout {
    strides: Vec<isize>,
    offset: usize,
    len: usize,
}

impl Layout {
    fn view(&self) -> Strided<'_> {
        Strided {
            offset: self.offset,
            strides: &self.strides,
        }
    }
}

fn random_shape(rng: &mut StdRng) -> Vec<usize> {
    let nd = rng.random_range(0..=6);
    (0..nd)
        .map(|_| {
            if rng.random_bool(0.03) {
                0
            } else {
                *[1, 1, 2, 3, 4, 5, 7, 9].choose(rng).unwrap()
            }
        })
        .collect()
}

/// Permuted C order, optional padding, negative strides, zero strides when `broadcast`,
/// random offset and slack.
fn random_layout(rng: &mut StdRng, shape: &[usize], es: usize, broadcast: bool) -> Layout {
    let nd = shape.len();
    let mut order: Vec<usize> = (0..nd).collect();
    if rng.random_bool(0.5) {
        order.shuffle(rng);
    }
    let mut strides = vec![0isize; nd];
    let mut acc = if rng.random_bool(0.15) { 2 * es } else { es };
    for &d in order.iter().rev() {
        strides[d] = acc as isize;
        acc *= shape[d].max(1);
        if rng.random_bool(0.15) {
            acc += es * rng.random_range(1..4);
        }
    }
    for s in &mut strides {
        if rng.random_bool(0.2) {
            *s = -*s;
        }
        if broadcast && rng.random_bool(0.12) {
            *s = 0;
        }
    }
    let (mut lo, mut hi) = (0isize, es as isize);
    for (&n, &s) in shape.iter().zip(&strides) {
        let span = s * (n.max(1) as isize - 1);
        if span < 0 { lo += span } else { hi += span }
    }
    let offset = (-lo) as usize + rng.random_range(0..17);
    let len = offset + hi as usize + rng.random_range(0..9);
    Layout {
        strides,
        offset,
        len,
    }
}

fn bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

/// Byte offset of every element of `shape` at `view`, C order.
fn offsets(shape: &[usize], view: Strided<'_>) -> Vec<usize> {
    let mut out = vec![];
    if shape.contains(&0) {
        return out;
    }
    let n: usize = shape.iter().product();
    for mut lin in 0..n {
        let mut off = view.offset as isize;
        for d in (0..shape.len()).rev() {
            off += (lin % shape[d]) as isize * view.strides[d];
            lin /= shape[d];
        }
        out.push(off as usize);
    }
    out
}

// ---------------------------------------------------------------- references

fn ref_copy(
    src: &[u8],
    sv: Strided,
    dst: &mut [u8],
    dv: Strided,
    shape: &[usize],
    es: usize,
    unit: usize,
) {
    let u = unit.max(1);
    for (so, d0) in offsets(shape, sv).into_iter().zip(offsets(shape, dv)) {
        let elem: Vec<u8> = src[so..so + es].to_vec();
        for k in 0..es {
            let g = k / u * u;
            dst[d0 + k] = elem[g + (u - 1 - (k - g))];
        }
    }
}

// ---------------------------------------------------------------- strided copy

#[test]
fn strided_copy_matches_reference() {
    let mut rng = StdRng::seed_from_u64(1);
    for case in 0..3000 {
        let shape = random_shape(&mut rng);
        let es = *[1, 2, 3, 4, 6, 8, 12, 16, 24].choose(&mut rng).unwrap();
        let units: Vec<usize> = [0, 1, 2, 4, 8, 16]
            .into_iter()
            .filter(|&u| u <= 1 || es % u == 0)
            .collect();
        let unit = *units.choose(&mut rng).unwrap();
        let sl = random_layout(&mut rng, &shape, es, true);
        let dl = random_layout(&mut rng, &shape, es, false);
        let src = bytes(&mut rng, sl.len);
        let init = bytes(&mut rng, dl.len);
        let mut want = init.clone();
        ref_copy(&src, sl.view(), &mut want, dl.view(), &shape, es, unit);
        let mut got = init.clone();
        host::strided_copy_slices(&src, sl.view(), &mut got, dl.view(), &shape, es, unit).unwrap();
        assert_eq!(
            got, want,
            "case {case}: shape {shape:?} es {es} unit {unit} src {:?}@{} dst {:?}@{}",
            sl.strides, sl.offset, dl.strides, dl.offset
        );
    }
}

#[test]
fn contiguous_copies_and_swaps() {
    let mut rng = StdRng::seed_from_u64(2);
    for &es in &[1usize, 2, 4, 8, 16, 3] {
        for &unit in &[0usize, 2, 4, 8, 16] {
            if unit > 1 && es % unit != 0 {
                continue;
            }
            let shape = [3, 5, 7];
            let strides = [35 * es as isize, 7 * es as isize, es as isize];
            let v = Strided {
                offset: 0,
                strides: &strides,
            };
            let len = 105 * es;
            let src = bytes(&mut rng, len);
            let mut want = vec![0; len];
            ref_copy(&src, v, &mut want, v, &shape, es, unit);
            let mut got = vec![0; len];
            host::strided_copy_slices(&src, v, &mut got, v, &shape, es, unit).unwrap();
            assert_eq!(got, want, "es {es} unit {unit}");
            // the in-place form on one raw buffer gives the same bytes
            let mut inplace = src.clone();
            let p = inplace.as_mut_ptr();
            // SAFETY: `p` is valid for `len` bytes; identical views in place are allowed.
            unsafe { host::strided_copy(p, len, v, p, len, v, &shape, es, unit).unwrap() };
            assert_eq!(inplace, want, "in place es {es} unit {unit}");
        }
    }
}

#[test]
fn negative_and_broadcast_sources() {
    // reverse a row and broadcast it over 3 rows
    let src: Vec<u8> = (0..4u16).flat_map(|v| v.to_le_bytes()).collect();
    let mut dst = vec![0u8; 24];
    host::strided_copy_slices(
        &src,
        Strided {
            offset: 6,
            strides: &[0, -2],
        },
        &mut dst,
        Strided {
            offset: 0,
            strides: &[8, 2],
        },
        &[3, 4],
        2,
        0,
    )
    .unwrap();
    let out: Vec<u16> = dst
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(out, [3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0]);
}

// ---------------------------------------------------------------- errors

fn is_invalid<T: std::fmt::Debug>(r: Result<T, CodecError>) -> bool {
    matches!(r, Err(CodecError::InvalidLayout(_)))
}

#[test]
fn bad_layouts_are_errors_not_panics() {
    let src = [0u8; 16];
    let mut dst = [0u8; 16];
    let ok = Strided {
        offset: 0,
        strides: &[4],
    };
    let copy =
        |sv: Strided, dv: Strided, shape: &[usize], es: usize, unit: usize, dst: &mut [u8]| {
            host::strided_copy_slices(&src, sv, dst, dv, shape, es, unit)
        };
    // past the end, before the start, length mismatch, zero element size, bad swap units
    assert!(is_invalid(copy(
        Strided {
            offset: 4,
            strides: &[4]
        },
        ok,
        &[4],
        4,
        0,
        &mut dst
    )));
    assert!(is_invalid(copy(
        ok,
        Strided {
            offset: 1,
            strides: &[4]
        },
        &[4],
        4,
        0,
        &mut dst
    )));
    assert!(is_invalid(copy(
        Strided {
            offset: 0,
            strides: &[-4]
        },
        ok,
        &[4],
        4,
        0,
        &mut dst
    )));
    assert!(is_invalid(copy(ok, ok, &[4, 1], 4, 0, &mut dst)));
    assert!(is_invalid(copy(ok, ok, &[4], 0, 0, &mut dst)));
    assert!(is_invalid(copy(ok, ok, &[4], 4, 3, &mut dst)));
    assert!(is_invalid(copy(ok, ok, &[4], 4, 8, &mut dst)));
    // zero destination stride
    assert!(is_invalid(copy(
        ok,
        Strided {
            offset: 0,
            strides: &[0]
        },
        &[4],
        4,
        0,
        &mut dst
    )));
    // huge strides overflow nothing
    assert!(is_invalid(copy(
        Strided {
            offset: 0,
            strides: &[isize::MAX]
        },
        ok,
        &[4],
        4,
        0,
        &mut dst
    )));
    assert!(is_invalid(copy(
        Strided {
            offset: usize::MAX,
            strides: &[isize::MIN]
        },
        ok,
        &[4],
        4,
        0,
        &mut dst
    )));
    // fill / cast / swap / permute
    assert!(is_invalid(host::fill(&mut dst, ok, &[4], &[])));
    assert!(is_invalid(host::fill(&mut dst, ok, &[5], &[1, 2, 3, 4])));
    assert!(is_invalid(host::cast_slices(
        &src,
        ok,
        ScalarKind::F32,
        &mut dst,
        ok,
        ScalarKind::F64,
        &[4]
    )));
    assert!(is_invalid(host::byte_swap(&mut dst[..6], 4)));
    assert!(is_invalid(host::byte_swap(&mut dst, 3)));
    assert!(is_invalid(host::permute(
        &src,
        &mut dst,
        &[2, 2],
        &[0, 0],
        4
    )));
    assert!(is_invalid(host::permute(&src, &mut dst, &[2, 2], &[1], 4)));
    assert!(is_invalid(host::permute(
        &src,
        &mut dst,
        &[2, 3],
        &[1, 0],
        4
    )));
    assert!(is_invalid(host::permute(
        &src,
        &mut dst,
        &[usize::MAX, 3],
        &[1, 0],
        4
    )));
    // the slices were never written
    assert_eq!(dst, [0u8; 16]);
}

#[test]
fn zero_size_shapes_are_no_ops() {
    let v = Strided {
        offset: 0,
        strides: &[4, 4],
    };
    let far = Strided {
        offset: 1000,
        strides: &[4, 4],
    };
    let mut empty: [u8; 0] = [];
    host::strided_copy_slices(&[], far, &mut empty, v, &[3, 0], 4, 2).unwrap();
    host::fill(&mut empty, far, &[0, 7], &[1, 2, 3]).unwrap();
    host::cast_slices(
        &[],
        far,
        ScalarKind::C128,
        &mut empty,
        v,
        ScalarKind::I8,
        &[0, 0],
    )
    .unwrap();
    host::permute(&[], &mut empty, &[0, 5], &[1, 0], 8).unwrap();
    host::byte_swap(&mut empty, 16).unwrap();
    // SAFETY: no element is addressed, so the dangling pointers are never used.
    unsafe {
        host::strided_copy(
            std::ptr::null(),
            0,
            v,
            std::ptr::null_mut(),
            0,
            v,
            &[0, 2],
            4,
            0,
        )
        .unwrap();
    }
}

#[test]
fn max_dims_applies_after_merging() {
    // 20 contiguous dims merge into one: fine
    let shape = vec![2usize; 20];
    let mut strides = vec![0isize; 20];
    let mut acc = 1isize;
    for d in (0..20).rev() {
        strides[d] = acc;
        acc *= 2;
    }
    let src = vec![7u8; 1 << 20];
    let mut dst = vec![0u8; 1 << 20];
    let v = Strided {
        offset: 0,
        strides: &strides,
    };
    host::strided_copy_slices(&src, v, &mut dst, v, &shape, 1, 0).unwrap();
    assert_eq!(src, dst);
    // 17 dims that cannot merge (padding after every dim): error, not panic
    let shape = vec![2usize; MAX_DIMS + 1];
    let mut strides = vec![0isize; MAX_DIMS + 1];
    let mut acc = 1isize;
    for d in (0..=MAX_DIMS).rev() {
        strides[d] = acc;
        acc = acc * 2 + 1;
    }
    let len = acc as usize;
    let src = vec![0u8; len];
    let mut dst = vec![0u8; len];
    let v = Strided {
        offset: 0,
        strides: &strides,
    };
    assert!(is_invalid(host::strided_copy_slices(
        &src, v, &mut dst, v, &shape, 1, 0
    )));
    // 16 such dims are fine
    let v16 = Strided {
        offset: 0,
        strides: &strides[1..],
    };
    host::strided_copy_slices(&src, v16, &mut dst, v16, &shape[1..], 1, 0).unwrap();
}

#[test]
fn merge_dims_examples() {
    assert_eq!(
        merge_dims(&[2, 3], &[3, 1], &[3, 1]),
        (vec![6], vec![1], vec![1])
    );
    assert_eq!(
        merge_dims(&[2, 3], &[3, 1], &[4, 1]),
        (vec![2, 3], vec![3, 1], vec![4, 1])
    );
    assert_eq!(
        merge_dims(&[2, 3], &[-3, -1], &[3, 1]),
        (vec![6], vec![-1], vec![1])
    );
    assert_eq!(
        merge_dims(&[2, 3], &[-3, 1], &[3, 1]),
        (vec![2, 3], vec![-3, 1], vec![3, 1])
    );
    assert_eq!(
        merge_dims(&[2, 3], &[0, 0], &[3, 1]),
        (vec![6], vec![0], vec![1])
    );
    assert_eq!(
        merge_dims(&[2, 3], &[0, 4], &[3, 1]),
        (vec![2, 3], vec![0, 4], vec![3, 1])
    );
    assert_eq!(
        merge_dims(&[4, 2, 3], &[0, 3, 1], &[0, 3, 1]),
        (vec![4, 6], vec![0, 1], vec![0, 1])
    );
}

// ---------------------------------------------------------------- fill

#[test]
fn fill_matches_reference() {
    let mut rng = StdRng::seed_from_u64(3);
    for case in 0..2000 {
        let shape = random_shape(&mut rng);
        let es = *[1, 2, 3, 4, 5, 8, 12, 16, 40].choose(&mut rng).unwrap();
        let pattern = if rng.random_bool(0.3) {
            vec![rng.random::<u8>(); es]
        } else {
            bytes(&mut rng, es)
        };
        let l = if rng.random_bool(0.3) {
            let n: usize = shape.iter().product();
            let mut strides = vec![0isize; shape.len()];
            let mut acc = es as isize;
            for d in (0..shape.len()).rev() {
                strides[d] = acc;
                acc *= shape[d] as isize;
            }
            Layout {
                strides,
                offset: 0,
                len: n * es,
            }
        } else {
            random_layout(&mut rng, &shape, es, false)
        };
        let init = bytes(&mut rng, l.len);
        let mut want = init.clone();
        for o in offsets(&shape, l.view()) {
            want[o..o + es].copy_from_slice(&pattern);
        }
        let mut got = init.clone();
        host::fill(&mut got, l.view(), &shape, &pattern).unwrap();
        assert_eq!(
            got, want,
            "case {case}: shape {shape:?} pattern {pattern:?} {:?}@{}",
            l.strides, l.offset
        );
    }
}

// ---------------------------------------------------------------- byte swap

#[test]
fn byte_swap_matches_reference() {
    let mut rng = StdRng::seed_from_u64(4);
    for &unit in &[0usize, 1, 2, 4, 8, 16] {
        for count in [0usize, 1, 3, 17, 1000] {
            let u = unit.max(1);
            let data = bytes(&mut rng, count * u);
            let mut want = data.clone();
            for c in want.chunks_mut(u) {
                c.reverse();
            }
            let mut got = data.clone();
            host::byte_swap(&mut got, unit).unwrap();
            assert_eq!(got, want, "unit {unit} count {count}");
        }
    }
}

// ---------------------------------------------------------------- permute

#[test]
fn permute_matches_reference() {
    let mut rng = StdRng::seed_from_u64(5);
    for case in 0..1000 {
        let shape = random_shape(&mut rng);
        let es = *[1, 2, 3, 4, 8, 16].choose(&mut rng).unwrap();
        let mut axes: Vec<usize> = (0..shape.len()).collect();
        axes.shuffle(&mut rng);
        let n: usize = shape.iter().product();
        let src = bytes(&mut rng, n * es);
        let out_shape: Vec<usize> = axes.iter().map(|&a| shape[a]).collect();
        let mut want = vec![0u8; n * es];
        for (j, w) in want.chunks_mut(es).enumerate() {
            // output multi-index j -> source multi-index
            let mut rem = j;
            let mut sidx = vec![0usize; shape.len()];
            for k in (0..out_shape.len()).rev() {
                sidx[axes[k]] = rem % out_shape[k];
                rem /= out_shape[k];
            }
            let lin = sidx.iter().zip(&shape).fold(0, |acc, (&i, &s)| acc * s + i);
            w.copy_from_slice(&src[lin * es..lin * es + es]);
        }
        let mut got = vec![0u8; n * es];
        host::permute(&src, &mut got, &shape, &axes, es).unwrap();
        assert_eq!(
            got, want,
            "case {case}: shape {shape:?} axes {axes:?} es {es}"
        );
    }
}

// ---------------------------------------------------------------- cast

#[derive(Clone, Copy, Debug)]
enum Val {
    Bool(bool),
    Int(i128),
    Float(f64),
    Complex(f64, f64),
}

fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    b[..N].try_into().unwrap()
}

fn f16_to_f64_ref(h: u16) -> f64 {
    let s = if h >> 15 == 1 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f64;
    match e {
        0 => s * m * 2f64.powi(-24),
        31 if m == 0.0 => s * f64::INFINITY,
        31 => f64::NAN,
        _ => s * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

fn bf16_to_f64_ref(h: u16) -> f64 {
    f32::from_bits((h as u32) << 16) as f64
}

fn decode(k: ScalarKind, b: &[u8]) -> Val {
    use ScalarKind::*;
    match k {
        Bool => Val::Bool(b[0] != 0),
        I8 => Val::Int(b[0] as i8 as i128),
        I16 => Val::Int(i16::from_le_bytes(le(b)) as i128),
        I32 => Val::Int(i32::from_le_bytes(le(b)) as i128),
        I64 => Val::Int(i64::from_le_bytes(le(b)) as i128),
        U8 => Val::Int(b[0] as i128),
        U16 => Val::Int(u16::from_le_bytes(le(b)) as i128),
        U32 => Val::Int(u32::from_le_bytes(le(b)) as i128),
        U64 => Val::Int(u64::from_le_bytes(le(b)) as i128),
        F16 => Val::Float(f16_to_f64_ref(u16::from_le_bytes(le(b)))),
        BF16 => Val::Float(bf16_to_f64_ref(u16::from_le_bytes(le(b)))),
        F32 => Val::Float(f32::from_le_bytes(le(b)) as f64),
        F64 => Val::Float(f64::from_le_bytes(le(b))),
        C64 => Val::Complex(
            f32::from_le_bytes(le(b)) as f64,
            f32::from_le_bytes(le(&b[4..])) as f64,
        ),
        C128 => Val::Complex(f64::from_le_bytes(le(b)), f64::from_le_bytes(le(&b[8..]))),
    }
}

/// All finite non-negative values of a 16-bit float format, ascending, with their bits.
fn table(to_f64: fn(u16) -> f64, max_bits: u16) -> Vec<(f64, u16)> {
    (0..=max_bits).map(|b| (to_f64(b), b)).collect()
}

/// Nearest value (ties to even bits), by search over every representable value; overflow
/// to infinity when at or past the halfway point above the largest finite value.
fn narrow_ref(x: f64, tab: &[(f64, u16)], inf_bits: u16, sign_bit: u16) -> u16 {
    if x.is_nan() {
        return 0xffff; // any NaN: compared leniently
    }
    let sign = if x.is_sign_negative() { sign_bit } else { 0 };
    let a = x.abs();
    let (maxv, _) = tab[tab.len() - 1];
    let (prev, _) = tab[tab.len() - 2];
    if a >= maxv + (maxv - prev) / 2.0 {
        return sign | inf_bits;
    }
    let i = tab.partition_point(|&(v, _)| v < a);
    if i == 0 {
        return sign | tab[0].1;
    }
    if i == tab.len() {
        return sign | tab[i - 1].1;
    }
    let (lo, lb) = tab[i - 1];
    let (hi, hb) = tab[i];
    let pick = if a - lo < hi - a {
        lb
    } else if hi - a < a - lo {
        hb
    } else if lb % 2 == 0 {
        lb
    } else {
        hb
    };
    sign | pick
}

struct Tables {
    f16: Vec<(f64, u16)>,
    bf16: Vec<(f64, u16)>,
}

fn float_to_int(x: f64, lo: i128, hi: i128) -> i128 {
    if x.is_nan() {
        0
    } else if x >= hi as f64 + 1.0 {
        hi
    } else if x <= lo as f64 - 1.0 {
        lo
    } else {
        (x.trunc() as i128).clamp(lo, hi)
    }
}

fn encode(v: Val, k: ScalarKind, t: &Tables) -> Vec<u8> {
    use ScalarKind::*;
    let as_f64 = |v: Val| match v {
        Val::Bool(b) => b as u8 as f64,
        Val::Int(i) => i as f64,
        Val::Float(f) | Val::Complex(f, _) => f,
    };
    let as_f32 = |v: Val| match v {
        Val::Bool(b) => b as u8 as f32,
        Val::Int(i) => i as f32, // i128 -> f32 is a single correct rounding
        Val::Float(f) | Val::Complex(f, _) => f as f32,
    };
    let int = |v: Val, lo: i128, hi: i128, bytes: usize| -> Vec<u8> {
        let i = match v {
            Val::Bool(b) => b as i128,
            Val::Int(i) => i, // wraps below
            Val::Float(f) | Val::Complex(f, _) => float_to_int(f, lo, hi),
        };
        i.to_le_bytes()[..bytes].to_vec()
    };
    match k {
        Bool => vec![match v {
            Val::Bool(b) => b as u8,
            Val::Int(i) => (i != 0) as u8,
            Val::Float(f) => (f != 0.0) as u8,
            Val::Complex(r, i) => (r != 0.0 || i != 0.0) as u8,
        }],
        I8 => int(v, -128, 127, 1),
        I16 => int(v, i16::MIN as i128, i16::MAX as i128, 2),
        I32 => int(v, i32::MIN as i128, i32::MAX as i128, 4),
        I64 => int(v, i64::MIN as i128, i64::MAX as i128, 8),
        U8 => int(v, 0, u8::MAX as i128, 1),
        U16 => int(v, 0, u16::MAX as i128, 2),
        U32 => int(v, 0, u32::MAX as i128, 4),
        U64 => int(v, 0, u64::MAX as i128, 8),
        F16 => narrow_ref(as_f64(v), &t.f16, 0x7c00, 0x8000)
            .to_le_bytes()
            .to_vec(),
        BF16 => narrow_ref(as_f64(v), &t.bf16, 0x7f80, 0x8000)
            .to_le_bytes()
            .to_vec(),
        F32 => as_f32(v).to_le_bytes().to_vec(),
        F64 => as_f64(v).to_le_bytes().to_vec(),
        C64 => {
            let im = if let Val::Complex(_, i) = v {
                i as f32
            } else {
                0.0
            };
            [as_f32(v).to_le_bytes(), im.to_le_bytes()].concat()
        }
        C128 => {
            let im = if let Val::Complex(_, i) = v { i } else { 0.0 };
            [as_f64(v).to_le_bytes(), im.to_le_bytes()].concat()
        }
    }
}

/// Equal, where NaN equals NaN for float parts.
fn same(k: ScalarKind, got: &[u8], want: &[u8]) -> bool {
    use ScalarKind::*;
    let nan16 = |b: &[u8], exp: u16, man: u16| {
        let h = u16::from_le_bytes(le(b));
        h & exp == exp && h & man != 0
    };
    match k {
        F16 => {
            got == want
                || (nan16(got, 0x7c00, 0x3ff)
                    && (want == [0xff, 0xff] || nan16(want, 0x7c00, 0x3ff)))
        }
        BF16 => {
            got == want
                || (nan16(got, 0x7f80, 0x7f) && (want == [0xff, 0xff] || nan16(want, 0x7f80, 0x7f)))
        }
        F32 => {
            got == want
                || (f32::from_le_bytes(le(got)).is_nan() && f32::from_le_bytes(le(want)).is_nan())
        }
        F64 => {
            got == want
                || (f64::from_le_bytes(le(got)).is_nan() && f64::from_le_bytes(le(want)).is_nan())
        }
        C64 => same(F32, &got[..4], &want[..4]) && same(F32, &got[4..], &want[4..]),
        C128 => same(F64, &got[..8], &want[..8]) && same(F64, &got[8..], &want[8..]),
        _ => got == want,
    }
}

fn interesting(rng: &mut StdRng) -> f64 {
    match rng.random_range(0..9) {
        0 => rng.random_range(-300..300) as f64,
        1 => rng.random_range(-1000..1000) as f64 + 0.5,
        2 => *[
            127.0,
            128.0,
            -128.0,
            -129.0,
            255.0,
            256.0,
            65504.0,
            65519.0,
            65520.0,
            2147483648.0,
            -2147483649.0,
            4294967296.0,
            9.3e18,
            -9.3e18,
            1.9e19,
            -0.99,
            0.99,
            -1.0,
            3.4e38,
            3.5e38,
        ]
        .choose(rng)
        .unwrap(),
        3 => *[f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.0, -0.0]
            .choose(rng)
            .unwrap(),
        4 => f64::from_bits(rng.random()),
        5 => 2f64.powi(rng.random_range(-150..150)) * rng.random_range(1.0..2.0),
        // exact halfway points between neighbouring f16 values, and a hair either side
        6 => {
            let h = rng.random_range(0..0x7bffu16);
            let mid = (f16_to_f64_ref(h) + f16_to_f64_ref(h + 1)) / 2.0;
            mid * [1.0, 1.0 + 1e-12, 1.0 - 1e-12][rng.random_range(0..3)]
        }
        7 => f32::from_bits(rng.random()) as f64,
        _ => rng.random_range(-1e6..1e6),
    }
}

fn encode_input(k: ScalarKind, x: f64, rng: &mut StdRng, t: &Tables) -> Vec<u8> {
    match k {
        ScalarKind::Bool => vec![*[0u8, 1, 2, 255].choose(rng).unwrap()],
        ScalarKind::C64 | ScalarKind::C128 => {
            let v = Val::Complex(x, interesting(rng));
            encode(v, k, t)
        }
        ScalarKind::F16 | ScalarKind::BF16 => {
            let mut b = bytes(rng, 2);
            if !x.is_nan() {
                b = encode(Val::Float(x), k, t);
            }
            b
        }
        _ => encode(Val::Float(x), k, t),
    }
}

#[test]
fn cast_all_pairs_match_reference() {
    let t = Tables {
        f16: table(f16_to_f64_ref, 0x7bff),
        bf16: table(bf16_to_f64_ref, 0x7f7f),
    };
    let mut rng = StdRng::seed_from_u64(6);
    for &sk in &ScalarKind::ALL {
        for &dk in &ScalarKind::ALL {
            for case in 0..12 {
                let shape = if case < 4 {
                    vec![rng.random_range(1..400)]
                } else {
                    random_shape(&mut rng)
                };
                let (ses, des) = (sk.size(), dk.size());
                let (sl, dl) = if case < 4 {
                    let n = shape[0];
                    (
                        Layout {
                            strides: vec![ses as isize],
                            offset: 0,
                            len: n * ses,
                        },
                        Layout {
                            strides: vec![des as isize],
                            offset: 0,
                            len: n * des,
                        },
                    )
                } else {
                    (
                        random_layout(&mut rng, &shape, ses, true),
                        random_layout(&mut rng, &shape, des, false),
                    )
                };
                let mut src = bytes(&mut rng, sl.len);
                for o in offsets(&shape, sl.view()) {
                    if rng.random_bool(0.8) {
                        let x = interesting(&mut rng);
                        src[o..o + ses].copy_from_slice(&encode_input(sk, x, &mut rng, &t));
                    }
                }
                let init = bytes(&mut rng, dl.len);
                let mut got = init.clone();
                host::cast_slices(&src, sl.view(), sk, &mut got, dl.view(), dk, &shape).unwrap();
                let dst_offsets = offsets(&shape, dl.view());
                for (so, d0) in offsets(&shape, sl.view()).into_iter().zip(&dst_offsets) {
                    let v = decode(sk, &src[so..so + ses]);
                    let want = encode(v, dk, &t);
                    let g = &got[*d0..*d0 + des];
                    assert!(
                        same(dk, g, &want),
                        "{sk:?} -> {dk:?}: {v:?} gave {g:?}, want {want:?}"
                    );
                }
                // bytes outside the destination elements are untouched
                let mut mask = vec![false; dl.len];
                for &d0 in &dst_offsets {
                    mask[d0..d0 + des].iter_mut().for_each(|m| *m = true);
                }
                for (i, &m) in mask.iter().enumerate() {
                    if !m {
                        assert_eq!(
                            got[i], init[i],
                            "{sk:?} -> {dk:?}: byte {i} outside the view changed"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn cast_examples() {
    let cast1 = |sk: ScalarKind, src: &[u8], dk: ScalarKind| -> Vec<u8> {
        let mut out = vec![0u8; dk.size()];
        let v = Strided {
            offset: 0,
            strides: &[],
        };
        host::cast_slices(src, v, sk, &mut out, v, dk, &[]).unwrap();
        out
    };
    use ScalarKind::*;
    assert_eq!(cast1(I32, &300i32.to_le_bytes(), U8), [44]);
    assert_eq!(
        cast1(F64, &(-1.5f64).to_le_bytes(), I16),
        (-1i16).to_le_bytes()
    );
    assert_eq!(cast1(F64, &f64::NAN.to_le_bytes(), I32), [0; 4]);
    assert_eq!(
        cast1(F32, &1e10f32.to_le_bytes(), I32),
        i32::MAX.to_le_bytes()
    );
    assert_eq!(cast1(F64, &(-5.0f64).to_le_bytes(), U64), [0; 8]);
    assert_eq!(cast1(F64, &f64::NAN.to_le_bytes(), Bool), [1]);
    assert_eq!(cast1(C64, &[0, 0, 0, 0, 0, 0, 0x80, 0x3f], Bool), [1]); // 0 + 1i
    assert_eq!(
        cast1(
            C128,
            &[2.5f64.to_le_bytes(), 7.0f64.to_le_bytes()].concat(),
            F32
        ),
        2.5f32.to_le_bytes()
    );
    assert_eq!(
        cast1(U16, &65519u16.to_le_bytes(), F16),
        0x7bffu16.to_le_bytes()
    ); // 65504
    assert_eq!(
        cast1(U16, &65535u16.to_le_bytes(), F16),
        0x7c00u16.to_le_bytes()
    ); // inf
    assert_eq!(
        cast1(F32, &65520.0f32.to_le_bytes(), F16),
        0x7c00u16.to_le_bytes()
    ); // inf
    assert_eq!(cast1(Bool, &[9], I64), 1i64.to_le_bytes());
    assert_eq!(
        cast1(I8, &[0xff], C128),
        [(-1.0f64).to_le_bytes(), 0.0f64.to_le_bytes()].concat()
    );
    // 1 + 2^-11 + 2^-40 must round up in f16 (half's f64 path would not)
    let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    assert_eq!(cast1(F64, &x.to_le_bytes(), F16), 0x3c01u16.to_le_bytes());
}
