//! Devices: which ones exist, and the small device trait the pipeline is written against.
//!
//! cudarc is always compiled with dynamic loading; nothing here touches CUDA until a CUDA
//! device is asked for, and then only after [`cuda_device_count`] found the driver.

mod cuda;
mod host;
mod ops;
mod stream;

pub(crate) use cuda::CudaOps;
pub(crate) use host::HostOps;
pub(crate) use ops::{DeviceOps, Event, Queue, ops_for, ops_for_pair};
pub use stream::Stream;

use crate::error::{Error, Result};
use cudarc::driver::CudaContext;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A place where computation runs: the CPU, or CUDA device N.
///
/// Parsed from `"cpu"`, `"cuda"` (device 0) or `"cuda:N"`, as `ZARRBUF_DEVICE` and the CLI's
/// `--device` accept.
///
/// ```
/// use zarrbuf::Device;
/// assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::Cuda(1));
/// assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
/// assert_eq!(Device::Cpu.to_string(), "cpu");
/// assert!(Device::Cpu.is_available());
/// assert!("gpu".parse::<Device>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// The host CPU.
    #[default]
    Cpu,
    /// CUDA device with this ordinal.
    Cuda(usize),
}

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

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" if t == "cuda" => Ok(Device::Cuda(0)),
            _ => t
                .strip_prefix("cuda:")
                .and_then(|n| n.parse::<usize>().ok())
                .map(Device::Cuda)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "unknown device {s:?}; use \"cpu\", \"cuda\" or \"cuda:N\""
                    ))
                }),
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
    let ctx = CudaContext::new(ordinal)
        .map_err(|e| Error::cuda("cuDevicePrimaryCtxRetain", format!("{e:?}")))?;
    map.insert(ordinal, ctx.clone());
    Ok(ctx)
}
