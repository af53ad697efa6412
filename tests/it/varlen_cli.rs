#![allow(clippy::single_range_in_vec_init)] // 1-d subsets: one range per dimension, on purpose
//! The command line on arrays of variable-length strings and bytes: `info`, `read` (count,
//! value bytes, checksum; `--out` fixed-width `.npy` and its size rule), `check` (damaged
//! string chunks) and `copy` (rechunk, recompress; left for CI's zarr-python readback).

use crate::varlen_write::{V2_OBJECT_UTF8, V3_BYTES_GZIP, expect, fresh, strings};
use std::path::Path;
use std::process::{Command, Output};
use zarrbuf::{ArrayWriteVarLenExt, VarLenBuffer};
use zarrs::array::ArraySubset;

fn zarrbuf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(args)
        .env_remove("ZARRBUF_DEVICE")
        .output()
        .expect("the zarrbuf binary runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A store named `name` with metadata file `file` (`meta`) holding `data`.
fn store(name: &str, file: &str, meta: &str, data: &VarLenBuffer) -> String {
    let dest = fresh(name);
    std::fs::write(dest.join(file), meta).unwrap();
    let a = zarrbuf::open(dest.to_str().unwrap(), "").unwrap();
    a.write_varlen_all(data).unwrap();
    dest.to_str().unwrap().to_string()
}

/// The `zarr.json` of an uncompressed v3 `string` array of `n` elements in chunks of `c`.
fn v3_plain(n: usize, c: usize) -> String {
    format!(
        r#"{{"zarr_format": 3, "node_type": "array", "shape": [{n}], "data_type": "string",
        "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [{c}]}}}},
        "chunk_key_encoding": {{"name": "default", "configuration": {{"separator": "/"}}}},
        "fill_value": "", "codecs": [{{"name": "vlen-utf8", "configuration": {{}}}}]}}"#
    )
}

#[test]
fn info_describes_string_and_bytes_arrays() {
    let data = VarLenBuffer::from_strings(vec![11], strings(11, 11)).unwrap();
    let s = store("varlen-cli-info-v2", ".zarray", V2_OBJECT_UTF8, &data);
    let o = zarrbuf(&["info", &s]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("zarr:       v2"), "{out}");
    assert!(out.contains("shape:      [11]"), "{out}");
    assert!(out.contains("chunks:     [4]"), "{out}");
    assert!(
        out.contains("data type:  string (variable-length UTF-8 strings; stored as |O vlen-utf8)"),
        "{out}"
    );
    assert!(out.contains("codecs:     vlen-utf8, zstd"), "{out}");
    let bytes = VarLenBuffer::from_bytes_iter(vec![10], vec![b"\x00\x01".to_vec(); 10]).unwrap();
    let b = store("varlen-cli-info-bytes", "zarr.json", V3_BYTES_GZIP, &bytes);
    let (out, _) = text(&zarrbuf(&["info", &b]));
    assert!(
        out.contains(
            "variable_length_bytes (variable-length byte strings; stored as variable_length_bytes)"
        ),
        "{out}"
    );
}

