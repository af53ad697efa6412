//! `zarrbuf._zarrbuf`: the Rust half of the Python package.
//!
//! - `Array`: an opened zarr array (a directory, a `file://` URL, or an object-store URL read
//!   through the async API) with `read` / `read_into` / `write` / `read_stream` on array
//!   ranges, of fixed-size elements or of strings (one class for both); the Python half
//!   (`zarrbuf/__init__.py`) turns numpy-style selections into ranges.
//! - `ReadStream`: the prefetching iterator `read_stream` returns.
//! - `VarLenArray`: strings or bytes read by zarrbuf, for NumPy and Arrow.
//! - `NDArray`: a zarrbuf NDBuffer seen from Python, with `__dlpack__`, `__dlpack_device__`
//!   and `__array_interface__` (host) or `__cuda_array_interface__` (device).
//! - `from_dlpack(obj)`: any DLPack producer as an `NDArray`, without a copy.
//!
//! The GIL is released while zarrbuf works; zarrbuf errors become `ZarrbufError` with
//! zarrbuf's message; a panic inside zarrbuf becomes a `ZarrbufError` too.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;
use zarrbuf::{BufferPrototype, NDBuffer};

// The files below import from each other downwards only (`errors` and `runtime` at the
// bottom, this file at the top); tests/it/import_cycles.rs checks it.
mod allocator;
mod array;
mod array_varlen;
mod arrow;
mod cache;
mod errors;
mod inner;
mod ndarray;
mod numpy_strings;
mod read_stream;
mod runtime;
mod selection;
mod varlen;

use errors::{ZarrbufError, py_err, run};
use runtime::runtime;

use array::Array;
use cache::PyChunkCache;
use inner::Inner;
use ndarray::{NDArray, from_dlpack};
use read_stream::ReadStream;

/// A short label for messages: `store` or `store:path`.
fn label(location: &str, path: &str) -> String {
    match path.trim_matches('/') {
        "" => location.to_string(),
        p => format!("{location}:{p}"),
    }
}

/// How `open` and `list_hierarchy` open an icechunk repository: at most one of a branch, a
/// tag and a snapshot id, and the virtual chunk containers reads may fetch from.
fn open_options(
    branch: Option<&str>,
    tag: Option<&str>,
    snapshot: Option<&str>,
    virtual_access: Option<Vec<String>>,
) -> zarrbuf::Result<zarrbuf::options::OpenOptions> {
    let mut opts = zarrbuf::options::OpenOptions::default();
    if let Some(version) = zarrbuf::icechunk::IcechunkVersion::from_choice(branch, tag, snapshot)? {
        opts = opts.with_version(version);
    }
    for prefix in virtual_access.unwrap_or_default() {
        opts = opts.with_virtual_access(prefix);
    }
    Ok(opts)
}

/// Opens the array at `path` inside the store at `location` (a directory, `file://`,
/// `memory://`, or an object-store URL such as `s3://bucket/data.zarr`; or an icechunk
/// repository, at `branch` (default main), `tag` or `snapshot`). Every read goes through
/// `cache` (a shared `ChunkCache`), or a new cache of `cache_bytes` (not both). With
/// `prefix_decode`, small reads decode zstd and blosc chunks only as far as they need
/// (`ReadOptions::decode_needed_prefix`); reads keep up to `io_concurrency` requests to an
/// object store in flight (`ReadOptions::io_concurrency`).
#[pyfunction]
#[pyo3(signature = (location, path = "", *, branch = None, tag = None, snapshot = None, virtual_access = None, cache = None, cache_bytes = None, prefix_decode = true, io_concurrency = None))]
#[allow(clippy::too_many_arguments)]
fn open(
    py: Python<'_>,
    location: &str,
    path: &str,
    branch: Option<&str>,
    tag: Option<&str>,
    snapshot: Option<&str>,
    virtual_access: Option<Vec<String>>,
    cache: Option<PyRef<'_, PyChunkCache>>,
    cache_bytes: Option<u64>,
    prefix_decode: bool,
    io_concurrency: Option<usize>,
) -> PyResult<Array> {
    if io_concurrency == Some(0) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "io_concurrency must be at least 1 (requests to an object store in flight)",
        ));
    }
    let label = label(location, path);
    let cache = match (cache, cache_bytes) {
        (Some(_), Some(_)) => {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "give cache= (a shared zarrbuf.ChunkCache) or cache_bytes= (a new cache), not both",
            ));
        }
        (Some(c), None) => Some(c.inner.clone()),
        (None, Some(n)) => Some(zarrbuf::cache::ChunkCache::new(n)),
        (None, None) => None,
    };
    let opts = open_options(branch, tag, snapshot, virtual_access).map_err(py_err)?;
    let opened = open_array(py, location, path, &opts, label)?;
    Ok(opened
        .with_cache(cache)
        .with_prefix_decode(prefix_decode)
        .with_io_concurrency(io_concurrency))
}

