use super::*;
use std::io::Write;

const SIZE: usize = 4096;

fn data() -> Vec<u8> {
    (0..SIZE).map(|i| (i * 7 % 251) as u8).collect()
}

fn zstd_codec() -> DeviceCodec {
    DeviceCodec {
        framing: Framing::Zstd,
        crc32c: false,
    }
}

#[test]
fn zstd_frames_are_checked_and_passed_whole() {
    let enc = zstd::bulk::compress(&data(), 1).unwrap();
    let c = zstd_codec();
    assert_eq!(c.payload(&enc, SIZE, true).unwrap(), Some(0..enc.len()));
    assert!(
        c.payload(&enc, SIZE + 1, true)
            .unwrap_err()
            .contains("declares")
    );
    let mut bad = enc.clone();
    bad[0] ^= 1;
    assert!(c.payload(&bad, SIZE, true).unwrap_err().contains("magic"));
    assert!(c.payload(&enc[..5], SIZE, true).is_err());
}

/// A frame cut anywhere after its header is refused before upload (nvCOMP reads past
/// the end of such a frame), two frames go to the CPU, and trailing garbage is refused.
#[test]
fn zstd_frames_cut_short_or_followed_are_caught_by_the_block_walk() {
    // Over 128 KiB of poorly compressible bytes: several blocks.
    let big: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let c = zstd_codec();
    for checksum in [false, true] {
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        enc.include_checksum(checksum).unwrap();
        enc.include_contentsize(true).unwrap();
        enc.set_pledged_src_size(Some(big.len() as u64)).unwrap();
        enc.write_all(&big).unwrap();
        let enc = enc.finish().unwrap();
        assert_eq!(
            c.payload(&enc, big.len(), true).unwrap(),
            Some(0..enc.len())
        );
        for cut in [enc.len() / 2, enc.len() - 1, 20, enc.len() - 3] {
            let err = c.payload(&enc[..cut], big.len(), true).unwrap_err();
            assert!(
                err.contains("cut short") || err.contains("ends inside"),
                "{err}"
            );
        }
        let mut two = enc.clone();
        two.extend_from_slice(&zstd::bulk::compress(b"", 1).unwrap());
        assert!(matches!(
            c.device_payload(&two, big.len(), true),
            Ok(DevicePayload::Cpu)
        ));
        let mut junk = enc.clone();
        junk.extend_from_slice(b"junkjunk");
        assert!(
            c.payload(&junk, big.len(), true)
                .unwrap_err()
                .contains("not another frame")
        );
    }
}

#[test]
fn gzip_and_zlib_are_unwrapped_to_deflate() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&data()).unwrap();
    let gz = gz.finish().unwrap();
    let c = DeviceCodec {
        framing: Framing::Gzip,
        crc32c: false,
    };
    let r = c.payload(&gz, SIZE, true).unwrap().unwrap();
    let mut out = vec![0u8; SIZE];
    let n = crate::device::decode_on_host(Compression::Deflate, &gz[r], &mut out).unwrap();
    assert_eq!((n, out), (SIZE, data()));
    assert!(
        c.payload(&gz, SIZE - 1, true)
            .unwrap_err()
            .contains("trailer")
    );

    let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    zl.write_all(&data()).unwrap();
    let zl = zl.finish().unwrap();
    let c = DeviceCodec {
        framing: Framing::Zlib,
        crc32c: false,
    };
    let r = c.payload(&zl, SIZE, true).unwrap().unwrap();
    let mut out = vec![0u8; SIZE];
    crate::device::decode_on_host(Compression::Deflate, &zl[r], &mut out).unwrap();
    assert_eq!(out, data());
    let mut bad = zl.clone();
    bad[1] ^= 1;
    assert!(c.payload(&bad, SIZE, true).is_err());
}

/// numcodecs' lz4 layout: a 4-byte little-endian size, then one LZ4 block.
fn numcodecs_lz4(data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&lz4_flex::block::compress(data));
    out
}

#[test]
fn numcodecs_lz4_chunks_lose_their_size_header_and_decode_on_both_twins() {
    let enc = numcodecs_lz4(&data());
    for crc32c in [false, true] {
        let mut stored = enc.clone();
        if crc32c {
            let crc = crc32c::crc32c(&stored);
            stored.extend_from_slice(&crc.to_le_bytes());
        }
        let c = DeviceCodec {
            framing: Framing::Lz4,
            crc32c,
        };
        let r = c.payload(&stored, SIZE, true).unwrap().unwrap();
        assert_eq!(r, 4..enc.len());
        let mut out = vec![0u8; SIZE];
        let n = crate::device::decode_on_host(Compression::Lz4, &stored[r], &mut out).unwrap();
        assert_eq!((n, &out), (SIZE, &data()));
        let mut out = vec![0u8; SIZE];
        assert_eq!(c.decode_into(&stored, &mut out, true).unwrap(), SIZE);
        assert_eq!(out, data());
        // A size header that disagrees with the chunk is refused before any decoding.
        assert!(
            c.payload(&stored, SIZE + 8, true)
                .unwrap_err()
                .contains("declares")
        );
        let mut short = vec![0u8; SIZE - 1];
        assert!(c.decode_into(&stored, &mut short, true).is_err());
    }
    let c = DeviceCodec {
        framing: Framing::Lz4,
        crc32c: false,
    };
    assert!(
        c.payload(&enc[..4], SIZE, true)
            .unwrap_err()
            .contains("too short")
    );
    // A damaged block is refused before upload, and is an error on the CPU too.
    let mut bad = enc.clone();
    for b in bad[4..].iter_mut().take(16) {
        *b = 0xff;
    }
    assert!(
        c.payload(&bad, SIZE, true)
            .unwrap_err()
            .contains("lz4 block")
    );
    let mut out = vec![0u8; SIZE];
    assert!(c.decode_into(&bad, &mut out, true).is_err());
    assert!(crate::device::decode_on_host(Compression::Lz4, &bad[4..], &mut out).is_err());
}

