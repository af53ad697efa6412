//! `ReadOptions::decode_needed_prefix`: small reads decode a zstd chunk only up to the
//! read's last element. Reads with it on equal reads with it off, on zarr-python's fixtures
//! (every dtype size, plain and sharded, every depth of a chunk, sync and async); and on
//! multi-block frames built here, a chunk whose last block is garbled (its sizes intact)
//! reads for a first-plane patch with the option on and is refused with it off (the proof
//! that the prefix is decoded, and that the default decodes whole), while what the block
//! walk sees (cut short, trailing bytes, another size) is refused either way. The same for
//! blosc (LZ4 with each shuffle, zstd), gzip and zlib chunks written by zarrbuf: a chunk
//! whose later blocks (later DEFLATE data) are garbled reads for a first-plane patch with the
//! option on (gzip and zlib: without validated checksums) and is refused with it off.

#![allow(clippy::single_range_in_vec_init)]

use crate::common::{Fixture, demo, fixtures};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, BufferPrototype, Error, NDBuffer, cache::ChunkCache,
    options::ReadOptions,
};

fn on() -> ReadOptions {
    ReadOptions::default().with_decode_needed_prefix(true)
}

/// Every chunk decoded whole (the default is prefix decoding).
fn off() -> ReadOptions {
    ReadOptions::default().with_decode_needed_prefix(false)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn url(dir: &str) -> String {
    url::Url::from_directory_path(dir).unwrap().to_string()
}

/// `subset` of the array at `path` in the store `store`, read sync and async with `opts`.
fn both(
    store: &str,
    path: &str,
    subset: &[Range<u64>],
    opts: &ReadOptions,
) -> [Result<Vec<u8>, Error>; 2] {
    let cpu = BufferPrototype::cpu();
    let sync = zarrbuf::open(store, path).and_then(|a| a.read_opt(subset, &cpu, opts));
    let asynch = runtime().block_on(async {
        let a = zarrbuf::open_async(&url(store), path).await?;
        a.read_opt_async(subset, &cpu, opts).await
    });
    [sync, asynch].map(|r: Result<NDBuffer, Error>| r.and_then(|b| b.to_native_bytes()))
}

/// Patches of one plane of `shape` at `depth` (axis 0): per chunk of the other axes, the
/// whole chunk's part and a smaller box inside it ending one element short of its end.
fn plane_patches(shape: &[u64], chunks: &[u64], depth: u64) -> Vec<Vec<Range<u64>>> {
    let mut out = vec![vec![depth..depth + 1]];
    for (&n, &c) in shape.iter().zip(chunks).skip(1) {
        let mut next = Vec::new();
        for p in &out {
            for start in (0..n).step_by(c as usize) {
                let end = (start + c).min(n);
                let mut whole = p.clone();
                whole.push(start..end);
                next.push(whole);
                if end - start > 2 {
                    let mut inner = p.clone();
                    inner.push(start + 1..end - 1);
                    next.push(inner);
                }
            }
        }
        out = next;
    }
    out
}

fn fixture(name: &str) -> Fixture {
    fixtures()
        .into_iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("fixture {name}"))
}

/// zarr-python's zstd fixtures of every element size, plain and sharded, one with a
/// content checksum: every patch of every plane reads the same with the option on as off,
/// sync and async.
#[test]
fn zarr_python_fixtures_read_the_same_with_the_prefix_decoded() {
    // (name, chunk shape zarrbuf reads by: the inner chunk of a sharded array)
    let cases: &[(&str, &[u64])] = &[
        ("v3_chunkkey_dot", &[4, 4]),   // uint8
        ("v3_float16", &[5, 5]),        // 2 bytes
        ("v3_large_3d", &[10, 16, 8]),  // float32
        ("v2_f4_nan_zstd", &[8, 8]),    // v2, float32
        ("v3_ragged_3d", &[3, 4, 5]),   // float64
        ("v3_complex64_fill", &[4, 4]), // 8 bytes, missing chunks
        ("v3_shard_end", &[5, 8]),      // sharded, inner bytes -> zstd
        ("v3_ragged_1d", &[7]),         // zstd with a content checksum
    ];
    for &(name, chunks) in cases {
        let f = fixture(name);
        let store = f.store_path();
        let shape = zarrbuf::open(&store, &f.path).unwrap().shape().to_vec();
        for depth in 0..shape[0] {
            for patch in plane_patches(&shape, chunks, depth) {
                let off = both(&store, &f.path, &patch, &off());
                let prefix = both(&store, &f.path, &patch, &on());
                for (o, p) in off.iter().zip(&prefix) {
                    let (o, p) = (o.as_ref().unwrap(), p.as_ref().unwrap());
                    assert!(o == p, "{name} {patch:?}: the prefix read differs");
                }
            }
        }
    }
}

