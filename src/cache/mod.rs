//! Decoded-chunk caches: [`ChunkCache`], the keys it files chunks under ([`ArrayId`],
//! [`ChunkKey`]), its eviction policies, and the registry of live caches through which
//! writes invalidate what they wrote. See docs/caching.md.

mod chunk_cache;
mod key;
mod policy;
mod registry;

pub(crate) use chunk_cache::Epoch;
pub use chunk_cache::{CacheStats, ChunkCache};
pub use key::{ArrayId, ChunkKey};
pub use policy::PolicyKind;
pub(crate) use registry::{invalidate_node, invalidate_written, write_epoch};
