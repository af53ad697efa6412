//! The layout sweep (`--sweep-layout`): which inner chunk size the GPU layout should have.
//! For each of [`SWEEP`]'s inner chunk shapes, a zstd 1 array of the benchmark's float32
//! data, sharded (inner chunks in shards of 2 × 4 × 4 of them), is written, read whole
//! into the device with `Decode::Gpu` (checked once, then the median of `--reps`), and its
//! chunks' device-resident decompression rate measured (`zarrbuf::cuda::decode_limits`):
//!
//! `gpu-sweep: inner=128 shape=48x32x32 mean_kib=117.2 chunks=1024 nvcomp_resident=25.10 end_to_end=9.80`
//!
//! `inner` is the compressed size the shape aims at (KiB), `mean_kib` the mean compressed
//! inner chunk it gave, both rates decoded GB/s. Each line is printed as soon as it is known.

use crate::Check;
use crate::bench::{Bench, median_gbps, print_now};
use crate::fixtures::same;
use std::sync::Arc;
use zarrbuf::options::Decode;
use zarrbuf::{ArrayReadExt, ArrayWriteExt, NDBuffer};
use zarrbuf_test_cases::variants;
use zarrs::array::codec::ZstdCodec;
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::filesystem::FilesystemStore;

/// (compressed KiB aimed at, inner chunk shape): the benchmark's data compresses about
/// 1.5–1.65× with zstd 1, so each shape decodes to about 1.5× its aim.
pub(crate) const SWEEP: [(u64, [u64; 3]); 5] = [
    (32, [12, 32, 32]),
    (64, [24, 32, 32]),
    (128, [48, 32, 32]),
    (256, [24, 64, 64]),
    (512, [48, 64, 64]),
];

/// Writes the sweep's array of inner chunks `inner` under `dir` with `data` and opens it.
fn create(
    dir: &std::path::Path,
    inner: [u64; 3],
    data: &NDBuffer,
) -> Result<Array<FilesystemStore>, String> {
    let shape: Vec<u64> = data.shape().iter().map(|&n| n as u64).collect();
    let path = dir.join(format!("sweep-{}x{}x{}.zarr", inner[0], inner[1], inner[2]));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).map_err(|e| e.to_string())?;
    let store = Arc::new(FilesystemStore::new(&path).map_err(|e| e.to_string())?);
    let shard = vec![inner[0] * 2, inner[1] * 4, inner[2] * 4];
    let mut builder = ArrayBuilder::new(shape, shard, data_type::float32(), 0.0f32);
    builder
        .subchunk_shape(inner.to_vec())
        .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
    let array = builder
        .build(store, "/")
        .map_err(|e| format!("the sweep's array: {e}"))?;
    array.store_metadata().map_err(|e| e.to_string())?;
    array
        .write_all(data)
        .map_err(|e| format!("the sweep's array: {e}"))?;
    Ok(array)
}

/// The `gpu-sweep:` line of one inner chunk shape.
pub(crate) fn sweep_line(
    aim_kib: u64,
    inner: [u64; 3],
    limits: &zarrbuf::cuda::DecodeLimits,
    end_to_end: f64,
) -> String {
    let mean_kib = limits.stored_bytes as f64 / limits.chunks.max(1) as f64 / 1024.0;
    format!(
        "gpu-sweep: inner={aim_kib} shape={}x{}x{} mean_kib={mean_kib:.1} chunks={} \
         nvcomp_resident={:.2} end_to_end={:.2}",
        inner[0], inner[1], inner[2], limits.chunks, limits.resident_gbps, end_to_end
    )
}

/// Runs the sweep of `bench`'s array size; adds one row per shape to `table`.
pub(crate) fn run(bench: &Bench, table: &mut Vec<(String, String)>) -> Check {
    let shape = crate::arrays::shape_for(bench.bytes);
    let data = crate::arrays::data(&shape)?;
    let total = data.nbytes();
    let dir = std::env::temp_dir().join(format!("zarrbuf-gpucheck-sweep-{}", std::process::id()));
    let proto = bench.target.device();
    let all = variants::full(&shape);
    let opts = bench
        .target
        .read_options()
        .with_decode(Decode::Gpu)
        .with_staging_bytes(bench.staging_bytes);
    for (aim, inner) in SWEEP {
        let array = create(&dir, inner, &data)?;
        let read = || {
            array
                .read_opt(&all, &proto, &opts)
                .map_err(|e| e.to_string())
        };
        same(&format!("sweep {inner:?}"), &read()?, &data)?;
        let end_to_end = median_gbps(total, bench.reps, || read().map(drop))?;
        let limits = zarrbuf::cuda::decode_limits(&array, &proto, &opts, bench.reps)
            .map_err(|e| format!("the decode limits of sweep {inner:?}: {e}"))?;
        let line = sweep_line(aim, inner, &limits, end_to_end);
        print_now(&line);
        table.push((format!("layout sweep, inner {aim} KiB"), line));
        drop(array);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_lines_name_the_shape_and_the_mean_compressed_size() {
        let limits = zarrbuf::cuda::DecodeLimits {
            chunks: 4,
            stored_bytes: 4 * 120 * 1024,
            decoded_bytes: 4 * 192 * 1024,
            chunks_per_batch: 4,
            resident_gbps: 25.104,
            host_codec_gbps: 0.5,
            cores: 2,
        };
        assert_eq!(
            sweep_line(128, [48, 32, 32], &limits, 9.8),
            "gpu-sweep: inner=128 shape=48x32x32 mean_kib=120.0 chunks=4 nvcomp_resident=25.10 \
             end_to_end=9.80"
        );
    }

    #[test]
    fn the_sweep_aims_at_growing_sizes_and_its_shapes_decode_to_about_one_and_a_half_times() {
        for w in SWEEP.windows(2) {
            assert_eq!(w[1].0, 2 * w[0].0);
        }
        for (aim, inner) in SWEEP {
            let decoded_kib = inner.iter().product::<u64>() * 4 / 1024;
            assert_eq!(decoded_kib * 2, aim * 3, "{inner:?}");
        }
    }
}
