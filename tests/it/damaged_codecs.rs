//! Damaged chunks under every codec that zarrbuf reads through its own plugins or through
//! zarrs features it enables (numcodecs' and zarr-python 3.4's codecs): a chunk cut short is
//! one clean error naming the chunk on every prototype and path (CPU decode-into, the staged
//! pipeline, the async reader); under the codecs that check their bytes (checksums,
//! compressors with their own check) a flipped byte is too; garbage of the right length
//! never panics. Each fixture of `fixtures/manifest.json` that uses such a codec is damaged.

use crate::common::{prototypes, walk};
use serde_json::Value;
use std::path::{Path, PathBuf};
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, Error,
    options::{PipelineMode, ReadOptions},
};

/// Codecs this covers (v2 ids, v3 names without `numcodecs.`), and whether they detect a
/// flipped byte (a checksum, or a compressed format that carries one).
const CODECS: &[(&str, bool)] = &[
    ("lz4", false),
    ("bz2", true),
    ("lzma", true), // .xz (format 1) checks; .lzma and raw streams (2, 3) do not
    ("zlib", true),
    ("gzip", true),
    ("zstd", false),
    ("blosc", false),
    ("crc32", true),
    ("crc32c", true),
    ("adler32", true),
    ("fletcher32", true),
    ("jenkins_lookup3", true),
    ("shuffle", false),
    ("base64", false),
    ("pcodec", false),
    ("delta", false),
    ("fixedscaleoffset", false),
    ("quantize", false),
    ("bitround", false),
    ("astype", false),
    ("packbits", false),
    ("categorize", false),
    ("scale_offset", false),
    ("cast_value", false),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The codec names in an array's metadata (v2 compressor and filters, v3 chain incl. shards).
fn codec_names(store: &Path, path: &str) -> (Vec<String>, bool) {
    fn v3(codecs: &Value, out: &mut Vec<String>) {
        for c in codecs.as_array().into_iter().flatten() {
            // zarr v3's own codecs (zstd, gzip, blosc, crc32c, ...) are zarrs' and tested
            // elsewhere; numcodecs.* and zarr-python 3.4's scale_offset / cast_value are new.
            let name = c["name"].as_str().unwrap_or_default();
            if let Some(id) = name.strip_prefix("numcodecs.") {
                out.push(id.to_string());
            } else if matches!(name, "scale_offset" | "cast_value") {
                out.push(name.to_string());
            }
            v3(&c["configuration"]["codecs"], out);
        }
    }
    let dir = store.join(path);
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string(dir.join("zarr.json")) {
        let meta: Value = serde_json::from_str(&text).unwrap();
        v3(&meta["codecs"], &mut out);
        let sharded = text.contains("sharding_indexed");
        (out, sharded)
    } else {
        let text = std::fs::read_to_string(dir.join(".zarray")).unwrap();
        let meta: Value = serde_json::from_str(&text).unwrap();
        for f in meta["filters"].as_array().into_iter().flatten() {
            out.push(f["id"].as_str().unwrap_or_default().to_string());
        }
        if let Some(id) = meta["compressor"]["id"].as_str() {
            out.push(id.to_string());
        }
        (out, false)
    }
}

/// A private copy of a store.
fn copy_store(src: &Path, tag: &str) -> PathBuf {
    let name = src.file_name().unwrap().to_string_lossy();
    let dst = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("damaged-codecs")
        .join(format!("{tag}-{name}"));
    let _ = std::fs::remove_dir_all(&dst);
    for f in walk(src) {
        let to = dst.join(f.strip_prefix(src).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&f, &to).unwrap();
    }
    dst
}

/// The largest chunk object of the array (the first of equal ones: not a ragged edge chunk)
/// and its indices as an error would print them.
fn a_chunk(store: &Path, path: &str) -> (PathBuf, String) {
    let dir = store.join(path);
    let meta = ["zarr.json", ".zarray", ".zattrs", ".zgroup"];
    let chunk = walk(&dir)
        .into_iter()
        .filter(|p| !meta.contains(&p.file_name().unwrap().to_string_lossy().as_ref()))
        .max_by_key(|p| {
            (
                std::fs::metadata(p).unwrap().len(),
                std::cmp::Reverse(p.clone()),
            )
        })
        .expect("a chunk object");
    let key = chunk
        .strip_prefix(&dir)
        .unwrap()
        .to_string_lossy()
        .to_string();
    let key = key
        .strip_prefix("c/")
        .or(key.strip_prefix("c."))
        .unwrap_or(&key);
    let meta_file = ["zarr.json", ".zarray"].map(|m| dir.join(m));
    let meta_file = meta_file
        .iter()
        .find(|m| m.is_file())
        .expect("array metadata");
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(meta_file).unwrap()).unwrap();
    let zero_d = meta["shape"].as_array().is_some_and(Vec::is_empty);
    let indices: Vec<&str> = if zero_d {
        Vec::new()
    } else {
        key.split(['/', '.']).collect()
    };
    (chunk, format!("[{}]", indices.join(", ")))
}

