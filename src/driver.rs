//! The CUDA driver: probed once per process, primary contexts cached per device.
//!
//! cudarc is always compiled with dynamic loading, and it panics when libcuda is missing, so
//! nothing touches CUDA before [`cuda_device_count`] found the driver; its absence becomes
//! [`Error::DeviceUnavailable`] with a sentence a user understands.

use crate::errors::{Error, Result};
use crate::place::Device;
use cudarc::driver::{CudaContext, CudaStream, sys};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

impl Device {
    /// True when the device can be used on this machine (never panics, never errors).
    pub fn is_available(self) -> bool {
        match self {
            Device::Cpu => true,
            Device::Cuda(n) => cuda_device_count().map(|c| n < c).unwrap_or(false),
        }
    }

    /// Succeeds when the device can be used, otherwise says why in a sentence.
    ///
    /// ```
    /// zarrbuf::Device::Cpu.check_available().unwrap();
    /// ```
    pub fn check_available(self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(n) => cuda_context(n).map(|_| ()),
        }
    }
}

/// The number of CUDA devices, or why CUDA cannot be used (probed once per process).
///
/// ```
/// match zarrbuf::cuda::cuda_device_count() {
///     Ok(n) => println!("{n} CUDA device(s)"),
///     Err(e) => println!("no CUDA: {e}"),
/// }
/// ```
pub fn cuda_device_count() -> Result<usize> {
    static PROBE: OnceLock<std::result::Result<usize, String>> = OnceLock::new();
    PROBE
        .get_or_init(probe_cuda)
        .clone()
        .map_err(Error::DeviceUnavailable)
}

fn probe_cuda() -> std::result::Result<usize, String> {
    if cfg!(miri) {
        return Err(
            "the NVIDIA driver cannot be loaded under Miri, which does not run foreign (C) code; \
                    CUDA is unavailable here, use the CPU"
                .into(),
        );
    }
    // SAFETY: only tries to dlopen the driver library; has no other preconditions.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(
            "the NVIDIA driver library (libcuda.so) was not found on this machine; \
                    install the NVIDIA driver, or use the CPU (--device cpu, ZARRBUF_DEVICE=cpu)"
                .into(),
        );
    }
    cudarc::driver::result::init()
        .map_err(|e| format!("the CUDA driver failed to initialise (cuInit: {e:?}); check that a GPU is visible (nvidia-smi)"))?;
    let count = cudarc::driver::result::device::get_count()
        .map_err(|e| format!("could not count CUDA devices (cuDeviceGetCount: {e:?})"))?;
    if count <= 0 {
        return Err("the CUDA driver is installed but reports no GPU".into());
    }
    Ok(count as usize)
}

/// The (cached, primary) CUDA context of device `ordinal`.
pub(crate) fn cuda_context(ordinal: usize) -> Result<Arc<CudaContext>> {
    static CONTEXTS: OnceLock<Mutex<HashMap<usize, Arc<CudaContext>>>> = OnceLock::new();
    let count = cuda_device_count()?;
    if ordinal >= count {
        return Err(Error::DeviceUnavailable(format!(
            "cuda:{ordinal} was requested but this machine has {count} CUDA device(s) (cuda:0..cuda:{})",
            count - 1
        )));
    }
    let mut map = CONTEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(ctx) = map.get(&ordinal) {
        return Ok(ctx.clone());
    }
    let ctx = CudaContext::new(ordinal).map_err(|e| Error::cuda("cuDevicePrimaryCtxRetain", e))?;
    map.insert(ordinal, ctx.clone());
    Ok(ctx)
}

/// Device `ordinal`'s allocation stream: device memory is allocated and freed in its order
/// (`cuMemAllocAsync` / `cuMemFreeAsync` from the device's default memory pool). The first
/// call also makes the pool keep freed memory for reuse instead of returning it to the driver
/// at every synchronisation (PyTorch's caching allocator does the same); `None` when the
/// device has no memory pools, and then memory is allocated with `cuMemAlloc`.
pub(crate) fn alloc_stream(ordinal: usize) -> Result<Option<Arc<CudaStream>>> {
    let ctx = cuda_context(ordinal)?;
    let mut map = alloc_streams();
    if let Some(s) = map.get(&ordinal) {
        return Ok(s.clone());
    }
    let stream = if ctx.has_async_alloc() {
        ctx.bind_to_thread()
            .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: the context of this device is bound; `pool` is a valid out-pointer.
        unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }
            .result()
            .map_err(|e| Error::cuda("cuDeviceGetDefaultMemPool", e))?;
        let mut keep: u64 = u64::MAX;
        // SAFETY: `pool` is this device's default pool; the attribute takes a u64 value.
        unsafe {
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut keep as *mut u64).cast(),
            )
        }
        .result()
        .map_err(|e| Error::cuda("cuMemPoolSetAttribute", e))?;
        Some(
            ctx.new_stream()
                .map_err(|e| Error::cuda("cuStreamCreate", e))?,
        )
    } else {
        None
    };
    map.insert(ordinal, stream.clone());
    Ok(stream)
}

type AllocStreams = Mutex<HashMap<usize, Option<Arc<CudaStream>>>>;

fn alloc_streams() -> std::sync::MutexGuard<'static, HashMap<usize, Option<Arc<CudaStream>>>> {
    static STREAMS: OnceLock<AllocStreams> = OnceLock::new();
    STREAMS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Returns the device memory parked in the default memory pools of the devices zarrbuf
/// allocated on to the driver; returns the bytes released.
pub(crate) fn trim_device_pools() -> usize {
    let streams: Vec<Arc<CudaStream>> = alloc_streams().values().flatten().cloned().collect();
    let mut released = 0;
    for stream in streams {
        let ctx = stream.context();
        if ctx.synchronize().is_err() {
            continue;
        }
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        let reserved = |pool: sys::CUmemoryPool| -> u64 {
            let mut bytes: u64 = 0;
            // SAFETY: `pool` is a live pool; the attribute writes one u64.
            let _ = unsafe {
                sys::cuMemPoolGetAttribute(
                    pool,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                    (&mut bytes as *mut u64).cast(),
                )
            };
            bytes
        };
        // SAFETY: the context is bound (synchronize bound it); `pool` is a valid out-pointer.
        if unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }
            .result()
            .is_err()
        {
            continue;
        }
        let before = reserved(pool);
        // SAFETY: trimming only releases memory that no allocation holds.
        let _ = unsafe { sys::cuMemPoolTrimTo(pool, 0) };
        released += before.saturating_sub(reserved(pool)) as usize;
    }
    released
}
