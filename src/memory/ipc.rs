//! CUDA inter-process sharing of device memory, with legacy CUDA IPC: [`export`] turns a
//! region of device memory into a 64-byte `cuIpcGetMemHandle` handle plus the view's place
//! in its allocation; [`import`] maps a handle another process exported
//! (`cuIpcOpenMemHandle`) as foreign CUDA memory whose owner unmaps it
//! (`cuIpcCloseMemHandle`) after the last view is gone.
//!
//! Legacy IPC exports allocations made with `cuMemAlloc` only; memory from a stream-ordered
//! pool (`cuMemAllocAsync`, zarrbuf's default for device memory) is refused here with advice,
//! before the driver is asked. The public side (the descriptor and its byte format) lives in
//! `crate::buffer::ipc`.

use super::{ForeignCuda, Region, StorageKind};
use crate::driver::{cuda_context, cuda_device_count};
use crate::errors::{Error, Result};
use crate::place::Memory;
use cudarc::driver::{CudaContext, DriverError, result, sys};
use std::sync::Arc;

/// Size of a legacy CUDA IPC memory handle (`CU_IPC_HANDLE_SIZE`).
pub(crate) const HANDLE_LEN: usize = sys::CU_IPC_HANDLE_SIZE as usize;

/// What an export hands to another process.
#[derive(Clone, Debug)]
pub(crate) struct Exported {
    /// The `cuIpcGetMemHandle` handle of the whole allocation.
    pub(crate) handle: [u8; HANDLE_LEN],
    /// The exporting process's ordinal of the device.
    pub(crate) ordinal: usize,
    /// The device's UUID: ordinals differ between processes (`CUDA_VISIBLE_DEVICES`).
    pub(crate) uuid: [u8; 16],
    /// Bytes in the allocation the handle maps.
    pub(crate) allocation_size: usize,
    /// Where the exported view starts, in bytes from the start of the allocation.
    pub(crate) offset: usize,
    /// Bytes in the exported view.
    pub(crate) len: usize,
}

/// The advice every refusal ends with.
const ADVICE: &str = "allocate it with BufferPrototype::cuda(n).ipc_shareable() \
    (or copy it there with Buffer::to_ipc_shareable) and export that";

/// Exports `region` for another process. Waits for zarrbuf's device work in flight on the
/// memory first (its completion fences), so what the importer sees includes every write
/// zarrbuf enqueued before the call.
///
/// # Errors
/// `Unsupported` for host or pinned memory, for pool memory, and when the driver refuses to
/// export the allocation (foreign memory from a pool or a virtual-memory mapping);
/// `DeviceUnavailable` without CUDA; `Cuda` for other driver failures.
pub(crate) fn export(region: &Region) -> Result<Exported> {
    let ordinal = device_ordinal(region.memory(), region.len())?;
    let storage = region.storage();
    if storage.is_pool_allocation() {
        return Err(Error::Unsupported(format!(
            "CUDA IPC export of {} bytes of cuda:{ordinal}: the memory comes from the device's \
             stream-ordered memory pool (cuMemAllocAsync, zarrbuf's default), which legacy \
             CUDA IPC (cuIpcGetMemHandle) cannot export; {ADVICE}",
            region.len()
        )));
    }
    // The exporter's writes must be complete before another process looks at the memory.
    region.settle()?;
    let ctx = cuda_context(ordinal)?;
    ctx.bind_to_thread()
        .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
    let start = storage.device_ptr().ok_or_else(|| {
        Error::Unsupported(format!(
            "CUDA IPC export: {} has no device address",
            region.memory()
        ))
    })?;
    let (base, allocation_size) = address_range(start)?;
    let mut handle = sys::CUipcMemHandle {
        reserved: [0; HANDLE_LEN],
    };
    // SAFETY: a context of the memory's device is bound to this thread; `handle` is a valid
    // out-pointer; `base` is the start of an allocation the storage keeps alive during the call.
    unsafe { sys::cuIpcGetMemHandle(&mut handle, base) }
        .result()
        .map_err(|e| refused(e, ordinal, region.len()))?;
    Ok(Exported {
        handle: handle.reserved.map(|c| c as u8),
        ordinal,
        uuid: device_uuid(ordinal)?,
        allocation_size,
        offset: (start - base) as usize + region.offset(),
        len: region.len(),
    })
}

