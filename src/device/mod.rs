//! Devices: which ones exist, and the small device trait the pipeline is written against.
//!
//! Nothing here touches CUDA until a CUDA device is asked for, and then only through
//! [`crate::driver`], which probes the driver first.

mod cuda;
mod host;
mod ops;
mod stream;

pub(crate) use cuda::CudaOps;
pub(crate) use host::HostOps;
pub(crate) use ops::{DeviceOps, Event, Queue, ops_for, ops_for_pair, track};
pub use stream::Stream;
