//! Conformance cases: Buffers: zero-copy promotion, slices, concatenation, copies between memories, host
//! access, borrows, read-only bytes.

use super::*;

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