/// Whatever bytes a block holds, the walk passes it only if the CPU decoder produces
/// exactly the chunk's size from it: nothing that would overrun a device buffer passes.
#[test]
fn lz4_block_walk_passes_only_blocks_that_decode_to_the_chunk_size() {
    let good = lz4_flex::block::compress(&data());
    assert!(lz4_block_check(&good, SIZE).is_ok());
    assert!(lz4_block_check(&good, SIZE - 1).is_err());
    assert!(lz4_block_check(&good, SIZE + 1).is_err());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut passed = 0;
    for round in 0..20_000 {
        let mut block = good.clone();
        // Flip a few bytes, or cut the block short.
        for _ in 0..1 + round % 4 {
            let i = (next() as usize) % block.len();
            block[i] ^= (next() as u8) | 1;
        }
        if round % 7 == 0 {
            block.truncate((next() as usize) % block.len());
        }
        let mut out = vec![0u8; SIZE];
        let cpu = lz4_flex::block::decompress_into(&block, &mut out);
        if lz4_block_check(&block, SIZE).is_ok() {
            passed += 1;
            assert_eq!(
                cpu.ok(),
                Some(SIZE),
                "round {round}: the walk passed a block the decoder refuses"
            );
        }
    }
    // Damage to literal bytes alone keeps a block valid; the walk must still pass those.
    assert!(passed > 0);
}

#[test]
fn crc32c_trailers_are_verified_and_stripped() {
    let mut enc = zstd::bulk::compress(&data(), 1).unwrap();
    let crc = crc32c::crc32c(&enc);
    enc.extend_from_slice(&crc.to_le_bytes());
    let c = DeviceCodec {
        framing: Framing::Zstd,
        crc32c: true,
    };
    assert_eq!(c.payload(&enc, SIZE, true).unwrap(), Some(0..enc.len() - 4));
    let n = enc.len();
    enc[n - 1] ^= 0xff;
    assert!(c.payload(&enc, SIZE, true).unwrap_err().contains("crc32c"));
    assert!(c.payload(&enc, SIZE, false).is_ok());
}

#[test]
fn decode_into_checks_everything_the_codecs_define() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&data()).unwrap();
    let gz = gz.finish().unwrap();
    let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    zl.write_all(&data()).unwrap();
    let zl = zl.finish().unwrap();
    let zs = zstd::bulk::compress(&data(), 3).unwrap();
    for (framing, enc) in [
        (Framing::Gzip, gz),
        (Framing::Zlib, zl),
        (Framing::Zstd, zs),
    ] {
        for crc32c in [false, true] {
            let c = DeviceCodec { framing, crc32c };
            let mut enc = enc.clone();
            if crc32c {
                let crc = crc32c::crc32c(&enc);
                enc.extend_from_slice(&crc.to_le_bytes());
            }
            let mut out = vec![0u8; SIZE];
            assert_eq!(c.decode_into(&enc, &mut out, true), Ok(SIZE), "{c:?}");
            assert_eq!(out, data(), "{c:?}");
            // A wrong size, and damaged data (the codecs' own checksums catch it).
            let mut small = vec![0u8; SIZE - 1];
            assert!(c.decode_into(&enc, &mut small, true).is_err(), "{c:?}");
            let at = enc.len() - if crc32c { 6 } else { 2 };
            enc[at] ^= 0x10;
            assert!(c.decode_into(&enc, &mut out, !crc32c).is_err(), "{c:?}");
        }
    }
}

#[test]
fn no_input_panics() {
    let codecs = [
        zstd_codec(),
        DeviceCodec {
            framing: Framing::Gzip,
            crc32c: true,
        },
        DeviceCodec {
            framing: Framing::Zlib,
            crc32c: false,
        },
    ];
    for len in 0..64usize {
        for fill in [0u8, 0x1f, 0x8b, 0x28, 0xff] {
            let mut b = vec![fill; len];
            if len > 1 {
                b[0] = 0x1f;
                b[1] = 0x8b;
            }
            for c in &codecs {
                let _ = c.payload(&b, len, true);
                let _ = c.decode_into(&b, &mut vec![0u8; len], true);
            }
        }
    }
}
