//! Opening a directory store's key as a regular file inside the store, for every local read
//! (the directory store and `file://` URLs): a FIFO never blocks a read, a directory,
//! socket or device at a key is an error rather than a hang or a read of something else,
//! and a symbolic link that leads out of the store is refused.
//!
//! The file is opened non-blocking (opening a FIFO with no writer returns at once) and its
//! type is taken from the open descriptor (`fstat`), so nothing can swap the file between
//! the check and the read. Where it lies is checked when it is opened: beneath the store's
//! root directory, which is opened once and kept, with `openat2(RESOLVE_BENEATH)`, so the
//! kernel refuses any step out of it. Where that cannot settle it (a kernel or sandbox
//! without `openat2`, a missing file, an absolute link, a link out), the key is opened by
//! its path and where it lies is read back from the descriptor (`/proc/self/fd`) and compared
//! with the store's root with every link resolved: that is what decides and what names
//! the problem. Reading the descriptor back cost a 16³-chunk read about a seventh of its
//! time (a `/proc` lookup and a path built per chunk).

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use std::fs::File;
use std::io::{Error, ErrorKind};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{Bytes, StorageError};

/// A store's root directory, and its real path once it exists.
#[derive(Debug)]
pub(crate) struct SafeRoot {
    root: PathBuf,
    real: OnceLock<PathBuf>,
    /// The root directory, opened once it exists: keys are opened beneath it
    /// ([`SafeRoot::open_beneath`]). A store whose directory is moved while it is open goes
    /// on reading where it went; one deleted and made again is read by path.
    dir: OnceLock<OwnedFd>,
    /// `openat2` is refused here (a kernel before 5.6, a sandbox's filter): every key is
    /// opened by its path.
    no_openat2: AtomicBool,
}

/// The words for a file type that is not a regular file.
pub(crate) fn kind_name(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

impl SafeRoot {
    /// The store rooted at `root` (which may not exist yet).
    pub(crate) fn new(root: &Path) -> Self {
        SafeRoot {
            root: root.to_path_buf(),
            real: OnceLock::new(),
            dir: OnceLock::new(),
            no_openat2: AtomicBool::new(false),
        }
    }

    /// The root with every symbolic link resolved.
    pub(crate) fn real(&self) -> std::io::Result<&Path> {
        if let Some(real) = self.real.get() {
            return Ok(real);
        }
        let real = std::fs::canonicalize(&self.root)?;
        Ok(self.real.get_or_init(|| real))
    }

    /// Opens `key` (a store key, `/`-separated, relative to the root): see
    /// [`SafeRoot::open_path`].
    pub(crate) fn open_key(&self, key: &str) -> std::io::Result<Option<(File, u64)>> {
        super::key::check_io_key(key)?;
        self.open_path(&self.root.join(key.trim_start_matches('/')))
    }

    /// Opens `rel` (relative to the root) for reading, when it is a regular file the kernel
    /// reached without leaving the root directory; `None` in every other case, which the
    /// path route then decides and names ([`SafeRoot::open_path`]).
    fn open_beneath(&self, rel: &Path) -> Option<(File, u64)> {
        if self.no_openat2.load(Ordering::Relaxed) {
            return None;
        }
        let root = match self.dir.get() {
            Some(dir) => dir,
            None => {
                let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
                let dir = nix::fcntl::open(&self.root, flags, Mode::empty()).ok()?;
                self.dir.get_or_init(|| dir)
            }
        };
        // Never a step out of the root, nor through `/proc`'s magic links.
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let fd = match nix::fcntl::openat2(root, rel, how) {
            Ok(fd) => fd,
            Err(Errno::ENOSYS | Errno::EPERM) => {
                // Refused here, for every key from now on.
                self.no_openat2.store(true, Ordering::Relaxed);
                return None;
            }
            Err(_) => return None,
        };
        let file = File::from(fd);
        let meta = file.metadata().ok()?;
        meta.is_file().then_some((file, meta.len()))
    }

    /// Opens the file at `path` (below the root) for reading, with its size; `None` when
    /// there is no file there (nothing at `path`, or a file where a directory of the path
    /// belongs). A directory, FIFO, socket or device at `path`, or a path that leads out of
    /// the store through a symbolic link, is an error naming it. A regular file reached
    /// beneath the root is opened in one system call ([`SafeRoot::open_beneath`]).
    pub(crate) fn open_path(&self, path: &Path) -> std::io::Result<Option<(File, u64)>> {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(found) = path
            .strip_prefix(&self.root)
            .ok()
            .and_then(|rel| self.open_beneath(rel))
        {
            return Ok(Some(found));
        }
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
        {
            Ok(file) => file,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                // A link whose target is gone is not a missing chunk (which would read as the
                // fill value): the data it named is lost, as `check` reports.
                if let Ok(link) = std::fs::read_link(path) {
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!(
                            "{} is a symbolic link to {}, which does not exist; the chunk it named is lost (restore the target, or remove the link to read the fill value there)",
                            path.display(),
                            link.display()
                        ),
                    ));
                }
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(Error::new(
                ErrorKind::InvalidData,
                format!(
                    "{} is {}, not a regular file; a key of a zarr store is a file (remove or rename it)",
                    path.display(),
                    kind_name(meta.file_type())
                ),
            ));
        }
        self.check_inside(&file, path)?;
        Ok(Some((file, meta.len())))
    }

    /// An error when the open `file` (opened as `path`) lies outside the store.
    fn check_inside(&self, file: &File, path: &Path) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let Ok(real_root) = self.real() else {
            // The root cannot be resolved (removed while reading): nothing to compare with.
            return Ok(());
        };
        let at = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .or_else(|_| std::fs::canonicalize(path))?;
        if at.starts_with(real_root) {
            return Ok(());
        }
        Err(outside(path, &at))
    }
}

