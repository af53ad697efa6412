//! What zarr means to zarrbuf, one concern per folder: opening stores and arrays (`open/`),
//! what an array is to zarrbuf — its data type, errors, memoised facts and summary
//! (`array/`) —, the work of a request — units, codec-chain plans, partitions, subsets
//! (`plan/`) —, sharded arrays (`shard/`), decoding untrusted chunks on the CPU (`decode/`),
//! the chunk framing of the device decoder and compressor (`framing/`), variable-length
//! arrays (`vlen/`), hierarchy listings (`hierarchy/`), new arrays shaped like others
//! (`create/`), and zarrbuf's codec and data type plugins for zarrs (`plugins/`).

mod array;
mod create;
mod decode;
mod framing;
mod hierarchy;
mod open;
mod plan;
pub(crate) mod plugins;
mod shard;
mod vlen;

pub use array::{ArrayInfo, describe};
pub(crate) use array::{
    chunk_error, data_type_of, fill_bytes, guard_zarrs, inner_chain, metadata_fingerprint,
    subchunk_shape_of, unit_codecs, zarr_error,
};
pub use create::{ArrayLayout, CodecSpec, resume_like};
pub(crate) use create::{create_like, refuse_overlap};
pub(crate) use decode::{
    check_exact_size, check_exact_size_async, check_stored_size, check_stored_size_async,
    decode_needed_into, needed_range, not_exact_size, stored_size_problem,
};
pub(crate) use framing::{
    BloscFrame, DeviceCodec, DevicePayload, Framing, STREAM_ALIGN, WriteCodec,
};
pub use hierarchy::{
    ArraySummary, Hierarchy, NodeInfo, NodeKind, list_hierarchy, list_hierarchy_opt,
};
pub(crate) use open::new_array;
pub use open::{
    open, open_async, open_opt, open_opt_async, open_store, open_store_opt, zarrs_safe_metadata,
};
pub use plan::parse_subset;
pub(crate) use plan::{
    ChainPlan, EncodedLayout, Unit, UnitPlan, UnitSource, check_subset, chunk_aligned_partitions,
    codec_names, plan_chunks, plan_units, transpose_order,
};
pub(crate) use plugins::codecs::{has_unbounded_codec, precheck_chunk};
pub(crate) use shard::forget_written as forget_written_shard_indexes;
pub(crate) use shard::{ShardEncoder, ShardIndex, ShardSource};
pub(crate) use vlen::{
    ElementSink, UnitCodec, UnitFault, VlenEncoder, VlenGather, VlenIndex, VlenPlan,
    encodes_vlen_itself, invalid_utf8, plan_vlen, require_vlen, vlen_chain, vlen_kind,
    zarr_name as varlen_zarr_name,
};
pub use vlen::{VarLenInfo, describe_varlen, varlen_kind};
