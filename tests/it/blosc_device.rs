//! Blosc chunks through the device decoder, run by its host twin: c-blosc frames (written by
//! zarrs, which compresses with c-blosc like numcodecs) taken apart on the CPU, their streams
//! decompressed in batches, stored streams copied, shuffles undone by the unshuffle kernel's
//! host twin — for every compressor nvCOMP decodes, every shuffle, one block and many, with
//! and without a crc32c trailer; damaged frames named before upload or by the decoder.

use std::path::PathBuf;
use zarrbuf::options::Decode;
use zarrbuf::{
    ArrayReadExt, BufferPrototype, CodecSpec,
    options::{PipelineMode, ReadOptions},
};
use zarrs::array::{ArrayBuilder, data_type};

const SHAPE: [u64; 3] = [40, 64, 48];
const CHUNK: [u64; 3] = [16, 32, 48];

fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("blosc-device")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Smooth float32 data with noise in the low bits: compressible, and different per chunk.
fn data() -> Vec<f32> {
    let n: u64 = SHAPE.iter().product();
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (i as f32 * 0.003).sin() * 50.0 + (x % 16) as f32 * 1e-4
        })
        .collect()
}

/// Writes `data()` with `codecs` (a `CodecSpec`) and returns the store's path.
fn write(name: &str, codecs: &str) -> String {
    write_chunked(name, codecs, &CHUNK)
}

/// As [`write`], with chunks of `chunk`.
fn write_chunked(name: &str, codecs: &str, chunk: &[u64]) -> String {
    let path = dir(name);
    let store = zarrbuf::store::open_store(path.to_str().unwrap()).unwrap();
    let spec: CodecSpec = codecs.parse().unwrap();
    let array = ArrayBuilder::new(SHAPE.to_vec(), chunk.to_vec(), data_type::float32(), 0.0f32)
        .bytes_to_bytes_codecs(spec.bytes_to_bytes_codecs(4).unwrap())
        .build(store, "/")
        .unwrap();
    array.store_metadata().unwrap();
    let all = zarrs::array::ArraySubset::new_with_shape(SHAPE.to_vec());
    array.store_array_subset(&all, data()).unwrap();
    path.to_str().unwrap().to_string()
}

fn read(store: &str, decode: Decode, staging: usize) -> zarrbuf::Result<Vec<f32>> {
    let array = zarrbuf::open(store, "")?;
    let opts = ReadOptions::default()
        .with_mode(PipelineMode::Staged)
        .with_decode(decode)
        .with_staging_bytes(staging)
        .with_concurrency(2);
    let all: Vec<_> = SHAPE.iter().map(|&n| 0..n).collect();
    let got = array.read_opt(&all, &BufferPrototype::cpu(), &opts)?;
    got.to_vec::<f32>()
}

fn chunk_file(store: &str, key: &str) -> PathBuf {
    PathBuf::from(store).join("c").join(key)
}

