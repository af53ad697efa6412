//! Conformance cases for the buffer features modelled on morok, parpy and cuda.core: lazy
//! allocation, the allocator a buffer came from, and the `*_like` constructors. A part of
//! [`conformance`](super) with its helpers; the cases are listed there.

use super::{e, full, upload};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use zarrbuf::alloc::{Allocator, MemoryResource};
use zarrbuf::{Buffer, BufferPrototype, DataType, Error, Memory, NDBuffer, Order};

/// Counts the allocations it makes and otherwise uses zarrbuf's own memory.
struct Counting(AtomicUsize);

impl Allocator for Counting {
    fn allocate(&self, len: usize, memory: Memory) -> zarrbuf::Result<Buffer> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Buffer::empty(len, &BufferPrototype::for_memory(memory))
    }
}

fn counting(proto: &BufferPrototype) -> (Arc<Counting>, BufferPrototype) {
    let c = Arc::new(Counting(AtomicUsize::new(0)));
    let p = BufferPrototype::for_memory(proto.memory()).with_allocator(c.clone());
    (c, p)
}

fn not_allocated<T: std::fmt::Debug>(what: &str, r: zarrbuf::Result<T>) -> Result<(), String> {
    match r {
        Err(Error::NotAllocated(msg)) => {
            ensure!(
                msg.contains("bytes"),
                "{what}: NotAllocated should say how much: {msg}"
            );
            Ok(())
        }
        // Host reads of device memory say so first; that is also a clean refusal.
        Err(Error::NotHostAccessible(_)) => Ok(()),
        other => Err(format!(
            "{what} on an unwritten lazy buffer: want NotAllocated, got {other:?}"
        )),
    }
}

/// Described buffers have no memory until the first write; reads before it are refused,
/// views share the storage and see the allocation, and failed or absent writes allocate
/// nothing.
pub fn lazy_allocation(proto: &BufferPrototype) -> Result<(), String> {
    let (count, cproto) = counting(proto);
    let lazy = Buffer::lazy(64, &cproto);
    let tail = lazy.slice(40..);
    ensure!(
        !lazy.is_allocated() && !tail.is_allocated(),
        "allocated early"
    );
    ensure!(
        lazy.len() == 64 && tail.len() == 24 && lazy.memory() == proto.memory(),
        "described size or memory wrong: {lazy:?} {tail:?}"
    );
    ensure!(
        tail.storage_id() == lazy.storage_id() && tail.id() != lazy.id(),
        "views of a lazy buffer share its storage id"
    );
    let id_before = lazy.storage_id();
    ensure!(
        lazy.host_ptr().is_none() && lazy.device_addr().is_none(),
        "an unallocated buffer has no address"
    );
    not_allocated("to_vec", lazy.to_vec())?;
    not_allocated("as_host_bytes", lazy.as_host_bytes().map(|b| b.len()))?;
    not_allocated(
        "copy_to_new",
        lazy.copy_to_new(&BufferPrototype::cpu()).map(|b| b.len()),
    )?;
    not_allocated(
        "copy from it",
        Buffer::from_vec(vec![0u8; 64]).copy_from(&lazy),
    )?;
    lazy.sync().map_err(e)?;
    ensure!(
        count.0.load(Ordering::SeqCst) == 0,
        "reads, sync and views allocated memory"
    );
    // Promotion to a prototype it satisfies keeps it lazy and shared.
    let promoted =
        Buffer::from_buffer(&lazy, &BufferPrototype::for_memory(proto.memory())).map_err(e)?;
    ensure!(
        promoted.storage_id() == id_before && !promoted.is_allocated(),
        "promotion of a lazy buffer copied or allocated"
    );

    // The first write, through the tail view, allocates the whole buffer once, zeroed.
    let mut tail_w = tail.clone();
    let pattern: Vec<u8> = (0..24u8).map(|i| i * 3 + 1).collect();
    tail_w
        .copy_from(&Buffer::from_vec(pattern.clone()))
        .map_err(e)?;
    ensure!(
        lazy.is_allocated() && tail.is_allocated() && promoted.is_allocated(),
        "a write through one view allocates for every view"
    );
    ensure!(
        lazy.storage_id() == id_before,
        "the storage id changed on allocation"
    );
    let mut want = vec![0u8; 40];
    want.extend(&pattern);
    ensure!(lazy.to_vec().map_err(e)? == want, "zeros then the pattern");
    lazy.clone().fill_bytes(2).map_err(e)?;
    ensure!(
        count.0.load(Ordering::SeqCst) == 1,
        "allocated {} times for one lazy buffer",
        count.0.load(Ordering::SeqCst)
    );
    ensure!(
        lazy.host_ptr().is_some() == proto.memory().is_host_accessible()
            && lazy.device_addr().is_some() == proto.memory().is_device_accessible(),
        "an allocated buffer has the addresses of its memory"
    );

    // ensure_allocated allocates deliberately; a lazy buffer dropped unwritten never does.
    let z = Buffer::lazy(16, &cproto);
    z.ensure_allocated().map_err(e)?;
    z.ensure_allocated().map_err(e)?;
    ensure!(
        z.to_vec().map_err(e)? == vec![0u8; 16],
        "ensure_allocated gives zeros"
    );
    drop(Buffer::lazy(1 << 30, &cproto).slice(5..9));
    ensure!(
        count.0.load(Ordering::SeqCst) == 2,
        "dropping an unwritten lazy buffer allocated memory"
    );

    // Two threads racing to allocate one buffer make one allocation.
    let race = Buffer::lazy(4096, &cproto);
    std::thread::scope(|s| {
        for _ in 0..4 {
            let b = race.slice(..);
            s.spawn(move || b.ensure_allocated());
        }
    });
    ensure!(
        count.0.load(Ordering::SeqCst) == 3,
        "racing first writes allocated {} times",
        count.0.load(Ordering::SeqCst) - 2
    );

    // NDBuffers: described, written by `set`, then readable; views stay lazy until then.
    let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
    let mut nd = NDBuffer::lazy(&[3, 4], DataType::Float32, Order::F, proto).map_err(e)?;
    let row = nd.get(&[1..2, 0..4]).map_err(e)?;
    ensure!(
        !nd.is_allocated() && !row.is_allocated(),
        "NDBuffer allocated early"
    );
    not_allocated("NDBuffer::to_vec", nd.to_vec::<f32>())?;
    let host = upload(&data, &[3, 4], Order::C, &BufferPrototype::cpu())?;
    nd.set(&full(&[3, 4]), &host).map_err(e)?;
    ensure!(row.is_allocated(), "a view sees its parent's allocation");
    ensure!(
        nd.to_vec::<f32>().map_err(e)? == data,
        "lazy NDBuffer after set"
    );
    ensure!(
        row.to_vec::<f32>().map_err(e)? == data[4..8],
        "the view reads the row the parent wrote"
    );
    Ok(())
}

