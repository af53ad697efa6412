//! Object-store URLs (`s3://`, `gs://`, `az://`, `http(s)://`) behind the synchronous store
//! traits, so that `zarrbuf::open`, `copy_array` and the CLI's `copy` and `check` take them
//! like directories: each store call runs on a process-wide tokio runtime and the calling
//! thread waits for it (`store_runtime`), from any thread. The async API (`open_async`)
//! remains the better choice from async code: it does not hold a thread per request.

use super::remote::object_store_for_url;
use super::remote_store::RemoteStore;
use super::store_runtime::WaitOnRuntime;
use crate::errors::Result;
use std::sync::Arc;
use zarrs::storage::ReadableWritableListableStorageTraits;
use zarrs::storage::storage_adapter::async_to_sync::AsyncToSyncStorageAdapter;

/// The store at an object-store URL, with object_store's options taken from the environment
/// and from `options` (see `object_store_for_url`). Writes are one PUT per key: atomic,
/// never torn.
pub(crate) fn url_store(
    url: &str,
    options: &[(&str, &str)],
) -> Result<Arc<dyn ReadableWritableListableStorageTraits>> {
    let remote = RemoteStore::over(object_store_for_url(url, options)?).with_origin_of(url);
    Ok(Arc::new(AsyncToSyncStorageAdapter::new(
        Arc::new(remote),
        WaitOnRuntime::new()?,
    )))
}
