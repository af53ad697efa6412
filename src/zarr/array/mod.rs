//! What zarrbuf needs to know of a zarrs `Array` everywhere: its data type in zarrbuf's terms
//! and its fill value's bytes (`data_type.rs`), errors that name the array and its chunks
//! (`errors.rs`), the facts every read needs, worked out once per array (`facts.rs`), and the
//! summary `zarrbuf info` prints (`info.rs`).

mod data_type;
mod errors;
mod facts;
mod info;

pub(crate) use data_type::fill_bytes;
pub(crate) use errors::{chunk_error, guard_zarrs, zarr_error};
pub(crate) use facts::{
    data_type_of, inner_chain, metadata_fingerprint, subchunk_shape_of, unit_codecs,
};
pub(super) use info::codec_list;
pub use info::{ArrayInfo, describe};
