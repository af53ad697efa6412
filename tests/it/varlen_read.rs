//! Reads of variable-length arrays (zarr v3 `string` and `variable_length_bytes`, v2 object
//! arrays with `VLenUTF8` / `VLenBytes`) into `VarLenBuffer`s: whole arrays, subsets across
//! chunk edges, sharded arrays, missing chunks, compressed chunks, async, and every damaged
//! encoding as an error naming its chunk.
//!
//! The stores are written here by hand — metadata and encoded chunks (numcodecs' vlen
//! layout: a u32 count, then a u32 length and the bytes of each element) — so the tests need
//! no Python; one sharded array is written by zarrs' own encoder as a cross-check.

#![allow(clippy::single_range_in_vec_init)] // 1-d subsets: one range per dimension

use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use zarrbuf::options::ReadOptions;
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, BufferPrototype, Error, VarLenBuffer, VarLenKind};

/// numcodecs' vlen encoding of `items`.
fn vlen<T: AsRef<[u8]>>(items: &[T]) -> Vec<u8> {
    let mut out = (items.len() as u32).to_le_bytes().to_vec();
    for item in items {
        out.extend_from_slice(&(item.as_ref().len() as u32).to_le_bytes());
        out.extend_from_slice(item.as_ref());
    }
    out
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(bytes, 1).unwrap()
}

/// A fresh directory for one store.
fn store_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("varlen-read")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, key: &str, bytes: &[u8]) {
    let path = dir.join(key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A v3 array's metadata with a regular grid and `/`-separated chunk keys.
fn v3_meta(
    shape: &[u64],
    chunks: &[u64],
    dtype: &str,
    fill: serde_json::Value,
    codecs: serde_json::Value,
) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill, "codecs": codecs, "attributes": {}
    }))
    .unwrap()
}

/// The element at (i, j) of the 2-d test arrays: multi-byte characters, empty strings.
fn element(i: u64, j: u64) -> String {
    match (i + j) % 4 {
        0 => String::new(),
        1 => format!("r{i}c{j}"),
        2 => format!("ß∂{i}–{j}😀"),
        _ => "x".repeat((i * 3 + j) as usize % 7),
    }
}

/// The elements of chunk (ci, cj) of a (rows, cols) array in chunks of (cr, cc), C order,
/// padded past the array's edge as zarr stores edge chunks.
fn chunk_elements(ci: u64, cj: u64, cr: u64, cc: u64) -> Vec<String> {
    let mut out = Vec::new();
    for i in ci * cr..(ci + 1) * cr {
        for j in cj * cc..(cj + 1) * cc {
            out.push(element(i, j));
        }
    }
    out
}

fn strings(v: &VarLenBuffer) -> Vec<String> {
    v.iter_str().unwrap().map(|s| s.unwrap()).collect()
}

/// Expected strings of `rows` × `cols` of the 2-d arrays, with `missing(i, j)` as `fill`.
fn expected(
    rows: std::ops::Range<u64>,
    cols: std::ops::Range<u64>,
    missing: impl Fn(u64, u64) -> bool,
    fill: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    for i in rows {
        for j in cols.clone() {
            out.push(if missing(i, j) {
                fill.to_string()
            } else {
                element(i, j)
            });
        }
    }
    out
}

