//! One writer at a time per array of a directory store: before its first write into an
//! array (its metadata, a chunk, a deletion), a process takes an advisory lock (`flock`) on
//! the array's directory itself and on the file `.zarrbuf.lock` in it, and keeps both while
//! its store is open. A second process that writes there gets an error naming the array
//! instead of mixing its chunks and metadata with the first one's. The directory's lock is
//! the one that cannot be defeated: the lock file can be deleted under a writer (and the
//! next writer would lock a new file of the same name), the directory cannot while it holds
//! the array. The file's lock is kept for file systems that lock files but not directories
//! (NFS emulates `flock` with record locks, which a directory opened read-only cannot
//! take) and for older zarrbuf versions, which lock the file only. A file system without
//! `flock` gives a lock that excludes no one. The locks go with the process (a killed writer
//! holds none); the file stays, and listings and `zarrbuf check` skip it.
//!
//! Within one process, every store over the same directory shares the one lock: threads of
//! a program coordinate themselves.

use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::io::{Error, ErrorKind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

/// The name of the lock file in an array's directory.
pub(crate) const LOCK_NAME: &str = ".zarrbuf.lock";

/// The metadata file names that make a directory a zarr node.
const NODE_FILES: [&str; 3] = ["zarr.json", ".zarray", ".zgroup"];

/// A held lock (on the directory and on its lock file); released when the last handle
/// drops.
#[derive(Debug)]
pub(crate) struct WriteLock {
    _dir: File,
    _file: File,
}

/// The locks this process holds, by lock file path (resolved).
static HELD: Mutex<Option<HashMap<PathBuf, Weak<WriteLock>>>> = Mutex::new(None);

/// What a write touches, which decides the node it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// A node's metadata document: the node is the key's directory.
    Metadata,
    /// A chunk, or a deleted prefix: the node is found above it.
    Data,
}

/// The directory of the zarr node that a write at `dir` (a key's directory) belongs to:
/// `dir` itself for metadata, else the nearest directory from `dir` up to `root` that
/// holds node metadata, else `root`.
pub(crate) fn node_dir(root: &Path, dir: &Path, written: Written) -> PathBuf {
    if written == Written::Metadata {
        return dir.to_path_buf();
    }
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| d.starts_with(root)) {
        if NODE_FILES.iter().any(|n| d.join(n).is_file()) {
            return d.to_path_buf();
        }
        at = d.parent();
    }
    root.to_path_buf()
}

/// Takes (or shares, within this process) the write lock of the array directory `dir`,
/// which must exist. A file system without `flock` gives a lock that excludes no one.
///
/// # Errors
///
/// `ResourceBusy` naming `dir` when another process holds the lock; the I/O error of
/// creating the lock file.
pub(crate) fn lock_dir(dir: &Path) -> std::io::Result<Arc<WriteLock>> {
    let dir = std::fs::canonicalize(dir)?;
    let path = dir.join(LOCK_NAME);
    let mut held = HELD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let held = held.get_or_insert_with(HashMap::new);
    if let Some(lock) = held.get(&path).and_then(Weak::upgrade) {
        return Ok(lock);
    }
    let lock = Arc::new(take(&dir)?);
    held.retain(|_, w| w.strong_count() > 0);
    held.insert(path, Arc::downgrade(&lock));
    Ok(lock)
}

/// Takes a new lock on the (resolved) array directory `dir`: its own open file descriptions,
/// as another process would. The directory first, then its lock file.
fn take(dir: &Path) -> std::io::Result<WriteLock> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(LOCK_NAME);
    let busy = || {
        Error::new(
            ErrorKind::ResourceBusy,
            format!(
                "another process is writing the array in {} (it holds the lock on that \
                 directory or on {}); two writers into one array would mix their chunks and \
                 metadata, so wait for that write to finish (or stop it) and run this one again",
                dir.display(),
                path.display()
            ),
        )
    };
    // O_DIRECTORY: whatever `dir` has become, this never opens (and blocks on) a FIFO.
    let directory = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)?;
    match directory.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(busy()),
        // No flock on directories here: the lock file alone excludes.
        Err(TryLockError::Error(_)) => {}
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(busy()),
        // No flock on this file system: nothing to exclude with.
        Err(TryLockError::Error(_)) => {}
    }
    Ok(WriteLock {
        _dir: directory,
        _file: file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_shares_its_lock_and_finds_the_node_directory() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-write-lock-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a/c/0")).unwrap();
        std::fs::write(dir.join("a/zarr.json"), b"{}").unwrap();
        assert_eq!(
            node_dir(&dir, &dir.join("a/c/0"), Written::Data),
            dir.join("a")
        );
        assert_eq!(node_dir(&dir, &dir.join("b/c"), Written::Data), dir);
        assert_eq!(
            node_dir(&dir, &dir.join("b"), Written::Metadata),
            dir.join("b")
        );
        let one = lock_dir(&dir.join("a")).unwrap();
        let two = lock_dir(&dir.join("a")).unwrap();
        assert!(Arc::ptr_eq(&one, &two));
        // Another open file description (as another process has) is refused while held.
        let other = File::open(dir.join("a").join(LOCK_NAME)).unwrap();
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        drop((one, two));
        assert!(other.try_lock().is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn deleting_the_lock_file_lets_no_second_writer_in() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-lock-gone-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        let a = std::fs::canonicalize(dir.join("a")).unwrap();
        let first = lock_dir(&a).unwrap();
        std::fs::remove_file(a.join(LOCK_NAME)).unwrap();
        // A second writer (its own open file descriptions, as another process has) makes a
        // new lock file and locks it, but the directory's lock is still held.
        let second = take(&a).unwrap_err();
        assert_eq!(second.kind(), ErrorKind::ResourceBusy, "{second}");
        assert!(second.to_string().contains("another process is writing"));
        // A lock file replaced by another file changes nothing either.
        std::fs::write(a.join(LOCK_NAME), b"").unwrap();
        assert_eq!(take(&a).unwrap_err().kind(), ErrorKind::ResourceBusy);
        drop(first);
        let again = take(&a).unwrap();
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
