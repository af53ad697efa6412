//! Writes compressed on the device (`Compress::Gpu`): every chain a device compresses —
//! zstd, gzip, zlib and numcodecs' lz4, each alone and followed by crc32c, in zarr v3 and v2
//! — written through the staged pipeline and read back exactly through zarrbuf's CPU path.
//! Without a GPU the device is the host twin (the same batches, compressed with the CPU
//! compressors, framed on the CPU as for nvCOMP's output); with one, the CUDA prototypes
//! run too, with nvCOMP when it is installed. The stores are left under
//! `target/tmp/written/` with their expected `.npy`; CI reads them back with zarr-python.

use crate::common::prototypes;
use std::ops::Range;
use std::path::{Path, PathBuf};
use zarrbuf::options::Compress;
use zarrbuf::{
    ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer,
    options::{PipelineMode, ReadOptions, WriteOptions},
};

fn written_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("written")
}

/// A chain under test: a name for files, and the codecs (v3) or compressor (v2) JSON.
struct Chain {
    name: &'static str,
    v3_codecs: Option<&'static str>,
    v2_compressor: Option<&'static str>,
}

const CHAINS: &[Chain] = &[
    Chain {
        name: "zstd1",
        v3_codecs: Some(r#"{"name":"zstd","configuration":{"level":1,"checksum":false}}"#),
        v2_compressor: Some(r#"{"id":"zstd","level":1}"#),
    },
    Chain {
        name: "zstd5-crc32c",
        v3_codecs: Some(
            r#"{"name":"zstd","configuration":{"level":5,"checksum":false}},{"name":"crc32c"}"#,
        ),
        v2_compressor: None,
    },
    Chain {
        name: "gzip6",
        v3_codecs: Some(r#"{"name":"gzip","configuration":{"level":6}}"#),
        v2_compressor: Some(r#"{"id":"gzip","level":6}"#),
    },
    Chain {
        name: "gzip1-crc32c",
        v3_codecs: Some(r#"{"name":"gzip","configuration":{"level":1}},{"name":"crc32c"}"#),
        v2_compressor: None,
    },
    Chain {
        name: "zlib9",
        v3_codecs: Some(r#"{"name":"numcodecs.zlib","configuration":{"level":9}}"#),
        v2_compressor: Some(r#"{"id":"zlib","level":9}"#),
    },
    Chain {
        name: "zlib1-crc32c",
        v3_codecs: Some(
            r#"{"name":"numcodecs.zlib","configuration":{"level":1}},{"name":"crc32c"}"#,
        ),
        v2_compressor: None,
    },
    Chain {
        name: "lz4",
        v3_codecs: Some(r#"{"name":"numcodecs.lz4","configuration":{"acceleration":1}}"#),
        v2_compressor: Some(r#"{"id":"lz4","acceleration":1}"#),
    },
    Chain {
        name: "lz4-crc32c",
        v3_codecs: Some(
            r#"{"name":"numcodecs.lz4","configuration":{"acceleration":1}},{"name":"crc32c"}"#,
        ),
        v2_compressor: None,
    },
];

/// Writes the metadata of an empty array (zarr v3 or v2) with `chain`'s codecs into a fresh
/// directory, and returns its path.
fn create(
    dir: &Path,
    format: u8,
    chain: &Chain,
    dtype: (&str, &str),
    shape: &[u64],
    chunks: &[u64],
) -> Option<PathBuf> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let list = |v: &[u64]| {
        v.iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    match format {
        3 => {
            let codecs = chain.v3_codecs?;
            let meta = format!(
                r#"{{"zarr_format":3,"node_type":"array","shape":[{}],"data_type":"{}",
                "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[{}]}}}},
                "chunk_key_encoding":{{"name":"default"}},"fill_value":0,
                "codecs":[{{"name":"transpose","configuration":{{"order":[1,0]}}}},
                {{"name":"bytes","configuration":{{"endian":"big"}}}},{codecs}]}}"#,
                list(shape),
                dtype.0,
                list(chunks)
            );
            std::fs::write(dir.join("zarr.json"), meta).unwrap();
        }
        _ => {
            let compressor = chain.v2_compressor?;
            let meta = format!(
                r#"{{"zarr_format":2,"shape":[{}],"chunks":[{}],"dtype":"{}","fill_value":0,
                "order":"C","filters":null,"compressor":{compressor}}}"#,
                list(shape),
                list(chunks),
                dtype.1
            );
            std::fs::write(dir.join(".zarray"), meta).unwrap();
        }
    }
    Some(dir.to_path_buf())
}

/// Smooth values, an incompressible stretch of noise, and whole chunks of the fill value.
fn data(shape: &[usize]) -> NDBuffer {
    let (ny, nx) = (shape[0], shape[1]);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<u16> = (0..ny * nx)
        .map(|i| {
            let (y, x) = (i / nx, i % nx);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if y < 16 && x < 24 {
                0 // one chunk of fill value: erased, not stored
            } else if y >= 32 {
                state as u16 // noise: chunks that do not compress
            } else {
                (y * 3 + x / 4) as u16
            }
        })
        .collect();
    NDBuffer::from_vec(values, shape).unwrap()
}

fn all(shape: &[u64]) -> Vec<Range<u64>> {
    shape.iter().map(|&n| 0..n).collect()
}

#[test]
fn every_device_compressed_chain_reads_back_exactly() {
    let shape = [45u64, 70];
    let chunks = [16u64, 24];
    let want = data(&[45, 70]);
    let want_bytes = want.to_native_bytes().unwrap();
    std::fs::create_dir_all(written_dir()).unwrap();
    let mut written = 0;
    for (pname, proto) in prototypes() {
        let source = want.to_prototype(&proto).unwrap();
        for chain in CHAINS {
            for format in [3u8, 2] {
                for store_empty in [false, true] {
                    let tag = format!(
                        "gpu-compress-{}-v{format}-{pname}{}",
                        chain.name,
                        if store_empty { "-empty" } else { "" }
                    )
                    .replace(':', "_");
                    let dest = written_dir().join(format!("{tag}.zarr"));
                    let Some(dir) =
                        create(&dest, format, chain, ("uint16", "<u2"), &shape, &chunks)
                    else {
                        continue;
                    };
                    let array = zarrbuf::open(dir.to_str().unwrap(), "").unwrap();
                    let opts = WriteOptions::default()
                        .with_mode(PipelineMode::Staged)
                        .with_compress(Compress::Gpu)
                        .with_store_empty_chunks(store_empty)
                        .with_concurrency(2);
                    array
                        .write_opt(&all(&shape), &source, &opts)
                        .unwrap_or_else(|e| panic!("{tag}: {e}"));
                    let back = array.read_all(&BufferPrototype::cpu()).unwrap();
                    assert_eq!(
                        back.to_native_bytes().unwrap(),
                        want_bytes,
                        "{tag} reads back differently"
                    );
                    // The chunk of fill values is stored only when asked to.
                    let key = if format == 3 { "c/0/0" } else { "0.0" };
                    assert_eq!(dir.join(key).exists(), store_empty, "{tag}: chunk 0,0");
                    zarrbuf::npy::write(&dest.with_extension("npy"), &want).unwrap();
                    written += 1;
                }
            }
        }
    }
    assert!(written >= 24, "only {written} arrays written");
}

#[test]
fn chunks_that_do_not_compress_are_stored_whole() {
    // Bytes of noise: every compressed chunk is at least as large as the chunk itself.
    let mut state = 0x0123_4567_89ab_cdefu64;
    let noise: Vec<u8> = (0..64 * 64)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    let want = NDBuffer::from_vec(noise, &[64, 64]).unwrap();
    for chain in CHAINS {
        let tag = format!("gpu-compress-noise-{}", chain.name);
        let dest = written_dir().join(format!("{tag}.zarr"));
        let dir = create(&dest, 3, chain, ("uint8", "|u1"), &[64, 64], &[32, 32]).unwrap();
        let array = zarrbuf::open(dir.to_str().unwrap(), "").unwrap();
        let opts = WriteOptions::default()
            .with_mode(PipelineMode::Staged)
            .with_compress(Compress::Gpu);
        array.write_opt(&all(&[64, 64]), &want, &opts).unwrap();
        let stored = std::fs::metadata(dir.join("c/1/1")).unwrap().len();
        assert!(stored >= 32 * 32, "{tag}: noise stored in {stored} bytes");
        let back = array.read_all(&BufferPrototype::cpu()).unwrap();
        assert_eq!(
            back.to_native_bytes().unwrap(),
            want.to_native_bytes().unwrap(),
            "{tag}"
        );
        zarrbuf::npy::write(&dest.with_extension("npy"), &want).unwrap();
    }
}

#[test]
fn partial_writes_mix_device_and_cpu_compressed_chunks() {
    // A block that covers some chunks whole (device) and others in part (merged by zarrs).
    let shape = [45u64, 70];
    let want = data(&[45, 70]);
    for chain in CHAINS.iter().filter(|c| c.name.contains("crc32c")) {
        let tag = format!("gpu-compress-partial-{}", chain.name);
        let dest = written_dir().join(format!("{tag}.zarr"));
        let dir = create(&dest, 3, chain, ("uint16", "<u2"), &shape, &[16, 24]).unwrap();
        let array = zarrbuf::open(dir.to_str().unwrap(), "").unwrap();
        let opts = WriteOptions::default()
            .with_mode(PipelineMode::Staged)
            .with_compress(Compress::Gpu);
        array.write_opt(&all(&shape), &want, &opts).unwrap();
        let block = [5u64..40, 10..70];
        let patch: Vec<u16> = (0..35 * 60).map(|i| (i % 1000) as u16 + 7).collect();
        let patch = NDBuffer::from_vec(patch, &[35, 60]).unwrap();
        array.write_opt(&block, &patch, &opts).unwrap();
        let mut expect = want.copy().unwrap();
        expect.set(&[5..40, 10..70], &patch).unwrap();
        let back = array.read_all(&BufferPrototype::cpu()).unwrap();
        assert_eq!(
            back.to_native_bytes().unwrap(),
            expect.to_native_bytes().unwrap(),
            "{tag}"
        );
        zarrbuf::npy::write(&dest.with_extension("npy"), &expect).unwrap();
    }
}

#[test]
fn cpu_and_auto_write_the_same_arrays() {
    // The CPU path of the same chains, for comparison: identical contents read back.
    let shape = [45u64, 70];
    let want = data(&[45, 70]);
    for choice in [Compress::Cpu, Compress::Auto] {
        for chain in CHAINS {
            let dest = written_dir().join(format!("gpu-compress-{choice:?}-{}.zarr", chain.name));
            let dir = create(&dest, 3, chain, ("uint16", "<u2"), &shape, &[16, 24]).unwrap();
            let array = zarrbuf::open(dir.to_str().unwrap(), "").unwrap();
            let opts = WriteOptions::default()
                .with_mode(PipelineMode::Staged)
                .with_compress(choice);
            array.write_opt(&all(&shape), &want, &opts).unwrap();
            let back = array.read_all(&BufferPrototype::cpu()).unwrap();
            assert_eq!(
                back.to_native_bytes().unwrap(),
                want.to_native_bytes().unwrap(),
                "{choice:?} {}",
                chain.name
            );
        }
    }
}

#[test]
fn async_writes_and_copies_compress_on_the_device_too() {
    let shape = [45u64, 70];
    let want = data(&[45, 70]);
    let opts = WriteOptions::default()
        .with_mode(PipelineMode::Staged)
        .with_compress(Compress::Gpu);
    // The async writer always takes the staged pipeline.
    let chain = &CHAINS[1]; // zstd + crc32c
    let dest = written_dir().join("gpu-compress-async-zstd5-crc32c.zarr");
    let dir = create(&dest, 3, chain, ("uint16", "<u2"), &shape, &[16, 24]).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use zarrbuf::ArrayWriteAsyncExt;
        let array = zarrbuf::open_async(dir.to_str().unwrap(), "")
            .await
            .unwrap();
        array
            .write_opt_async(&all(&shape), &want, &opts)
            .await
            .unwrap();
    });
    let array = zarrbuf::open(dir.to_str().unwrap(), "").unwrap();
    let back = array.read_all(&BufferPrototype::cpu()).unwrap();
    assert_eq!(
        back.to_native_bytes().unwrap(),
        want.to_native_bytes().unwrap()
    );
    zarrbuf::npy::write(&dest.with_extension("npy"), &want).unwrap();
    // copy_array into an lz4 + crc32c array, compressed by the device's host twin.
    let copy_dest = written_dir().join("gpu-compress-copy-lz4-crc32c.zarr");
    let copy_dir = create(
        &copy_dest,
        3,
        &CHAINS[7],
        ("uint16", "<u2"),
        &shape,
        &[10, 35],
    )
    .unwrap();
    let dst = zarrbuf::open(copy_dir.to_str().unwrap(), "").unwrap();
    let copy = zarrbuf::options::CopyOptions::default()
        .with_read(ReadOptions::default().with_mode(PipelineMode::Staged))
        .with_write(
            WriteOptions::default()
                .with_mode(PipelineMode::Staged)
                .with_compress(Compress::Gpu),
        )
        .with_memory_bytes(4096);
    zarrbuf::copy_array(&array, &dst, &copy).unwrap();
    let back = dst.read_all(&BufferPrototype::cpu()).unwrap();
    assert_eq!(
        back.to_native_bytes().unwrap(),
        want.to_native_bytes().unwrap()
    );
    zarrbuf::npy::write(&copy_dest.with_extension("npy"), &want).unwrap();
}
