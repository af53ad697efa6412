//! The reads behind read streams: fixed-size ones, which share encoded chunks between the
//! reads in flight (`read_stream.rs`), and variable-length ones (`varlen_stream.rs`).

pub(super) mod read_stream;
pub(super) mod varlen_stream;
