//! Conformance cases: Zero-length buffers, `empty` for shapes × data types × orders, `create` and
//! `as_scalar`, integer indexing.

use super::*;

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