/// Checks the Arrow layout of `v` against its own elements: offsets from 0, non-decreasing,
/// ending at the values' length.
fn check_layout(v: &VarLenBuffer) {
    let offs: Vec<i64> = v
        .offsets()
        .to_vec()
        .unwrap()
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(offs.len(), v.len() + 1);
    assert_eq!(offs[0], 0);
    assert!(offs.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(*offs.last().unwrap() as usize, v.values().len());
}

/// A 5 × 7 v3 string array in 2 × 3 chunks, uncompressed, with chunk (1, 1) not stored.
fn v3_strings(name: &str, fill: &str) -> PathBuf {
    let dir = store_dir(name);
    let codecs = json!([{"name": "vlen-utf8", "configuration": {}}]);
    write(
        &dir,
        "zarr.json",
        &v3_meta(&[5, 7], &[2, 3], "string", json!(fill), codecs),
    );
    for ci in 0..3 {
        for cj in 0..3 {
            if (ci, cj) != (1, 1) {
                let items = chunk_elements(ci, cj, 2, 3);
                write(&dir, &format!("c/{ci}/{cj}"), &vlen(&items));
            }
        }
    }
    dir
}

fn missing_11(i: u64, j: u64) -> bool {
    (2..4).contains(&i) && (3..6).contains(&j)
}

fn open(dir: &Path) -> zarrbuf::DynArray {
    zarrbuf::open(dir.to_str().unwrap(), "").unwrap()
}

#[test]
fn v3_string_whole_array_and_subsets() {
    let array = open(&v3_strings("v3-string", ""));
    assert_eq!(zarrbuf::varlen_kind(&array), Some(VarLenKind::Utf8));
    let all = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    assert_eq!(all.shape(), &[5, 7]);
    assert_eq!(all.kind(), VarLenKind::Utf8);
    check_layout(&all);
    assert_eq!(strings(&all), expected(0..5, 0..7, missing_11, ""));
    // Subsets crossing chunk edges, in C order of the subset; edge chunks; single elements;
    // an empty subset.
    for (rows, cols) in [
        (1..4, 2..6),
        (0..5, 6..7),
        (4..5, 0..7),
        (3..4, 4..5),
        (2..4, 3..6),
        (1..1, 0..7),
    ] {
        let part = array
            .read_as::<VarLenBuffer>(&[rows.clone(), cols.clone()], &BufferPrototype::cpu())
            .unwrap();
        check_layout(&part);
        assert_eq!(
            part.shape(),
            &[rows.end - rows.start, cols.end - cols.start]
        );
        assert_eq!(
            strings(&part),
            expected(rows.clone(), cols.clone(), missing_11, ""),
            "subset {rows:?} × {cols:?}"
        );
    }
}

#[test]
fn missing_chunks_read_as_the_fill_value() {
    let array = open(&v3_strings("v3-string-fill", "n/a"));
    let all = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    assert_eq!(strings(&all), expected(0..5, 0..7, missing_11, "n/a"));
    // An array with no chunks at all.
    let dir = store_dir("v3-empty");
    let codecs = json!([{"name": "vlen-utf8", "configuration": {}}]);
    write(
        &dir,
        "zarr.json",
        &v3_meta(&[3], &[2], "string", json!("ø"), codecs),
    );
    let empty = open(&dir)
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    assert_eq!(strings(&empty), ["ø", "ø", "ø"]);
}

#[test]
fn v3_variable_length_bytes_with_nuls_zstd() {
    let dir = store_dir("v3-bytes");
    let codecs = json!([
        {"name": "vlen-bytes", "configuration": {}},
        {"name": "zstd", "configuration": {"level": 1, "checksum": false}}
    ]);
    write(
        &dir,
        "zarr.json",
        &v3_meta(&[5], &[3], "variable_length_bytes", json!([]), codecs),
    );
    let items: Vec<Vec<u8>> = vec![
        b"\0".to_vec(),
        b"a\0b\0".to_vec(),
        vec![],
        vec![0xff, 0xfe, 0],
        b"tail".to_vec(),
        b"padding".to_vec(),
    ];
    write(&dir, "c/0", &zstd(&vlen(&items[..3])));
    write(&dir, "c/1", &zstd(&vlen(&items[3..])));
    let array = open(&dir);
    assert_eq!(zarrbuf::varlen_kind(&array), Some(VarLenKind::Bytes));
    let all = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    assert_eq!(all.kind(), VarLenKind::Bytes);
    check_layout(&all);
    let got: Vec<Vec<u8>> = all.iter_bytes().unwrap().map(|b| b.unwrap()).collect();
    assert_eq!(got, items[..5].to_vec());
    let part = array
        .read_as::<VarLenBuffer>(&[1..4], &BufferPrototype::cpu())
        .unwrap();
    assert_eq!(part.values().to_vec().unwrap(), b"a\0b\0\xff\xfe\0");
}

/// A v2 object array of `n` elements in chunks of 2 with `filter` and zstd, chunk 1 missing.
fn v2_object(name: &str, filter: &str, items: &[Vec<u8>]) -> PathBuf {
    let dir = store_dir(name);
    let meta = json!({
        "zarr_format": 2, "shape": [items.len()], "chunks": [2], "dtype": "|O",
        "compressor": {"id": "zstd", "level": 1}, "fill_value": null, "order": "C",
        "filters": [{"id": filter}]
    });
    write(&dir, ".zarray", &serde_json::to_vec(&meta).unwrap());
    for (c, chunk) in items.chunks(2).enumerate() {
        if c != 1 {
            let mut chunk = chunk.to_vec();
            chunk.resize(2, Vec::new());
            write(&dir, &c.to_string(), &zstd(&vlen(&chunk)));
        }
    }
    dir
}

#[test]
fn v2_object_arrays_with_vlen_filters() {
    let items: Vec<Vec<u8>> = ["α", "", "lost", "lost", "end"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let array = open(&v2_object("v2-utf8", "vlen-utf8", &items));
    assert_eq!(zarrbuf::varlen_kind(&array), Some(VarLenKind::Utf8));
    let all = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    // The fill value null reads as "".
    assert_eq!(strings(&all), ["α", "", "", "", "end"]);

    let bytes: Vec<Vec<u8>> = vec![
        b"\0\x01".to_vec(),
        vec![0xc3],
        vec![],
        vec![],
        b"z".to_vec(),
    ];
    let array = open(&v2_object("v2-bytes", "vlen-bytes", &bytes));
    assert_eq!(zarrbuf::varlen_kind(&array), Some(VarLenKind::Bytes));
    let all = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    assert_eq!(all.kind(), VarLenKind::Bytes);
    let got: Vec<Vec<u8>> = all.iter_bytes().unwrap().map(|b| b.unwrap()).collect();
    assert_eq!(
        got,
        [
            b"\0\x01".to_vec(),
            vec![0xc3],
            vec![],
            vec![],
            b"z".to_vec()
        ]
    );
}

/// A 6 × 4 string array in shards of 4 × 4, inner chunks of 2 × 2 (zstd), index at the end
/// (bytes codec only), written by hand: inner chunk (0, 1) of shard (0, 0) missing, shard
/// (1, 0) holds its inner chunks in reverse order.
fn sharded_strings(name: &str) -> PathBuf {
    let dir = store_dir(name);
    let codecs = json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [2, 2],
        "codecs": [
            {"name": "vlen-utf8", "configuration": {}},
            {"name": "zstd", "configuration": {"level": 1, "checksum": false}}
        ],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_location": "end"
    }}]);
    write(
        &dir,
        "zarr.json",
        &v3_meta(&[6, 4], &[4, 4], "string", json!(""), codecs),
    );
    for si in 0..2u64 {
        let mut body = Vec::new();
        let mut index = vec![u64::MAX; 8];
        let mut order: Vec<(u64, u64)> = (0..2).flat_map(|a| (0..2).map(move |b| (a, b))).collect();
        if si == 1 {
            order.reverse();
        }
        for (a, b) in order {
            if (si, a, b) == (0, 0, 1) {
                continue;
            }
            let items = chunk_elements(si * 2 + a, b, 2, 2);
            let enc = zstd(&vlen(&items));
            let k = (a * 2 + b) as usize;
            index[2 * k] = body.len() as u64;
            index[2 * k + 1] = enc.len() as u64;
            body.extend_from_slice(&enc);
        }
        for v in index {
            body.extend_from_slice(&v.to_le_bytes());
        }
        write(&dir, &format!("c/{si}/0"), &body);
    }
    dir
}

