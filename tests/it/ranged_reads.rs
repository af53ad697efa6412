//! Small reads of units stored uncompressed fetch only the byte ranges they need
//! (`pipeline/fetch/unit_ranges.rs`, `pipeline/fetch/fetch_ranges.rs`): patches of plain and sharded
//! arrays written by zarrs read exactly, sync and async, in fixed and random regions of random
//! arrays; a shard's inner chunks are fetched by the ranges of the patch's rows (a store
//! that records its requests says so); a chunk stored a few bytes short or long, an index
//! that gives an inner chunk another length and a truncated shard are still errors naming
//! what is damaged; and over the latency server (when its variables are set) the access log
//! shows `Range` requests of the patch's bytes, the size check riding on the ranged `GET`.

#![allow(clippy::single_range_in_vec_init)]

use crate::common::access_log::{log_len, traffic};
use crate::common::servers::{self, unique};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, BufferPrototype, Error, NDBuffer};
use zarrs::array::{Array, ArraySubset};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey};

/// A fresh, empty directory for one store.
fn store_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("zarrbuf-ranged-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn url(dir: &Path) -> String {
    url::Url::from_directory_path(dir).unwrap().to_string()
}

/// How an array stores its chunks.
#[derive(Clone, Copy, Debug)]
enum Layout<'a> {
    Plain,
    /// Shards of the chunk shape holding inner chunks of this shape, the index (`bytes`
    /// only, so tests can edit it) at the start or the end.
    Sharded(&'a [u64], &'static str),
}

/// The metadata of an uncompressed little-endian float32 array, fill value -1.
fn metadata(shape: &[u64], chunks: &[u64], layout: Layout<'_>) -> serde_json::Value {
    let bytes = serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
    let codecs = match layout {
        Layout::Plain => bytes,
        Layout::Sharded(inner, at) => serde_json::json!([{
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": inner,
                "codecs": bytes,
                "index_codecs": bytes,
                "index_location": at,
            }
        }]),
    };
    serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": -1.0, "codecs": codecs,
    })
}

/// Each element's value: its flat index (exact in float32 below 2^24).
fn values(shape: &[u64]) -> Vec<f32> {
    (0..shape.iter().product::<u64>())
        .map(|i| i as f32)
        .collect()
}

/// Writes the array (with zarrs) into the directory store `dir`; returns its values.
fn write(dir: &Path, shape: &[u64], chunks: &[u64], layout: Layout<'_>) -> Vec<f32> {
    let store = zarrbuf::store::open_store(dir.to_str().unwrap()).unwrap();
    let meta = serde_json::from_value(metadata(shape, chunks, layout)).unwrap();
    let array = Array::new_with_metadata(store, "/", meta).unwrap();
    array.store_metadata().unwrap();
    let all: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
    let data = values(shape);
    array
        .store_array_subset(&ArraySubset::new_with_ranges(&all), data.clone())
        .unwrap();
    data
}

