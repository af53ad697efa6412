//! Write → read round trips on copies of every fixture (their codecs, data types, orders and
//! fill values), from every available prototype, through the direct and the staged paths.
//! The stores written here are left under `target/tmp/written/` with their expected `.npy`;
//! CI reads them back with zarr-python (scripts/zarr_readback.py).

use crate::common::{Fixture, fixtures, prototypes, walk};
use std::ops::Range;
use std::path::{Path, PathBuf};
use zarrbuf::{
    ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer,
    options::{PipelineMode, WriteOptions},
};

fn written_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("written")
}

/// Copies a fixture's metadata (not its chunks) into a fresh store directory.
fn empty_copy(f: &Fixture, dest: &Path) {
    if dest.exists() {
        std::fs::remove_dir_all(dest).unwrap();
    }
    let src = PathBuf::from(f.store_path());
    for entry in walk(&src) {
        let rel = entry.strip_prefix(&src).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy();
        if matches!(
            name.as_ref(),
            "zarr.json" | ".zarray" | ".zattrs" | ".zgroup"
        ) {
            let to = dest.join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&entry, &to).unwrap();
        }
    }
}

/// The expected array in `proto`'s memory.
fn in_memory(a: &NDBuffer, proto: &BufferPrototype) -> NDBuffer {
    a.to_prototype(proto).unwrap()
}

#[test]
fn whole_array_round_trips_through_every_prototype_and_path() {
    std::fs::create_dir_all(written_dir()).unwrap();
    for f in &fixtures() {
        let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
        for (pname, proto) in prototypes() {
            for mode in [
                PipelineMode::Auto,
                PipelineMode::Staged,
                PipelineMode::Direct,
            ] {
                let dest = written_dir()
                    .join(format!("{}-{pname}-{mode:?}.zarr", f.name).replace(':', "_"));
                empty_copy(f, &dest);
                let array = zarrbuf::open(dest.to_str().unwrap(), &f.path).unwrap();
                let data = in_memory(&want, &proto);
                let opts = WriteOptions::default().with_mode(mode).with_concurrency(2);
                let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
                array
                    .write_opt(&all, &data, &opts)
                    .unwrap_or_else(|e| panic!("{} {pname} {mode:?}: {e}", f.name));
                let back = array.read_all(&BufferPrototype::cpu()).unwrap();
                assert_eq!(
                    back.to_native_bytes().unwrap(),
                    want.to_native_bytes().unwrap(),
                    "{} written from {pname} ({mode:?}) reads back differently",
                    f.name
                );
                zarrbuf::npy::write(&dest.with_extension("npy"), &want).unwrap();
                std::fs::write(dest.with_extension("path"), &f.path).unwrap();
            }
        }
    }
}

#[test]
fn partial_writes_merge_into_existing_chunks() {
    for f in fixtures().iter().filter(|f| !f.name.contains("scalar")) {
        let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
        let dest = written_dir().join(format!("{}-partial.zarr", f.name));
        std::fs::create_dir_all(written_dir()).unwrap();
        empty_copy(f, &dest);
        let array = zarrbuf::open(dest.to_str().unwrap(), &f.path).unwrap();
        array.write_all(&want).unwrap();
        // Overwrite an interior block with the values of the opposite corner.
        let shape = array.shape().to_vec();
        let block: Vec<Range<u64>> = shape
            .iter()
            .map(|&n| n / 3..(n / 3 + n.div_ceil(3)).min(n))
            .collect();
        let source: Vec<Range<usize>> = block
            .iter()
            .zip(&shape)
            .map(|(r, &n)| (n - r.end) as usize..(n - r.start) as usize)
            .collect();
        let patch = want.get(&source).unwrap().copy().unwrap();
        for (pname, proto) in prototypes() {
            for mode in [
                PipelineMode::Auto,
                PipelineMode::Staged,
                PipelineMode::Direct,
            ] {
                let opts = WriteOptions::default().with_mode(mode);
                array
                    .write_opt(&block, &in_memory(&patch, &proto), &opts)
                    .unwrap_or_else(|e| panic!("{} {pname} {mode:?}: {e}", f.name));
                let mut expect = want.copy().unwrap();
                let target: Vec<Range<usize>> = block
                    .iter()
                    .map(|r| r.start as usize..r.end as usize)
                    .collect();
                expect.set(&target, &patch).unwrap();
                let back = array.read_all(&BufferPrototype::cpu()).unwrap();
                assert_eq!(
                    back.to_native_bytes().unwrap(),
                    expect.to_native_bytes().unwrap(),
                    "{}: partial write from {pname} ({mode:?})",
                    f.name
                );
                array.write_all(&want).unwrap();
            }
        }
    }
}
