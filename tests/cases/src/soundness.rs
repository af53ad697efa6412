//! Soundness cases: each is a defect the safe API once had (uninitialised or recycled
//! bytes reaching safe code, host views racing writers, device work not tracked per
//! allocation, a prototype's stream not honoured), run on every prototype: by zarrbuf's
//! `tests/it/soundness.rs` and by the GPU check binary (`zarrbuf-gpucheck`), which runs them
//! on pinned and CUDA memory of a real GPU.

use crate::{Case, e};
use zarrbuf::cuda::Stream;
use zarrbuf::{Buffer, BufferPrototype, DataType, Error, Memory, NDBuffer, Order};

/// Calls `$m! { case, case, ... }` with the name of every soundness case, in order: the one
/// list of the cases. [`all`] is built from it, and so are zarrbuf's tests, one `#[test]` per
/// case named after it (`tests/it/soundness.rs`). Each name is a function of
/// [`soundness`](crate::soundness).
#[macro_export]
macro_rules! soundness_cases {
    ($m:ident) => {
        $m! {
            empty_never_shows_old_bytes,
            host_views_block_writers,
            bool_views_check_their_bytes,
            async_copies_are_waited_for,
            released_memory_waits_for_copies,
            close_orders_the_release,
            prototype_streams_order_copies,
            mutable_views_are_exclusive,
        }
    };
}

/// `(name, case)` for each name given.
macro_rules! case_table {
    ($($name:ident),* $(,)?) => {
        vec![$((stringify!($name), $name as Case)),*]
    };
}

/// Every case, by name, in the order of [`soundness_cases!`].
pub fn all() -> Vec<(&'static str, Case)> {
    crate::soundness_cases!(case_table)
}

/// 64 MiB: above the 4 MiB threshold of the block cache, so freed blocks are recycled.
const BIG: usize = 64 << 20;

/// Defect 2: fill a 64 MiB array with 42.0, drop it, ask for `empty` of the same size: the
/// block cache hands the same block back, and it must come back cleared.
pub fn empty_never_shows_old_bytes(proto: &BufferPrototype) -> Result<(), String> {
    let n = BIG / 4;
    for round in 0..3 {
        let mut a = NDBuffer::empty(&[n], DataType::Float32, Order::C, proto).map_err(e)?;
        a.fill_with(42.0f32).map_err(e)?;
        drop(a);
        let b = NDBuffer::empty(&[n], DataType::Float32, Order::C, proto).map_err(e)?;
        ensure!(
            b.all_equal(&0f32.to_ne_bytes(), false).map_err(e)?,
            "round {round}: NDBuffer::empty on {} showed another allocation's bytes",
            proto.memory()
        );
        let mut c = Buffer::zeros(BIG, proto).map_err(e)?;
        c.fill_bytes(0x5a).map_err(e)?;
        drop(c);
        let d = Buffer::empty(BIG, proto).map_err(e)?;
        ensure!(
            d.to_vec().map_err(e)?.iter().all(|&x| x == 0),
            "round {round}: Buffer::empty on {} showed another allocation's bytes",
            proto.memory()
        );
    }
    Ok(())
}

/// Defect 1 (the runtime half; the compile-time half is a `compile_fail` doctest on
/// `HostArrayView`): while a view lives, writes through every other handle fail with Busy.
pub fn host_views_block_writers(proto: &BufferPrototype) -> Result<(), String> {
    let a = NDBuffer::zeros(&[4], DataType::Float32, Order::C, proto).map_err(e)?;
    if !proto.memory().is_host_accessible() {
        ensure!(
            matches!(a.as_ndarray::<f32>(), Err(Error::NotHostAccessible(_))),
            "a host view of device memory must be refused"
        );
        return Ok(());
    }
    {
        let v = a.as_ndarray::<f32>().map_err(e)?;
        ensure!(v.sum() == 0.0, "zeros are not zero");
        for attempt in 0..2 {
            let r = if attempt == 0 {
                a.clone().fill_with(7.0f32)
            } else {
                a.buffer().clone().fill_bytes(1)
            };
            ensure!(
                matches!(r, Err(Error::Busy(_))),
                "write {attempt} while a view lives: {r:?}"
            );
        }
        ensure!(v.sum() == 0.0, "the view changed under a live borrow");
    }
    a.clone().fill_with(7.0f32).map_err(e)?;
    ensure!(
        a.to_vec::<f32>().map_err(e)? == vec![7.0; 4],
        "write after the view was dropped"
    );
    Ok(())
}

