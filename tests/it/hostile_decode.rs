//! Damaged and hostile chunks and metadata, built here byte by byte: every decode is bounded
//! by the chunk's decoded size on every route, and sizes are checked before memory is
//! allocated. Each case asserts the error's words — that the decoder stopped at the chunk's
//! size ("stopped there"), or that a size was refused before anything was read or allocated
//! — never a timing.

#![allow(clippy::single_range_in_vec_init)]

use std::io::Read as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, ArrayWriteExt, BufferPrototype, Error, NDBuffer,
    options::{PipelineMode, ReadOptions},
};

/// A fresh, empty directory for one store (removed first if a previous run left it).
fn store_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("zarrbuf-hostile-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A v3 uint8 array of `shape` in chunks of `chunks` with the codec chain `codecs` (JSON).
fn v3_array(dir: &Path, shape: &[u64], chunks: &[u64], codecs: &str) {
    let meta = format!(
        r#"{{"zarr_format": 3, "node_type": "array", "shape": {shape:?},
            "data_type": "uint8", "fill_value": 0,
            "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": {chunks:?}}}}},
            "chunk_key_encoding": {{"name": "default", "configuration": {{"separator": "/"}}}},
            "codecs": {codecs}}}"#
    );
    std::fs::write(dir.join("zarr.json"), meta).unwrap();
}

/// A v2 uint8 array of 800 elements in one chunk, compressed by `compressor` (JSON).
fn v2_array(dir: &Path, compressor: &str) {
    let meta = format!(
        r#"{{"zarr_format": 2, "shape": [800], "chunks": [800], "dtype": "|u1",
            "compressor": {compressor}, "fill_value": 0, "order": "C", "filters": null}}"#
    );
    std::fs::write(dir.join(".zarray"), meta).unwrap();
}

/// The chunk a v3 array of one `n`-byte chunk under `codecs` stores for `n` bytes of ones:
/// a real encoding, by zarrs' (or zarrbuf's) encoder, of far more than 800 bytes.
fn encoded_ones(codecs: &str, n: u64) -> Vec<u8> {
    let dir = store_dir("encode");
    v3_array(&dir, &[n], &[n], codecs);
    let array = zarrbuf::open(text(&dir), "").unwrap();
    let ones = NDBuffer::from_vec(vec![1u8; n as usize], &[n as usize]).unwrap();
    array.write_all(&ones).unwrap();
    let chunk = std::fs::read(dir.join("c/0")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    chunk
}

/// A zstd frame of `n` zeros, streamed (never held), with or without its content size.
fn zstd_zeros(n: u64, content_size: bool) -> Vec<u8> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    e.include_contentsize(content_size).unwrap();
    if content_size {
        e.set_pledged_src_size(Some(n)).unwrap();
    }
    std::io::copy(&mut std::io::repeat(0).take(n), &mut e).unwrap();
    e.finish().unwrap()
}