#[test]
fn sharded_strings_whole_and_subsets() {
    let array = open(&sharded_strings("sharded"));
    let missing = |i: u64, j: u64| i < 2 && (2..4).contains(&j);
    let all = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    check_layout(&all);
    assert_eq!(strings(&all), expected(0..6, 0..4, missing, ""));
    for (rows, cols) in [(1..5, 1..3), (3..6, 0..4), (0..1, 3..4)] {
        let part = array
            .read_as::<VarLenBuffer>(&[rows.clone(), cols.clone()], &BufferPrototype::cpu())
            .unwrap();
        assert_eq!(strings(&part), expected(rows, cols, missing, ""));
    }
}

#[test]
fn sharded_strings_written_by_zarrs() {
    use zarrs::array::{ArrayBuilder, ArraySubset, codec::ZstdCodec, data_type};
    let dir = store_dir("sharded-zarrs");
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(&dir).unwrap());
    let array = ArrayBuilder::new(vec![9, 5], vec![6, 4], data_type::string(), "-")
        .subchunk_shape(vec![3, 2])
        .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))])
        .build(store, "/")
        .unwrap();
    array.store_metadata().unwrap();
    // Everything but the last row, so one inner chunk and part of another stay missing.
    let data = expected(0..8, 0..5, |_, _| false, "");
    array
        .store_array_subset(&ArraySubset::new_with_ranges(&[0..8, 0..5]), data)
        .unwrap();
    let ours = open(&dir);
    let all = ours
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    assert_eq!(strings(&all), expected(0..9, 0..5, |i, _| i == 8, "-"));
    let part = ours
        .read_as::<VarLenBuffer>(&[2..9, 1..4], &BufferPrototype::cpu())
        .unwrap();
    assert_eq!(strings(&part), expected(2..9, 1..4, |i, _| i == 8, "-"));
}

