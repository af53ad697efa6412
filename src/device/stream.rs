//! A public handle on a CUDA stream, for prototypes and copies that run on the caller's stream.

use crate::driver::cuda_context;
use crate::errors::{Error, Result};
use crate::place::Device;
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// A CUDA stream of one device. Cheap to clone (shared handle).
///
/// ```no_run
/// use zarrbuf::{BufferPrototype, Device};
/// use zarrbuf::cuda::Stream;
/// let stream = Stream::new(Device::Cuda(0))?;
/// let proto = BufferPrototype::cuda(0).with_stream(stream.clone());
/// stream.synchronize()?;
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone)]
pub struct Stream {
    pub(crate) inner: Arc<CudaStream>,
    ordinal: usize,
}

impl Stream {
    /// Creates a new (non-blocking) stream on a CUDA device.
    ///
    /// # Errors
    /// `Device::Cpu` has no streams (`InvalidArgument`); an absent GPU is `DeviceUnavailable`.
    pub fn new(device: Device) -> Result<Self> {
        let Device::Cuda(ordinal) = device else {
            return Err(Error::InvalidArgument(
                "streams exist only on CUDA devices; use Device::Cuda(N)".into(),
            ));
        };
        let ctx = cuda_context(ordinal)?;
        let inner = ctx
            .new_stream()
            .map_err(|e| Error::cuda("cuStreamCreate", e))?;
        Ok(Stream { inner, ordinal })
    }

    /// The device this stream belongs to.
    pub fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    /// The raw `CUstream` handle, for launching your own work on this stream (valid while
    /// any clone of this `Stream` lives).
    pub fn cu_stream(&self) -> cudarc::driver::sys::CUstream {
        self.inner.cu_stream()
    }

    pub(crate) fn device_ordinal(&self) -> usize {
        self.ordinal
    }

    /// Blocks until all work queued on the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .synchronize()
            .map_err(|e| Error::cuda("cuStreamSynchronize", e))
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream(cuda:{})", self.ordinal)
    }
}
