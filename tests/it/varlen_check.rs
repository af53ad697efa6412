//! `check` and reads agree on variable-length chunks: a chunk a read refuses (bytes after
//! its last value, a cut last value, a wrong count) is a `check` finding with the same
//! reason, never a panic; and a variable-length read stays within its budget: a chunk that
//! inflates past `max_bytes`, or offsets that alone exceed it, are refused before the memory
//! is taken.

#![allow(clippy::single_range_in_vec_init)] // 1-d subsets: one range per dimension

use serde_json::json;
use std::path::{Path, PathBuf};
use zarrbuf::options::{CheckOptions, ReadOptions};
use zarrbuf::{ArrayReadExt, BufferPrototype, Error, VarLenBuffer};

fn vlen<T: AsRef<[u8]>>(items: &[T]) -> Vec<u8> {
    let mut out = (items.len() as u32).to_le_bytes().to_vec();
    for item in items {
        out.extend_from_slice(&(item.as_ref().len() as u32).to_le_bytes());
        out.extend_from_slice(item.as_ref());
    }
    out
}

fn store_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("varlen-check")
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

/// A 1-d v3 `string` array of `n` elements in chunks of `chunk` with `codecs`.
fn strings_meta(dir: &Path, n: u64, chunk: u64, codecs: serde_json::Value) {
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [n], "data_type": "string",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": "", "codecs": codecs, "attributes": {}
    });
    write(dir, "zarr.json", &serde_json::to_vec(&meta).unwrap());
}

fn plain() -> serde_json::Value {
    json!([{"name": "vlen-utf8", "configuration": {}}])
}

fn check_findings(dir: &Path) -> Vec<String> {
    let report =
        zarrbuf::check::check_array(dir.to_str().unwrap(), "", &CheckOptions::default()).unwrap();
    report.findings.iter().map(ToString::to_string).collect()
}

#[test]
fn every_chunk_a_read_refuses_is_a_check_finding() {
    let good = vlen(&["ab", "c"]);
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"junk");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("trailing", trailing, "4 bytes follow its last element"),
        (
            "cut-last",
            good[..good.len() - 1].to_vec(),
            "element 1 claims 1 bytes",
        ),
        (
            "cut-prefix",
            good[..good.len() - 3].to_vec(),
            "length prefix of element 1",
        ),
        ("count", vlen(&["a", "b", "c"]), "holds 3 elements"),
        ("utf8", vlen(&[&b"ok"[..], b"\xe2\x82"]), "not valid UTF-8"),
    ];
    for (name, bad, want) in cases {
        let dir = store_dir(name);
        strings_meta(&dir, 4, 2, plain());
        write(&dir, "c/0", &vlen(&["ok", "ok"]));
        write(&dir, "c/1", &bad);
        let read = zarrbuf::open(dir.to_str().unwrap(), "")
            .unwrap()
            .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
            .unwrap_err()
            .to_string();
        assert!(read.contains(want), "{name}: read: {read}");
        let found = check_findings(&dir);
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        assert!(
            found[0].starts_with("c/1: undecodable:") && found[0].contains(want),
            "{name}: {found:?}"
        );
    }
}

#[test]
fn the_cli_check_of_a_cut_last_value_is_a_finding_not_a_panic() {
    let dir = store_dir("cli-cut-last");
    strings_meta(&dir, 4, 2, plain());
    write(&dir, "c/0", &vlen(&["ok", "ok"]));
    let good = vlen(&["abc", "defgh"]);
    write(&dir, "c/1", &good[..good.len() - 2]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(["check", dir.to_str().unwrap()])
        .env_remove("ZARRBUF_DEVICE")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout} {stderr}");
    assert!(
        !stderr.contains("internal error") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(
        stdout.contains("c/1") || stderr.contains("c/1"),
        "{stdout} {stderr}"
    );
}

#[test]
fn a_damaged_inner_chunk_of_a_sharded_string_array_is_named_by_check() {
    // One shard of two inner chunks of 2; the second has bytes after its last value.
    let dir = store_dir("sharded-trailing");
    let codecs = json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [2],
        "codecs": [{"name": "vlen-utf8", "configuration": {}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_location": "end"
    }}]);
    strings_meta(&dir, 4, 4, codecs);
    let a = vlen(&["a", "b"]);
    let mut b = vlen(&["c", "d"]);
    b.extend_from_slice(&[0, 0]);
    let mut shard = a.clone();
    shard.extend_from_slice(&b);
    for (offset, len) in [(0u64, a.len() as u64), (a.len() as u64, b.len() as u64)] {
        shard.extend_from_slice(&offset.to_le_bytes());
        shard.extend_from_slice(&len.to_le_bytes());
    }
    write(&dir, "c/0", &shard);
    let read = zarrbuf::open(dir.to_str().unwrap(), "")
        .unwrap()
        .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
        .unwrap_err()
        .to_string();
    assert!(read.contains("2 bytes follow"), "{read}");
    let found = check_findings(&dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("c/0 inner chunk [1]: undecodable:")
            && found[0].contains("2 bytes follow"),
        "{found:?}"
    );
}

#[test]
fn a_chunk_inflating_past_max_bytes_stops_there() {
    // Two values, then 64 MiB of zeros, zstd-compressed to a few kilobytes.
    let dir = store_dir("zstd-trailing-bomb");
    strings_meta(
        &dir,
        2,
        2,
        json!([{"name": "vlen-utf8", "configuration": {}},
               {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]),
    );
    let mut bomb = vlen(&["a", "b"]);
    bomb.resize(bomb.len() + (64 << 20), 0);
    write(&dir, "c/0", &zstd::bulk::compress(&bomb, 1).unwrap());
    let array = zarrbuf::open(dir.to_str().unwrap(), "").unwrap();
    let opts = ReadOptions::default().with_max_bytes(1 << 20);
    let err = array
        .read_all_as_opt::<VarLenBuffer>(&BufferPrototype::cpu(), &opts)
        .unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("key c/0"), "{err}");
}

#[test]
fn offsets_beyond_the_budget_are_refused_before_any_chunk_is_read() {
    // 10^9 fill-only elements: 8 GB of offsets.
    let dir = store_dir("huge-fill");
    strings_meta(&dir, 1_000_000_000, 1_000_000, plain());
    let array = zarrbuf::open(dir.to_str().unwrap(), "").unwrap();
    let opts = ReadOptions::default().with_max_bytes(1 << 30);
    let err = array
        .read_all_as_opt::<VarLenBuffer>(&BufferPrototype::cpu(), &opts)
        .unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("offsets"), "{err}");
}
