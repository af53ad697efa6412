#![allow(clippy::single_range_in_vec_init)] // 1-d subsets: one range per dimension, on purpose
//! Writes of variable-length strings and bytes (`write_varlen`): v3 `string` and
//! `variable_length_bytes` arrays, v2 object arrays with `vlen-utf8`, sharded arrays, partial
//! writes merged into stored chunks, chunks of only the fill value, and the errors. What is
//! written is read back with zarrs' own decoder here; the stores are left under
//! `target/tmp/written/` with their expected `.npy` (fixed-width `<U` / `|S`), and CI reads
//! them back with zarr-python (scripts/zarr_readback.py).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use zarrbuf::{
    ArrayReadExt, ArrayWriteVarLenExt, BufferPrototype, Error, VarLenBuffer, options::WriteOptions,
};
use zarrs::array::codec::ZstdCodec;
use zarrs::array::{Array, ArrayBuilder, data_type};

pub(crate) fn written_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("written")
}

/// A fresh directory for a store named `name` under `written_dir()`.
pub(crate) fn fresh(name: &str) -> PathBuf {
    let dest = written_dir().join(format!("{name}.zarr"));
    if dest.exists() {
        std::fs::remove_dir_all(&dest).unwrap();
    }
    std::fs::create_dir_all(&dest).unwrap();
    dest
}

/// `n` strings of lengths 0 to 40, ASCII and not, none ending in NUL.
pub(crate) fn strings(n: usize, seed: u64) -> Vec<String> {
    let alphabet = ["a", "Z", "7", " ", "é", "β", "東", "🙂", "\u{0}x"];
    (0..n)
        .map(|i| {
            let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
            let len = (x % 41) as usize;
            (0..len)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    alphabet[(x >> 59) as usize % alphabet.len()]
                })
                .collect()
        })
        .collect()
}

/// Leaves the expected content of the store at `dest` (array `path`) for CI's zarr-python
/// readback.
pub(crate) fn expect(dest: &Path, path: &str, data: &VarLenBuffer) {
    let fixed = zarrbuf::npy::to_fixed_width(data).unwrap();
    zarrbuf::npy::write(&dest.with_extension("npy"), &fixed).unwrap();
    std::fs::write(dest.with_extension("path"), path).unwrap();
}

fn open(dest: &Path) -> zarrbuf::DynArray {
    zarrbuf::open(dest.to_str().unwrap(), "").unwrap()
}

/// Every element as zarrbuf's `read_as::<VarLenBuffer>` reads it.
fn read_strings(a: &zarrbuf::DynArray) -> Vec<String> {
    a.read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap()
        .iter_str()
        .unwrap()
        .map(|s| s.unwrap())
        .collect()
}

/// Every element as zarrs decodes it, checked against zarrbuf's `read_as::<VarLenBuffer>`.
fn all_strings(a: &zarrbuf::DynArray) -> Vec<String> {
    let ours = read_strings(a);
    let theirs = zarrs_strings(a);
    assert_eq!(ours, theirs, "read_as::<VarLenBuffer> and zarrs disagree");
    theirs
}

fn zarrs_strings(a: &zarrbuf::DynArray) -> Vec<String> {
    let all: Vec<Range<u64>> = a.shape().iter().map(|&n| 0..n).collect();
    a.retrieve_array_subset::<Vec<String>>(&zarrs::array::ArraySubset::new_with_ranges(&all))
        .unwrap()
}

fn create(
    dest: &Path,
    builder: &mut ArrayBuilder,
) -> Array<dyn zarrs::storage::ReadableWritableListableStorageTraits> {
    let store = zarrbuf::store::open_store(dest.to_str().unwrap()).unwrap();
    let a = builder.build(store, "/").unwrap();
    a.store_metadata().unwrap();
    a
}

#[test]
fn v3_strings_round_trip_partial_writes_and_fill_chunks() {
    let dest = fresh("varlen-v3-string-zstd");
    let mut b = ArrayBuilder::new(vec![7, 5], vec![3, 2], data_type::string(), "");
    b.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
    create(&dest, &mut b);
    let a = open(&dest);
    let mut want = strings(35, 1);
    let data = VarLenBuffer::from_strings(vec![7, 5], &want).unwrap();
    a.write_varlen_all_opt(&data, &WriteOptions::default().with_concurrency(2))
        .unwrap();
    assert_eq!(all_strings(&a), want);
    // A partial write merges into the chunks it touches in part.
    let patch = strings(9, 2);
    a.write_varlen(
        &[2..5, 1..4],
        &VarLenBuffer::from_strings(vec![3, 3], &patch).unwrap(),
    )
    .unwrap();
    for (k, s) in patch.iter().enumerate() {
        want[(2 + k / 3) * 5 + 1 + k % 3] = s.clone();
    }
    assert_eq!(all_strings(&a), want);
    // Chunk (0, 0) (rows 0..3, columns 0..2) of only the fill value is erased.
    a.write_varlen(
        &[0..3, 0..2],
        &VarLenBuffer::from_strings(vec![3, 2], [""; 6]).unwrap(),
    )
    .unwrap();
    for r in 0..3 {
        for c in 0..2 {
            want[r * 5 + c] = String::new();
        }
    }
    assert!(!dest.join("c/0/0").exists(), "a chunk of \"\" stays stored");
    assert!(dest.join("c/0/1").exists());
    assert_eq!(all_strings(&a), want);
    expect(
        &dest,
        "",
        &VarLenBuffer::from_strings(vec![7, 5], &want).unwrap(),
    );
}

