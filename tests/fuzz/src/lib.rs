//! The code paths the fuzz targets drive, one function per target.
//!
//! The same file is compiled twice: as the library of the fuzz crate (each
//! `fuzz_targets/<name>.rs` calls one function here) and as a module of the main crate's
//! `tests/it/fuzz_regressions.rs`, which replays the committed crash inputs under
//! `tests/fuzz/regressions/<target>/` through exactly these functions. It depends on nothing
//! but `zarrbuf` and `std` for that reason.
//!
//! Every function returns normally whatever the input; the fuzzer reports a panic, an abort,
//! a hang or an allocation over its limit. Besides "no panic", the targets check properties
//! that hold for every input:
//! - both read paths (`PipelineMode::Auto` and `PipelineMode::Staged`) agree: both fail, or
//!   both succeed with the same bytes. One difference is by design: on a read of a sharded
//!   array the direct path may succeed where the staged path fails, since wherever a read
//!   covers part of a shard (a subset, or an edge shard the array clips) zarrs' shard
//!   partial decoder reads only the bytes it needs (a window of an uncompressed inner chunk,
//!   the blocks of a blosc frame, nothing for a size-0 entry) and so misses damage outside
//!   them, while the staged path decodes whole inner chunks;
//! - a subset read of an array whose whole read succeeds also succeeds, with the bytes of
//!   that subset of the whole;
//! - a parsed `--subset` has one in-bounds range per dimension and survives a round trip.

#![allow(clippy::single_range_in_vec_init)]

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use zarrbuf::options::Decode;
use zarrbuf::{
    ArrayReadExt, BufferPrototype, DynArray,
    options::{PipelineMode, ReadOptions},
};

/// Arrays with more elements than this are opened but not read.
pub const MAX_ELEMENTS: u64 = 1 << 20;
/// Arrays with more bytes than this are opened but not read.
pub const MAX_BYTES: u64 = 64 << 20;
/// Arrays with more chunks (or shards) than this are opened but not read: every chunk is a
/// file lookup, and a million of them is slow rather than wrong.
pub const MAX_CHUNKS: u64 = 1 << 12;

/// What one step of a target gave (for the regression tests' assertions and for debugging).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The step succeeded.
    Ok,
    /// The step failed with this error (its Display text).
    Err(String),
    /// The step was not run (the input stopped earlier, or the array is too large).
    Skipped,
}

impl Outcome {
    fn of<T>(r: &zarrbuf::Result<T>) -> Self {
        match r {
            Ok(_) => Outcome::Ok,
            Err(e) => Outcome::Err(e.to_string()),
        }
    }

