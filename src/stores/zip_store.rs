//! Zip files as read-only stores: zarr-python's `ZipStore`, and directory stores zipped
//! with `zip -r` (whose entries sit in one folder, which the store then starts in).
//!
//! The central directory is read once with rc-zip and checked (`zip_index.rs`: no entry's
//! bytes overlap another's); each read of an entry checks its local header and its CRC-32,
//! and inflates a compressed entry whole within the bound of `zip_entry_bound.rs` and never
//! past its declared size (`zip_entry_read.rs`). A ranged read of a stored entry (a shard's
//! inner chunk) checks the whole entry's CRC-32 once, then reads ranges in place. [`ZipStore`]
//! is the same trait object as directory stores, so every read path takes zip files
//! unchanged, and it answers every write with [`read_only_sentence`].

use super::location::Location;
use super::zip_entry_read;
use super::zip_index::{FileEntry, Names, Node};
use crate::errors::{Error, Result};
use rc_zip::parse::Method;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator, InvalidByteRangeError};
use zarrs::storage::{
    Bytes, ListableStorageTraits, MaybeBytesIterator, OffsetBytesIterator, ReadableStorageTraits,
    StorageError, StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, WritableStorageTraits,
};

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
    file: File,
    /// The location as the user gave it, for messages.
    location: String,
    /// The zip file's size: what bounds an entry's inflated size (`zip_entry_bound`).
    file_bytes: u64,
    /// The files below the folder the store starts in, by key.
    files: BTreeMap<String, FileEntry>,
    /// The folders below it (explicit directory entries), each ending in `/`.
    folders: BTreeSet<String>,
    /// The stored entries whose CRC-32 a ranged read has checked (`zip_entry_read.rs`).
    verified: Mutex<HashSet<String>>,
}

impl ZipStore {
    /// Opens the zip file at `path` (`location` is how the user named it). When the archive
    /// root holds no zarr metadata and everything in it lies in one folder (a directory
    /// store zipped with `zip -r data.zarr.zip data.zarr`), the store starts in that folder.
    /// An archive whose entries claim one another's bytes is refused (`zip_index.rs`).
    pub(crate) fn open(location: &str, path: &Path) -> Result<Self> {
        let bad = |why: String| Error::store(location, why, None);
        let file = open_regular(path).map_err(|e| {
            Error::store(
                location,
                format!("cannot open the zip file: {e}"),
                Some(Box::new(e)),
            )
        })?;
        let file_bytes = file
            .metadata()
            .map_err(|e| Error::store(location, e.to_string(), Some(Box::new(e))))?
            .len();
        let names = super::zip_index::read_index(&file, file_bytes).map_err(|e| {
            bad(format!(
                "not a readable zip file ({e}); check that the file is complete"
            ))
        })?;
        let (mut files, mut folders) = view(&names, "").map_err(&bad)?;
        let has_root_metadata = ROOT_METADATA.iter().any(|m| files.contains_key(*m));
        if !has_root_metadata {
            let (keys, prefixes) = list_dir_in(&files, &folders, "");
            if let ([], [folder]) = (keys.as_slice(), prefixes.as_slice()) {
                (files, folders) = view(&names, folder).map_err(&bad)?;
            }
        }
        Ok(ZipStore {
            file,
            location: location.to_string(),
            file_bytes,
            files,
            folders,
            verified: Mutex::new(HashSet::new()),
        })
    }

    fn refuse(&self) -> StorageError {
        StorageError::Unsupported(read_only_sentence(&self.location))
    }

    /// The error for entry `key` of this zip file: `why` says what the entry does wrong.
    fn entry_error(&self, key: &StoreKey, why: &str) -> StorageError {
        StorageError::Other(format!(
            "the zip file {}: its entry {key} {why}",
            self.location
        ))
    }

    /// Whether stored entry `key` was checked against its CRC-32 already.
    fn is_verified(&self, key: &StoreKey) -> bool {
        self.verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(key.as_str())
    }

    fn mark_verified(&self, key: &StoreKey) {
        self.verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.as_str().to_string());
    }

    /// `ranges` of stored entry `fe` (data at `data`): a whole read is checked as it is read;
    /// ranges are read in place once the whole entry passed its CRC-32 check.
    fn read_stored(
        &self,
        key: &StoreKey,
        fe: &FileEntry,
        data: u64,
        ranges: &[ByteRange],
    ) -> Result<Vec<Bytes>, StorageError> {
        let size = fe.entry.uncompressed_size;
        let fail = |why: String| self.entry_error(key, &why);
        if let [only] = ranges
            && only.to_range(size) == (0..size)
        {
            let bytes = zip_entry_read::read_stored(&self.file, fe, data).map_err(fail)?;
            self.mark_verified(key);
            return Ok(vec![Bytes::from(bytes)]);
        }
        if !self.is_verified(key) {
            zip_entry_read::verify_stored(&self.file, fe, data).map_err(fail)?;
            self.mark_verified(key);
        }
        ranges
            .iter()
            .map(|r| {
                let range = r.to_range(size);
                let len = usize::try_from(range.end - range.start)
                    .map_err(|_| fail("is too large for this machine".into()))?;
                let mut out = vec![0u8; len];
                self.file
                    .read_exact_at(&mut out, data + range.start)
                    .map_err(|e| fail(format!("cannot be read: {e}")))?;
                Ok(Bytes::from(out))
            })
            .collect()
    }
}

