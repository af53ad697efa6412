//! Opening the store at a location (a directory path, a zip file, a `file://` URL of either,
//! an object-store URL, or `memory://`), and the names and error wording of the arrays in it
//! (the arrays themselves open in `open.rs`).

use super::atomic_store::AtomicDirectoryStore;
use super::open_options::{
    OpenOptions, is_icechunk_repository, is_repository_dir, local_dir, not_a_repository,
};
use crate::error::{Error, Result};
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::ReadableWritableListableStorageTraits;
use zarrs::storage::store::MemoryStore;

/// A zarrs array over any synchronous store zarrbuf can open.
pub type DynArray = Array<dyn ReadableWritableListableStorageTraits>;

/// zarrs' node path for a user's array path: `""`, `"/"` → `"/"`; `"a/b/c"` → `"/a/b/c"`;
/// an error for an empty, `.` or `..` component. The path to give zarrs' `Array` functions
/// when building an array over a store from [`open_store`].
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

/// Opens the store at `location`: a directory path, a zip file, or a `file://` URL of
/// either; an object-store URL (`s3://`, `gs://`, `az://`, `http(s)://`; options such as
/// credentials and endpoints from the environment, as object_store reads them); or
/// `memory://`, a new empty store in memory.
///
/// Object-store URLs are served by blocking on a process-wide tokio runtime, one request at
/// a time per calling thread: from async code, [`open_async`](crate::open_async) keeps
/// requests concurrent without a thread each. Each key is written with one PUT, which is
/// atomic.
///
/// Writes to a directory store are atomic per key: each goes to a temporary file beside its
/// key and is renamed into place, so a killed writer never leaves a torn chunk (see
/// [`Durability`](crate::options::Durability) for power loss). Listing skips the temporary files.
///
/// A zip file (a path ending in `.zip`, or any regular file that starts with the zip
/// signature) opens read-only: zarr-python's `ZipStore`, or a directory store zipped with
/// `zip -r` (when all entries lie in one folder, the store starts in it); stored and
/// deflated (also bzip2, zstd) entries read. The store keeps the same type as a directory's,
/// so everything that reads takes it; every write to it fails with "zip stores are
/// read-only in zarrbuf; copy the array into a directory instead: zarrbuf copy STORE.zip
/// out.zarr".
///
/// Also puts zarrbuf's codec fixes into zarrs' run-time registry, so arrays built over this
/// store with zarrs directly (`Array::new_with_metadata`) read as [`open`](crate::open)'s do;
/// pass their metadata through [`zarrs_safe_metadata`](crate::store::zarrs_safe_metadata)
/// first, as `open` does.
///
/// ```
/// let dir = std::env::temp_dir();
/// let store = zarrbuf::store::open_store(dir.to_str().unwrap())?;
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn open_store(location: &str) -> Result<Arc<dyn ReadableWritableListableStorageTraits>> {
    open_store_opt(location, &OpenOptions::default())
}

