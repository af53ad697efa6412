//! `Array`, an opened zarr array, and the `ReadStream` its `read_stream` returns.

use crate::cache::PyChunkCache;
use crate::errors::ZarrbufError;
use crate::errors::{py_err, run};
use crate::ndarray::{NDArray, import_dlpack};
use crate::runtime::runtime;
use pyo3::prelude::*;
use pyo3::types::PyIterator;
use pyo3::types::PyTuple;
use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::Mutex;
use zarrbuf::dtype::ByteOrder;
use zarrbuf::options::{ReadOptions, StreamOptions};
use zarrbuf::stream::BlockingReadStream;
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, ArrayWriteAsyncExt, ArrayWriteExt, AsyncArray,
    BufferPrototype, Device, DynArray, NDBuffer,
};

/// An array opened synchronously (local stores) or asynchronously (object stores, driven by
/// [`runtime`]); the two have the same methods, `x` and `x_async`.
pub(crate) enum Inner {
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

/// An opened zarr array.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
pub(crate) struct Array {
    inner: Inner,
    info: zarrbuf::ArrayInfo,
    label: String,
    /// The decoded-chunk cache every read of this array goes through, if any.
    cache: Option<zarrbuf::cache::ChunkCache>,
    /// Small reads decode zstd chunks only as far as they need
    /// (`ReadOptions::decode_needed_prefix`).
    prefix_decode: bool,
    /// Requests to an object store kept in flight (`ReadOptions::io_concurrency`).
    io_concurrency: Option<usize>,
}

pub(crate) fn prototype(device: &str) -> zarrbuf::Result<BufferPrototype> {
    Ok(match device.parse::<Device>()? {
        Device::Cpu => BufferPrototype::cpu(),
        Device::Cuda(n) => BufferPrototype::cuda(n),
    })
}

pub(crate) fn to_ranges(ranges: &[(u64, u64)]) -> Vec<Range<u64>> {
    ranges.iter().map(|&(a, b)| a..b).collect()
}

/// `a` with the size-1 axes `axes` (sorted) removed.
pub(crate) fn drop_axes(a: NDBuffer, axes: &[usize]) -> zarrbuf::Result<NDBuffer> {
    if axes.is_empty() {
        return Ok(a);
    }
    a.squeeze(axes)
}

/// `a` with size-1 axes inserted so that they sit at `axes` (sorted) of the result.
pub(crate) fn insert_axes(a: NDBuffer, axes: &[usize]) -> zarrbuf::Result<NDBuffer> {
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
    pub(crate) fn from_inner(inner: Inner, label: String) -> zarrbuf::Result<Self> {
        let info = match &inner {
            Inner::Sync(a) => zarrbuf::describe(a.as_ref())?,
            Inner::Async(a) => zarrbuf::describe(a.as_ref())?,
        };
        Ok(Array {
            inner,
            info,
            label,
            cache: None,
            prefix_decode: true,
            io_concurrency: None,
        })
    }

    /// Every read of the array goes through `cache`.
    pub(crate) fn with_cache(mut self, cache: Option<zarrbuf::cache::ChunkCache>) -> Self {
        self.cache = cache;
        self
    }

    /// Small reads of the array decode zstd chunks only as far as they need.
    pub(crate) fn with_prefix_decode(mut self, on: bool) -> Self {
        self.prefix_decode = on;
        self
    }

    /// Reads of the array keep up to `n` requests to an object store in flight.
    pub(crate) fn with_io_concurrency(mut self, n: Option<usize>) -> Self {
        self.io_concurrency = n;
        self
    }

    /// Read options with `cache` (given for one read), else the array's own cache.
    fn read_options(&self, cache: Option<&PyChunkCache>) -> ReadOptions {
        let mut opts = ReadOptions::default().with_decode_needed_prefix(self.prefix_decode);
        opts.io_concurrency = self.io_concurrency;
        match cache
            .map(|c| c.inner.clone())
            .or_else(|| self.cache.clone())
        {
            Some(c) => opts.with_cache(c),
            None => opts,
        }
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
    /// decompress (`auto`, `cpu`, `gpu` with nvCOMP, or `both`); `cache`, for this read,
    /// replaces the array's own cache.
    #[pyo3(signature = (ranges, drop, device = "cpu", decode = "auto", cache = None))]
    fn read(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        device: &str,
        decode: &str,
        cache: Option<PyRef<'_, PyChunkCache>>,
    ) -> PyResult<NDArray> {
        let proto = prototype(device).map_err(py_err)?;
        let decode: zarrbuf::options::Decode = decode.parse().map_err(|e: String| {
            pyo3::exceptions::PyValueError::new_err(format!("decode={decode:?}: {e}"))
        })?;
        let opts = self.read_options(cache.as_deref()).with_decode(decode);
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
    /// shape is the ranges' with the axes `drop` removed; `cache`, for this read, replaces
    /// the array's own cache, `prefix_decode` (a bool) its `prefix_decode` and
    /// `io_concurrency` (requests to an object store in flight) its own.
    #[pyo3(signature = (ranges, drop, out, cache = None, prefix_decode = None, io_concurrency = None))]
    #[allow(clippy::too_many_arguments)]
    fn read_into(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        out: &Bound<'_, PyAny>,
        cache: Option<PyRef<'_, PyChunkCache>>,
        prefix_decode: Option<bool>,
        io_concurrency: Option<usize>,
    ) -> PyResult<()> {
        let target = import_dlpack(out)?;
        let subset = to_ranges(&ranges);
        let mut opts = self
            .read_options(cache.as_deref())
            .with_decode_needed_prefix(prefix_decode.unwrap_or(self.prefix_decode));
        if io_concurrency.is_some() {
            opts.io_concurrency = io_concurrency;
        }
        run(py, || {
            let mut target = insert_axes(target, &drop)?;
            call!(
                &self.inner,
                read_into_opt / read_into_opt_async(&subset, &mut target, &opts)
            )
        })
    }

    /// Whether small reads decode zstd chunks only as far as they need
    /// (`zarrbuf.open(..., prefix_decode=True)`).
    #[getter]
    fn prefix_decode(&self) -> bool {
        self.prefix_decode
    }

    /// Requests to an object store this array's reads keep in flight (`zarrbuf.open(...,
    /// io_concurrency=N)`; the default, `ZARRBUF_IO_CONCURRENCY` or 128, when not given).
    #[getter]
    fn io_concurrency(&self) -> usize {
        zarrbuf::options::io_concurrency(self.io_concurrency)
    }

    /// The array's decoded-chunk cache (`zarrbuf.open(..., cache=...)`), or None.
    #[getter]
    fn cache(&self) -> Option<PyChunkCache> {
        self.cache.clone().map(|inner| PyChunkCache { inner })
    }

    /// Drops this array's chunks from `cache` (default: the array's own cache), for changes
    /// made to the store other than through zarrbuf.
    #[pyo3(signature = (cache = None))]
    fn invalidate_cache(&self, cache: Option<PyRef<'_, PyChunkCache>>) {
        let Some(cache) = cache
            .map(|c| c.inner.clone())
            .or_else(|| self.cache.clone())
        else {
            return;
        };
        let id = match &self.inner {
            Inner::Sync(a) => zarrbuf::cache::ArrayId::of(a.as_ref()),
            Inner::Async(a) => zarrbuf::cache::ArrayId::of(a.as_ref()),
        };
        cache.invalidate_array(&id);
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
        let opts = StreamOptions::default()
            .with_prefetch(prefetch)
            .with_read(self.read_options(None));
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
pub(crate) struct PySubsets {
    pub(crate) iter: Py<PyIterator>,
    pub(crate) drops: Arc<Mutex<VecDeque<Vec<usize>>>>,
    pub(crate) error: Arc<Mutex<Option<PyErr>>>,
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

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The iterator `Array.read_stream` returns: `next()` waits (GIL released) for the next
/// selection's result, in order, while the reads ahead of it go on. A failed selection
/// raises `ZarrbufError` naming it, and `next()` may be called again to go on; `close()`
/// (or dropping it) cancels the reads in flight.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
pub(crate) struct ReadStream {
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