/// Defect 5: `as_ndarray::<bool>` checks the bytes under the guard it hands out.
pub fn bool_views_check_their_bytes(proto: &BufferPrototype) -> Result<(), String> {
    let raw = NDBuffer::from_vec(vec![0u8, 1, 2, 1], &[4]).map_err(e)?;
    let bad = raw
        .with_type(DataType::Bool)
        .map_err(e)?
        .to_prototype(proto)
        .map_err(e)?;
    if proto.memory().is_host_accessible() {
        ensure!(
            matches!(bad.as_ndarray::<bool>(), Err(Error::DataType(_))),
            "a bool view over the byte 2 must be refused"
        );
    }
    ensure!(
        matches!(bad.to_vec::<bool>(), Err(Error::DataType(_))),
        "to_vec::<bool> over the byte 2 must be refused"
    );
    let good = NDBuffer::from_vec(vec![true, false], &[2])
        .map_err(e)?
        .to_prototype(proto)
        .map_err(e)?;
    ensure!(
        good.to_vec::<bool>().map_err(e)? == vec![true, false],
        "bool round trip"
    );
    Ok(())
}

/// A stream of the prototype's device, or `None` for host-only prototypes (the host device
/// runs every operation to completion before it returns: nothing to track).
fn stream_for(proto: &BufferPrototype) -> Result<Option<Stream>, String> {
    match proto.memory() {
        Memory::Cuda(n) | Memory::Pinned(n) => {
            Stream::new(zarrbuf::Device::Cuda(n)).map(Some).map_err(e)
        }
        Memory::Host => Ok(None),
    }
}

/// Defect 3: an asynchronous copy leaves a fence that host borrows wait for.
pub fn async_copies_are_waited_for(proto: &BufferPrototype) -> Result<(), String> {
    let Some(s) = stream_for(proto)? else {
        return Ok(());
    };
    let (Memory::Cuda(n) | Memory::Pinned(n)) = proto.memory() else {
        return Ok(());
    };
    let (device, pinned) = (BufferPrototype::cuda(n), BufferPrototype::pinned(n));
    for round in 0..4u8 {
        let mut src = Buffer::zeros(BIG, &device).map_err(e)?;
        src.fill_bytes(round + 1).map_err(e)?;
        let mut dst = Buffer::zeros(BIG, &pinned).map_err(e)?;
        dst.copy_from_on(&src, &s).map_err(e)?;
        drop(src); // freed in stream order, after the copy
        // No synchronize: the host borrow below must wait for the copy itself.
        let bytes = dst.as_host_bytes().map_err(e)?;
        ensure!(
            bytes.iter().all(|&b| b == round + 1),
            "round {round}: the host saw pinned memory before the copy into it finished"
        );
    }
    Ok(())
}

/// Defect 3: a pinned block dropped with a copy still writing into it goes back to the cache
/// only after the copy, so the next `empty` of that size is all zero.
pub fn released_memory_waits_for_copies(proto: &BufferPrototype) -> Result<(), String> {
    let Some(s) = stream_for(proto)? else {
        return Ok(());
    };
    let (Memory::Cuda(n) | Memory::Pinned(n)) = proto.memory() else {
        return Ok(());
    };
    let (device, pinned) = (BufferPrototype::cuda(n), BufferPrototype::pinned(n));
    let mut src = Buffer::zeros(BIG, &device).map_err(e)?;
    src.fill_bytes(9).map_err(e)?;
    for round in 0..4 {
        let mut dst = Buffer::zeros(BIG, &pinned).map_err(e)?;
        dst.copy_from_on(&src, &s).map_err(e)?;
        drop(dst); // the copy is still running: the block must not be recycled yet
        let next = Buffer::empty(BIG, &pinned).map_err(e)?;
        ensure!(
            next.to_vec().map_err(e)?.iter().all(|&b| b == 0),
            "round {round}: a recycled pinned block was written by a copy after it was handed out"
        );
    }
    // Device memory dropped with a copy reading it is freed in stream order.
    let mut out = Buffer::zeros(BIG, &device).map_err(e)?;
    {
        let mut tmp = Buffer::zeros(BIG, &device).map_err(e)?;
        tmp.fill_bytes(3).map_err(e)?;
        out.copy_from_on(&tmp, &s).map_err(e)?;
    }
    let mut churn = Vec::new();
    for _ in 0..4 {
        let mut b = Buffer::zeros(BIG, &device).map_err(e)?;
        b.fill_bytes(0xee).map_err(e)?;
        churn.push(b);
    }
    ensure!(
        out.to_vec().map_err(e)?.iter().all(|&b| b == 3),
        "a device buffer freed under a copy was reused before the copy read it"
    );
    Ok(())
}

