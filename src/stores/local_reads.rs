//! Reads of a `file://` store's objects for [`super::RemoteStore`]: one blocking call per
//! read that opens the file and reads the bytes asked for into a buffer of exactly that
//! size.
//!
//! object_store's `LocalFileSystem` takes two trips to tokio's blocking pool per `get` (open
//! and stat, then the read) and zero-fills every buffer before reading into it; for 1 MiB
//! chunks of a 256 MiB array that was a tenth of an async read's CPU time (plus the page
//! faults of the zero-fill). Paths are still resolved by `LocalFileSystem` (its escaping
//! and its checks), files are opened as the directory store opens them (regular files
//! inside the store only: `safe_file.rs`), and writes, listing and metadata keep going
//! through object_store.

use super::safe_file::{SafeRoot, read_range};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use std::cell::Cell;
use std::sync::Arc;
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{MaybeBytes, StorageError, StoreKey};

thread_local! {
    /// Set while this thread may block on file reads (see [`reading_inline`]).
    static INLINE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the local reads it makes on this thread done inline, without a trip to
/// tokio's blocking pool: for threads that block anyway (a pipeline worker waiting in
/// `block_on` for its chunk). On a machine busy with other work every trip waits for the
/// scheduler twice (to start the blocking task, and to wake the waiting thread again).
pub(crate) fn reading_inline<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            INLINE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(INLINE.with(|c| c.replace(true)));
    f()
}

/// The files under one local root.
pub(crate) struct LocalReads {
    fs: LocalFileSystem,
    root: Arc<SafeRoot>,
}

impl LocalReads {
    /// The local root of `url` when it is a `file://` URL (`None` for any other scheme).
    pub(crate) fn for_url(url: &str) -> Option<Result<Self, String>> {
        let parsed = url::Url::parse(url).ok()?;
        if parsed.scheme() != "file" {
            return None;
        }
        let root = match parsed.to_file_path() {
            Ok(root) => root,
            Err(()) => return Some(Err("not a local path".into())),
        };
        let safe = Arc::new(SafeRoot::new(&root));
        Some(
            LocalFileSystem::new_with_prefix(root)
                .map(|fs| LocalReads { fs, root: safe })
                .map_err(|e| e.to_string()),
        )
    }

    /// The bytes of `key` (all of them, or `range`); `None` when the object does not exist.
    pub(crate) async fn get(
        &self,
        key: &StoreKey,
        range: Option<ByteRange>,
    ) -> Result<MaybeBytes, StorageError> {
        let path = self
            .fs
            .path_to_filesystem(&ObjectPath::from(key.as_str()))
            .map_err(|e| StorageError::Other(e.to_string()))?;
        if INLINE.with(Cell::get) {
            return read(&self.root, &path, key, range);
        }
        let owned = key.clone();
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || read(&root, &path, &owned, range))
            .await
            .map_err(|e| StorageError::Other(format!("{key}: the read stopped: {e}")))?
    }
}

impl LocalReads {
    /// The size of `key`'s file; `None` when it does not exist. A key that is not a regular
    /// file inside the store is an error, as for [`LocalReads::get`].
    pub(crate) async fn size(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        let path = self
            .fs
            .path_to_filesystem(&ObjectPath::from(key.as_str()))
            .map_err(|e| StorageError::Other(e.to_string()))?;
        let size = move |root: &SafeRoot| match root.open_path(&path) {
            Ok(found) => Ok(found.map(|(_, size)| size)),
            Err(e) => Err(StorageError::IOError(Arc::new(e))),
        };
        if INLINE.with(Cell::get) {
            return size(&self.root);
        }
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || size(&root))
            .await
            .map_err(|e| StorageError::Other(format!("{key}: the size query stopped: {e}")))?
    }
}

/// Reads `range` (or all) of the file at `path` into a buffer of exactly that length; a
/// key that is not a regular file inside the store is an error ([`SafeRoot::open_path`]).
fn read(
    root: &SafeRoot,
    path: &std::path::Path,
    key: &StoreKey,
    range: Option<ByteRange>,
) -> Result<MaybeBytes, StorageError> {
    match root.open_path(path) {
        Ok(Some((file, size))) => read_range(&file, size, key.as_str(), range).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(StorageError::IOError(Arc::new(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_files_ranges_missing_and_short_objects() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-local-reads-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("c")).unwrap();
        std::fs::write(dir.join("c/0"), b"0123456789").unwrap();
        let url = url::Url::from_file_path(&dir).unwrap().to_string();
        let local = LocalReads::for_url(&url).unwrap().unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let key = StoreKey::new("c/0").unwrap();
        let get = |range| rt.block_on(local.get(&key, range));
        assert_eq!(get(None).unwrap().unwrap().as_ref(), b"0123456789");
        let mid = get(Some(ByteRange::FromStart(2, Some(3))))
            .unwrap()
            .unwrap();
        assert_eq!(mid.as_ref(), b"234");
        let tail = get(Some(ByteRange::Suffix(4))).unwrap().unwrap();
        assert_eq!(tail.as_ref(), b"6789");
        let rest = get(Some(ByteRange::FromStart(7, None))).unwrap().unwrap();
        assert_eq!(rest.as_ref(), b"789");
        assert!(get(Some(ByteRange::FromStart(8, Some(5)))).is_err());
        let missing = StoreKey::new("c/1").unwrap();
        assert!(rt.block_on(local.get(&missing, None)).unwrap().is_none());
        // A directory at a key is an error, never an empty value.
        let prefix = StoreKey::new("c").unwrap();
        assert!(rt.block_on(local.get(&prefix, None)).is_err());
        assert!(LocalReads::for_url("s3://bucket/x").is_none());
        // Inline (on a thread that may block): the same bytes, and the flag is restored.
        let inline = reading_inline(|| rt.block_on(local.get(&key, None)));
        assert_eq!(inline.unwrap().unwrap().as_ref(), b"0123456789");
        assert!(!INLINE.with(Cell::get));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
