//! Opening: the public ways to a store for zarrs arrays (`open_store.rs`), opening arrays on
//! it (`open_array.rs`), the metadata guard every array zarrbuf builds goes through
//! (`metadata_guard.rs`), and what happens when zarrs refuses an array's metadata
//! (`refused_metadata.rs`).

mod metadata_guard;
mod open_array;
mod open_store;
mod refused_metadata;

pub(crate) use metadata_guard::new_array;
pub use metadata_guard::zarrs_safe_metadata;
pub use open_array::{open, open_async, open_opt, open_opt_async};
pub(super) use open_store::store_for;
pub use open_store::{open_store, open_store_opt};
pub(super) use refused_metadata::describe_open_error;