#[test]
fn many_chunks_decode_in_parallel_exactly() {
    let dir = store_dir("many");
    let codecs = json!([
        {"name": "vlen-utf8", "configuration": {}},
        {"name": "zstd", "configuration": {"level": 1, "checksum": false}}
    ]);
    let n = 20_000u64;
    write(
        &dir,
        "zarr.json",
        &v3_meta(&[n], &[512], "string", json!(""), codecs),
    );
    let item = |i: u64| format!("{}{}", "é".repeat((i % 5) as usize), i);
    for c in 0..n.div_ceil(512) {
        let items: Vec<String> = (c * 512..(c + 1) * 512).map(item).collect();
        write(&dir, &format!("c/{c}"), &zstd(&vlen(&items)));
    }
    let array = open(&dir);
    let all = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    check_layout(&all);
    let want: Vec<String> = (0..n).map(item).collect();
    assert_eq!(strings(&all), want);
    let part = array
        .read_as::<VarLenBuffer>(&[1000..13_001], &BufferPrototype::cpu())
        .unwrap();
    assert_eq!(strings(&part), want[1000..13_001].to_vec());
}

#[test]
fn async_reads_match_sync_reads() {
    let dir = sharded_strings("sharded-async");
    let sync = open(&dir)
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (all, part) = rt.block_on(async {
        let array = zarrbuf::open_async(dir.to_str().unwrap(), "")
            .await
            .unwrap();
        let all = array
            .read_all_as_async::<VarLenBuffer>(&BufferPrototype::cpu())
            .await
            .unwrap();
        let part = array
            .read_as_async::<VarLenBuffer>(&[1..5, 1..3], &BufferPrototype::cpu())
            .await
            .unwrap();
        (all, part)
    });
    assert_eq!(strings(&all), strings(&sync));
    let missing = |i: u64, j: u64| i < 2 && (2..4).contains(&j);
    assert_eq!(strings(&part), expected(1..5, 1..3, missing, ""));
    // An unsharded array: every chunk fetched at once.
    let dir = v3_strings("v3-string-async", "-");
    let all = rt.block_on(async {
        let array = zarrbuf::open_async(dir.to_str().unwrap(), "")
            .await
            .unwrap();
        array
            .read_all_as_async::<VarLenBuffer>(&BufferPrototype::cpu())
            .await
            .unwrap()
    });
    assert_eq!(strings(&all), expected(0..5, 0..7, missing_11, "-"));
}