/// The error for `path`, which leads to `at` outside the store.
pub(crate) fn outside(path: &Path, at: &Path) -> Error {
    Error::new(
        ErrorKind::PermissionDenied,
        format!(
            "{} leads out of the store through a symbolic link (to {}); zarrbuf reads only files inside the store (copy the file in instead of linking it)",
            path.display(),
            at.display()
        ),
    )
}

/// Reads `range` (or all) of the open `file` of `size` bytes, the value of `key`, into a
/// buffer of exactly that length.
pub(crate) fn read_range(
    file: &File,
    size: u64,
    key: &str,
    range: Option<ByteRange>,
) -> Result<Bytes, StorageError> {
    use std::io::{Read, Seek, SeekFrom};
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
    let io = |e| StorageError::IOError(std::sync::Arc::new(e));
    let mut reader = file;
    reader.seek(SeekFrom::Start(wanted.start)).map_err(io)?;
    // read_to_end fills the spare capacity without zeroing it first.
    let mut buf = Vec::with_capacity(len);
    reader.take(len as u64).read_to_end(&mut buf).map_err(io)?;
    if buf.len() != len {
        return Err(StorageError::Other(format!(
            "{key}: {len} bytes were expected but {} could be read (the file changed while it was read)",
            buf.len()
        )));
    }
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_open_and_everything_else_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-safe-file-{}", std::process::id()));
        let outside_dir = dir.with_extension("outside");
        std::fs::create_dir_all(dir.join("c/0")).unwrap();
        std::fs::create_dir_all(&outside_dir).unwrap();
        std::fs::write(dir.join("c/1"), b"abc").unwrap();
        std::fs::write(outside_dir.join("0"), b"secret").unwrap();
        nix::unistd::mkfifo(&dir.join("c/2"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::os::unix::fs::symlink(&outside_dir, dir.join("d")).unwrap();
        std::os::unix::fs::symlink(dir.join("c"), dir.join("e")).unwrap();
        let root = SafeRoot::new(&dir);
        let (_, len) = root.open_key("c/1").unwrap().unwrap();
        assert_eq!(len, 3);
        assert!(root.open_key("c/9").unwrap().is_none());
        assert!(root.open_key("c/1/0").unwrap().is_none());
        let dir_err = root.open_key("c/0").unwrap_err().to_string();
        assert!(dir_err.contains("a directory"), "{dir_err}");
        let fifo_err = root.open_key("c/2").unwrap_err().to_string();
        assert!(fifo_err.contains("FIFO"), "{fifo_err}");
        let out = root.open_key("d/0").unwrap_err();
        assert_eq!(out.kind(), ErrorKind::PermissionDenied);
        assert!(root.open_key("e/1").unwrap().is_some());
        assert!(root.open_key("c/../c/1").is_err());
        for bad in ["../x", "a/../b", "./a", "a//b", "../", "/a"] {
            assert!(root.open_key(bad).is_err(), "{bad}");
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&outside_dir);
    }

    #[test]
    fn keys_are_read_where_the_store_has_them_now() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-safe-dirs-{}", std::process::id()));
        let moved = dir.with_extension("moved");
        std::fs::create_dir_all(dir.join("c/0")).unwrap();
        std::fs::write(dir.join("c/0/1"), b"old").unwrap();
        let root = SafeRoot::new(&dir);
        let read = |key: &str| {
            let (file, size) = root.open_key(key).unwrap().expect("stored");
            read_range(&file, size, key, None).unwrap()
        };
        assert_eq!(&read("c/0/1")[..], b"old");
        // The directory removed and made again: the new key is read.
        std::fs::remove_dir_all(dir.join("c/0")).unwrap();
        std::fs::create_dir_all(dir.join("c/0")).unwrap();
        std::fs::write(dir.join("c/0/1"), b"new!").unwrap();
        assert_eq!(&read("c/0/1")[..], b"new!");
        assert!(root.open_key("c/0/2").unwrap().is_none());
        // Moved out of the store and replaced by a link to where it went: refused.
        std::fs::rename(dir.join("c/0"), &moved).unwrap();
        std::os::unix::fs::symlink(&moved, dir.join("c/0")).unwrap();
        let out = root.open_key("c/0/1").unwrap_err();
        assert_eq!(out.kind(), ErrorKind::PermissionDenied);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&moved);
    }
}
