//! The directory store zarrbuf opens: zarrs' `FilesystemStore` for reads and listing, and
//! writes that a crash cannot tear.
//!
//! zarrs' store writes each key in place, so a process killed mid-write (OOM kill, Ctrl-C,
//! preemption) leaves a truncated chunk that every later read fails on, and an overwrite of
//! an uncompressed chunk can mix old and new bytes silently. Here every write goes to a
//! temporary file in the key's own directory and is renamed over the key when complete
//! (POSIX `rename` replaces the target atomically), so a reader — or a later process — sees
//! each key absent, wholly old or wholly new. Partial writes (`set_partial_many`) rewrite the
//! whole value the same way, and the store says it does not support them, so zarrs updates
//! shards by writing whole new shards.
//!
//! On Linux the value is first written to an unnamed file (`O_TMPFILE`) in the key's
//! directory and linked into place when complete: a key written for the first time then has
//! no temporary name at all, so a killed writer leaves nothing behind; a key that already
//! exists is linked under a temporary name and renamed over (a window of microseconds).
//! Elsewhere, and on file systems without `O_TMPFILE`, the whole write goes to a named
//! temporary file.
//!
//! Temporary files are named `.<name>.zarrbuf-tmp.<host>.<pid>.<n>`: hidden, and never a
//! chunk or metadata key of any chunk key encoding (zarr keys are digits, separators, `c`
//! and the fixed metadata names). Listing skips them; the first write into a directory
//! removes the ones a killed writer left there ([`remove_leftovers`]); `zarrbuf check` reports
//! them and `--repair` removes them.
//!
//! Durability: by default a write is complete once renamed — safe against the writing
//! process dying, not against the machine losing power before the kernel writes the file
//! back. [`Durability::Sync`](crate::options::Durability) adds `fsync` of the file before the rename
//! and of its directory after it (zarrs' own store syncs every file, without the rename).

use super::key::{check_io_key, check_storage_key};
use super::safe_file::{SafeRoot, read_range};
use super::write_lock::{LOCK_NAME, WriteLock, Written, lock_dir, node_dir};
use crate::options::Durability;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::{
    Bytes, ListableStorageTraits, MaybeBytesIterator, OffsetBytesIterator, ReadableStorageTraits,
    StorageError, StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, WritableStorageTraits,
};

/// The marker inside every temporary file name.
const TMP_MARKER: &str = ".zarrbuf-tmp.";

/// Leftovers older than this are removed whoever wrote them (a writer on another host, or a
/// process id since reused).
const LEFTOVER_AGE: Duration = Duration::from_secs(24 * 3600);

/// Writes in flight that asked for [`Durability::Sync`](crate::options::Durability): while any runs,
/// every write of this process to an [`AtomicDirectoryStore`] syncs. A count rather than a
/// per-store flag because write options reach zarrs' `Array`, not the store behind it;
/// syncing a concurrent write that did not ask for it costs time, never correctness.
static SYNCED_WRITES: AtomicUsize = AtomicUsize::new(0);

/// Counter making temporary names unique within this process.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Keeps [`SYNCED_WRITES`] raised while alive.
pub(crate) struct SyncedWrites(());

impl SyncedWrites {
    /// Makes every directory-store write sync until the guard drops.
    pub(crate) fn begin() -> Self {
        SYNCED_WRITES.fetch_add(1, Ordering::SeqCst);
        SyncedWrites(())
    }
}