    /// Whether the step failed.
    pub fn is_err(&self) -> bool {
        matches!(self, Outcome::Err(_))
    }
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Makes a new, empty directory.
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("zarrbuf-fuzz-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("the temp dir is writable");
        TempDir(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The directory as the `&str` `zarrbuf::open` takes.
    pub fn location(&self) -> &str {
        self.0.to_str().expect("temp paths are UTF-8")
    }

    /// Writes `bytes` at `key` (a `/`-separated store key), making parent directories.
    pub fn put(&self, key: &str, bytes: &[u8]) {
        let path = self.0.join(key);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("the temp dir is writable");
        }
        std::fs::write(&path, bytes).expect("the temp dir is writable");
    }
}

impl Default for TempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// CRC-32C (Castagnoli), as zarr's `crc32c` codec computes it.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Rewrites the last 4 bytes of `bytes` as the little-endian CRC-32C of the rest, as the
/// `crc32c` codec appends it (no-op on fewer than 4 bytes).
pub fn fix_crc32c_trailer(bytes: &mut [u8]) {
    if bytes.len() >= 4 {
        let n = bytes.len() - 4;
        let crc = crc32c(&bytes[..n]);
        bytes[n..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The bytes of the array's first chunk (shard) as its chunk grid gives it, unclipped
/// (`u64::MAX` when that overflows or the grid has no such chunk).
pub fn chunk_bytes(array: &DynArray) -> u64 {
    let elem = array
        .zarrbuf_data_type()
        .map(|d| d.size() as u64)
        .unwrap_or(1);
    array
        .chunk_shape(&vec![0; array.dimensionality()])
        .ok()
        .and_then(|s| s.iter().try_fold(elem, |n, d| n.checked_mul(d.get())))
        .unwrap_or(u64::MAX)
}

/// Whether an opened array is small enough to read in a fuzz iteration (checked before any
/// read; shapes whose element count overflows are too large).
pub fn small_enough(array: &DynArray) -> bool {
    let elements = array
        .shape()
        .iter()
        .try_fold(1u64, |acc, &n| acc.checked_mul(n));
    let chunks = array
        .chunk_grid_shape()
        .iter()
        .try_fold(1u64, |acc, &n| acc.checked_mul(n));
    let elem_size = array
        .zarrbuf_data_type()
        .map(|d| d.size() as u64)
        .unwrap_or(1);
    match (elements, chunks) {
        (Some(e), Some(c)) => {
            e <= MAX_ELEMENTS && e.saturating_mul(elem_size) <= MAX_BYTES && c <= MAX_CHUNKS
        }
        _ => false,
    }
}

/// Whole decodes on every path (the prefix decoder, which reads past damage it need not
/// decode, is compared with the whole decode on its own: [`prefix_decode_agrees`]).
fn options(mode: PipelineMode, validate_checksums: bool) -> ReadOptions {
    ReadOptions::default()
        .with_decode_needed_prefix(false)
        .with_mode(mode)
        .with_validate_checksums(validate_checksums)
        .with_staging_bytes(4 << 20)
}

/// Reads `subset` on both paths and checks that they agree. Returns the bytes when both
/// succeeded.
///
/// The staged path may refuse, with a clean error, what the direct path reads (it checks
/// more: index sizes, chunk sizes, its memory budget); the other way round is a bug. With
/// `partial` (a read of a sharded array), both may succeed with different bytes (see the
/// module docs).
///
/// # Panics
///
/// When the direct path fails and the staged path succeeds, or (without `partial`) both
/// succeed with different bytes.
pub fn read_both(
    array: &DynArray,
    subset: &[Range<u64>],
    validate_checksums: bool,
    partial: bool,
) -> (Outcome, Option<Vec<u8>>) {
    let proto = BufferPrototype::cpu();
    let auto = array.read_opt(
        subset,
        &proto,
        &options(PipelineMode::Auto, validate_checksums),
    );
    let staged = array.read_opt(
        subset,
        &proto,
        &options(PipelineMode::Staged, validate_checksums),
    );
    let auto_bytes = auto.as_ref().map(|a| a.to_native_bytes());
    let staged_bytes = staged.as_ref().map(|a| a.to_native_bytes());
    match (auto_bytes, staged_bytes) {
        (Ok(Ok(a)), Ok(Ok(s))) => {
            // On damaged shards zarrs' partial decoder and the staged path may read
            // different bytes (zarrs decodes a zero-length inner chunk, the staged path reads
            // it as the fill value); on anything else they must agree.
            assert!(
                a == s || partial,
                "Auto and Staged reads of {subset:?} succeed with different bytes"
            );
            (Outcome::Ok, Some(a))
        }
        (Err(a), Err(_)) => (Outcome::Err(a.to_string()), None),
        (Ok(Err(e)), _) | (_, Ok(Err(e))) => panic!("a read result has no host bytes: {e}"),
        (a, s) => {
            let a = a.map(|_| ()).map_err(|e| e.to_string());
            let s = s.map(|_| ()).map_err(|e| e.to_string());
            let known = known_divergence(&a, &s);
            if skip_known() && known.is_some() {
                return (Outcome::Skipped, None);
            }
            // The staged path refusing (with a clean error) what zarrs reads is accepted: it
            // checks more (index sizes, chunk sizes, its memory budget). The other way round
            // — the staged path reading what zarrs refuses — is a bug.
            if let (Ok(()), Err(e)) = (&a, &s) {
                return (Outcome::Err(e.clone()), None);
            }
            panic!("the read paths disagree on {subset:?}: Auto {a:?}, Staged {s:?}")
        }
    }
}

/// The known, still open disagreement between the read paths that these outcomes show, if
/// any; the fuzz targets skip it while [`SKIP_KNOWN`] is set, the regression tests do not.
///
/// - `"staged-slots-unbounded"`: the staged path sizes its staging slots by the largest
///   whole chunk (`pipeline/slots.rs`, `ring_slot_bytes`), whatever the staging budget and
///   even when no chunk is stored, so an array whose chunk shape is far larger than the
///   array fails to allocate ("could not allocate"); zarrs reads it as fill values. (Under
///   AddressSanitizer the allocation itself is reported; [`metadata`] skips such arrays.)
/// - `"staged-empty-inner-chunk-as-fill"`: the staged path reads a shard index entry of 0
///   bytes as the fill value (`zarr/shard/index.rs`); zarrs' whole-shard decoder on the
///   direct path refuses it ("the size of a decoded chunk is 0", or "out-of-bounds bytes"
///   for such an entry past the shard's end).
/// - `"staged-index-checked-partially"`: the direct path (`read.rs`,
///   `check_shard_indexes`) refuses a shard whose index has a damaged entry anywhere ("the
///   index is damaged"); the staged path checks only the entries a read touches.
///
/// Fixed since (the regression tests keep their inputs): zarrs' overflow on damaged shard
/// indexes, unbounded inner-chunk fetches, ragged inner chunk grids on the staged path, the
/// shard index checksum ignoring `validate_checksums`, overflowing strides.
pub fn known_divergence(
    auto: &std::result::Result<(), String>,
    staged: &std::result::Result<(), String>,
) -> Option<&'static str> {
    match (auto, staged) {
        (Ok(()), Err(s)) if s.contains("could not allocate") => Some("staged-slots-unbounded"),
        (Err(a), Ok(()))
            if a.contains("size of a decoded chunk is 0")
                || a.contains("references out-of-bounds bytes") =>
        {
            Some("staged-empty-inner-chunk-as-fill")
        }
        (Err(a), Ok(())) if a.contains("the index is damaged") => {
            Some("staged-index-checked-partially")
        }
        _ => None,
    }
}

/// The whole-array subset.
pub fn whole(array: &DynArray) -> Vec<Range<u64>> {
    array.shape().iter().map(|&n| 0..n).collect()
}

/// Target `metadata`: the first byte picks the format (even: v3 `zarr.json`, odd: v2
/// `.zarray`), the rest is the metadata document. Opens the array, describes it, and reads
/// it whole on both paths when it is small. Returns (open, describe, read_all).
pub fn metadata(data: &[u8]) -> [Outcome; 3] {
    let Some((&sel, doc)) = data.split_first() else {
        return [Outcome::Skipped, Outcome::Skipped, Outcome::Skipped];
    };
    let dir = TempDir::new();
    dir.put(if sel & 1 == 0 { "zarr.json" } else { ".zarray" }, doc);
    let array = match zarrbuf::open(dir.location(), "") {
        Ok(a) => a,
        Err(e) => {
            return [
                Outcome::Err(e.to_string()),
                Outcome::Skipped,
                Outcome::Skipped,
            ];
        }
    };
    let described = Outcome::of(&zarrbuf::describe(&array));
    if !small_enough(&array) {
        return [Outcome::Ok, described, Outcome::Skipped];
    }
    // The ArrayReadExt::read_all entry point itself, then both paths side by side.
    let _ = array.read_all(&BufferPrototype::cpu());
    if skip_known() && chunk_bytes(&array) > MAX_BYTES {
        // "staged-slots-unbounded" (see known_divergence).
        return [Outcome::Ok, described, Outcome::Skipped];
    }
    let (read, _) = read_both(&array, &whole(&array), true, false);
    [Outcome::Ok, described, read]
}

/// A fixed array: its metadata file name and document.
pub struct Fixture {
    /// The fixture it comes from (or a name for a synthetic one).
    pub name: &'static str,
    /// `zarr.json` or `.zarray`.
    pub file: &'static str,
    /// The metadata document.
    pub doc: &'static [u8],
    /// Whether the chunk (shard) ends in a crc32c checksum of the rest, which the harness
    /// recomputes when asked so that mutations get past the checksum.
    pub crc_trailer: bool,
    /// For sharded arrays: where the shard index is and how it is encoded.
    pub index: Option<IndexLayout>,
}

/// Where a shard's index is and how it is encoded (always little-endian u64 pairs).
#[derive(Clone, Copy, Debug)]
pub struct IndexLayout {
    /// Inner chunks per shard (the index has two u64 per inner chunk).
    pub entries: usize,
    /// Whether the index is at the start of the shard (else at the end).
    pub start: bool,
    /// Whether a crc32c checksum follows the index (the harness recomputes it when asked).
    pub crc: bool,
}

impl IndexLayout {
    /// The encoded size of the index.
    pub const fn len(&self) -> usize {
        self.entries * 16 + if self.crc { 4 } else { 0 }
    }

    /// The index bytes of a shard (checksum included), if the shard is long enough.
    pub fn of<'a>(&self, shard: &'a [u8]) -> Option<&'a [u8]> {
        let len = self.len();
        if shard.len() < len {
            None
        } else if self.start {
            Some(&shard[..len])
        } else {
            Some(&shard[shard.len() - len..])
        }
    }
}

const fn index(entries: usize, start: bool, crc: bool) -> Option<IndexLayout> {
    Some(IndexLayout {
        entries,
        start,
        crc,
    })
}

macro_rules! fixture {
    ($name:literal, $file:literal, $crc:expr, $index:expr) => {
        Fixture {
            name: $name,
            file: $file,
            doc: include_bytes!(concat!("../../../fixtures/data/", $name, ".zarr/", $file)),
            crc_trailer: $crc,
            index: $index,
        }
    };
}

/// A sharded array whose inner chunks and index are raw little-endian bytes (no compression,
/// no checksum), so that mutations reach the shard index logic instead of a decompressor.
const RAW_SHARD_END: &str = r#"{"zarr_format":3,"node_type":"array","shape":[10,7],
"data_type":"uint16","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4,6]}},
"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":7,
"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[2,3],
"codecs":[{"name":"bytes","configuration":{"endian":"little"}}],
"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}}],
"index_location":"end"}}]}"#;