/// The array `open` opens, without a cache.
fn open_array(
    py: Python<'_>,
    location: &str,
    path: &str,
    opts: &zarrbuf::options::OpenOptions,
    label: String,
) -> PyResult<Array> {
    run(py, || {
        // Local paths and memory open synchronously, object stores through the async API.
        let inner = if !zarrbuf::store::Location::parse(location)?.is_url() {
            Inner::Sync(Arc::new(zarrbuf::open_opt(location, path, opts)?))
        } else {
            Inner::Async(Arc::new(
                runtime()?.block_on(zarrbuf::open_opt_async(location, path, opts))?,
            ))
        };
        Array::new(inner, label)
    })
}

/// Opens the array at `path` inside the store at `root` with the metadata zarr-python holds
/// (`json.dumps(metadata.to_dict())`), as the codec pipeline does. `root` is a directory
/// (or `file://` URL), read and written synchronously, or an object-store URL
/// (`s3://bucket/prefix`, ...) read and written through the async API, configured by
/// `options` (object_store's keys, e.g. `aws_endpoint`) on top of the environment.
/// With `session` (a read-only icechunk session's bytes, `Session.as_bytes()`), the array is
/// read through that session instead, and `root` only names it in messages.
#[pyfunction]
#[pyo3(signature = (root, path, metadata, options = None, session = None))]
fn open_with_metadata(
    py: Python<'_>,
    root: &str,
    path: &str,
    metadata: &str,
    options: Option<Vec<(String, String)>>,
    session: Option<Vec<u8>>,
) -> PyResult<Array> {
    let label = label(root, path);
    run(py, || {
        let local = zarrbuf::store::Location::parse(root)?.is_local();
        let meta: zarrs::array::ArrayMetadata = serde_json::from_str(metadata).map_err(|e| {
            zarrbuf::Error::InvalidArgument(format!("array metadata zarrs cannot read: {e}"))
        })?;
        let meta = zarrbuf::store::zarrs_safe_metadata(meta);
        let node = zarrbuf::store::node_path(path)?;
        let refused = |e: zarrs::array::ArrayCreateError| {
            zarrbuf::Error::Unsupported(format!("zarrs cannot use this array's metadata: {e}"))
        };
        let inner = if session.is_none() && local {
            let store = zarrbuf::store::open_store(root)?;
            let array =
                zarrs::array::Array::new_with_metadata(store, &node, meta).map_err(refused)?;
            Inner::Sync(Arc::new(array))
        } else {
            let store = match &session {
                Some(bytes) => Arc::new(zarrbuf::store::RemoteStore::from_icechunk_session(bytes)?),
                None => {
                    let options = options.unwrap_or_default();
                    let pairs: Vec<(&str, &str)> = options
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    // Remembered as living at `root`: its reads fetch ahead of the decoders.
                    zarrbuf::store::RemoteStore::at_url(root, &pairs)?
                }
            };
            let array =
                zarrs::array::Array::new_with_metadata(store, &node, meta).map_err(refused)?;
            Inner::Async(Arc::new(array))
        };
        Array::new(inner, label)
    })
}

/// `nbytes` zeroed bytes of page-locked (pinned) host memory registered with CUDA device
/// `device`, as a 1-d uint8 array (numpy views it through `__array_interface__`). Needs the
/// CUDA driver and a device: without them, `ZarrbufError` says so.
#[pyfunction]
#[pyo3(signature = (nbytes, device = 0))]
fn empty_pinned(py: Python<'_>, nbytes: usize, device: usize) -> PyResult<NDArray> {
    let nd = run(py, || {
        NDBuffer::empty(
            &[nbytes],
            zarrbuf::DataType::UInt8,
            zarrbuf::Order::C,
            &BufferPrototype::pinned(device),
        )
    })?;
    Ok(NDArray { nd })
}

/// Number of CUDA devices zarrbuf can use (0 without a driver).
#[pyfunction]
fn cuda_device_count() -> PyResult<usize> {
    match zarrbuf::cuda::cuda_device_count() {
        Ok(n) => Ok(n),
        Err(zarrbuf::Error::DeviceUnavailable(_)) => Ok(0),
        Err(e) => Err(py_err(e)),
    }
}

