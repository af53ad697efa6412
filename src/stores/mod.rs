//! Where bytes live: the stores zarrbuf opens (directories whose writes a killed process
//! cannot tear, zip files, icechunk repositories, object stores through `object_store`,
//! memory), the blocking adapter and the runtime synchronous callers wait on, what a location
//! names ([`Location`], parsed once and compared canonically), and the one check of keys.
//!
//! This layer imports only the leaves; nothing here knows zarr's codecs. Its public items
//! are public at the paths `lib.rs` gives them: `zarrbuf::store`, which `lib.rs` assembles
//! from the items re-exported below and from `zarr/`'s `open_store`, `open_store_opt` and
//! `zarrs_safe_metadata` (defined there because they register zarrbuf's codec fixes with
//! zarrs first), and the root, `options` and `icechunk` for `DynArray`, `AsyncArray`,
//! `OpenOptions` and the icechunk types (`check` for `is_temporary_name`).

pub(crate) mod atomic_store;
mod blocking_store;
mod file_identity;
#[cfg(feature = "icechunk")]
pub(crate) mod icechunk;
#[cfg(feature = "icechunk")]
mod icechunk_files;
mod key;
mod local_reads;
mod located;
mod location;
mod metadata_names;
pub(crate) mod open;
pub(crate) mod open_options;
pub(crate) mod remote;
mod remote_store;
mod safe_file;
mod store_latency;
mod store_runtime;
mod write_lock;
mod zip_entry_bound;
mod zip_entry_read;
mod zip_index;
mod zip_store;

// Public as `zarrbuf::store` (lib.rs).
pub use location::Location;
pub use open::node_path;
pub use remote::object_store_for_url;
pub use remote_store::RemoteStore;
pub(crate) use remote_store::SizedBytes;
pub use store_latency::time_to_first_byte;

pub(crate) use atomic_store::{SyncedWrites, writer_is_gone};
#[cfg(feature = "icechunk")]
pub(crate) use icechunk::readonly_store_async as icechunk_readonly_store_async;
pub(crate) use key::check_key;
pub(crate) use local_reads::{LocalReads, reading_inline};
pub(crate) use located::{
    fetches_are_remote, latency_origin, location_of, node_identity, nodes_in_stores_overlap,
    remember, sizes_are_cheap,
};
pub(crate) use metadata_names::{METADATA_NAMES, is_metadata_key};
pub(crate) use open::{
    DynArray, check_local_location, icechunk_route, icechunk_sync_store, label, opens_as_icechunk,
    store_at, url_is_repository,
};
#[cfg(not(feature = "icechunk"))]
pub(crate) use open_options::no_icechunk_support;
pub(crate) use open_options::{OpenOptions, url_holds_repository};
pub(crate) use remote::AsyncArray;
pub(crate) use safe_file::kind_name;
#[cfg(test)]
pub(crate) use store_latency::AnswerKind;
pub(crate) use store_latency::latency_of_origin;
#[cfg(test)]
pub(crate) use store_latency::observe as observe_latency;
pub(crate) use store_runtime::WaitOnRuntime;
pub(crate) use write_lock::{LOCK_NAME, lock_dir};
pub(crate) use zip_store::{read_only_sentence, zip_path};
