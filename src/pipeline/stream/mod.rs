//! The reads behind read streams, fixed-size and variable-length alike: one ordered
//! prefetch engine (`ordered_reads.rs`), the two ways its reads reach a store
//! (`stream_store.rs`: sync, async), and what one read makes (`fixed_source.rs`: an
//! `NDBuffer` through the read core; `varlen_source.rs`: a `VarLenBuffer`).

pub(super) mod fixed_source;
pub(super) mod ordered_reads;
pub(super) mod stream_store;
pub(super) mod varlen_source;
