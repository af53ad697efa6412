#![allow(clippy::single_range_in_vec_init)] // one range per dimension of 1-d arrays
//! Damaged stores and bad requests: each gives a clear error naming what is at fault, on
//! every prototype and on both read paths; nothing panics.

use crate::common::{prototypes, root, walk};
use std::path::{Path, PathBuf};
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, ArrayWriteAsyncExt, ArrayWriteExt, BufferPrototype, DataType,
    Error, NDBuffer, Order,
    options::{PipelineMode, ReadOptions},
};

/// A private copy of a fixture store to damage.
fn copy_store(name: &str, tag: &str) -> PathBuf {
    let src = root().join("data").join(format!("{name}.zarr"));
    let dst = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("damaged")
        .join(format!("{name}-{tag}.zarr"));
    let _ = std::fs::remove_dir_all(&dst);
    copy_dir(&src, &dst);
    dst
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

/// Reads the whole array on every prototype and both paths; returns the error messages.
fn read_errors(store: &Path, path: &str) -> Vec<String> {
    let array = zarrbuf::open(store.to_str().unwrap(), path).unwrap();
    let all: Vec<_> = array.shape().iter().map(|&n| 0..n).collect();
    let mut messages = Vec::new();
    for (pname, proto) in prototypes() {
        for mode in [
            PipelineMode::Auto,
            PipelineMode::Staged,
            PipelineMode::Direct,
        ] {
            let opts = ReadOptions::default().with_mode(mode);
            match array.read_opt(&all, &proto, &opts) {
                Ok(_) => panic!(
                    "{} on {pname} ({mode:?}) read a damaged store without error",
                    store.display()
                ),
                Err(e) => messages.push(e.to_string()),
            }
        }
    }
    messages
}

#[test]
fn flipped_byte_fails_the_checksum_and_names_the_chunk() {
    let store = copy_store("v3_uint32_be_zstd_crc32c", "flip");
    let chunk = store.join("c/1/1");
    let mut bytes = std::fs::read(&chunk).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&chunk, bytes).unwrap();
    for m in read_errors(&store, "") {
        assert!(
            m.contains("[1, 1]") && m.to_lowercase().contains("checksum"),
            "unclear error: {m}"
        );
    }
}

#[test]
fn truncated_chunk_is_an_error_naming_the_chunk() {
    let store = copy_store("v3_float64_be_inf_fill", "trunc");
    let chunk = walk(&store.join("c")).into_iter().next().unwrap();
    let bytes = std::fs::read(&chunk).unwrap();
    std::fs::write(&chunk, &bytes[..bytes.len() / 3]).unwrap();
    let rel = chunk
        .strip_prefix(store.join("c"))
        .unwrap()
        .to_string_lossy()
        .replace('/', ", ");
    for m in read_errors(&store, "") {
        assert!(
            m.contains(&format!("[{rel}]")),
            "error does not name chunk [{rel}]: {m}"
        );
    }
}

#[test]
fn truncated_shard_is_an_error() {
    let store = copy_store("v3_shard_end", "trunc");
    let shard = store.join("c/0/0");
    let bytes = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &bytes[..bytes.len() - 20]).unwrap();
    for m in read_errors(&store, "") {
        assert!(
            m.contains("[0, 0]") || m.contains("shard"),
            "unclear error: {m}"
        );
    }
}

#[test]
fn missing_metadata_says_so() {
    let store = copy_store("v3_int8", "nometa");
    std::fs::remove_file(store.join("zarr.json")).unwrap();
    let err = zarrbuf::open(store.to_str().unwrap(), "")
        .err()
        .expect("open must fail");
    assert!(matches!(err, Error::Zarr { .. }));
    assert!(err.to_string().contains("no array metadata"), "{err}");
    let err = zarrbuf::open("/definitely/not/here", "")
        .err()
        .expect("open must fail");
    assert!(err.to_string().contains("no such directory"), "{err}");
}

#[test]
fn invalid_metadata_is_an_error() {
    let store = copy_store("v3_int8", "badmeta");
    std::fs::write(
        store.join("zarr.json"),
        b"{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": ",
    )
    .unwrap();
    let err = zarrbuf::open(store.to_str().unwrap(), "")
        .err()
        .expect("open must fail");
    assert!(err.to_string().contains("cannot open the array"), "{err}");
    // zarrs' own error stays reachable as the source, for callers that walk the chain.
    let source = std::error::Error::source(&err).expect("the zarrs error is kept as the source");
    assert!(!source.to_string().is_empty());
}