impl Drop for SyncedWrites {
    fn drop(&mut self) {
        SYNCED_WRITES.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How far every directory-store write of this process goes now (see [`SYNCED_WRITES`]).
fn durability() -> Durability {
    if SYNCED_WRITES.load(Ordering::SeqCst) > 0 {
        Durability::Sync
    } else {
        Durability::Rename
    }
}

/// Whether a file name is a temporary file of a write in progress or killed: zarrbuf's own
/// (`.<name>.zarrbuf-tmp.<host>.<pid>.<n>`) or object_store's local staging files
/// (`<key name>#<n>`, left by a killed async write to a `file://` store), where the key name
/// is one a zarr key can end in (chunk indices, `c`, a metadata file name). Other names
/// (`draft#2`, `.a.zarrbuf-tmp.x`) are the user's.
///
/// ```
/// # use zarrbuf::check::is_temporary_name;
/// assert!(is_temporary_name(".0.zarrbuf-tmp.node1.42.7"));
/// assert!(is_temporary_name("0#3") && is_temporary_name("zarr.json#1") && is_temporary_name("c.1.2#0"));
/// assert!(!is_temporary_name("draft#2") && !is_temporary_name(".a.zarrbuf-tmp.x"));
/// assert!(!is_temporary_name("0.0") && !is_temporary_name("zarr.json") && !is_temporary_name(".zarray"));
/// ```
pub fn is_temporary_name(name: &str) -> bool {
    if let Some((stem, tail)) = name
        .strip_prefix('.')
        .and_then(|n| n.split_once(TMP_MARKER))
    {
        let mut parts = tail.rsplitn(3, '.');
        let (n, pid, host) = (parts.next(), parts.next(), parts.next());
        let digits = |p: Option<&str>| {
            p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        };
        return !stem.is_empty() && digits(n) && digits(pid) && host.is_some_and(|h| !h.is_empty());
    }
    match name.rsplit_once('#') {
        Some((stem, n)) => {
            is_key_name(stem) && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// Whether `name` is a name a zarr key can end in: a metadata file name, `c`, or chunk
/// indices separated by `.` (after `c.` for v3's dot separator).
fn is_key_name(name: &str) -> bool {
    if super::METADATA_NAMES.contains(&name) || name == "c" {
        return true;
    }
    let indices = name.strip_prefix("c.").unwrap_or(name);
    !indices.is_empty()
        && indices
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// This machine's host name, as temporary names carry it ('.' and '/' replaced).
fn host_name() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let clean: String = raw
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if clean.is_empty() {
            "host".into()
        } else {
            clean
        }
    })
}

/// The temporary path next to `target` for one write.
fn temporary_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = format!(
        ".{name}{TMP_MARKER}{}.{}.{n}",
        host_name(),
        std::process::id()
    );
    target.with_file_name(tmp)
}

/// Whether the writer of the temporary file `name` (at `path`) can no longer be writing it.
/// zarrbuf's writers hold an advisory lock (`flock`) on their temporary file until it has
/// its key's name: a locked file is a live write. An unlocked one is a dead writer's unless
/// its name says it is of a process of this host that still runs (a write in the instant
/// between creating and locking its file) and it is younger than a day. object_store's
/// staging files carry no writer and take no lock: only an age over a day tells.
pub(crate) fn writer_is_gone(name: &str, path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    else {
        return false;
    };
    let Some(meta) = file.metadata().ok().filter(|m| m.is_file()) else {
        return false;
    };
    let old = meta
        .modified()
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age > LEFTOVER_AGE);
    let Some((_, tail)) = name.split_once(TMP_MARKER) else {
        return old;
    };
    if matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)) {
        return false;
    }
    let mut parts = tail.rsplitn(3, '.');
    let (_n, pid, host) = (parts.next(), parts.next(), parts.next());
    let runs = host == Some(host_name())
        && pid.is_some_and(|p| {
            p == std::process::id().to_string()
                || !Path::new("/proc/self").exists()
                || Path::new(&format!("/proc/{p}")).exists()
        });
    old || !runs
}

/// Holds `file`'s advisory lock, marking it as a live write's (see [`writer_is_gone`]); a
/// file system without locks marks nothing.
fn mark_live(file: &File) {
    let _ = file.try_lock();
}

