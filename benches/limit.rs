//! The hand-written limit of a whole-array CPU read: one thread reads each chunk file of a
//! zarr v3 store (float32 or any fixed size, regular chunks, one bytes-to-bytes codec: zstd
//! or blosc), decodes it into a reused buffer with the codec library zarrbuf uses (the zstd
//! crate; c-blosc through blosc-src's `blosc_decompress_ctx`, one internal thread) and copies
//! it into its place in one large, reused output. That single-thread rate times the cores is
//! what a perfectly parallel reader with no overhead would reach; `scripts/bench-async.sh`
//! prints it beside zarrbuf's reads of the same store. The same loop is then run on that many
//! threads at once (each a share of the chunk rows, its own buffers): on a machine shared
//! with other work, that measured figure shows how much of the cores a parallel reader got.
//!
//! ```text
//! cargo bench --bench limit -- STORE [--reps 5] [--cores N]
//! ```
//!
//! Under `cargo test --all-targets` (no store argument) it checks itself on a small zstd
//! and a small blosc array it writes with zarrs: the output must equal zarrs' read.

use std::ffi::c_void;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

#[derive(Clone, Copy, Debug)]
enum Codec {
    Zstd,
    Blosc,
}

struct Store {
    shape: Vec<usize>,
    chunk: Vec<usize>,
    elem: usize,
    codec: Codec,
    separator: String,
}

fn fail(what: impl std::fmt::Display) -> ! {
    eprintln!("error: {what}");
    std::process::exit(1)
}

fn open(root: &Path) -> Store {
    let text = std::fs::read_to_string(root.join("zarr.json"))
        .unwrap_or_else(|e| fail(format!("{}/zarr.json: {e}", root.display())));
    let meta: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| fail(e));
    let dims = |v: &serde_json::Value| -> Vec<usize> {
        v.as_array()
            .unwrap_or_else(|| fail("expected an array of sizes"))
            .iter()
            .map(|n| n.as_u64().unwrap_or_else(|| fail("not a size")) as usize)
            .collect()
    };
    let elem = match meta["data_type"].as_str() {
        Some("float32" | "int32" | "uint32") => 4,
        Some("float64" | "int64" | "uint64") => 8,
        Some("int16" | "uint16" | "float16") => 2,
        Some("int8" | "uint8") => 1,
        other => fail(format!("data type {other:?} is not measured here")),
    };
    let codecs = meta["codecs"]
        .as_array()
        .unwrap_or_else(|| fail("no codecs"));
    let names: Vec<&str> = codecs.iter().filter_map(|c| c["name"].as_str()).collect();
    let codec = match names.as_slice() {
        ["bytes", "zstd"] => Codec::Zstd,
        ["bytes", "blosc"] => Codec::Blosc,
        _ => fail(format!(
            "codecs {names:?}: the limit is measured for bytes + zstd or bytes + blosc"
        )),
    };
    if codecs[0]["configuration"]["endian"].as_str() == Some("big") {
        fail("big-endian stores are not measured here");
    }
    let separator = meta["chunk_key_encoding"]["configuration"]["separator"]
        .as_str()
        .unwrap_or("/")
        .to_string();
    Store {
        shape: dims(&meta["shape"]),
        chunk: dims(&meta["chunk_grid"]["configuration"]["chunk_shape"]),
        elem,
        codec,
        separator,
    }
}

fn grid(s: &Store) -> Vec<usize> {
    s.shape
        .iter()
        .zip(&s.chunk)
        .map(|(n, c)| n.div_ceil(*c))
        .collect()
}

/// Bytes of the output from the first row of chunk row `r` (along the first axis) on.
fn row_offset(s: &Store, r: usize) -> usize {
    let row: usize = s.shape[1..].iter().product::<usize>() * s.elem;
    (r * s.chunk[0]).min(s.shape[0]) * row
}

/// Reads the whole array into `out` on this thread; returns the bytes written.
fn read_all(root: &Path, s: &Store, out: &mut [u8]) -> usize {
    read_rows(root, s, 0..grid(s)[0], out);
    out.len()
}