#[test]
fn chunk_errors_keep_the_codec_error_as_their_source() {
    let store = copy_store("v3_uint32_be_zstd_crc32c", "source");
    let chunk = store.join("c/1/1");
    let mut bytes = std::fs::read(&chunk).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&chunk, bytes).unwrap();
    let array = zarrbuf::open(store.to_str().unwrap(), "").unwrap();
    let err = array.read_all(&BufferPrototype::cpu()).unwrap_err();
    assert!(matches!(err, Error::Zarr { .. }), "{err}");
    let source = std::error::Error::source(&err).expect("the codec error is kept as the source");
    assert!(
        source.to_string().to_lowercase().contains("checksum"),
        "source: {source}"
    );
}

#[test]
fn unsupported_codec_is_an_error_naming_it() {
    let store = copy_store("v3_int8", "codec");
    let meta = std::fs::read_to_string(store.join("zarr.json")).unwrap();
    std::fs::write(
        store.join("zarr.json"),
        meta.replace("\"gzip\"", "\"no-such-codec\""),
    )
    .unwrap();
    let err = zarrbuf::open(store.to_str().unwrap(), "")
        .err()
        .expect("open must fail");
    assert!(err.to_string().contains("no-such-codec"), "{err}");
}

#[test]
fn out_of_bounds_and_mismatched_requests_are_errors() {
    let array = zarrbuf::open(root().join("data/v3_large_3d.zarr").to_str().unwrap(), "").unwrap();
    let cpu = BufferPrototype::cpu();
    let err = array.read(&[0..25, 0..1, 0..1], &cpu).unwrap_err();
    assert!(
        matches!(err, Error::OutOfBounds(_)) && err.to_string().contains("dimension 0"),
        "{err}"
    );
    let err = array.read(&[0..2, 0..1], &cpu).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch(_)), "{err}");
    #[allow(clippy::reversed_empty_ranges)]
    let err = array.read(&[3..2, 0..1, 0..1], &cpu).unwrap_err();
    assert!(matches!(err, Error::OutOfBounds(_)), "{err}");
    let mut wrong_type = NDBuffer::zeros(
        &[1, 1, 1],
        zarrbuf::DataType::Float64,
        zarrbuf::Order::C,
        &cpu,
    )
    .unwrap();
    let err = array
        .read_into(&[0..1, 0..1, 0..1], &mut wrong_type)
        .unwrap_err();
    assert!(matches!(err, Error::DataType(_)), "{err}");
    let mut wrong_shape = NDBuffer::zeros(
        &[2, 1, 1],
        zarrbuf::DataType::Float32,
        zarrbuf::Order::C,
        &cpu,
    )
    .unwrap();
    let err = array
        .read_into(&[0..1, 0..1, 0..1], &mut wrong_shape)
        .unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch(_)), "{err}");
}

/// The same bad read or write, made through the sync and the async API, gives the same error
/// (variant and message): both check their target in one place.
#[test]
fn sync_and_async_report_the_same_error_for_the_same_mistake() {
    let store = copy_store("v3_large_3d", "sync-async");
    let location = store.to_str().unwrap();
    let sync = zarrbuf::open(location, "").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let remote = rt.block_on(zarrbuf::open_async(location, "")).unwrap();
    let cpu = BufferPrototype::cpu();
    let nd = |shape: &[usize], dtype| NDBuffer::zeros(shape, dtype, Order::C, &cpu).unwrap();
    let one = [0..1, 0..1, 0..1];
    // (what, subset, target): a wrong data type, a wrong shape, a subset with another number
    // of dimensions, and one outside the array.
    let cases = [
        ("data type", &one[..], nd(&[1, 1, 1], DataType::Float64)),
        ("shape", &one[..], nd(&[2, 1, 1], DataType::Float32)),
        ("dimensions", &one[..2], nd(&[1, 1], DataType::Float32)),
        (
            "bounds",
            &[0..99, 0..1, 0..1][..],
            nd(&[99, 1, 1], DataType::Float32),
        ),
    ];
    let same = |what: &str, a: Error, b: Error| {
        assert_eq!(
            (std::mem::discriminant(&a), a.to_string()),
            (std::mem::discriminant(&b), b.to_string()),
            "{what}: sync {a:?} but async {b:?}"
        );
    };
    for (what, subset, target) in cases {
        let mut out = target.clone();
        let read = sync.read_into(subset, &mut out).unwrap_err();
        let read_async = rt
            .block_on(remote.read_into_async(subset, &mut out))
            .unwrap_err();
        same(&format!("read_into, {what}"), read, read_async);
        let write = sync.write(subset, &target).unwrap_err();
        let write_async = rt
            .block_on(remote.write_async(subset, &target))
            .unwrap_err();
        same(&format!("write, {what}"), write, write_async);
    }
    let err = sync.read_into(&one, &mut nd(&[1, 1, 1], DataType::Float64));
    assert!(matches!(err, Err(Error::DataType(_))), "{err:?}");
}

