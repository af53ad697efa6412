//! Writes from CUDA memory compressed on the GPU with nvCOMP, read back exactly.

use crate::Check;
use crate::args::Target;
use crate::fixtures::same;
use std::ops::Range;
use std::time::Instant;
use zarrbuf::options::{Compress, Decode};
use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};

/// The chains the GPU compresses: zarr v3 codecs after `bytes`, and the chunk shape (zlib
/// goes through nvCOMP's DEFLATE compressor, which takes chunks of at most 64 KiB).
const COMPRESS_CHAINS: &[(&str, &str, [u64; 3])] = &[
    (
        "zstd",
        r#"{"name":"zstd","configuration":{"level":1,"checksum":false}}"#,
        [16, 64, 64],
    ),
    (
        "zstd+crc32c",
        r#"{"name":"zstd","configuration":{"level":1,"checksum":false}},{"name":"crc32c"}"#,
        [16, 64, 64],
    ),
    (
        "lz4",
        r#"{"name":"numcodecs.lz4","configuration":{"acceleration":1}}"#,
        [16, 64, 64],
    ),
    (
        "lz4+crc32c",
        r#"{"name":"numcodecs.lz4","configuration":{"acceleration":1}},{"name":"crc32c"}"#,
        [16, 64, 64],
    ),
    (
        "gzip",
        r#"{"name":"gzip","configuration":{"level":5}}"#,
        [16, 64, 64],
    ),
    (
        "gzip+crc32c",
        r#"{"name":"gzip","configuration":{"level":5}},{"name":"crc32c"}"#,
        [16, 64, 64],
    ),
    (
        "zlib",
        r#"{"name":"numcodecs.zlib","configuration":{"level":5}}"#,
        [4, 64, 64],
    ),
    (
        "zlib+crc32c",
        r#"{"name":"numcodecs.zlib","configuration":{"level":5}},{"name":"crc32c"}"#,
        [4, 64, 64],
    ),
];

/// Writes from CUDA memory with GPU compression (nvCOMP) into temporary arrays of every
/// chain in [`COMPRESS_CHAINS`] — smooth data, an incompressible stretch, a chunk of fill
/// values, partial edge chunks — and reads them back through the CPU decoders and the GPU
/// decoder, comparing exactly. Also writes each with CPU compression and reports how many
/// chunks differ from it (they should: evidence nvCOMP, not the CPU, compressed them) and
/// both write rates. On the host twin (`target`) the same writes go from host memory through
/// the staged pipeline to the host twin of the compressor (the CPU compressors behind
/// nvCOMP's request arrays).
pub(crate) fn gpu_compress(table: &mut Vec<(String, String)>, target: Target) -> Check {
    let lib = match target {
        Target::Cuda => {
            zarrbuf::cuda::nvcomp_compression().map_err(|e| format!("GPU compression: {e}"))?
        }
        Target::Host => "the host twin (dry run)".into(),
    };
    table.push(("nvCOMP (GPU compression)".into(), lib));
    // A dry run on the host twin (a debug build, in CI) takes half the rows: partial edge
    // chunks still.
    let ny = if target.is_host() { 130 } else { 250 };
    let (nz, ny, nx) = (64usize, ny, 256usize);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<f32> = (0..nz * ny * nx)
        .map(|i| {
            let (z, y, x) = (i / (ny * nx), (i / nx) % ny, i % nx);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if z < 16 && y < 64 && x < 64 {
                0.0 // chunk [0, 0, 0]: the fill value, erased
            } else if z >= 48 {
                f32::from_bits((state >> 32) as u32 & 0x7f7f_ffff) // noise
            } else {
                ((z as f32 * 0.05).sin() + (y as f32 * 0.03).cos()) * 100.0 + x as f32 * 1e-3
            }
        })
        .collect();
    let host = NDBuffer::from_vec(values, &[nz, ny, nx]).map_err(|e| e.to_string())?;
    let device = host
        .to_prototype(&target.device())
        .map_err(|e| e.to_string())?;
    let bytes = host.nbytes() as f64;
    let base =
        std::env::temp_dir().join(format!("zarrbuf-gpucheck-compress-{}", std::process::id()));
    let shape = [nz as u64, ny as u64, nx as u64];
    let all: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
    let mut report = Vec::new();
    for (name, codecs, chunks) in COMPRESS_CHAINS {
        let e = |x: zarrbuf::Error| format!("GPU compression {name}: {x}");
        let io = |x: std::io::Error| format!("GPU compression {name}: {x}");
        let mut rates = Vec::new();
        let mut stored = Vec::new();
        for compress in [Compress::Gpu, Compress::Cpu] {
            let dir = base.join(format!("{}-{compress:?}.zarr", name.replace('+', "-")));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(io)?;
            let meta = format!(
                r#"{{"zarr_format":3,"node_type":"array","shape":[{},{},{}],"data_type":"float32",
                "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[{},{},{}]}}}},
                "chunk_key_encoding":{{"name":"default"}},"fill_value":0.0,
                "codecs":[{{"name":"bytes","configuration":{{"endian":"little"}}}},{codecs}]}}"#,
                shape[0], shape[1], shape[2], chunks[0], chunks[1], chunks[2]
            );
            std::fs::write(dir.join("zarr.json"), meta).map_err(io)?;
            let array = zarrbuf::open(&dir.to_string_lossy(), "").map_err(e)?;
            let t = Instant::now();
            array
                .write_opt(
                    &all,
                    &device,
                    &target.write_options().with_compress(compress),
                )
                .map_err(e)?;
            rates.push(bytes / t.elapsed().as_secs_f64().max(1e-9) / 1e9);
            // The CPU decoders into host memory (zarrs), the GPU decoder into device memory.
            for (decode, proto) in [
                (Decode::Cpu, BufferPrototype::cpu()),
                (Decode::Gpu, target.device()),
            ] {
                let opts = target.read_options().with_decode(decode);
                let back = array.read_opt(&all, &proto, &opts).map_err(e)?;
                same(
                    &format!("{name} written with {compress:?}, read with {decode:?}"),
                    &back,
                    &host,
                )?;
            }
            if dir.join("c/0/0/0").exists() {
                return Err(format!(
                    "{name} {compress:?}: the chunk of fill values was stored"
                ));
            }
            stored.push(dir);
        }
        // How many stored chunks differ between the GPU- and the CPU-compressed arrays.
        let (mut differ, mut total) = (0usize, 0usize);
        let grid: Vec<u64> = shape
            .iter()
            .zip(chunks)
            .map(|(n, c)| n.div_ceil(*c))
            .collect();
        for z in 0..grid[0] {
            for y in 0..grid[1] {
                for x in 0..grid[2] {
                    let key = format!("c/{z}/{y}/{x}");
                    let (Ok(g), Ok(c)) = (
                        std::fs::read(stored[0].join(&key)),
                        std::fs::read(stored[1].join(&key)),
                    ) else {
                        continue;
                    };
                    total += 1;
                    differ += usize::from(g != c);
                }
            }
        }
        report.push(format!(
            "{name}: GPU {:.2} GB/s, CPU {:.2} GB/s, {differ}/{total} chunks differ from the CPU's",
            rates[0], rates[1]
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    table.push((
        "writes compressed on the GPU read back exactly (CPU and GPU decode)".into(),
        format!("ok: {}", report.join("; ")),
    ));
    Ok(())
}