/// [`RAW_SHARD_END`] with the index first and big-endian inner chunks.
const RAW_SHARD_START: &str = r#"{"zarr_format":3,"node_type":"array","shape":[10,7],
"data_type":"uint16","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4,6]}},
"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":7,
"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[2,3],
"codecs":[{"name":"bytes","configuration":{"endian":"big"}}],
"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}}],
"index_location":"start"}}]}"#;

/// The arrays of target `chunk_decode`: one per codec family.
pub const CHUNK_FIXTURES: &[Fixture] = &[
    fixture!("v3_uint32_be_zstd_crc32c", "zarr.json", true, None),
    fixture!("ts_v3_gzip_be", "zarr.json", false, None),
    fixture!("ts_v2_blosc", ".zarray", false, None),
    fixture!("v3_int32_blosc_lz4", "zarr.json", false, None),
    fixture!("ts_v3_transpose_crc32c", "zarr.json", true, None),
    fixture!("v2_i4_be_gzip_F", ".zarray", false, None),
    fixture!("v2_u1_blosc_bitshuffle", ".zarray", false, None),
    fixture!("v2_c8_zstd_nested", ".zarray", false, None),
    fixture!("v3_shard_end", "zarr.json", false, index(4, false, true)),
];

/// The arrays of target `shard_index`: index at the end and at the start, compressed and
/// raw inner chunks, transposed inner chunks, ragged edge shards.
pub const SHARD_FIXTURES: &[Fixture] = &[
    fixture!("v3_shard_end", "zarr.json", false, index(4, false, true)),
    fixture!("v3_shard_start", "zarr.json", false, index(4, true, true)),
    fixture!(
        "ts_v3_shard_end_gzip",
        "zarr.json",
        false,
        index(4, false, true)
    ),
    fixture!(
        "ts_v3_shard_start_transpose",
        "zarr.json",
        false,
        index(8, true, true)
    ),
    fixture!(
        "v3_shard_3d_transpose",
        "zarr.json",
        false,
        index(8, false, true)
    ),
    Fixture {
        name: "raw_shard_end",
        file: "zarr.json",
        doc: RAW_SHARD_END.as_bytes(),
        crc_trailer: false,
        index: index(4, false, false),
    },
    Fixture {
        name: "raw_shard_start",
        file: "zarr.json",
        doc: RAW_SHARD_START.as_bytes(),
        crc_trailer: false,
        index: index(4, true, false),
    },
];

/// Writes `fixture`'s metadata into a fresh directory and opens it.
fn open_fixture(fixture: &Fixture) -> (TempDir, DynArray) {
    let dir = TempDir::new();
    dir.put(fixture.file, fixture.doc);
    let array = zarrbuf::open(dir.location(), "")
        .unwrap_or_else(|e| panic!("fixture {} does not open: {e}", fixture.name));
    (dir, array)
}

/// Recomputes the checksums of `bytes` that `fixture` declares (trailer, shard index).
fn fix_checksums(fixture: &Fixture, bytes: &mut [u8]) {
    if fixture.crc_trailer {
        fix_crc32c_trailer(bytes);
    }
    if let Some(layout) = fixture.index {
        let (len, n) = (layout.len(), bytes.len());
        if layout.crc && n >= len {
            let index = if layout.start {
                &mut bytes[..len]
            } else {
                &mut bytes[n - len..]
            };
            fix_crc32c_trailer(index);
        }
    }
}

/// Whether the fuzz targets skip inputs that hit known, still open bugs outside the harness
/// (see [`known_divergence`]); the regression tests replay everything.
pub static SKIP_KNOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn skip_known() -> bool {
    SKIP_KNOWN.load(Ordering::Relaxed)
}

/// Target `chunk_decode`: byte 0 picks a fixture from [`CHUNK_FIXTURES`] (low nibble) and
/// flags (bit 4: recompute checksums, bit 5: do not validate checksums); the rest is stored
/// as the array's first chunk (shard). Reads the whole array on both paths. Returns the
/// read's outcome.
pub fn chunk_decode(data: &[u8]) -> Outcome {
    let Some((&sel, chunk)) = data.split_first() else {
        return Outcome::Skipped;
    };
    let fixture = &CHUNK_FIXTURES[usize::from(sel & 0x0f) % CHUNK_FIXTURES.len()];
    let (dir, array) = open_fixture(fixture);
    let mut chunk = chunk.to_vec();
    if sel & 0x10 != 0 {
        fix_checksums(fixture, &mut chunk);
    }
    let origin = vec![0u64; array.dimensionality()];
    dir.put(array.chunk_key(&origin).as_str(), &chunk);
    let sharded = fixture.index.is_some();
    let outcome = read_both(&array, &whole(&array), sel & 0x20 == 0, sharded).0;
    device_decode_agrees(&array, &whole(&array), sel & 0x20 == 0);
    prefix_decode_agrees(&array, sel & 0x20 == 0);
    outcome
}

