//! One identity per array in the decoded-chunk cache: however a user splits a place into a
//! store location and a node path (`s.zarr` with `g/a`, `s.zarr/g` with `a`, a `file://`
//! URL, trailing slashes, `./`, `..`, a symlink), it is one array to the cache, so a write
//! through any spelling drops what a cache filled through any other holds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use zarrbuf::cache::{ArrayId, ChunkCache};
use zarrbuf::options::ReadOptions;
use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
use zarrs::array::{ArrayBuilder, data_type};

const SIDE: u64 = 16;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("cache-identity")
        .join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// `SIDE`×`SIDE` int32 in 8×8 zstd chunks at node `/g/a` of a new directory store, all `0`.
fn store_with_array(dir: &Path) {
    let store = zarrbuf::store::open_store(dir.to_str().unwrap()).unwrap();
    let array = ArrayBuilder::new(vec![SIDE, SIDE], vec![8, 8], data_type::int32(), 0i32)
        .bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(
            1, false,
        ))])
        .build(store, "/g/a")
        .unwrap();
    array.store_metadata().unwrap();
}

/// Every spelling of `dir`'s node `/g/a` as (store location, node path).
fn spellings(dir: &Path, link: &Path) -> Vec<(String, String)> {
    let d = dir.display();
    let mut out: Vec<(String, String)> = vec![
        (format!("{d}"), "g/a".into()),
        (format!("{d}/"), "/g/a/".into()),
        (format!("file://{d}"), "g/a".into()),
        (format!("{d}/./g/../"), "g/a".into()),
        (format!("{d}/g"), "a".into()),
        (format!("{d}/g/"), "/a".into()),
        (format!("file://{d}/g/"), "a/".into()),
        (format!("{d}/./g"), "a".into()),
        (format!("{d}/g/a"), String::new()),
        (format!("{}/g", link.display()), "a".into()),
    ];
    // A relative path from the current directory, when the scratch directory is below it.
    let here = std::env::current_dir().unwrap().canonicalize().unwrap();
    if let Ok(rel) = dir.strip_prefix(&here) {
        out.push((format!("./{}", rel.display()), "g/a".into()));
        out.push((format!("./{}/g/", rel.display()), "a".into()));
    }
    out
}

#[test]
fn a_write_through_any_spelling_is_seen_through_every_other() {
    let root = scratch("spellings");
    let dir = root.join("s.zarr");
    std::fs::create_dir_all(&dir).unwrap();
    store_with_array(&dir);
    let link = root.join("link.zarr");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let spelled = spellings(&dir, &link);
    let arrays: Vec<_> = spelled
        .iter()
        .map(|(location, path)| {
            zarrbuf::open(location, path)
                .unwrap_or_else(|e| panic!("open {location:?} {path:?}: {e}"))
        })
        .collect();
    let first = ArrayId::of(&arrays[0]);
    for (a, (location, path)) in arrays.iter().zip(&spelled) {
        assert_eq!(ArrayId::of(a), first, "{location:?} with {path:?}");
    }
    let cpu = BufferPrototype::cpu();
    let all = [0..SIDE, 0..SIDE];
    let mut value = 0i32;
    for (w, writer) in arrays.iter().enumerate() {
        for (r, reader) in arrays.iter().enumerate() {
            if r == w {
                continue;
            }
            // The reader's own cache, filled with what is there now.
            let opts = ReadOptions::default().with_cache(ChunkCache::new(1 << 20));
            let before = reader.read_opt(&all, &cpu, &opts).unwrap();
            assert_eq!(before.to_vec::<i32>().unwrap(), vec![value; 256]);
            value += 1;
            let data = NDBuffer::from_vec(vec![value; 256], &[16, 16]).unwrap();
            writer.write(&all, &data).unwrap();
            let after = reader.read_opt(&all, &cpu, &opts).unwrap();
            assert_eq!(
                after.to_vec::<i32>().unwrap(),
                vec![value; 256],
                "written through {:?}, read through {:?} (its cache kept the old values)",
                spelled[w],
                spelled[r]
            );
        }
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn other_nodes_and_other_stores_stay_apart() {
    let root = scratch("apart");
    for name in ["s.zarr", "t.zarr"] {
        std::fs::create_dir_all(root.join(name)).unwrap();
        store_with_array(&root.join(name));
    }
    let r = root.display();
    let a = zarrbuf::open(&format!("{r}/s.zarr"), "g/a").unwrap();
    let other_store = zarrbuf::open(&format!("{r}/t.zarr/g"), "a").unwrap();
    assert_ne!(ArrayId::of(&a), ArrayId::of(&other_store));
    // A node named like the joined path of another store is not that store's node.
    std::fs::create_dir_all(root.join("s.zarr/g/a2")).unwrap();
    let store = zarrbuf::store::open_store(&format!("{r}/s.zarr")).unwrap();
    let b = ArrayBuilder::new(vec![SIDE, SIDE], vec![8, 8], data_type::int32(), 0i32)
        .build(store, "/g/a2")
        .unwrap();
    b.store_metadata().unwrap();
    let b = zarrbuf::open(&format!("{r}/s.zarr/g"), "a2").unwrap();
    assert_ne!(ArrayId::of(&a), ArrayId::of(&b));
    std::fs::remove_dir_all(&root).unwrap();
}