/// Reads `threads` shares of the chunk rows (along the first axis) at once, each on its own
/// thread with its own buffers, into disjoint parts of `out`.
fn read_parallel(root: &Path, s: &Store, out: &mut [u8], threads: usize) -> usize {
    let rows = grid(s)[0];
    let n = threads.clamp(1, rows.max(1));
    std::thread::scope(|scope| {
        let mut rest = &mut out[..];
        let mut done = 0;
        for t in 0..n {
            let end = rows * (t + 1) / n;
            let (part, tail) = rest.split_at_mut(row_offset(s, end) - row_offset(s, done));
            rest = tail;
            let range = done..end;
            scope.spawn(move || read_rows(root, s, range, part));
            done = end;
        }
    });
    out.len()
}

/// Reads chunk rows `rows` (along the first axis) into `out`, which starts at the first of
/// them.
fn read_rows(root: &Path, s: &Store, rows: std::ops::Range<usize>, out: &mut [u8]) {
    let nd = s.shape.len();
    let base = row_offset(s, rows.start);
    let mut grid = grid(s);
    let first = rows.start;
    grid[0] = rows.len();
    let chunk_bytes = s.chunk.iter().product::<usize>() * s.elem;
    let mut encoded = Vec::new();
    let mut decoded = vec![0u8; chunk_bytes];
    let mut zstd = zstd::bulk::Decompressor::new().unwrap_or_else(|e| fail(e));
    // Output strides (bytes), C order.
    let mut ostride = vec![s.elem; nd];
    for k in (0..nd.saturating_sub(1)).rev() {
        ostride[k] = ostride[k + 1] * s.shape[k + 1];
    }
    let mut cstride = vec![s.elem; nd];
    for k in (0..nd.saturating_sub(1)).rev() {
        cstride[k] = cstride[k + 1] * s.chunk[k + 1];
    }
    let total: usize = grid.iter().product();
    for linear in 0..total {
        let mut idx = vec![0usize; nd];
        let mut rest = linear;
        for k in (0..nd).rev() {
            idx[k] = rest % grid[k];
            rest /= grid[k];
        }
        idx[0] += first;
        let key: Vec<String> = idx.iter().map(|i| i.to_string()).collect();
        let path = root.join(format!("c{}{}", s.separator, key.join(&s.separator)));
        encoded.clear();
        match std::fs::File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut encoded)
                    .unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => fail(format!(
                "{}: missing chunks are not measured",
                path.display()
            )),
            Err(e) => fail(format!("{}: {e}", path.display())),
        }
        let n = match s.codec {
            Codec::Zstd => zstd
                .decompress_to_buffer(&encoded, &mut decoded[..])
                .unwrap_or_else(|e| fail(format!("{}: {e}", path.display()))),
            Codec::Blosc => {
                // SAFETY: `encoded` and `decoded` are live, distinct buffers; blosc writes
                // at most `decoded.len()` bytes.
                let n = unsafe {
                    blosc_src::blosc_decompress_ctx(
                        encoded.as_ptr().cast::<c_void>(),
                        decoded.as_mut_ptr().cast::<c_void>(),
                        decoded.len(),
                        1,
                    )
                };
                if n <= 0 {
                    fail(format!("{}: blosc could not decode it", path.display()));
                }
                n as usize
            }
        };
        if n != chunk_bytes {
            fail(format!("{}: decoded to {n} bytes", path.display()));
        }
        // Copy the chunk's part of the array (edge chunks are stored padded) row by row.
        let extent: Vec<usize> = (0..nd)
            .map(|k| s.chunk[k].min(s.shape[k] - idx[k] * s.chunk[k]))
            .collect();
        let row = extent[nd - 1] * s.elem;
        let rows: usize = extent[..nd - 1].iter().product();
        for r in 0..rows {
            let mut rest = r;
            let (mut src, mut dst) = (0, 0);
            for k in (0..nd - 1).rev() {
                let i = rest % extent[k];
                rest /= extent[k];
                src += i * cstride[k];
                dst += (idx[k] * s.chunk[k] + i) * ostride[k];
            }
            dst += idx[nd - 1] * s.chunk[nd - 1] * s.elem;
            let dst = dst - base;
            out[dst..dst + row].copy_from_slice(&decoded[src..src + row]);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse::<usize>()
                    .unwrap_or_else(|e| fail(format!("{name}: {e}")))
            })
    };
    let store = args
        .iter()
        .enumerate()
        .find(|&(i, a)| {
            !a.starts_with("--")
                && (i == 0 || !matches!(args[i - 1].as_str(), "--reps" | "--cores"))
        })
        .map(|(_, a)| a.clone());
    let Some(store) = store else {
        self_check();
        return;
    };
    let reps = value("--reps").unwrap_or(5).max(1);
    let cores = value("--cores")
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let root = Path::new(&store);
    let s = open(root);
    let bytes = s.shape.iter().product::<usize>() * s.elem;
    let mut out = vec![1u8; bytes]; // written once: its pages are faulted in before timing
    read_all(root, &s, &mut out);
    let mut median = |f: &mut dyn FnMut(&mut [u8]) -> usize| -> (f64, f64, f64) {
        f(&mut out);
        let mut rates: Vec<f64> = (0..reps)
            .map(|_| {
                let t = Instant::now();
                let n = f(&mut out);
                n as f64 / t.elapsed().as_secs_f64() / 1e9
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        (rates[0], rates[rates.len() / 2], rates[rates.len() - 1])
    };
    let (lo, one, hi) = median(&mut |out| read_all(root, &s, out));
    let (_, all, _) = median(&mut |out| read_parallel(root, &s, out, cores));
    println!(
        "{store} ({:?}): one thread median {one:.3} GB/s over {reps} reads (min {lo:.3}, max {hi:.3}); × {cores} cores = {:.3} GB/s; the same loop on {cores} threads at once: {all:.3} GB/s",
        s.codec,
        one * cores as f64
    );
}

/// Without a store: reads small zstd and blosc arrays written by zarrs and compares them
/// with zarrs' own read (so the measured loop decodes what zarrbuf decodes).
fn self_check() {
    use std::sync::Arc;
    use zarrs::array::codec::{BloscCodec, BloscCompressor, BloscShuffleMode, ZstdCodec};
    use zarrs::array::{ArrayBuilder, ArrayBytes, ArraySubset, data_type};
    let dir = std::env::temp_dir().join(format!("zarrbuf-limit-check-{}", std::process::id()));
    let shape = [40u64, 24, 36];
    let values: Vec<f32> = (0..shape.iter().product::<u64>())
        .map(|i| (i as f32 * 0.37).sin() * 100.0)
        .collect();
    let codecs: [Arc<dyn zarrs::array::BytesToBytesCodecTraits>; 2] = [
        Arc::new(ZstdCodec::new(1, false)),
        Arc::new(
            BloscCodec::new(
                BloscCompressor::LZ4,
                5u8.try_into().expect("level"),
                None,
                BloscShuffleMode::Shuffle,
                Some(4),
            )
            .expect("blosc"),
        ),
    ];
    for (n, codec) in codecs.into_iter().enumerate() {
        let root = dir.join(format!("a{n}.zarr"));
        let store = Arc::new(zarrs::filesystem::FilesystemStore::new(&root).expect("store"));
        let mut b = ArrayBuilder::new(
            shape.to_vec(),
            vec![16u64, 8, 16],
            data_type::float32(),
            0.0f32,
        );
        b.bytes_to_bytes_codecs(vec![codec]);
        let array = b.build(store, "/").expect("array");
        array.store_metadata().expect("metadata");
        let all = ArraySubset::new_with_shape(shape.to_vec());
        array
            .store_array_subset(&all, values.as_slice())
            .expect("write");
        let expected: ArrayBytes<'static> = array.retrieve_array_subset(&all).expect("read");
        let expected = expected.into_fixed().expect("fixed").into_owned();
        let s = open(&root);
        let mut out = vec![0u8; expected.len()];
        read_all(&root, &s, &mut out);
        assert_eq!(out, expected, "{:?}", s.codec);
        for threads in [2, 3] {
            let mut out = vec![0u8; expected.len()];
            read_parallel(&root, &s, &mut out, threads);
            assert_eq!(out, expected, "{:?} on {threads} threads", s.codec);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("limit: self-check passed (zstd and blosc reads equal zarrs')");
}