/// Every read of `subset` of the array in `dir`: zarrs' decode-into (`Auto` and `Direct`),
/// the staged pipeline, and the async reader.
fn reads(dir: &Path, subset: &[Range<u64>]) -> Vec<(String, Result<NDBuffer, Error>)> {
    let array = zarrbuf::open(text(dir), "").unwrap();
    let cpu = BufferPrototype::cpu();
    let mut out = Vec::new();
    for mode in [
        PipelineMode::Auto,
        PipelineMode::Direct,
        PipelineMode::Staged,
    ] {
        let opts = ReadOptions::default().with_mode(mode);
        out.push((format!("{mode:?}"), array.read_opt(subset, &cpu, &opts)));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = url::Url::from_directory_path(dir).unwrap().to_string();
    let r = rt.block_on(async {
        let array = zarrbuf::open_async(&url, "").await?;
        array
            .read_opt_async(subset, &cpu, &ReadOptions::default())
            .await
    });
    out.push(("async".into(), r));
    out
}

/// Asserts that every read of `subset` fails naming chunk `c/0` and saying one of `words`.
fn assert_all_fail(dir: &Path, subset: &[Range<u64>], words: &[&str]) {
    for (route, r) in reads(dir, subset) {
        let err = match r {
            Ok(data) => panic!(
                "{route} read of {subset:?} returned data from a damaged chunk: {:?}",
                &data.to_vec::<u8>().unwrap()[..3.min(data.len())]
            ),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("c/0"),
            "{route}: the error names no chunk: {err}"
        );
        assert!(
            words.iter().any(|w| err.contains(w)),
            "{route}: {err:?} says none of {words:?}"
        );
    }
}

const SUBSETS: [Range<u64>; 2] = [300..303, 0..800];

/// What a read says of a chunk stored larger than any encoding of it, refused from its
/// stored size before it is read (the stores zarrbuf opens on local paths).
const SIZE_WORDS: &str = "more than any encoding of it takes";

/// Asserts that reads of `subset` through a store the caller built (zarrs' own directory
/// store, whose sizes zarrbuf does not ask) fail in the bounded decoders, saying one of
/// `words`, on zarrs' decode-into and on the staged pipeline.
fn assert_decoders_stop(dir: &Path, subset: &[Range<u64>], words: &[&str]) {
    let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(dir).unwrap());
    let array = zarrs::array::Array::open(store, "/").unwrap();
    for mode in [PipelineMode::Direct, PipelineMode::Staged] {
        let opts = ReadOptions::default().with_mode(mode);
        let err = array
            .read_opt(subset, &BufferPrototype::cpu(), &opts)
            .expect_err("a damaged chunk read through a caller's store")
            .to_string();
        assert!(
            words.iter().any(|w| err.contains(w)),
            "{mode:?} {subset:?}: {err:?} says none of {words:?}"
        );
    }
}

