//! Multi-device reads (`read_multi`) on every fixture written by zarr-python and tensorstore:
//! split along each axis into chunk-aligned partitions, and replicated, onto several parts.
//! Host memories stand in for devices here (the partitioning and the parallel pipelines are
//! the same code); with a GPU the parts are also pinned and CUDA memory on device 0.

use crate::common::{fixtures, prototypes};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use zarrbuf::multi::{MultiBuffer, MultiNDBuffer, MultiPrototype, Placement};
use zarrbuf::{ArrayReadExt, BufferPrototype, Device, Error, NDBuffer, options::ReadOptions};

fn bytes_of(a: &NDBuffer) -> Vec<u8> {
    a.to_native_bytes().unwrap()
}

/// `want`'s elements in `subset` of the array (which starts at `origin`).
fn window(want: &NDBuffer, subset: &[Range<u64>], origin: &[Range<u64>]) -> NDBuffer {
    let local: Vec<Range<usize>> = subset
        .iter()
        .zip(origin)
        .map(|(r, o)| (r.start - o.start) as usize..(r.end - o.start) as usize)
        .collect();
    want.get(&local).unwrap()
}

/// The chunk boundaries on `axis` of a regular grid with chunks of `chunk` elements.
fn aligned(at: u64, chunk: u64) -> bool {
    at.is_multiple_of(chunk)
}

fn multis() -> Vec<(String, MultiPrototype)> {
    let mut out = Vec::new();
    for (name, proto) in prototypes() {
        for n in [1usize, 2, 3, 5] {
            out.push((
                format!("{n} x {name}"),
                MultiPrototype::new(vec![proto.clone(); n]).unwrap(),
            ));
        }
    }
    out
}

#[test]
fn split_reads_are_chunk_aligned_and_exact_on_every_fixture() {
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate::common::root().join("manifest.json")).unwrap(),
    )
    .unwrap();
    let chunks_of = |name: &str| -> Vec<u64> {
        let entry = manifest
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap();
        entry["chunks"]
            .as_array()
            .map(|c| c.iter().map(|v| v.as_u64().unwrap()).collect())
            .unwrap_or_default()
    };
    let multis = multis();
    let mut checked = 0;
    for f in fixtures() {
        let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let want = match zarrbuf::npy::read(&f.npy_path()) {
            Ok(w) => w,
            Err(_) => continue, // no .npy: variable-length data, read elsewhere
        };
        if matches!(
            array.read_all(&BufferPrototype::cpu()),
            Err(Error::Unsupported(_))
        ) {
            continue; // variable-length types: tests/it/errors.rs covers the refusal
        }
        let shape = array.shape().to_vec();
        let chunks = chunks_of(&f.name);
        let whole: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
        // The whole array, and a request that starts and ends inside chunks.
        let inner: Vec<Range<u64>> = shape.iter().map(|&n| n / 5..n - n / 7).collect();
        for request in [&whole, &inner] {
            for axis in 0..shape.len() {
                for (mname, multi) in &multis {
                    let got =
                        zarrbuf::multi::read(&array, request, multi, Placement::Split { axis })
                            .unwrap_or_else(|e| panic!("{} {mname} axis {axis}: {e}", f.name));
                    assert_eq!(got.len(), multi.len());
                    assert_eq!(got.whole_subset(), *request, "{}", f.name);
                    let mut at = request[axis].start;
                    for i in 0..got.len() {
                        let sub = got.subset(i).unwrap();
                        assert_eq!(sub[axis].start, at, "{}: parts tile the axis", f.name);
                        at = sub[axis].end;
                        let at_an_end = sub[axis].start == request[axis].start
                            || sub[axis].start == request[axis].end;
                        if !at_an_end && chunks.len() == shape.len() {
                            assert!(
                                aligned(sub[axis].start, chunks[axis]),
                                "{} {mname}: part {i} starts at {} inside a chunk of {}",
                                f.name,
                                sub[axis].start,
                                chunks[axis]
                            );
                        }
                        let part = &got[i];
                        assert_eq!(part.memory(), multi.parts()[i].memory());
                        assert_eq!(
                            bytes_of(part),
                            bytes_of(&window(&want, sub, &whole)),
                            "{} {mname} axis {axis}: part {i} ({sub:?})",
                            f.name
                        );
                    }
                    assert_eq!(at, request[axis].end);
                    let gathered = got.gather(&BufferPrototype::cpu()).unwrap();
                    assert_eq!(
                        bytes_of(&gathered),
                        bytes_of(&window(&want, request, &whole)),
                        "{} {mname}: gathered",
                        f.name
                    );
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 100, "only {checked} fixtures were split");
}

#[test]
fn splits_balance_the_chunks_between_parts() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_int32_blosc_lz4")
        .unwrap();
    let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    // 9 x 10 x 11 in 4^3 chunks: axis 2 has chunk starts 4 and 8.
    let got = zarrbuf::multi::read(
        &array,
        &[0..9, 0..10, 0..11],
        &MultiPrototype::host(2).unwrap(),
        Placement::Split { axis: 2 },
    )
    .unwrap();
    assert_eq!(got.subset(0).unwrap()[2], 0..4);
    assert_eq!(got.subset(1).unwrap()[2], 4..11);
    // More parts than chunks: the extra parts are empty, and the data is still all there.
    let got = zarrbuf::multi::read(
        &array,
        &[0..9, 0..10, 2..7],
        &MultiPrototype::host(4).unwrap(),
        Placement::Split { axis: 2 },
    )
    .unwrap();
    let extents: Vec<u64> = (0..4)
        .map(|i| got.subset(i).unwrap()[2].end - got.subset(i).unwrap()[2].start)
        .collect();
    assert_eq!(extents.iter().sum::<u64>(), 5);
    assert_eq!(extents.iter().filter(|&&e| e > 0).count(), 2, "{extents:?}");
    let whole = array
        .read(&[0..9, 0..10, 2..7], &BufferPrototype::cpu())
        .unwrap();
    assert_eq!(
        bytes_of(&got.gather(&BufferPrototype::cpu()).unwrap()),
        bytes_of(&whole)
    );
}

#[test]
fn replicated_reads_put_the_whole_subset_on_every_part() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_int16_be")
        .unwrap();
    let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
    let request = [3..27u64, 1..19];
    for (mname, multi) in multis() {
        let got = zarrbuf::multi::read(&array, &request, &multi, Placement::Replicate).unwrap();
        assert_eq!(got.len(), multi.len());
        let expect = bytes_of(&window(&want, &request, &[0..30, 0..20]));
        let mut storages: Vec<u64> = got
            .parts()
            .iter()
            .map(|p| p.buffer().storage_id())
            .collect();
        for (i, part) in got.parts().iter().enumerate() {
            assert_eq!(bytes_of(part), expect, "{mname}: replica {i}");
            assert_eq!(got.subset(i).unwrap(), &request[..]);
        }
        storages.dedup();
        assert_eq!(
            storages.len(),
            multi.len(),
            "{mname}: one allocation per part"
        );
    }
}

