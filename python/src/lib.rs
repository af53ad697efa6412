//! `zarrbuf._zarrbuf`: the Rust half of the Python package.
//!
//! - `Array`: an opened zarr array (a directory, a `file://` URL, or an object-store URL read
//!   through the async API) with `read` / `read_into` / `write` on array ranges; the Python
//!   half (`zarrbuf/__init__.py`) turns numpy-style selections into ranges.
//! - `NDArray`: a zarrbuf NDBuffer seen from Python, with `__dlpack__`, `__dlpack_device__`
//!   and `__array_interface__` (host) or `__cuda_array_interface__` (device).
//! - `from_dlpack(obj)`: any DLPack producer as an `NDArray`, without a copy.
//!
//! The GIL is released while zarrbuf works; zarrbuf errors become `ZarrbufError` with
//! zarrbuf's message; a panic inside zarrbuf becomes a `ZarrbufError` too.

use pyo3::create_exception;
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyException, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyIterator;
use pyo3::types::{PyDict, PyTuple};
use std::collections::VecDeque;
use std::ffi::{CStr, c_void};
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::{Arc, OnceLock};
use zarrbuf::dlpack::{DLManagedTensor, DLManagedTensorVersioned, DlpackLegacy, DlpackVersioned};
use zarrbuf::dtype::ByteOrder;
use zarrbuf::options::StreamOptions;
use zarrbuf::stream::BlockingReadStream;
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, ArrayWriteAsyncExt, ArrayWriteExt, AsyncArray,
    BufferPrototype, Device, DynArray, Memory, NDBuffer,
};

/// The extension's Rust allocations (zarrs' per-chunk buffers, encoded bytes, small outputs)
/// come from mimalloc, which keeps freed memory for reuse. With glibc's malloc every small
/// read paid for its buffers twice: a freed 4 MiB decode buffer at the top of the heap was
/// trimmed back to the OS, and the next read faulted fresh zeroed pages in (a loop of
/// 64-row reads from 4 MiB chunks spent 60% of its time in the kernel). Python's own
/// allocations are not affected.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

create_exception!(
    _zarrbuf,
    ZarrbufError,
    PyException,
    "An error reported by zarrbuf (the message is zarrbuf's)."
);

/// zarrbuf's error, with the sources its message does not already spell out.
fn py_err(e: zarrbuf::Error) -> PyErr {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = s.source();
    }
    ZarrbufError::new_err(msg)
}

/// Runs zarrbuf work with the GIL released, turning errors and panics into `ZarrbufError`.
fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> zarrbuf::Result<T> + Send) -> PyResult<T> {
    let out = py.detach(|| catch_unwind(AssertUnwindSafe(f)));
    match out {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(py_err(e)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(ZarrbufError::new_err(format!(
                "internal error in zarrbuf (please report): {what}"
            )))
        }
    }
}

/// The runtime that drives object-store reads and writes (built on first use).
fn runtime() -> zarrbuf::Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| zarrbuf::Error::InvalidArgument(format!("cannot start the tokio runtime: {e}")))
}

/// An array opened synchronously (local stores) or asynchronously (object stores, driven by
/// [`runtime`]); the two have the same methods, `x` and `x_async`.
enum Inner {
    Sync(Arc<DynArray>),
    Async(Arc<AsyncArray>),
}

/// Calls method `$m` (sync) or `$m_async` (async, waited for on the runtime) of the array in
/// `$inner` with the same arguments; inside a closure returning `zarrbuf::Result`.
macro_rules! call {
    ($inner:expr, $m:ident / $m_async:ident ($($arg:expr),* $(,)?)) => {
        match $inner {
            Inner::Sync(a) => a.$m($($arg),*),
            Inner::Async(a) => runtime()?.block_on(a.$m_async($($arg),*)),
        }
    };
}

/// A short label for messages: `store` or `store:path`.
fn label(location: &str, path: &str) -> String {
    match path.trim_matches('/') {
        "" => location.to_string(),
        p => format!("{location}:{p}"),
    }
}

