//! `zarrbuf::copy_array` and `zarrbuf::create_like`: every fixture rechunked and recompressed
//! and read back exactly, sharded destinations, subsets, overwriting, and failures. The
//! copies are left under `target/tmp/written/` with their expected `.npy`, where CI reads
//! them back with zarr-python (scripts/zarr_readback.py).

use crate::common::{fixtures, prototypes};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use zarrbuf::{
    ArrayLayout, ArrayReadExt, BufferPrototype, Error, NDBuffer,
    options::{CopyOptions, PipelineMode, ReadOptions, WriteOptions},
};
use zarrs::array::codec::ZstdCodec;
use zarrs::array::{ArrayBuilder, data_type};
use zarrs::filesystem::FilesystemStore;

fn written_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("written")
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = written_dir().join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The error of a call that must fail (zarrs arrays have no `Debug`, so no `unwrap_err`).
fn err<T>(r: zarrbuf::Result<T>) -> Error {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn store_at(
    dir: &std::path::Path,
) -> Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits> {
    zarrbuf::store::open_store(dir.to_str().unwrap()).unwrap()
}

/// Chunks of about a third of each dimension: other chunk boundaries than every fixture's.
fn thirds(shape: &[u64]) -> Vec<u64> {
    shape.iter().map(|&n| n.div_ceil(3).max(1)).collect()
}

const CODECS: [&str; 5] = [
    "zstd:1",
    "gzip:5",
    "blosc:lz4:5:shuffle",
    "none",
    "zstd:3+crc32c",
];

/// Saves the expected data beside a written store for CI's zarr-python read-back.
///
/// Except for raw-bytes data types: zarrs names them `r<bits>` (the zarr v3 spec's name),
/// which zarr-python 3.4 does not read (it writes and reads `raw_bytes`); zarrbuf reads
/// those copies back above.
fn save_expected(dest: &std::path::Path, want: &NDBuffer) {
    let meta = std::fs::read_to_string(dest.join("zarr.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&meta).unwrap();
    if let Some(name) = v["data_type"].as_str()
        && name.starts_with('r')
        && name[1..].chars().all(|c| c.is_ascii_digit())
    {
        std::fs::remove_file(dest.with_extension("npy")).ok();
        return;
    }
    zarrbuf::npy::write(&dest.with_extension("npy"), want).unwrap();
    std::fs::write(dest.with_extension("path"), "").unwrap();
}

#[test]
fn every_fixture_copies_with_new_chunks_and_codecs_and_reads_back_exactly() {
    let mut copied = 0;
    for (k, f) in fixtures().iter().enumerate() {
        let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
        let src = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let codec = CODECS[k % CODECS.len()];
        let dest = fresh_dir(&format!("copy-{}.zarr", f.name));
        let layout = ArrayLayout {
            chunks: Some(thirds(src.shape())),
            codecs: Some(codec.parse().unwrap()),
            ..Default::default()
        };
        let dst =
            zarrbuf::create_like(&src, src.shape(), store_at(&dest), "", &layout, false).unwrap();
        // Small blocks (several per array), and the staged pipeline on every other fixture.
        let mode = if k % 2 == 0 {
            PipelineMode::Auto
        } else {
            PipelineMode::Staged
        };
        let opts = CopyOptions::default()
            .with_memory_bytes(512)
            .with_read(ReadOptions::default().with_mode(mode).with_concurrency(2))
            .with_write(WriteOptions::default().with_mode(mode).with_concurrency(2));
        zarrbuf::copy_array(&src, &dst, &opts)
            .unwrap_or_else(|e| panic!("{} ({codec}, {mode:?}): {e}", f.name));
        let reopened = zarrbuf::open(dest.to_str().unwrap(), "").unwrap();
        let info = zarrbuf::describe(&reopened).unwrap();
        assert_eq!(info.chunks, thirds(src.shape()), "{}", f.name);
        let back = reopened.read_all(&BufferPrototype::cpu()).unwrap();
        assert_eq!(back.shape(), want.shape(), "{}", f.name);
        assert_eq!(
            back.to_native_bytes().unwrap(),
            want.to_native_bytes().unwrap(),
            "{} copied with {codec} ({mode:?}) reads back differently",
            f.name
        );
        save_expected(&dest, &want);
        copied += 1;
    }
    assert!(copied >= 40, "only {copied} fixtures copied");
}

#[test]
fn copies_through_every_prototype() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_shard_end")
        .unwrap();
    let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
    let src = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    for (pname, proto) in prototypes() {
        let dest = fresh_dir(&format!("copy-proto-{}.zarr", pname.replace(':', "_")));
        let layout = ArrayLayout {
            chunks: Some(vec![7, 9]),
            codecs: Some("zstd:1".parse().unwrap()),
            ..Default::default()
        };
        let dst =
            zarrbuf::create_like(&src, src.shape(), store_at(&dest), "", &layout, false).unwrap();
        let opts = CopyOptions::default()
            .with_prototype(proto)
            .with_memory_bytes(2000);
        zarrbuf::copy_array(&src, &dst, &opts).unwrap_or_else(|e| panic!("{pname}: {e}"));
        let back = dst.read_all(&BufferPrototype::cpu()).unwrap();
        assert_eq!(
            back.to_native_bytes().unwrap(),
            want.to_native_bytes().unwrap(),
            "{pname}"
        );
        save_expected(&dest, &want);
    }
}

#[test]
fn sharded_destination_from_unsharded_and_back() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_int8")
        .unwrap();
    let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
    let src = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let dest = fresh_dir("copy-sharded.zarr");
    let layout = ArrayLayout {
        chunks: Some(vec![2, 3]),
        shards: Some(vec![4, 6]),
        codecs: Some("gzip:1".parse().unwrap()),
        ..Default::default()
    };
    let dst = zarrbuf::create_like(&src, src.shape(), store_at(&dest), "", &layout, false).unwrap();
    // One shard per block: the block budget is smaller than a shard.
    zarrbuf::copy_array(&src, &dst, &CopyOptions::default().with_memory_bytes(1)).unwrap();
    let info = zarrbuf::describe(&dst).unwrap();
    assert_eq!(info.chunks, vec![4, 6]);
    assert_eq!(info.inner_chunks, Some(vec![2, 3]));
    let back = dst.read_all(&BufferPrototype::cpu()).unwrap();
    assert_eq!(
        back.to_native_bytes().unwrap(),
        want.to_native_bytes().unwrap()
    );
    save_expected(&dest, &want);

    // And back to plain chunks; the default layout keeps a sharded source's shards.
    let again = fresh_dir("copy-unsharded.zarr");
    let plain = ArrayLayout {
        chunks: Some(vec![5, 5]),
        ..Default::default()
    };
    let dst2 =
        zarrbuf::create_like(&dst, dst.shape(), store_at(&again), "", &plain, false).unwrap();
    zarrbuf::copy_array(&dst, &dst2, &CopyOptions::default()).unwrap();
    assert_eq!(zarrbuf::describe(&dst2).unwrap().inner_chunks, None);
    let back = dst2.read_all(&BufferPrototype::cpu()).unwrap();
    assert_eq!(
        back.to_native_bytes().unwrap(),
        want.to_native_bytes().unwrap()
    );
    save_expected(&again, &want);
    let kept = fresh_dir("copy-keeps-shards.zarr");
    let dst3 = zarrbuf::create_like(
        &dst,
        dst.shape(),
        store_at(&kept),
        "",
        &ArrayLayout::default(),
        false,
    )
    .unwrap();
    assert_eq!(
        zarrbuf::describe(&dst3).unwrap().inner_chunks,
        Some(vec![2, 3])
    );
}

#[test]
fn subset_copy_holds_exactly_the_subset() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_shard_end")
        .unwrap();
    let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
    let src = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let subset: Vec<Range<u64>> = vec![3..20, 5..29];
    let expect = want.get(&[3..20, 5..29]).unwrap().copy().unwrap();
    let dest = fresh_dir("copy-subset.zarr");
    let layout = ArrayLayout {
        chunks: Some(vec![4, 4]),
        ..Default::default()
    };
    let dst = zarrbuf::create_like(&src, &[17, 24], store_at(&dest), "", &layout, false).unwrap();
    zarrbuf::copy_array(
        &src,
        &dst,
        &CopyOptions::default()
            .with_subset(subset.clone())
            .with_memory_bytes(100),
    )
    .unwrap();
    let back = dst.read_all(&BufferPrototype::cpu()).unwrap();
    assert_eq!(
        back.to_native_bytes().unwrap(),
        expect.to_native_bytes().unwrap()
    );
    save_expected(&dest, &expect);
    // A destination of the wrong shape, and a subset outside the source, are errors.
    let wrong = zarrbuf::create_like(
        &src,
        &[17, 23],
        store_at(&fresh_dir("copy-wrong.zarr")),
        "",
        &layout,
        false,
    )
    .unwrap();
    let e =
        zarrbuf::copy_array(&src, &wrong, &CopyOptions::default().with_subset(subset)).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch(_)), "{e}");
    let e = zarrbuf::copy_array(
        &src,
        &dst,
        &CopyOptions::default().with_subset(vec![10..27, 0..24]),
    )
    .unwrap_err();
    assert!(matches!(e, Error::OutOfBounds(_)), "{e}");
}