/// `subset` of `data` (C order, of `shape`).
fn expected(data: &[f32], shape: &[u64], subset: &[Range<u64>]) -> Vec<f32> {
    let mut out = Vec::new();
    let n: u64 = subset.iter().map(|r| r.end - r.start).product();
    for i in 0..n {
        let (mut rest, mut flat, mut stride) = (i, 0u64, 1u64);
        for k in (0..shape.len()).rev() {
            let len = subset[k].end - subset[k].start;
            flat += (subset[k].start + rest % len) * stride;
            rest /= len;
            stride *= shape[k];
        }
        out.push(data[flat as usize]);
    }
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// `subset` of the array at `dir` (or URL), read with the sync and the async API.
fn both(at: &str, async_at: &str, subset: &[Range<u64>]) -> [Result<Vec<f32>, Error>; 2] {
    let cpu = BufferPrototype::cpu();
    let sync = zarrbuf::open(at, "").and_then(|a| a.read(subset, &cpu));
    let asynch = runtime().block_on(async {
        let a = zarrbuf::open_async(async_at, "").await?;
        a.read_async(subset, &cpu).await
    });
    [sync, asynch].map(|r: Result<NDBuffer, Error>| r.and_then(|b| b.to_vec::<f32>()))
}

fn local_both(dir: &Path, subset: &[Range<u64>]) -> [Result<Vec<f32>, Error>; 2] {
    both(dir.to_str().unwrap(), &url(dir), subset)
}

/// Patches of a plain and a sharded array (ragged edges, 16³ units): planes, rows, boxes,
/// single elements, columns, whole units and patches across units all read exactly.
#[test]
fn patches_of_uncompressed_arrays_read_exactly() {
    let shape = [40u64, 48, 50];
    let patches: Vec<Vec<Range<u64>>> = vec![
        vec![5..6, 0..16, 0..16],
        vec![5..6, 16..32, 16..32],
        vec![39..40, 32..48, 48..50],
        vec![7..8, 3..4, 0..50],
        vec![2..5, 7..12, 9..16],
        vec![17..18, 20..21, 33..34],
        vec![0..16, 4..5, 6..7],
        vec![16..32, 16..32, 16..32],
        vec![10..11, 10..30, 10..40],
        vec![3..9, 0..48, 0..1],
    ];
    let inner = [8u64, 16, 16];
    for (name, chunks, layout) in [
        ("plain", [16u64, 16, 16], Layout::Plain),
        ("sharded", [16u64, 32, 32], Layout::Sharded(&inner, "end")),
        (
            "sharded-start",
            [16u64, 32, 32],
            Layout::Sharded(&inner, "start"),
        ),
    ] {
        let dir = store_dir(name);
        let data = write(&dir, &shape, &chunks, layout);
        for patch in &patches {
            let want = expected(&data, &shape, patch);
            for (api, got) in ["sync", "async"].iter().zip(local_both(&dir, patch)) {
                let got = got.unwrap_or_else(|e| panic!("{name} {api} {patch:?}: {e}"));
                assert!(got == want, "{name} {api} {patch:?}: the data differ");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Random regions of random small uncompressed arrays (1–4 dimensions, ragged chunks,
/// plain or sharded, some chunks never written) read as the data, sync and async: a read by
/// ranges equals a whole read of the units.
#[test]
fn random_regions_of_random_uncompressed_arrays_read_as_the_data() {
    let mut rng = StdRng::seed_from_u64(38);
    for case in 0..24 {
        let d = rng.random_range(1..=4usize);
        let shape: Vec<u64> = (0..d).map(|_| rng.random_range(1..=24u64)).collect();
        let chunks: Vec<u64> = shape.iter().map(|&n| rng.random_range(1..=n)).collect();
        let inner: Vec<u64> = chunks
            .iter()
            .map(|&c| {
                // Inner chunks divide the shard.
                let divisors: Vec<u64> = (1..=c).filter(|i| c % i == 0).collect();
                divisors[rng.random_range(0..divisors.len())]
            })
            .collect();
        let layout = match case % 3 {
            0 => Layout::Plain,
            1 => Layout::Sharded(&inner, "end"),
            _ => Layout::Sharded(&inner, "start"),
        };
        let dir = store_dir("random");
        let mut data = write(&dir, &shape, &chunks, layout);
        // Every third case: the first chunk (shard) is missing, read as the fill value.
        if case % 3 == 2 || case % 4 == 3 {
            let key = vec!["0"; d].join("/");
            let _ = std::fs::remove_file(dir.join("c").join(key));
            let first: Vec<Range<u64>> = chunks
                .iter()
                .zip(&shape)
                .map(|(&c, &n)| 0..c.min(n))
                .collect();
            let n = first.iter().map(|r| r.end - r.start).product::<u64>();
            for i in 0..n {
                let (mut rest, mut flat, mut stride) = (i, 0u64, 1u64);
                for k in (0..d).rev() {
                    let len = first[k].end - first[k].start;
                    flat += (rest % len) * stride;
                    rest /= len;
                    stride *= shape[k];
                }
                data[flat as usize] = -1.0;
            }
        }
        for _ in 0..16 {
            let region: Vec<Range<u64>> = shape
                .iter()
                .map(|&n| {
                    let start = rng.random_range(0..n);
                    start..rng.random_range(start + 1..=n)
                })
                .collect();
            let want = expected(&data, &shape, &region);
            for (api, got) in ["sync", "async"].iter().zip(local_both(&dir, &region)) {
                let got = got.unwrap_or_else(|e| panic!("case {case} {api} {region:?}: {e}"));
                assert!(
                    got == want,
                    "case {case} ({layout:?}, shape {shape:?}, chunks {chunks:?}) {api} {region:?}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A memory store that records every ranged request it answers.
struct Recording {
    inner: Arc<MemoryStore>,
    requests: Mutex<Vec<(String, Vec<ByteRange>)>>,
}

impl ReadableStorageTraits for Recording {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let ranges: Vec<ByteRange> = byte_ranges.collect();
        self.requests
            .lock()
            .unwrap()
            .push((key.to_string(), ranges.clone()));
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

/// A patch of a sharded array fetches the shard's index and the patch's rows of each inner
/// chunk (one range per inner chunk here: the rows touch), never the whole inner chunks; a
/// read of whole inner chunks fetches them whole.
#[test]
fn sharded_patches_fetch_only_the_needed_bytes() {
    let shape = [32u64, 64, 64];
    let inner = [16u64, 32, 32];
    let memory = Arc::new(MemoryStore::new());
    let meta = serde_json::from_value(metadata(
        &shape,
        &[32, 64, 64],
        Layout::Sharded(&inner, "end"),
    ))
    .unwrap();
    let writer = Array::new_with_metadata(memory.clone(), "/", meta).unwrap();
    writer.store_metadata().unwrap();
    let all: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
    let data = values(&shape);
    writer
        .store_array_subset(&ArraySubset::new_with_ranges(&all), data.clone())
        .unwrap();
    let recording = Arc::new(Recording {
        inner: memory,
        requests: Mutex::new(Vec::new()),
    });
    let array = Array::open(recording.clone(), "/").unwrap();
    let inner_bytes = 16 * 32 * 32 * 4;
    for (patch, largest) in [
        // One plane of one inner chunk: 32 rows of 32 elements, touching: 4 KiB.
        (vec![5..6, 0..32, 0..32], 32 * 32 * 4),
        // One plane across the four inner chunks of a z-layer: four 4 KiB ranges.
        (vec![20..21, 0..64, 0..64], 32 * 32 * 4),
        // A box: 3 planes of 5 rows of 7 elements; rows 100 bytes apart and planes less
        // than a page apart: one request from the first row to the last.
        (vec![2..5, 7..12, 9..16], 2 * 4096 + (4 * 32 + 7) * 4),
    ] {
        recording.requests.lock().unwrap().clear();
        let got = array.read(&patch, &BufferPrototype::cpu()).unwrap();
        assert!(
            got.to_vec::<f32>().unwrap() == expected(&data, &shape, &patch),
            "{patch:?}"
        );
        let requests = recording.requests.lock().unwrap().clone();
        let data_ranges: Vec<u64> = requests
            .iter()
            .filter(|(key, _)| key.starts_with("c/"))
            .flat_map(|(_, ranges)| ranges.iter())
            .filter_map(|r| match r {
                ByteRange::FromStart(_, Some(len)) => Some(*len),
                _ => None,
            })
            .collect();
        assert!(!data_ranges.is_empty(), "{patch:?}: {requests:?}");
        assert!(
            data_ranges
                .iter()
                .all(|&len| len <= largest && len < inner_bytes),
            "{patch:?}: ranges of {data_ranges:?} bytes (at most {largest} needed)"
        );
    }
    // Whole inner chunks: fetched whole.
    recording.requests.lock().unwrap().clear();
    array
        .read(&[0..16, 0..32, 0..32], &BufferPrototype::cpu())
        .unwrap();
    let requests = recording.requests.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .flat_map(|(_, r)| r)
            .any(|r| matches!(r, ByteRange::FromStart(_, Some(n)) if *n == inner_bytes)),
        "a whole inner chunk is one request of its size: {requests:?}"
    );
}

/// The chunk holding the patch `[1..2, 0..16, 0..16]` of a 16³-chunked array, edited.
fn damaged_plain(tag: &str, edit: impl Fn(&mut Vec<u8>)) -> PathBuf {
    let dir = store_dir(tag);
    write(&dir, &[32, 32, 32], &[16, 16, 16], Layout::Plain);
    let chunk = dir.join("c/0/0/0");
    let mut bytes = std::fs::read(&chunk).unwrap();
    edit(&mut bytes);
    std::fs::write(&chunk, bytes).unwrap();
    dir
}

/// A chunk stored 4 bytes short or long, or cut to a few bytes, is refused for a patch
/// (which by ranges would need only its first plane), sync and async, naming the chunk; a
/// patch of another chunk still reads.
#[test]
fn a_truncated_or_padded_chunk_is_refused_for_a_patch() {
    type Edit = fn(&mut Vec<u8>);
    let edits: [(&str, Edit); 3] = [
        ("short", |b| b.truncate(b.len() - 4)),
        ("long", |b| b.extend_from_slice(&[0; 4])),
        ("cut", |b| b.truncate(100)),
    ];
    for (tag, edit) in edits {
        let dir = damaged_plain(tag, edit);
        for (api, got) in ["sync", "async"]
            .iter()
            .zip(local_both(&dir, &[1..2, 0..16, 0..16]))
        {
            let e = got
                .expect_err(&format!("{tag} {api}: a damaged chunk was read"))
                .to_string();
            assert!(
                e.contains("c/0/0/0") && e.contains("damaged") && e.contains("16384"),
                "{tag} {api}: {e}"
            );
        }
        for got in local_both(&dir, &[1..2, 16..32, 0..16]) {
            got.unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A shard whose index gives an inner chunk another length than its fixed size is refused
/// for a patch of that inner chunk, and a shard cut short is refused for a patch of an inner
/// chunk it lost, sync and async.
#[test]
fn a_shard_index_with_a_wrong_inner_length_is_refused() {
    let shape = [16u64, 32, 32];
    let inner = [16u64, 16, 16];
    // The index at the end: 4 entries of (offset, length), u64 little-endian.
    let dir = store_dir("bad-index");
    write(&dir, &shape, &shape, Layout::Sharded(&inner, "end"));
    let shard = dir.join("c/0/0/0");
    let mut bytes = std::fs::read(&shard).unwrap();
    let index_at = bytes.len() - 4 * 16;
    let len_at = index_at + 8;
    let len = u64::from_le_bytes(bytes[len_at..len_at + 8].try_into().unwrap());
    assert_eq!(len, 16 * 16 * 16 * 4);
    bytes[len_at..len_at + 8].copy_from_slice(&(len - 4).to_le_bytes());
    std::fs::write(&shard, &bytes).unwrap();
    for (api, got) in ["sync", "async"]
        .iter()
        .zip(local_both(&dir, &[3..4, 0..16, 0..16]))
    {
        let e = got
            .expect_err(&format!("{api}: a wrong length was read"))
            .to_string();
        assert!(e.contains("exactly") && e.contains("c/0/0/0"), "{api}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);

    // The index at the start; the shard cut in the inner chunk stored last (zarrs stores
    // inner chunks in the order its threads finish them, so which one that is varies).
    let dir = store_dir("cut-shard");
    write(&dir, &shape, &shape, Layout::Sharded(&inner, "start"));
    let shard = dir.join("c/0/0/0");
    let bytes = std::fs::read(&shard).unwrap();
    let offsets: Vec<u64> = (0..4)
        .map(|i| u64::from_le_bytes(bytes[i * 16..i * 16 + 8].try_into().unwrap()))
        .collect();
    let by_offset = |pick: fn(u64, u64) -> bool| {
        (0..4).fold(0, |best, i| {
            if pick(offsets[i], offsets[best]) {
                i
            } else {
                best
            }
        })
    };
    let (last, first) = (by_offset(|a, b| a > b), by_offset(|a, b| a < b));
    // Inner chunk `i` (C order of the 1×2×2 grid) and its last plane.
    let within = |i: usize| [0u64, (i / 2) as u64, (i % 2) as u64];
    let plane = |i: usize, z: u64| {
        let [_, y, x] = within(i);
        vec![z..z + 1, y * 16..y * 16 + 16, x * 16..x * 16 + 16]
    };
    std::fs::write(&shard, &bytes[..bytes.len() - 1000]).unwrap();
    for (api, got) in ["sync", "async"]
        .iter()
        .zip(local_both(&dir, &plane(last, 15)))
    {
        let e = got
            .expect_err(&format!("{api}: a cut shard was read"))
            .to_string();
        let named = format!("inner chunk {:?}", within(last));
        assert!(e.contains("c/0/0/0") && e.contains(&named), "{api}: {e}");
    }
    // The inner chunk stored first is intact.
    for got in local_both(&dir, &plane(first, 0)) {
        got.unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Over the latency server: a patch of an uncompressed 64³-chunked array is one `Range`
/// request of the patch's 16 KiB (async API: the ranged `GET` carries the object's size),
/// or the whole chunk (sync API, which cannot size a chunk in the same request); a sharded
/// one is the index and the patch's bytes, sync and async; and a chunk stored a few bytes
/// long or short is refused for a patch, naming it.
#[test]
fn patches_over_http_fetch_only_the_needed_ranges() {
    let Some(sv) = servers::server(
        "LATENCY",
        "reads and writes against the local latency servers",
    ) else {
        return;
    };
    let shape = [64u64, 128, 128];
    let plane = 64 * 64 * 4;
    let patch = [5..6, 0..64, 64..128];
    // Plain.
    let name = unique("ranged-plain");
    let data = write(&sv.root.join(&name), &shape, &[64, 64, 64], Layout::Plain);
    let at = format!("{}/{name}", sv.url);
    let want = expected(&data, &shape, &patch);
    for (api, got) in ["sync", "async"].iter().zip({
        let from = log_len(&sv.log);
        let got = both(&at, &at, &patch);
        let t = traffic(&sv.log, from, &format!("{name}/c/"), 2);
        let ranges: Vec<&str> = t.requests.iter().map(|(_, _, r)| r.as_str()).collect();
        // Sync: the whole chunk (no range); async: the patch's plane of the chunk.
        let start = 5 * plane;
        assert!(
            ranges.iter().any(|r| *r == "-" || *r == "bytes=0-"),
            "sync: the whole chunk: {t:?}"
        );
        assert!(
            ranges.contains(&format!("bytes={start}-{}", start + plane - 1).as_str()),
            "async: the patch's bytes: {t:?}"
        );
        assert_eq!(t.requests.len(), 2, "{t:?}");
        got
    }) {
        assert!(got.unwrap() == want, "plain {api}");
    }
    // A chunk stored 4 bytes long, or short, or cut before the patch: refused, named.
    let chunk = sv.root.join(&name).join("c/0/0/1");
    let intact = std::fs::read(&chunk).unwrap();
    for (tag, bytes) in [
        ("long", [intact.as_slice(), &[0; 4]].concat()),
        ("short", intact[..intact.len() - 4].to_vec()),
        ("cut", intact[..1000].to_vec()),
    ] {
        std::fs::write(&chunk, &bytes).unwrap();
        for (api, got) in ["sync", "async"].iter().zip(both(&at, &at, &patch)) {
            let e = got
                .expect_err(&format!("{tag} {api}: a damaged chunk was read"))
                .to_string();
            assert!(
                e.contains("c/0/0/1") && e.contains("damaged"),
                "{tag} {api}: {e}"
            );
        }
    }
    std::fs::write(&chunk, &intact).unwrap();

    // Sharded: one shard of the whole array, inner chunks 64³.
    let name = unique("ranged-sharded");
    let inner = [64u64, 64, 64];
    let data = write(
        &sv.root.join(&name),
        &shape,
        &shape,
        Layout::Sharded(&inner, "end"),
    );
    let at = format!("{}/{name}", sv.url);
    let want = expected(&data, &shape, &patch);
    let from = log_len(&sv.log);
    let got = both(&at, &at, &patch);
    let t = traffic(&sv.log, from, &format!("{name}/c/"), 4);
    for (api, got) in ["sync", "async"].iter().zip(got) {
        assert!(got.unwrap() == want, "sharded {api}");
    }
    let data_ranges: Vec<&str> = t
        .requests
        .iter()
        .map(|(_, _, r)| r.as_str())
        .filter(|r| !r.starts_with("bytes=-"))
        .collect();
    // Inner chunk [0, 0, 1]: the second entry of the index (offset, length) at the end.
    let shard = std::fs::read(sv.root.join(&name).join("c/0/0/0")).unwrap();
    let entry = shard.len() - 4 * 16 + 16;
    let offset = u64::from_le_bytes(shard[entry..entry + 8].try_into().unwrap()) as usize;
    let start = offset + 5 * plane;
    let want_range = format!("bytes={start}-{}", start + plane - 1);
    assert!(
        !data_ranges.is_empty() && data_ranges.iter().all(|r| *r == want_range),
        "the patch's bytes of its inner chunk only: {t:?}"
    );
}
