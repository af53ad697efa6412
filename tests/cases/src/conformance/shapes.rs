//! Conformance cases: `transpose`, `reshape` and `squeeze`.

use super::*;

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
