#![allow(clippy::single_range_in_vec_init)] // 1-d subsets: one range per dimension, on purpose
//! Copies of variable-length strings and bytes (`copy_array`, `create_like`): rechunked,
//! recompressed, into shards, from v2 object arrays to v3; checked with zarrs here and left
//! under `target/tmp/written/` for CI's zarr-python readback.

use crate::varlen_write::{V2_OBJECT_UTF8, V3_BYTES_GZIP, expect, fresh, strings};
use std::path::Path;
use zarrbuf::options::CopyOptions;
use zarrbuf::{ArrayLayout, ArrayWriteVarLenExt, VarLenBuffer};
use zarrs::array::ArraySubset;

/// A source store at `dest` with metadata `meta` (`.zarray` or `zarr.json`) and `data`.
fn source(dest: &Path, file: &str, meta: &str, data: &VarLenBuffer) -> zarrbuf::DynArray {
    std::fs::write(dest.join(file), meta).unwrap();
    let a = zarrbuf::open(dest.to_str().unwrap(), "").unwrap();
    a.write_varlen_all(data).unwrap();
    a
}

fn destination(
    src: &zarrbuf::DynArray,
    dest: &Path,
    shape: &[u64],
    layout: &ArrayLayout,
) -> zarrbuf::DynArray {
    let store = zarrbuf::store::open_store(dest.to_str().unwrap()).unwrap();
    zarrbuf::create_like(src, shape, store, "/", layout, false).unwrap()
}

#[test]
fn v2_object_strings_copy_rechunked_recompressed_and_sharded() {
    let want = strings(11, 7);
    let data = VarLenBuffer::from_strings(vec![11], &want).unwrap();
    let src = source(
        &fresh("varlen-copy-src-v2"),
        ".zarray",
        V2_OBJECT_UTF8,
        &data,
    );
    for (name, layout) in [
        (
            "varlen-copy-v2-to-v3-zstd",
            ArrayLayout {
                chunks: Some(vec![3]),
                codecs: Some("zstd:1".parse().unwrap()),
                ..Default::default()
            },
        ),
        (
            "varlen-copy-v2-to-v3-sharded",
            ArrayLayout {
                chunks: Some(vec![2]),
                shards: Some(vec![6]),
                codecs: Some("gzip:1".parse().unwrap()),
                ..Default::default()
            },
        ),
    ] {
        let dest = fresh(name);
        let dst = destination(&src, &dest, &[11], &layout);
        let opts = CopyOptions::default().with_memory_bytes(1);
        zarrbuf::copy_array(&src, &dst, &opts).unwrap();
        let info = zarrbuf::describe_varlen(&dst).unwrap();
        assert_eq!(info.data_type, zarrbuf::VarLenKind::Utf8);
        assert_eq!(info.stored_type, "string");
        assert_eq!(info.zarr_format, 3);
        let back: Vec<String> = dst
            .retrieve_array_subset(&ArraySubset::new_with_ranges(&[0..11]))
            .unwrap();
        assert_eq!(back, want, "{name}");
        expect(&dest, "", &data);
    }
}

#[test]
fn bytes_copy_of_a_subset_keeps_zarr_python_metadata() {
    let want: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; i as usize]).collect();
    let data = VarLenBuffer::from_bytes_iter(vec![10], &want).unwrap();
    let src = source(
        &fresh("varlen-copy-src-bytes"),
        "zarr.json",
        V3_BYTES_GZIP,
        &data,
    );
    let dest = fresh("varlen-copy-bytes-subset");
    let layout = ArrayLayout {
        chunks: Some(vec![4]),
        ..Default::default()
    };
    let dst = destination(&src, &dest, &[7], &layout);
    zarrbuf::copy_array(&src, &dst, &CopyOptions::default().with_subset(vec![2..9])).unwrap();
    let back: Vec<Vec<u8>> = dst
        .retrieve_array_subset(&ArraySubset::new_with_ranges(&[0..7]))
        .unwrap();
    assert_eq!(back, want[2..9]);
    // zarr-python's names: `variable_length_bytes`, a base64 fill value.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dest.join("zarr.json")).unwrap()).unwrap();
    assert_eq!(meta["data_type"], "variable_length_bytes");
    assert_eq!(meta["fill_value"], "");
    expect(
        &dest,
        "",
        &VarLenBuffer::from_bytes_iter(vec![7], &want[2..9]).unwrap(),
    );
}

#[test]
fn copies_between_strings_and_numbers_are_refused() {
    let data = VarLenBuffer::from_strings(vec![11], strings(11, 8)).unwrap();
    let src = source(
        &fresh("varlen-copy-src-refused"),
        ".zarray",
        V2_OBJECT_UTF8,
        &data,
    );
    let numbers = zarrbuf::open(
        concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/data/v3_int8.zarr"),
        "",
    )
    .unwrap();
    let e = zarrbuf::copy_array(&numbers, &src, &CopyOptions::default()).unwrap_err();
    assert!(
        matches!(&e, zarrbuf::Error::DataType(m) if m.contains("fixed-size")),
        "{e}"
    );
}
