//! Every fixture read into pinned and CUDA memory and written back from it; multi-device
//! reads; chains zarrs decodes whole.

use crate::Check;
use crate::args::Target;
use std::ops::Range;
use std::path::{Path, PathBuf};
use zarrbuf::multi::Placement;
use zarrbuf::options::Decode;
use zarrbuf::{
    ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer,
    options::{PipelineMode, ReadOptions},
};

/// (name, store, array path, npy) from fixtures/manifest.json.
fn manifest(root: &Path) -> Result<Vec<(String, String, String, PathBuf)>, String> {
    let dir = root.join("fixtures");
    let text =
        std::fs::read_to_string(dir.join("manifest.json")).map_err(|e| format!("manifest: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let list = v.as_array().ok_or("manifest is not a list")?;
    Ok(list
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            (
                s("name"),
                dir.join(s("store")).to_string_lossy().into_owned(),
                s("path"),
                dir.join(s("npy")),
            )
        })
        .collect())
}

/// `Ok` when `got` has `want`'s shape and native bytes; `what` names the comparison.
pub(crate) fn same(what: &str, got: &NDBuffer, want: &NDBuffer) -> Check {
    if got.shape() != want.shape() {
        return Err(format!(
            "{what}: shape {:?} != {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (g, w) = (
        got.to_native_bytes().map_err(|e| e.to_string())?,
        want.to_native_bytes().map_err(|e| e.to_string())?,
    );
    if g != w {
        return Err(format!("{what}: contents differ"));
    }
    Ok(())
}

/// Every fixture of the manifest into pinned and CUDA memory (whole, by subsets, staged,
/// into a strided view, with each decode choice) and written back from CUDA memory, each
/// compared exactly with its `.npy`; returns how many fixtures. On the host twin
/// (`target`), both prototypes are host memory and the device reads are staged.
pub(crate) fn fixtures(root: &Path, target: Target) -> Result<usize, String> {
    let dev = target.device_name();
    let protos = [("pinned", target.pinned()), (dev, target.device())];
    let list = manifest(root)?;
    let scratch = std::env::temp_dir().join("zarrbuf-gpucheck");
    for (name, store, path, npy) in &list {
        let e = |x: zarrbuf::Error| format!("{name}: {x}");
        let array = zarrbuf::open(store, path).map_err(e)?;
        let want = zarrbuf::npy::read(npy).map_err(e)?;
        let shape = array.shape().to_vec();
        let mid: Vec<Range<u64>> = shape.iter().map(|&n| n / 4..n - n / 4).collect();
        let corner: Vec<Range<u64>> = shape.iter().map(|&n| n.saturating_sub(3)..n).collect();
        // Decompression on the GPU (nvCOMP), alone and together with the CPU decoders.
        for decode in [Decode::Gpu, Decode::Both, Decode::Cpu] {
            let all: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
            for (staging, subset) in [(256usize << 20, &all), (1, &mid), (256 << 20, &corner)] {
                let o = target
                    .read_options()
                    .with_decode(decode)
                    .with_staging_bytes(staging);
                let got = array.read_opt(subset, &target.device(), &o).map_err(e)?;
                let r: Vec<Range<usize>> = subset
                    .iter()
                    .map(|r| r.start as usize..r.end as usize)
                    .collect();
                same(
                    &format!("{name} {subset:?} on {dev}, decode {decode:?}"),
                    &got,
                    &want.get(&r).map_err(e)?,
                )?;
            }
        }
        for (pname, proto) in &protos {
            let got = array.read_all(proto).map_err(e)?;
            if got.memory() != proto.memory() {
                return Err(format!(
                    "{name}: read into {pname} landed in {}",
                    got.memory()
                ));
            }
            same(&format!("{name} whole on {pname}"), &got, &want)?;
            for subset in [&mid, &corner] {
                let r: Vec<Range<usize>> = subset
                    .iter()
                    .map(|r| r.start as usize..r.end as usize)
                    .collect();
                let part = want.get(&r).map_err(e)?;
                let got = array.read(subset, proto).map_err(e)?;
                same(&format!("{name} {subset:?} on {pname}"), &got, &part)?;
                let staged = ReadOptions::default()
                    .with_mode(PipelineMode::Staged)
                    .with_staging_bytes(1);
                let got = array.read_opt(subset, proto, &staged).map_err(e)?;
                same(&format!("{name} {subset:?} staged on {pname}"), &got, &part)?;
            }
            // Strided destination: read into a view of a larger device array.
            let big_shape: Vec<usize> = shape.iter().map(|&n| n as usize + 2).collect();
            let big =
                NDBuffer::zeros(&big_shape, want.dtype(), zarrbuf::Order::C, proto).map_err(e)?;
            let window: Vec<Range<usize>> = shape.iter().map(|&n| 1..n as usize + 1).collect();
            let mut view = big.get(&window).map_err(e)?;
            let all: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
            array.read_into(&all, &mut view).map_err(e)?;
            same(&format!("{name} into a strided {pname} view"), &view, &want)?;
        }
        // Write back from device memory, staged, into a fresh copy of the store.
        let dest = scratch.join(format!("{name}.zarr"));
        let _ = std::fs::remove_dir_all(&dest);
        copy_metadata(Path::new(store), &dest).map_err(|x| format!("{name}: {x}"))?;
        let out = zarrbuf::open(dest.to_str().unwrap_or_default(), path).map_err(e)?;
        let on_device = want.to_prototype(&target.device()).map_err(e)?;
        out.write_opt(
            &out.shape().iter().map(|&n| 0..n).collect::<Vec<_>>(),
            &on_device,
            &target.write_options(),
        )
        .map_err(e)?;
        let back = out.read_all(&BufferPrototype::cpu()).map_err(e)?;
        same(&format!("{name} written from {dev}"), &back, &want)?;
    }
    Ok(list.len())
}

/// `read_multi` on every fixture onto two parts on one GPU (the same ordinal twice, and
/// pinned + device memory): split along the first and last axis, and replicated, each part
/// in its own memory and the whole equal to the .npy written by zarr-python/tensorstore.
pub(crate) fn multi_device(root: &Path, target: Target) -> Result<usize, String> {
    let multis = target.multis()?;
    let mut reads = 0;
    for (name, store, path, npy) in &manifest(root)? {
        let e = |x: zarrbuf::Error| format!("{name}: {x}");
        let array = zarrbuf::open(store, path).map_err(e)?;
        let want = zarrbuf::npy::read(npy).map_err(e)?;
        let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
        let last = all.len().saturating_sub(1);
        for (mname, multi) in &multis {
            // A 0-dimensional array has no axis to split: it is only replicated.
            let placements = if all.is_empty() {
                vec![Placement::Replicate]
            } else {
                vec![
                    Placement::Split { axis: 0 },
                    Placement::Split { axis: last },
                    Placement::Replicate,
                ]
            };
            for placement in placements {
                let got = zarrbuf::multi::read(&array, &all, multi, placement).map_err(e)?;
                for (i, part) in got.parts().iter().enumerate() {
                    if part.memory() != multi.parts()[i].memory() {
                        return Err(format!(
                            "{name} {mname} {placement:?}: part {i} landed in {}",
                            part.memory()
                        ));
                    }
                }
                let whole = got.gather(&BufferPrototype::cpu()).map_err(e)?;
                same(&format!("{name} {mname} {placement:?}"), &whole, &want)?;
                if placement == Placement::Replicate {
                    for (i, part) in got.parts().iter().enumerate() {
                        same(&format!("{name} {mname} replica {i}"), part, &want)?;
                    }
                }
                reads += 1;
            }
        }
    }
    Ok(reads)
}

/// A transpose outside the sharding codec: chunks are decoded whole by zarrs, scattered on the device.
pub(crate) fn zarrs_decoded_chains(target: Target) -> Check {
    use std::sync::Arc;
    use zarrs::array::codec::{ShardingCodecBuilder, TransposeCodec, TransposeOrder, ZstdCodec};
    use zarrs::array::{ArrayBuilder, data_type};
    let e = |x: zarrbuf::Error| format!("zarrs-decoded chain: {x}");
    let n = 13 * 10 * 6;
    let values: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 1000.0).collect();
    let data = NDBuffer::from_vec(values, &[13, 10, 6]).map_err(e)?;
    for proto in [target.pinned(), target.device()] {
        let nz = |v: u64| std::num::NonZeroU64::new(v).expect("non-zero");
        let mut sharding =
            ShardingCodecBuilder::new(vec![nz(3), nz(2), nz(4)], &data_type::float32());
        sharding.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
        let order = TransposeOrder::new(&[2, 0, 1]).map_err(|x| x.to_string())?;
        let array = ArrayBuilder::new(
            vec![13u64, 10, 6],
            vec![4u64, 8, 6],
            data_type::float32(),
            f32::NAN,
        )
        .array_to_array_codecs(vec![Arc::new(TransposeCodec::new(order))])
        .array_to_bytes_codec(sharding.build_arc())
        .build(Arc::new(zarrs::storage::store::MemoryStore::new()), "/x")
        .map_err(|x| x.to_string())?;
        let all = [0..13u64, 0..10, 0..6];
        array
            .write(&all, &data.to_prototype(&proto).map_err(e)?)
            .map_err(e)?;
        let back = array.read(&all, &proto).map_err(e)?;
        same("zarrs-decoded chain read back", &back, &data)?;
        let part = array.read(&[3..11, 2..9, 1..5], &proto).map_err(e)?;
        same(
            "zarrs-decoded chain subset",
            &part,
            &data.get(&[3..11, 2..9, 1..5]).map_err(e)?,
        )?;
    }
    Ok(())
}

/// Copies the zarr metadata files (not the chunks) of the hierarchy at `src` to `dst`.
pub(crate) fn copy_metadata(src: &Path, dst: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(src)? {
        let p = entry?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if p.is_dir() {
            copy_metadata(&p, &dst.join(&name))?;
        } else if matches!(
            name.as_str(),
            "zarr.json" | ".zarray" | ".zattrs" | ".zgroup"
        ) {
            std::fs::create_dir_all(dst)?;
            std::fs::copy(&p, dst.join(&name))?;
        }
    }
    Ok(())
}