/// The README's array (zarr-python, zstd 3, 64 × 128 × 128 float32 chunks of 4 MiB, a
/// frame of many blocks, each plane one value): a 1 × 64 × 64 patch at every depth of the
/// first chunk and the last plane of the array, sync and async.
#[test]
fn every_depth_of_a_zarr_python_chunk_reads_its_plane() {
    let d = demo();
    let mut depths: Vec<u64> = (0..64).collect();
    depths.push(d.shape[0] - 1);
    for z in depths {
        let patch = [z..z + 1, 0..64, 64..128];
        for r in both(&d.store, "", &patch, &on()) {
            let bytes = r.unwrap();
            let want = d.plane_values[z as usize].to_ne_bytes();
            assert_eq!(bytes.len(), 64 * 64 * 4);
            assert!(
                bytes.chunks_exact(4).all(|v| v == want),
                "depth {z}: not the plane's value"
            );
        }
    }
}

/// A fresh, empty directory for one store.
fn store_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("zarrbuf-prefix-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const CHUNK: [u64; 3] = [8, 128, 256];
const PLANE: usize = 128 * 256;

/// `n` bytes that zstd entropy-codes in compressed blocks (a small alphabet, no repeats).
fn bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b"0123456789abcdef"[(x % 16) as usize]
        })
        .collect()
}

/// One frame for `data`, with or without a content checksum (content size declared).
fn frame(data: &[u8], checksum: bool) -> Vec<u8> {
    let mut c = zstd::bulk::Compressor::new(1).unwrap();
    c.include_checksum(checksum).unwrap();
    c.compress(data).unwrap()
}

/// The start and stored length of each block's contents.
fn blocks(frame: &[u8]) -> Vec<(usize, usize)> {
    let d = frame[4];
    let single = d & 0x20 != 0;
    let fcs = [usize::from(single), 2, 4, 8][(d >> 6) as usize];
    let mut at = 5 + usize::from(!single) + [0, 1, 2, 4][(d & 3) as usize] + fcs;
    let mut out = Vec::new();
    loop {
        let h = u32::from_le_bytes([frame[at], frame[at + 1], frame[at + 2], 0]);
        let stored = if (h >> 1) & 3 == 1 {
            1
        } else {
            (h >> 3) as usize
        };
        out.push((at + 3, stored));
        at += 3 + stored;
        if h & 1 != 0 {
            return out;
        }
    }
}

/// `frame` with its last block's contents overwritten, every size intact.
fn garble_last_block(frame: &[u8]) -> Vec<u8> {
    let (start, len) = *blocks(frame).last().unwrap();
    assert!(blocks(frame).len() > 1, "a frame of several blocks");
    let mut bad = frame.to_vec();
    bad[start..start + len].fill(0xff);
    bad
}

/// An array of two chunks of `CHUNK` (`dtype`, `elem` bytes each), plain or sharded (one
/// shard of both, its index at the end), with `zstd` (the chain's zstd codec JSON) and
/// `frames` as the stored chunks; returns the decoded bytes of both chunks.
struct Built {
    dir: PathBuf,
    decoded: [Vec<u8>; 2],
}

