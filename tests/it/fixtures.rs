//! Every fixture written by zarr-python and tensorstore, read whole and by subsets into every
//! available prototype (and through the staged pipeline on the host), compared exactly with
//! the `.npy` written beside it.

use crate::common::{Fixture, fixtures, prototypes};
use std::ops::Range;
use zarrbuf::{
    ArrayReadExt, NDBuffer,
    options::{PipelineMode, ReadOptions},
};

fn expected(f: &Fixture) -> NDBuffer {
    zarrbuf::npy::read(&f.npy_path()).unwrap_or_else(|e| panic!("{}: {e}", f.name))
}

fn assert_same(f: &Fixture, what: &str, got: &NDBuffer, want: &NDBuffer) {
    assert_eq!(got.shape(), want.shape(), "{}: {what}: shape", f.name);
    let (g, w) = (
        got.to_native_bytes().unwrap(),
        want.to_native_bytes().unwrap(),
    );
    assert!(g == w, "{}: {what}: contents differ from the .npy", f.name);
}

/// A few subsets per fixture: the middle, a corner, a single element, an empty one.
fn subsets(shape: &[u64]) -> Vec<Vec<Range<u64>>> {
    let mid: Vec<Range<u64>> = shape.iter().map(|&n| n / 4..n - n / 4).collect();
    let corner: Vec<Range<u64>> = shape.iter().map(|&n| n.saturating_sub(3)..n).collect();
    let one: Vec<Range<u64>> = shape.iter().map(|&n| n / 2..(n / 2 + 1).min(n)).collect();
    let empty: Vec<Range<u64>> = shape.iter().map(|&n| n / 2..n / 2).collect();
    vec![mid, corner, one, empty]
}

#[test]
fn every_fixture_reads_exactly_into_every_prototype() {
    let protos = prototypes();
    let all = fixtures();
    assert!(all.len() >= 40, "the manifest lists {} fixtures", all.len());
    for f in &all {
        let array =
            zarrbuf::open(&f.store_path(), &f.path).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let want = expected(f);
        for (pname, proto) in &protos {
            let got = array
                .read_all(proto)
                .unwrap_or_else(|e| panic!("{} on {pname}: {e}", f.name));
            assert_eq!(got.memory(), proto.memory());
            assert_same(f, &format!("whole array on {pname}"), &got, &want);
        }
        let staged = ReadOptions::default()
            .with_mode(PipelineMode::Staged)
            .with_staging_bytes(1);
        let all_subset: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
        let got = array
            .read_opt(&all_subset, &zarrbuf::BufferPrototype::cpu(), &staged)
            .unwrap_or_else(|e| panic!("{} staged: {e}", f.name));
        assert_same(f, "whole array, staged pipeline on the host", &got, &want);
    }
}

/// The device decoder's batches, run by its host twin (the same batch plan, framing checks
/// and result checks as nvCOMP on a GPU; CPU codecs underneath): every fixture, whole and by
/// subsets, with slots so small that batches hold one chunk, and with room for many.
#[test]
fn every_fixture_reads_exactly_through_the_device_decoder() {
    use zarrbuf::options::Decode;
    let mut decoded_on_device = 0;
    for f in &fixtures() {
        let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let want = expected(f);
        let mut all_subsets = vec![array.shape().iter().map(|&n| 0..n).collect::<Vec<_>>()];
        all_subsets.extend(subsets(array.shape()));
        for staging in [1, 64 << 20] {
            let opts = ReadOptions::default()
                .with_mode(PipelineMode::Staged)
                .with_decode(Decode::Gpu)
                .with_staging_bytes(staging)
                .with_concurrency(2);
            for subset in &all_subsets {
                let ranges: Vec<Range<usize>> = subset
                    .iter()
                    .map(|r| r.start as usize..r.end as usize)
                    .collect();
                let got = array
                    .read_opt(subset, &zarrbuf::BufferPrototype::cpu(), &opts)
                    .unwrap_or_else(|e| panic!("{} {subset:?} device decode: {e}", f.name));
                assert_same(
                    f,
                    &format!("{subset:?} through the device decoder (staging {staging})"),
                    &got,
                    &want.get(&ranges).unwrap(),
                );
            }
        }
        let codecs = array
            .codecs()
            .bytes_to_bytes_codecs()
            .iter()
            .filter_map(|c| zarrs::plugin::ExtensionName::name_v3(c.as_ref()))
            .map(|n| n.into_owned())
            .collect::<Vec<_>>();
        if codecs
            .iter()
            .any(|n| ["zstd", "gzip", "zlib"].iter().any(|c| n.ends_with(c)))
        {
            decoded_on_device += 1;
        }
    }
    assert!(
        decoded_on_device >= 15,
        "only {decoded_on_device} fixtures have device-decodable codecs"
    );
}