/// An opened zarr array.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
struct Array {
    inner: Inner,
    info: zarrbuf::ArrayInfo,
    label: String,
}

fn prototype(device: &str) -> zarrbuf::Result<BufferPrototype> {
    Ok(match device.parse::<Device>()? {
        Device::Cpu => BufferPrototype::cpu(),
        Device::Cuda(n) => BufferPrototype::cuda(n),
    })
}

fn to_ranges(ranges: &[(u64, u64)]) -> Vec<Range<u64>> {
    ranges.iter().map(|&(a, b)| a..b).collect()
}

/// `a` with the size-1 axes `axes` (sorted) removed.
fn drop_axes(a: NDBuffer, axes: &[usize]) -> zarrbuf::Result<NDBuffer> {
    if axes.is_empty() {
        return Ok(a);
    }
    a.squeeze(axes)
}

/// `a` with size-1 axes inserted so that they sit at `axes` (sorted) of the result.
fn insert_axes(a: NDBuffer, axes: &[usize]) -> zarrbuf::Result<NDBuffer> {
    if axes.is_empty() {
        return Ok(a);
    }
    let ndim = a.ndim() + axes.len();
    let (mut shape, mut strides) = (Vec::with_capacity(ndim), Vec::with_capacity(ndim));
    let mut src = a.shape().iter().zip(a.strides());
    for k in 0..ndim {
        if axes.contains(&k) {
            shape.push(1);
            strides.push(-1); // filled in below
        } else {
            let (&n, &s) = src.next().ok_or_else(|| {
                zarrbuf::Error::ShapeMismatch(format!(
                    "cannot insert axes {axes:?} into shape {:?}",
                    a.shape()
                ))
            })?;
            shape.push(n);
            strides.push(s);
        }
    }
    // A size-1 axis may take any stride; give it the one C order would (zarrbuf's readers
    // recognise C-order windows by their strides, and a zero stride is not one).
    for k in (0..ndim).rev() {
        if strides[k] < 0 {
            strides[k] = if k + 1 < ndim {
                strides[k + 1] * shape[k + 1].max(1) as isize
            } else {
                a.dtype().size() as isize
            };
        }
    }
    NDBuffer::from_parts(
        a.buffer().clone(),
        a.dtype(),
        &shape,
        &strides,
        a.offset(),
        a.byte_order(),
    )
}

impl Array {
    fn from_inner(inner: Inner, label: String) -> zarrbuf::Result<Self> {
        let info = match &inner {
            Inner::Sync(a) => zarrbuf::describe(a.as_ref())?,
            Inner::Async(a) => zarrbuf::describe(a.as_ref())?,
        };
        Ok(Array { inner, info, label })
    }
}

