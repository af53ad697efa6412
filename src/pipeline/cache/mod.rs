//! Reads through a decoded-chunk cache: on the host, every route (`cached_read.rs`); in the
//! device's memory, the staged read's cache (`device_cache.rs`), its cached route
//! (`device_cached_read.rs`) and how the general route keeps the misses
//! (`miss_keeper.rs`).

pub(super) mod cached_read;
pub(super) mod device_cache;
pub(super) mod device_cached_read;
pub(super) mod miss_keeper;