/// The `zarr.json` zarr-python writes for `VariableLengthBytes()` (with gzip 5).
pub(crate) const V3_BYTES_GZIP: &str = r#"{"zarr_format": 3, "node_type": "array",
    "shape": [10], "data_type": "variable_length_bytes",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": "", "codecs": [{"name": "vlen-bytes", "configuration": {}},
    {"name": "gzip", "configuration": {"level": 5}}], "attributes": {}}"#;

#[test]
fn v3_bytes_with_gzip_round_trip() {
    let dest = fresh("varlen-v3-bytes-gzip");
    std::fs::write(dest.join("zarr.json"), V3_BYTES_GZIP).unwrap();
    let a = open(&dest);
    let want: Vec<Vec<u8>> = (0..10u8)
        .map(|i| {
            (0..i * 3)
                .map(|k| k.wrapping_mul(37) ^ 0xA5)
                .chain([1])
                .collect()
        })
        .collect();
    a.write_varlen_all(&VarLenBuffer::from_bytes_iter(vec![10], &want).unwrap())
        .unwrap();
    let back: Vec<Vec<u8>> = a.retrieve_array_subset(&[0..10]).unwrap();
    assert_eq!(back, want);
    let ours = a
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap();
    let ours: Vec<Vec<u8>> = ours.iter_bytes().unwrap().map(|b| b.unwrap()).collect();
    assert_eq!(ours, want);
    // UTF-8 strings go into a bytes array too.
    a.write_varlen(
        &[3..4],
        &VarLenBuffer::from_strings(vec![1], ["ok"]).unwrap(),
    )
    .unwrap();
    let back: Vec<Vec<u8>> = a.retrieve_array_subset(&[0..10]).unwrap();
    assert_eq!(back[3], b"ok");
    let mut all = want.clone();
    all[3] = b"ok".to_vec();
    expect(
        &dest,
        "",
        &VarLenBuffer::from_bytes_iter(vec![10], &all).unwrap(),
    );
}

/// The `.zarray` zarr-python writes for `dtype=str` in zarr v2 (with zstd 1).
pub(crate) const V2_OBJECT_UTF8: &str = r#"{"zarr_format": 2, "shape": [11], "chunks": [4],
    "dtype": "|O", "compressor": {"id": "zstd", "level": 1}, "fill_value": "",
    "order": "C", "filters": [{"id": "vlen-utf8"}], "dimension_separator": "."}"#;

#[test]
fn v2_object_arrays_with_vlen_utf8_round_trip() {
    let dest = fresh("varlen-v2-object-utf8");
    std::fs::write(dest.join(".zarray"), V2_OBJECT_UTF8).unwrap();
    let a = open(&dest);
    let want = strings(11, 3);
    a.write_varlen_all(&VarLenBuffer::from_strings(vec![11], &want).unwrap())
        .unwrap();
    assert_eq!(all_strings(&a), want);
    assert!(dest.join("0").exists() && dest.join("2").exists());
    // The metadata is still zarr v2's.
    assert!(!dest.join("zarr.json").exists());
    expect(
        &dest,
        "",
        &VarLenBuffer::from_strings(vec![11], &want).unwrap(),
    );
}

#[test]
fn sharded_string_arrays_round_trip() {
    let dest = fresh("varlen-v3-string-sharded");
    let mut b = ArrayBuilder::new(vec![9, 6], vec![6, 4], data_type::string(), "-");
    b.subchunk_shape(vec![3, 2])
        .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
    create(&dest, &mut b);
    let a = open(&dest);
    let mut want = strings(54, 4);
    a.write_varlen_all(&VarLenBuffer::from_strings(vec![9, 6], &want).unwrap())
        .unwrap();
    assert_eq!(all_strings(&a), want);
    let patch = strings(4, 5);
    a.write_varlen(
        &[4..6, 3..5],
        &VarLenBuffer::from_strings(vec![2, 2], &patch).unwrap(),
    )
    .unwrap();
    for (k, s) in patch.iter().enumerate() {
        want[(4 + k / 2) * 6 + 3 + k % 2] = s.clone();
    }
    assert_eq!(all_strings(&a), want);
    expect(
        &dest,
        "",
        &VarLenBuffer::from_strings(vec![9, 6], &want).unwrap(),
    );
}

