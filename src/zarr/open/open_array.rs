//! Opening zarr arrays, synchronously from any store [`open_store`] opens, or asynchronously
//! through object_store ([`object_store_for_url`]); a group where an array was asked for is
//! refused naming the arrays under it.

use super::metadata_guard::{async_open_array, new_array, open_array};
use super::open_store::store_for;
use super::refused_metadata::{describe_open_error, open_fallback};
use crate::errors::{Error, Result};
use crate::stores::{
    AsyncArray, DynArray, Location, OpenOptions, RemoteStore, check_local_location, icechunk_route,
    icechunk_sync_store, label, node_path, url_holds_repository, url_is_repository,
};
use crate::zarr::hierarchy::{group_error_async, group_error_sync};
use std::sync::Arc;
use zarrs::storage::{AsyncReadableStorageTraits, ReadableWritableListableStorageTraits};

/// Opens the zarr array at `array_path` inside the store at `location` (v2 or v3 metadata;
/// a directory, a zip file, a `file://` or object-store URL; see
/// [`open_store`](crate::store::open_store)).
///
/// A group at `array_path` is refused with [`Error::IsGroup`], which names the arrays under
/// it ([`list_hierarchy`](crate::list_hierarchy) describes them).
///
/// ```
/// let Err(err) = zarrbuf::open("fixtures/data/v3_nested_group.zarr", "a") else { panic!() };
/// assert!(matches!(&err, zarrbuf::Error::IsGroup { arrays, .. } if arrays == &["a/b/c"]));
/// ```
///
/// ```no_run
/// use zarrbuf::{ArrayReadExt, BufferPrototype};
/// let array = zarrbuf::open("fixtures/data/v3_large_3d.zarr", "")?;
/// let a = array.read_all(&BufferPrototype::cpu())?;
/// println!("{:?} {}", a.shape(), a.dtype());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn open(location: &str, array_path: &str) -> Result<DynArray> {
    open_opt(location, array_path, &OpenOptions::default())
}

/// [`open`] with [`OpenOptions`]: object_store's options for an object-store URL, which
/// version of an icechunk repository to read, and which of its virtual chunk containers
/// reads may fetch from.
///
/// An icechunk repository is a local directory laid out as one (a `repo` file or `refs/`
/// folder beside `snapshots/`), or an object-store prefix holding one (recognised when a
/// plain zarr open finds nothing there, or when `opts` names a version). It opens read-only
/// at `opts.version`, default the tip of branch `main`. Needs the `icechunk` feature.
///
/// ```
/// let Err(err) = zarrbuf::open_opt("fixtures/data/v3_int8.zarr", "",
///     &zarrbuf::options::OpenOptions::default().with_branch("dev")) else { panic!() };
/// assert!(err.to_string().contains("not an icechunk repository"));
/// ```
pub fn open_opt(location: &str, array_path: &str, opts: &OpenOptions) -> Result<DynArray> {
    let path = node_path(array_path)?;
    let parsed = Location::parse(location)?;
    check_local_location(&parsed)?;
    let store = store_for(&parsed, opts)?;
    match open_in(store, location, array_path, &path) {
        Err(_) if !icechunk_route(&parsed, opts)? && url_is_repository(&parsed) => {
            let store = icechunk_sync_store(&parsed, opts)?;
            open_in(store, location, array_path, &path)
        }
        result => result,
    }
}

/// Opens the array at node `path` of `store` (`location` and `array_path` as the user gave
/// them, for messages).
fn open_in(
    store: Arc<dyn ReadableWritableListableStorageTraits>,
    location: &str,
    array_path: &str,
    path: &str,
) -> Result<DynArray> {
    crate::zarr::plugins::codecs::register_zarrs_overrides();
    let refused = match open_array(store.clone(), path) {
        Ok(array) => return Ok(array),
        Err(e) => e,
    };
    if let Some(group) = group_error_sync(store.as_ref(), location, array_path) {
        return Err(group);
    }
    let zarray = zarrs::node::NodePath::new(path)
        .ok()
        .and_then(|node| store.get(&zarrs::node::meta_key_v2_array(&node)).ok())
        .flatten();
    let name = label(location, array_path);
    let meta = open_fallback(&name, refused, zarray.as_deref())?;
    new_array(store, path, meta)
        .map_err(|e| Error::zarr(name, describe_open_error(&e), Some(Box::new(e))))
}

/// Opens the zarr array at `array_path` inside the store at `url` (any URL
/// [`object_store_for_url`](crate::store::object_store_for_url) takes, or a directory path).
///
/// ```no_run
/// # async fn demo() -> zarrbuf::Result<()> {
/// use zarrbuf::{ArrayReadAsyncExt, BufferPrototype};
/// let array = zarrbuf::open_async("s3://bucket/data.zarr", "temperature").await?;
/// let gpu = array.read_all_async(&BufferPrototype::cuda(0)).await?;
/// # Ok(()) }
/// ```
pub async fn open_async(url: &str, array_path: &str) -> Result<AsyncArray> {
    open_opt_async(url, array_path, &OpenOptions::default()).await
}

