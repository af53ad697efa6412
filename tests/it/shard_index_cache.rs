//! The shard-index cache (`zarr/shard/index_cache.rs`) and the small-read route
//! (`pipeline/read/small_read.rs`): a shard's index is fetched once per store object however
//! many reads go through it, reads equal the data zarr-python wrote, a write through zarrbuf
//! drops the indexes of the shards it stored, a damaged index stays an error on every read,
//! and small reads of every route give the same bytes.

use crate::common::fixtures;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use zarrbuf::options::{PipelineMode, ReadOptions};
use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
use zarrs::array::codec::ZstdCodec;
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{
    Bytes, MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey, WritableStorageTraits,
};

/// A memory store that counts the ranged reads of each key (the index of a shard whose
/// index is at its end is read as a suffix).
#[derive(Default)]
struct Counting {
    inner: MemoryStore,
    suffix_reads: Mutex<HashMap<String, usize>>,
}

impl Counting {
    fn index_reads(&self) -> usize {
        self.suffix_reads.lock().unwrap().values().sum()
    }
}

impl ReadableStorageTraits for Counting {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let ranges: Vec<ByteRange> = byte_ranges.collect();
        let suffixes = ranges
            .iter()
            .filter(|r| matches!(r, ByteRange::Suffix(_)))
            .count();
        *self
            .suffix_reads
            .lock()
            .unwrap()
            .entry(key.to_string())
            .or_default() += suffixes;
        self.inner
            .get_partial_many(key, Box::new(ranges.into_iter()))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.inner.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

crate::common::writable_through_inner!(Counting);

const SHAPE: [u64; 3] = [8, 64, 64];

fn values(seed: f32) -> Vec<f32> {
    (0..SHAPE.iter().product::<u64>())
        .map(|v| v as f32 * 0.25 + seed)
        .collect()
}

/// An 8×64×64 float32 array of 4×32×32 shards of 4×16×16 zstd inner chunks, written.
fn sharded(store: &Arc<Counting>) -> Array<Counting> {
    let mut b = ArrayBuilder::new(
        SHAPE.to_vec(),
        vec![4u64, 32, 32],
        data_type::float32(),
        0.0f32,
    );
    b.subchunk_shape(vec![4u64, 16, 16]);
    b.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
    let a = b.build(store.clone(), "/a").unwrap();
    a.write_all(&NDBuffer::from_vec(values(0.0), &[8, 64, 64]).unwrap())
        .unwrap();
    a
}

/// `values` cut to `subset` (of an array of shape SHAPE).
fn cut(values: &[f32], subset: &[Range<u64>]) -> Vec<f32> {
    let mut out = Vec::new();
    for z in subset[0].clone() {
        for y in subset[1].clone() {
            for x in subset[2].clone() {
                out.push(values[((z * SHAPE[1] + y) * SHAPE[2] + x) as usize]);
            }
        }
    }
    out
}

fn patches() -> Vec<Vec<Range<u64>>> {
    vec![
        vec![0..1, 0..16, 0..16],
        vec![1..2, 10..40, 20..50], // four inner chunks of four shards
        vec![5..6, 30..34, 60..64],
        vec![3..5, 0..64, 31..33],
        vec![7..8, 63..64, 0..64],
    ]
}

#[test]
fn each_shard_index_is_fetched_once_per_store() {
    let store = Arc::new(Counting::default());
    let a = sharded(&store);
    let cpu = BufferPrototype::cpu();
    let expected = values(0.0);
    let before = store.index_reads();
    for _ in 0..3 {
        for p in patches() {
            let got = a.read(&p, &cpu).unwrap();
            assert_eq!(got.to_vec::<f32>().unwrap(), cut(&expected, &p), "{p:?}");
        }
    }
    // Every one of the 2×2×2 shards was touched, its index fetched once.
    assert_eq!(store.index_reads() - before, 8);
    // Another store object over the same bytes starts without indexes.
    let other = Arc::new(Counting::default());
    let b = sharded(&other);
    let before = other.index_reads();
    b.read(&patches()[1], &cpu).unwrap();
    assert_eq!(other.index_reads() - before, 4);
}

#[test]
fn a_write_through_zarrbuf_drops_the_indexes_of_its_shards() {
    let store = Arc::new(Counting::default());
    let a = sharded(&store);
    let cpu = BufferPrototype::cpu();
    let p = vec![1..2u64, 10..40, 20..50];
    a.read(&p, &cpu).unwrap();
    // New values of another size when compressed: every inner chunk moves in its shard.
    let fresh: Vec<f32> = (0..SHAPE.iter().product::<u64>())
        .map(|v| ((v * 2_654_435_761) % 1000) as f32)
        .collect();
    for mode in [PipelineMode::Direct, PipelineMode::Staged] {
        let before = store.index_reads();
        let opts = zarrbuf::options::WriteOptions::default().with_mode(mode);
        a.write_all_opt(
            &NDBuffer::from_vec(fresh.clone(), &[8, 64, 64]).unwrap(),
            &opts,
        )
        .unwrap();
        let got = a.read(&p, &cpu).unwrap();
        assert_eq!(got.to_vec::<f32>().unwrap(), cut(&fresh, &p), "{mode:?}");
        assert!(
            store.index_reads() > before,
            "{mode:?}: the indexes were read again"
        );
    }
}

#[test]
fn a_damaged_index_is_an_error_on_every_read() {
    let store = Arc::new(Counting::default());
    let a = sharded(&store);
    let key = a.chunk_key(&[0, 0, 0]);
    let mut bytes = store.inner.get(&key).unwrap().unwrap().to_vec();
    // The last inner chunk's entry claims a huge size (its crc32c is not there to catch it:
    // the index codecs are zarrs' default, bytes and crc32c, so recompute nothing and break
    // the checksum too).
    let n = bytes.len();
    bytes[n - 12] ^= 0xff;
    store.inner.set(&key, Bytes::from(bytes)).unwrap();
    let cpu = BufferPrototype::cpu();
    for _ in 0..2 {
        for mode in [
            PipelineMode::Auto,
            PipelineMode::Direct,
            PipelineMode::Staged,
        ] {
            let opts = ReadOptions::default().with_mode(mode);
            let err = a.read_opt(&[0..1, 0..16, 0..16], &cpu, &opts).unwrap_err();
            assert!(err.to_string().contains("c/0/0/0"), "{mode:?}: {err}");
        }
    }
    // The shards around it still read.
    let got = a.read(&[4..5, 32..48, 32..48], &cpu).unwrap();
    assert_eq!(
        got.to_vec::<f32>().unwrap(),
        cut(&values(0.0), &[4..5, 32..48, 32..48])
    );
}

#[test]
fn small_reads_of_every_route_agree_on_zarr_python_fixtures() {
    let cpu = BufferPrototype::cpu();
    let mut seen = 0;
    for f in fixtures() {
        let Ok(array) = zarrbuf::open(&f.store_path(), &f.path) else {
            continue;
        };
        let expected = zarrbuf::npy::read(&f.npy_path()).unwrap();
        let shape = array.shape().to_vec();
        if shape.is_empty() || shape.contains(&0) {
            continue;
        }
        // A corner patch, a middle one and the last element, read twice (the second time
        // through cached shard indexes).
        let mut subsets = vec![
            shape.iter().map(|&n| 0..n.min(3)).collect::<Vec<_>>(),
            shape.iter().map(|&n| n / 2..n).collect(),
            shape.iter().map(|&n| n - 1..n).collect(),
        ];
        subsets.extend(subsets.clone());
        for s in subsets {
            let window: Vec<Range<usize>> =
                s.iter().map(|r| r.start as usize..r.end as usize).collect();
            let want = expected.get(&window).unwrap();
            for mode in [PipelineMode::Auto, PipelineMode::Staged] {
                let opts = ReadOptions::default().with_mode(mode);
                let got = match array.read_opt(&s, &cpu, &opts) {
                    Ok(got) => got,
                    Err(e) => panic!("{} {s:?} {mode:?}: {e}", f.name),
                };
                assert!(
                    got.array_equal(&want, true).unwrap(),
                    "{} {s:?} {mode:?}: not the data zarr-python wrote",
                    f.name
                );
            }
        }
        seen += 1;
    }
    assert!(seen > 20, "only {seen} fixtures read");
}

#[test]
fn a_write_through_another_store_object_at_the_same_place_is_seen() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("shard-index-two-stores");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let location = dir.to_str().unwrap();
    let store = zarrbuf::store::open_store(location).unwrap();
    let mut b = ArrayBuilder::new(
        SHAPE.to_vec(),
        vec![4u64, 32, 32],
        data_type::float32(),
        0.0f32,
    );
    b.subchunk_shape(vec![4u64, 16, 16]);
    b.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
    let created = b.build(store, "/a").unwrap();
    created.store_metadata().unwrap();
    created
        .write_all(&NDBuffer::from_vec(values(0.0), &[8, 64, 64]).unwrap())
        .unwrap();
    let reader = zarrbuf::open(location, "a").unwrap();
    let writer = zarrbuf::open(location, "a").unwrap();
    let cpu = BufferPrototype::cpu();
    let p = vec![1..2u64, 10..40, 20..50];
    assert_eq!(
        reader.read(&p, &cpu).unwrap().to_vec::<f32>().unwrap(),
        cut(&values(0.0), &p)
    );
    let fresh: Vec<f32> = (0..SHAPE.iter().product::<u64>())
        .map(|v| ((v * 2_654_435_761) % 1000) as f32)
        .collect();
    writer
        .write_all(&NDBuffer::from_vec(fresh.clone(), &[8, 64, 64]).unwrap())
        .unwrap();
    assert_eq!(
        reader.read(&p, &cpu).unwrap().to_vec::<f32>().unwrap(),
        cut(&fresh, &p)
    );
}
