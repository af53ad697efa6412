//! The device decoder's failure paths, through its host twin (the batches, CPU-side framing
//! checks and per-chunk result checks that nvCOMP reads run on a GPU): a damaged chunk gives
//! one clean error naming it, whether the damage is caught before upload or by the decoder.

use crate::common::root;
use std::path::{Path, PathBuf};
use zarrbuf::options::Decode;
use zarrbuf::{
    ArrayReadExt, BufferPrototype,
    options::{PipelineMode, ReadOptions},
};

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let to = dst.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &to);
        } else {
            std::fs::copy(&p, &to).unwrap();
        }
    }
}

/// A private copy of a fixture with one chunk file changed by `damage`.
pub(crate) fn damaged(
    name: &str,
    tag: &str,
    chunk: &str,
    damage: impl Fn(&mut Vec<u8>),
) -> PathBuf {
    let dst = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("device-decode")
        .join(format!("{name}-{tag}.zarr"));
    let _ = std::fs::remove_dir_all(&dst);
    copy_dir(&root().join("data").join(format!("{name}.zarr")), &dst);
    let file = dst.join(chunk);
    let mut bytes = std::fs::read(&file).unwrap();
    damage(&mut bytes);
    std::fs::write(&file, bytes).unwrap();
    dst
}

fn read_error(store: &Path, decode: Decode) -> String {
    let array = zarrbuf::open(store.to_str().unwrap(), "").unwrap();
    let opts = ReadOptions::default()
        .with_mode(PipelineMode::Staged)
        .with_decode(decode);
    let all: Vec<_> = array.shape().iter().map(|&n| 0..n).collect();
    array
        .read_opt(&all, &BufferPrototype::cpu(), &opts)
        .expect_err("a damaged chunk must fail the read")
        .to_string()
}

#[test]
fn a_chunk_the_decoder_rejects_is_named() {
    // The frame header is intact, the compressed blocks are not: only decoding finds it.
    let store = damaged("v3_large_3d", "blocks", "c/1/1/1", |b| {
        let n = b.len();
        for x in &mut b[n / 2..n - 4] {
            *x ^= 0x5a;
        }
    });
    let m = read_error(&store, Decode::Gpu);
    assert!(
        m.contains("[1, 1, 1]") && m.contains("device decoder (zstd)"),
        "unclear error: {m}"
    );
    // The CPU decoders reject the same chunk, naming it too.
    let m = read_error(&store, Decode::Cpu);
    assert!(m.contains("[1, 1, 1]"), "unclear error: {m}");
    assert!(!m.contains("device decoder"), "{m}");
}

#[test]
fn framing_is_checked_before_upload() {
    // A zstd frame whose header declares another size than the chunk holds.
    let store = damaged("v3_large_3d", "magic", "c/0/1/2", |b| b[0] ^= 0xff);
    let m = read_error(&store, Decode::Gpu);
    assert!(m.contains("[0, 1, 2]") && m.contains("zstd frame"), "{m}");
    // A gzip member whose trailer declares another size.
    let store = damaged("v3_uint16_gzip", "isize", "c/0/0", |b| {
        let n = b.len();
        b[n - 1] ^= 0x01;
    });
    let m = read_error(&store, Decode::Gpu);
    assert!(m.contains("[0, 0]") && m.contains("gzip trailer"), "{m}");
    // A crc32c trailer that does not match (zstd + crc32c chain).
    let store = damaged("v3_uint32_be_zstd_crc32c", "crc", "c/1/1", |b| {
        let n = b.len();
        b[n / 2] ^= 0x40;
    });
    let m = read_error(&store, Decode::Gpu);
    assert!(m.contains("[1, 1]") && m.contains("crc32c"), "{m}");
}

#[test]
fn cpu_decode_never_uses_the_device_decoder() {
    // The same damage as above, read with Decode::Cpu: the CPU's own checksum error.
    let store = damaged("v3_uint32_be_zstd_crc32c", "crc-cpu", "c/1/1", |b| {
        let n = b.len();
        b[n / 2] ^= 0x40;
    });
    let m = read_error(&store, Decode::Cpu);
    assert!(
        m.contains("[1, 1]") && m.to_lowercase().contains("checksum"),
        "{m}"
    );
}

#[test]
fn numcodecs_lz4_chunks_are_checked_and_named() {
    // numcodecs' lz4 (written by zarr-python): a size header that disagrees with the chunk
    // is refused before upload...
    let store = damaged("v3_numcodecs_lz4", "header", "c/2/1", |b| b[0] ^= 0x01);
    let m = read_error(&store, Decode::Gpu);
    assert!(m.contains("[2, 1]") && m.contains("lz4 size header"), "{m}");
    // ...and so is a block whose sequences would write past the chunk (nvCOMP was seen to
    // report 18885 bytes decoded into this 100-byte chunk), the chunk named.
    let store = damaged("v3_numcodecs_lz4", "block", "c/1/0", |b| {
        let n = b.len();
        for x in &mut b[4..n] {
            *x = 0xff;
        }
    });
    let m = read_error(&store, Decode::Gpu);
    assert!(
        m.contains("[1, 0]") && m.contains("lz4 block is damaged"),
        "unclear error: {m}"
    );
    let m = read_error(&store, Decode::Cpu);
    assert!(m.contains("[1, 0]") && !m.contains("device decoder"), "{m}");
}