/// Every read of the damaged array: each prototype on both sync paths, and async.
fn reads(store: &Path, path: &str) -> Vec<(String, Result<(), Error>)> {
    let array = zarrbuf::open(store.to_str().unwrap(), path).unwrap();
    let all: Vec<_> = array.shape().iter().map(|&n| 0..n).collect();
    let mut out = Vec::new();
    for (pname, proto) in prototypes() {
        for mode in [
            PipelineMode::Auto,
            PipelineMode::Staged,
            PipelineMode::Direct,
        ] {
            let opts = ReadOptions::default().with_mode(mode);
            let r = array.read_opt(&all, &proto, &opts).map(|_| ());
            out.push((format!("{pname} {mode:?}"), r));
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = url::Url::from_directory_path(store).unwrap().to_string();
    let r = rt.block_on(async {
        let array = zarrbuf::open_async(&url, path).await?;
        array
            .read_all_async(&zarrbuf::BufferPrototype::cpu())
            .await
            .map(|_| ())
    });
    out.push(("async cpu".into(), r));
    out
}

/// Asserts every read failed with one clean error naming the chunk (or its shard).
fn assert_named(
    fixture: &str,
    what: &str,
    chunk: &str,
    sharded: bool,
    results: &[(String, Result<(), Error>)],
) {
    for (how, r) in results {
        let e = match r {
            Err(e) => e,
            Ok(()) => panic!("{fixture} ({what}) read without error on {how}"),
        };
        let m = e.to_string();
        assert!(
            matches!(e, Error::Zarr { .. }),
            "{fixture} ({what}) on {how}: {e:?}"
        );
        assert!(
            !m.contains('\n'),
            "{fixture} ({what}) on {how}: not one line: {m}"
        );
        assert!(
            m.contains(chunk) || (sharded && m.contains("shard")),
            "{fixture} ({what}) on {how}: the error does not name chunk {chunk}: {m}"
        );
    }
}

#[test]
fn damaged_chunks_under_every_new_codec_are_clean_errors_naming_the_chunk() {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("fixtures/manifest.json")).unwrap(),
    )
    .unwrap();
    let mut covered = std::collections::BTreeSet::new();
    for f in manifest.as_array().unwrap() {
        let name = f["name"].as_str().unwrap();
        let store = root().join("fixtures").join(f["store"].as_str().unwrap());
        let path = f["path"].as_str().unwrap_or("");
        let (codecs, sharded) = codec_names(&store, path);
        let ours: Vec<&(&str, bool)> = CODECS
            .iter()
            .filter(|(c, _)| codecs.iter().any(|n| n == c))
            .collect();
        if ours.is_empty() {
            continue;
        }
        covered.extend(ours.iter().map(|(c, _)| *c));

        // Cut short: every codec notices (too few bytes to decode, or the wrong size).
        let copy = copy_store(&store, "truncated");
        let (chunk, indices) = a_chunk(&copy, path);
        let bytes = std::fs::read(&chunk).unwrap();
        std::fs::write(&chunk, &bytes[..bytes.len() / 3]).unwrap();
        assert_named(name, "truncated", &indices, sharded, &reads(&copy, path));

        // A flipped byte: codecs with a check notice it.
        let meta_text = ["zarr.json", ".zarray"]
            .iter()
            .filter_map(|m| std::fs::read_to_string(store.join(path).join(m)).ok())
            .collect::<String>();
        let unchecked_lzma =
            meta_text.contains("\"format\": 2") || meta_text.contains("\"format\": 3");
        let checks = ours
            .iter()
            .any(|(c, checks)| *checks && !(*c == "lzma" && unchecked_lzma));
        if checks {
            let copy = copy_store(&store, "flipped");
            let (chunk, indices) = a_chunk(&copy, path);
            let mut bytes = std::fs::read(&chunk).unwrap();
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0x21;
            std::fs::write(&chunk, &bytes).unwrap();
            assert_named(name, "flipped byte", &indices, sharded, &reads(&copy, path));
        }

        // Garbage of the same length: an error naming the chunk, or (for codecs without a
        // check) some values; never a panic.
        let copy = copy_store(&store, "garbage");
        let (chunk, indices) = a_chunk(&copy, path);
        let n = std::fs::read(&chunk).unwrap().len();
        let garbage: Vec<u8> = (0..n).map(|i| (i * 151 + 7) as u8).collect();
        std::fs::write(&chunk, garbage).unwrap();
        for (how, r) in reads(&copy, path) {
            if let Err(e) = r {
                let m = e.to_string();
                assert!(
                    m.contains(&indices) || (sharded && m.contains("shard")),
                    "{name} (garbage) on {how}: the error does not name chunk {indices}: {m}"
                );
            }
        }
    }
    let missing: Vec<&str> = CODECS
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| !covered.contains(c))
        .collect();
    assert!(missing.is_empty(), "no fixture uses {missing:?}");
}