#[test]
fn every_fixture_reads_subsets_exactly() {
    let staged = ReadOptions::default()
        .with_mode(PipelineMode::Staged)
        .with_concurrency(2);
    for f in &fixtures() {
        let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let want = expected(f);
        for subset in subsets(array.shape()) {
            let ranges: Vec<Range<usize>> = subset
                .iter()
                .map(|r| r.start as usize..r.end as usize)
                .collect();
            let want_part = want.get(&ranges).unwrap();
            for (pname, proto) in prototypes() {
                let got = array
                    .read(&subset, &proto)
                    .unwrap_or_else(|e| panic!("{} {subset:?} on {pname}: {e}", f.name));
                assert_same(
                    f,
                    &format!("subset {subset:?} on {pname}"),
                    &got,
                    &want_part,
                );
                let got = array.read_opt(&subset, &proto, &staged).unwrap();
                assert_same(
                    f,
                    &format!("subset {subset:?} staged on {pname}"),
                    &got,
                    &want_part,
                );
            }
        }
    }
}

#[test]
fn reads_into_strided_and_fortran_destinations() {
    use zarrbuf::{DataType, Order};
    for f in &fixtures() {
        let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let want = expected(f);
        let shape: Vec<usize> = array.shape().iter().map(|&n| n as usize).collect();
        let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
        let dtype: DataType = want.dtype();
        for (pname, proto) in prototypes() {
            for mode in [
                PipelineMode::Auto,
                PipelineMode::Staged,
                PipelineMode::Direct,
            ] {
                let opts = ReadOptions::default().with_mode(mode);
                // A window of a larger C-order array (zarrs decodes into it in place).
                let big: Vec<usize> = shape.iter().map(|&n| n + 3).collect();
                let parent = NDBuffer::zeros(&big, dtype, Order::C, &proto).unwrap();
                let window: Vec<Range<usize>> = shape.iter().map(|&n| 2..n + 2).collect();
                let mut view = parent.get(&window).unwrap();
                array.read_into_opt(&all, &mut view, &opts).unwrap();
                assert_same(
                    f,
                    &format!("strided window on {pname} ({mode:?})"),
                    &view,
                    &want,
                );
                // Everything outside the window is untouched.
                if !shape.is_empty() {
                    let mut outside: Vec<Range<usize>> = big.iter().map(|&n| 0..n).collect();
                    outside[0] = 0..2;
                    let zeros = parent.get(&outside).unwrap().to_native_bytes().unwrap();
                    assert!(
                        zeros.iter().all(|&b| b == 0),
                        "{}: bytes outside the window changed",
                        f.name
                    );
                }
                // A Fortran-order destination (no C window: the staged path on the host).
                let mut fortran = NDBuffer::empty(&shape, dtype, Order::F, &proto).unwrap();
                array.read_into_opt(&all, &mut fortran, &opts).unwrap();
                assert_same(
                    f,
                    &format!("F-order destination on {pname} ({mode:?})"),
                    &fortran,
                    &want,
                );
            }
        }
    }
}

