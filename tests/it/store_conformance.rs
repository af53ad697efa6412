//! One suite for every store zarrbuf opens, as object_store runs one against each backend:
//! each check below is written once and run against the directory store, a zip file (its
//! read half), memory, S3 on the local server (skipped visibly without it) and icechunk
//! (feature `icechunk`; a writable session on a branch, then the committed snapshot
//! read-only).
//!
//! Every backend holds the same small zarr v3 hierarchy ([`CONTENT`]) when the checks run:
//! listings, whole and ranged reads, missing keys; writable stores also replace keys whole
//! (a concurrent reader sees the old or the new value, never part of one) and erase them;
//! read-only ones refuse every write with their sentence.

use crate::common::s3::{create_bucket, opts_ref};
use crate::common::{Need, skip};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{Bytes, ReadableWritableListableStorageTraits, StoreKey, StorePrefix};

type Store = Arc<dyn ReadableWritableListableStorageTraits>;

const ROOT: &str = r#"{"zarr_format":3,"node_type":"group","attributes":{}}"#;

/// A 1-d uint8 array of two chunks of `n` bytes.
fn array_json(n: usize) -> String {
    format!(
        r#"{{"zarr_format":3,"node_type":"array","shape":[{}],"data_type":"uint8",
        "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[{n}]}}}},
        "chunk_key_encoding":{{"name":"default","configuration":{{"separator":"/"}}}},
        "fill_value":0,"codecs":[{{"name":"bytes"}}],"attributes":{{}}}}"#,
        2 * n
    )
}

/// Deterministic bytes that differ at every offset a ranged read might cut.
fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The hierarchy every backend holds: key → value.
fn content() -> BTreeMap<String, Vec<u8>> {
    let mut c = BTreeMap::new();
    c.insert("zarr.json".into(), ROOT.as_bytes().to_vec());
    c.insert("a/zarr.json".into(), array_json(1000).into_bytes());
    c.insert("a/c/0".into(), pattern(1, 1000));
    c.insert("a/c/1".into(), pattern(2, 1000));
    c.insert("g/zarr.json".into(), ROOT.as_bytes().to_vec());
    c.insert("g/b/zarr.json".into(), array_json(16).into_bytes());
    c.insert("g/b/c/0".into(), pattern(3, 16));
    c
}

fn key(k: &str) -> StoreKey {
    StoreKey::new(k).unwrap()
}

fn prefix(p: &str) -> StorePrefix {
    StorePrefix::new(p).unwrap()
}

/// Writes the content, metadata first (icechunk takes chunks only of arrays it knows).
fn put_content(store: &Store) {
    let mut entries: Vec<(String, Vec<u8>)> = content().into_iter().collect();
    entries.sort_by_key(|(k, _)| (!k.ends_with("zarr.json"), k.matches('/').count()));
    for (k, v) in entries {
        store
            .set(&key(&k), Bytes::from(v))
            .unwrap_or_else(|e| panic!("{k}: {e}"));
    }
}

// ---- The checks, each written once. ----

/// `list`, `list_prefix`, `list_dir`, `size_key` and `size_prefix` agree with the content.
fn lists_the_keys(name: &str, store: &Store) {
    let c = content();
    let mut all: Vec<String> = store
        .list()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    all.sort();
    assert_eq!(all, c.keys().cloned().collect::<Vec<_>>(), "{name}: list");
    let mut under_a: Vec<String> = store
        .list_prefix(&prefix("a/"))
        .unwrap()
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    under_a.sort();
    assert_eq!(
        under_a,
        ["a/c/0", "a/c/1", "a/zarr.json"],
        "{name}: list_prefix"
    );
    let root = store.list_dir(&prefix("")).unwrap();
    let keys: Vec<&str> = root.keys().iter().map(StoreKey::as_str).collect();
    let mut dirs: Vec<&str> = root.prefixes().iter().map(StorePrefix::as_str).collect();
    dirs.sort_unstable();
    assert_eq!(keys, ["zarr.json"], "{name}: list_dir keys");
    assert_eq!(dirs, ["a/", "g/"], "{name}: list_dir prefixes");
    for (k, v) in &c {
        assert_eq!(
            store.size_key(&key(k)).unwrap(),
            Some(v.len() as u64),
            "{name}: size of {k}"
        );
    }
    let a_bytes: u64 = c
        .iter()
        .filter(|(k, _)| k.starts_with("a/"))
        .map(|(_, v)| v.len() as u64)
        .sum();
    assert_eq!(
        store.size_prefix(&prefix("a/")).unwrap(),
        a_bytes,
        "{name}: size_prefix"
    );
}