#[test]
fn fill_value_chunks_stay_missing() {
    // v3_bool: chunk 2 (of 5, chunks of 8) is missing and reads as the fill value.
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_bool")
        .unwrap();
    let src = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let dest = fresh_dir("copy-missing.zarr");
    let dst = zarrbuf::create_like(
        &src,
        src.shape(),
        store_at(&dest),
        "",
        &ArrayLayout::default(),
        false,
    )
    .unwrap();
    zarrbuf::copy_array(&src, &dst, &CopyOptions::default()).unwrap();
    assert!(dest.join("c/1").exists());
    assert!(
        !dest.join("c/2").exists(),
        "the fill-value chunk was stored"
    );
    let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
    let back = dst.read_all(&BufferPrototype::cpu()).unwrap();
    assert_eq!(
        back.to_native_bytes().unwrap(),
        want.to_native_bytes().unwrap()
    );
    save_expected(&dest, &want);
}

#[test]
fn existing_destinations_are_refused_unless_overwrite() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_int8")
        .unwrap();
    let src = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let dest = fresh_dir("copy-overwrite.zarr");
    let small = ArrayLayout {
        chunks: Some(vec![2, 2]),
        ..Default::default()
    };
    let dst = zarrbuf::create_like(&src, src.shape(), store_at(&dest), "", &small, false).unwrap();
    zarrbuf::copy_array(&src, &dst, &CopyOptions::default()).unwrap();
    assert!(dest.join("c/6/5").exists());
    let e = err(zarrbuf::create_like(
        &src,
        src.shape(),
        store_at(&dest),
        "",
        &ArrayLayout::default(),
        false,
    ));
    assert!(e.to_string().contains("--overwrite"), "{e}");
    // Refused means untouched: the old chunks are still there.
    assert!(dest.join("c/6/5").exists());
    let dst = zarrbuf::create_like(
        &src,
        src.shape(),
        store_at(&dest),
        "",
        &ArrayLayout::default(),
        true,
    )
    .unwrap();
    // The old array's chunks are gone (chunk 6,5 does not exist with 4×4 chunks).
    assert!(
        !dest.join("c/6/5").exists(),
        "stale chunks survived --overwrite"
    );
    zarrbuf::copy_array(&src, &dst, &CopyOptions::default()).unwrap();
    let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
    let back = dst.read_all(&BufferPrototype::cpu()).unwrap();
    assert_eq!(
        back.to_native_bytes().unwrap(),
        want.to_native_bytes().unwrap()
    );
}