/// Reads the array's first element (the shortest prefix of its first chunk) with and
/// without `ReadOptions::with_decode_needed_prefix`: the prefix decoder takes the same
/// hostile bytes without panicking, and wherever the whole decode reads, it reads too, the
/// same bytes. (It may read where the whole decode refuses: damage after the prefix is what
/// it does not see, by design.)
pub fn prefix_decode_agrees(array: &DynArray, validate_checksums: bool) {
    if array.shape().contains(&0) {
        return;
    }
    let first: Vec<Range<u64>> = vec![0..1; array.dimensionality()];
    let proto = BufferPrototype::cpu();
    let opts = options(PipelineMode::Auto, validate_checksums);
    let whole = array.read_opt(
        &first,
        &proto,
        &opts.clone().with_decode_needed_prefix(false),
    );
    let prefix = array.read_opt(&first, &proto, &opts.with_decode_needed_prefix(true));
    if let Ok(w) = &whole {
        let p = prefix
            .as_ref()
            .unwrap_or_else(|e| panic!("the prefix decode refused what a whole decode read: {e}"));
        assert!(
            w.to_native_bytes().ok() == p.to_native_bytes().ok(),
            "the prefix decode and the whole decode read the first element differently"
        );
    }
}

/// Reads `subset` through the device decoder (its host twin here: the CPU-side framing
/// checks and blosc frame parsing that guard nvCOMP, then batched decompression, stream
/// copies and the unshuffle twin) and checks it against the CPU decoders: when both read,
/// the bytes are the same. The device path may refuse what the CPU reads (its checks come
/// first) and may read what the CPU refuses only where the CPU checks a checksum of the
/// decoded bytes (gzip's CRC-32, zlib's Adler-32) that the device decoder cannot see.
pub fn device_decode_agrees(array: &DynArray, subset: &[Range<u64>], validate_checksums: bool) {
    let proto = BufferPrototype::cpu();
    let cpu = array.read_opt(
        subset,
        &proto,
        &options(PipelineMode::Staged, validate_checksums),
    );
    let device = array.read_opt(
        subset,
        &proto,
        &options(PipelineMode::Staged, validate_checksums).with_decode(Decode::Gpu),
    );
    if let (Ok(c), Ok(d)) = (&cpu, &device) {
        assert!(
            c.to_native_bytes().ok() == d.to_native_bytes().ok(),
            "the device decoder and the CPU read {subset:?} as different bytes"
        );
    }
}

/// The subset bytes `b` describe inside `shape`: per dimension, a start and a length.
pub fn subset_from(shape: &[u64], b: &[u8]) -> Vec<Range<u64>> {
    shape
        .iter()
        .enumerate()
        .map(|(d, &n)| {
            let s = u64::from(b.get(2 * d).copied().unwrap_or(0)) % (n + 1);
            let len = u64::from(b.get(2 * d + 1).copied().unwrap_or(0)) % (n - s + 1);
            s..s + len
        })
        .collect()
}

/// Bytes of the subset header of target `shard_index`.
pub const SHARD_HEADER: usize = 7;

/// Target `shard_index`: byte 0 picks a fixture from [`SHARD_FIXTURES`] (low nibble) and
/// flags (bit 4: recompute the index checksum, bit 5: do not validate checksums, bit 6:
/// store the bytes as the last shard instead of the first); bytes 1..7 give a subset (start,
/// length per dimension); the rest is the shard. Reads the whole array and the subset on
/// both paths, and checks the subset against the whole. Returns (whole, subset).
pub fn shard_index(data: &[u8]) -> [Outcome; 2] {
    if data.len() < SHARD_HEADER {
        return [Outcome::Skipped, Outcome::Skipped];
    }
    let (head, shard) = data.split_at(SHARD_HEADER);
    let sel = head[0];
    let fixture = &SHARD_FIXTURES[usize::from(sel & 0x0f) % SHARD_FIXTURES.len()];
    let (dir, array) = open_fixture(fixture);
    let mut shard = shard.to_vec();
    if sel & 0x10 != 0 {
        fix_checksums(fixture, &mut shard);
    }
    let grid = array.chunk_grid_shape().to_vec();
    let at: Vec<u64> = if sel & 0x40 != 0 {
        grid.iter().map(|&g| g.saturating_sub(1)).collect()
    } else {
        vec![0; grid.len()]
    };
    dir.put(array.chunk_key(&at).as_str(), &shard);
    let validate = sel & 0x20 == 0;
    let all = whole(&array);
    let (whole_outcome, whole_bytes) = read_both(&array, &all, validate, true);
    let subset = subset_from(array.shape(), &head[1..]);
    let (sub_outcome, sub_bytes) = read_both(&array, &subset, validate, true);
    if let Some(whole_bytes) = whole_bytes {
        let Some(sub_bytes) = sub_bytes else {
            panic!("the whole array reads but its subset {subset:?} fails: {sub_outcome:?}");
        };
        let proto = BufferPrototype::cpu();
        let read = array
            .read_opt(&all, &proto, &options(PipelineMode::Auto, validate))
            .expect("read above");
        assert_eq!(read.to_native_bytes().expect("host"), whole_bytes);
        let ranges: Vec<Range<usize>> = subset
            .iter()
            .map(|r| r.start as usize..r.end as usize)
            .collect();
        let expected = read
            .get(&ranges)
            .and_then(|v| v.to_native_bytes())
            .expect("an in-bounds view");
        assert!(
            expected == sub_bytes,
            "the subset {subset:?} reads other bytes than the same subset of the whole"
        );
    }
    [whole_outcome, sub_outcome]
}

/// Target `npy_read`: the bytes are a `.npy` file; reads it and, when it reads, copies its
/// elements out in native byte order. Returns the read's outcome.
pub fn npy_read(data: &[u8]) -> Outcome {
    let dir = TempDir::new();
    dir.put("a.npy", data);
    let read = zarrbuf::npy::read(&dir.path().join("a.npy"));
    if let Ok(a) = &read {
        let bytes = a.to_native_bytes();
        if let Ok(bytes) = &bytes {
            let n: usize = a.shape().iter().product();
            assert_eq!(
                bytes.len(),
                n * a.dtype().size(),
                "element bytes of {:?}",
                a.shape()
            );
        }
    }
    Outcome::of(&read)
}

/// Target `subset_parser`: byte 0 gives the number of dimensions (0..=4), then 2 bytes per
/// dimension its length (little-endian; 0xffff means u64::MAX), then the text. Checks that an
/// accepted subset has one in-bounds range per dimension and parses again from its own
/// `start:stop` form. Returns the parse's outcome.
pub fn subset_parser(data: &[u8]) -> Outcome {
    let Some((&ndim, rest)) = data.split_first() else {
        return Outcome::Skipped;
    };
    let ndim = usize::from(ndim % 5);
    if rest.len() < 2 * ndim {
        return Outcome::Skipped;
    }
    let (dims, text) = rest.split_at(2 * ndim);
    let shape: Vec<u64> = dims
        .chunks(2)
        .map(|c| match u16::from_le_bytes([c[0], c[1]]) {
            u16::MAX => u64::MAX,
            n => u64::from(n),
        })
        .collect();
    let text = String::from_utf8_lossy(text);
    let parsed = zarrbuf::subset::parse_subset(&text, &shape);
    if let Ok(ranges) = &parsed {
        assert_eq!(ranges.len(), shape.len());
        for (r, &n) in ranges.iter().zip(&shape) {
            assert!(r.start <= r.end && r.end <= n, "{r:?} outside 0:{n}");
        }
        let again: Vec<String> = ranges
            .iter()
            .map(|r| format!("{}:{}", r.start, r.end))
            .collect();
        let again = zarrbuf::subset::parse_subset(&again.join(","), &shape)
            .expect("a parsed subset parses again from its start:stop form");
        assert_eq!(&again, ranges);
    }
    Outcome::of(&parsed)
}