fn build(
    tag: &str,
    dtype: &str,
    elem: usize,
    sharded: bool,
    checksum: bool,
    edit: impl Fn(Vec<u8>) -> Vec<u8>,
) -> Built {
    let dir = store_dir(tag);
    let n = CHUNK.iter().product::<u64>() as usize * elem;
    let decoded = [bytes(n, 7), bytes(n, 11)];
    let frames = [
        edit(frame(&decoded[0], checksum)),
        frame(&decoded[1], checksum),
    ];
    let inner = format!(
        r#"[{{"name": "bytes", "configuration": {{"endian": "little"}}}},
            {{"name": "zstd", "configuration": {{"level": 1, "checksum": {checksum}}}}}]"#
    );
    let (chunk_shape, codecs) = if sharded {
        let codecs = format!(
            r#"[{{"name": "sharding_indexed", "configuration": {{
                "chunk_shape": {CHUNK:?}, "codecs": {inner},
                "index_codecs": [{{"name": "bytes", "configuration": {{"endian": "little"}}}}],
                "index_location": "end"}}}}]"#
        );
        ([16u64, 128, 256], codecs)
    } else {
        (CHUNK, inner)
    };
    let meta = format!(
        r#"{{"zarr_format": 3, "node_type": "array", "shape": [16, 128, 256],
            "data_type": "{dtype}", "fill_value": 0,
            "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": {chunk_shape:?}}}}},
            "chunk_key_encoding": {{"name": "default", "configuration": {{"separator": "/"}}}},
            "codecs": {codecs}}}"#
    );
    std::fs::write(dir.join("zarr.json"), meta).unwrap();
    std::fs::create_dir_all(dir.join("c/0/0")).unwrap();
    if sharded {
        let mut shard = Vec::new();
        let mut index = Vec::new();
        for f in &frames {
            index.extend_from_slice(&(shard.len() as u64).to_le_bytes());
            index.extend_from_slice(&(f.len() as u64).to_le_bytes());
            shard.extend_from_slice(f);
        }
        shard.extend_from_slice(&index);
        std::fs::write(dir.join("c/0/0/0"), shard).unwrap();
    } else {
        std::fs::create_dir_all(dir.join("c/1/0")).unwrap();
        std::fs::write(dir.join("c/0/0/0"), &frames[0]).unwrap();
        std::fs::write(dir.join("c/1/0/0"), &frames[1]).unwrap();
    }
    Built { dir, decoded }
}

