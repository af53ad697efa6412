//! Staging slots: the ring a staged read or write cycles through. Each slot is host staging
//! memory the device can DMA from and to, device scratch, a queue, and the event of the
//! device work that last used it. Host memory in flight is bounded by slot count × size.

use super::slot_pool::{self, Slot};
use crate::buffer::Buffer;
use crate::device::DeviceOps;
use crate::errors::Result;
use crate::zarr::Unit;
use std::sync::Mutex;

/// The slot ring for `units` of `elem`-byte elements: slots as large as the largest unit, as
/// many as [`slot_count`] allows, taken from the slot pool first.
pub(crate) fn allocate_slots(
    ops: &dyn DeviceOps,
    units: &[Unit],
    elem: usize,
    budget: usize,
    threads: usize,
    in_batches: usize,
) -> Result<Vec<Slot>> {
    let slot_bytes = largest_unit_bytes(units, elem);
    let n = slot_count(budget, slot_bytes, threads, units.len(), in_batches);
    let mut slots = slot_pool::take(ops.memory(), slot_bytes, n);
    while slots.len() < n {
        slots.push(Slot {
            staging: Buffer::from_region(ops.alloc_staging(slot_bytes)?),
            scratch: Buffer::from_region(ops.alloc(slot_bytes)?),
            queue: ops.new_queue()?,
            pending: Mutex::new(None),
        });
    }
    Ok(slots)
}

/// Bytes of the largest unit's decoded elements: a slot's size, and the chunk size the
/// device (de)compressors are checked against.
pub(crate) fn largest_unit_bytes(units: &[Unit], elem: usize) -> usize {
    units
        .iter()
        .map(|u| u.num_elements() * elem)
        .max()
        .unwrap_or(0)
}

/// Drains every slot's queue (no device work may outlive a pipeline run) and, when that
/// worked, parks the slots for the next run.
pub(crate) fn finish(
    ops: &dyn DeviceOps,
    slots: Vec<Slot>,
    units: &[Unit],
    elem: usize,
) -> Result<()> {
    drain(ops, &slots)?;
    for s in &slots {
        if let Ok(mut p) = s.pending.lock() {
            *p = None;
        }
    }
    slot_pool::give_back(ops.memory(), largest_unit_bytes(units, elem), slots);
    Ok(())
}

/// Waits for every slot's queue: no device work may outlive a pipeline run.
fn drain(ops: &dyn DeviceOps, slots: &[Slot]) -> Result<()> {
    slots.iter().try_for_each(|s| ops.synchronize(&s.queue))
}

/// Number of slots: what fits in the budget, at least two (double buffering), at most what
/// the workers and the device can keep busy — plus `in_batches`, the slots a device decoder
/// holds while it gathers and decodes batches.
pub(crate) fn slot_count(
    budget: usize,
    slot_bytes: usize,
    threads: usize,
    units: usize,
    in_batches: usize,
) -> usize {
    let fits = budget / slot_bytes.max(1);
    fits.clamp(2, (2 * threads + 2 + in_batches).max(2))
        .min(units.max(1))
}

#[cfg(test)]
mod tests {
    use super::slot_count;

    #[test]
    fn slots_fit_the_budget_but_never_fewer_than_two() {
        assert_eq!(slot_count(256 << 20, 1 << 20, 2, 1000, 0), 6);
        assert_eq!(slot_count(1 << 20, 4 << 20, 8, 1000, 0), 2);
        assert_eq!(slot_count(256 << 20, 1 << 20, 2, 1, 0), 1);
        // A device decoder's batches get their own slots, within the budget.
        assert_eq!(slot_count(256 << 20, 1 << 20, 2, 1000, 128), 134);
        assert_eq!(slot_count(64 << 20, 1 << 20, 2, 1000, 128), 64);
    }
}