#[pymethods]
impl Array {
    /// The shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.info.shape)
    }

    /// The data type as a numpy type string (`"<f4"`, `"|b1"`, `"<M8[s]"`).
    #[getter]
    fn dtype(&self) -> String {
        self.info.data_type.npy_descr()
    }

    /// The chunk shape (the shard shape of sharded arrays).
    #[getter]
    fn chunks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.info.chunks)
    }

    /// Reads `ranges` (one `(start, stop)` per dimension) into new memory on `device`,
    /// removing the size-1 axes `drop` (integer indices); `decode` says where device reads
    /// decompress (`auto`, `cpu`, `gpu` with nvCOMP, or `both`).
    #[pyo3(signature = (ranges, drop, device = "cpu", decode = "auto"))]
    fn read(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        device: &str,
        decode: &str,
    ) -> PyResult<NDArray> {
        let proto = prototype(device).map_err(py_err)?;
        let decode: zarrbuf::options::Decode = decode.parse().map_err(|e: String| {
            pyo3::exceptions::PyValueError::new_err(format!("decode={decode:?}: {e}"))
        })?;
        let opts = zarrbuf::options::ReadOptions::default().with_decode(decode);
        let subset = to_ranges(&ranges);
        let nd = run(py, || {
            let a = call!(
                &self.inner,
                read_opt / read_opt_async(&subset, &proto, &opts)
            )?;
            drop_axes(a, &drop)
        })?;
        Ok(NDArray { nd })
    }

    /// Reads `ranges` into `out` (any writable DLPack producer, e.g. a numpy view), whose
    /// shape is the ranges' with the axes `drop` removed.
    #[pyo3(signature = (ranges, drop, out))]
    fn read_into(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let target = import_dlpack(out)?;
        let subset = to_ranges(&ranges);
        run(py, || {
            let mut target = insert_axes(target, &drop)?;
            call!(
                &self.inner,
                read_into / read_into_async(&subset, &mut target)
            )
        })
    }

    /// Writes `data` (any DLPack producer, shaped as the ranges with the axes `drop`
    /// removed) into `ranges`.
    #[pyo3(signature = (ranges, drop, data))]
    fn write(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let source = import_dlpack(data)?;
        let subset = to_ranges(&ranges);
        run(py, || {
            let source = insert_axes(source, &drop)?;
            call!(&self.inner, write / write_async(&subset, &source))
        })
    }

    /// As `write`, for types without a DLPack code: `data` holds the elements' bytes, with a
    /// trailing contiguous axis of the element size.
    #[pyo3(signature = (ranges, drop, data))]
    fn write_raw(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let bytes = import_dlpack(data)?;
        let dtype = self.info.data_type;
        let n = bytes.ndim();
        if n == 0
            || bytes.dtype().size() != 1
            || bytes.shape()[n - 1] != dtype.size()
            || (dtype.size() > 1 && bytes.strides()[n - 1] != 1)
        {
            return Err(ZarrbufError::new_err(format!(
                "write_raw wants bytes with a last axis of {} (one {dtype}), got shape {:?}",
                dtype.size(),
                bytes.shape()
            )));
        }
        let source = NDBuffer::from_parts(
            bytes.buffer().clone(),
            dtype,
            &bytes.shape()[..n - 1],
            &bytes.strides()[..n - 1],
            bytes.offset(),
            ByteOrder::native(),
        )
        .map_err(py_err)?;
        let subset = to_ranges(&ranges);
        run(py, || {
            let source = insert_axes(source, &drop)?;
            call!(&self.inner, write / write_async(&subset, &source))
        })
    }

    /// A prefetching stream of reads: `subsets` is an iterator of `(ranges, drop)` pairs
    /// (see `read`), pulled lazily; at most `prefetch` are read at once; results come in
    /// order (see `ReadStream`).
    #[pyo3(signature = (subsets, device = "cpu", prefetch = 4))]
    fn read_stream(
        &self,
        py: Python<'_>,
        subsets: &Bound<'_, PyAny>,
        device: &str,
        prefetch: usize,
    ) -> PyResult<ReadStream> {
        let proto = prototype(device).map_err(py_err)?;
        let pulled = PySubsets {
            iter: subsets.try_iter()?.unbind(),
            drops: Arc::default(),
            error: Arc::default(),
        };
        let (drops, error) = (pulled.drops.clone(), pulled.error.clone());
        let opts = StreamOptions::default().with_prefetch(prefetch);
        let stream = run(py, || match &self.inner {
            Inner::Sync(a) => Ok(a.read_stream(pulled, &proto, &opts)),
            Inner::Async(a) => {
                let _enter = runtime()?.enter();
                Ok(a.read_stream(pulled, &proto, &opts)?.blocking())
            }
        })?;
        Ok(ReadStream {
            inner: Mutex::new(Some(stream)),
            drops,
            error,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<zarrbuf.Array {} shape={:?} dtype={} chunks={:?}>",
            self.label, self.info.shape, self.info.data_type, self.info.chunks
        )
    }
}