/// The arrays [`check_walk`] stores its input in: 8 × 8 float32 in 4 × 4 chunks, as zarr v3
/// with zstd and crc32c, v3 uncompressed, v3 in one shard of 2 × 2 inner chunks (zstd,
/// crc32c, index crc32c), and v2 with zlib and '.' separated keys; each with its first chunk
/// key.
const CHECK_LAYOUTS: [(&str, &str, &str); 4] = [
    (
        "zarr.json",
        r#"{"zarr_format":3,"node_type":"array","shape":[8,8],"data_type":"float32","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4,4]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0.0,"codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"zstd","configuration":{"level":1,"checksum":false}},{"name":"crc32c"}]}"#,
        "c/0/0",
    ),
    (
        "zarr.json",
        r#"{"zarr_format":3,"node_type":"array","shape":[8,8],"data_type":"float32","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4,4]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"."}},"fill_value":0.0,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}"#,
        "c.0.0",
    ),
    (
        "zarr.json",
        r#"{"zarr_format":3,"node_type":"array","shape":[8,8],"data_type":"float32","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4,4]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0.0,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[2,2],"codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"zstd","configuration":{"level":1,"checksum":false}},{"name":"crc32c"}],"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}],"index_location":"end"}}]}"#,
        "c/0/0",
    ),
    (
        ".zarray",
        r#"{"zarr_format":2,"shape":[8,8],"chunks":[4,4],"dtype":"<f4","compressor":{"id":"zlib","level":1},"fill_value":0.0,"order":"C","filters":null,"dimension_separator":"."}"#,
        "0.0",
    ),
];

/// Target `check_walk`: byte 0 picks one of [`CHECK_LAYOUTS`]; if byte 1 is odd the rest is a
/// store key given to `check::chunk_indices` (a key it accepts must be exactly the key the
/// array encodes for the indices it returned, inside or outside the grid); otherwise the rest
/// is stored as the array's first chunk and `check_array` runs: it must return a report in
/// which that key is either clean or named, and after a repair the array must check clean
/// and read. Returns the first check's outcome.
pub fn check_walk(data: &[u8]) -> Outcome {
    let [pick, mode, rest @ ..] = data else {
        return Outcome::Skipped;
    };
    let (meta_name, meta, first_key) = CHECK_LAYOUTS[usize::from(*pick) % CHECK_LAYOUTS.len()];
    let dir = TempDir::new();
    std::fs::write(dir.path().join(meta_name), meta).expect("the temp dir is writable");
    let location = dir.path().to_string_lossy().into_owned();
    if mode % 2 == 1 {
        let array = zarrbuf::open(&location, "").expect("the layout opens");
        let key = String::from_utf8_lossy(rest);
        if let Some(indices) = zarrbuf::check::chunk_indices(&array, &key) {
            assert_eq!(array.chunk_key(&indices).as_str(), key, "{indices:?}");
        }
        return Outcome::Skipped;
    }
    let path = dir.path().join(first_key);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("writable");
    std::fs::write(&path, rest).expect("writable");
    let opts = zarrbuf::options::CheckOptions::default().with_concurrency(1);
    let report = zarrbuf::check::check_array(&location, "", &opts);
    if let Ok(r) = &report {
        assert_eq!(r.chunks_checked, 1);
        assert!(
            r.findings.iter().all(|f| f.key == first_key),
            "{:?}",
            r.findings
        );
        let repaired = zarrbuf::check::check_array(&location, "", &opts.clone().with_repair(true));
        assert!(repaired.is_ok(), "{repaired:?}");
        let again = zarrbuf::check::check_array(&location, "", &opts).expect("checks again");
        assert!(again.is_clean(), "after a repair: {:?}", again.findings);
        let array = zarrbuf::open(&location, "").expect("opens");
        array
            .read_all(&BufferPrototype::cpu())
            .expect("a repaired array reads");
    }
    Outcome::of(&report)
}

/// The decoded size of the one chunk target `bounded_decode` reads: every allocation its
/// reads make must stay far below what an unbounded decoder takes for a bomb.
pub const BOUNDED_CHUNK_BYTES: usize = 256;

/// The compressors target `bounded_decode` feeds: a zarr v3 `codecs` list (after `bytes`),
/// or a v2 `compressor` (as `v2:` JSON).
pub const BOUNDED_CODECS: &[&str] = &[
    r#"{"name": "zstd", "configuration": {"level": 1, "checksum": false}}"#,
    r#"{"name": "gzip", "configuration": {"level": 1}}"#,
    r#"{"name": "numcodecs.zlib", "configuration": {"level": 1}}"#,
    r#"{"name": "numcodecs.bz2", "configuration": {"level": 1}}"#,
    r#"{"name": "numcodecs.lzma", "configuration": {"format": 0}}"#,
    r#"{"name": "numcodecs.lzma", "configuration": {"format": 2}}"#,
    r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "noshuffle", "typesize": 1, "blocksize": 0}}"#,
    r#"{"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}"#,
    r#"{"name": "zarrs.gdeflate", "configuration": {"level": 1}}"#,
    r#"v2:{"id": "blosc", "cname": "zstd", "clevel": 5, "shuffle": 0, "blocksize": 0}"#,
    r#"v2:{"id": "bz2", "level": 1}"#,
    r#"v2:{"id": "zlib", "level": 1}"#,
];