impl Built {
    fn store(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    /// The bytes of `patch` (inside one chunk along axis 0) from the decoded chunks.
    fn expected(&self, patch: &[Range<u64>], elem: usize) -> Vec<u8> {
        let chunk = &self.decoded[(patch[0].start / CHUNK[0]) as usize];
        let mut out = Vec::new();
        for z in patch[0].clone() {
            for y in patch[1].clone() {
                let row = ((z % CHUNK[0]) as usize * PLANE + y as usize * 256) * elem;
                let (a, b) = (patch[2].start as usize * elem, patch[2].end as usize * elem);
                out.extend_from_slice(&chunk[row + a..row + b]);
            }
        }
        out
    }
}

impl Drop for Built {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const DTYPES: [(&str, usize); 4] = [("uint8", 1), ("uint16", 2), ("uint32", 4), ("uint64", 8)];

/// Frames of several blocks (every dtype size, plain and sharded): a whole plane and a box
/// at every depth (the first and the last plane included), sync and async, equal the
/// chunk's bytes with the option on and off.
#[test]
fn multi_block_chunks_read_exactly_at_every_depth() {
    for (dtype, elem) in DTYPES {
        for sharded in [false, true] {
            let b = build("exact", dtype, elem, sharded, false, |f| f);
            for z in 0..16 {
                for patch in [
                    vec![z..z + 1, 0..128, 0..256],
                    vec![z..z + 1, 3..50, 17..200],
                ] {
                    let want = b.expected(&patch, elem);
                    for opts in [off(), on(), ReadOptions::default()] {
                        for r in both(b.store(), "", &patch, &opts) {
                            assert!(r.unwrap() == want, "{dtype} sharded={sharded} {patch:?}");
                        }
                    }
                }
            }
        }
    }
}

/// A chunk whose last block is garbled, sizes intact: a first-plane patch reads with the
/// option on and is refused with it off; a patch that needs the last block is refused
/// either way; so is every read through a chunk cache (a cached chunk is decoded whole).
#[test]
fn a_garbled_last_block_is_read_past_only_with_the_option_on() {
    for (dtype, elem) in DTYPES {
        for sharded in [false, true] {
            let b = build("garbled", dtype, elem, sharded, false, |f| {
                garble_last_block(&f)
            });
            let first = [0..1, 0..64, 0..64];
            let last = [7..8, 100..128, 200..256];
            let what = format!("{dtype} sharded={sharded}");
            for r in both(b.store(), "", &first, &on()) {
                assert!(r.unwrap() == b.expected(&first, elem), "{what}");
            }
            for opts in [off(), off().with_validate_checksums(false)] {
                for r in both(b.store(), "", &first, &opts) {
                    assert!(r.is_err(), "{what}: read with the option off");
                }
            }
            for r in both(b.store(), "", &last, &on()) {
                assert!(r.is_err(), "{what}: the last block was needed");
            }
            let cached = on().with_cache(ChunkCache::new(64 << 20));
            for r in both(b.store(), "", &first, &cached) {
                assert!(r.is_err(), "{what}: a cached chunk is decoded whole");
            }
            // The other chunk is intact.
            let other = [8..9, 0..64, 0..64];
            for r in both(b.store(), "", &other, &on()) {
                assert!(r.unwrap() == b.expected(&other, elem), "{what}");
            }
        }
    }
}

/// A change made to a chunk's stored frame.
type Edit = dyn Fn(Vec<u8>) -> Vec<u8>;

/// What the block walk sees is refused with the option on exactly as with it off; a
/// checksummed frame decodes whole while checksums are validated.
#[test]
fn damage_the_walk_sees_and_checksummed_frames_are_refused_with_the_option_on() {
    let first = [0..1, 0..64, 0..64];
    let cut = |f: Vec<u8>| f[..f.len() - 1].to_vec();
    let trailing = |mut f: Vec<u8>| {
        f.extend_from_slice(b"junk");
        f
    };
    // The frame of another chunk size: one element fewer.
    let other_size = |_f: Vec<u8>| {
        frame(
            &bytes(CHUNK.iter().product::<u64>() as usize * 4 - 4, 7),
            false,
        )
    };
    let edits: [(&str, &Edit); 3] = [
        ("cut short", &cut),
        ("trailing bytes", &trailing),
        ("another size", &other_size),
    ];
    for (what, edit) in edits {
        for sharded in [false, true] {
            let b = build("walk", "uint32", 4, sharded, false, edit);
            let off = both(b.store(), "", &first, &off());
            let prefix = both(b.store(), "", &first, &on());
            for (o, p) in off.into_iter().zip(prefix) {
                let (o, p) = (o.unwrap_err().to_string(), p.unwrap_err().to_string());
                assert_eq!(o, p, "{what} sharded={sharded}");
            }
        }
    }
    for sharded in [false, true] {
        let b = build("checksum", "uint32", 4, sharded, true, |f| {
            garble_last_block(&f)
        });
        for r in both(b.store(), "", &first, &on()) {
            assert!(
                r.is_err(),
                "sharded={sharded}: the checksum covers the whole frame"
            );
        }
        for r in both(b.store(), "", &first, &on().with_validate_checksums(false)) {
            assert!(r.unwrap() == b.expected(&first, 4), "sharded={sharded}");
        }
    }
}

/// The blosc, gzip and zlib codecs prefix decoding covers (a v3 `codecs` entry after
/// `bytes`).
const MORE_CODECS: [&str; 6] = [
    r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 16384}}"#,
    r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 16384}}"#,
    r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "noshuffle", "typesize": 4, "blocksize": 16384}}"#,
    r#"{"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 4, "blocksize": 16384}}"#,
    r#"{"name": "gzip", "configuration": {"level": 1}}"#,
    r#"{"name": "numcodecs.zlib", "configuration": {"level": 1}}"#,
];

