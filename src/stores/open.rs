//! Opening the store at a location (a directory path, a zip file, a `file://` URL of either,
//! an object-store URL, `memory://`, or an icechunk repository), and the names of the arrays
//! in it (node paths, labels for messages); the arrays themselves open in `zarr/open/open_array.rs`.

use super::atomic_store::AtomicDirectoryStore;
use super::location::Location;
use super::open_options::{OpenOptions, is_repository_dir, not_a_repository, url_holds_repository};
use crate::errors::{Error, Result};
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::ReadableWritableListableStorageTraits;
use zarrs::storage::store::MemoryStore;

/// A zarrs array over any synchronous store zarrbuf can open.
pub type DynArray = Array<dyn ReadableWritableListableStorageTraits>;

/// zarrs' node path for a user's array path: `""`, `"/"` → `"/"`; `"a/b/c"` → `"/a/b/c"`;
/// an error for an empty, `.` or `..` component. The path to give zarrs' `Array` functions
/// when building an array over a store from [`open_store`](crate::store::open_store).
///
/// ```
/// use zarrbuf::store::node_path;
/// assert_eq!(node_path("a/b/c/").unwrap(), "/a/b/c");
/// assert_eq!(node_path("").unwrap(), "/");
/// assert!(node_path("a//b").is_err());
/// ```
pub fn node_path(array_path: &str) -> Result<String> {
    let trimmed = array_path.trim_matches('/');
    if trimmed.is_empty() {
        return Ok("/".into());
    }
    if trimmed
        .split('/')
        .any(|p| p.is_empty() || p == "." || p == "..")
    {
        return Err(Error::InvalidArgument(format!(
            "array path {array_path:?} has an empty, '.' or '..' component; write it like \"group/sub/array\""
        )));
    }
    Ok(format!("/{trimmed}"))
}

/// A short label for messages: `store` or `store:path`.
pub(crate) fn label(location: &str, array_path: &str) -> String {
    let p = array_path.trim_matches('/');
    if p.is_empty() {
        location.to_string()
    } else {
        format!("{location}:{p}")
    }
}

/// The store at `location` (see [`open_store`](crate::store::open_store), which registers
/// zarrbuf's codec fixes with zarrs and then calls this): an icechunk repository, memory, a
/// zip file, a directory or an object-store URL.
pub(crate) fn store_at(
    location: &Location,
    opts: &OpenOptions,
) -> Result<Arc<dyn ReadableWritableListableStorageTraits>> {
    if icechunk_route(location, opts)? {
        return icechunk_sync_store(location, opts);
    }
    if location.is_memory() {
        return Ok(Arc::new(MemoryStore::new()));
    }
    let text = location.as_str();
    let store: Arc<dyn ReadableWritableListableStorageTraits> =
        if let Some(zip) = super::zip_store::zip_path(location)? {
            Arc::new(super::zip_store::ZipStore::open(text, &zip)?)
        } else if let Some(path) = location.local_path() {
            Arc::new(AtomicDirectoryStore::new(path).map_err(|e| {
                Error::store(
                    text,
                    format!("cannot open the directory: {e}"),
                    Some(Box::new(e)),
                )
            })?)
        } else {
            super::blocking_store::url_store(text, &opts.store_pairs())?
        };
    super::located::remember(&store, location);
    Ok(store)
}

/// Whether `location` is opened as an icechunk repository: a local directory laid out as one,
/// or any location when `opts` names a version or virtual chunk access (object-store URLs
/// are otherwise probed only after a zarr open there found nothing);
/// an error when `opts` names a version but the local directory holds no repository.
pub(crate) fn icechunk_route(location: &Location, opts: &OpenOptions) -> Result<bool> {
    match location.local_dir() {
        Some(dir) if is_repository_dir(dir) => Ok(true),
        Some(_) if opts.names_icechunk() => Err(not_a_repository(location.as_str())),
        _ => Ok(opts.names_icechunk()),
    }
}

/// The read-only store over an icechunk repository, or the error of a build without them.
pub(crate) fn icechunk_sync_store(
    location: &Location,
    opts: &OpenOptions,
) -> Result<Arc<dyn ReadableWritableListableStorageTraits>> {
    #[cfg(feature = "icechunk")]
    return super::icechunk::readonly_sync_store(location.as_str(), opts);
    #[cfg(not(feature = "icechunk"))]
    {
        let _ = opts;
        Err(super::open_options::no_icechunk_support(location.as_str()))
    }
}

/// Whether the object-store URL `location` turns out to hold an icechunk repository (asked
/// only after a zarr open there found nothing); `false` for local paths and memory.
pub(crate) fn url_is_repository(location: &Location) -> bool {
    location.is_url() && super::store_runtime::wait(url_holds_repository(location)).unwrap_or(false)
}

/// Whether `location` opens as an icechunk repository, probing an object-store URL.
pub(crate) fn opens_as_icechunk(location: &Location, opts: &OpenOptions) -> Result<bool> {
    Ok(icechunk_route(location, opts)? || url_is_repository(location))
}

/// An error for a path that is neither a directory nor a zip file (URLs pass).
pub(crate) fn check_local_location(location: &Location) -> Result<()> {
    if !location.is_plain_path()
        || location.local_dir().is_some()
        || super::zip_store::zip_path(location)?.is_some()
    {
        return Ok(());
    }
    Err(Error::store(
        location.as_str(),
        "no such directory or zip file; give the path of a zarr store (a directory or a .zip \
         file) or a URL",
        None,
    ))
}
