//! What zarr means to zarrbuf: opening stores and URLs, array facts and errors, units of
//! work (chunks or inner chunks clipped to a request), codec-chain plans, the shard index,
//! array info and hierarchy listings.

mod array;
mod array_facts;
mod blosc_frame;
mod blosc_prefix;
mod bounded_decode;
mod codec_plan;
mod codec_spec;
pub(crate) mod codecs;
mod create;
pub(crate) mod dtypes;
mod framing;
mod hierarchy;
mod info;
mod metadata_guard;
mod open;
mod partition;
mod prefix_decode;
mod shard_encoder;
mod shard_index;
mod shard_index_cache;
mod store_open;
mod stored_size;
mod subset;
mod units;
mod vlen;
mod vlen_encode;
mod vlen_type;
mod write_framing;
mod zstd_context;

pub(crate) use array::{chunk_error, fill_bytes, guard_zarrs, zarr_error};
pub(crate) use array_facts::{
    data_type_of, inner_chain, metadata_fingerprint, subchunk_shape_of, unit_codecs,
};
pub(crate) use blosc_frame::{BloscFrame, STREAM_ALIGN};
pub(crate) use codec_plan::{ChainPlan, EncodedLayout, codec_names, transpose_order};
pub use codec_spec::CodecSpec;
pub(crate) use codecs::{has_unbounded_codec, precheck_chunk};
pub(crate) use create::create_like;
pub(crate) use create::refuse_overlap;
pub use create::{ArrayLayout, resume_like};
pub(crate) use framing::{DeviceCodec, DevicePayload, Framing};
pub use hierarchy::{
    ArraySummary, Hierarchy, NodeInfo, NodeKind, list_hierarchy, list_hierarchy_opt,
};
pub use info::{ArrayInfo, describe};
pub(crate) use metadata_guard::new_array;
pub use metadata_guard::zarrs_safe_metadata;
pub use open::{open, open_async, open_opt, open_opt_async};
pub(crate) use partition::chunk_aligned_partitions;
pub(crate) use prefix_decode::{decode_prefix_into, needed_prefix};
pub(crate) use shard_encoder::{ShardEncoder, ShardSource};
pub(crate) use shard_index::ShardIndex;
pub(crate) use shard_index_cache::forget_written as forget_written_shard_indexes;
pub use store_open::{open_store, open_store_opt};
pub(crate) use stored_size::{
    check_exact_size, check_exact_size_async, check_stored_size, check_stored_size_async,
    not_exact_size, stored_size_problem,
};
pub use subset::parse_subset;
pub(crate) use units::{Unit, UnitPlan, UnitSource, check_subset, plan_chunks, plan_units};
pub(crate) use vlen::{
    UnitCodec, UnitFault, VlenIndex, VlenPlan, plan_vlen, vlen_chain, vlen_kind,
};
pub(crate) use vlen_encode::{ElementSink, VlenEncoder, VlenGather, encodes_vlen_itself};
pub use vlen_type::{VarLenInfo, describe_varlen};
pub(crate) use vlen_type::{invalid_utf8, require_vlen, zarr_name as varlen_zarr_name};
pub(crate) use write_framing::WriteCodec;