/// [`open_store`] with [`OpenOptions`]. An object-store URL takes `opts.store_options` on
/// top of the environment's. An icechunk repository (a local directory laid out
/// as one; any location when `opts` names a version) opens read-only at `opts.version`
/// (default: the tip of branch `main`); its writes are refused with a sentence saying how
/// to write to a branch (`IcechunkWriter`, with the `icechunk`
/// feature). Without the `icechunk` feature, a repository is an error saying so.
///
/// ```
/// let Err(err) = zarrbuf::store::open_store_opt("fixtures/data/v3_int8.zarr",
///     &zarrbuf::options::OpenOptions::default().with_tag("v1")) else { panic!() };
/// assert!(err.to_string().contains("not an icechunk repository"));
/// ```
pub fn open_store_opt(
    location: &str,
    opts: &OpenOptions,
) -> Result<Arc<dyn ReadableWritableListableStorageTraits>> {
    super::codecs::register_zarrs_overrides();
    if icechunk_route(location, opts)? {
        return icechunk_sync_store(location, opts);
    }
    if location == "memory://" {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if let Some(zip) = super::zip_store::zip_path(location)? {
        return Ok(Arc::new(super::zip_store::ZipStore::open(location, &zip)?));
    }
    let Some(path) = super::location::local_path(location) else {
        return super::blocking_store::url_store(location, &opts.store_pairs());
    };
    let store = AtomicDirectoryStore::new(&path).map_err(|e| {
        Error::store(
            location,
            format!("cannot open the directory: {e}"),
            Some(Box::new(e)),
        )
    })?;
    Ok(Arc::new(store))
}

/// Whether `location` is opened as an icechunk repository: a local directory laid out as one,
/// or any location when `opts` names a version or virtual chunk access (object-store URLs
/// are otherwise probed only after a zarr open there found nothing);
/// an error when `opts` names a version but the local directory holds no repository.
pub(crate) fn icechunk_route(location: &str, opts: &OpenOptions) -> Result<bool> {
    match local_dir(location) {
        Some(dir) if is_repository_dir(&dir) => Ok(true),
        Some(_) if opts.names_icechunk() => Err(not_a_repository(location)),
        _ => Ok(opts.names_icechunk()),
    }
}

/// The read-only store over an icechunk repository, or the error of a build without them.
pub(crate) fn icechunk_sync_store(
    location: &str,
    opts: &OpenOptions,
) -> Result<Arc<dyn ReadableWritableListableStorageTraits>> {
    #[cfg(feature = "icechunk")]
    return super::icechunk::readonly_sync_store(location, opts);
    #[cfg(not(feature = "icechunk"))]
    {
        let _ = opts;
        Err(super::open_options::no_icechunk_support(location))
    }
}

/// Whether the object-store URL `location` turns out to hold an icechunk repository (asked
/// only after a zarr open there found nothing).
pub(crate) fn url_is_repository(location: &str) -> bool {
    local_dir(location).is_none() && is_icechunk_repository(location)
}

/// Whether `location` opens as an icechunk repository, probing an object-store URL.
pub(crate) fn opens_as_icechunk(location: &str, opts: &OpenOptions) -> Result<bool> {
    Ok(icechunk_route(location, opts)? || url_is_repository(location))
}

/// An error for a path that is neither a directory nor a zip file (URLs pass).
pub(crate) fn check_local_location(location: &str) -> Result<()> {
    if location.contains("://")
        || std::path::Path::new(location).is_dir()
        || super::zip_store::zip_path(location)?.is_some()
    {
        return Ok(());
    }
    Err(Error::store(
        location,
        "no such directory or zip file; give the path of a zarr store (a directory or a .zip \
         file) or a URL",
        None,
    ))
}

/// After zarrs refused an array's metadata: the equivalent v2 metadata zarrbuf opens instead
/// (structured dtypes, null fill values; see `dtypes::v2_metadata_fallback`), or the error,
/// given the `.zarray` bytes if there are any.
pub(crate) fn open_fallback(
    name: &str,
    refused: zarrs::array::ArrayCreateError,
    zarray: Option<&[u8]>,
) -> Result<zarrs::array::ArrayMetadata> {
    match zarray.and_then(super::dtypes::v2_metadata_fallback) {
        Some(Ok(meta)) => Ok(meta),
        Some(Err(why)) => Err(Error::zarr(
            name,
            format!("cannot open the array: {why}"),
            Some(Box::new(refused)),
        )),
        None => Err(Error::zarr(
            name,
            describe_open_error(&refused),
            Some(Box::new(refused)),
        )),
    }
}

/// A sentence for the reasons an array does not open.
pub(crate) fn describe_open_error(e: &zarrs::array::ArrayCreateError) -> String {
    use zarrs::array::ArrayCreateError as E;
    match e {
        E::MissingMetadata => {
            "no array metadata (neither zarr.json nor .zarray) at this path; check the store and --path".into()
        }
        other => {
            let text = other.to_string();
            let names = |ids: &[&'static str]| -> Option<&'static str> {
                ids.iter().copied().find(|id| {
                    text.contains(&format!("codec {id} "))
                        || text.contains(&format!("codec numcodecs.{id} "))
                        || text.contains(&format!("id: \"{id}\""))
                })
            };
            if let Some(id) = names(&["json2", "msgpack2", "pickle", "vlen-array"]) {
                format!(
                    "cannot open the array: {text}. Its elements are Python objects (numcodecs' \
                     {id} filter), which have no fixed-size form for zarrbuf buffers; read it with \
                     zarr-python"
                )
            } else if !cfg!(feature = "zfp") && names(&["zfpy", "zfp"]).is_some() {
                format!(
                    "cannot open the array: {text}. zarrbuf reads zfp/zfpy (numcodecs ZFPY) when \
                     built with the `zfp` feature (cargo build --features zfp; building the zfp \
                     C library needs cmake and libclang)"
                )
            } else {
                format!("cannot open the array: {text}")
            }
        }
    }
}
