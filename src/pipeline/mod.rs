//! The chunk pipeline: the staged read and write engines, the fetch stage, the read and
//! write drivers that the public extension traits call, and the reads behind read streams.
//! One folder per concern:
//!
//! - `read/`: the read core (one request planned once, `read_request.rs`; its route chosen
//!   once, `choose_route.rs`; run for sync and async stores, `read_core.rs`), the routes —
//!   small reads, zarrs' decode-into (`direct_read.rs`), the staged read (its driver,
//!   `read_driver.rs`; what its routes share, `staged_read.rs`; its own route chosen once,
//!   `read_route.rs`; the host route, `host_scatter.rs`; the general route, `slot_ring.rs`;
//!   the scatters, `scatter.rs`) — variable-length reads and the output limit;
//! - `fetch/`: one unit's encoded bytes — the fetch stage, fetch-ahead for object stores,
//!   shards' merged ranges and shared indexes, single-flight and stream-shared fetches, the
//!   byte ranges of an uncompressed unit;
//! - `gpu_decode/`: decompression on the device — its batches, their plan, the hybrid
//!   queue the device and the CPU threads share, what `Decode::Auto` decides, the knobs;
//! - `cache/`: reads through a decoded-chunk cache, on the host and in the device's memory;
//! - `stream/`: the reads behind read streams (one ordered prefetch engine for fixed-size
//!   and variable-length streams, sync and async stores);
//! - `write/`: the staged write, its driver, compression batches, chunk writer and store
//!   threads;
//! - here: what reads and writes share — staging slots and their pool, cancellation.
//!
//! Read: fetch → CPU decompress into a staging slot → copy to the device → one fused device
//! kernel (byte swap + transpose + scatter; fill for missing chunks). Write is the mirror.
//! Everything is written against `crate::device::DeviceOps`, so the host implementation runs
//! every line of it in CI.

mod cache;
mod cancel;
mod fetch;
mod gpu_decode;
mod read;
mod slot_pool;
mod slots;
mod stream;
mod write;

pub(crate) use cancel::{Cancel, StopOnDrop};
pub(crate) use fetch::chunk_share::{ChunkShare, Claim};
pub(crate) use fetch::fetch_ahead::{AheadLimits, FetchAhead};
pub(crate) use fetch::fetch_stage::{AsyncFetch, AsyncUnits, FetchStage};
pub(crate) use fetch::fetch_unit::encoded_chunk;
pub(crate) use fetch::shard_reads::{InnerFetch, ShardReads};
pub use gpu_decode::resident_rate::{DecodeLimits, decode_limits};
pub use gpu_decode::tuning::{Tuning, tuning};
pub(crate) use read::output_limit::check_output_size;
pub(crate) use read::read_core::{read_array, read_array_async, read_shared};
pub(crate) use read::read_request::ReadRequest;
pub(crate) use read::staged_read::{Produced, StagedRead};
pub(crate) use read::varlen_read::{VarLenRead, read_varlen};
pub(crate) use slot_pool::Slot;
pub(crate) use slots::{allocate_slots, finish, largest_unit_bytes};
pub(crate) use stream::fixed_source::FixedSource;
pub(crate) use stream::ordered_reads::{StreamReads, Subsets};
pub(crate) use stream::stream_store::{AsyncStreamStore, SyncStreamStore};
pub(crate) use stream::varlen_source::VarLenSource;
pub(crate) use write::chunk_sink::ChunkSink;
pub(crate) use write::chunk_writer::ChunkWriter;
pub(crate) use write::staged_write::{DeviceChunk, DeviceCompress, Gathered, StagedWrite};
pub(crate) use write::store_queue::StoreQueue;
pub(crate) use write::write_driver::{store_threads, write_staged};