/// Where nvCOMP, the GPU decompressor, was loaded from (it is looked up once per process);
/// raises `ZarrbufError` saying why it cannot be, and how to install it, otherwise.
#[pyfunction]
fn nvcomp_library() -> PyResult<String> {
    zarrbuf::cuda::nvcomp_library().map_err(py_err)
}

/// Where nvCOMP's batched compressors (GPU compression of writes) were loaded from; raises
/// `ZarrbufError` saying why they cannot be used otherwise.
#[pyfunction]
fn nvcomp_compression() -> PyResult<String> {
    zarrbuf::cuda::nvcomp_compression().map_err(py_err)
}

/// Checks a stored array for damage (`zarrbuf check`) at `location`: a directory, zip file,
/// icechunk repository or object-store URL (`s3://`, `http(s)://`, …; repaired only as a
/// directory). Returns a dict with `array`, `clean`, `chunks_checked`,
/// `inner_chunks_checked`, `stored_bytes`, `keys` (`"directory"`, `"listing"`, or
/// `"chunk-grid"` for a store that does not list, where keys outside the grid and unknown
/// files cannot be seen), `findings` (dicts with `key`, `inner`, `problem`, `damage`,
/// `detail`) and `repaired` (sentences, with `repair=True`). An object store's chunks are
/// fetched with up to `io_concurrency` requests in flight (`CheckOptions::io_concurrency`).
#[pyfunction]
#[pyo3(signature = (location, path = "", repair = false, *, io_concurrency = None))]
fn check<'py>(
    py: Python<'py>,
    location: &str,
    path: &str,
    repair: bool,
    io_concurrency: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    if io_concurrency == Some(0) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "io_concurrency must be at least 1 (requests to an object store in flight)",
        ));
    }
    let mut opts = zarrbuf::options::CheckOptions::default().with_repair(repair);
    opts.io_concurrency = io_concurrency;
    let report = run(py, || zarrbuf::check::check_array(location, path, &opts))?;
    let findings = pyo3::types::PyList::empty(py);
    for f in &report.findings {
        let d = PyDict::new(py);
        d.set_item("key", &f.key)?;
        d.set_item("inner", f.inner.clone())?;
        d.set_item("problem", f.problem.name())?;
        d.set_item("damage", f.problem.is_damage())?;
        d.set_item("detail", &f.detail)?;
        findings.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("array", &report.array)?;
    out.set_item("clean", report.is_clean())?;
    out.set_item("chunks_checked", report.chunks_checked)?;
    out.set_item("inner_chunks_checked", report.inner_chunks_checked)?;
    out.set_item("stored_bytes", report.stored_bytes)?;
    out.set_item("keys", report.keys.name())?;
    out.set_item("findings", findings)?;
    out.set_item("repaired", report.repaired.clone())?;
    Ok(out)
}

/// The groups and arrays at and under `path` in the store at `location` (a directory, zip
/// file, `file://` or object-store URL), as the JSON text `zarrbuf info --json` prints;
/// `zarrbuf.list_hierarchy` parses it.
#[pyfunction]
#[pyo3(signature = (location, path = "", *, branch = None, tag = None, snapshot = None))]
fn list_hierarchy(
    py: Python<'_>,
    location: &str,
    path: &str,
    branch: Option<&str>,
    tag: Option<&str>,
    snapshot: Option<&str>,
) -> PyResult<String> {
    let hierarchy = run(py, || {
        let opts = open_options(branch, tag, snapshot, None)?;
        zarrbuf::list_hierarchy_opt(location, path, &opts)
    })?;
    serde_json::to_string(&hierarchy)
        .map_err(|e| ZarrbufError::new_err(format!("cannot write the listing as JSON: {e}")))
}

#[pymodule]
fn _zarrbuf(m: &Bound<'_, PyModule>) -> PyResult<()> {
    allocator::keep_freed_memory();
    allocator::follow_huge_page_choice();
    m.add("ZarrbufError", m.py().get_type::<ZarrbufError>())?;
    m.add_class::<Array>()?;
    m.add_class::<NDArray>()?;
    m.add_class::<ReadStream>()?;
    varlen::register(m)?;
    m.add_class::<PyChunkCache>()?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(list_hierarchy, m)?)?;
    m.add_function(wrap_pyfunction!(open_with_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(nvcomp_library, m)?)?;
    m.add_function(wrap_pyfunction!(nvcomp_compression, m)?)?;
    m.add_function(wrap_pyfunction!(empty_pinned, m)?)?;
    Ok(())
}