/// The CUDA device of `memory`, or the `Unsupported` error for exporting `len` bytes of
/// host or pinned memory (checked before a lazy buffer is given memory).
pub(crate) fn device_ordinal(memory: Memory, len: usize) -> Result<usize> {
    match memory {
        Memory::Cuda(n) => Ok(n),
        Memory::Host => Err(Error::Unsupported(format!(
            "CUDA IPC export of {len} bytes of host memory: only CUDA device memory can be \
             shared with another process this way (share host memory through a file or \
             shared memory instead); to share it with another process's GPU code, copy it to \
             a device first: copy_to_new(&BufferPrototype::cuda(n).ipc_shareable())"
        ))),
        Memory::Pinned(n) => Err(Error::Unsupported(format!(
            "CUDA IPC export of {len} bytes of pinned host memory (registered with cuda:{n}): \
             legacy CUDA IPC shares device memory only; copy it to the device first: \
             copy_to_new(&BufferPrototype::cuda({n}).ipc_shareable())"
        ))),
    }
}

/// A driver refusal to export: `Unsupported` when the memory cannot be exported (it is not a
/// `cuMemAlloc` allocation), a CUDA error otherwise.
fn refused(err: DriverError, ordinal: usize, len: usize) -> Error {
    use sys::CUresult::*;
    match err.0 {
        CUDA_ERROR_INVALID_VALUE | CUDA_ERROR_NOT_SUPPORTED | CUDA_ERROR_NOT_PERMITTED => {
            Error::Unsupported(format!(
                "CUDA IPC export of {len} bytes of cuda:{ordinal}: the driver refused to export \
                 this memory (cuIpcGetMemHandle: {:?}); only cuMemAlloc allocations can be \
                 exported, not memory-pool or virtual-memory allocations, nor memory imported \
                 from another process; {ADVICE}",
                err.0
            ))
        }
        _ => Error::cuda("cuIpcGetMemHandle", err),
    }
}

/// The base address and size of the allocation that holds device address `ptr`; a context
/// of its device must be bound.
fn address_range(ptr: u64) -> Result<(u64, usize)> {
    let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
    // SAFETY: both out-pointers are valid; the call only queries the driver's records.
    unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) }
        .result()
        .map_err(|e| Error::cuda("cuMemGetAddressRange", e))?;
    Ok((base, size))
}

/// The UUID of CUDA device `ordinal` (the probe has initialised the driver).
pub(crate) fn device_uuid(ordinal: usize) -> Result<[u8; 16]> {
    let count = cuda_device_count()?;
    if ordinal >= count {
        return Err(Error::DeviceUnavailable(format!(
            "cuda:{ordinal} was requested but this machine has {count} CUDA device(s)"
        )));
    }
    let dev = result::device::get(ordinal as i32).map_err(|e| Error::cuda("cuDeviceGet", e))?;
    let uuid = result::device::get_uuid(dev).map_err(|e| Error::cuda("cuDeviceGetUuid", e))?;
    Ok(uuid.bytes.map(|c| c as u8))
}

/// This process's ordinal of the device with `uuid`, if it can see that device.
pub(crate) fn ordinal_of(uuid: &[u8; 16]) -> Result<Option<usize>> {
    for ordinal in 0..cuda_device_count()? {
        if &device_uuid(ordinal)? == uuid {
            return Ok(Some(ordinal));
        }
    }
    Ok(None)
}

/// One `cuIpcOpenMemHandle` mapping, closed when dropped (the owner of the imported
/// storage: the storage drops it only after its completion fences have passed).
struct IpcMapping {
    ptr: sys::CUdeviceptr,
    ctx: Arc<CudaContext>,
}