/// `memory_resource` says where a buffer's memory came from, and makes more of it.
pub fn memory_resource(proto: &BufferPrototype) -> Result<(), String> {
    let own = Buffer::zeros(32, proto).map_err(e)?;
    let resource = own.slice(8..).memory_resource();
    ensure!(
        matches!(resource, MemoryResource::Zarrbuf(m) if m == proto.memory()),
        "zarrbuf's own memory: {resource:?}"
    );
    let more = resource.allocate(100).map_err(e)?;
    ensure!(
        more.len() == 100 && more.memory() == proto.memory(),
        "allocate from the resource: {more:?}"
    );
    ensure!(
        more.to_vec().map_err(e)? == vec![0u8; 100],
        "new memory from a resource is zero"
    );

    let (count, cproto) = counting(proto);
    let custom = Buffer::zeros(16, &cproto).map_err(e)?;
    let MemoryResource::Custom { memory, allocator } = custom.slice(4..8).memory_resource() else {
        return Err(format!(
            "a prototype's allocator: {:?}",
            custom.memory_resource()
        ));
    };
    ensure!(memory == proto.memory(), "custom resource memory {memory}");
    let from_same = custom.memory_resource().allocate(8).map_err(e)?;
    ensure!(
        from_same.len() == 8 && count.0.load(Ordering::SeqCst) == 2,
        "the resource allocates through the same allocator"
    );
    let direct = allocator.allocate(4, memory).map_err(e)?;
    ensure!(
        direct.len() == 4 && count.0.load(Ordering::SeqCst) == 3,
        "the allocator handed back is the prototype's"
    );
    let lazy = Buffer::lazy(8, &cproto);
    ensure!(
        matches!(lazy.memory_resource(), MemoryResource::Custom { .. }),
        "a lazy buffer reports the resource it will allocate from"
    );
    let nd = NDBuffer::zeros_like(
        &NDBuffer::from_vec(vec![1u16; 6], &[2, 3]).map_err(e)?,
        &cproto,
    )
    .map_err(e)?;
    ensure!(
        matches!(nd.buffer().memory_resource(), MemoryResource::Custom { .. }),
        "zeros_like through a custom prototype"
    );

    let foreign = Buffer::from_vec(vec![1u8, 2, 3]);
    ensure!(
        matches!(
            foreign.memory_resource(),
            MemoryResource::Foreign(Memory::Host)
        ),
        "a wrapped Vec: {:?}",
        foreign.memory_resource()
    );
    Ok(())
}
