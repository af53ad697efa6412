//! Where things are: the [`Device`] computation runs on and the [`Memory`] bytes live in.
//!
//! Plain values at the bottom of the crate: parsing and display only. Whether a device is
//! present is the driver's business ([`crate::cuda::cuda_device_count`], [`Device::is_available`]).

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

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// A device string that is not `cpu`, `cuda` or `cuda:N` (converts into
/// [`crate::Error::InvalidArgument`] with `?`).
///
/// ```
/// let e = "tpu".parse::<zarrbuf::Device>().unwrap_err();
/// assert!(e.to_string().contains("\"tpu\""));
/// let as_error: zarrbuf::Error = e.into();
/// assert!(matches!(as_error, zarrbuf::Error::InvalidArgument(_)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseDeviceError(String);

impl std::fmt::Display for ParseDeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown device {:?}; use \"cpu\", \"cuda\" or \"cuda:N\"",
            self.0
        )
    }
}

impl std::error::Error for ParseDeviceError {}

impl std::str::FromStr for Device {
    type Err = ParseDeviceError;

    fn from_str(s: &str) -> Result<Self, ParseDeviceError> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => t
                .strip_prefix("cuda:")
                .and_then(|n| n.parse::<usize>().ok())
                .map(Device::Cuda)
                .ok_or_else(|| ParseDeviceError(s.to_string())),
        }
    }
}

/// Where a buffer's memory lives.
///
/// ```
/// use zarrbuf::{Buffer, Memory};
/// assert_eq!(Buffer::from_vec(vec![0u8; 4]).memory(), Memory::Host);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Memory {
    /// Ordinary (pageable) host memory.
    Host,
    /// Page-locked host memory registered with CUDA device N: host-readable and DMA-able.
    Pinned(usize),
    /// Memory on CUDA device N.
    Cuda(usize),
}

impl Memory {
    /// The host can read and write it directly.
    pub fn is_host_accessible(self) -> bool {
        matches!(self, Memory::Host | Memory::Pinned(_))
    }

    /// The device can read it directly (device memory, or pinned memory through unified addressing).
    pub fn is_device_accessible(self) -> bool {
        matches!(self, Memory::Pinned(_) | Memory::Cuda(_))
    }

    /// The device that computes on this memory: the CPU for host and pinned memory.
    pub fn device(self) -> Device {
        match self {
            Memory::Host | Memory::Pinned(_) => Device::Cpu,
            Memory::Cuda(n) => Device::Cuda(n),
        }
    }
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Memory::Host => f.write_str("host memory"),
            Memory::Pinned(n) => write!(f, "pinned host memory (cuda:{n})"),
            Memory::Cuda(n) => write!(f, "device memory (cuda:{n})"),
        }
    }
}
