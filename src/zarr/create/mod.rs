//! New arrays: an array shaped like another one, with new chunks, shards and codecs — the
//! destination of a copy (`create_like.rs`) — and the text form of the codec chain it is
//! given (`codec_spec.rs`).

mod codec_spec;
mod create_like;

pub use codec_spec::CodecSpec;
pub use create_like::{ArrayLayout, resume_like};
pub(crate) use create_like::{create_like, refuse_overlap};