/// [`open_async`] with [`OpenOptions`]: object_store's options (credentials, region,
/// endpoint, timeouts) on top of the environment's, and the version of an icechunk
/// repository to read (see [`open_opt`](crate::open_opt)); icechunk reads through the same
/// async pipeline as object stores.
///
/// ```no_run
/// # async fn demo() -> zarrbuf::Result<()> {
/// use zarrbuf::{ArrayReadAsyncExt, BufferPrototype, options::OpenOptions};
/// let opts = OpenOptions::default()
///     .with_store_options([("aws_endpoint", "http://127.0.0.1:9000"), ("aws_region", "us-east-1")]);
/// let array = zarrbuf::open_opt_async("s3://bucket/data.zarr", "temperature", &opts).await?;
/// let opts = OpenOptions::default().with_tag("v1");
/// let array = zarrbuf::open_opt_async("s3://bucket/repo", "temperature", &opts).await?;
/// let gpu = array.read_all_async(&BufferPrototype::cuda(0)).await?;
/// # Ok(()) }
/// ```
pub async fn open_opt_async(url: &str, array_path: &str, opts: &OpenOptions) -> Result<AsyncArray> {
    let parsed = Location::parse(url)?;
    if icechunk_route(&parsed, opts)? {
        return open_icechunk_async(url, array_path, opts).await;
    }
    check_async_location(&parsed)?;
    let location = url_of_location(&parsed)?;
    let path = node_path(array_path)?;
    let remote = RemoteStore::remembered_at(&location, &opts.store_pairs(), &parsed)?;
    match open_in_async(remote, url, array_path, &path).await {
        Err(_) if !parsed.is_plain_path() && url_holds_repository(&parsed).await => {
            open_icechunk_async(url, array_path, opts).await
        }
        result => result,
    }
}

/// Opens the array at `array_path` of the icechunk repository at `url`.
async fn open_icechunk_async(
    url: &str,
    array_path: &str,
    opts: &OpenOptions,
) -> Result<AsyncArray> {
    #[cfg(feature = "icechunk")]
    {
        let path = node_path(array_path)?;
        let store =
            RemoteStore::icechunk(crate::stores::icechunk_readonly_store_async(url, opts).await?);
        open_in_async(Arc::new(store), url, array_path, &path).await
    }
    #[cfg(not(feature = "icechunk"))]
    {
        let _ = (array_path, opts);
        Err(crate::stores::no_icechunk_support(url))
    }
}

/// Refuses zip files, which open with the synchronous reader only.
fn check_async_location(location: &Location) -> Result<()> {
    let url = location.as_str();
    if crate::stores::zip_path(location)?.is_some() {
        return Err(Error::Unsupported(format!(
            "{url} is a zip file: zip stores open with the synchronous reader \
             (zarrbuf::open, or the CLI without --async)"
        )));
    }
    if !location.is_plain_path()
        && url
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .is_some_and(|name| name.to_ascii_lowercase().ends_with(".zip"))
    {
        return Err(Error::Unsupported(format!(
            "{url} names a zip file in object storage: zarrbuf reads zip stores from local \
             disk only; download the file and give its path"
        )));
    }
    Ok(())
}

/// The URL of a location: a URL as it is, a directory path as a `file://` URL.
fn url_of_location(location: &Location) -> Result<String> {
    let url = location.as_str();
    if !location.is_plain_path() {
        return Ok(url.to_string());
    }
    let abs = std::fs::canonicalize(url).map_err(|e| {
        Error::store(
            url,
            format!("no such directory ({e}); give the path of a zarr store or a URL"),
            Some(Box::new(e)),
        )
    })?;
    // Url::from_file_path percent-encodes what a URL would misread (`#`, `?`, `%`, spaces).
    Ok(url::Url::from_file_path(&abs)
        .map_err(|()| {
            Error::store(
                url,
                format!("{} cannot be written as a file:// URL", abs.display()),
                None,
            )
        })?
        .to_string())
}

/// Opens the array at node `path` of `store` (`url` and `array_path` as the user gave them,
/// for messages).
async fn open_in_async(
    store: Arc<RemoteStore>,
    url: &str,
    array_path: &str,
    path: &str,
) -> Result<AsyncArray> {
    crate::zarr::plugins::codecs::register_zarrs_overrides();
    let refused = match async_open_array(store.clone(), path).await {
        Ok(array) => return Ok(array),
        Err(e) => e,
    };
    if let Some(group) = group_error_async(&store, url, array_path).await {
        return Err(group);
    }
    let zarray = match zarrs::node::NodePath::new(path) {
        Ok(node) => store
            .get(&zarrs::node::meta_key_v2_array(&node))
            .await
            .ok()
            .flatten(),
        Err(_) => None,
    };
    let name = label(url, array_path);
    let meta = open_fallback(&name, refused, zarray.as_deref())?;
    new_array(store, path, meta)
        .map_err(|e| Error::zarr(name, describe_open_error(&e), Some(Box::new(e))))
}
