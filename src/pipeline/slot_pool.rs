//! Staging slots — what one is — and the pool that keeps them between pipeline runs.
//!
//! A pipeline run needs a ring of pinned staging buffers, device scratch buffers and
//! streams. Creating them costs page-locking, `cuMemAlloc` and `cuStreamCreate` per slot —
//! more than a small read takes — so a finished run parks its slots here and the next run of
//! the same slot size on the same device takes them back. At most `MAX_POOLED_BYTES` are
//! parked; `zarrbuf::alloc::release_cached_memory` frees them (the pool registers itself with
//! the memory layer's cache the first time it is used).

use crate::buffer::Buffer;
use crate::device::{Event, Queue};
use crate::memory::register_pool;
use crate::place::Memory;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// One staging slot: host-side staging memory, device-side scratch, the queue its work uses,
/// and (for reads) the event that marks the end of the device work that last read it.
pub(crate) struct Slot {
    pub staging: Buffer,
    pub scratch: Buffer,
    pub queue: Queue,
    pub pending: Mutex<Option<Event>>,
}

/// Bytes of parked slots (staging + scratch), over all devices and sizes.
const MAX_POOLED_BYTES: usize = 1 << 30;

struct Pool {
    slots: HashMap<(Memory, usize), Vec<Slot>>,
    bytes: usize,
}

fn pool() -> &'static Mutex<Pool> {
    static POOL: OnceLock<Mutex<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        register_pool(release_all);
        Mutex::new(Pool {
            slots: HashMap::new(),
            bytes: 0,
        })
    })
}

/// Up to `n` parked slots of `slot_bytes` for `memory`.
pub(crate) fn take(memory: Memory, slot_bytes: usize, n: usize) -> Vec<Slot> {
    let Ok(mut p) = pool().lock() else {
        return Vec::new();
    };
    let Some(parked) = p.slots.get_mut(&(memory, slot_bytes)) else {
        return Vec::new();
    };
    let keep = parked.len().saturating_sub(n);
    let taken: Vec<Slot> = parked.drain(keep..).collect();
    p.bytes -= taken.len() * 2 * slot_bytes;
    taken
}

/// Parks the slots of a run whose queues are drained; what does not fit is freed.
pub(crate) fn give_back(memory: Memory, slot_bytes: usize, slots: Vec<Slot>) {
    let Ok(mut p) = pool().lock() else {
        return;
    };
    let room = MAX_POOLED_BYTES.saturating_sub(p.bytes) / (2 * slot_bytes).max(1);
    let parked: Vec<Slot> = slots.into_iter().take(room).collect();
    p.bytes += parked.len() * 2 * slot_bytes;
    p.slots
        .entry((memory, slot_bytes))
        .or_default()
        .extend(parked);
}

/// Frees every parked slot; returns the bytes released.
pub(crate) fn release_all() -> usize {
    let (slots, bytes) = match pool().lock() {
        Ok(mut p) => (
            std::mem::take(&mut p.slots),
            std::mem::replace(&mut p.bytes, 0),
        ),
        Err(_) => return 0,
    };
    drop(slots);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{DeviceOps, HostOps};

    fn slot(bytes: usize) -> Slot {
        let ops = HostOps;
        Slot {
            staging: crate::buffer::Buffer::from_region(ops.alloc_staging(bytes).unwrap()),
            scratch: crate::buffer::Buffer::from_region(ops.alloc(bytes).unwrap()),
            queue: ops.new_queue().unwrap(),
            pending: Mutex::new(None),
        }
    }

    #[test]
    fn parked_slots_come_back_for_the_same_size_only() {
        // A size no other test uses, so parallel tests do not interfere.
        let bytes = 12_345;
        let a = slot(bytes);
        let id = a.staging.storage_id();
        give_back(Memory::Host, bytes, vec![a, slot(bytes)]);
        assert!(take(Memory::Host, bytes + 1, 4).is_empty());
        let back = take(Memory::Host, bytes, 1);
        assert_eq!(back.len(), 1);
        let rest = take(Memory::Host, bytes, 4);
        assert_eq!(rest.len(), 1);
        assert!([back[0].staging.storage_id(), rest[0].staging.storage_id()].contains(&id));
        assert!(take(Memory::Host, bytes, 4).is_empty());
    }
}
