//! The side-by-side read benchmark's arrays: float32 with 64³ chunks (or 128³) in five
//! variants (uncompressed, zstd level 1, blosc lz4 + shuffle, gzip level 1, zstd 1 sharded
//! into 256³ shards), and the readers compared on them. Shared by zarrbuf's `benches/read.rs`
//! (criterion, the four of [`Variant::ALL`]) and the GPU check binary (all five, both chunk
//! sizes).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
use zarrs::array::codec::{BloscCodec, BloscCompressor, BloscShuffleMode, GzipCodec, ZstdCodec};
use zarrs::array::{
    Array, ArrayBuilder, ArrayBytes, ArrayBytesFixedDisjointView, ArraySubset, data_type,
};
use zarrs::filesystem::FilesystemStore;

/// The stores of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// No compression.
    Uncompressed,
    /// zstd, level 1.
    Zstd1,
    /// blosc with lz4 and byte shuffle.
    BloscLz4Shuffle,
    /// gzip, level 1.
    Gzip1,
    /// zstd level 1 inside 256³ shards.
    Zstd1Sharded,
}

impl Variant {
    /// The variants of the CPU benchmark (`benches/read.rs`).
    pub const ALL: [Variant; 4] = [
        Variant::Uncompressed,
        Variant::Zstd1,
        Variant::BloscLz4Shuffle,
        Variant::Zstd1Sharded,
    ];

    /// The variants of the GPU benchmark (the GPU check binary).
    pub const GPU: [Variant; 5] = [
        Variant::Uncompressed,
        Variant::Zstd1,
        Variant::BloscLz4Shuffle,
        Variant::Gzip1,
        Variant::Zstd1Sharded,
    ];

    /// The variant's name in store paths and tables.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Uncompressed => "uncompressed",
            Variant::Zstd1 => "zstd1",
            Variant::BloscLz4Shuffle => "blosc-lz4-shuffle",
            Variant::Gzip1 => "gzip1",
            Variant::Zstd1Sharded => "zstd1-sharded",
        }
    }
}

/// The chunk edge of the CPU benchmark (and the GPU one's first pass).
pub const CHUNK: u64 = 64;

/// A shape of about `bytes` bytes of float32, a multiple of 256 in every dimension.
pub fn shape_for(bytes: u64) -> Vec<u64> {
    let elements = (bytes / 4).max(256 * 256 * 256);
    let mut shape = vec![256u64, 256, 256];
    let mut k = 2;
    while shape.iter().product::<u64>() * 2 <= elements {
        shape[k] *= 2;
        k = (k + 2) % 3;
    }
    shape
}

/// Smooth data with noise in the low bits: compresses like real measurements do (partly).
pub fn data(shape: &[u64]) -> NDBuffer {
    let n: u64 = shape.iter().product();
    let (ny, nx) = (shape[1], shape[2]);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<f32> = (0..n)
        .map(|i| {
            let (z, y, x) = (i / (ny * nx), (i / nx) % ny, i % nx);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32;
            ((z as f32 * 0.05).sin() + (y as f32 * 0.03).cos() + x as f32 * 1e-3) * 100.0 + noise
        })
        .collect();
    NDBuffer::from_vec(
        values,
        &shape.iter().map(|&v| v as usize).collect::<Vec<_>>(),
    )
    .expect("shape matches")
}

/// Where the store of `variant` with `shape` (and 64³ chunks) lives under `dir`.
pub fn store_path(dir: &Path, variant: Variant, shape: &[u64]) -> PathBuf {
    store_path_chunked(dir, variant, shape, CHUNK)
}

/// Where the store of `variant` with `shape` and `edge`³ chunks lives under `dir`.
pub fn store_path_chunked(dir: &Path, variant: Variant, shape: &[u64], edge: u64) -> PathBuf {
    let chunks = if edge == CHUNK {
        String::new()
    } else {
        format!("-c{edge}")
    };
    dir.join(format!(
        "{}{chunks}-{}.zarr",
        variant.name(),
        shape
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("x")
    ))
}

