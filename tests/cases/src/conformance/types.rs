//! Conformance cases: `astype`, `with_type`, byte order, ndarray round trips, `item`.

use super::*;

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
