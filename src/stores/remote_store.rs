//! [`RemoteStore`]: the async zarrs store zarrbuf reads object storage through.
//!
//! It is zarrs_object_store's `AsyncObjectStore` except for ranged reads: that adapter asks
//! for an object's size (a `HEAD` request) before every ranged `GET`, which doubles the
//! requests of a sharded read and costs a round trip per inner chunk. Object stores take
//! suffix and open-ended ranges themselves, so every ranged read here is one `GET`.

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use std::any::TypeId;
use std::sync::Arc;
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    AsyncListableStorageTraits, AsyncMaybeBytesIterator, AsyncReadableStorageTraits,
    AsyncWritableStorageTraits, Bytes, MaybeBytes, OffsetBytesIterator, StorageError, StoreKey,
    StoreKeys, StoreKeysPrefixes, StorePrefix,
};
use zarrs_object_store::AsyncObjectStore;

use super::local_reads::LocalReads;

/// The bytes of a ranged read and the size of the whole object they were read from
/// ([`RemoteStore::get_range_sized`]).
pub(crate) struct SizedBytes {
    pub bytes: Bytes,
    pub object_size: u64,
}

/// The async store zarrbuf builds for a URL: an `object_store` store seen as a zarrs store,
/// with one request per ranged read; or (feature `icechunk`) a session of an icechunk
/// repository.
pub struct RemoteStore {
    backend: Backend,
    /// For `file://` stores: reads straight from the files (see [`LocalReads`]).
    local: Option<LocalReads>,
    /// The origin its answers are timed for (see `store_latency`); `None` when the store
    /// was built without its URL.
    origin: Option<String>,
}

/// What a [`RemoteStore`] reads from.
enum Backend {
    /// An object store.
    Objects {
        adapter: AsyncObjectStore<Arc<dyn ObjectStore>>,
        store: Arc<dyn ObjectStore>,
    },
    /// A session of an icechunk repository.
    #[cfg(feature = "icechunk")]
    Icechunk(super::icechunk::IcechunkStore),
}

/// Forwards a store call to the backend.
macro_rules! forward {
    ($self:ident, $call:ident($($arg:expr),*)) => {
        match &$self.backend {
            Backend::Objects { adapter, .. } => adapter.$call($($arg),*).await,
            #[cfg(feature = "icechunk")]
            Backend::Icechunk(store) => store.$call($($arg),*).await,
        }
    };
}

impl RemoteStore {
    /// Wraps an object store. The public constructors (`new`, `from_icechunk_session`) are in
    /// `zarr/open/open_store.rs`: they also register zarrbuf's codec fixes with zarrs.
    pub(crate) fn over(store: Arc<dyn ObjectStore>) -> Self {
        RemoteStore {
            backend: Backend::Objects {
                adapter: AsyncObjectStore::new(store.clone()),
                store,
            },
            local: None,
            origin: None,
        }
    }

    /// Reads (and writes) through an icechunk session.
    #[cfg(feature = "icechunk")]
    pub(crate) fn icechunk(store: super::icechunk::IcechunkStore) -> Self {
        RemoteStore {
            backend: Backend::Icechunk(store),
            local: None,
            origin: None,
        }
    }

    /// Reads objects through `local` (the same files as the object store's) instead.
    pub(crate) fn with_local_reads(mut self, local: LocalReads) -> Self {
        self.local = Some(local);
        self
    }

    /// Times the answers of the object store at `url` (see `store_latency`), so that reads
    /// size their requests in flight to its latency.
    pub(crate) fn with_origin_of(mut self, url: &str) -> Self {
        self.origin = super::store_latency::origin_of(url);
        self
    }

    /// The origin whose latency this store's requests tell: an object store read over the
    /// network (not local files, not icechunk) built with its URL.
    fn timed_origin(&self) -> Option<&str> {
        match &self.backend {
            Backend::Objects { .. } if self.local.is_none() => self.origin.as_deref(),
            _ => None,
        }
    }

