//! Sharded arrays: the shard index (`index.rs`), the process's cache of decoded indexes
//! (`index_cache.rs`), and the encoder of whole shards for the staged write (`encoder.rs`).

mod encoder;
mod index;
mod index_cache;

pub(crate) use encoder::{ShardEncoder, ShardSource};
pub(crate) use index::ShardIndex;
pub(crate) use index_cache::forget_written;