#[test]
fn bad_layouts_are_clear_errors() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_int8")
        .unwrap();
    let src = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let dest = fresh_dir("copy-bad.zarr");
    let cases: Vec<(ArrayLayout, &str)> = vec![
        (
            ArrayLayout {
                chunks: Some(vec![4]),
                ..Default::default()
            },
            "one size per dimension",
        ),
        (
            ArrayLayout {
                chunks: Some(vec![4, 0]),
                ..Default::default()
            },
            "zero size",
        ),
        (
            ArrayLayout {
                chunks: Some(vec![4, 4]),
                shards: Some(vec![8, 6]),
                ..Default::default()
            },
            "multiple of the chunks",
        ),
        (
            ArrayLayout {
                zarr_format: Some(2),
                ..Default::default()
            },
            "v3",
        ),
    ];
    for (layout, want) in cases {
        let e = err(zarrbuf::create_like(
            &src,
            src.shape(),
            store_at(&dest),
            "",
            &layout,
            false,
        ));
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains(want), "{e} should say {want:?}");
    }
    // Nothing was created by the refused layouts.
    assert!(!dest.join("zarr.json").exists());
    for bad in ["zstd:99", "gzip:x", "lzma", "blosc:foo", "", "none+zstd"] {
        let e = bad.parse::<zarrbuf::CodecSpec>().unwrap_err();
        assert!(e.to_string().contains("--codec"), "{bad}: {e}");
    }
}