/// Target `bounded_decode`: byte 0 picks a compressor of [`BOUNDED_CODECS`]; the rest is
/// the stored chunk of a uint8 array of [`BOUNDED_CHUNK_BYTES`] elements in one chunk, read
/// whole and in part on both paths. The target itself checks, with a counting allocator,
/// that no allocation exceeds the bound whatever the bytes claim; here the reads only must
/// return, and both paths agree.
pub fn bounded_decode(data: &[u8]) -> Outcome {
    let Some((&sel, chunk)) = data.split_first() else {
        return Outcome::Skipped;
    };
    let codec = BOUNDED_CODECS[usize::from(sel) % BOUNDED_CODECS.len()];
    let dir = TempDir::new();
    let n = BOUNDED_CHUNK_BYTES;
    let key = match codec.strip_prefix("v2:") {
        Some(compressor) => {
            dir.put(
                ".zarray",
                format!(
                    r#"{{"zarr_format": 2, "shape": [{n}], "chunks": [{n}], "dtype": "|u1",
                        "compressor": {compressor}, "fill_value": 0, "order": "C",
                        "filters": null}}"#
                )
                .as_bytes(),
            );
            "0"
        }
        None => {
            dir.put(
                "zarr.json",
                format!(
                    r#"{{"zarr_format": 3, "node_type": "array", "shape": [{n}],
                        "data_type": "uint8", "fill_value": 0,
                        "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [{n}]}}}},
                        "chunk_key_encoding": {{"name": "default"}},
                        "codecs": [{{"name": "bytes"}}, {codec}]}}"#
                )
                .as_bytes(),
            );
            "c/0"
        }
    };
    dir.put(key, chunk);
    let array = match zarrbuf::open(dir.location(), "") {
        Ok(a) => a,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let n = n as u64;
    let whole = read_both(&array, &[0..n], sel & 0x80 == 0, false).0;
    let part = read_both(&array, &[n / 3..n / 3 + 3], sel & 0x80 == 0, false).0;
    if whole.is_err() { whole } else { part }
}

/// The layouts target `vlen_decode` stores its input in (byte 0's low 3 bits, modulo their
/// count): the array, the key of its chunk 0 and whether the chunk is compressed.
pub const VLEN_LAYOUTS: &[(&str, &str)] = &[
    ("v3 string", "c/0"),
    ("v3 variable_length_bytes", "c/0"),
    ("v2 |O VLenUTF8", "0"),
    ("v2 |O VLenBytes", "0"),
    ("v3 string + zstd", "c/0"),
    ("v3 string, sharded", "c/0"),
];

/// The elements of the arrays of target `vlen_decode`, and of its chunks (shards).
pub const VLEN_ELEMENTS: u64 = 8;
/// Elements per chunk (per inner chunk of the sharded layout, whose shards hold all 8).
pub const VLEN_CHUNK: u64 = 4;

/// Whether layout `sel` of [`VLEN_LAYOUTS`] decompresses its chunk (a compressed chunk may
/// decode to as much as the memory limit allows; the other layouts hand the input to the
/// vlen decoder as it is, so what they allocate is bounded by the input).
pub fn vlen_layout_is_compressed(data: &[u8]) -> bool {
    data.first()
        .is_some_and(|&b| usize::from(b & 7) % VLEN_LAYOUTS.len() == 4)
}

/// Writes the metadata of layout `layout` of [`VLEN_LAYOUTS`] into `dir`.
fn vlen_metadata(dir: &TempDir, layout: usize) {
    let (n, c) = (VLEN_ELEMENTS, VLEN_CHUNK);
    let v3 = |dtype: &str, fill: &str, codecs: &str, chunk: u64| {
        format!(
            r#"{{"zarr_format": 3, "node_type": "array", "shape": [{n}],
                "data_type": "{dtype}", "fill_value": {fill},
                "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [{chunk}]}}}},
                "chunk_key_encoding": {{"name": "default"}}, "codecs": {codecs}}}"#
        )
    };
    let v2 = |filter: &str| {
        format!(
            r#"{{"zarr_format": 2, "shape": [{n}], "chunks": [{c}], "dtype": "|O",
                "compressor": null, "fill_value": null, "order": "C",
                "filters": [{{"id": "{filter}"}}]}}"#
        )
    };
    let utf8 = r#"[{"name": "vlen-utf8"}]"#;
    let (key, doc) = match layout {
        0 => ("zarr.json", v3("string", r#""""#, utf8, c)),
        1 => (
            "zarr.json",
            v3(
                "variable_length_bytes",
                "[]",
                r#"[{"name": "vlen-bytes"}]"#,
                c,
            ),
        ),
        2 => (".zarray", v2("vlen-utf8")),
        3 => (".zarray", v2("vlen-bytes")),
        4 => (
            "zarr.json",
            v3(
                "string",
                r#""""#,
                r#"[{"name": "vlen-utf8"}, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]"#,
                c,
            ),
        ),
        _ => (
            "zarr.json",
            v3(
                "string",
                r#""""#,
                &format!(
                    r#"[{{"name": "sharding_indexed", "configuration": {{"chunk_shape": [{c}],
                        "codecs": {utf8},
                        "index_codecs": [{{"name": "bytes", "configuration": {{"endian": "little"}}}}],
                        "index_location": "end"}}}}]"#
                ),
                n,
            ),
        ),
    };
    dir.put(key, doc.as_bytes());
}

/// Target `vlen_decode`: byte 0 picks a layout of [`VLEN_LAYOUTS`] (low 3 bits); the rest
/// is its chunk 0 (the shard, for the sharded layout), read with
/// `ArrayReadExt::read_as::<VarLenBuffer>` whole and in part. Checks: a failed read names the
/// chunk (its key) in its error; a whole read that succeeds has a subset read that succeeds
/// with the same elements; the result's layout holds its invariants. The target itself
/// counts allocations for the uncompressed layouts: none may exceed its limit whatever the
/// counts and lengths in the input claim.
pub fn vlen_decode(data: &[u8]) -> Outcome {
    use zarrbuf::VarLenBuffer;
    let Some((&sel, chunk)) = data.split_first() else {
        return Outcome::Skipped;
    };
    let layout = usize::from(sel & 7) % VLEN_LAYOUTS.len();
    let key = VLEN_LAYOUTS[layout].1;
    let dir = TempDir::new();
    vlen_metadata(&dir, layout);
    dir.put(key, chunk);
    let array = match zarrbuf::open(dir.location(), "") {
        Ok(a) => a,
        Err(e) => panic!("the fixed metadata of layout {layout} does not open: {e}"),
    };
    let proto = BufferPrototype::cpu();
    let whole = array.read_as::<VarLenBuffer>(&[0..VLEN_ELEMENTS], &proto);
    let part = array.read_as::<VarLenBuffer>(&[1..VLEN_ELEMENTS - 1], &proto);
    match (&whole, &part) {
        (Ok(w), Ok(p)) => {
            let bytes = |v: &zarrbuf::VarLenBuffer| -> Vec<Vec<u8>> {
                v.iter_bytes()
                    .expect("a host result")
                    .map(|b| b.expect("an element"))
                    .collect()
            };
            let (w, p) = (bytes(w), bytes(p));
            assert_eq!(w.len(), VLEN_ELEMENTS as usize);
            assert_eq!(p, w[1..w.len() - 1], "a subset read differs from the whole");
        }
        (Ok(_), Err(e)) => panic!("the whole array reads but its subset fails: {e}"),
        (Err(e), _) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("key {key}")),
                "the error does not name the chunk (key {key}): {msg}"
            );
        }
    }
    // `check` decodes each unit as reads do: clean exactly when the whole read succeeds.
    let report = zarrbuf::check::check_array(dir.location(), "", &Default::default());
    let clean = report.as_ref().is_ok_and(|r| r.is_clean());
    assert_eq!(
        clean,
        whole.is_ok(),
        "check and read disagree: read {:?}, check {:?}",
        whole.as_ref().err().map(ToString::to_string),
        report
            .as_ref()
            .map(|r| r.findings.clone())
            .map_err(ToString::to_string)
    );
    Outcome::of(&whole)
}