impl Drop for IpcMapping {
    fn drop(&mut self) {
        // Without the context the mapping cannot be closed; it stays until the process exits.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuIpcOpenMemHandle in this context and is closed exactly
            // once, here; the storage that owned this mapping saw every use of it complete.
            let _ = unsafe { sys::cuIpcCloseMemHandle(self.ptr) };
        }
    }
}

/// Maps the allocation behind `handle` (exported by another process, of device `ordinal` in
/// this process) and returns bytes `offset..offset + len` of it. `allocation_size` is the
/// exporter's size of the allocation, used only when the driver cannot say the mapped size.
///
/// # Errors
/// `InvalidArgument` when the handle was exported by this process or cannot be opened (the
/// exporter freed the memory or exited); `OutOfBounds` when the view does not fit in the
/// mapped allocation; `DeviceUnavailable` without CUDA; `Cuda` for other driver failures.
pub(crate) fn import(
    ordinal: usize,
    handle: &[u8; HANDLE_LEN],
    allocation_size: usize,
    offset: usize,
    len: usize,
) -> Result<Region> {
    let ctx = cuda_context(ordinal)?;
    ctx.bind_to_thread()
        .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
    let h = sys::CUipcMemHandle {
        reserved: handle.map(|b| b as std::ffi::c_char),
    };
    let mut ptr: sys::CUdeviceptr = 0;
    let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as std::ffi::c_uint;
    // SAFETY: a context of device `ordinal` is bound; `ptr` is a valid out-pointer; the
    // handle is plain bytes the driver validates (an unknown handle is an error, not UB).
    unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, h, flags) }
        .result()
        .map_err(|e| open_error(e, ordinal))?;
    // From here on, every return path closes the mapping (drop) unless the storage owns it.
    let mapping = IpcMapping { ptr, ctx };
    // The bytes mapped at `ptr`: asked of the driver, else (a driver that keeps no record of
    // IPC mappings) the exporter's size, which the descriptor checked against the view.
    let mapped = match address_range(ptr) {
        Ok((base, size)) => (base + size as u64).saturating_sub(ptr) as usize,
        Err(_) => allocation_size,
    };
    let end = offset.checked_add(len).filter(|&end| end <= mapped);
    let Some(end) = end else {
        return Err(Error::OutOfBounds(format!(
            "the IPC descriptor names bytes {offset}..{} of an allocation, but the mapped \
             allocation has {mapped} bytes; the descriptor does not belong to this handle \
             (re-export the buffer)",
            offset.saturating_add(len)
        )));
    };
    // SAFETY: [ptr, ptr+mapped) is the mapping of device memory on device `ordinal`; it
    // stays mapped until the owner (`mapping`) is dropped, which the storage does last.
    let foreign = unsafe { ForeignCuda::new(ptr, mapped, ordinal, Box::new(mapping)) };
    Ok(Region::new(StorageKind::ForeignCuda(foreign)).sub(offset, end))
}

/// A failure of `cuIpcOpenMemHandle`, said so a user knows what to do.
fn open_error(err: DriverError, ordinal: usize) -> Error {
    use sys::CUresult::*;
    match err.0 {
        CUDA_ERROR_INVALID_CONTEXT => Error::InvalidArgument(format!(
            "cuIpcOpenMemHandle on cuda:{ordinal} failed ({:?}): a CUDA IPC handle can only be \
             opened in another process than the one that exported it; in the exporting process \
             use the exported Buffer (or a clone or slice of it) directly",
            err.0
        )),
        CUDA_ERROR_INVALID_VALUE | CUDA_ERROR_INVALID_HANDLE | CUDA_ERROR_NOT_FOUND => {
            Error::InvalidArgument(format!(
                "cuIpcOpenMemHandle on cuda:{ordinal} failed ({:?}): the handle does not name \
                 live memory; the exporting process may have dropped its buffer or exited \
                 (it must keep the buffer alive until every importer dropped theirs)",
                err.0
            ))
        }
        _ => Error::Cuda {
            call: "cuIpcOpenMemHandle",
            message: format!(
                "{err:?} while mapping another process's memory on cuda:{ordinal} (peer access \
                 between the exporting and importing GPUs may be unavailable)"
            ),
            source: Some(Box::new(err)),
        },
    }
}
