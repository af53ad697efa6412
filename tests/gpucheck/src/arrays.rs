//! The benchmark's arrays: the data generated on every core, and the store of each
//! (variant, layout) of the summary lines, written just before it is measured.

use std::path::Path;
use std::sync::Arc;
use zarrbuf::{ArrayLayout, ArrayWriteExt, NDBuffer};
use zarrbuf_test_cases::variants::{self, Variant};
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::filesystem::FilesystemStore;

/// How a benchmark array is chunked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Chunks (inner chunks, sharded) of this edge.
    Chunks(u64),
    /// `ArrayLayout::for_gpu`, what `zarrbuf copy --layout gpu` writes: 128 KiB inner
    /// chunks in 64 MiB shards, zstd 1.
    Gpu,
}

impl Layout {
    /// The layout's name in `gpu-decode:` lines.
    pub(crate) fn name(self) -> String {
        match self {
            Layout::Chunks(edge) => format!("chunks{edge}"),
            Layout::Gpu => "gpu".into(),
        }
    }
}

/// The benchmark arrays' shape for about `bytes` bytes of float32: `variants::shape_for`'s
/// (at least 256³, a multiple of 256 in every dimension) from 64 MiB up; below, 256³ halved
/// one axis at a time down to 64³ (1 MiB), for dry runs on small machines.
pub(crate) fn shape_for(bytes: u64) -> Vec<u64> {
    if bytes >= 4 * 256 * 256 * 256 {
        return variants::shape_for(bytes);
    }
    let mut shape = vec![256u64, 256, 256];
    let mut axis = 0;
    while 4 * shape.iter().product::<u64>() > bytes && shape.iter().any(|&n| n > 64) {
        if shape[axis] > 64 {
            shape[axis] /= 2;
        }
        axis = (axis + 1) % 3;
    }
    shape
}

/// A variant's name in `gpu-decode:` lines.
pub(crate) fn variant_name(v: Variant) -> &'static str {
    match v {
        Variant::Uncompressed => "uncompressed",
        Variant::Zstd1 => "zstd1",
        Variant::BloscLz4Shuffle => "blosc_lz4",
        Variant::Gzip1 => "gzip1",
        Variant::Zstd1Sharded => "zstd1_sharded",
    }
}

/// Float32 data of `shape` as `variants::data` makes it (smooth, noise in the low bits),
/// generated on every core: each plane of the first axis draws its noise from its own
/// generator, so the data does not depend on the number of threads.
pub(crate) fn data(shape: &[u64]) -> Result<NDBuffer, String> {
    let (nz, ny, nx) = (shape[0] as usize, shape[1] as usize, shape[2] as usize);
    let plane = ny * nx;
    let mut values = vec![0f32; nz * plane];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_thread = nz.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (t, block) in values.chunks_mut(per_thread * plane).enumerate() {
            s.spawn(move || {
                for (k, out) in block.chunks_mut(plane).enumerate() {
                    let z = t * per_thread + k;
                    let mut state = 0x9e37_79b9_7f4a_7c15u64
                        ^ (z as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    for (i, v) in out.iter_mut().enumerate() {
                        let (y, x) = (i / nx, i % nx);
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        let noise = (state >> 40) as f32 / (1u64 << 24) as f32;
                        *v = ((z as f32 * 0.05).sin() + (y as f32 * 0.03).cos() + x as f32 * 1e-3)
                            * 100.0
                            + noise;
                    }
                }
            });
        }
    });
    NDBuffer::from_vec(values, &[nz, ny, nx]).map_err(|e| e.to_string())
}

/// Writes the store of `variant` in `layout` under `dir` with `data` and opens it. The GPU
/// layout's codecs are its own (`ArrayLayout::for_gpu`: zstd 1), whatever `variant` says.
pub(crate) fn create(
    dir: &Path,
    variant: Variant,
    layout: Layout,
    data: &NDBuffer,
) -> Result<Array<FilesystemStore>, String> {
    let shape: Vec<u64> = data.shape().iter().map(|&n| n as u64).collect();
    if let Layout::Chunks(edge) = layout {
        return Ok(variants::create_chunked(dir, variant, &shape, data, edge));
    }
    let e = |x: zarrbuf::Error| format!("the GPU layout's array: {x}");
    let z = |x: zarrs::array::ArrayCreateError| format!("the GPU layout's array: {x}");
    let gpu = ArrayLayout::for_gpu(&shape, 4);
    let (Some(inner), Some(shards), Some(codecs)) = (gpu.chunks, gpu.shards, gpu.codecs) else {
        return Err(format!(
            "ArrayLayout::for_gpu({shape:?}, 4) left a field unset"
        ));
    };
    let path = dir.join("gpu-layout.zarr");
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).map_err(|x| x.to_string())?;
    let store = Arc::new(FilesystemStore::new(&path).map_err(|x| x.to_string())?);
    let mut builder = ArrayBuilder::new(shape, shards, data_type::float32(), 0.0f32);
    builder
        .subchunk_shape(inner)
        .bytes_to_bytes_codecs(codecs.bytes_to_bytes_codecs(4).map_err(e)?);
    let array = builder.build(store, "/").map_err(z)?;
    array.store_metadata().map_err(|x| x.to_string())?;
    array.write_all(data).map_err(e)?;
    Ok(array)
}
