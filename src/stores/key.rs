//! Which store keys stay inside their store: the one check every key from outside zarrbuf —
//! consolidated metadata, a store's listing, a caller's key — passes before a store or a
//! listing uses it.
//!
//! zarr keys are relative, `/`-separated names; zarrs' `StoreKey` takes `../x` and a
//! directory store would join it onto its root and leave the store (a hostile consolidated
//! `.zmetadata` once sent `zarrbuf info` over the whole file system). A key here may not be
//! absolute, may not hold a `.` or `..` component, and may not hold a NUL byte.

use crate::errors::{Error, Result};

/// Why `key` would leave its store, or `None` when it stays inside.
pub(crate) fn escape(key: &str) -> Option<&'static str> {
    if key.starts_with('/') || key.starts_with('\\') {
        Some("it is absolute")
    } else if key.split('/').any(|c| c == ".." || c == ".") {
        Some("it has a '.' or '..' component")
    } else if key
        .strip_suffix('/')
        .unwrap_or(key)
        .split('/')
        .any(str::is_empty)
        && !key.is_empty()
    {
        Some("it has an empty component")
    } else if key.contains('\0') {
        Some("it holds a NUL byte")
    } else {
        None
    }
}

/// An error naming `key` (found in `source`, e.g. "the consolidated metadata of group g") when
/// it would leave its store.
pub(crate) fn check_key(key: &str, source: &str) -> Result<()> {
    match escape(key) {
        None => Ok(()),
        Some(why) => Err(Error::store(
            key,
            format!(
                "{source} names a key outside the store ({why}); the store is damaged or \
                 hostile, and zarrbuf reads only keys inside it"
            ),
            None,
        )),
    }
}

/// [`check_key`] for a store's own methods: the error is a zarrs `StorageError`.
pub(crate) fn check_storage_key(
    key: &str,
) -> std::result::Result<(), zarrs::storage::StorageError> {
    match escape(key) {
        None => Ok(()),
        Some(why) => Err(zarrs::storage::StorageError::Other(format!(
            "the key {key:?} is outside the store ({why}); zarrbuf reads and writes only keys \
             inside it"
        ))),
    }
}

/// [`check_key`] for the file-level code of the directory store: the error is an
/// `std::io::Error` of kind `InvalidInput`.
pub(crate) fn check_io_key(key: &str) -> std::io::Result<()> {
    check_storage_key(key)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_leave_the_store_are_refused() {
        for ok in [
            "zarr.json",
            "a/b/c/0.0",
            "c/0/1",
            ".zarray",
            "a/.zattrs",
            "x..y",
            "..a",
            "a/b/",
            "",
        ] {
            assert!(escape(ok).is_none(), "{ok}");
            assert!(check_key(ok, "test").is_ok());
        }
        for bad in [
            "../x",
            "a/../../etc",
            "/etc/passwd",
            "a/./b",
            "..",
            "a/..",
            "\\x",
            "a\0b",
            "a//b",
        ] {
            assert!(escape(bad).is_some(), "{bad}");
            let err = check_key(bad, "the listing").unwrap_err().to_string();
            assert!(
                err.contains("the listing names a key outside the store"),
                "{err}"
            );
            assert!(check_storage_key(bad).is_err());
        }
    }
}