/// A uint32 array of two `CHUNK`s under `codec`, written by zarrbuf; returns its directory
/// and values (a wave of small whole numbers, which every codec compresses).
fn written(tag: &str, codec: &str) -> (PathBuf, Vec<u32>) {
    use zarrbuf::ArrayWriteExt;
    let dir = store_dir(tag);
    let meta = format!(
        r#"{{"zarr_format": 3, "node_type": "array", "shape": [16, 128, 256],
            "data_type": "uint32", "fill_value": 0,
            "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": {CHUNK:?}}}}},
            "chunk_key_encoding": {{"name": "default", "configuration": {{"separator": "/"}}}},
            "codecs": [{{"name": "bytes", "configuration": {{"endian": "little"}}}}, {codec}]}}"#
    );
    std::fs::write(dir.join("zarr.json"), meta).unwrap();
    let values: Vec<u32> = (0..16 * PLANE as u32)
        .map(|i| (i / 7) % 500 + i % 3)
        .collect();
    let a = zarrbuf::open(dir.to_str().unwrap(), "").unwrap();
    a.write_all(&NDBuffer::from_vec(values.clone(), &[16, 128, 256]).unwrap())
        .unwrap();
    (dir, values)
}

fn patch_values(values: &[u32], patch: &[Range<u64>]) -> Vec<u8> {
    let mut out = Vec::new();
    for z in patch[0].clone() {
        for y in patch[1].clone() {
            for x in patch[2].clone() {
                let i = z as usize * PLANE + y as usize * 256 + x as usize;
                out.extend_from_slice(&values[i].to_ne_bytes());
            }
        }
    }
    out
}

/// blosc (LZ4 with each shuffle, zstd), gzip and zlib chunks: a plane and a box at every
/// depth read the chunk's values with the option on and off, checksums validated or not,
/// sync and async.
#[test]
fn blosc_gzip_and_zlib_chunks_read_exactly_at_every_depth() {
    for codec in MORE_CODECS {
        let (dir, values) = written("codecs", codec);
        let store = dir.to_str().unwrap();
        for z in [0, 1, 5, 7, 8, 15] {
            for patch in [
                vec![z..z + 1, 0..128, 0..256],
                vec![z..z + 1, 3..50, 17..200],
            ] {
                let want = patch_values(&values, &patch);
                for opts in [off(), on(), on().with_validate_checksums(false)] {
                    for r in both(store, "", &patch, &opts) {
                        assert!(r.unwrap() == want, "{codec} {patch:?}");
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A blosc chunk whose last block's first stream is garbled (every size intact), and a
/// gzip or zlib chunk whose last compressed bytes are: a first-plane patch reads with the
/// option on (gzip and zlib: only without validated checksums, their trailer being a
/// content checksum) and is refused with it off; the last plane is refused either way.
#[test]
fn garbled_later_blosc_blocks_and_deflate_data_are_read_past_only_with_the_option_on() {
    let le32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    for codec in MORE_CODECS {
        let (dir, values) = written("garbled", codec);
        let store = dir.to_str().unwrap();
        let key = dir.join("c/0/0/0");
        let mut chunk = std::fs::read(&key).unwrap();
        let deflate = !codec.contains("blosc");
        if deflate {
            let n = chunk.len();
            chunk[n - 40..n - 8].fill(0xff);
        } else {
            assert_eq!(chunk[2] & 0x02, 0, "{codec}: compressed, not stored");
            let (nbytes, blocksize) = (le32(&chunk, 4), le32(&chunk, 8));
            let last = le32(&chunk, 16 + 4 * (nbytes.div_ceil(blocksize) - 1));
            let csize = le32(&chunk, last);
            chunk[last + 4..last + 4 + csize].fill(0xff);
        }
        std::fs::write(&key, &chunk).unwrap();
        let first = [0..1, 0..64, 0..64];
        let last = [7..8, 100..128, 200..256];
        let prefix = if deflate {
            on().with_validate_checksums(false)
        } else {
            on()
        };
        for r in both(store, "", &first, &prefix) {
            assert!(r.unwrap() == patch_values(&values, &first), "{codec}");
        }
        let mut refused = vec![off(), off().with_validate_checksums(false)];
        if deflate {
            refused.push(on());
        }
        for opts in refused {
            for r in both(store, "", &first, &opts) {
                assert!(r.is_err(), "{codec}: a whole decode");
            }
        }
        for r in both(store, "", &last, &prefix) {
            assert!(r.is_err(), "{codec}: the last block was needed");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