/// Removes the temporary files in `dir` (not below it) whose writer is gone; returns the
/// paths removed. A directory that does not exist holds none.
///
/// # Errors
///
/// The I/O error of reading the directory or removing a file.
pub(crate) fn remove_leftovers(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_temporary_name(&name) && writer_is_gone(&name, &entry.path()) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => removed.push(entry.path()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(removed)
}

/// Writes `value` to a named temporary file beside `target` and renames it over `target`.
fn replace_through_named(
    target: &Path,
    value: &[u8],
    durability: Durability,
) -> std::io::Result<()> {
    let tmp = temporary_path(target);
    let written = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        mark_live(&file);
        file.write_all(value)?;
        if durability == Durability::Sync {
            file.sync_all()?;
        }
        // The lock is held (the file open) until the file has its key's name.
        std::fs::rename(&tmp, target)
    })();
    if written.is_err() {
        // Best effort: the write failed, the temporary file is of no use to anyone.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Linux's unnamed files: written whole, then given their name.
#[cfg(target_os = "linux")]
mod unnamed {
    use super::temporary_path;
    use crate::options::Durability;
    use nix::fcntl::{AT_FDCWD, AtFlags};
    use std::fs::{File, OpenOptions};
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    /// Gives the unnamed `file` the name `to`; fails with `AlreadyExists` when `to` exists.
    fn link(file: &File, to: &Path) -> std::io::Result<()> {
        let from = format!("/proc/self/fd/{}", file.as_raw_fd());
        nix::unistd::linkat(
            AT_FDCWD,
            from.as_str(),
            AT_FDCWD,
            to,
            AtFlags::AT_SYMLINK_FOLLOW,
        )
        .map_err(std::io::Error::from)
    }

    /// Replaces `target` (in `dir`) with `value` through an unnamed file; `Ok(false)` when
    /// the file system (or a missing /proc) does not allow it and nothing was changed.
    pub(super) fn replace(
        dir: &Path,
        target: &Path,
        value: &[u8],
        durability: Durability,
    ) -> std::io::Result<bool> {
        let Ok(mut file) = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(dir)
        else {
            return Ok(false);
        };
        super::mark_live(&file);
        file.write_all(value)?;
        if durability == Durability::Sync {
            file.sync_all()?;
        }
        match link(&file, target) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return Ok(false),
        }
        let tmp = temporary_path(target);
        link(&file, &tmp)?;
        std::fs::rename(&tmp, target).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })?;
        Ok(true)
    }
}

/// Elsewhere every write takes the named temporary file.
#[cfg(not(target_os = "linux"))]
mod unnamed {
    pub(super) fn replace(
        _: &std::path::Path,
        _: &std::path::Path,
        _: &[u8],
        _: crate::options::Durability,
    ) -> std::io::Result<bool> {
        Ok(false)
    }
}

/// A directory store whose writes are atomic per key (see the module docs).
#[derive(Debug)]
pub(crate) struct AtomicDirectoryStore {
    inner: FilesystemStore,
    /// The root, for reads that open regular files inside it only.
    safe: SafeRoot,
    /// Directories whose leftovers this store has already removed.
    swept: Mutex<HashSet<PathBuf>>,
    /// The write lock held for each directory written (see `write_lock.rs`).
    locks: Mutex<HashMap<PathBuf, Arc<WriteLock>>>,
}

fn io(e: std::io::Error) -> StorageError {
    StorageError::IOError(Arc::new(e))
}

impl AtomicDirectoryStore {
    /// The store over the directory `root` (created on the first write if missing).
    pub(crate) fn new(root: &Path) -> Result<Self, zarrs::filesystem::FilesystemStoreCreateError> {
        Ok(AtomicDirectoryStore {
            inner: FilesystemStore::new(root)?,
            safe: SafeRoot::new(root),
            swept: Mutex::new(HashSet::new()),
            locks: Mutex::new(HashMap::new()),
        })
    }