/// The subsets of a read stream, pulled from a Python iterator of `(ranges, drop)` pairs
/// (taking the GIL for each pull); the axes to drop go to the consumer in order, and an
/// error of the Python iterator ends the subsets and is raised after the items before it.
struct PySubsets {
    iter: Py<PyIterator>,
    drops: Arc<Mutex<VecDeque<Vec<usize>>>>,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl Iterator for PySubsets {
    type Item = Vec<Range<u64>>;

    fn next(&mut self) -> Option<Self::Item> {
        Python::attach(|py| {
            let next = self.iter.bind(py).clone().next()?;
            let pair = next.and_then(|item| item.extract::<(Vec<(u64, u64)>, Vec<usize>)>());
            match pair {
                Ok((ranges, drop)) => {
                    lock(&self.drops).push_back(drop);
                    Some(to_ranges(&ranges))
                }
                Err(e) => {
                    *lock(&self.error) = Some(e);
                    None
                }
            }
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The iterator `Array.read_stream` returns: `next()` waits (GIL released) for the next
/// selection's result, in order, while the reads ahead of it go on. A failed selection
/// raises `ZarrbufError` naming it, and `next()` may be called again to go on; `close()`
/// (or dropping it) cancels the reads in flight.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
struct ReadStream {
    inner: Mutex<Option<BlockingReadStream>>,
    drops: Arc<Mutex<VecDeque<Vec<usize>>>>,
    error: Arc<Mutex<Option<PyErr>>>,
}

#[pymethods]
impl ReadStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<NDArray>> {
        // The lock is taken with the GIL released: a second thread calling `next()` waits
        // for the first without blocking Python.
        let item = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                let mut inner = lock(&self.inner);
                let item = inner.as_mut().and_then(|s| s.next());
                if item.is_none() {
                    *inner = None;
                }
                item
            }))
        });
        let item = item.map_err(|_| {
            ZarrbufError::new_err("internal error in zarrbuf's read stream (please report)")
        })?;
        match item {
            Some(result) => {
                let drop = lock(&self.drops).pop_front().unwrap_or_default();
                let nd = result.and_then(|nd| drop_axes(nd, &drop)).map_err(py_err)?;
                Ok(Some(NDArray { nd }))
            }
            None => match lock(&self.error).take() {
                Some(e) => Err(e),
                None => Ok(None),
            },
        }
    }

    /// Selections being read or read and not yet taken (at most `prefetch`).
    #[getter]
    fn in_flight(&self, py: Python<'_>) -> usize {
        // Never wait for the lock holding the GIL: `next()` may hold it and pull a selection.
        py.detach(|| lock(&self.inner).as_ref().map_or(0, |s| s.in_flight()))
    }

    /// Cancels the reads in flight (waiting, with the GIL released, until they stopped);
    /// the iterator is exhausted afterwards.
    fn close(&self, py: Python<'_>) {
        py.detach(|| drop(lock(&self.inner).take()));
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
/// repository, at `branch` (default main), `tag` or `snapshot`).
#[pyfunction]
#[pyo3(signature = (location, path = "", *, branch = None, tag = None, snapshot = None, virtual_access = None))]
fn open(
    py: Python<'_>,
    location: &str,
    path: &str,
    branch: Option<&str>,
    tag: Option<&str>,
    snapshot: Option<&str>,
    virtual_access: Option<Vec<String>>,
) -> PyResult<Array> {
    let label = label(location, path);
    let local = !location.contains("://")
        || location.starts_with("file://")
        || location.starts_with("memory://");
    run(py, || {
        let opts = open_options(branch, tag, snapshot, virtual_access)?;
        let inner = if local {
            Inner::Sync(Arc::new(zarrbuf::open_opt(location, path, &opts)?))
        } else {
            Inner::Async(Arc::new(
                runtime()?.block_on(zarrbuf::open_opt_async(location, path, &opts))?,
            ))
        };
        Array::from_inner(inner, label)
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
    let local = !root.contains("://") || root.starts_with("file://");
    run(py, || {
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
                Some(bytes) => zarrbuf::store::RemoteStore::from_icechunk_session(bytes)?,
                None => {
                    let options = options.unwrap_or_default();
                    let pairs: Vec<(&str, &str)> = options
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    zarrbuf::store::RemoteStore::new(zarrbuf::store::object_store_for_url(
                        root, &pairs,
                    )?)
                }
            };
            let array = zarrs::array::Array::new_with_metadata(Arc::new(store), &node, meta)
                .map_err(refused)?;
            Inner::Async(Arc::new(array))
        };
        Array::from_inner(inner, label)
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

/// A zarrbuf array in host, pinned or device memory. Hands itself to numpy
/// (`numpy.asarray`, `numpy.from_dlpack`), torch, CuPy and JAX without a copy.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
struct NDArray {
    nd: NDBuffer,
}

/// numpy's type string for arrays handed out through the array interfaces.
fn typestr(nd: &NDBuffer) -> PyResult<String> {
    let descr = nd.dtype().npy_descr();
    let native = nd.byte_order() == ByteOrder::native();
    Ok(match (descr.as_bytes()[0], native) {
        (b'<', true) if cfg!(target_endian = "big") => format!(">{}", &descr[1..]),
        (b'<', false) if cfg!(target_endian = "little") => format!(">{}", &descr[1..]),
        _ => descr,
    })
}

fn interface<'py>(py: Python<'py>, nd: &NDBuffer, addr: usize) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("shape", PyTuple::new(py, nd.shape())?)?;
    d.set_item("typestr", typestr(nd)?)?;
    let read_only = false;
    d.set_item("data", (addr + nd.offset(), read_only))?;
    if nd.is_c_contiguous() {
        d.set_item("strides", py.None())?;
    } else {
        d.set_item("strides", PyTuple::new(py, nd.strides())?)?;
    }
    d.set_item("version", 3)?;
    Ok(d)
}

const VERSIONED: &CStr = c"dltensor_versioned";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_LEGACY: &CStr = c"used_dltensor";

/// Deletes the tensor of a capsule nobody consumed (the consumer renames it when it does).
///
/// # Safety
/// Called by Python with a live capsule made by `NDArray.__dlpack__`.
unsafe extern "C" fn versioned_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: `capsule` is a live capsule; IsValid checks the name before GetPointer.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr());
            // Never unwind into Python: a panic in a destructor is dropped (and leaks).
            let _ = catch_unwind(|| {
                // SAFETY: an unconsumed capsule still owns the tensor we put in it.
                drop(DlpackVersioned::from_raw(
                    p.cast::<DLManagedTensorVersioned>(),
                ))
            });
        }
    }
}