#[test]
fn zero_dimensional_string_array() {
    let dest = fresh("varlen-v3-string-scalar");
    let mut b = ArrayBuilder::new(
        Vec::<u64>::new(),
        Vec::<u64>::new(),
        data_type::string(),
        "",
    );
    create(&dest, &mut b);
    let a = open(&dest);
    let data = VarLenBuffer::from_strings(vec![], ["only one"]).unwrap();
    a.write_varlen_all(&data).unwrap();
    assert_eq!(all_strings(&a), ["only one"]);
    expect(&dest, "", &data);
}

#[test]
fn bad_writes_are_clear_errors() {
    let dest = fresh("varlen-errors");
    let mut b = ArrayBuilder::new(vec![4], vec![2], data_type::string(), "");
    create(&dest, &mut b);
    let a = open(&dest);
    let two = VarLenBuffer::from_strings(vec![2], ["a", "b"]).unwrap();
    let e = a.write_varlen(&[0..3], &two).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch(_)), "{e}");
    let e = a.write_varlen(&[3..5], &two).unwrap_err();
    assert!(matches!(e, Error::OutOfBounds(_)), "{e}");
    let bad = VarLenBuffer::from_bytes_iter(vec![2], [&b"ok"[..], b"\xff"]).unwrap();
    let e = a.write_varlen(&[0..2], &bad).unwrap_err();
    assert!(
        matches!(&e, Error::DataType(m) if m.contains("element 1") && m.contains("UTF-8")),
        "{e}"
    );
    // Nothing was stored by the refused writes.
    assert!(!dest.join("c/0").exists());
    let fixed = zarrbuf::open(
        concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/data/v3_int8.zarr"),
        "",
    )
    .unwrap();
    let e = fixed.write_varlen(&[0..2, 0..1], &two).unwrap_err();
    assert!(
        matches!(&e, Error::DataType(m) if m.contains("fixed-size")),
        "{e}"
    );
}

#[test]
fn writes_from_device_memory_copy_to_the_host_first() {
    let dest = fresh("varlen-v3-string-from-device");
    let mut b = ArrayBuilder::new(vec![12], vec![5], data_type::string(), "");
    create(&dest, &mut b);
    let a = open(&dest);
    let want = strings(12, 9);
    let host = VarLenBuffer::from_strings(vec![12], &want).unwrap();
    let cuda = BufferPrototype::cuda(0);
    let on_device = host
        .offsets()
        .copy_to_new(&cuda)
        .and_then(|o| Ok((o, host.values().copy_to_new(&cuda)?)));
    match on_device {
        Ok((offsets, values)) => {
            let dev = VarLenBuffer::from_parts(vec![12], host.kind(), offsets, values).unwrap();
            a.write_varlen_all(&dev).unwrap();
            assert_eq!(all_strings(&a), want);
            expect(&dest, "", &host);
        }
        Err(e) => {
            assert!(matches!(e, Error::DeviceUnavailable(_)), "{e:?}");
            zarrbuf_test_support::skip(
                zarrbuf_test_support::Need::Gpu,
                "variable-length writes from CUDA memory",
                &e.to_string(),
            );
        }
    }
}

/// zarrs 0.23 does not decode these (its transpose of variable-length chunks fails with an
/// out-of-bounds indexer), so they are read back with `read_as::<VarLenBuffer>` here and with
/// zarr-python in CI.
#[test]
fn v2_object_arrays_in_f_order_round_trip() {
    let dest = fresh("varlen-v2-object-utf8-F");
    std::fs::write(
        dest.join(".zarray"),
        r#"{"zarr_format": 2, "shape": [5, 7], "chunks": [2, 3], "dtype": "|O",
        "compressor": null, "fill_value": "", "order": "F",
        "filters": [{"id": "vlen-utf8"}], "dimension_separator": "."}"#,
    )
    .unwrap();
    let a = open(&dest);
    let mut want = strings(35, 10);
    a.write_varlen_all(&VarLenBuffer::from_strings(vec![5, 7], &want).unwrap())
        .unwrap();
    assert_eq!(read_strings(&a), want);
    let patch = strings(6, 11);
    a.write_varlen(
        &[1..3, 2..5],
        &VarLenBuffer::from_strings(vec![2, 3], &patch).unwrap(),
    )
    .unwrap();
    for (k, s) in patch.iter().enumerate() {
        want[(1 + k / 3) * 7 + 2 + k % 3] = s.clone();
    }
    assert_eq!(read_strings(&a), want);
    expect(
        &dest,
        "",
        &VarLenBuffer::from_strings(vec![5, 7], &want).unwrap(),
    );
}
