//! Who owns raw memory: allocations, their borrow flags and completion fences, the block cache.
//!
//! About a third of the crate's `unsafe` is here (allocating, freeing and page-locking memory,
//! foreign owners, CUDA IPC mapping, `Send`/`Sync` for the owners, the shared host output).
//! The rest is elsewhere, each use with its `SAFETY` comment: `buffer/dlpack/` (DLPack's C
//! ABI) and `buffer/flat_buffer.rs` (wrapping raw pointers), `device/` (CUDA calls, nvCOMP's C ABI,
//! raw driver calls in `driver.rs`), `pipeline/` and `api/write_async.rs` (storing encoded
//! chunks, and the shared host output), `zarr/` (c-blosc, a store downcast) and `dtype.rs`;
//! the kernels' own are in `zarrbuf-codecs`. ARCHITECTURE.md counts them per folder.
//!
//! A [`Storage`] is one allocation (or one wrapped foreign region); a [`Region`] is a byte
//! range of one, shared behind an `Arc`. Public handles (`crate::Buffer`) add identity and
//! the public API on top of a `Region`.

mod borrow;
mod cache;
mod completion;
mod cuda;
mod decode_target;
mod foreign;
mod host_alloc;
mod huge_pages;
mod init;
pub(crate) mod ipc;
#[cfg(test)]
mod miri_tests;
mod pinned;
mod region;
mod shared_output;
mod storage;

pub(crate) use borrow::{ReadGuard, WriteGuard};
pub(crate) use cache::register_pool;
pub use cache::release_cached_memory;
pub(crate) use completion::Fence;
pub(crate) use cuda::CudaAlloc;
pub(crate) use decode_target::with_decode_target;
pub(crate) use foreign::{ForeignCuda, ForeignHost};
pub(crate) use host_alloc::HostAlloc;
pub use huge_pages::{
    HUGE_PAGES_ENV, fresh_memory_keeps_small_pages, host_returns_free_pages, huge_pages_advised,
    huge_pages_setting,
};
pub(crate) use init::Init;
pub(crate) use pinned::PinnedAlloc;
pub(crate) use region::Region;
pub(crate) use shared_output::SharedHostOutput;
pub(crate) use storage::{Storage, StorageKind, next_id};