    /// `storage` as a `RemoteStore`, if it is one; `None` for any other store type,
    /// including a `RemoteStore` behind a trait object.
    pub(crate) fn of<S: ?Sized + 'static>(storage: &S) -> Option<&RemoteStore> {
        if TypeId::of::<S>() != TypeId::of::<RemoteStore>() {
            return None;
        }
        // SAFETY: `S` has `RemoteStore`'s type id, so it is `RemoteStore` (a sized type, so
        // the pointer carries no metadata) and this reborrows the same reference.
        Some(unsafe { &*std::ptr::from_ref(storage).cast::<RemoteStore>() })
    }

    /// Whether `storage` is a `RemoteStore` that reads local files (see [`LocalReads`]);
    /// `false` for any other store type, including a `RemoteStore` behind a trait object.
    pub(crate) fn reads_local_files<S: ?Sized + 'static>(storage: &S) -> bool {
        RemoteStore::of(storage).is_some_and(|remote| remote.local.is_some())
    }

    /// Whether [`RemoteStore::get_range_sized`] answers: an object store read through
    /// object_store (not local files, not icechunk), whose ranged `GET`s say the size of the
    /// whole object (`Content-Range`'s total, a file's metadata).
    pub(crate) fn sizes_ranged_reads(&self) -> bool {
        match &self.backend {
            Backend::Objects { .. } => self.local.is_none(),
            #[cfg(feature = "icechunk")]
            Backend::Icechunk(_) => false,
        }
    }

    /// One ranged `GET` of `range` of `key`, with the size of the whole object (`None`: the
    /// object does not exist). An object shorter than `range` gives fewer bytes (or, when
    /// it ends before `range` starts, an error): the caller compares the size with the one
    /// it expects before it uses a byte. Only where [`RemoteStore::sizes_ranged_reads`]; elsewhere an error.
    pub(crate) async fn get_range_sized(
        &self,
        key: &StoreKey,
        range: std::ops::Range<u64>,
    ) -> Result<Option<SizedBytes>, StorageError> {
        let store = match (&self.local, &self.backend) {
            (None, Backend::Objects { store, .. }) => store,
            _ => {
                return Err(StorageError::Other(
                    "internal error: a sized ranged read of a store that cannot size it \
                     (please report)"
                        .into(),
                ));
            }
        };
        if range.is_empty() {
            return Err(StorageError::Other(format!(
                "{key}: the empty byte range {range:?} cannot be read with its object's size"
            )));
        }
        get_object(
            store,
            self.timed_origin(),
            key,
            Some(GetRange::Bounded(range.clone())),
        )
        .await
    }

    /// The object store underneath (`None` for an icechunk repository, which icechunk
    /// reads itself).
    pub fn object_store(&self) -> Option<&Arc<dyn ObjectStore>> {
        match &self.backend {
            Backend::Objects { store, .. } => Some(store),
            #[cfg(feature = "icechunk")]
            Backend::Icechunk(_) => None,
        }
    }

    /// One ranged `GET` (`None`: the object does not exist).
    async fn get_range(
        &self,
        key: &StoreKey,
        range: ByteRange,
    ) -> Result<MaybeBytes, StorageError> {
        if let Some(local) = &self.local {
            return local.get(key, Some(range)).await;
        }
        let (adapter, store) = match &self.backend {
            Backend::Objects { adapter, store } => (adapter, store),
            #[cfg(feature = "icechunk")]
            Backend::Icechunk(store) => return store.get_partial(key, range).await,
        };
        let range = match range {
            ByteRange::FromStart(_, Some(0)) | ByteRange::Suffix(0) => {
                // An empty range is not a valid HTTP range: check the object exists instead.
                return adapter
                    .size_key(key)
                    .await
                    .map(|size| size.map(|_| Bytes::new()));
            }
            ByteRange::FromStart(offset, Some(len)) => {
                let end = offset.checked_add(len).ok_or_else(|| {
                    StorageError::Other(format!("byte range {offset}+{len} overflows"))
                })?;
                GetRange::Bounded(offset..end)
            }
            ByteRange::FromStart(offset, None) => GetRange::Offset(offset),
            ByteRange::Suffix(len) => GetRange::Suffix(len),
        };
        let expected = match &range {
            GetRange::Bounded(r) => Some(r.end - r.start),
            _ => None,
        };
        let Some(SizedBytes { bytes, .. }) =
            get_object(store, self.timed_origin(), key, Some(range)).await?
        else {
            return Ok(None);
        };
        if let Some(n) = expected
            && bytes.len() as u64 != n
        {
            return Err(StorageError::Other(format!(
                "{key}: {n} bytes were requested but {} came back (the object is shorter than the range)",
                bytes.len()
            )));
        }
        Ok(Some(bytes))
    }
}