#[test]
fn progress_of_a_split_read_is_summed_over_the_parts() {
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_int32_blosc_lz4")
        .unwrap();
    let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let opts = ReadOptions::default().with_progress(move |p| sink.lock().unwrap().push(p));
    zarrbuf::multi::read_opt(
        &array,
        &[0..9, 0..10, 0..11],
        &MultiPrototype::host(3).unwrap(),
        Placement::Split { axis: 0 },
        &opts,
    )
    .unwrap();
    let seen = seen.lock().unwrap();
    let last = seen
        .iter()
        .max_by_key(|p| (p.chunks_done, p.bytes_done))
        .unwrap();
    assert_eq!(last.chunks_total, 27, "every chunk counted once: {last:?}");
    assert_eq!(last.chunks_done, 27);
    assert_eq!(last.bytes_done, 9 * 10 * 11 * 4);
}

#[test]
fn multi_device_errors_are_clear() {
    assert!(matches!(
        MultiPrototype::new(Vec::new()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(MultiPrototype::host(0).is_err());
    assert!(BufferPrototype::cuda_devices(&[]).is_err());
    let f = &fixtures()[1];
    let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let err = zarrbuf::multi::read(
        &array,
        &[0..2, 0..2],
        &MultiPrototype::host(2).unwrap(),
        Placement::Split { axis: 2 },
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("axis 2")),
        "{err}"
    );
    let err = zarrbuf::multi::read(
        &array,
        &[0..99, 0..2],
        &MultiPrototype::host(2).unwrap(),
        Placement::Replicate,
    )
    .unwrap_err();
    assert!(
        matches!(err, Error::OutOfBounds(_) | Error::InvalidArgument(_)),
        "{err}"
    );

    let m = MultiBuffer::zeros(4, &MultiPrototype::host(2).unwrap()).unwrap();
    let err = m.on(Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("part(i)"), "{err}");
    let err = m.on(Device::Cuda(0)).unwrap_err();
    assert!(err.to_string().contains("no part lives on"), "{err}");
    let one = MultiBuffer::zeros(4, &MultiPrototype::host(1).unwrap()).unwrap();
    assert_eq!(one.on(Device::Cpu).unwrap().len(), 4);
    assert!(m.part(2).is_none());

    // Parts that do not tile a subset are refused.
    let a = NDBuffer::from_vec(vec![1u8, 2], &[2]).unwrap();
    let b = NDBuffer::from_vec(vec![3u8], &[1]).unwrap();
    assert!(
        MultiNDBuffer::from_parts(
            vec![a.clone(), b.clone()],
            vec![vec![0..2], vec![3..4]],
            Placement::Split { axis: 0 }
        )
        .is_err()
    );
    assert!(
        MultiNDBuffer::from_parts(
            vec![a.clone(), b],
            vec![vec![0..2], vec![0..2]],
            Placement::Replicate
        )
        .is_err()
    );
    assert!(MultiNDBuffer::from_parts(vec![a], vec![], Placement::Replicate).is_err());
}

#[test]
fn multi_buffers_replicate_and_describe_lazily() {
    let src = zarrbuf::Buffer::from_vec((0..100u8).collect());
    for (mname, multi) in multis() {
        let copies = MultiBuffer::replicate(&src, &multi).unwrap();
        for (i, b) in copies.parts().iter().enumerate() {
            assert_eq!(b.to_vec().unwrap(), src.to_vec().unwrap(), "{mname} {i}");
            assert_ne!(b.storage_id(), src.storage_id());
        }
        let lazy = MultiBuffer::lazy(1 << 20, &multi);
        assert!(lazy.parts().iter().all(|b| !b.is_allocated()));
        lazy[0].ensure_allocated().unwrap();
        assert!(lazy[0].is_allocated());
        assert_eq!(
            lazy.parts().iter().filter(|b| b.is_allocated()).count(),
            1,
            "{mname}: one part's allocation is its own"
        );
    }
}