#[test]
fn read_prints_count_value_bytes_and_the_arrow_checksum() {
    let want = strings(11, 12);
    let data = VarLenBuffer::from_strings(vec![11], &want).unwrap();
    let s = store("varlen-cli-read", ".zarray", V2_OBJECT_UTF8, &data);
    let o = zarrbuf(&["read", &s]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    // The checksum: CRC-32 of the i64 offsets, then the values (Arrow's large layout).
    let mut h = crc32fast::Hasher::new();
    h.update(&data.offsets().to_vec().unwrap());
    h.update(&data.values().to_vec().unwrap());
    assert!(out.contains("elements:   11\n"), "{out}");
    let values: usize = want.iter().map(String::len).sum();
    assert!(
        out.contains(&format!("values:     {values} bytes")),
        "{out}"
    );
    assert!(
        out.contains(&format!("checksum:   crc32 {:08x} ", h.finalize())),
        "{out}"
    );
    // A subset's checksum is that of its own elements.
    let (out, _) = text(&zarrbuf(&["read", &s, "--subset", "3:5"]));
    let part = VarLenBuffer::from_strings(vec![2], &want[3..5]).unwrap();
    let mut h = crc32fast::Hasher::new();
    h.update(&part.offsets().to_vec().unwrap());
    h.update(&part.values().to_vec().unwrap());
    assert!(
        out.contains(&format!("crc32 {:08x} ", h.finalize())),
        "{out}"
    );
}

#[test]
fn read_out_writes_fixed_width_npy_or_refuses_with_the_rule() {
    let want = strings(11, 13);
    let data = VarLenBuffer::from_strings(vec![11], &want).unwrap();
    let s = store("varlen-cli-npy", ".zarray", V2_OBJECT_UTF8, &data);
    let file = Path::new(&s).with_extension("out.npy");
    let o = zarrbuf(&["read", &s, "--out", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o).1);
    let got = zarrbuf::npy::read(&file).unwrap();
    let fixed = zarrbuf::npy::to_fixed_width(&data).unwrap();
    assert_eq!(got.dtype(), fixed.dtype());
    assert!(matches!(got.dtype(), zarrbuf::DataType::FixedUtf32(n) if (1..=80).contains(&n)));
    assert_eq!(
        got.to_native_bytes().unwrap(),
        fixed.to_native_bytes().unwrap()
    );
    // 20,000 elements, one of 1,000 characters: 80 MB as <U1000 for ~160 kB of data.
    let mut many = vec![String::new(); 20_000];
    many[7] = "x".repeat(1000);
    let big = VarLenBuffer::from_strings(vec![20_000], &many).unwrap();
    let b = store(
        "varlen-cli-npy-refused",
        "zarr.json",
        &v3_plain(20_000, 5000),
        &big,
    );
    let refused = Path::new(&b).with_extension("out.npy");
    let o = zarrbuf(&["read", &b, "--out", refused.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("<U1000") && err.contains("4 ×") && err.contains("64 MiB"),
        "{err}"
    );
    assert!(!refused.exists());
}

#[test]
fn check_decodes_string_chunks_and_reports_damaged_ones() {
    let data = VarLenBuffer::from_strings(vec![6], ["a", "bc", "", "d", "ef", "g"]).unwrap();
    let s = store("varlen-cli-check", "zarr.json", &v3_plain(6, 2), &data);
    let o = zarrbuf(&["check", &s]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(text(&o).1.contains("3 chunks"), "{}", text(&o).1);
    // Chunk 1 with invalid UTF-8, chunk 2 cut short.
    let dir = Path::new(&s).join("c");
    std::fs::write(dir.join("1"), b"\x02\0\0\0\x01\0\0\0\xff\x01\0\0\0d").unwrap();
    std::fs::write(dir.join("2"), b"\x02\0\0\0\x09\0\0\0ef").unwrap();
    let o = zarrbuf(&["check", &s]);
    let (out, err) = text(&o);
    assert!(!o.status.success());
    assert!(out.contains("c/1") && out.contains("UTF-8"), "{out}");
    assert!(out.contains("c/2"), "{out}");
    assert!(err.contains("2 damaged"), "{err}");
}

#[test]
fn copy_rechunks_and_recompresses_string_arrays() {
    let want = strings(11, 14);
    let data = VarLenBuffer::from_strings(vec![11], &want).unwrap();
    let s = store("varlen-cli-copy-src", ".zarray", V2_OBJECT_UTF8, &data);
    let dest = fresh("varlen-cli-copy");
    let o = zarrbuf(&[
        "copy",
        &s,
        dest.to_str().unwrap(),
        "--chunks",
        "5",
        "--codec",
        "zstd:3",
        "--overwrite",
    ]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("chunks [5]") && err.contains("zstd"), "{err}");
    let dst = zarrbuf::open(dest.to_str().unwrap(), "").unwrap();
    let back: Vec<String> = dst
        .retrieve_array_subset(&ArraySubset::new_with_ranges(&[0..11]))
        .unwrap();
    assert_eq!(back, want);
    expect(&dest, "", &data);
}

#[test]
fn group_listings_name_string_arrays_as_readable() {
    let dest = fresh("varlen-cli-group");
    std::fs::write(
        dest.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group", "attributes": {}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(dest.join("station")).unwrap();
    std::fs::write(dest.join("station").join("zarr.json"), v3_plain(4, 2)).unwrap();
    let a = zarrbuf::open(dest.to_str().unwrap(), "station").unwrap();
    a.write_varlen_all(&VarLenBuffer::from_strings(vec![4], ["a", "b", "c", "d"]).unwrap())
        .unwrap();
    let o = zarrbuf(&["info", dest.to_str().unwrap(), "--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let text = doc.to_string();
    assert!(text.contains(r#""data_type":"string""#), "{text}");
    assert!(!text.contains("variable-length data type"), "{text}");
}
