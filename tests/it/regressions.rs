//! Small defects, each pinned by the test that found it.

use crate::common::root;
use ndarray::{Array2, Array3, s};
use std::path::{Path, PathBuf};
use zarrbuf::{ArrayReadAsyncExt, BufferPrototype, NDBuffer};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("regressions")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A row slice of an owned array is still in standard layout but starts inside (and ends
/// before the end of) its Vec: `from_ndarray` used to fail with ShapeMismatch.
#[test]
fn from_ndarray_takes_row_sliced_standard_layout_arrays() {
    let a = Array2::from_shape_vec((4, 3), (0..12).collect::<Vec<i32>>()).unwrap();
    let rows = a.slice_move(s![1..3, ..]);
    assert!(rows.is_standard_layout());
    let b = NDBuffer::from_ndarray(rows.clone()).unwrap();
    assert_eq!(b.shape(), &[2, 3]);
    assert_eq!(b.to_vec::<i32>().unwrap(), vec![3, 4, 5, 6, 7, 8]);
    assert_eq!(
        b.as_ndarray::<i32>().unwrap().view(),
        rows.view().into_dyn()
    );

    // The first rows (offset 0, a longer Vec), the last rows, one row, no rows.
    let a = Array2::from_shape_vec((4, 3), (0..12).collect::<Vec<u8>>()).unwrap();
    for (r, want) in [
        (0..2, vec![0u8, 1, 2, 3, 4, 5]),
        (2..4, vec![6, 7, 8, 9, 10, 11]),
        (3..4, vec![9, 10, 11]),
        (2..2, vec![]),
    ] {
        let part = a.clone().slice_move(s![r.clone(), ..]);
        let b = NDBuffer::from_ndarray(part).unwrap();
        assert_eq!(b.shape(), &[r.len(), 3]);
        assert_eq!(b.to_vec::<u8>().unwrap(), want, "rows {r:?}");
    }

    // 3-d, sliced on the first axis, in f64; then a non-standard slice (copied).
    let a = Array3::from_shape_fn((3, 2, 2), |(i, j, k)| (i * 4 + j * 2 + k) as f64);
    let b = NDBuffer::from_ndarray(a.clone().slice_move(s![1.., .., ..])).unwrap();
    assert_eq!(
        b.to_vec::<f64>().unwrap(),
        (4..12).map(f64::from).collect::<Vec<_>>()
    );
    let b = NDBuffer::from_ndarray(a.slice_move(s![.., 1.., ..])).unwrap();
    assert_eq!(
        b.to_vec::<f64>().unwrap(),
        vec![2.0, 3.0, 6.0, 7.0, 10.0, 11.0]
    );
}

fn npy_with_header(dict: &str, body: &[u8]) -> Vec<u8> {
    let mut header = dict.as_bytes().to_vec();
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(body);
    out
}

fn read_bytes(dir: &Path, name: &str, bytes: &[u8]) -> zarrbuf::Result<NDBuffer> {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    zarrbuf::npy::read(&path)
}

/// `npy::read` used to panic (`split_at(1)`) on an empty or non-ASCII `descr`; no input may
/// panic it.
#[test]
fn npy_read_rejects_bad_descr_and_shapes_without_panicking() {
    let dir = scratch("npy");
    for (i, descr) in ["", "é", "éf4", "<", "<x9", "V", "|Vx", "\u{1F600}", "<é"]
        .iter()
        .enumerate()
    {
        let file = npy_with_header(
            &format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (1,), }}"),
            &[0; 8],
        );
        let e = read_bytes(&dir, &format!("descr{i}.npy"), &file)
            .expect_err(&format!("descr {descr:?} must be rejected"));
        assert!(
            e.to_string().contains("not a valid .npy file"),
            "{descr:?}: {e}"
        );
    }
    // A shape whose byte count overflows.
    let file = npy_with_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }",
        &[0; 8],
    );
    let e = read_bytes(&dir, "huge.npy", &file).unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
    // Still fine: '=' (native) and a valid file.
    let file = npy_with_header(
        "{'descr': '=u2', 'fortran_order': False, 'shape': (2,), }",
        &[1, 0, 2, 0],
    );
    let a = read_bytes(&dir, "native.npy", &file).unwrap();
    assert_eq!(a.to_vec::<u16>().unwrap(), [1u16, 2].map(u16::from_le));

    // Every truncation and many single-byte corruptions of a real .npy: errors, no panics.
    let good = std::fs::read(root().join("data/v3_large_3d.npy"))
        .or_else(|_| {
            let a = NDBuffer::from_vec((0..24).collect::<Vec<i16>>(), &[2, 3, 4]).unwrap();
            let p = dir.join("made.npy");
            zarrbuf::npy::write(&p, &a).unwrap();
            std::fs::read(&p)
        })
        .unwrap();
    let head = good.len().min(160);
    for cut in 0..head {
        let _ = read_bytes(&dir, "cut.npy", &good[..cut]);
    }
    for at in 0..head {
        for byte in [0u8, b'\'', b'(', b')', b',', b':', b'9', 0xc3, 0xff] {
            let mut bad = good[..head.max(good.len().min(4096))].to_vec();
            bad[at] = byte;
            let _ = read_bytes(&dir, "flip.npy", &bad);
        }
    }
}

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