/// The error of reading the whole of `dir`, as text.
fn read_error(dir: &Path) -> String {
    let err = open(dir)
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap_err();
    assert!(matches!(err, Error::Zarr { .. }), "{err:?}");
    err.to_string()
}

/// A 1-d v3 `string` (or bytes) array of 4 elements in chunks of 2 whose chunk 1 is `bad`.
fn with_bad_chunk(name: &str, dtype: &str, bad: &[u8]) -> PathBuf {
    let dir = store_dir(name);
    let codec = if dtype == "string" {
        "vlen-utf8"
    } else {
        "vlen-bytes"
    };
    let codecs = json!([{"name": codec, "configuration": {}}]);
    let fill = if dtype == "string" {
        json!("")
    } else {
        json!([])
    };
    write(&dir, "zarr.json", &v3_meta(&[4], &[2], dtype, fill, codecs));
    write(&dir, "c/0", &vlen(&["ok", "ok"]));
    write(&dir, "c/1", bad);
    dir
}

#[test]
fn every_malformation_is_an_error_naming_the_chunk() {
    let good = vlen(&["ab", "c"]);
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"junk");
    let mut huge = u32::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(&[0; 6]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("short", vec![2, 0], "too short"),
        ("count", vlen(&["a", "b", "c"]), "holds 3 elements"),
        ("huge-count", huge, "holds 4294967295 elements"),
        (
            "prefix",
            good[..good.len() - 3].to_vec(),
            "length prefix of element 1",
        ),
        (
            "past-end",
            good[..good.len() - 1].to_vec(),
            "element 1 claims 1 bytes",
        ),
        ("trailing", trailing, "4 bytes follow its last element"),
        ("utf8", vlen(&[&b"ok"[..], b"\xe2\x82"]), "not valid UTF-8"),
    ];
    for (name, bad, want) in cases {
        let msg = read_error(&with_bad_chunk(name, "string", &bad));
        assert!(msg.contains("chunk [1] (key c/1)"), "{name}: {msg}");
        assert!(msg.contains(want), "{name}: {msg}");
    }
    // Bytes arrays take any bytes, but not a damaged layout.
    let dir = with_bad_chunk(
        "bytes-ok",
        "variable_length_bytes",
        &vlen(&[&b"\xe2"[..], b""]),
    );
    assert!(
        open(&dir)
            .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
            .is_ok()
    );
    let msg = read_error(&with_bad_chunk(
        "bytes-short",
        "variable_length_bytes",
        &[1],
    ));
    assert!(
        msg.contains("key c/1") && msg.contains("too short"),
        "{msg}"
    );
    // A damaged compressed chunk is named too.
    let dir = store_dir("zstd-damaged");
    let codecs = json!([
        {"name": "vlen-utf8", "configuration": {}},
        {"name": "zstd", "configuration": {"level": 1, "checksum": false}}
    ]);
    write(
        &dir,
        "zarr.json",
        &v3_meta(&[2], &[2], "string", json!(""), codecs),
    );
    write(&dir, "c/0", &zstd(&vlen(&["a"])));
    let msg = read_error(&dir);
    assert!(
        msg.contains("key c/0") && msg.contains("holds 1 elements"),
        "{msg}"
    );
}

