//! The file names of a zarr node's metadata documents, v3 and v2, which stores, checks,
//! hierarchy walks and latency timing tell apart from chunk data.

/// The metadata document names a zarr node may hold.
pub(crate) const METADATA_NAMES: [&str; 5] =
    ["zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"];

/// Whether store `key` (`/`-separated) names a metadata document, by its last segment.
pub(crate) fn is_metadata_key(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    METADATA_NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::is_metadata_key;

    #[test]
    fn metadata_keys_are_told_from_data_keys() {
        for key in [
            "zarr.json",
            "a/b/zarr.json",
            "x/.zarray",
            ".zgroup",
            "g/.zattrs",
            ".zmetadata",
        ] {
            assert!(is_metadata_key(key), "{key}");
        }
        for key in [
            "a/c/0/0",
            "a/0.0",
            "c/zarr.json.bak",
            "zarr.json/c/0",
            "a/.zarray0",
        ] {
            assert!(!is_metadata_key(key), "{key}");
        }
    }
}
