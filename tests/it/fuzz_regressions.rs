//! Replays every input the fuzz targets (tests/fuzz) ever crashed on, stored under
//! `tests/fuzz/regressions/<target>/`, through the same harness functions the targets call
//! (tests/fuzz/src/lib.rs, compiled here as a module), and checks the outcome each should
//! have now: a clean `Err` (or `Ok`), never a panic, an abort or an unbounded allocation.
//!
//! Each input runs in a child process (this test binary again, filtered to
//! `replay_one_input`), so an input that aborts the process (a failed huge allocation, a
//! panic under `panic = "abort"`) fails its own case with its stderr instead of taking the
//! whole suite down.

#[allow(dead_code)]
#[path = "../fuzz/src/lib.rs"]
mod harness;

use harness::Outcome;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What an input must give now, besides returning normally (no panic, no abort) with both
/// read paths agreeing.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Some step fails with an error (the input is corrupt; where the error comes from, open
    /// or read, is the fix's choice).
    Err,
    /// Every step that ran succeeds (the input is valid, or damaged only where the
    /// harness does not look).
    Ok,
    /// Only "returns normally" (and the paths' agreement) is checked.
    Returns,
}

/// Every committed input, with what it must give. An input on disk missing from this list
/// fails `every_regression_input_is_listed`.
const CASES: &[(&str, &str, Expect)] = &[
    // zarrs' ShardingCodec::decode adds offset + size of an index entry unchecked (fixed in
    // zarrbuf: the direct path checks the index before zarrs reads through it).
    ("chunk_decode", "zarrs-index-overflow", Expect::Err),
    ("shard_index", "zarrs-index-overflow", Expect::Err),
    // A one-byte chunk of a crc32c chain: zarrs' partial decoder of a checksum codec strips
    // its 4 bytes unchecked (overflow) on a subset read (fixed: such chunks are refused from
    // their stored size first).
    (
        "chunk_decode",
        "zarrs-checksum-strip-underflow",
        Expect::Err,
    ),
    // The staged path fetches an inner chunk whose index size exceeds the shard; the
    // filesystem store allocates that size up front (fixed: sizes are bounded).
    ("chunk_decode", "unbounded-inner-fetch", Expect::Err),
    ("shard_index", "unbounded-inner-fetch", Expect::Err),
    // The same with a size past isize::MAX: Vec::with_capacity panics ("capacity overflow").
    ("shard_index", "unbounded-inner-fetch-capacity", Expect::Err),
    // A sharding codec whose inner chunk shape does not divide the shard shape: zarrs refuses
    // to read it, the staged path read it without an error (fixed).
    ("metadata", "staged-ragged-inner-chunks", Expect::Err),
    // A shard's inner transpose whose order has 2 axes for a 3-D array: zarrs refuses to read
    // it, the staged path read the (unstored) array as fill values (fixed: the order must be
    // a permutation of the chunk's axes).
    ("metadata", "staged-inner-transpose-order", Expect::Err),
    // With validate_checksums = false, zarrs reads a shard whose index checksum is wrong; the
    // staged path validated the index checksum anyway and failed (fixed).
    (
        "shard_index",
        "staged-index-checksum-always-validated",
        Expect::Ok,
    ),
    // A .npy shape with a zero dimension and other dimensions whose product overflows: no
    // data is needed, and Order::strides multiplied the dimensions unchecked (fixed).
    ("npy_read", "strides-overflow", Expect::Returns),
    // A .npy descr '<U5000001743101306969': the element size (4 bytes per character)
    // overflowed usize in DataType::size (fixed: numpy's own limit of i32::MAX bytes per
    // element, and DataType::size saturates).
    ("npy_read", "unicode-itemsize-overflow", Expect::Err),
    // A v2 array of complex64 with chunks [1, 16666666666666666666]: 2^64 elements' bytes
    // overflow, which zarrs' bytes codec multiplies unchecked (fixed: data_type_of refuses
    // chunks whose byte size does not fit 64 bits, before zarrs sees them).
    ("metadata", "chunk-bytes-overflow", Expect::Err),
    // A sharded 1-D array whose inner chunk shape is []: zarrs' subchunk_grid panics (an
    // `expect` on the grid's dimensionality) when the staged path plans its units (fixed:
    // data_type_of refuses inner chunks with another number of dimensions than the array).
    ("metadata", "inner-chunk-dimensionality", Expect::Err),
    // Shards of [8, 8, 6294967296] uint16 with blosc inner chunks: zarrs' bound on an
    // encoded shard (inner chunks times their largest encoded size) overflows 64 bits.
    ("metadata", "shard-bound-overflow", Expect::Err),
    // The same as staged-ragged-inner-chunks for an inner chain the staged path hands to
    // zarrs' whole-shard decoder (a `bytes` codec without an endian for uint16), which
    // read the shard where zarrs' partial decoder refuses it (fixed: data_type_of refuses
    // inner chunks that do not divide the shard, for every path).
    ("metadata", "ragged-inner-chunks-zarrs-decoded", Expect::Err),
    // The same through an array: shape [0, 2^62, 4] has no elements, and reading it builds
    // the output NDBuffer with those strides.
    ("metadata", "strides-overflow", Expect::Returns),
    // A subset read of a sharded array with compressed inner chunks whose index gives an
    // inner chunk a size of 2^40: zarrs' partial decoder (direct path) and the staged fetch
    // both ask the filesystem store for 2^40 bytes, which it allocates before reading
    // (fixed with the index checks above).
    ("shard_index", "unbounded-partial-decode", Expect::Err),
    // An inner chunk of size 0 (not the missing marker), or an uncompressed one of 14 bytes
    // where 12 are due, or a blosc frame damaged outside the blocks a subset needs: zarrs'
    // shard partial decoder reads the fill value or the bytes it needs on a subset read; the
    // staged path (and zarrs' whole-shard decoder) fail. By design: the harness accepts this
    // on reads of sharded arrays; kept to show that it does.
    (
        "shard_index",
        "zarrs-partial-empty-inner-chunk",
        Expect::Returns,
    ),
    (
        "shard_index",
        "zarrs-partial-oversized-inner-chunk",
        Expect::Returns,
    ),
    ("shard_index", "zarrs-partial-blosc-blocks", Expect::Returns),
    // The same on a whole-array read: the edge shard the array clips is read partially.
    ("shard_index", "zarrs-partial-edge-shard", Expect::Returns),
    // A v2 array of shape [7, 9, 6] with chunks [3, 44294967296, 2] and no chunk stored: the
    // staged path sizes its staging slots by the whole chunk (2 x 531 GB), far beyond the
    // staging budget, and fails to allocate; zarrs reads fill values. OPEN (fix in
    // src/pipeline/slots.rs): the staged path now fails with a clean out-of-memory error
    // where the direct path reads; sizing slots within the budget is still to do.
    ("metadata", "staged-slots-unbounded", Expect::Returns),
    // Found after the fixes above. Shard index entries of 0 bytes (some at offsets past the
    // shard): the staged path reads them as the fill value, zarrs' whole-shard decoder on the
    // direct path refuses them. OPEN (src/zarr/shard/index.rs): refuse a 0-byte entry on both
    // paths, as zarrs' whole-shard decoder does.
    (
        "chunk_decode",
        "staged-empty-inner-chunk-as-fill",
        Expect::Err,
    ),
    // A damaged entry (a size of 4e18) for an inner chunk the subset does not touch: the
    // direct path checks every entry of the shard's index and refuses, the staged path checks
    // only the entries it reads and succeeds. OPEN (src/zarr/shard/index.rs): check the whole
    // index once when it is decoded (ShardIndex::remember), on both paths.
    ("shard_index", "staged-index-checked-partially", Expect::Err),
    // A 0-d v2 array (`"shape": []`) with `"order": "F"`: zarrs 0.23.14 builds its transpose
    // codec with `TransposeOrder::new(&[]).unwrap_unchecked()` on an `Err` (undefined
    // behaviour; an abort with debug assertions). Fixed: zarrbuf reads v2 metadata itself and
    // gives zarrs C order for 0-d arrays (src/zarr/open/metadata_guard.rs). This input's compressor
    // id "zstdodec" is unknown, so it fails cleanly once past the transpose.
    ("metadata", "v2-zero-dim-fortran-order", Expect::Err),
    // Decompression bombs: 16 MiB of zeros as a 256-byte chunk. zarrs' decoders inflated
    // them whole before the size was checked (bz2 and lzma everywhere, zstd and gzip on the
    // small-read route, v2 blosc compressors through zarrs' blosc codec). Fixed: every
    // decoder is bounded by the chunk's decoded size (src/zarr/decode/bounded.rs).
    ("bounded_decode", "zstd-bomb", Expect::Err),
    ("bounded_decode", "gzip-bomb", Expect::Err),
    ("bounded_decode", "bz2-bomb", Expect::Err),
    ("bounded_decode", "xz-bomb", Expect::Err),
    ("bounded_decode", "blosc-v2-bomb", Expect::Err),
    // A central directory entry whose file comment length (+8 KiB) runs past the end of the
    // directory: found by the smoke pass as a timeout (over 10 s for one input).
    (
        "zip_directory",
        "comment-length-past-the-directory",
        Expect::Err,
    ),
    // A central directory entry renamed from c/0 to c.0 (with a wrong CRC-32 it is never
    // asked for): chunk 0 is not stored and reads as the fill value.
    ("zip_directory", "renamed-chunk-entry", Expect::Returns),
    // The c/0 entry's Unix mode made a character device: not a file, so chunk 0 is not
    // stored and reads as the fill value.
    (
        "zip_directory",
        "chunk-entry-made-a-device",
        Expect::Returns,
    ),
    // The c/1 entry's "made by" host and attributes changed so that it is no plain file:
    // chunk 1 reads as the fill value.
    ("zip_directory", "chunk-entry-made-a-link", Expect::Returns),
];

