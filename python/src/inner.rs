//! The zarrs array behind a Python `Array`, opened synchronously or asynchronously, and the
//! buffer prototype of a device name; the layer under `array.rs`, `array_varlen.rs` and
//! `lib.rs`, so that none of them imports another for it.

use std::sync::Arc;
use zarrbuf::{AsyncArray, BufferPrototype, Device, DynArray};

/// An array opened synchronously (local stores) or asynchronously (object stores, driven by
/// [`crate::runtime::runtime`]); the two have the same methods, `x` and `x_async`.
pub(crate) enum Inner {
    Sync(Arc<DynArray>),
    Async(Arc<AsyncArray>),
}

/// Where a read puts its result: `"cpu"`, `"cuda"` or `"cuda:N"`.
pub(crate) fn prototype(device: &str) -> zarrbuf::Result<BufferPrototype> {
    Ok(match device.parse::<Device>()? {
        Device::Cpu => BufferPrototype::cpu(),
        Device::Cuda(n) => BufferPrototype::cuda(n),
    })
}
