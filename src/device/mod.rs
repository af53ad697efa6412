//! Devices: which ones exist, and the small device trait the pipeline is written against.
//!
//! Nothing here touches CUDA until a CUDA device is asked for, and then only through
//! [`crate::driver`], which probes the driver first. This folder sits above `memory`; the
//! driver sits below both.

mod batch;
mod compress;
mod copy_desc;
mod cuda;
mod host_ops;
mod mark;
mod nvcomp;
mod ops;
mod select;
#[cfg(test)]
mod sim;
mod stream;

#[cfg(test)]
pub(crate) use batch::decode_on_host;
pub(crate) use batch::{BatchDesc, BatchItem};
pub(crate) use compress::max_chunk_bytes;
pub(crate) use cuda::CudaOps;
pub(crate) use host_ops::HostOps;
pub(crate) use mark::Mark;
pub use nvcomp::{nvcomp_compression, nvcomp_library};
pub(crate) use ops::{
    CopyBatch, CopyBatchItem, DeviceOps, Event, Queue, StridedCast, StridedCopy, Unshuffle, track,
};
pub(crate) use select::{ops_for, ops_for_pair};
#[cfg(test)]
pub(crate) use sim::SimulatedOps;
pub use stream::Stream;