/// `open_async` of a directory path used to build `file://{path}` by hand, so a `#` or `?`
/// in the path became a URL fragment or query and the store was not found.
#[test]
fn open_async_takes_directories_with_url_characters_in_their_names() {
    let fixture = crate::common::fixtures()
        .into_iter()
        .find(|f| f.name == "v3_int16_be")
        .expect("fixture v3_int16_be");
    let want = zarrbuf::npy::read(&fixture.npy_path()).unwrap();
    let base = scratch("url-chars");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for dir in ["a#b?c", "100% sure", "q?x=1#frag", "#", "?"] {
        let store = base.join(dir).join("data.zarr");
        copy_dir(&PathBuf::from(fixture.store_path()), &store);
        let got = rt
            .block_on(async {
                let array = zarrbuf::open_async(store.to_str().unwrap(), &fixture.path).await?;
                array.read_all_async(&BufferPrototype::cpu()).await
            })
            .unwrap_or_else(|e| panic!("{}: {e}", store.display()));
        assert_eq!(got.shape(), want.shape(), "{dir}");
        assert_eq!(
            got.to_native_bytes().unwrap(),
            want.to_native_bytes().unwrap(),
            "{dir}"
        );
    }
}

/// An output with a zero stride on its first axis (a broadcast view) made the direct read
/// path divide by zero while it looked for a C-order window. Such an output would receive
/// two elements in one place: it is now refused with a clear error, on both paths.
#[test]
fn reads_into_outputs_with_zero_strides_are_refused_without_panicking() {
    use zarrbuf::dtype::ByteOrder;
    use zarrbuf::{
        ArrayReadExt, Buffer, DataType,
        options::{PipelineMode, ReadOptions},
    };
    let fixture = root().join("data/v3_large_3d.zarr");
    let array = zarrbuf::open(fixture.to_str().unwrap(), "").unwrap();
    let row = 20 * 4;
    let mut out = NDBuffer::from_parts(
        Buffer::from_vec(vec![0u8; 32 * row]),
        DataType::Float32,
        &[2, 32, 20],
        &[0, row as isize, 4],
        0,
        ByteOrder::native(),
    )
    .unwrap();
    for mode in [
        PipelineMode::Auto,
        PipelineMode::Staged,
        PipelineMode::Direct,
    ] {
        let err = array
            .read_into_opt(
                &[0..2, 0..32, 0..20],
                &mut out,
                &ReadOptions::default().with_mode(mode),
            )
            .unwrap_err();
        assert!(err.to_string().contains("zero strides"), "{mode:?}: {err}");
    }
}

/// A 0-d zarr v2 array with `"order": "F"` made zarrs 0.23.14 unwrap an `Err` unchecked
/// (`TransposeOrder::new(&[])`, undefined behaviour; an abort with debug assertions) when it
/// built the array (found by the `metadata` fuzz target). The order of one element means
/// nothing: it now opens as C order, reads its fill value and what is written to it, sync
/// and async.
#[test]
fn zero_dim_v2_arrays_in_fortran_order_open_and_read() {
    use zarrbuf::{ArrayReadExt, ArrayWriteExt};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for compressor in [r#"{"id": "zstd", "level": 3}"#, "null"] {
        let dir = scratch("zero-dim-fortran-order");
        std::fs::write(
            dir.join(".zarray"),
            format!(
                r#"{{"shape": [], "chunks": [], "dtype": "<f8", "fill_value": "NaN",
                    "order": "F", "filters": null, "dimension_separator": ".",
                    "compressor": {compressor}, "zarr_format": 2}}"#
            ),
        )
        .unwrap();
        let location = dir.to_str().unwrap();
        let read_sync = || -> Vec<f64> {
            let array = zarrbuf::open(location, "").unwrap();
            assert!(array.shape().is_empty(), "{compressor}");
            let got = array.read_all(&BufferPrototype::cpu()).unwrap();
            assert!(got.shape().is_empty(), "{compressor}");
            got.to_vec::<f64>().unwrap()
        };
        let read_async = || -> Vec<f64> {
            rt.block_on(async {
                let array = zarrbuf::open_async(location, "").await.unwrap();
                let got = array.read_all_async(&BufferPrototype::cpu()).await;
                got.unwrap().to_vec::<f64>().unwrap()
            })
        };
        let [fill] = read_sync()[..] else { panic!() };
        assert!(fill.is_nan(), "{compressor}: {fill}");
        let [fill] = read_async()[..] else { panic!() };
        assert!(fill.is_nan(), "{compressor}: {fill}");
        assert!(zarrbuf::describe(&zarrbuf::open(location, "").unwrap()).is_ok());
        let listed = zarrbuf::list_hierarchy(location, "").unwrap();
        let summary = listed.nodes[0].array().expect("an array");
        assert_eq!(summary.unreadable, None, "{compressor}");

        let array = zarrbuf::open(location, "").unwrap();
        array
            .write_all(&NDBuffer::from_vec(vec![2.5f64], &[]).unwrap())
            .unwrap();
        assert_eq!(read_sync(), [2.5], "{compressor}");
        assert_eq!(read_async(), [2.5], "{compressor}");
    }
}