/// CRC-32 (IEEE, as zip files use it), bit by bit: the fuzz crate depends on nothing else.
pub fn crc32_ieee(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The array of `zip_directory`'s template: 8 uint8 elements in chunks of 4, uncompressed.
const ZIP_ZARR_JSON: &str = r#"{"zarr_format":3,"node_type":"array","shape":[8],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":[{"name":"bytes"}]}"#;

/// The values the template's array holds.
pub const ZIP_VALUES: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

/// A zip file of the template array (`zarr.json` and `c/0` stored, `c/1` deflated as one
/// stored deflate block), and where its central directory starts.
pub fn zip_template() -> (Vec<u8>, usize) {
    let mut c1 = vec![1u8, 4, 0, 0xFB, 0xFF];
    c1.extend_from_slice(&ZIP_VALUES[4..]);
    let entries: [(&str, u16, &[u8], &[u8]); 3] = [
        (
            "zarr.json",
            0,
            ZIP_ZARR_JSON.as_bytes(),
            ZIP_ZARR_JSON.as_bytes(),
        ),
        ("c/0", 0, &ZIP_VALUES[..4], &ZIP_VALUES[..4]),
        ("c/1", 8, &c1, &ZIP_VALUES[4..]),
    ];
    let header = |out: &mut Vec<u8>, method: u16, stored: &[u8], plain: &[u8], name: &str| {
        out.extend_from_slice(&[20, 0, 0, 0]);
        out.extend_from_slice(&method.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0x21, 0]);
        out.extend_from_slice(&crc32_ieee(plain).to_le_bytes());
        out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
        out.extend_from_slice(&(plain.len() as u32).to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0, 0]);
    };
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    for (name, method, stored, plain) in entries {
        offsets.push(out.len() as u32);
        out.extend_from_slice(b"PK\x03\x04");
        header(&mut out, method, stored, plain, name);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(stored);
    }
    let central = out.len();
    for ((name, method, stored, plain), at) in entries.into_iter().zip(offsets) {
        out.extend_from_slice(b"PK\x01\x02\x14\x03");
        header(&mut out, method, stored, plain, name);
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&[0, 0, 0xa4, 0x81]);
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
    }
    let size = out.len() - central;
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0\x03\0\x03\0");
    out.extend_from_slice(&(size as u32).to_le_bytes());
    out.extend_from_slice(&(central as u32).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    (out, central)
}

/// Fuzz target `zip_directory`: the input is XORed into the central directory and
/// end-of-central-directory record of [`zip_template`] (the local headers and the data stay
/// as written), the result opened as a zip store, read whole and checked. Properties: a
/// read that succeeds gives exactly [`ZIP_VALUES`] (no key reads another key's bytes, or
/// bytes its CRC-32 does not vouch for), and `check` calls the store clean exactly when the
/// read succeeds.
/// The names of the central directory entries in `dir` (the directory and what follows it)
/// that are plain files for certain, walked as a zip reader walks them; `None` when the walk
/// goes wrong. An entry whose "made by" or external-attribute bytes `mask` changed may now
/// say directory, link or device (in Unix modes or DOS attributes, as each reader reads
/// them: zarrbuf reads only files), and a name ending in `/` is a folder.
fn central_names(dir: &[u8], mask: &[u8]) -> Option<Vec<String>> {
    let u16_at = |at: usize| -> Option<usize> {
        Some(u16::from_le_bytes([*dir.get(at)?, *dir.get(at + 1)?]) as usize)
    };
    let changed = |range: std::ops::Range<usize>| {
        range
            .into_iter()
            .any(|i| mask.get(i).is_some_and(|&b| b != 0))
    };
    let mut names = Vec::new();
    let mut at = 0;
    while dir.get(at..at + 4) == Some(b"PK\x01\x02".as_slice()) {
        let (name, extra, comment) = (u16_at(at + 28)?, u16_at(at + 30)?, u16_at(at + 32)?);
        let bytes = dir.get(at + 46..at + 46 + name)?;
        let kind_changed = changed(at + 4..at + 6) || changed(at + 38..at + 42);
        if !kind_changed && !bytes.ends_with(b"/") {
            names.push(String::from_utf8_lossy(bytes).into_owned());
        }
        at += 46 + name + extra + comment;
    }
    Some(names)
}

pub fn zip_directory(data: &[u8]) -> Outcome {
    let (mut zip, central) = zip_template();
    let tail = zip.len() - central;
    for (i, b) in data.iter().enumerate().take(tail) {
        zip[central + i] ^= b;
    }
    let dir = TempDir::new();
    dir.put("t.zip", &zip);
    let location = dir.path().join("t.zip");
    let location = location.to_str().expect("temp paths are UTF-8");
    let array = match zarrbuf::open(location, "") {
        Ok(a) => a,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let read = array.read_all(&BufferPrototype::cpu());
    // A chunk whose entry no longer bears its key (a name byte changed) or may no longer be
    // a plain file (its "made by" or attribute bytes changed) is not stored: it reads as the
    // fill value (0), and `check` may report the stray entry.
    let names = central_names(&zip[central..], data);
    let mut renamed = false;
    if let Ok(got) = &read {
        let bytes = got.to_native_bytes().expect("a host result");
        for (k, (got, want)) in bytes.chunks(4).zip(ZIP_VALUES.chunks(4)).enumerate() {
            if got == want {
                continue;
            }
            let absent = names
                .as_ref()
                .is_some_and(|n| !n.iter().any(|name| name == &format!("c/{k}")));
            assert!(
                absent && got.iter().all(|&b| b == 0),
                "a damaged zip read as other values: {bytes:?}"
            );
            renamed = true;
        }
    }
    if renamed {
        return Outcome::Ok;
    }
    let report = zarrbuf::check::check_array(location, "", &Default::default());
    let clean = report.as_ref().is_ok_and(|r| r.is_clean());
    assert_eq!(
        clean,
        read.is_ok(),
        "check and read disagree: read {:?}, check {:?}",
        read.as_ref().err().map(ToString::to_string),
        report
            .as_ref()
            .map(|r| r.findings.clone())
            .map_err(ToString::to_string)
    );
    match read {
        Ok(_) => Outcome::Ok,
        Err(e) => Outcome::Err(e.to_string()),
    }
}

/// The codecs target `prefix_decode` stores its chunk in (a zarr v3 `codecs` list after
/// `bytes`): blosc with LZ4 streams (byte shuffle, bit shuffle, none) and zstd streams, each
/// in blocks of a few KiB, then gzip, zlib and zstd.
pub const PREFIX_CODECS: &[&str] = &[
    r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 1024}}"#,
    r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 1024}}"#,
    r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "noshuffle", "typesize": 4, "blocksize": 1024}}"#,
    r#"{"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 4, "blocksize": 2048}}"#,
    r#"{"name": "gzip", "configuration": {"level": 1}}"#,
    r#"{"name": "numcodecs.zlib", "configuration": {"level": 1}}"#,
    r#"{"name": "zstd", "configuration": {"level": 1, "checksum": false}}"#,
];