/// As `versioned_capsule_destructor`, for legacy capsules.
///
/// # Safety
/// Called by Python with a live capsule made by `NDArray.__dlpack__`.
unsafe extern "C" fn legacy_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: as in versioned_capsule_destructor.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr());
            let _ = catch_unwind(|| {
                // SAFETY: an unconsumed capsule still owns the tensor we put in it.
                drop(DlpackLegacy::from_raw(p.cast::<DLManagedTensor>()))
            });
        }
    }
}

/// A capsule owning `ptr`, deleted by `destructor` unless a consumer renames it.
///
/// # Safety
/// `ptr` must be an owned managed tensor whose ownership passes to the capsule, and
/// `destructor` must match its ABI and `name`.
unsafe fn capsule<'py>(
    py: Python<'py>,
    ptr: *mut c_void,
    name: &'static CStr,
    destructor: unsafe extern "C" fn(*mut ffi::PyObject),
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the name is 'static; on failure PyCapsule_New returns null with an error set,
    // and the caller still owns ptr (from_owned_ptr_or_err returns that error).
    unsafe {
        let cap = ffi::PyCapsule_New(ptr, name.as_ptr(), Some(destructor));
        Bound::from_owned_ptr_or_err(py, cap)
    }
}

/// Takes the tensor of a DLPack capsule (renaming it `used_…`) and wraps it without a copy.
fn import_capsule(cap: &Bound<'_, PyAny>) -> PyResult<NDBuffer> {
    let raw = cap.as_ptr();
    // SAFETY: `raw` is a live object; PyCapsule_IsValid accepts any object and checks the
    // type and name. The pointer of a valid, unconsumed capsule is an owned managed tensor;
    // renaming it hands its ownership to us (the producer's capsule destructor then skips it).
    unsafe {
        if ffi::PyCapsule_IsValid(raw, VERSIONED.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(raw, VERSIONED.as_ptr());
            let t = DlpackVersioned::from_raw(p.cast()).map_err(py_err)?;
            if ffi::PyCapsule_SetName(raw, USED_VERSIONED.as_ptr()) != 0 {
                let _ = t.into_raw(); // still the capsule's
                return Err(PyErr::fetch(cap.py()));
            }
            return NDBuffer::from_dlpack(t).map_err(py_err);
        }
        if ffi::PyCapsule_IsValid(raw, LEGACY.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(raw, LEGACY.as_ptr());
            let t = DlpackLegacy::from_raw(p.cast()).map_err(py_err)?;
            if ffi::PyCapsule_SetName(raw, USED_LEGACY.as_ptr()) != 0 {
                let _ = t.into_raw();
                return Err(PyErr::fetch(cap.py()));
            }
            return NDBuffer::from_dlpack_legacy(t).map_err(py_err);
        }
    }
    Err(PyTypeError::new_err(
        "__dlpack__ returned something that is not an unconsumed DLPack capsule",
    ))
}

