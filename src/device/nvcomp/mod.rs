//! nvCOMP, NVIDIA's GPU (de)compression library, loaded at run time.
//!
//! zarrbuf never bundles nvCOMP and never needs it to build: it opens `libnvcomp.so.6` the
//! first time a read asks for GPU decompression, declares the few batched C functions it
//! calls (from the headers of the `nvidia-libnvcomp-cu13` wheel, nvCOMP 6), and reads on
//! without it — decoding on the CPU — when it is absent. Writes may compress with it too.
//! Before resolving any function it asks the library its version and takes only nvCOMP 6:
//! other major versions export the same names with other parameters, so a call through
//! these declarations would be undefined behaviour. Where it looks, in order:
//! `ZARRBUF_NVCOMP` (a path to the library), the dynamic loader's own search
//! (`LD_LIBRARY_PATH`, the system), then the `nvidia/libnvcomp/lib64` folder of the
//! pip wheel under the active Python environment (`VIRTUAL_ENV`, `CONDA_PREFIX`), the
//! user's site-packages and the system's.

mod bindings;
mod calls;
mod loader;
#[cfg(test)]
mod tests;

pub(crate) use bindings::CompressOpts;
pub(crate) use loader::{CompressFormat, Nvcomp, nvcomp};
pub use loader::{nvcomp_compression, nvcomp_library};
