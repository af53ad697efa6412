//! Which device runs an operation on given memory: the host for host and pinned memory,
//! CUDA device N for its memory (and for copies that touch it).

use super::{CudaOps, DeviceOps, HostOps};
use crate::errors::Result;
use crate::place::Memory;
use std::sync::Arc;

/// The device whose kernels operate on memory `m`: the host for host and pinned memory.
pub(crate) fn ops_for(m: Memory) -> Result<Arc<dyn DeviceOps>> {
    match m {
        Memory::Host | Memory::Pinned(_) => Ok(Arc::new(HostOps)),
        Memory::Cuda(n) => Ok(Arc::new(CudaOps::new(n)?)),
    }
}

/// The device that can copy between `a` and `b`: CUDA if either lives on a device.
pub(crate) fn ops_for_pair(a: Memory, b: Memory) -> Result<Arc<dyn DeviceOps>> {
    match (a, b) {
        (Memory::Cuda(n), _) | (_, Memory::Cuda(n)) => Ok(Arc::new(CudaOps::new(n)?)),
        _ => Ok(Arc::new(HostOps)),
    }
}
