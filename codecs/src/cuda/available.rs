//! Probe for a usable CUDA installation.

use std::sync::OnceLock;

/// `true` when the CUDA driver library and NVRTC can both be loaded and at least one CUDA
/// device exists. Never panics; the answer is computed once and cached.
///
/// ```
/// if zarrbuf_codecs::cuda::cuda_available() {
///     println!("CUDA kernels can run here");
/// }
/// ```
pub fn cuda_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(probe)
}

fn probe() -> bool {
    if !libraries_present() {
        return false;
    }
    matches!(cudarc::driver::CudaContext::device_count(), Ok(n) if n > 0)
}

/// Whether `libcuda` and `libnvrtc` can be loaded (without calling into them).
pub(crate) fn libraries_present() -> bool {
    driver_present() && nvrtc_present()
}

/// Whether `libcuda` can be loaded.
pub(crate) fn driver_present() -> bool {
    // SAFETY: is_culib_present only attempts to dlopen the library and drops the handle.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether `libnvrtc` can be loaded.
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: is_culib_present only attempts to dlopen the library and drops the handle.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}