fn regressions() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/regressions")
}

/// Runs one input through its target's harness function; returns the outcomes of the steps.
fn replay(target: &str, data: &[u8]) -> Vec<Outcome> {
    match target {
        "metadata" => harness::metadata(data).to_vec(),
        "chunk_decode" => vec![harness::chunk_decode(data)],
        "shard_index" => harness::shard_index(data).to_vec(),
        "npy_read" => vec![harness::npy_read(data)],
        "subset_parser" => vec![harness::subset_parser(data)],
        "check_walk" => vec![harness::check_walk(data)],
        "bounded_decode" => vec![harness::bounded_decode(data)],
        "vlen_decode" => vec![harness::vlen_decode(data)],
        "zip_directory" => vec![harness::zip_directory(data)],
        "prefix_decode" => vec![harness::prefix_decode(data)],
        other => panic!("unknown fuzz target {other:?}"),
    }
}

/// The child-process half: replays the input named by `ZARRBUF_FUZZ_REPLAY`
/// (`target/name`) and checks its expectation. Does nothing in a plain test run.
#[test]
fn replay_one_input() {
    let Ok(case) = std::env::var("ZARRBUF_FUZZ_REPLAY") else {
        return;
    };
    let (target, name) = case.split_once('/').expect("target/name");
    let expect = CASES
        .iter()
        .find(|(t, n, _)| *t == target && *n == name)
        .map(|c| c.2)
        .expect("a listed case");
    let data = std::fs::read(regressions().join(target).join(name)).expect("the input exists");
    let outcomes = replay(target, &data);
    println!("{target}/{name}: {outcomes:?}");
    match expect {
        Expect::Err => assert!(
            outcomes.iter().any(Outcome::is_err),
            "{target}/{name} should fail with an error: {outcomes:?}"
        ),
        Expect::Ok => assert!(
            outcomes.iter().all(|o| !o.is_err()),
            "{target}/{name} should read: {outcomes:?}"
        ),
        Expect::Returns => {}
    }
}