#[test]
fn progress_reports_every_chunk() {
    use std::sync::{Arc, Mutex};
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_large_3d")
        .unwrap();
    let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
    for mode in [
        PipelineMode::Auto,
        PipelineMode::Staged,
        PipelineMode::Direct,
    ] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let opts = ReadOptions::default()
            .with_mode(mode)
            .with_progress(move |p| s.lock().unwrap().push(p));
        let out = array
            .read_opt(&all, &zarrbuf::BufferPrototype::cpu(), &opts)
            .unwrap();
        let seen = seen.lock().unwrap();
        let last = seen.last().expect("at least one progress report");
        assert_eq!(last.chunks_done, last.chunks_total, "{mode:?}");
        assert_eq!(last.chunks_total, 18, "v3_large_3d has 18 chunks");
        assert_eq!(last.bytes_done, out.nbytes() as u64, "{mode:?}");
    }
}

/// The README quick start's array (256 MiB decoded): whole reads on every prototype through
/// both paths match the CRC-32 that generate.py computed from zarr-python's data, and every
/// element of a subset holds its plane's value.
#[test]
fn demo_array_reads_exactly_into_every_prototype() {
    let demo = crate::common::demo();
    let array = zarrbuf::open(&demo.store, "").unwrap();
    assert_eq!(array.shape(), demo.shape.as_slice());
    for (pname, proto) in prototypes() {
        for mode in [
            PipelineMode::Auto,
            PipelineMode::Staged,
            PipelineMode::Direct,
        ] {
            let opts = ReadOptions::default().with_mode(mode);
            let all: Vec<Range<u64>> = demo.shape.iter().map(|&n| 0..n).collect();
            let got = array.read_opt(&all, &proto, &opts).unwrap();
            let crc = crc32fast::hash(&got.to_native_bytes().unwrap());
            assert_eq!(crc, demo.crc32, "demo whole on {pname} {mode:?}");

            let sub = [37..130, 100..103, 250..261];
            let got = array.read_opt(&sub, &proto, &opts).unwrap();
            let values = got.to_vec::<f32>().unwrap();
            let per_plane = 3 * 11;
            for (i, v) in values.iter().enumerate() {
                let z = 37 + i / per_plane;
                assert_eq!(
                    v.to_bits(),
                    demo.plane_values[z].to_bits(),
                    "demo {sub:?} element {i} (plane {z}) on {pname} {mode:?}"
                );
            }
        }
    }
}