#[test]
fn damaged_inner_chunks_name_the_shard_and_the_inner_chunk() {
    let dir = sharded_strings("sharded-damaged");
    // Shard (1, 0): its inner chunk (0, 1) is replaced by a chunk of one element, appended
    // after the others, its index entry pointed at it.
    let path = dir.join("c/1/0");
    let original = std::fs::read(&path).unwrap();
    let index_at = original.len() - 64;
    let mut rebuilt = original[..index_at].to_vec();
    let bad = zstd(&vlen(&["only one"]));
    let bad_at = rebuilt.len() as u64;
    rebuilt.extend_from_slice(&bad);
    let mut index = original[index_at..].to_vec();
    index[16..24].copy_from_slice(&bad_at.to_le_bytes());
    index[24..32].copy_from_slice(&(bad.len() as u64).to_le_bytes());
    rebuilt.extend_from_slice(&index);
    std::fs::write(&path, rebuilt).unwrap();
    let msg = read_error(&dir);
    assert!(
        msg.contains("shard [1, 0] (key c/1/0), inner chunk [0, 1]"),
        "{msg}"
    );
    assert!(
        msg.contains("holds 1 elements, but the chunk has 4"),
        "{msg}"
    );
}

#[test]
fn fixed_size_arrays_and_other_encodings_are_refused() {
    let dir = store_dir("fixed");
    let codecs = json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
    write(
        &dir,
        "zarr.json",
        &v3_meta(&[4], &[2], "int32", json!(0), codecs),
    );
    let array = open(&dir);
    assert_eq!(zarrbuf::varlen_kind(&array), None);
    let err = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap_err();
    assert!(matches!(err, Error::DataType(_)), "{err:?}");
    assert!(err.to_string().contains("read_as::<NDBuffer>"), "{err}");
    // A subset outside the array.
    let strings = open(&v3_strings("v3-string-bounds", ""));
    let err = strings
        .read_as::<VarLenBuffer>(&[0..6, 0..7], &BufferPrototype::cpu())
        .unwrap_err();
    assert!(matches!(err, Error::OutOfBounds(_)), "{err:?}");
}

#[test]
fn results_larger_than_max_bytes_are_refused() {
    let array = open(&v3_strings("v3-string-limit", ""));
    let opts = ReadOptions::default().with_max_bytes(64);
    let err = array
        .read_all_as_opt::<VarLenBuffer>(&BufferPrototype::cpu(), &opts)
        .unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err:?}");
}

#[test]
fn device_prototypes_get_two_copies_or_a_clean_error() {
    let array = open(&v3_strings("v3-string-device", ""));
    let host = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    match array.read_all_as::<VarLenBuffer>(&BufferPrototype::cuda(0)) {
        Ok(dev) => {
            assert_eq!(dev.memory(), zarrbuf::Memory::Cuda(0));
            assert!(matches!(dev.get_str(0), Err(Error::NotHostAccessible(_))));
            let back = dev.to_host().unwrap();
            assert_eq!(strings(&back), strings(&host));
            assert_eq!(
                back.offsets().to_vec().unwrap(),
                host.offsets().to_vec().unwrap()
            );
        }
        Err(e) => {
            assert!(matches!(e, Error::DeviceUnavailable(_)), "{e:?}");
            zarrbuf_test_support::skip(
                zarrbuf_test_support::Need::Gpu,
                "variable-length reads into CUDA memory",
                &e.to_string(),
            );
        }
    }
}

