//! What zarr means to zarrbuf: opening stores and URLs, array facts and errors, units of
//! work (chunks or inner chunks clipped to a request), codec-chain plans, the shard index,
//! array info and hierarchy listings.

mod array;
mod atomic_store;
mod blocking_store;
mod blosc_frame;
mod codec_plan;
mod codec_spec;
mod codecs;
mod create;
mod dtypes;
mod framing;
mod hierarchy;
#[cfg(feature = "icechunk")]
mod icechunk;
mod info;
mod local_reads;
mod location;
mod metadata_guard;
mod open;
mod open_options;
mod partition;
mod remote;
mod remote_store;
mod safe_file;
mod shard_encoder;
mod shard_index;
mod store;
mod store_runtime;
mod subset;
mod units;
mod write_framing;
mod write_lock;
mod zip_store;

pub(crate) use array::{chunk_error, data_type_of, fill_bytes, guard_zarrs, zarr_error};
pub(crate) use atomic_store::SyncedWrites;
pub use atomic_store::is_temporary_name;
pub(crate) use atomic_store::writer_is_gone;
pub(crate) use blosc_frame::{BloscFrame, STREAM_ALIGN};
pub(crate) use codec_plan::{ChainPlan, EncodedLayout, codec_names};
pub use codec_spec::CodecSpec;
pub use create::{ArrayLayout, create_like, resume_like};
pub(crate) use framing::{DeviceCodec, DevicePayload, Framing};
pub use hierarchy::{
    ArraySummary, Hierarchy, NodeInfo, NodeKind, list_hierarchy, list_hierarchy_opt,
};
#[cfg(feature = "icechunk")]
pub use icechunk::IcechunkWriter;
pub use info::{ArrayInfo, describe};
pub(crate) use local_reads::reading_inline;
pub(crate) use location::local_path;
pub(crate) use metadata_guard::new_array;
pub use metadata_guard::zarrs_safe_metadata;
pub use open::{open, open_async, open_opt, open_opt_async};
pub use open_options::{IcechunkVersion, OpenOptions, is_icechunk_repository};
pub(crate) use partition::chunk_aligned_partitions;
pub use remote::{AsyncArray, RemoteStore, object_store_for_url};
pub(crate) use safe_file::kind_name;
pub(crate) use shard_encoder::{ShardEncoder, ShardSource};
pub(crate) use shard_index::ShardIndex;
pub use store::{DynArray, node_path, open_store, open_store_opt};
pub(crate) use store::{label, opens_as_icechunk};
pub use subset::parse_subset;
pub(crate) use units::{
    Unit, UnitPlan, UnitSource, check_subset, inner_chain, plan_chunks, plan_units,
};
pub(crate) use write_framing::WriteCodec;
pub(crate) use write_lock::{LOCK_NAME, lock_dir};
pub(crate) use zip_store::{read_only_sentence, zip_path};
