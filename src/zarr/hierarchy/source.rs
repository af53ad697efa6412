//! The store operations a hierarchy listing needs — get, list, size — over sync and async
//! stores alike, with every key checked to lie inside the store.

use crate::errors::{Error, Result};
use crate::stores::check_key;
use zarrs::storage::{
    AsyncListableStorageTraits, AsyncReadableStorageTraits, Bytes, ListableStorageTraits,
    ReadableStorageTraits, StoreKey, StorePrefix,
};

/// The store operations a listing needs, over sync and async stores alike.
#[async_trait::async_trait]
pub(super) trait Source: Sync {
    async fn get(&self, key: &str) -> Result<Option<Bytes>>;
    /// Every key under `prefix` (`""` or ending in `/`).
    async fn list(&self, prefix: &str) -> Result<Vec<String>>;
    /// Bytes stored under `prefix`.
    async fn size(&self, prefix: &str) -> Result<u64>;
}

pub(super) fn storage_error(
    what: &str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> Error {
    Error::store(what, e.to_string(), Some(Box::new(e)))
}

fn key(k: &str) -> Result<StoreKey> {
    check_key(k, "the hierarchy")?;
    StoreKey::new(k).map_err(|e| storage_error(k, e))
}

fn prefix(p: &str) -> Result<StorePrefix> {
    check_key(p, "the hierarchy")?;
    StorePrefix::new(p).map_err(|e| storage_error(p, e))
}

/// The keys of a listing as strings, each checked to lie inside the store.
fn listed(keys: &[StoreKey]) -> Result<Vec<String>> {
    keys.iter()
        .map(|k| {
            check_key(k.as_str(), "the store's listing")?;
            Ok(k.as_str().to_string())
        })
        .collect()
}

pub(super) struct SyncSource<'a, S: ?Sized>(pub(super) &'a S);

#[async_trait::async_trait]
impl<S> Source for SyncSource<'_, S>
where
    S: ?Sized + ReadableStorageTraits + ListableStorageTraits,
{
    async fn get(&self, k: &str) -> Result<Option<Bytes>> {
        self.0.get(&key(k)?).map_err(|e| storage_error(k, e))
    }

    async fn list(&self, p: &str) -> Result<Vec<String>> {
        let keys = self
            .0
            .list_prefix(&prefix(p)?)
            .map_err(|e| storage_error(p, e))?;
        listed(&keys)
    }

    async fn size(&self, p: &str) -> Result<u64> {
        self.0
            .size_prefix(&prefix(p)?)
            .map_err(|e| storage_error(p, e))
    }
}

pub(super) struct AsyncSource<'a, S: ?Sized>(pub(super) &'a S);

#[async_trait::async_trait]
impl<S> Source for AsyncSource<'_, S>
where
    S: ?Sized + AsyncReadableStorageTraits + AsyncListableStorageTraits,
{
    async fn get(&self, k: &str) -> Result<Option<Bytes>> {
        self.0.get(&key(k)?).await.map_err(|e| storage_error(k, e))
    }

    async fn list(&self, p: &str) -> Result<Vec<String>> {
        let keys = self
            .0
            .list_prefix(&prefix(p)?)
            .await
            .map_err(|e| storage_error(p, e))?;
        listed(&keys)
    }

    async fn size(&self, p: &str) -> Result<u64> {
        self.0
            .size_prefix(&prefix(p)?)
            .await
            .map_err(|e| storage_error(p, e))
    }
}