/// Opens the store of `variant` with `shape` under `dir` if it was created before (so
/// callers can skip generating the data).
pub fn open_existing(
    dir: &Path,
    variant: Variant,
    shape: &[u64],
) -> Option<Array<FilesystemStore>> {
    let path = store_path(dir, variant, shape);
    if !path.join("zarr.json").exists() {
        return None;
    }
    let store = Arc::new(FilesystemStore::new(&path).ok()?);
    Array::open(store, "/").ok()
}

/// Creates (or reuses, when its metadata exists) the store of `variant` under `dir`.
pub fn create(
    dir: &Path,
    variant: Variant,
    shape: &[u64],
    data: &NDBuffer,
) -> Array<FilesystemStore> {
    create_chunked(dir, variant, shape, data, CHUNK)
}

/// As [`create`], with `edge`³ chunks (inner chunks of 256³ shards for the sharded variant;
/// `edge` divides 256).
pub fn create_chunked(
    dir: &Path,
    variant: Variant,
    shape: &[u64],
    data: &NDBuffer,
    edge: u64,
) -> Array<FilesystemStore> {
    let path = store_path_chunked(dir, variant, shape, edge);
    let fresh = !path.join("zarr.json").exists();
    std::fs::create_dir_all(&path).expect("bench directory");
    let store = Arc::new(FilesystemStore::new(&path).expect("filesystem store"));
    if !fresh {
        return Array::open(store, "/").expect("bench array opens");
    }
    let mut builder =
        ArrayBuilder::new(shape.to_vec(), vec![edge; 3], data_type::float32(), 0.0f32);
    match variant {
        Variant::Uncompressed => {}
        Variant::Zstd1 => {
            builder.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
        }
        Variant::BloscLz4Shuffle => {
            builder.bytes_to_bytes_codecs(vec![Arc::new(
                BloscCodec::new(
                    BloscCompressor::LZ4,
                    5u8.try_into().expect("level"),
                    None,
                    BloscShuffleMode::Shuffle,
                    Some(4),
                )
                .expect("blosc"),
            )]);
        }
        Variant::Gzip1 => {
            builder.bytes_to_bytes_codecs(vec![Arc::new(GzipCodec::new(1).expect("gzip level"))]);
        }
        Variant::Zstd1Sharded => {
            builder = ArrayBuilder::new(
                shape.to_vec(),
                vec![256u64, 256, 256],
                data_type::float32(),
                0.0f32,
            );
            builder
                .subchunk_shape(vec![edge; 3])
                .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
        }
    }
    let array = builder.build(store, "/").expect("bench array");
    array.store_metadata().expect("metadata");
    array.write_all(data).expect("bench data written");
    array
}

/// zarrs' own decode into a reused host buffer (the fastest CPU reader there is).
pub fn zarrs_into(array: &Array<FilesystemStore>, out: &mut [u8]) {
    let shape = array.shape().to_vec();
    let all = ArraySubset::new_with_shape(shape.clone());
    let cells = unsafe_cell_slice::UnsafeCellSlice::new(out);
    // SAFETY: `out` is exclusively borrowed here; this is the only view over it.
    let mut view =
        unsafe { ArrayBytesFixedDisjointView::new(cells, 4, &shape, all.clone()) }.expect("view");
    array
        .retrieve_array_subset_into(&all, (&mut view).into())
        .expect("zarrs read");
}

/// zarrs' allocating read.
pub fn zarrs_alloc(array: &Array<FilesystemStore>) -> usize {
    let all = ArraySubset::new_with_shape(array.shape().to_vec());
    let bytes: ArrayBytes<'static> = array.retrieve_array_subset(&all).expect("zarrs read");
    bytes.into_fixed().expect("fixed").len()
}

/// zarrbuf's read into a fresh NDBuffer made by `proto`.
pub fn zarrbuf_read(array: &Array<FilesystemStore>, proto: &BufferPrototype) -> NDBuffer {
    array.read_all(proto).expect("zarrbuf read")
}

/// Median decoded GB/s of `f` over `reps` runs after one warm-up.
pub fn median_gbps(bytes: usize, reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut rates: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            bytes as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// The whole array of `shape` as a subset.
pub fn full(shape: &[u64]) -> Vec<Range<u64>> {
    shape.iter().map(|&n| 0..n).collect()
}