#[test]
fn a_failure_mid_copy_keeps_the_blocks_already_written() {
    // A source of four 4×8 chunks along dimension 0, the third one damaged.
    let src_dir = fresh_dir("copy-damaged-src.zarr");
    let store = Arc::new(FilesystemStore::new(&src_dir).unwrap());
    let src = ArrayBuilder::new(vec![16u64, 8], vec![4u64, 8], data_type::float32(), 0.0f32)
        .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))])
        .build(store, "/")
        .unwrap();
    src.store_metadata().unwrap();
    let values: Vec<f32> = (0..128).map(|i| i as f32 + 1.0).collect();
    src.store_array_subset(
        &zarrs::array::ArraySubset::new_with_ranges(&[0..16, 0..8]),
        values.clone(),
    )
    .unwrap();
    std::fs::write(src_dir.join("c/2/0"), b"not zstd at all").unwrap();
    std::fs::remove_dir_all(written_dir().join("copy-damaged-dst.zarr")).ok();
    let dest = fresh_dir("copy-damaged-dst.zarr");
    let layout = ArrayLayout {
        chunks: Some(vec![4, 8]),
        ..Default::default()
    };
    let dst = zarrbuf::create_like(&src, src.shape(), store_at(&dest), "", &layout, false).unwrap();
    // One chunk per block: blocks 0 and 1 are written before block 2 fails.
    let e = zarrbuf::copy_array(&src, &dst, &CopyOptions::default().with_memory_bytes(128))
        .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("source") && text.contains("c/2/0"), "{text}");
    assert!(dest.join("c/0/0").exists() && dest.join("c/1/0").exists());
    assert!(
        !dest.join("c/3/0").exists(),
        "the copy went on after the failure"
    );
    let kept = dst.read(&[0..8, 0..8], &BufferPrototype::cpu()).unwrap();
    assert_eq!(kept.to_vec::<f32>().unwrap(), values[..64].to_vec());
}

/// `ArrayLayout::for_gpu` (`zarrbuf copy --layout gpu`) on a 3-d float32 fixture:
/// sharded, zstd inside, the values unchanged and read back by zarr-python in CI.
#[test]
fn gpu_layout_copies_exactly() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_large_3d")
        .unwrap();
    let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
    let src = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let dest = fresh_dir("copy-gpu-layout.zarr");
    let layout = ArrayLayout::for_gpu(src.shape(), 4);
    let dst = zarrbuf::create_like(&src, src.shape(), store_at(&dest), "", &layout, false).unwrap();
    zarrbuf::copy_array(&src, &dst, &CopyOptions::default()).unwrap();
    let info = zarrbuf::describe(&dst).unwrap();
    assert!(info.inner_chunks.is_some(), "{info:?}");
    assert!(info.codecs.iter().any(|c| c.contains("zstd")), "{info:?}");
    let back = dst.read_all(&BufferPrototype::cpu()).unwrap();
    assert_eq!(
        back.to_native_bytes().unwrap(),
        want.to_native_bytes().unwrap()
    );
    save_expected(&dest, &want);
}