#[test]
fn every_nvcomp_compressor_and_shuffle_decodes_exactly() {
    let want = data();
    let mut cases = 0;
    for cname in ["lz4", "lz4hc", "zstd", "zlib"] {
        for shuffle in ["noshuffle", "shuffle", "bitshuffle"] {
            for crc in ["", "+crc32c"] {
                let codecs = format!("blosc:{cname}:5:{shuffle}{crc}");
                let store = write(&format!("{cname}-{shuffle}{crc}"), &codecs);
                // Batches of one chunk, and batches of many.
                for staging in [1, 64 << 20] {
                    let got = read(&store, Decode::Gpu, staging)
                        .unwrap_or_else(|e| panic!("{codecs}, staging {staging}: {e}"));
                    assert!(got == want, "{codecs}, staging {staging}: wrong data");
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 24);
}

#[test]
fn chunks_that_are_runs_of_the_output_decode_straight_into_it() {
    // Chunks spanning the two inner dimensions: each is one contiguous run of a C-order
    // output, so the device decoder writes it in place (no scratch, no scatter).
    let want = data();
    for codecs in [
        "zstd:1",
        "gzip:1+crc32c",
        "blosc:lz4:5:shuffle",
        "blosc:zstd:5:bitshuffle",
        "blosc:lz4:5:noshuffle",
    ] {
        let store = write_chunked(
            &format!("runs-{}", codecs.replace(':', "-")),
            codecs,
            &[4, 64, 48],
        );
        for staging in [1, 64 << 20] {
            let got = read(&store, Decode::Gpu, staging)
                .unwrap_or_else(|e| panic!("{codecs}, staging {staging}: {e}"));
            assert!(got == want, "{codecs}, staging {staging}: wrong data");
        }
        // A window of the array: chunks cut by it are scattered, the others decode in place.
        let array = zarrbuf::open(&store, "").unwrap();
        let opts = ReadOptions::default()
            .with_mode(PipelineMode::Staged)
            .with_decode(Decode::Gpu);
        let got = array
            .read_opt(&[6..30, 0..64, 0..48], &BufferPrototype::cpu(), &opts)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let plane = 64 * 48;
        assert!(got == want[6 * plane..30 * plane], "{codecs}: wrong window");
    }
}

#[test]
fn compressors_nvcomp_lacks_decode_on_the_cpu() {
    let want = data();
    for codecs in ["blosc:blosclz:5:shuffle", "blosc:snappy:5:bitshuffle"] {
        let store = write(&codecs.replace(':', "-"), codecs);
        assert!(
            read(&store, Decode::Gpu, 64 << 20).unwrap() == want,
            "{codecs}"
        );
    }
}

#[test]
fn a_damaged_lz4_stream_is_refused_before_upload() {
    let store = write("damaged-lz4", "blosc:lz4:5:shuffle");
    let file = chunk_file(&store, "1/1/0");
    let mut bytes = std::fs::read(&file).unwrap();
    // The middle of the shortest of the first block's four streams (one per byte of the
    // float; the noisy low bytes are stored uncompressed): its LZ4 sequences, not its size.
    let word = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let mut at = word(&bytes, 16);
    let mut shortest = (usize::MAX, 0);
    for _ in 0..4 {
        let len = word(&bytes, at);
        shortest = shortest.min((len, at + 4));
        at += 4 + len;
    }
    let (len, start) = shortest;
    for b in &mut bytes[start + len / 4..start + len / 2] {
        *b = 0xff;
    }
    std::fs::write(&file, bytes).unwrap();
    let m = read(&store, Decode::Gpu, 64 << 20).unwrap_err().to_string();
    assert!(
        m.contains("[1, 1, 0]") && m.contains("lz4 block is damaged") && m.contains("block "),
        "unclear error: {m}"
    );
    // The CPU decoder (c-blosc) refuses it too, naming the chunk.
    let m = read(&store, Decode::Cpu, 64 << 20).unwrap_err().to_string();
    assert!(
        m.contains("[1, 1, 0]") && !m.contains("device decoder"),
        "{m}"
    );
}

/// The first zstd stream of chunk 2/0/0 of `store` (streams follow one another, each after
/// its 4-byte length): the chunk's bytes and where the stream's first block header is.
fn first_zstd_block(store: &str) -> (std::path::PathBuf, Vec<u8>, usize) {
    let file = chunk_file(store, "2/0/0");
    let bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    let word = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let mut at = word(&bytes, 16);
    while bytes[at + 4..at + 8] != [0x28, 0xb5, 0x2f, 0xfd] {
        at += 4 + word(&bytes, at);
        assert!(at + 8 < n, "no zstd stream in the chunk");
    }
    let frame = at + 4;
    let fhd = bytes[frame + 4];
    let single_segment = fhd & 0x20 != 0;
    let fcs = [usize::from(single_segment), 2, 4, 8][(fhd >> 6) as usize];
    let dict = [0usize, 1, 2, 4][(fhd & 3) as usize];
    (
        file,
        bytes,
        frame + 5 + usize::from(!single_segment) + dict + fcs,
    )
}

#[test]
fn a_zstd_block_of_the_reserved_type_is_refused_before_upload() {
    let store = write("damaged-zstd-type", "blosc:zstd:5:bitshuffle");
    let (file, mut bytes, block) = first_zstd_block(&store);
    // zstd's reserved block type, which no decoder accepts: the CPU's block walk sees it.
    bytes[block] |= 0b110;
    std::fs::write(&file, bytes).unwrap();
    let m = read(&store, Decode::Gpu, 64 << 20).unwrap_err().to_string();
    assert!(
        m.contains("[2, 0, 0]") && m.contains("reserved type") && !m.contains("device decoder"),
        "unclear error: {m}"
    );
}

#[test]
fn a_damaged_zstd_stream_is_named_by_the_device_decoder() {
    let store = write("damaged-zstd", "blosc:zstd:5:bitshuffle");
    let (file, mut bytes, block) = first_zstd_block(&store);
    // A compressed block whose contents are garbage: every header is sound, so the chunk
    // reaches the device decoder, which must report it.
    assert_eq!(
        (bytes[block] >> 1) & 3,
        2,
        "the first block is not a compressed block"
    );
    let size = (u32::from(bytes[block])
        | u32::from(bytes[block + 1]) << 8
        | u32::from(bytes[block + 2]) << 16)
        >> 3;
    for b in &mut bytes[block + 3..block + 3 + (size as usize).min(64)] {
        *b = 0xff;
    }
    std::fs::write(&file, bytes).unwrap();
    let m = read(&store, Decode::Gpu, 64 << 20).unwrap_err().to_string();
    assert!(
        m.contains("[2, 0, 0]") && m.contains("device decoder (zstd)"),
        "unclear error: {m}"
    );
}

#[test]
fn damaged_blosc_headers_are_refused_before_upload() {
    let store = write("damaged-header", "blosc:lz4:5:shuffle");
    let file = chunk_file(&store, "0/1/0");
    let original = std::fs::read(&file).unwrap();
    // The decoded size, the compressed size, and the first block's start.
    for (at, what) in [
        (4, "decoded bytes"),
        (12, "compressed bytes"),
        (16, "block 0"),
    ] {
        let mut bytes = original.clone();
        bytes[at] ^= 0x10;
        std::fs::write(&file, &bytes).unwrap();
        let m = read(&store, Decode::Gpu, 64 << 20).unwrap_err().to_string();
        assert!(m.contains("[0, 1, 0]") && m.contains(what), "{at}: {m}");
    }
    std::fs::write(&file, &original).unwrap();
    assert!(read(&store, Decode::Gpu, 64 << 20).unwrap() == data());
}

#[test]
fn incompressible_chunks_are_copied_not_decompressed() {
    // Random bits: c-blosc stores each chunk uncompressed (its memcpyed flag).
    let path = dir("noise");
    let store = zarrbuf::store::open_store(path.to_str().unwrap()).unwrap();
    let spec: CodecSpec = "blosc:lz4:5:shuffle".parse().unwrap();
    let array = ArrayBuilder::new(vec![64u64, 64], vec![32u64, 32], data_type::uint32(), 0u32)
        .bytes_to_bytes_codecs(spec.bytes_to_bytes_codecs(4).unwrap())
        .build(store, "/")
        .unwrap();
    array.store_metadata().unwrap();
    let mut x = 7u64;
    let noise: Vec<u32> = (0..64 * 64)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 32) as u32
        })
        .collect();
    let all = zarrs::array::ArraySubset::new_with_shape(vec![64, 64]);
    array.store_array_subset(&all, noise.clone()).unwrap();
    let array = zarrbuf::open(path.to_str().unwrap(), "").unwrap();
    let opts = ReadOptions::default()
        .with_mode(PipelineMode::Staged)
        .with_decode(Decode::Gpu);
    let got = array
        .read_opt(&[0..64, 0..64], &BufferPrototype::cpu(), &opts)
        .unwrap()
        .to_vec::<u32>()
        .unwrap();
    assert_eq!(got, noise);
}
