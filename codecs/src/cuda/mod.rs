//! CUDA implementations of every operation.
//!
//! The kernels (`kernels/*.cu` in this crate) are compiled at run time with NVRTC, once per
//! CUDA context, by [`CudaKernels::for_context`], and cached for the life of the process.
//! Operations take raw device pointers (`CUdeviceptr` as `u64`) with the byte length of the
//! region they point into, check every layout on the host, and enqueue asynchronously on the
//! caller's [`CudaStream`](cudarc::driver::CudaStream). Results are byte-for-byte those of the
//! [`host`](crate::host) twins ([`self_test`] checks exactly that).
//!
//! Nothing here touches CUDA until called, and the crate builds without CUDA installed. Probe
//! with [`cuda_available`] first: cudarc panics when it cannot load `libcuda`, so every entry
//! point here checks the libraries before calling into them.
//!
//! ```no_run
//! use zarrbuf_codecs::cuda;
//! if cuda::cuda_available() {
//!     let ctx = cudarc::driver::CudaContext::new(0)?;
//!     let kernels = cuda::CudaKernels::for_context(&ctx)?; // NVRTC compile, once per context
//!     println!("{}", cuda::self_test(&ctx)?);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod adler;
mod available;
mod copy_batch;
mod kernels;
mod ops;
mod params;
mod self_test;
mod self_test_batch;
mod unshuffle;

pub use available::cuda_available;
pub use copy_batch::copy_batch_desc_bytes;
pub use kernels::{CudaKernels, compile_kernels};
pub use self_test::self_test;
