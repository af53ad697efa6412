//! The facts zarrbuf memoizes per array (`src/zarr/array/facts.rs`: data type, inner chunks
//! of shards, unit plans, the metadata fingerprint) follow the array they are asked for:
//! reads after `set_shape` on every route (cached included) see the new shape, and arrays
//! of equal metadata in other stores or at other paths never share a cache identity.

use std::ops::Range;
use std::sync::Arc;
use zarrbuf::cache::{ArrayId, ChunkCache};
use zarrbuf::options::{PipelineMode, ReadOptions};
use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::store::MemoryStore;

/// A 6×8 float32 array of 8×8 shards of 4×4 inner chunks, written with 1, 2, 3, ...
fn sharded(store: Arc<MemoryStore>, path: &str) -> Array<MemoryStore> {
    let mut b = ArrayBuilder::new(vec![6, 8], vec![8, 8], data_type::float32(), 0f32);
    b.subchunk_shape(vec![4, 4]);
    let array = b.build(store, path).unwrap();
    let data: Vec<f32> = (1..=48).map(|v| v as f32).collect();
    array
        .write_all(&NDBuffer::from_vec(data, &[6, 8]).unwrap())
        .unwrap();
    array
}

/// Reads `rows` of `array` by every host route: the small route (`Auto`), zarrs
/// (`Direct`), the staged pipeline and through `cache` (twice: cold, then warm).
fn read_every_way(
    array: &Array<MemoryStore>,
    rows: Range<u64>,
    cache: &ChunkCache,
) -> Vec<(&'static str, Vec<f32>)> {
    let subset = [rows, 0..8];
    let cpu = BufferPrototype::cpu();
    let modes = [
        ("auto", ReadOptions::default()),
        (
            "direct",
            ReadOptions::default().with_mode(PipelineMode::Direct),
        ),
        (
            "staged",
            ReadOptions::default().with_mode(PipelineMode::Staged),
        ),
        (
            "cached cold",
            ReadOptions::default().with_cache(cache.clone()),
        ),
        (
            "cached warm",
            ReadOptions::default().with_cache(cache.clone()),
        ),
    ];
    modes
        .into_iter()
        .map(|(name, opts)| {
            let out = array
                .read_opt(&subset, &cpu, &opts)
                .unwrap_or_else(|e| panic!("{name} read of {subset:?}: {e}"));
            (name, out.to_vec::<f32>().unwrap())
        })
        .collect()
}

/// What rows `rows` hold: the written values in the first 6 rows, the fill value below.
fn expected(rows: Range<u64>) -> Vec<f32> {
    rows.flat_map(|r| (0..8).map(move |c| if r < 6 { (r * 8 + c + 1) as f32 } else { 0.0 }))
        .collect()
}

#[test]
fn reads_follow_set_shape_on_every_route() {
    let mut array = sharded(Arc::new(MemoryStore::new()), "/grows");
    let cache = ChunkCache::new(16 << 20);
    for (route, got) in read_every_way(&array, 0..6, &cache) {
        assert_eq!(got, expected(0..6), "{route}, before");
    }
    // Grown past the written shard and into shards never stored.
    array.set_shape(vec![20, 8]).unwrap();
    for (route, got) in read_every_way(&array, 0..20, &cache) {
        assert_eq!(got, expected(0..20), "{route}, grown");
    }
    // Shrunk inside the first inner chunk row.
    array.set_shape(vec![3, 8]).unwrap();
    for (route, got) in read_every_way(&array, 0..3, &cache) {
        assert_eq!(got, expected(0..3), "{route}, shrunk");
    }
    assert!(
        array.read(&[0..4, 0..8], &BufferPrototype::cpu()).is_err(),
        "rows past the new end are refused"
    );
}

#[test]
fn arrays_of_equal_metadata_elsewhere_never_share_an_identity() {
    let store = Arc::new(MemoryStore::new());
    let a = sharded(store.clone(), "/a");
    // The same codec chain and metadata, in another store object: the memo's facts are
    // shared, the identity is not.
    let elsewhere = a.with_storage(Arc::new(MemoryStore::new()));
    let other_path = sharded(store.clone(), "/b");
    let id = ArrayId::of(&a);
    assert_eq!(id, ArrayId::of(&a));
    assert_ne!(id, ArrayId::of(&elsewhere));
    assert_ne!(id, ArrayId::of(&other_path));
    assert_ne!(ArrayId::of(&elsewhere), ArrayId::of(&other_path));
    // A cache shared by the three keeps their chunks apart: the empty store reads zeros.
    let cache = ChunkCache::new(16 << 20);
    let opts = ReadOptions::default().with_cache(cache);
    let cpu = BufferPrototype::cpu();
    for _ in 0..2 {
        let got = |x: &Array<MemoryStore>| {
            x.read_opt(&[0..6, 0..8], &cpu, &opts)
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        };
        assert_eq!(got(&a), expected(0..6));
        assert_eq!(got(&elsewhere), vec![0.0; 48]);
        assert_eq!(got(&other_path), expected(0..6));
    }
}