/// Opens the regular file at `path` for reading, without blocking on a FIFO.
fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::other(format!(
            "it is {}, not a regular file",
            super::kind_name(kind)
        )));
    }
    Ok(file)
}

/// The files and folders of `names` below `folder` (`""`, or a name ending in `/`), keyed
/// by what follows it. A name that is not a valid store key is an error.
#[allow(clippy::type_complexity)]
fn view(
    names: &Names,
    folder: &str,
) -> std::result::Result<(BTreeMap<String, FileEntry>, BTreeSet<String>), String> {
    let mut files = BTreeMap::new();
    let mut folders = BTreeSet::new();
    for (name, node) in names.range(folder.to_string()..) {
        let Some(rest) = name.strip_prefix(folder) else {
            break;
        };
        if rest.is_empty() {
            continue;
        }
        let invalid = |e: String| {
            format!("its entry {name:?} is not a valid zarr key ({e}); re-create the zip file")
        };
        match node {
            Node::File(fe) => {
                StoreKey::new(rest).map_err(|e| invalid(e.to_string()))?;
                files.insert(rest.to_string(), (**fe).clone());
            }
            Node::Folder => {
                StorePrefix::new(rest).map_err(|e| invalid(e.to_string()))?;
                folders.insert(rest.to_string());
            }
        }
    }
    Ok((files, folders))
}

/// The keys and the child prefixes directly below `prefix` (`""` or ending in `/`).
fn list_dir_in(
    files: &BTreeMap<String, FileEntry>,
    folders: &BTreeSet<String>,
    prefix: &str,
) -> (Vec<String>, Vec<String>) {
    let mut keys = Vec::new();
    let mut prefixes = BTreeSet::new();
    let names = files
        .range(prefix.to_string()..)
        .map(|(k, _)| k)
        .take_while(|k| k.starts_with(prefix))
        .chain(
            folders
                .range(prefix.to_string()..)
                .take_while(|f| f.starts_with(prefix)),
        );
    for name in names {
        let rest = &name[prefix.len()..];
        match rest.find('/') {
            Some(slash) => {
                prefixes.insert(format!("{prefix}{}", &rest[..=slash]));
            }
            None if !rest.is_empty() && files.contains_key(name) => keys.push(name.clone()),
            None => {}
        }
    }
    (keys, prefixes.into_iter().collect())
}

fn store_key(name: &str) -> Result<StoreKey, StorageError> {
    StoreKey::new(name).map_err(|e| StorageError::Other(e.to_string()))
}

impl ReadableStorageTraits for ZipStore {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let Some(fe) = self.files.get(key.as_str()) else {
            return Ok(None);
        };
        let size = fe.entry.uncompressed_size;
        let ranges: Vec<ByteRange> = byte_ranges.collect();
        for range in &ranges {
            if let ByteRange::FromStart(start, len) = range
                && start.saturating_add(len.unwrap_or(0)) > size
            {
                return Err(InvalidByteRangeError::new(*range, size).into());
            }
        }
        let fail = |why: String| self.entry_error(key, &why);
        let data = zip_entry_read::data_offset(&self.file, fe).map_err(fail)?;
        let parts = if fe.entry.method == Method::Store {
            self.read_stored(key, fe, data, &ranges)?
        } else {
            super::zip_entry_bound::check_entry(&self.location, key, Some(size), self.file_bytes)?;
            let whole = Bytes::from(zip_entry_read::inflate(&self.file, fe).map_err(fail)?);
            ranges
                .iter()
                .map(|r| whole.slice(r.to_range_usize(size)))
                .collect()
        };
        Ok(Some(Box::new(parts.into_iter().map(Ok))))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        Ok(self
            .files
            .get(key.as_str())
            .map(|fe| fe.entry.uncompressed_size))
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

impl ListableStorageTraits for ZipStore {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        self.files.keys().map(|k| store_key(k)).collect()
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        self.files
            .range(prefix.as_str().to_string()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(prefix.as_str()))
            .map(|k| store_key(k))
            .collect()
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        let (keys, prefixes) = list_dir_in(&self.files, &self.folders, prefix.as_str());
        let keys = keys
            .iter()
            .map(|k| store_key(k))
            .collect::<Result<_, _>>()?;
        let prefixes = prefixes
            .iter()
            .map(|p| StorePrefix::new(p).map_err(|e| StorageError::Other(e.to_string())))
            .collect::<Result<_, _>>()?;
        Ok(StoreKeysPrefixes::new(keys, prefixes))
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        Ok(self
            .files
            .range(prefix.as_str().to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix.as_str()))
            .map(|(_, fe)| fe.entry.compressed_size)
            .sum())
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