/// Whole values, and byte ranges from the start, to the end and from the end.
fn reads_whole_values_and_ranges(name: &str, store: &Store) {
    for (k, v) in content() {
        let got = store.get(&key(&k)).unwrap().expect("present");
        assert_eq!(&got[..], &v[..], "{name}: {k}");
    }
    let v = pattern(1, 1000);
    let cases = [
        (ByteRange::FromStart(0, Some(10)), &v[..10]),
        (ByteRange::FromStart(100, Some(250)), &v[100..350]),
        (ByteRange::FromStart(990, None), &v[990..]),
        (ByteRange::Suffix(7), &v[993..]),
    ];
    for (range, want) in cases {
        let got = store
            .get_partial(&key("a/c/0"), range)
            .unwrap_or_else(|e| panic!("{name}: {range:?}: {e}"))
            .expect("present");
        assert_eq!(&got[..], want, "{name}: {range:?}");
    }
    // Several ranges of one key in one call, in order.
    let ranges = [ByteRange::FromStart(1, Some(2)), ByteRange::Suffix(3)];
    let parts: Vec<Bytes> = store
        .get_partial_many(&key("a/c/0"), Box::new(ranges.into_iter()))
        .unwrap()
        .expect("present")
        .map(Result::unwrap)
        .collect();
    assert_eq!(parts.len(), 2, "{name}");
    assert_eq!(&parts[0][..], &v[1..3], "{name}");
    assert_eq!(&parts[1][..], &v[997..], "{name}");
}

/// A key that is not there reads as missing (not as an error), whole or in part, and lists
/// as nothing.
fn missing_keys_read_as_missing(name: &str, store: &Store) {
    // Zarr-shaped keys: icechunk refuses keys no zarr hierarchy has.
    for k in ["a/c/9", "g/b/c/1", "g/x/zarr.json", "x/zarr.json"] {
        assert!(store.get(&key(k)).unwrap().is_none(), "{name}: get {k}");
        let size = store.size_key(&key(k)).unwrap();
        assert!(size.is_none(), "{name}: size of {k}: {size:?}");
        let part = store
            .get_partial(&key(k), ByteRange::FromStart(0, Some(1)))
            .unwrap_or_else(|e| panic!("{name}: partial {k}: {e}"));
        assert!(part.is_none(), "{name}: partial {k}");
    }
    // A prefix that holds nothing lists as nothing; icechunk lists only the prefixes of its
    // groups and arrays and refuses others, naming the prefix.
    for absent in ["nope/", "g/x/"] {
        match store.list_prefix(&prefix(absent)) {
            Ok(keys) => {
                assert!(keys.is_empty(), "{name}: list {absent}: {keys:?}");
                assert_eq!(store.size_prefix(&prefix(absent)).unwrap(), 0, "{name}");
            }
            Err(e) if name.starts_with("icechunk") => {
                assert!(e.to_string().contains(absent.trim_end_matches('/')), "{e}");
            }
            Err(e) => panic!("{name}: list {absent}: {e}"),
        }
    }
}

/// A write replaces a key whole: a reader running beside the writer sees the old value or
/// the new one, never part of either; an erase removes the key (`value_bytes`: the size of
/// the values, larger where a torn write would show).
fn writes_replace_keys_whole(name: &str, store: &Store, value_bytes: usize, writes: usize) {
    let k = key("a/c/1");
    let (old, new) = (vec![1u8; value_bytes], vec![2u8; value_bytes / 2]);
    store.set(&k, Bytes::from(old.clone())).unwrap();
    let done = AtomicBool::new(false);
    let reads = AtomicUsize::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..writes {
                let v = if i % 2 == 0 { &new } else { &old };
                store.set(&k, Bytes::from(v.clone())).unwrap();
            }
            done.store(true, Ordering::SeqCst);
        });
        while !done.load(Ordering::SeqCst) || reads.load(Ordering::SeqCst) == 0 {
            let got = store
                .get(&k)
                .unwrap()
                .expect("never missing while replaced");
            assert!(
                got[..] == old[..] || got[..] == new[..],
                "{name}: a read saw part of a value ({} bytes, first {:?}, last {:?})",
                got.len(),
                got.first(),
                got.last()
            );
            reads.fetch_add(1, Ordering::SeqCst);
        }
    });
    let last = if writes % 2 == 1 { &new } else { &old };
    assert_eq!(&store.get(&k).unwrap().unwrap()[..], &last[..], "{name}");
    store.erase(&k).unwrap();
    assert!(store.get(&k).unwrap().is_none(), "{name}: erased");
    store.set(&k, Bytes::from(pattern(2, 1000))).unwrap();
}

/// Every write to a read-only store is refused with its sentence, and changes nothing.
fn refuses_writes(name: &str, store: &Store, sentence: &str) {
    let refused = |what: &str, e: zarrs::storage::StorageError| {
        let text = e.to_string();
        assert!(text.contains(sentence), "{name}: {what}: {text}");
    };
    refused(
        "set",
        store
            .set(&key("a/c/0"), Bytes::from_static(b"x"))
            .unwrap_err(),
    );
    refused(
        "new key",
        store
            .set(&key("new/zarr.json"), Bytes::from_static(ROOT.as_bytes()))
            .unwrap_err(),
    );
    refused("erase", store.erase(&key("a/c/0")).unwrap_err());
    refused(
        "erase_prefix",
        store.erase_prefix(&prefix("a/")).unwrap_err(),
    );
    assert_eq!(
        &store.get(&key("a/c/0")).unwrap().unwrap()[..],
        &pattern(1, 1000)[..],
        "{name}: unchanged"
    );
}