/// `close(stream)`: the last handle's memory is released after the stream's work.
pub fn close_orders_the_release(proto: &BufferPrototype) -> Result<(), String> {
    let b = Buffer::zeros(1 << 20, proto).map_err(e)?;
    match stream_for(proto)? {
        Some(s) => {
            let (Memory::Cuda(n) | Memory::Pinned(n)) = proto.memory() else {
                return Err("a stream for host memory".into());
            };
            let mut dst = Buffer::zeros(1 << 20, &BufferPrototype::pinned(n)).map_err(e)?;
            let mut src = b.clone();
            src.fill_bytes(4).map_err(e)?;
            dst.copy_from_on(&src, &s).map_err(e)?;
            drop(src);
            b.close(&s).map_err(e)?;
            ensure!(
                dst.to_vec().map_err(e)?.iter().all(|&x| x == 4),
                "copy out of a closed buffer"
            );
        }
        None => {
            // Host memory has nothing in flight; close is a drop. (Streams need a GPU.)
            ensure!(
                Stream::new(zarrbuf::Device::Cpu).is_err(),
                "the CPU has no streams"
            );
            drop(b);
        }
    }
    Ok(())
}

/// Defect 4: a copy made for a prototype with a stream runs after the work enqueued on that
/// stream before it (here: the user's own memset, which zarrbuf knows nothing about).
pub fn prototype_streams_order_copies(proto: &BufferPrototype) -> Result<(), String> {
    let Memory::Cuda(n) = proto.memory() else {
        return Ok(());
    };
    let s = Stream::new(zarrbuf::Device::Cuda(n)).map_err(e)?;
    let src = Buffer::zeros(BIG, proto).map_err(e)?;
    src.sync().map_err(e)?;
    let ptr = src
        .device_addr()
        .ok_or("device memory has a device address")?;
    for round in 1..=3u8 {
        // SAFETY: `src` is a live allocation of BIG bytes on this device, kept alive until
        // the stream is synchronized below (copy_to waits for its copy, which comes after).
        unsafe { cudarc::driver::result::memset_d8_async(ptr, round, BIG, s.cu_stream()) }
            .map_err(|err| format!("cuMemsetD8Async: {err:?}"))?;
        let a = NDBuffer::from_buffer(src.clone(), DataType::UInt8, &[BIG], Order::C).map_err(e)?;
        let copy = a
            .copy_to(&BufferPrototype::cuda(n).with_stream(s.clone()), Order::C)
            .map_err(e)?;
        ensure!(
            copy.all_equal(&[round], false).map_err(e)?,
            "round {round}: the copy for a prototype with a stream ran before the stream's earlier work"
        );
    }
    s.synchronize().map_err(e)
}

/// `as_ndarray_mut`: exclusive while it lives, refused where two elements share memory (a
/// zero stride), and bool bytes checked before the view exists.
pub fn mutable_views_are_exclusive(proto: &BufferPrototype) -> Result<(), String> {
    let mut a = NDBuffer::zeros(&[3, 4], DataType::Int32, Order::C, proto).map_err(e)?;
    if !proto.memory().is_host_accessible() {
        ensure!(
            matches!(a.as_ndarray_mut::<i32>(), Err(Error::NotHostAccessible(_))),
            "a mutable host view of device memory must be refused"
        );
        return Ok(());
    }
    let other = a.clone();
    {
        let mut v = a.as_ndarray_mut::<i32>().map_err(e)?;
        v[[2, 3]] = 9;
        ensure!(
            matches!(other.as_ndarray::<i32>(), Err(Error::Busy(_))),
            "a read through another handle while a mutable view lives"
        );
        ensure!(
            matches!(other.buffer().clone().fill_bytes(1), Err(Error::Busy(_))),
            "a write through another handle while a mutable view lives"
        );
    }
    ensure!(
        other.to_vec::<i32>().map_err(e)?[11] == 9,
        "the write through the mutable view"
    );
    // Every element of this view is the same four bytes.
    let mut broadcast = NDBuffer::from_parts(
        a.buffer().clone(),
        DataType::Int32,
        &[4],
        &[0],
        0,
        zarrbuf::dtype::ByteOrder::native(),
    )
    .map_err(e)?;
    ensure!(
        matches!(
            broadcast.as_ndarray_mut::<i32>(),
            Err(Error::InvalidArgument(_))
        ),
        "a mutable view with a zero stride must be refused"
    );
    let mut bad = NDBuffer::from_vec(vec![0u8, 3], &[2])
        .map_err(e)?
        .with_type(DataType::Bool)
        .map_err(e)?
        .to_prototype(proto)
        .map_err(e)?;
    ensure!(
        matches!(bad.as_ndarray_mut::<bool>(), Err(Error::DataType(_))),
        "a mutable bool view over the byte 3 must be refused"
    );
    Ok(())
}