#[test]
fn an_uncompressed_chunk_of_the_wrong_size_is_an_error_on_every_route() {
    for stored in [799usize, 801, 1 << 20] {
        let dir = store_dir("short");
        v3_array(&dir, &[800], &[800], r#"[{"name": "bytes"}]"#);
        std::fs::create_dir_all(dir.join("c")).unwrap();
        std::fs::write(dir.join("c/0"), vec![7u8; stored]).unwrap();
        for subset in SUBSETS {
            assert_all_fail(&dir, &[subset], &[&format!("{stored}")]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_chunk_shorter_than_its_checksum_is_an_error_on_every_route() {
    // zarrs' partial decoder of a checksum codec strips its 4 bytes unchecked: a subset
    // read of a shorter chunk must be refused before it gets there (found by fuzzing).
    let codecs = r#"[{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1,
        "checksum": false}}, {"name": "crc32c"}]"#;
    for stored in [0usize, 1, 3] {
        let dir = store_dir("below-checksum");
        v3_array(&dir, &[800], &[800], codecs);
        std::fs::create_dir_all(dir.join("c")).unwrap();
        std::fs::write(dir.join("c/0"), vec![0x2cu8; stored]).unwrap();
        for subset in SUBSETS {
            assert_all_fail(&dir, &[subset], &["fewer than the 4 bytes of checksums"]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_zstd_chunk_inflating_to_a_gibibyte_stops_at_the_chunk_size() {
    for content_size in [true, false] {
        let dir = store_dir("zstd");
        v3_array(
            &dir,
            &[800],
            &[800],
            r#"[{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]"#,
        );
        std::fs::create_dir_all(dir.join("c")).unwrap();
        std::fs::write(dir.join("c/0"), zstd_zeros(1 << 30, content_size)).unwrap();
        for subset in SUBSETS {
            // zarrbuf's stores tell the chunk's size: refused before it is read.
            assert_all_fail(&dir, std::slice::from_ref(&subset), &[SIZE_WORDS]);
            // A caller's store is not asked: declared sizes are refused before decoding,
            // streams stop one byte past 800.
            assert_decoders_stop(
                &dir,
                &[subset],
                &["declares 1073741824 decoded bytes", "stopped there"],
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn every_compressor_stops_at_the_chunk_size() {
    const BIG: u64 = 32 << 20;
    let v3 = |codec: &str| format!(r#"[{{"name": "bytes"}}, {codec}]"#);
    // (the codec in a v3 chain, the same compressor as a v2 .zarray's, or none)
    let cases = [
        (
            r#"{"name": "gzip", "configuration": {"level": 1}}"#,
            Some(r#"{"id": "gzip", "level": 1}"#),
        ),
        (
            r#"{"name": "numcodecs.zlib", "configuration": {"level": 1}}"#,
            Some(r#"{"id": "zlib", "level": 1}"#),
        ),
        (
            r#"{"name": "numcodecs.bz2", "configuration": {"level": 1}}"#,
            Some(r#"{"id": "bz2", "level": 1}"#),
        ),
        (
            r#"{"name": "numcodecs.lzma", "configuration": {"format": 1, "preset": 1}}"#,
            Some(r#"{"id": "lzma", "format": 1, "preset": 1}"#),
        ),
        (
            r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "noshuffle", "typesize": 1, "blocksize": 0}}"#,
            Some(r#"{"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 0, "blocksize": 0}"#),
        ),
        (
            r#"{"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}"#,
            Some(r#"{"id": "lz4", "acceleration": 1}"#),
        ),
        (
            r#"{"name": "zstd", "configuration": {"level": 1, "checksum": false}}"#,
            Some(r#"{"id": "zstd", "level": 1}"#),
        ),
    ];
    let words = ["stopped there", "declares", "decodes to", SIZE_WORDS];
    for (codec, v2) in cases {
        let chunk = encoded_ones(&v3(codec), BIG);
        let dir = store_dir("v3");
        v3_array(&dir, &[800], &[800], &v3(codec));
        std::fs::create_dir_all(dir.join("c")).unwrap();
        std::fs::write(dir.join("c/0"), &chunk).unwrap();
        for subset in SUBSETS {
            assert_all_fail(&dir, std::slice::from_ref(&subset), &words);
            assert_decoders_stop(&dir, &[subset], &words[..3]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
        if let Some(compressor) = v2 {
            let dir = store_dir("v2");
            v2_array(&dir, compressor);
            // v2 keys: "0"; the message names the key as stored.
            std::fs::write(dir.join("0"), &chunk).unwrap();
            let array = zarrbuf::open(text(&dir), "").unwrap();
            for mode in [PipelineMode::Direct, PipelineMode::Staged] {
                let opts = ReadOptions::default().with_mode(mode);
                let err = array
                    .read_opt(&[300..303], &BufferPrototype::cpu(), &opts)
                    .expect_err(compressor)
                    .to_string();
                assert!(
                    words.iter().any(|w| err.contains(w)),
                    "v2 {compressor} {mode:?}: {err}"
                );
            }
            let report = zarrbuf::check::check_array(text(&dir), "", &Default::default()).unwrap();
            let problems: Vec<_> = report.findings.iter().map(|f| f.problem).collect();
            assert_eq!(
                problems,
                vec![zarrbuf::check::Problem::WrongSize],
                "v2 {compressor}: {:?}",
                report.findings
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

#[test]
fn check_reports_bombs_as_wrong_size_chunks() {
    let dir = store_dir("check");
    v3_array(
        &dir,
        &[1600],
        &[800],
        r#"[{"name": "bytes"}, {"name": "numcodecs.bz2", "configuration": {"level": 1}}]"#,
    );
    let bomb = encoded_ones(
        r#"[{"name": "bytes"}, {"name": "numcodecs.bz2", "configuration": {"level": 1}}]"#,
        16 << 20,
    );
    std::fs::create_dir_all(dir.join("c")).unwrap();
    std::fs::write(dir.join("c/0"), &bomb).unwrap();
    let report = zarrbuf::check::check_array(text(&dir), "", &Default::default()).unwrap();
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    let f = &report.findings[0];
    assert_eq!(f.key, "c/0");
    assert_eq!(f.problem, zarrbuf::check::Problem::WrongSize, "{f}");
    assert!(f.detail.contains("stopped there"), "{f}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A sharded uint8 array of `shards` shards of 64 elements in 8 inner chunks, its index at
/// the end, uncompressed, without a checksum (so that it can be written by hand).
fn sharded(dir: &Path, shards: u64) {
    v3_array(
        dir,
        &[64 * shards],
        &[64],
        r#"[{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [8], "codecs": [{"name": "bytes"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_location": "end"}}]"#,
    );
}

/// A shard holding inner chunk `k` at `(offset, size)` for each entry (others missing).
fn shard_bytes(data: &[u8], entries: &[(u64, u64)]) -> Vec<u8> {
    let mut out = data.to_vec();
    for k in 0..8 {
        let (o, s) = entries.get(k).copied().unwrap_or((u64::MAX, u64::MAX));
        out.extend_from_slice(&o.to_le_bytes());
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

#[test]
fn shard_indexes_claiming_huge_or_wrong_sizes_are_findings_and_errors() {
    let dir = store_dir("shard");
    sharded(&dir, 2);
    std::fs::create_dir_all(dir.join("c")).unwrap();
    // Shard 0: inner chunk 0 claims 2^63 - 1 bytes. Shard 1: inner chunk 0 is 7 bytes
    // where an uncompressed inner chunk takes 8, inner chunk 1 is fine.
    std::fs::write(
        dir.join("c/0"),
        shard_bytes(&[1u8; 8], &[(0, (1 << 63) - 1)]),
    )
    .unwrap();
    std::fs::write(dir.join("c/1"), shard_bytes(&[2u8; 16], &[(0, 7), (8, 8)])).unwrap();
    let report = zarrbuf::check::check_array(text(&dir), "", &Default::default()).unwrap();
    let keys: Vec<(&str, Option<Vec<u64>>)> = report
        .findings
        .iter()
        .map(|f| (f.key.as_str(), f.inner.clone()))
        .collect();
    // The impossible entry is a finding for its inner chunk alone (the index's other
    // entries still locate theirs, which a repair keeps).
    assert_eq!(
        keys,
        vec![("c/0", Some(vec![0])), ("c/1", Some(vec![0]))],
        "{:?}",
        report.findings
    );
    assert!(report.findings[0].detail.contains("9223372036854775807"));
    assert!(report.findings[1].detail.contains("exactly 8"));
    let array = zarrbuf::open(text(&dir), "").unwrap();
    for mode in [PipelineMode::Direct, PipelineMode::Staged] {
        let opts = ReadOptions::default().with_mode(mode);
        let cpu = BufferPrototype::cpu();
        let err = array.read_opt(&[0..3], &cpu, &opts).unwrap_err();
        assert!(
            err.to_string().contains("9223372036854775807"),
            "{mode:?}: {err}"
        );
        let err = array.read_opt(&[64..67], &cpu, &opts).unwrap_err();
        assert!(err.to_string().contains("exactly 8"), "{mode:?}: {err}");
        let good = array.read_opt(&[72..75], &cpu, &opts).unwrap();
        assert_eq!(good.to_vec::<u8>().unwrap(), vec![2, 2, 2], "{mode:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_never_reads_a_shard_whole() {
    let dir = store_dir("sparse");
    sharded(&dir, 1);
    std::fs::create_dir_all(dir.join("c")).unwrap();
    // A 16 GiB sparse shard whose index (all zeros) gives every inner chunk 0 bytes.
    let f = std::fs::File::create(dir.join("c/0")).unwrap();
    f.set_len(16 << 30).unwrap();
    drop(f);
    let report = zarrbuf::check::check_array(text(&dir), "", &Default::default()).unwrap();
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    assert!(report.findings[0].detail.contains("the index is damaged"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_whole_read_of_a_huge_fill_only_array_is_refused_and_subsets_read() {
    let dir = store_dir("huge");
    v3_array(
        &dir,
        &[1_000_000_000_000],
        &[1_000_000],
        r#"[{"name": "bytes"}]"#,
    );
    let array = zarrbuf::open(text(&dir), "").unwrap();
    let cpu = BufferPrototype::cpu();
    match array.read_all(&cpu) {
        Err(Error::TooLarge { bytes, .. }) => assert_eq!(bytes, 1_000_000_000_000),
        other => panic!("expected TooLarge, got {:?}", other.map(|d| d.len())),
    }
    let err = array.read_all(&cpu).unwrap_err().to_string();
    assert!(err.contains("931.3 GiB") && err.contains("subset"), "{err}");
    let part = array
        .read(&[999_999_999_990..1_000_000_000_000], &cpu)
        .unwrap();
    assert_eq!(part.to_vec::<u8>().unwrap(), vec![0u8; 10]);
    // An explicit limit, also on the async reader.
    let opts = ReadOptions::default().with_max_bytes(100);
    assert!(matches!(
        array.read_opt(&[0..101], &cpu, &opts),
        Err(Error::TooLarge {
            bytes: 101,
            limit: 100,
            ..
        })
    ));
    assert!(array.read_opt(&[0..100], &cpu, &opts).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn huge_elements_in_metadata_are_refused_before_allocation() {
    let dir = store_dir("dtype");
    std::fs::write(
        dir.join(".zarray"),
        r#"{"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "|S8589934592",
            "compressor": null, "fill_value": null, "order": "C", "filters": null}"#,
    )
    .unwrap();
    let Err(err) = zarrbuf::open(text(&dir), "") else {
        panic!("an array of 8 GiB elements opened");
    };
    let err = err.to_string();
    assert!(err.contains("8589934592 bytes"), "{err}");
    let out = zarrbuf_cli(&["info", text(&dir)]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("8589934592 bytes"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn zarrbuf_cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(args)
        .env_remove("ZARRBUF_DEVICE")
        .output()
        .expect("the zarrbuf binary runs")
}

#[test]
fn the_cli_reads_within_memory_and_copies_refuse_huge_chunks() {
    let dir = store_dir("cli");
    v3_array(&dir, &[800], &[800], r#"[{"name": "bytes"}]"#);
    let out = zarrbuf_cli(&["read", text(&dir), "--memory", "799"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("takes 800 bytes") && stderr.contains("799"),
        "{stderr}"
    );
    let ok = zarrbuf_cli(&["read", text(&dir), "--memory", "800"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let dst = store_dir("copy").join("out.zarr");
    let out = zarrbuf_cli(&["copy", text(&dir), text(&dst), "--chunks", "1099511627776"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1099511627776 bytes") && stderr.contains("--chunks"),
        "{stderr}"
    );
    assert!(!dst.exists(), "the refused copy created its destination");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_shard_index_too_large_to_hold_is_refused() {
    let dir = store_dir("index");
    // 2^31 inner chunks of one byte per shard: a 32 GiB index.
    v3_array(
        &dir,
        &[1 << 31],
        &[1 << 31],
        r#"[{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [1], "codecs": [{"name": "bytes"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_location": "end"}}]"#,
    );
    std::fs::create_dir_all(dir.join("c")).unwrap();
    std::fs::write(dir.join("c/0"), [0u8; 64]).unwrap();
    let array = zarrbuf::open(text(&dir), "").unwrap();
    let err = array
        .read(&[0..3], &BufferPrototype::cpu())
        .unwrap_err()
        .to_string();
    assert!(err.contains("shard index"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_bounded_codecs_still_write_and_read_back() {
    let chains = [
        r#"[{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1, "checksum": true}}]"#,
        r#"[{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}]"#,
        r#"[{"name": "bytes"}, {"name": "numcodecs.bz2", "configuration": {"level": 1}}]"#,
        r#"[{"name": "bytes"}, {"name": "numcodecs.zlib", "configuration": {"level": 1}}, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]"#,
    ];
    for chain in chains {
        let dir = store_dir("roundtrip");
        v3_array(&dir, &[1000], &[300], chain);
        let array = zarrbuf::open(text(&dir), "").unwrap();
        let data: Vec<u8> = (0..1000u32).map(|i| (i % 7) as u8).collect();
        array
            .write_all(&NDBuffer::from_vec(data.clone(), &[1000]).unwrap())
            .unwrap();
        for (route, r) in reads(&dir, &[0..1000]) {
            assert_eq!(r.unwrap().to_vec::<u8>().unwrap(), data, "{chain} {route}");
        }
        for (route, r) in reads(&dir, &[301..305]) {
            assert_eq!(
                r.unwrap().to_vec::<u8>().unwrap(),
                data[301..305],
                "{chain} {route}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A zip file of `entries`, each deflated (method 8), as `zip` writes one: the central
/// directory declares each entry's true inflated size.
fn write_deflated_zip(path: &Path, entries: &[(&str, Vec<u8>)]) {
    use std::io::Write as _;
    let mut out: Vec<u8> = Vec::new();
    let mut central: Vec<u8> = Vec::new();
    let u16le = |v: &mut Vec<u8>, x: u16| v.extend_from_slice(&x.to_le_bytes());
    let u32le = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
    for (name, data) in entries {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(data).unwrap();
        let packed = z.finish().unwrap();
        let offset = out.len() as u32;
        let crc = crc32fast::hash(data);
        let (n, clen, len) = (name.len() as u16, packed.len() as u32, data.len() as u32);
        u32le(&mut out, 0x0403_4b50);
        for x in [20, 0, 8, 0, 33] {
            u16le(&mut out, x);
        }
        for x in [crc, clen, len] {
            u32le(&mut out, x);
        }
        u16le(&mut out, n);
        u16le(&mut out, 0);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&packed);
        u32le(&mut central, 0x0201_4b50);
        for x in [20, 20, 0, 8, 0, 33] {
            u16le(&mut central, x);
        }
        for x in [crc, clen, len] {
            u32le(&mut central, x);
        }
        for x in [n, 0, 0, 0, 0] {
            u16le(&mut central, x);
        }
        u32le(&mut central, 0);
        u32le(&mut central, offset);
        central.extend_from_slice(name.as_bytes());
    }
    let (cd_offset, cd_size, count) =
        (out.len() as u32, central.len() as u32, entries.len() as u16);
    out.extend_from_slice(&central);
    u32le(&mut out, 0x0605_4b50);
    for x in [0, 0, count, count] {
        u16le(&mut out, x);
    }
    u32le(&mut out, cd_size);
    u32le(&mut out, cd_offset);
    u16le(&mut out, 0);
    std::fs::write(path, out).unwrap();
}

/// Asserts that every sync route's read of `subset` of the array at `location` fails
/// naming chunk `key` and its stored size.
fn assert_refused_by_size(location: &str, subset: &[Range<u64>], key: &str, stored: u64) {
    let array = zarrbuf::open(location, "").unwrap();
    for mode in [
        PipelineMode::Auto,
        PipelineMode::Direct,
        PipelineMode::Staged,
    ] {
        let opts = ReadOptions::default().with_mode(mode);
        let err = array
            .read_opt(subset, &BufferPrototype::cpu(), &opts)
            .expect_err("a chunk stored larger than any encoding of it read")
            .to_string();
        assert!(
            err.contains(key) && err.contains(&format!("stored as {stored} bytes")),
            "{mode:?} {subset:?}: {err}"
        );
    }
}

#[test]
fn a_chunk_stored_larger_than_any_encoding_is_refused_before_it_is_read() {
    // A zip whose entry `c/0` honestly declares 64 MiB inflated, for a chunk of 800 bytes:
    // refused from the central directory's size, before anything is inflated.
    let dir = store_dir("zip-size");
    let meta = dir.join("meta");
    std::fs::create_dir_all(&meta).unwrap();
    v3_array(&meta, &[1600], &[800], r#"[{"name": "bytes"}]"#);
    let zarr_json = std::fs::read(meta.join("zarr.json")).unwrap();
    let zip = dir.join("bomb.zip");
    write_deflated_zip(
        &zip,
        &[
            ("zarr.json", zarr_json),
            ("c/0", vec![0u8; 64 << 20]),
            ("c/1", vec![7u8; 800]),
        ],
    );
    for subset in [0..1600, 0..800, 300..303] {
        assert_refused_by_size(text(&zip), &[subset], "c/0", 64 << 20);
    }
    let beside = zarrbuf::open(text(&zip), "")
        .unwrap()
        .read(&[800..810], &BufferPrototype::cpu())
        .unwrap();
    assert_eq!(beside.to_vec::<u8>().unwrap(), vec![7u8; 10]);
    // A sparse 16 GiB chunk file under a compressor: no encoding of 800 bytes is that large,
    // so no route reads the file before refusing it (`check` neither).
    let sparse = store_dir("sparse-chunk");
    v3_array(
        &sparse,
        &[800],
        &[800],
        r#"[{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]"#,
    );
    std::fs::create_dir_all(sparse.join("c")).unwrap();
    std::fs::File::create(sparse.join("c/0"))
        .unwrap()
        .set_len(16 << 30)
        .unwrap();
    for subset in [0..800, 300..303] {
        assert_refused_by_size(text(&sparse), &[subset], "c/0", 16 << 30);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = url::Url::from_directory_path(&sparse).unwrap().to_string();
    let err = rt
        .block_on(async {
            let array = zarrbuf::open_async(&url, "").await?;
            array.read_all_async(&BufferPrototype::cpu()).await
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("c/0") && err.contains("stored as 17179869184 bytes"),
        "{err}"
    );
    let report = zarrbuf::check::check_array(text(&sparse), "", &Default::default()).unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.key == "c/0" && f.detail.contains("more than any encoding")),
        "{:?}",
        report.findings
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&sparse).unwrap();
}

#[test]
fn a_shard_index_over_the_limit_is_refused_by_read_and_check_alike() {
    // 2^25 inner chunks of one byte per shard: a 512 MiB index (with its checksum), in a
    // sparse file long enough to hold it.
    let dir = store_dir("index-limit");
    let n: u64 = 1 << 25;
    v3_array(
        &dir,
        &[n],
        &[n],
        r#"[{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [1], "codecs": [{"name": "bytes"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                             {"name": "crc32c"}],
            "index_location": "end"}}]"#,
    );
    std::fs::create_dir_all(dir.join("c")).unwrap();
    std::fs::File::create(dir.join("c/0"))
        .unwrap()
        .set_len(n * 16 + 4)
        .unwrap();
    let array = zarrbuf::open(text(&dir), "").unwrap();
    for mode in [PipelineMode::Direct, PipelineMode::Staged] {
        let err = array
            .read_opt(
                &[0..10],
                &BufferPrototype::cpu(),
                &ReadOptions::default().with_mode(mode),
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("key c/0") && err.contains(&(n * 16 + 4).to_string()),
            "{mode:?}: {err}"
        );
    }
    let err = zarrbuf::check::check_array(text(&dir), "", &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("key c/0") && err.contains("shard index"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A uint16 array of 512 elements in chunks of 256 under zarrs' pcodec: v3
/// (`numcodecs.pcodec`, keys `c/0`) or v2 (compressor `pcodec`, keys `0`).
fn pcodec_array(dir: &Path, v2: bool) {
    if v2 {
        let meta = r#"{"zarr_format": 2, "shape": [512], "chunks": [256], "dtype": "<u2",
            "compressor": {"id": "pcodec", "level": 8}, "fill_value": 0, "order": "C",
            "filters": null}"#;
        std::fs::write(dir.join(".zarray"), meta).unwrap();
    } else {
        let meta = r#"{"zarr_format": 3, "node_type": "array", "shape": [512],
            "data_type": "uint16", "fill_value": 0,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [256]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "codecs": [{"name": "numcodecs.pcodec", "configuration": {"level": 8}}]}"#;
        std::fs::write(dir.join("zarr.json"), meta).unwrap();
    }
}

/// A valid pco file of `chunks` pco chunks of 2^20 u16 zeros each: a few hundred bytes
/// that decode to `chunks` × 2 MiB.
fn pcodec_bomb(chunks: usize) -> Vec<u8> {
    let fc = pco::standalone::FileCompressor::default();
    let zeros = vec![0u16; 1 << 20];
    let mut one = Vec::new();
    fc.chunk_compressor(&zeros, &pco::ChunkConfig::default())
        .unwrap()
        .write(&mut one)
        .unwrap();
    let mut file = fc.write_header(Vec::new()).unwrap();
    for _ in 0..chunks {
        file.extend_from_slice(&one);
    }
    fc.write_footer(file).unwrap()
}

#[test]
fn a_pcodec_chunk_decoding_to_gigabytes_stops_at_the_chunk_size() {
    // 512 pco chunks: 2^29 numbers, a GiB of u16, in the bytes of a 256-element chunk.
    let bomb = pcodec_bomb(512);
    let words = ["decodes to more than the chunk's 256 numbers", SIZE_WORDS];
    let dir = store_dir("pcodec");
    pcodec_array(&dir, false);
    std::fs::create_dir_all(dir.join("c")).unwrap();
    std::fs::write(dir.join("c/0"), &bomb).unwrap();
    for subset in [3..7, 0..512] {
        assert_all_fail(&dir, std::slice::from_ref(&subset), &words);
        // A caller's store is not asked its sizes: the bounded decoder stops.
        assert_decoders_stop(&dir, &[subset], &words[..1]);
    }
    let report = zarrbuf::check::check_array(text(&dir), "", &Default::default()).unwrap();
    let problems: Vec<_> = report.findings.iter().map(|f| f.problem).collect();
    assert_eq!(
        problems,
        vec![zarrbuf::check::Problem::WrongSize],
        "{:?}",
        report.findings
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let dir = store_dir("pcodec-v2");
    pcodec_array(&dir, true);
    std::fs::write(dir.join("0"), &bomb).unwrap();
    let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(&dir).unwrap());
    let array = zarrs::array::Array::open(store, "/").unwrap();
    for mode in [PipelineMode::Direct, PipelineMode::Staged] {
        let opts = ReadOptions::default().with_mode(mode);
        for subset in [3..7, 0..512] {
            let err = array
                .read_opt(
                    std::slice::from_ref(&subset),
                    &BufferPrototype::cpu(),
                    &opts,
                )
                .expect_err("a v2 pcodec bomb")
                .to_string();
            assert!(err.contains(words[0]), "v2 {mode:?} {subset:?}: {err}");
        }
    }
    let report = zarrbuf::check::check_array(text(&dir), "", &Default::default()).unwrap();
    let problems: Vec<_> = report.findings.iter().map(|f| f.problem).collect();
    assert_eq!(problems, vec![zarrbuf::check::Problem::WrongSize]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_pcodec_chunk_of_too_few_numbers_is_an_error() {
    let few = pco::standalone::simple_compress(&[5u16; 200], &pco::ChunkConfig::default()).unwrap();
    let dir = store_dir("pcodec-few");
    pcodec_array(&dir, false);
    std::fs::create_dir_all(dir.join("c")).unwrap();
    std::fs::write(dir.join("c/0"), &few).unwrap();
    for subset in [3..7, 0..512] {
        assert_all_fail(
            &dir,
            &[subset],
            &["decodes to 400 bytes, the chunk holds 512"],
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pcodec_still_writes_and_reads_back() {
    for v2 in [false, true] {
        let dir = store_dir("pcodec-roundtrip");
        pcodec_array(&dir, v2);
        let array = zarrbuf::open(text(&dir), "").unwrap();
        let data: Vec<u16> = (0..512u32).map(|i| (i * 37 % 1000) as u16).collect();
        array
            .write_all(&NDBuffer::from_vec(data.clone(), &[512]).unwrap())
            .unwrap();
        for (route, r) in reads(&dir, &[0..512]) {
            assert_eq!(r.unwrap().to_vec::<u16>().unwrap(), data, "v2 {v2} {route}");
        }
        for (route, r) in reads(&dir, &[250..260]) {
            assert_eq!(
                r.unwrap().to_vec::<u16>().unwrap(),
                data[250..260],
                "v2 {v2} {route}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
