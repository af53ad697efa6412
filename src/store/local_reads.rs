//! Reads of a `file://` store's objects for [`super::RemoteStore`]: one blocking call per
//! read that opens the file and reads the bytes asked for into a buffer of exactly that
//! size.
//!
//! object_store's `LocalFileSystem` takes two trips to tokio's blocking pool per `get` (open
//! and stat, then the read) and zero-fills every buffer before reading into it; for 1 MiB
//! chunks of a 256 MiB array that was a tenth of an async read's CPU time (plus the page
//! faults of the zero-fill). Paths are still resolved by `LocalFileSystem` (its escaping
//! and its checks), and writes, listing and metadata keep going through object_store.

use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use std::cell::Cell;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{Bytes, MaybeBytes, StorageError, StoreKey};

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
        Some(
            LocalFileSystem::new_with_prefix(root)
                .map(|fs| LocalReads { fs })
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
            return read(&path, key, range);
        }
        let owned = key.clone();
        tokio::task::spawn_blocking(move || read(&path, &owned, range))
            .await
            .map_err(|e| StorageError::Other(format!("{key}: the read stopped: {e}")))?
    }
}

fn io(e: std::io::Error) -> StorageError {
    StorageError::IOError(Arc::new(e))
}

/// Reads `range` (or all) of the file at `path` into a buffer of exactly that length.
fn read(
    path: &PathBuf,
    key: &StoreKey,
    range: Option<ByteRange>,
) -> Result<MaybeBytes, StorageError> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        // A directory is a prefix, not an object.
        return Ok(None);
    }
    let size = meta.len();
    let wanted = match range {
        None => 0..size,
        Some(r) => {
            let (start, len) = match r {
                ByteRange::FromStart(offset, Some(len)) => (offset, len),
                ByteRange::FromStart(offset, None) => (offset, size.saturating_sub(offset)),
                ByteRange::Suffix(len) => (size.saturating_sub(len), len.min(size)),
            };
            let end = start.checked_add(len).filter(|&end| end <= size).ok_or_else(|| {
                StorageError::Other(format!(
                    "{key}: bytes {start}..+{len} were requested but the object holds {size} (the object is shorter than the range)"
                ))
            })?;
            start..end
        }
    };
    let len = usize::try_from(wanted.end - wanted.start)
        .map_err(|_| StorageError::Other(format!("{key}: {size} bytes do not fit in memory")))?;
    file.seek(SeekFrom::Start(wanted.start)).map_err(io)?;
    // read_to_end fills the spare capacity without zeroing it first.
    let mut buf = Vec::with_capacity(len);
    file.take(len as u64).read_to_end(&mut buf).map_err(io)?;
    if buf.len() != len {
        return Err(StorageError::Other(format!(
            "{key}: {len} bytes were expected but {} could be read (the file changed while it was read)",
            buf.len()
        )));
    }
    Ok(Some(Bytes::from(buf)))
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
        let prefix = StoreKey::new("c").unwrap();
        assert!(rt.block_on(local.get(&prefix, None)).unwrap().is_none());
        assert!(LocalReads::for_url("s3://bucket/x").is_none());
        // Inline (on a thread that may block): the same bytes, and the flag is restored.
        let inline = reading_inline(|| rt.block_on(local.get(&key, None)));
        assert_eq!(inline.unwrap().unwrap().as_ref(), b"0123456789");
        assert!(!INLINE.with(Cell::get));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
