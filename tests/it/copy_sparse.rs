//! Copies of sparse arrays skip the source chunks that are not stored: a block with no
//! source chunk (and no destination chunk) is neither read nor written, so a whole copy of
//! a 10^10-element fill-only array finishes in seconds and stores nothing, and the one
//! chunk that is stored is copied exactly.

#![allow(clippy::single_range_in_vec_init)] // 1-d subsets: one range per dimension

use zarrbuf::options::{CopyOptions, WriteOptions};
use zarrbuf::{ArrayReadExt, BufferPrototype};

fn meta(shape: u64, chunk: u64, fill: f64) -> String {
    format!(
        r#"{{"zarr_format":3,"node_type":"array","shape":[{shape}],"data_type":"float64",
        "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[{chunk}]}}}},
        "chunk_key_encoding":{{"name":"default","configuration":{{"separator":"/"}}}},
        "fill_value":{fill},"codecs":[{{"name":"bytes","configuration":{{"endian":"little"}}}}]}}"#
    )
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("copy-sparse-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn stored_chunks(dir: &std::path::Path) -> Vec<String> {
    let mut out: Vec<String> = match std::fs::read_dir(dir.join("c")) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

#[test]
fn absent_source_chunks_are_skipped_and_stored_ones_copied() {
    let src = scratch("src");
    std::fs::create_dir_all(src.join("c")).unwrap();
    std::fs::write(src.join("zarr.json"), meta(10_000_000_000, 1_000_000, 7.5)).unwrap();
    // Chunk 4321 stored: 0, 1, 2, ...
    let values: Vec<f64> = (0..1_000_000).map(f64::from).collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(src.join("c/4321"), &bytes).unwrap();
    let dst = scratch("dst");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(["copy", src.to_str().unwrap(), dst.to_str().unwrap()])
        .env_remove("ZARRBUF_DEVICE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stored_chunks(&dst), ["4321"]);
    let array = zarrbuf::open(dst.to_str().unwrap(), "").unwrap();
    let at = 4321 * 1_000_000;
    let got = array
        .read(&[at - 2..at + 3], &BufferPrototype::cpu())
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(got, [7.5, 7.5, 0.0, 1.0, 2.0]);
}

#[test]
fn a_different_fill_value_or_a_stored_destination_chunk_is_still_written() {
    // The destination's own fill value differs: the fill of the source must be written.
    let src = scratch("fill-src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("zarr.json"), meta(8, 4, 7.5)).unwrap();
    let dst = scratch("fill-dst");
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::write(dst.join("zarr.json"), meta(8, 4, 0.0)).unwrap();
    let (s, d) = (
        zarrbuf::open(src.to_str().unwrap(), "").unwrap(),
        zarrbuf::open(dst.to_str().unwrap(), "").unwrap(),
    );
    zarrbuf::copy_array(&s, &d, &Default::default()).unwrap();
    let got = d
        .read_all(&BufferPrototype::cpu())
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(got, [7.5; 8]);
    // Same fill value, but the destination holds a chunk: it is overwritten with the fill.
    let dst2 = scratch("fill-dst2");
    std::fs::create_dir_all(dst2.join("c")).unwrap();
    std::fs::write(dst2.join("zarr.json"), meta(8, 4, 7.5)).unwrap();
    std::fs::write(
        dst2.join("c/1"),
        [1.0f64; 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let d2 = zarrbuf::open(dst2.to_str().unwrap(), "").unwrap();
    zarrbuf::copy_array(&s, &d2, &Default::default()).unwrap();
    let got = d2
        .read_all(&BufferPrototype::cpu())
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(got, [7.5; 8]);
}

#[test]
fn store_empty_chunks_writes_the_fill_blocks_a_copy_would_skip() {
    // Nothing stored on either side, the same fill value: a default copy stores nothing,
    // one whose writes store empty chunks stores every chunk.
    let src = scratch("empty-src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("zarr.json"), meta(8, 4, 7.5)).unwrap();
    let s = zarrbuf::open(src.to_str().unwrap(), "").unwrap();
    for (name, store_empty, want) in [("skipped", false, &[][..]), ("stored", true, &["0", "1"])] {
        let dst = scratch(&format!("empty-dst-{name}"));
        std::fs::create_dir_all(&dst).unwrap();
        std::fs::write(dst.join("zarr.json"), meta(8, 4, 7.5)).unwrap();
        let d = zarrbuf::open(dst.to_str().unwrap(), "").unwrap();
        let write = WriteOptions::default().with_store_empty_chunks(store_empty);
        zarrbuf::copy_array(&s, &d, &CopyOptions::default().with_write(write)).unwrap();
        assert_eq!(stored_chunks(&dst), want, "{name}");
    }
}
