//! Conformance cases: `fill`, `fill_with` and `set`.

use super::*;

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