/// Any DLPack producer (numpy, torch, CuPy, JAX, zarrbuf) as an NDBuffer, without a copy.
fn import_dlpack(obj: &Bound<'_, PyAny>) -> PyResult<NDBuffer> {
    if let Ok(a) = obj.cast::<NDArray>() {
        return Ok(a.get().nd.clone());
    }
    if !obj.hasattr("__dlpack__")? {
        return Err(PyTypeError::new_err(format!(
            "{} does not implement __dlpack__; pass a numpy array (or torch/CuPy/JAX array)",
            obj.get_type().name()?
        )));
    }
    let kwargs = PyDict::new(obj.py());
    kwargs.set_item("max_version", (1, 0))?;
    let cap = match obj.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(c) => c,
        // Producers older than the 2023 array API take no max_version.
        Err(e) if e.is_instance_of::<PyTypeError>(obj.py()) => obj.call_method0("__dlpack__")?,
        Err(e) => return Err(e),
    };
    import_capsule(&cap)
}

/// Wraps any DLPack producer's memory as a zarrbuf `NDArray` without copying.
#[pyfunction]
fn from_dlpack(obj: &Bound<'_, PyAny>) -> PyResult<NDArray> {
    Ok(NDArray {
        nd: import_dlpack(obj)?,
    })
}

