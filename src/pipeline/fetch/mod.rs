//! One unit's encoded bytes: the fetch seam every read fetches through, made by one of its
//! constructors (`fetch_stage.rs`: sync store, async store, stream-shared, cancellable), the
//! fetch of one unit (`fetch_unit.rs`), the fetch-ahead stage in
//! front of it for object stores (`fetch_ahead.rs`), the inner chunks of shards in few
//! requests (`shard_reads.rs`) and their indexes fetched once (`shard_index_fetch.rs`),
//! fetches shared by concurrent reads (`fetch_flight.rs`) and by the reads of one stream
//! (`chunk_share.rs`), and only the byte ranges a small read needs of an uncompressed unit
//! (`unit_ranges.rs` plans them, `fetch_ranges.rs` fetches them).

pub(super) mod chunk_share;
pub(super) mod fetch_ahead;
pub(super) mod fetch_flight;
pub(super) mod fetch_ranges;
pub(super) mod fetch_stage;
pub(super) mod fetch_unit;
pub(super) mod shard_index_fetch;
pub(super) mod shard_reads;
pub(super) mod unit_ranges;
