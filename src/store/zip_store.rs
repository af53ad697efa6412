//! Zip files as read-only stores: zarr-python's `ZipStore`, and directory stores zipped
//! with `zip -r` (whose entries sit in one folder, which the store then starts in).
//!
//! zarrs_zip reads the archive (the central directory once, then each entry by byte range;
//! stored entries are read in place, deflated ones are inflated whole, within the bound of
//! `zip_entry_bound.rs`) from zarrs' file system store over the zip file. [`ZipStore`] puts
//! it behind the same trait object as directory stores, so every read path takes zip files
//! unchanged, and answers every write with [`read_only_sentence`].

use super::location::Location;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::{
    Bytes, ListableStorageTraits, MaybeBytesIterator, OffsetBytesIterator, ReadableStorageTraits,
    StorageError, StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, WritableStorageTraits,
};
use zarrs_zip::ZipStorageAdapter;

/// The first bytes of a zip file: a local file header, or the end-of-central-directory
/// record of an empty archive.
const SIGNATURES: [&[u8; 4]; 2] = [b"PK\x03\x04", b"PK\x05\x06"];

/// The metadata keys that make a store root a zarr node.
const ROOT_METADATA: [&str; 4] = ["zarr.json", ".zarray", ".zgroup", ".zmetadata"];

/// What every write to a zip store is refused with (`zip` names the zip file).
pub(crate) fn read_only_sentence(zip: &str) -> String {
    format!(
        "zip stores are read-only in zarrbuf; copy the array into a directory instead: \
         zarrbuf copy {zip} out.zarr"
    )
}

/// The zip file a location names: a path or `file://` URL of a regular file that ends in
/// `.zip` (any case) or starts with a zip signature. `None` for directories, other URLs and
/// files that are not zip files; an error for a `.zip` path that does not exist (a zip store
/// is never created).
pub(crate) fn zip_path(location: &Location) -> Result<Option<PathBuf>> {
    let Some(path) = location.local_path() else {
        return Ok(None);
    };
    let named_zip = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("zip"));
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {
            if named_zip || starts_with_signature(path) {
                Ok(Some(path.to_path_buf()))
            } else {
                Ok(None)
            }
        }
        Ok(_) => Ok(None),
        Err(e) if named_zip && e.kind() == std::io::ErrorKind::NotFound => Err(Error::store(
            location.as_str(),
            "no such zip file; give the path of an existing .zip (zarrbuf reads zip stores \
             but never creates them: to write, give a directory path)",
            Some(Box::new(e)),
        )),
        Err(_) => Ok(None),
    }
}

fn starts_with_signature(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| SIGNATURES.iter().any(|s| **s == head))
}

/// A zip file opened as a read-only zarr store.
pub(crate) struct ZipStore {
    inner: ZipStorageAdapter<FilesystemStore>,
    /// The location as the user gave it, for messages.
    location: String,
    /// The zip file's size: what bounds an entry's inflated size (`zip_entry_bound`).
    file_bytes: u64,
}

impl ZipStore {
    /// Opens the zip file at `path` (`location` is how the user named it). When the archive
    /// root holds no zarr metadata and everything in it lies in one folder (a directory
    /// store zipped with `zip -r data.zarr.zip data.zarr`), the store starts in that folder.
    pub(crate) fn open(location: &str, path: &Path) -> Result<Self> {
        let bad = |why: String, source: Option<crate::error::BoxError>| {
            Error::store(location, why, source)
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            bad(
                "the zip file's name is not valid UTF-8; rename it".into(),
                None,
            )
        })?;
        let files = Arc::new(FilesystemStore::new(&parent).map_err(|e| {
            bad(
                format!("cannot open the directory of the zip file: {e}"),
                Some(Box::new(e)),
            )
        })?);
        let key = StoreKey::new(name).map_err(|e| bad(e.to_string(), Some(Box::new(e))))?;
        let open = |folder: &str| {
            ZipStorageAdapter::new_with_path(files.clone(), key.clone(), folder).map_err(|e| {
                bad(
                    format!("not a readable zip file ({e}); check that the file is complete"),
                    Some(Box::new(e)),
                )
            })
        };
        let mut inner = open("")?;
        let has_root_metadata = ROOT_METADATA.iter().any(|m| {
            StoreKey::new(*m)
                .ok()
                .and_then(|k| inner.size_key(&k).ok().flatten())
                .is_some()
        });
        if !has_root_metadata {
            let top = inner
                .list_dir(&StorePrefix::root())
                .map_err(|e| bad(e.to_string(), Some(Box::new(e))))?;
            if let ([], [folder]) = (top.keys().as_slice(), top.prefixes().as_slice()) {
                inner = open(folder.as_str())?;
            }
        }
        Ok(ZipStore {
            inner,
            location: location.to_string(),
            file_bytes: std::fs::metadata(path).map_or(u64::MAX, |m| m.len()),
        })
    }

    fn refuse(&self) -> StorageError {
        StorageError::Unsupported(read_only_sentence(&self.location))
    }
}

impl ReadableStorageTraits for ZipStore {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let declared = self.inner.size_key(key)?;
        super::zip_entry_bound::check_entry(&self.location, key, declared, self.file_bytes)?;
        self.inner.get_partial_many(key, byte_ranges)
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.inner.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        self.inner.supports_get_partial()
    }
}

impl ListableStorageTraits for ZipStore {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        self.inner.list()
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        self.inner.list_prefix(prefix)
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        self.inner.list_dir(prefix)
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        self.inner.size_prefix(prefix)
    }
}

impl WritableStorageTraits for ZipStore {
    fn set(&self, _key: &StoreKey, _value: Bytes) -> Result<(), StorageError> {
        Err(self.refuse())
    }

    fn set_partial_many(
        &self,
        _key: &StoreKey,
        _offset_values: OffsetBytesIterator,
    ) -> Result<(), StorageError> {
        Err(self.refuse())
    }

    fn erase(&self, _key: &StoreKey) -> Result<(), StorageError> {
        Err(self.refuse())
    }

    fn erase_prefix(&self, _prefix: &StorePrefix) -> Result<(), StorageError> {
        Err(self.refuse())
    }

    fn supports_set_partial(&self) -> bool {
        false
    }
}
