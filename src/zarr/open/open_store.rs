//! The public ways to a store for zarrs arrays — [`open_store`], [`open_store_opt`] and
//! `RemoteStore`'s public constructors — each of which first puts zarrbuf's codec fixes into
//! zarrs' run-time registry (the codecs are this layer's; the stores below know nothing of
//! them), so that arrays a caller builds over the store with zarrs directly read as
//! [`open`](crate::open)'s do.

use crate::errors::{Error, Result};
use crate::stores::{Location, OpenOptions, RemoteStore};
use object_store::ObjectStore;
use std::sync::Arc;
use zarrs::storage::ReadableWritableListableStorageTraits;

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
    store_for(&Location::parse(location)?, opts)
}

/// [`open_store_opt`] for a location already parsed.
pub(crate) fn store_for(
    location: &Location,
    opts: &OpenOptions,
) -> Result<Arc<dyn ReadableWritableListableStorageTraits>> {
    crate::zarr::plugins::codecs::register_zarrs_overrides();
    crate::stores::store_at(location, opts)
}

impl RemoteStore {
    /// Wraps an object store (see [`crate::store::object_store_for_url`]). Also puts zarrbuf's
    /// codec fixes into zarrs' run-time registry, as [`crate::store::open_store`] does.
    ///
    /// ```
    /// let store = zarrbuf::store::RemoteStore::new(zarrbuf::store::object_store_for_url("memory://", &[])?);
    /// assert!(store.object_store().unwrap().to_string().contains("InMemory"));
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        crate::zarr::plugins::codecs::register_zarrs_overrides();
        RemoteStore::over(store)
    }

    /// The store at an object-store URL (or a `file://` one, read straight from its files),
    /// with object_store's options from the environment and `options` (see
    /// [`crate::store::object_store_for_url`]), remembered as living there: its reads fetch
    /// ahead of their decoders (`ReadOptions::with_io_concurrency`), and copies and caches
    /// know where it is. What `open_async` opens arrays in; for callers that build arrays
    /// from metadata they already hold.
    ///
    /// ```
    /// let store = zarrbuf::store::RemoteStore::at_url("memory://", &[])?;
    /// assert!(store.object_store().unwrap().to_string().contains("InMemory"));
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn at_url(url: &str, options: &[(&str, &str)]) -> Result<Arc<Self>> {
        RemoteStore::remembered_at(url, options, &Location::parse(url)?)
    }

    /// [`RemoteStore::at_url`], remembered as opened at `location` (the place as the user
    /// named it, which `url` spells as a URL).
    pub(crate) fn remembered_at(
        url: &str,
        options: &[(&str, &str)],
        location: &Location,
    ) -> Result<Arc<Self>> {
        let mut store = RemoteStore::new(crate::stores::object_store_for_url(url, options)?)
            .with_origin_of(url);
        if let Some(local) = crate::stores::LocalReads::for_url(url) {
            store = store.with_local_reads(local.map_err(|e| Error::store(url, e, None))?);
        }
        let store = Arc::new(store);
        crate::stores::remember(&store, location);
        Ok(store)
    }

    /// Reads through a read-only icechunk session that icechunk serialized
    /// (`Session::as_bytes`, what the icechunk Python package's `Session` pickles to): the
    /// snapshot, storage and virtual chunk access that session sees. Writable sessions, and
    /// sessions over storage this build cannot reach (icechunk's own S3 client rather than
    /// object_store's), are errors saying so.
    #[cfg(feature = "icechunk")]
    pub fn from_icechunk_session(bytes: &[u8]) -> Result<Self> {
        crate::zarr::plugins::codecs::register_zarrs_overrides();
        Ok(RemoteStore::icechunk(
            crate::stores::icechunk::session_store(bytes)?,
        ))
    }
}