#[test]
fn fuzz_crash_inputs_fail_cleanly() {
    let exe = std::env::current_exe().expect("the test binary");
    let replay_test = crate::common::own_test!("replay_one_input");
    let mut failures = Vec::new();
    for (target, name, _) in CASES {
        let out = Command::new(&exe)
            .args(["--exact", &replay_test, "--nocapture", "--test-threads=1"])
            .env("ZARRBUF_FUZZ_REPLAY", format!("{target}/{name}"))
            .env_remove("ZARRBUF_DEVICE")
            .output()
            .expect("the test binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        crate::common::assert_ran_one_test(&replay_test, &stdout);
        if !out.status.success() {
            // The panic line and its message (the next line), or the allocation failure.
            let lines: Vec<&str> = stderr.lines().chain(stdout.lines()).collect();
            let mut why: Vec<&str> = Vec::new();
            for (i, l) in lines.iter().enumerate() {
                if l.contains("panicked at") {
                    why.push(l);
                    why.extend(
                        lines
                            .get(i + 1)
                            .copied()
                            .filter(|n| !n.starts_with("stack")),
                    );
                } else if l.contains("memory allocation of") {
                    why.push(l);
                }
            }
            why.truncate(3);
            failures.push(format!(
                "{target}/{name}: {} {}",
                out.status,
                if why.is_empty() {
                    let tail: Vec<&str> = lines.iter().rev().take(5).rev().copied().collect();
                    tail.join(" | ")
                } else {
                    why.join(" | ")
                }
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fuzz regression inputs fail:\n  {}",
        failures.len(),
        CASES.len(),
        failures.join("\n  ")
    );
}

#[test]
fn every_regression_input_is_listed() {
    for target in std::fs::read_dir(regressions()).expect("tests/fuzz/regressions") {
        let target = target.expect("a directory entry").path();
        let t = target.file_name().and_then(|n| n.to_str()).expect("UTF-8");
        for input in std::fs::read_dir(&target).expect("a target directory") {
            let input = input.expect("a directory entry").path();
            let n = input.file_name().and_then(|n| n.to_str()).expect("UTF-8");
            assert!(
                CASES.iter().any(|(ct, cn, _)| *ct == t && *cn == n),
                "tests/fuzz/regressions/{t}/{n} is not in CASES"
            );
        }
    }
}

/// The seed corpora go through the harness without a panic (the fuzz targets' own smoke
/// test, run with the normal test suite, no nightly needed).
#[test]
fn seed_corpora_run_cleanly() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus");
    let mut n = 0;
    for target in [
        "metadata",
        "chunk_decode",
        "shard_index",
        "npy_read",
        "subset_parser",
        "check_walk",
        "vlen_decode",
        "zip_directory",
        "prefix_decode",
    ] {
        for input in std::fs::read_dir(corpus.join(target)).expect("a seed corpus") {
            let data = std::fs::read(input.expect("an entry").path()).expect("readable");
            replay(target, &data);
            n += 1;
        }
    }
    assert!(n > 100, "only {n} seed inputs");
}