/// One `GET` of `range` of `key` from `store` (all of it without a range), with the size of
/// the whole object (`None`: the object does not exist). The time from sending it to its
/// answer's headers is recorded as `origin`'s latency (see `store_latency`).
async fn get_object(
    store: &Arc<dyn ObjectStore>,
    origin: Option<&str>,
    key: &StoreKey,
    range: Option<GetRange>,
) -> Result<Option<SizedBytes>, StorageError> {
    let options = GetOptions {
        range,
        ..Default::default()
    };
    let sent = std::time::Instant::now();
    let answer = store
        .get_opts(&ObjectPath::from(key.as_str()), options)
        .await;
    if let (Some(origin), Ok(_) | Err(object_store::Error::NotFound { .. })) = (origin, &answer) {
        let kind = super::store_latency::AnswerKind::of_key(key.as_str());
        super::store_latency::observe(origin, kind, sent.elapsed());
    }
    let got = match answer {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(StorageError::Other(e.to_string())),
    };
    let object_size = got.meta.size;
    let bytes = got
        .bytes()
        .await
        .map_err(|e| StorageError::Other(e.to_string()))?;
    Ok(Some(SizedBytes { bytes, object_size }))
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.backend {
            Backend::Objects { store, .. } => write!(f, "RemoteStore({store})"),
            #[cfg(feature = "icechunk")]
            Backend::Icechunk(store) => write!(f, "RemoteStore({store:?})"),
        }
    }
}

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for RemoteStore {
    async fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        if let Some(local) = &self.local {
            return local.get(key, None).await;
        }
        match &self.backend {
            Backend::Objects { store, .. } => Ok(get_object(store, self.timed_origin(), key, None)
                .await?
                .map(|got| got.bytes)),
            #[cfg(feature = "icechunk")]
            Backend::Icechunk(store) => store.get(key).await,
        }
    }

    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        #[cfg(feature = "icechunk")]
        if let Backend::Icechunk(store) = &self.backend {
            return store.get_partial_many(key, byte_ranges).await;
        }
        let mut parts = Vec::new();
        for range in byte_ranges {
            match self.get_range(key, range).await? {
                Some(bytes) => parts.push(Ok(bytes)),
                None => return Ok(None),
            }
        }
        Ok(Some(futures::stream::iter(parts).boxed()))
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        // Local files are sized through the same safe open as their reads: object_store's
        // `head` opens blocking, and a FIFO at a key would hang it.
        if let Some(local) = &self.local {
            return local.size(key).await;
        }
        forward!(self, size_key(key))
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

#[async_trait::async_trait]
impl AsyncWritableStorageTraits for RemoteStore {
    async fn set(&self, key: &StoreKey, value: Bytes) -> Result<(), StorageError> {
        forward!(self, set(key, value))
    }

    async fn set_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        offset_values: OffsetBytesIterator<'a>,
    ) -> Result<(), StorageError> {
        forward!(self, set_partial_many(key, offset_values))
    }

    async fn erase(&self, key: &StoreKey) -> Result<(), StorageError> {
        forward!(self, erase(key))
    }

    async fn erase_prefix(&self, prefix: &StorePrefix) -> Result<(), StorageError> {
        forward!(self, erase_prefix(prefix))
    }

    fn supports_set_partial(&self) -> bool {
        match &self.backend {
            Backend::Objects { adapter, .. } => adapter.supports_set_partial(),
            #[cfg(feature = "icechunk")]
            Backend::Icechunk(store) => store.supports_set_partial(),
        }
    }
}

#[async_trait::async_trait]
impl AsyncListableStorageTraits for RemoteStore {
    async fn list(&self) -> Result<StoreKeys, StorageError> {
        forward!(self, list())
    }

    async fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        forward!(self, list_prefix(prefix))
    }

    async fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        forward!(self, list_dir(prefix))
    }

    async fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        forward!(self, size_prefix(prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::InnerFetch;
    use zarrs::array::Array;

    fn sharded_array<S: ?Sized + 'static>(store: Arc<S>) -> Array<S> {
        let meta = r#"{"zarr_format": 3, "node_type": "array", "shape": [8], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [4],
                "codecs": [{"name": "bytes"}], "index_codecs": [{"name": "bytes"}]}}]}"#;
        let meta = serde_json::from_str(meta).expect("valid metadata");
        Array::new_with_metadata(store, "/", meta).expect("an array")
    }

    #[test]
    fn only_remote_stores_over_local_files_fetch_per_chunk() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-remote-kind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = url::Url::from_directory_path(&dir)
            .expect("a file URL")
            .to_string();
        let local =
            RemoteStore::new(crate::stores::object_store_for_url(&url, &[]).expect("file store"))
                .with_local_reads(
                    LocalReads::for_url(&url)
                        .expect("a file URL")
                        .expect("local reads"),
                );
        let memory =
            RemoteStore::new(crate::stores::object_store_for_url("memory://", &[]).unwrap());
        assert!(RemoteStore::reads_local_files(&local));
        assert!(!RemoteStore::reads_local_files(&memory));
        assert!(!RemoteStore::reads_local_files(&7u32));

        let local = Arc::new(local);
        assert_eq!(
            InnerFetch::for_async_store(&sharded_array(local.clone())),
            InnerFetch::PerChunk
        );
        assert_eq!(
            InnerFetch::for_async_store(&sharded_array(Arc::new(memory))),
            InnerFetch::Merged
        );
        // Behind a trait object the store's kind is unknown: merged, as for object stores.
        let hidden: Arc<dyn AsyncReadableStorageTraits> = local;
        assert_eq!(
            InnerFetch::for_async_store(&sharded_array(hidden)),
            InnerFetch::Merged
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