/// The uint32 elements of the one chunk of target `prefix_decode`.
pub const PREFIX_ELEMENTS: u64 = 4096;

/// The values of target `prefix_decode`'s chunk: a slow wave with noise, which every codec
/// compresses into several blocks without making them trivial.
pub fn prefix_values() -> Vec<u32> {
    let mut x = 0x9e37_79b9_u32;
    (0..PREFIX_ELEMENTS as u32)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (i / 5) % 300 + x % 4
        })
        .collect()
}

/// Writes the metadata of target `prefix_decode`'s array with `codec` into `dir`.
fn put_prefix_array(dir: &TempDir, codec: &str) {
    let n = PREFIX_ELEMENTS;
    dir.put(
        "zarr.json",
        format!(
            r#"{{"zarr_format": 3, "node_type": "array", "shape": [{n}],
                "data_type": "uint32", "fill_value": 0,
                "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [{n}]}}}},
                "chunk_key_encoding": {{"name": "default"}},
                "codecs": [{{"name": "bytes", "configuration": {{"endian": "little"}}}}, {codec}]}}"#
        )
        .as_bytes(),
    );
}

/// The stored chunk of [`prefix_values`] under each of [`PREFIX_CODECS`], written once per
/// process by zarrbuf itself (the same encoders a user's writes go through).
pub fn prefix_templates() -> &'static [Vec<u8>] {
    static TEMPLATES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    TEMPLATES.get_or_init(|| {
        use zarrbuf::{ArrayWriteExt, NDBuffer};
        let values = NDBuffer::from_vec(prefix_values(), &[PREFIX_ELEMENTS as usize])
            .expect("a host buffer");
        PREFIX_CODECS
            .iter()
            .map(|codec| {
                let dir = TempDir::new();
                put_prefix_array(&dir, codec);
                let array = zarrbuf::open(dir.location(), "").expect("the array opens");
                array.write_all(&values).expect("the chunk is written");
                std::fs::read(dir.path().join("c/0")).expect("the chunk is stored")
            })
            .collect()
    })
}

/// Target `prefix_decode`: byte 0 picks a codec of [`PREFIX_CODECS`] (low 3 bits, modulo
/// their count) and flags (`0x80`: do not validate checksums, which gzip and zlib need to be
/// decoded by prefix; `0x40`: cut the chunk where the mask ends); bytes 1–2 (little-endian,
/// modulo [`PREFIX_ELEMENTS`]) the element to read; bytes 3–4 (modulo the chunk's length)
/// where the rest, a mask, is XORed into the template chunk of [`prefix_templates`]. Reads
/// that one element (the prefix of the chunk up to it) with and without
/// `ReadOptions::with_decode_needed_prefix`: wherever the whole decode reads, the prefix
/// decode reads the same bytes; an unchanged chunk reads its value both ways. Returns the
/// prefix read's outcome.
pub fn prefix_decode(data: &[u8]) -> Outcome {
    let (Some(&sel), Some(at), Some(offset)) = (
        data.first(),
        data.get(1..3).map(|b| u16::from_le_bytes([b[0], b[1]])),
        data.get(3..5).map(|b| u16::from_le_bytes([b[0], b[1]])),
    ) else {
        return Outcome::Skipped;
    };
    let mask = &data[5..];
    let which = usize::from(sel & 0x07) % PREFIX_CODECS.len();
    let validate_checksums = sel & 0x80 == 0;
    let mut chunk = prefix_templates()[which].clone();
    let start = usize::from(offset) % chunk.len().max(1);
    for (b, m) in chunk[start..].iter_mut().zip(mask) {
        *b ^= m;
    }
    let cut = sel & 0x40 != 0;
    if cut {
        chunk.truncate(start + mask.len());
    }
    let intact = !cut && mask.iter().all(|&m| m == 0);
    let dir = TempDir::new();
    put_prefix_array(&dir, PREFIX_CODECS[which]);
    dir.put("c/0", &chunk);
    let array = match zarrbuf::open(dir.location(), "") {
        Ok(a) => a,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let k = u64::from(at) % PREFIX_ELEMENTS;
    let proto = BufferPrototype::cpu();
    let opts = options(PipelineMode::Auto, validate_checksums);
    let read = |prefix: bool| {
        array
            .read_opt(
                &[k..k + 1],
                &proto,
                &opts.clone().with_decode_needed_prefix(prefix),
            )
            .and_then(|b| b.to_native_bytes())
    };
    let (whole, prefix) = (read(false), read(true));
    if let Ok(w) = &whole {
        let p = prefix
            .as_ref()
            .unwrap_or_else(|e| panic!("the prefix decode refused what a whole decode read: {e}"));
        assert!(
            w == p,
            "the prefix and whole decodes read element {k} differently"
        );
    }
    if intact {
        let want = prefix_values()[k as usize].to_ne_bytes();
        assert!(
            whole.as_ref().ok().map(Vec::as_slice) == Some(&want[..])
                && prefix.as_ref().ok().map(Vec::as_slice) == Some(&want[..]),
            "an intact chunk did not read its value: {:?} / {:?}",
            whole.as_ref().err().map(ToString::to_string),
            prefix.as_ref().err().map(ToString::to_string)
        );
    }
    match prefix {
        Ok(_) => Outcome::Ok,
        Err(e) => Outcome::Err(e.to_string()),
    }
}
