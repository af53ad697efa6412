//! The bound on a zip entry zarrbuf inflates: a compressed entry is inflated whole into a
//! buffer of its declared uncompressed size (`zip_entry_read.rs`), so a central directory
//! entry declaring 2^63 bytes would be an allocation of 2^63 bytes.
//!
//! An entry no larger than the zip file itself is inflated as it is (it takes at most what the
//! archive holds on disk). A larger one is inflated only when it fits in half the memory this
//! process may still take (the entry, and the bytes cut from it). A chunk's entry is also held
//! to the chunk's own bound before it is fetched (`zarr/decode/stored_size.rs` asks the declared size),
//! and no entry inflates past its declared size.

use zarrs::storage::{StorageError, StoreKey};

/// Refuses entry `key` of the zip file at `location` (`file_bytes` long) when it declares
/// `declared` uncompressed bytes beyond the bound (see the module docs).
pub(crate) fn check_entry(
    location: &str,
    key: &StoreKey,
    declared: Option<u64>,
    file_bytes: u64,
) -> Result<(), StorageError> {
    let Some(declared) = declared else {
        return Ok(());
    };
    if declared <= file_bytes {
        return Ok(());
    }
    let room = crate::memory_limit::available_bytes().unwrap_or(u64::MAX) / 2;
    if declared <= room {
        return Ok(());
    }
    Err(StorageError::Other(format!(
        "the zip file {location} declares its entry {key} {declared} bytes when inflated, more \
         than the {room} bytes this process can inflate it into; the zip file is damaged, or \
         extract it and read the directory"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_entries_beyond_the_file_and_the_memory_are_refused() {
        let key = StoreKey::new("a/c/0").unwrap();
        assert!(check_entry("x.zip", &key, None, 100).is_ok());
        assert!(check_entry("x.zip", &key, Some(100), 100).is_ok());
        assert!(check_entry("x.zip", &key, Some(4096), 100).is_ok());
        let err = check_entry("x.zip", &key, Some(u64::MAX), 100)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("x.zip") && err.contains("a/c/0") && err.contains("18446744073709551615"),
            "{err}"
        );
    }
}