#[pymethods]
impl NDArray {
    /// The shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.nd.shape())
    }

    /// Byte strides.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.nd.strides())
    }

    /// The numpy type string.
    #[getter]
    fn dtype(&self) -> PyResult<String> {
        typestr(&self.nd)
    }

    /// `"cpu"` for host and pinned memory, `"cuda:N"` for device memory.
    #[getter]
    fn device(&self) -> String {
        self.nd.memory().device().to_string()
    }

    /// `"host"`, `"pinned"` or `"cuda"`.
    #[getter]
    fn memory(&self) -> &'static str {
        match self.nd.memory() {
            Memory::Host => "host",
            Memory::Pinned(_) => "pinned",
            Memory::Cuda(_) => "cuda",
        }
    }

    /// A copy in host memory (this array itself when it is already there), for
    /// `numpy.from_dlpack`; the one explicit device-to-host copy.
    fn to_host(&self, py: Python<'_>) -> PyResult<NDArray> {
        let nd = self.nd.clone();
        let host = run(py, move || nd.to_host())?;
        Ok(NDArray { nd: host })
    }

    /// `(device_type, device_id)`: `(1, 0)` host, `(3, 0)` pinned, `(2, N)` CUDA device N.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let d = self.nd.dlpack_device();
        (d.device_type.0, d.device_id)
    }

    /// A DLPack capsule of this array, without a copy. zarrbuf's work on the memory is
    /// finished before it returns, so any consumer stream may use it at once.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream; // zarrbuf's work is synchronised, whatever stream the consumer uses.
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "zarrbuf exports without copying; copy=True is not supported (copy the result)",
            ));
        }
        if let Some(d) = dl_device
            && d != self.__dlpack_device__()
        {
            return Err(PyBufferError::new_err(format!(
                "this array is on DLPack device {:?}; export to {d:?} would need a copy",
                self.__dlpack_device__()
            )));
        }
        let nd = self.nd.clone();
        if max_version.is_some_and(|(major, _)| major >= 1) {
            let t = run(py, move || nd.to_dlpack())?;
            let p = t.into_raw();
            // SAFETY: `p` is owned and passes to the capsule; the destructor matches.
            unsafe { capsule(py, p.cast(), VERSIONED, versioned_capsule_destructor) }.inspect_err(
                |_| {
                    // SAFETY: the capsule was not made, so `p` is still ours to delete.
                    drop(unsafe { DlpackVersioned::from_raw(p) });
                },
            )
        } else {
            let t = run(py, move || nd.to_dlpack_legacy())
                .map_err(|e| PyBufferError::new_err(e.value(py).to_string()))?;
            let p = t.into_raw();
            // SAFETY: as above, for the legacy ABI.
            unsafe { capsule(py, p.cast(), LEGACY, legacy_capsule_destructor) }.inspect_err(|_| {
                // SAFETY: the capsule was not made, so `p` is still ours to delete.
                drop(unsafe { DlpackLegacy::from_raw(p) });
            })
        }
    }

    /// numpy's array interface (host and pinned memory): `numpy.asarray` views it.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let addr = match (self.nd.memory(), self.nd.buffer().host_ptr()) {
            (Memory::Host | Memory::Pinned(_), Some(p)) => p as usize,
            _ => {
                return Err(PyAttributeError::new_err(
                    "__array_interface__: this array is in device memory; use \
                     __cuda_array_interface__ or DLPack (torch.from_dlpack, cupy.from_dlpack)",
                ));
            }
        };
        let nd = self.nd.clone();
        run(py, move || nd.buffer().sync())?;
        interface(py, &self.nd, addr)
    }

    /// The CUDA array interface (version 3; device memory): CuPy, Numba and torch view it.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let addr = match (self.nd.memory(), self.nd.buffer().device_addr()) {
            (Memory::Cuda(_), Some(a)) => a as usize,
            _ => {
                return Err(PyAttributeError::new_err(
                    "__cuda_array_interface__: this array is in host memory; use \
                     __array_interface__ or DLPack",
                ));
            }
        };
        let nd = self.nd.clone();
        // Synchronised here, so consumers need not wait on a stream ("stream": None).
        run(py, move || nd.buffer().sync())?;
        let d = interface(py, &self.nd, addr)?;
        d.set_item("stream", py.None())?;
        Ok(d)
    }

    fn __len__(&self) -> PyResult<usize> {
        self.nd
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d array"))
    }

    fn __repr__(&self) -> String {
        format!(
            "<zarrbuf.NDArray shape={:?} dtype={} in {}>",
            self.nd.shape(),
            self.nd.dtype(),
            self.nd.memory()
        )
    }
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

/// Checks a stored array for damage (`zarrbuf check`): returns a dict with `array`, `clean`,
/// `chunks_checked`, `inner_chunks_checked`, `stored_bytes`, `findings` (dicts with `key`,
/// `inner`, `problem`, `damage`, `detail`) and `repaired` (sentences, with `repair=True`).
#[pyfunction]
#[pyo3(signature = (location, path = "", repair = false))]
fn check<'py>(
    py: Python<'py>,
    location: &str,
    path: &str,
    repair: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = zarrbuf::options::CheckOptions::default().with_repair(repair);
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
    m.add("ZarrbufError", m.py().get_type::<ZarrbufError>())?;
    m.add_class::<Array>()?;
    m.add_class::<NDArray>()?;
    m.add_class::<ReadStream>()?;
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
