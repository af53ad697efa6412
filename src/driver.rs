//! The CUDA driver: probed once per process, primary contexts cached per device.
//!
//! cudarc is always compiled with dynamic loading, and it panics when libcuda is missing, so
//! nothing touches CUDA before [`cuda_device_count`] found the driver; its absence becomes
//! [`Error::DeviceUnavailable`] with a sentence a user understands.

use crate::error::{Error, Result};
use crate::place::Device;
use cudarc::driver::CudaContext;
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
/// match zarrbuf::cuda_device_count() {
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