#[test]
fn variable_length_types_are_unsupported() {
    use std::sync::Arc;
    use zarrs::array::{ArrayBuilder, data_type};
    let array = ArrayBuilder::new(vec![4], vec![2], data_type::string(), "")
        .build(Arc::new(zarrs::storage::store::MemoryStore::new()), "/s")
        .unwrap();
    for (pname, proto) in prototypes() {
        let err = array.read(&[0..4], &proto).unwrap_err();
        assert!(
            matches!(err, Error::Unsupported(_)) && err.to_string().contains("variable-length"),
            "{pname}: {err}"
        );
    }
    let data = NDBuffer::from_vec(vec![0u8; 4], &[4]).unwrap();
    assert!(matches!(
        array.write(&[0..4], &data).unwrap_err(),
        Error::Unsupported(_)
    ));
}

#[test]
fn failed_write_keeps_chunks_written_before_it() {
    use std::sync::Arc;
    use zarrs::array::{ArrayBuilder, data_type};
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("failed-write.zarr");
    let _ = std::fs::remove_dir_all(&dir);
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(&dir).unwrap());
    let array = ArrayBuilder::new(vec![8], vec![2], data_type::int32(), 0i32)
        .build(store, "/")
        .unwrap();
    array.store_metadata().unwrap();
    array
        .write_all(&NDBuffer::from_vec((1..=8).collect::<Vec<i32>>(), &[8]).unwrap())
        .unwrap();
    // Make the last chunk unwritable: a directory where its file must go.
    let last = dir.join("c/3");
    std::fs::remove_file(&last).unwrap();
    std::fs::create_dir_all(last.join("blocker")).unwrap();
    let opts = zarrbuf::options::WriteOptions::default()
        .with_mode(PipelineMode::Staged)
        .with_concurrency(1);
    let err = array
        .write_opt(
            &[0..8],
            &NDBuffer::from_vec((11..=18).collect::<Vec<i32>>(), &[8]).unwrap(),
            &opts,
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("[3]"),
        "the error should name chunk [3]: {err}"
    );
    let back = array.read(&[0..6], &BufferPrototype::cpu()).unwrap();
    assert_eq!(back.to_vec::<i32>().unwrap(), vec![11, 12, 13, 14, 15, 16]);
}

/// A lazily described output is allocated by the read that fills it (sync direct path on
/// host memory, staged path on device memory); writing a lazy array nothing has written is
/// refused before any chunk is stored.
#[test]
fn lazy_outputs_are_allocated_by_reads_and_refused_by_writes() {
    use std::sync::Arc;
    use zarrbuf::Order;
    use zarrs::array::{ArrayBuilder, data_type};
    let store = Arc::new(zarrs::storage::store::MemoryStore::new());
    let array = ArrayBuilder::new(vec![6, 4], vec![4, 3], data_type::int32(), -1i32)
        .build(store, "/lazy")
        .unwrap();
    let data: Vec<i32> = (0..24).collect();
    array
        .write(
            &[0..6, 0..4],
            &NDBuffer::from_vec(data.clone(), &[6, 4]).unwrap(),
        )
        .unwrap();
    for (pname, proto) in prototypes() {
        let mut out = NDBuffer::lazy(&[6, 4], zarrbuf::DataType::Int32, Order::C, &proto).unwrap();
        assert!(!out.is_allocated());
        array.read_into(&[0..6, 0..4], &mut out).unwrap();
        assert!(out.is_allocated(), "{pname}");
        assert_eq!(out.to_vec::<i32>().unwrap(), data, "{pname}");

        let unwritten =
            NDBuffer::lazy(&[6, 4], zarrbuf::DataType::Int32, Order::C, &proto).unwrap();
        let err = array.write(&[0..6, 0..4], &unwritten).unwrap_err();
        assert!(matches!(err, Error::NotAllocated(_)), "{pname}: {err}");
        assert!(err.to_string().contains("ensure_allocated"), "{err}");
        assert!(
            !unwritten.is_allocated(),
            "{pname}: a refused write allocated"
        );
    }
    let back = array.read(&[0..6, 0..4], &BufferPrototype::cpu()).unwrap();
    assert_eq!(
        back.to_vec::<i32>().unwrap(),
        data,
        "the refused writes changed the array"
    );
}
