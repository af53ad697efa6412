//! The chunk pipeline: staging slots and their pool, the staged read and write engines, the
//! fetch stage, the read and write drivers that the public extension traits call, and the
//! reads behind a read stream (`read_stream.rs`).
//!
//! Read: fetch → CPU decompress into a staging slot → copy to the device → one fused device
//! kernel (byte swap + transpose + scatter; fill for missing chunks). Write is the mirror.
//! Everything is written against `crate::device::DeviceOps`, so the host implementation runs
//! every line of it in CI.

mod batch_plan;
mod batch_scatter;
mod cached_read;
mod cancel;
mod chunk_share;
mod chunk_sink;
mod chunk_writer;
mod decode_choice;
mod device_batches;
mod device_cache;
mod device_cached_read;
mod device_parts;
mod fetch;
mod fetch_ahead;
mod fetch_flight;
mod fetch_ranges;
mod host_scatter;
mod hybrid;
#[cfg(test)]
mod hybrid_tests;
mod miss_keeper;
mod output_limit;
mod read_driver;
mod read_route;
mod read_stream;
mod shard_index_fetch;
mod shard_reads;
mod slot_pool;
mod slot_ring;
mod slots;
mod small_read;
mod small_read_async;
mod staged_read;
mod staged_write;
mod store_queue;
mod tuning;
mod unit_ranges;
mod varlen_read;
mod varlen_stream;
mod write_batches;
mod write_driver;

pub(crate) use cached_read::{CachedRead, miss_options, miss_output, read_through_cache};
pub(crate) use cancel::{Cancel, FinishOnDrop, StopOnDrop};
pub(crate) use chunk_share::{ChunkShare, Claim};
pub(crate) use chunk_sink::ChunkSink;
pub(crate) use chunk_writer::ChunkWriter;
pub(crate) use device_cache::caches_on_device;
pub(crate) use fetch::{AsyncUnits, fetch_unit, run_ahead_sync};
pub(crate) use fetch_ahead::{AheadLimits, AsyncFetch, FetchAhead, FetchStage};
pub(crate) use output_limit::check_output_size;
pub(crate) use read_driver::run_staged;
pub(crate) use read_stream::StreamReads;
pub(crate) use shard_reads::{InnerFetch, ShardReads};
pub(crate) use slot_pool::Slot;
pub(crate) use slots::{allocate_slots, finish, largest_unit_bytes};
pub(crate) use small_read::read_small;
pub(crate) use small_read_async::read_small_async;
pub(crate) use staged_read::{Produced, StagedRead};
pub(crate) use staged_write::{DeviceChunk, DeviceCompress, Gathered, StagedWrite};
pub(crate) use store_queue::StoreQueue;
pub use tuning::{Tuning, tuning};
pub(crate) use varlen_read::{VarLenRead, read_varlen};
pub(crate) use varlen_stream::VarLenStreamReads;
pub(crate) use write_driver::{store_threads, write_staged};