/// The variable-length stores zarr-python wrote (fixtures/data; `fixtures/refused.json`
/// lists them while `ArrayReadExt::read` refuses them), read exactly, whole and in part.
#[test]
fn zarr_python_fixtures_read_exactly() {
    let fixture = |name: &str| {
        open(
            &crate::common::root()
                .join("data")
                .join(format!("{name}.zarr")),
        )
    };
    let text = [
        "alpha",
        "",
        "γάμμα",
        "😀 emoji",
        &"x".repeat(40),
        "tab\tsep",
    ];
    for name in ["v2_vlen_utf8", "v3_string"] {
        let array = fixture(name);
        assert_eq!(
            zarrbuf::varlen_kind(&array),
            Some(VarLenKind::Utf8),
            "{name}"
        );
        let all = array
            .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
            .unwrap();
        check_layout(&all);
        assert_eq!(strings(&all), text, "{name}");
        let part = array
            .read_as::<VarLenBuffer>(&[2..5], &BufferPrototype::cpu())
            .unwrap();
        assert_eq!(strings(&part), text[2..5], "{name}");
    }
    let bytes: [&[u8]; 4] = [b"\0\x01", b"", &b"bytes".repeat(9), b"\xff"];
    for name in ["v2_vlen_bytes", "v3_variable_length_bytes"] {
        let array = fixture(name);
        assert_eq!(
            zarrbuf::varlen_kind(&array),
            Some(VarLenKind::Bytes),
            "{name}"
        );
        let all = array
            .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
            .unwrap();
        let got: Vec<Vec<u8>> = all.iter_bytes().unwrap().map(|b| b.unwrap()).collect();
        assert_eq!(got, bytes.map(|b| b.to_vec()), "{name}");
    }
}

#[test]
fn v2_object_arrays_in_f_order() {
    // 5 × 4 in chunks of 2 × 3, order F: each chunk stores its elements in F order.
    let dir = store_dir("v2-f-order");
    let meta = json!({
        "zarr_format": 2, "shape": [5, 4], "chunks": [2, 3], "dtype": "|O",
        "compressor": null, "fill_value": null, "order": "F",
        "filters": [{"id": "vlen-utf8"}]
    });
    write(&dir, ".zarray", &serde_json::to_vec(&meta).unwrap());
    for ci in 0..3u64 {
        for cj in 0..2u64 {
            let mut items = Vec::new();
            for j in cj * 3..cj * 3 + 3 {
                for i in ci * 2..ci * 2 + 2 {
                    items.push(element(i, j));
                }
            }
            if (ci, cj) != (2, 0) {
                write(&dir, &format!("{ci}.{cj}"), &vlen(&items));
            }
        }
    }
    let array = open(&dir);
    let missing = |i: u64, j: u64| i >= 4 && j < 3;
    let all = array
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    assert_eq!(strings(&all), expected(0..5, 0..4, missing, ""));
    let part = array
        .read_as::<VarLenBuffer>(&[1..5, 2..4], &BufferPrototype::cpu())
        .unwrap();
    assert_eq!(strings(&part), expected(1..5, 2..4, missing, ""));
}

#[test]
fn zero_dimensional_arrays() {
    let dir = store_dir("v3-0d");
    let codecs = json!([{"name": "vlen-utf8", "configuration": {}}]);
    write(
        &dir,
        "zarr.json",
        &v3_meta(&[], &[], "string", json!(""), codecs),
    );
    write(&dir, "c", &vlen(&["scalar ✓"]));
    let all = open(&dir)
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    assert_eq!(all.shape(), &[] as &[u64]);
    assert_eq!(strings(&all), ["scalar ✓"]);
}

#[test]
fn progress_counts_every_chunk_and_concurrency_sizes_the_pool() {
    let array = open(&v3_strings("v3-string-progress", ""));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let opts = ReadOptions {
        concurrency: Some(1),
        progress: Some(Arc::new(move |p: zarrbuf::options::Progress| {
            log.lock().unwrap().push((p.chunks_done, p.chunks_total));
        })),
        ..ReadOptions::default()
    };
    let all = array
        .read_all_as_opt::<VarLenBuffer>(&BufferPrototype::cpu(), &opts)
        .unwrap();
    assert_eq!(strings(&all), expected(0..5, 0..7, missing_11, ""));
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    // 9 chunks, one of them missing: each reported once.
    assert_eq!(seen, (1..=9).map(|k| (k, 9)).collect::<Vec<_>>());
}