    /// Holds the write lock of the array that a write at `dir` (a key's directory, or a
    /// deleted prefix's) belongs to, for the store's lifetime.
    fn lock_for(&self, dir: &Path, written: Written) -> std::io::Result<()> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if locks.contains_key(dir) {
            return Ok(());
        }
        let root = self.inner.prefix_to_fs_path(&StorePrefix::root());
        let node = node_dir(&root, dir, written);
        self.make_dirs(&node, durability())?;
        let lock = lock_dir(&node)?;
        locks.insert(dir.to_path_buf(), lock);
        Ok(())
    }

    /// Creates `dir` and the directories above it that are missing; with
    /// [`Durability::Sync`], syncs the parent of each directory created so that the new
    /// entries survive a power loss.
    fn make_dirs(&self, dir: &Path, durability: Durability) -> std::io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        let mut missing = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            missing.push(d.to_path_buf());
            at = d.parent();
        }
        std::fs::create_dir_all(dir)?;
        if durability == Durability::Sync {
            for d in missing.iter().rev() {
                if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
                    File::open(parent)?.sync_all()?;
                }
            }
        }
        Ok(())
    }

    /// Removes a killed writer's leftovers from `dir` the first time this store writes there.
    fn sweep_once(&self, dir: &Path) -> std::io::Result<()> {
        let first = self
            .swept
            .lock()
            .map(|mut s| s.insert(dir.to_path_buf()))
            .unwrap_or(false);
        if first {
            remove_leftovers(dir)?;
        }
        Ok(())
    }

    /// Writes `value` as the whole new content of `key`: an unnamed or temporary file, then
    /// a link or rename into place.
    fn replace(&self, key: &StoreKey, value: &[u8]) -> std::io::Result<()> {
        check_io_key(key.as_str())?;
        let target = self.inner.key_to_fspath(key);
        let dir = target.parent().map(Path::to_path_buf).unwrap_or_default();
        let durability = durability();
        if !Self::is_group_metadata(key, value, &dir) {
            self.lock_for(&dir, Self::written(key))?;
        }
        self.make_dirs(&dir, durability)?;
        self.sweep_once(&dir)?;
        if !unnamed::replace(&dir, &target, value, durability)? {
            replace_through_named(&target, value, durability)?;
        }
        if durability == Durability::Sync && !dir.as_os_str().is_empty() {
            File::open(&dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Whether a listed key is one of the temporary files or a lock file.
    fn is_temporary_key(key: &StoreKey) -> bool {
        let name = key.as_str().rsplit('/').next().unwrap_or_default();
        is_temporary_name(name) || name == LOCK_NAME
    }

    /// Whether writing `value` at `key` (in `dir`) writes a group's metadata: a group is no
    /// array to guard, and zarr-python would warn about a lock file among its members.
    fn is_group_metadata(key: &StoreKey, value: &[u8], dir: &Path) -> bool {
        let name = key.as_str().rsplit('/').next().unwrap_or_default();
        match name {
            ".zgroup" => true,
            "zarr.json" => serde_json::from_slice::<serde_json::Value>(value)
                .is_ok_and(|doc| doc.get("node_type").and_then(|t| t.as_str()) == Some("group")),
            ".zattrs" | ".zmetadata" => {
                dir.join(".zgroup").is_file() && !dir.join(".zarray").is_file()
            }
            _ => false,
        }
    }

    /// Whether `key` is a node's metadata document or data.
    fn written(key: &StoreKey) -> Written {
        if super::is_metadata_key(key.as_str()) {
            Written::Metadata
        } else {
            Written::Data
        }
    }
}

impl ReadableStorageTraits for AtomicDirectoryStore {
    /// Reads regular files inside the store only: a directory, FIFO, socket or device at
    /// `key`, or a link out of the store, is an error (`safe_file.rs`).
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        check_storage_key(key.as_str())?;
        let Some((file, size)) = self.safe.open_key(key.as_str()).map_err(io)? else {
            return Ok(None);
        };
        let out: Vec<_> = byte_ranges
            .map(|r| read_range(&file, size, key.as_str(), Some(r)))
            .collect();
        Ok(Some(Box::new(out.into_iter())))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        check_storage_key(key.as_str())?;
        Ok(self
            .safe
            .open_key(key.as_str())
            .map_err(io)?
            .map(|(_, size)| size))
    }

    fn supports_get_partial(&self) -> bool {
        self.inner.supports_get_partial()
    }
}

impl WritableStorageTraits for AtomicDirectoryStore {
    fn set(&self, key: &StoreKey, value: Bytes) -> Result<(), StorageError> {
        check_storage_key(key.as_str())?;
        self.replace(key, &value).map_err(io)
    }

    /// Applies the writes to a copy of the current value and replaces the whole value with it
    /// (zero-filled where a write starts beyond the end), so this too is atomic.
    fn set_partial_many(
        &self,
        key: &StoreKey,
        offset_values: OffsetBytesIterator,
    ) -> Result<(), StorageError> {
        check_storage_key(key.as_str())?;
        let mut whole = self.get(key)?.map(|b| b.to_vec()).unwrap_or_default();
        for (offset, value) in offset_values {
            let start = usize::try_from(offset)
                .map_err(|_| StorageError::Other(format!("offset {offset} is beyond memory")))?;
            let end = start + value.len();
            if whole.len() < end {
                whole.resize(end, 0);
            }
            whole[start..end].copy_from_slice(&value);
        }
        self.replace(key, &whole).map_err(io)
    }

    fn erase(&self, key: &StoreKey) -> Result<(), StorageError> {
        check_storage_key(key.as_str())?;
        let target = self.inner.key_to_fspath(key);
        let dir = target.parent().map(Path::to_path_buf).unwrap_or_default();
        self.lock_for(&dir, Self::written(key)).map_err(io)?;
        self.inner.erase(key)
    }

    fn erase_prefix(&self, prefix: &StorePrefix) -> Result<(), StorageError> {
        check_storage_key(prefix.as_str())?;
        let dir = self.inner.prefix_to_fs_path(prefix);
        if dir.is_dir() {
            self.lock_for(&dir, Written::Data).map_err(io)?;
        }
        self.inner.erase_prefix(prefix)
    }

    /// No: zarrs then rewrites whole shards (atomically) instead of patching them in place.
    fn supports_set_partial(&self) -> bool {
        false
    }
}

impl ListableStorageTraits for AtomicDirectoryStore {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        let mut keys = self.inner.list()?;
        keys.retain(|k| !Self::is_temporary_key(k));
        Ok(keys)
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        check_storage_key(prefix.as_str())?;
        let mut keys = self.inner.list_prefix(prefix)?;
        keys.retain(|k| !Self::is_temporary_key(k));
        Ok(keys)
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        check_storage_key(prefix.as_str())?;
        let listed = self.inner.list_dir(prefix)?;
        let keys = listed
            .keys()
            .iter()
            .filter(|k| !Self::is_temporary_key(k))
            .cloned()
            .collect();
        Ok(StoreKeysPrefixes::new(keys, listed.prefixes().clone()))
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        let mut size = 0;
        for key in self.list_prefix(prefix)? {
            size += self.size_key(&key)?.unwrap_or(0);
        }
        Ok(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempdir::Dir, AtomicDirectoryStore) {
        let dir = tempdir::Dir::new();
        let store = AtomicDirectoryStore::new(dir.path()).unwrap();
        (dir, store)
    }

    /// A directory removed on drop (the crate has no tempfile dependency).
    mod tempdir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let p =
                    std::env::temp_dir().join(format!("zarrbuf-atomic-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn key(s: &str) -> StoreKey {
        StoreKey::new(s).unwrap()
    }

    #[test]
    fn keys_outside_the_store_are_refused() {
        let (dir, store) = store();
        std::fs::write(dir.path().join("outside"), b"secret").unwrap();
        let inner = dir.path().join("s");
        std::fs::create_dir_all(&inner).unwrap();
        let store_in = AtomicDirectoryStore::new(&inner).unwrap();
        let up = key("../outside");
        assert!(store_in.get(&up).is_err());
        assert!(store_in.size_key(&up).is_err());
        assert!(store_in.set(&up, Bytes::from_static(b"x")).is_err());
        assert!(store_in.erase(&up).is_err());
        let up_prefix = StorePrefix::new("../").unwrap();
        assert!(store_in.list_prefix(&up_prefix).is_err());
        assert!(store_in.list_dir(&up_prefix).is_err());
        assert!(store_in.erase_prefix(&up_prefix).is_err());
        assert_eq!(
            std::fs::read(dir.path().join("outside")).unwrap(),
            b"secret"
        );
        drop(store);
    }

    #[test]
    fn writes_replace_whole_values_and_leave_no_temporary_files() {
        let (dir, store) = store();
        store
            .set(&key("c/0/0"), Bytes::from_static(b"0123456789"))
            .unwrap();
        store
            .set(&key("c/0/0"), Bytes::from_static(b"abc"))
            .unwrap();
        assert_eq!(store.get(&key("c/0/0")).unwrap().unwrap().as_ref(), b"abc");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("c/0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["0".to_string()]);
        let _synced = SyncedWrites::begin();
        store
            .set(&key("zarr.json"), Bytes::from_static(b"{}"))
            .unwrap();
        assert_eq!(
            store.get(&key("zarr.json")).unwrap().unwrap().as_ref(),
            b"{}"
        );
    }

    #[test]
    fn arrays_are_locked_for_writing_and_groups_are_not() {
        let (dir, store) = store();
        let group = br#"{"zarr_format":3,"node_type":"group"}"#;
        store
            .set(&key("g/zarr.json"), Bytes::from_static(group))
            .unwrap();
        store
            .set(
                &key("g/a/zarr.json"),
                Bytes::from_static(br#"{"node_type":"array"}"#),
            )
            .unwrap();
        store
            .set(&key("g/a/c/0"), Bytes::from_static(b"x"))
            .unwrap();
        assert!(!dir.path().join("g").join(LOCK_NAME).exists());
        assert!(dir.path().join("g/a").join(LOCK_NAME).exists());
        assert!(!dir.path().join("g/a/c").join(LOCK_NAME).exists());
        // Nothing is written, deleted or listed outside the store.
        assert!(store.set(&key("../x"), Bytes::from_static(b"x")).is_err());
        assert!(!dir.path().join("../x").exists());
        assert!(store.erase(&key("g/../../x")).is_err());
        assert!(
            store
                .list_prefix(&StorePrefix::new("../").unwrap())
                .is_err()
        );
        let listed: Vec<String> = store
            .list()
            .unwrap()
            .iter()
            .map(|k| k.to_string())
            .collect();
        assert_eq!(listed, ["g/a/c/0", "g/a/zarr.json", "g/zarr.json"]);
    }

    #[test]
    fn the_named_route_replaces_too() {
        let (dir, _store) = store();
        let target = dir.path().join("k");
        replace_through_named(&target, b"one", Durability::Rename).unwrap();
        replace_through_named(&target, b"second", Durability::Sync).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn partial_writes_rewrite_the_whole_value() {
        let (_dir, store) = store();
        store.set(&key("s"), Bytes::from_static(b"aaaa")).unwrap();
        store
            .set_partial_many(
                &key("s"),
                Box::new(
                    vec![
                        (1, Bytes::from_static(b"bb")),
                        (6, Bytes::from_static(b"c")),
                    ]
                    .into_iter(),
                ),
            )
            .unwrap();
        assert_eq!(
            store.get(&key("s")).unwrap().unwrap().as_ref(),
            b"abba\0\0c"
        );
        assert!(!store.supports_set_partial());
    }

    #[test]
    fn listing_skips_temporary_files_and_writes_sweep_dead_writers_leftovers() {
        let (dir, store) = store();
        store.set(&key("c/0"), Bytes::from_static(b"x")).unwrap();
        // A leftover of a process of this host that no longer exists (pid beyond pid_max),
        // one of this very process (a write in flight), and object_store's staging name.
        let dead = format!(".1{TMP_MARKER}{}.4294967295.0", host_name());
        let live = format!(".2{TMP_MARKER}{}.{}.0", host_name(), std::process::id());
        for name in [&dead, &live, &"3#1".to_string()] {
            std::fs::write(dir.path().join("c").join(name), b"torn").unwrap();
        }
        let listed: Vec<String> = store
            .list()
            .unwrap()
            .iter()
            .map(|k| k.to_string())
            .collect();
        assert_eq!(listed, vec!["c/0".to_string()]);
        assert_eq!(
            store
                .list_dir(&StorePrefix::new("c/").unwrap())
                .unwrap()
                .keys()
                .len(),
            1
        );
        // A new store's first write into c/ removes only the dead writer's file.
        let again = AtomicDirectoryStore::new(dir.path()).unwrap();
        again.set(&key("c/1"), Bytes::from_static(b"y")).unwrap();
        assert!(!dir.path().join("c").join(&dead).exists());
        assert!(dir.path().join("c").join(&live).exists());
        assert!(dir.path().join("c/3#1").exists());
    }
}