/// Async reads (object_store `file://`, which go through the staged pipeline and, into host
/// memory, scatter on the decoding workers) of every fixture equal the sync read and the
/// `.npy`: whole, by subsets, into a window of a larger array and into an F-order array.
#[test]
fn every_fixture_reads_asynchronously_as_it_reads_synchronously() {
    use zarrbuf::{ArrayReadAsyncExt, BufferPrototype, Order};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cpu = BufferPrototype::cpu();
    for f in &fixtures() {
        let sync = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let url = format!(
            "file://{}",
            std::fs::canonicalize(f.store_path()).unwrap().display()
        );
        let array = rt
            .block_on(zarrbuf::open_async(&url, &f.path))
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let want = expected(f);
        let shape = sync.shape().to_vec();
        let all: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
        // Staging of one byte: the smallest ring (two slots), so workers wait for slots too.
        for opts in [
            ReadOptions::default(),
            ReadOptions::default().with_staging_bytes(1),
        ] {
            let got = rt
                .block_on(array.read_opt_async(&all, &cpu, &opts))
                .unwrap_or_else(|e| panic!("{} async: {e}", f.name));
            assert_same(f, "whole array, async", &got, &want);
        }
        for subset in subsets(&shape) {
            let got = rt
                .block_on(array.read_opt_async(&subset, &cpu, &ReadOptions::default()))
                .unwrap_or_else(|e| panic!("{} async {subset:?}: {e}", f.name));
            let want_part = sync.read(&subset, &cpu).unwrap();
            assert_same(f, &format!("subset {subset:?}, async"), &got, &want_part);
        }
        let dims: Vec<usize> = shape.iter().map(|&n| n as usize).collect();
        let big: Vec<usize> = dims.iter().map(|&n| n + 3).collect();
        let parent = NDBuffer::zeros(&big, want.dtype(), Order::C, &cpu).unwrap();
        let window: Vec<Range<usize>> = dims.iter().map(|&n| 2..n + 2).collect();
        let mut view = parent.get(&window).unwrap();
        rt.block_on(array.read_into_async(&all, &mut view)).unwrap();
        assert_same(f, "strided window, async", &view, &want);
        if !dims.is_empty() {
            let mut outside: Vec<Range<usize>> = big.iter().map(|&n| 0..n).collect();
            outside[0] = 0..2;
            let zeros = parent.get(&outside).unwrap().to_native_bytes().unwrap();
            assert!(
                zeros.iter().all(|&b| b == 0),
                "{}: async read wrote outside its window",
                f.name
            );
        }
        let mut fortran = NDBuffer::empty(&dims, want.dtype(), Order::F, &cpu).unwrap();
        rt.block_on(array.read_into_async(&all, &mut fortran))
            .unwrap();
        assert_same(f, "F-order destination, async", &fortran, &want);
    }
}

/// Units that are one contiguous run of the output (chunks spanning every axis but the
/// first) are decoded straight into it; missing ones are filled there. Both, and the
/// scattered route beside them (a window), give what the sync reader gives.
#[test]
fn whole_row_chunks_decode_straight_into_the_output() {
    use std::sync::Arc;
    use zarrbuf::{ArrayWriteExt, BufferPrototype, Order};
    use zarrs::array::codec::ZstdCodec;
    use zarrs::array::{ArrayBuilder, data_type};
    let store = Arc::new(zarrs::storage::store::MemoryStore::new());
    let mut builder = ArrayBuilder::new(vec![10, 4, 6], vec![3, 4, 6], data_type::int32(), 7i32);
    builder.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
    let array = builder.build(store, "/a").unwrap();
    array.store_metadata().unwrap();
    // Rows 0..6 written (chunks 0 and 1), rows 6..10 never stored: they read as 7.
    let data: Vec<i32> = (0..6 * 4 * 6).collect();
    array
        .write(
            &[0..6, 0..4, 0..6],
            &NDBuffer::from_vec(data.clone(), &[6, 4, 6]).unwrap(),
        )
        .unwrap();
    let mut want = data;
    want.extend(std::iter::repeat_n(7, 4 * 4 * 6));
    let cpu = BufferPrototype::cpu();
    let staged = ReadOptions::default().with_mode(PipelineMode::Staged);
    let got = array.read_opt(&[0..10, 0..4, 0..6], &cpu, &staged).unwrap();
    assert_eq!(got.to_vec::<i32>().unwrap(), want);
    // Part of the rows: the same units, now scattered (not whole).
    let got = array.read_opt(&[1..9, 1..3, 0..6], &cpu, &staged).unwrap();
    let direct = array.read(&[1..9, 1..3, 0..6], &cpu).unwrap();
    assert_eq!(
        got.to_vec::<i32>().unwrap(),
        direct.to_vec::<i32>().unwrap()
    );
    // A window of a larger array: the rows are no longer contiguous in it.
    let parent = NDBuffer::zeros(&[10, 5, 6], zarrbuf::DataType::Int32, Order::C, &cpu).unwrap();
    let mut view = parent.get(&[0..10, 1..5, 0..6]).unwrap();
    array
        .read_into_opt(&[0..10, 0..4, 0..6], &mut view, &staged)
        .unwrap();
    assert_eq!(view.to_vec::<i32>().unwrap(), want);
}