/// The checks every backend passes.
fn readable(name: &str, store: &Store) {
    lists_the_keys(name, store);
    reads_whole_values_and_ranges(name, store);
    missing_keys_read_as_missing(name, store);
}

/// The checks of a writable backend: the content is written through the store itself.
fn writable(name: &str, store: &Store, value_bytes: usize, writes: usize) {
    put_content(store);
    readable(name, store);
    writes_replace_keys_whole(name, store, value_bytes, writes);
    readable(name, store);
}

// ---- The backends. ----

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("store-conformance-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn directory_store() {
    let dir = scratch("directory");
    std::fs::create_dir_all(&dir).unwrap();
    let store = zarrbuf::store::open_store(dir.to_str().unwrap()).unwrap();
    writable("directory", &store, 4 << 20, 40);
    // No temporary file is left beside the keys.
    let names: Vec<String> = std::fs::read_dir(dir.join("a/c"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn memory_store() {
    let store = zarrbuf::store::open_store("memory://").unwrap();
    writable("memory", &store, 4 << 20, 40);
}

/// A zip file of `entries` (stored, not compressed), as `zip -0` writes one.
fn write_zip(path: &Path, entries: &BTreeMap<String, Vec<u8>>) {
    let mut out: Vec<u8> = Vec::new();
    let mut central: Vec<u8> = Vec::new();
    let u16le = |v: &mut Vec<u8>, x: u16| v.extend_from_slice(&x.to_le_bytes());
    let u32le = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
    for (name, data) in entries {
        let offset = out.len() as u32;
        let crc = crc32fast::hash(data);
        let (n, len) = (name.len() as u16, data.len() as u32);
        // Local file header: version 2.0, no flags, stored, 1980-01-01.
        u32le(&mut out, 0x0403_4b50);
        for x in [20, 0, 0, 0, 33] {
            u16le(&mut out, x);
        }
        for x in [crc, len, len] {
            u32le(&mut out, x);
        }
        u16le(&mut out, n);
        u16le(&mut out, 0);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        // Its central directory entry.
        u32le(&mut central, 0x0201_4b50);
        for x in [20, 20, 0, 0, 0, 33] {
            u16le(&mut central, x);
        }
        for x in [crc, len, len] {
            u32le(&mut central, x);
        }
        for x in [n, 0, 0, 0, 0] {
            u16le(&mut central, x);
        }
        u32le(&mut central, 0);
        u32le(&mut central, offset);
        central.extend_from_slice(name.as_bytes());
    }
    let (cd_offset, cd_size, count) =
        (out.len() as u32, central.len() as u32, entries.len() as u16);
    out.extend_from_slice(&central);
    u32le(&mut out, 0x0605_4b50);
    for x in [0, 0, count, count] {
        u16le(&mut out, x);
    }
    u32le(&mut out, cd_size);
    u32le(&mut out, cd_offset);
    u16le(&mut out, 0);
    std::fs::write(path, out).unwrap();
}

#[test]
fn zip_store_reads() {
    let dir = scratch("zip");
    std::fs::create_dir_all(&dir).unwrap();
    let zip = dir.join("store.zip");
    write_zip(&zip, &content());
    let location = zip.to_str().unwrap();
    let store = zarrbuf::store::open_store(location).unwrap();
    readable("zip", &store);
    refuses_writes("zip", &store, "zip stores are read-only in zarrbuf");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn s3_store() {
    let Ok(endpoint) = std::env::var("ZARRBUF_TEST_S3_ENDPOINT") else {
        skip(
            Need::Servers,
            "the store conformance suite against the local S3 server",
            "ZARRBUF_TEST_S3_ENDPOINT is not set: source <(bash scripts/start-test-servers.sh)",
        );
        return;
    };
    let bucket = "zarrbuf-conformance";
    create_bucket(&endpoint, bucket);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let url = format!("s3://{bucket}/run-{}-{stamp}", std::process::id());
    let o = crate::common::s3::options(&endpoint, "10s");
    let opts = zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o));
    let store = zarrbuf::store::open_store_opt(&url, &opts).unwrap();
    writable("s3", &store, 256 << 10, 10);
}

#[cfg(feature = "icechunk")]
#[test]
fn icechunk_store() {
    let dir = scratch("icechunk");
    let location = dir.to_str().unwrap();
    let writer = zarrbuf::icechunk::IcechunkWriter::open(location, "main").unwrap();
    let session = writer.store();
    writable("icechunk session", &session, 1 << 20, 20);
    drop(session);
    writer.commit("conformance").unwrap();
    // The committed snapshot, read-only.
    let store = zarrbuf::store::open_store(location).unwrap();
    readable("icechunk snapshot", &store);
    refuses_writes(
        "icechunk snapshot",
        &store,
        "is open for reading at branch main",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
