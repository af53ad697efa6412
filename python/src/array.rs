//! `Array`, an opened zarr array of fixed-size elements (reads give `NDArray`s) or of
//! variable-length strings or bytes (reads give `VarLenArray`s): one Python class for both,
//! as `zarrbuf.Array` is one, whose methods dispatch on [`Elements`].

use crate::array_varlen;
use crate::cache::PyChunkCache;
use crate::errors::ZarrbufError;
use crate::errors::{py_err, run};
use crate::inner::{Inner, prototype};
use crate::ndarray::{NDArray, import_dlpack};
use crate::read_stream::{PySubsets, ReadStream, Stream, blocking_stream};
use crate::runtime::runtime;
use crate::selection::{drop_axes, insert_axes, to_ranges};
use crate::varlen::{VarLenArray, kind_name};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use zarrbuf::dtype::ByteOrder;
use zarrbuf::options::{ReadOptions, StreamOptions};
use zarrbuf::{
    ArrayInfo, ArrayReadAsyncExt, ArrayReadExt, ArrayWriteAsyncExt, ArrayWriteExt, NDBuffer,
    VarLenInfo, VarLenKind,
};

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

/// What an array holds, and what differs with it.
pub(crate) enum Elements {
    /// Fixed-size elements, read through zarrbuf's pipeline with its options.
    Fixed(Fixed),
    /// Strings or byte strings: read whole chunks, uncached (their decoded sizes are not
    /// known before they are read).
    VarLen { info: VarLenInfo, kind: VarLenKind },
}

/// A fixed-size array's description and read options.
pub(crate) struct Fixed {
    info: ArrayInfo,
    /// The decoded-chunk cache every read of this array goes through, if any.
    cache: Option<zarrbuf::cache::ChunkCache>,
    /// Small reads decode zstd chunks only as far as they need
    /// (`ReadOptions::decode_needed_prefix`).
    prefix_decode: bool,
}

impl Fixed {
    /// `base` with this array's prefix decoding and `cache` (given for one read), else the
    /// array's own cache.
    fn read_options(&self, base: ReadOptions, cache: Option<&PyChunkCache>) -> ReadOptions {
        let opts = base.with_decode_needed_prefix(self.prefix_decode);
        match cache
            .map(|c| c.inner.clone())
            .or_else(|| self.cache.clone())
        {
            Some(c) => opts.with_cache(c),
            None => opts,
        }
    }
}

/// An opened zarr array.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
pub(crate) struct Array {
    inner: Inner,
    elements: Elements,
    label: String,
    /// Requests to an object store kept in flight by every read, of either kind
    /// (`ReadOptions::io_concurrency`).
    io_concurrency: Option<usize>,
}

impl Array {
    /// `inner` described as an array of variable-length or of fixed-size elements.
    pub(crate) fn new(inner: Inner, label: String) -> zarrbuf::Result<Self> {
        let elements = match array_varlen::describe(&inner)? {
            Some(info) => {
                let kind = info.data_type;
                Elements::VarLen { info, kind }
            }
            None => Elements::Fixed(Fixed {
                info: match &inner {
                    Inner::Sync(a) => zarrbuf::describe(a.as_ref())?,
                    Inner::Async(a) => zarrbuf::describe(a.as_ref())?,
                },
                cache: None,
                prefix_decode: true,
            }),
        };
        Ok(Array {
            inner,
            elements,
            label,
            io_concurrency: None,
        })
    }

    /// The options every read of this array starts from: its `io_concurrency`.
    fn base_options(&self) -> ReadOptions {
        ReadOptions {
            io_concurrency: self.io_concurrency,
            ..ReadOptions::default()
        }
    }

    /// Sets the read options of a fixed-size array; variable-length arrays decode whole
    /// chunks without a cache, and keep none of them.
    fn with_fixed(mut self, f: impl FnOnce(&mut Fixed)) -> Self {
        if let Elements::Fixed(fixed) = &mut self.elements {
            f(fixed);
        }
        self
    }

    /// Every read of a fixed-size array goes through `cache`.
    pub(crate) fn with_cache(self, cache: Option<zarrbuf::cache::ChunkCache>) -> Self {
        self.with_fixed(|f| f.cache = cache)
    }

    /// Small reads of a fixed-size array decode zstd chunks only as far as they need.
    pub(crate) fn with_prefix_decode(self, on: bool) -> Self {
        self.with_fixed(|f| f.prefix_decode = on)
    }

    /// Reads keep up to `n` requests to an object store in flight.
    pub(crate) fn with_io_concurrency(mut self, n: Option<usize>) -> Self {
        self.io_concurrency = n;
        self
    }

    fn dims(&self) -> &[u64] {
        match &self.elements {
            Elements::Fixed(f) => &f.info.shape,
            Elements::VarLen { info, .. } => &info.shape,
        }
    }

    fn chunk_shape(&self) -> &[u64] {
        match &self.elements {
            Elements::Fixed(f) => &f.info.chunks,
            Elements::VarLen { info, .. } => &info.chunks,
        }
    }

    /// The fixed-size description, or an error naming `what` for strings.
    fn fixed(&self, what: &str) -> PyResult<&Fixed> {
        match &self.elements {
            Elements::Fixed(f) => Ok(f),
            Elements::VarLen { kind, .. } => Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "{}: {what} takes fixed-size elements; this array holds {} elements",
                self.label,
                kind_name(*kind)
            ))),
        }
    }
}

#[pymethods]
impl Array {
    /// The shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.dims())
    }

    /// The data type as a numpy type string (`"<f4"`, `"|b1"`, `"<M8[s]"`); NumPy's type
    /// code of what reads give for strings, `"T"` (`StringDType`), and byte strings, `"O"`
    /// (objects: `bytes`).
    #[getter]
    fn dtype(&self) -> String {
        match &self.elements {
            Elements::Fixed(f) => f.info.data_type.npy_descr(),
            Elements::VarLen { kind, .. } => match kind {
                VarLenKind::Utf8 => "T".into(),
                VarLenKind::Bytes => "O".into(),
            },
        }
    }

    /// `"utf8"` or `"bytes"` for strings and byte strings, None for fixed-size elements (the
    /// Python half converts what it writes by it).
    #[getter]
    fn kind(&self) -> Option<&'static str> {
        match &self.elements {
            Elements::Fixed(_) => None,
            Elements::VarLen { kind, .. } => Some(kind_name(*kind)),
        }
    }

    /// The zarr data type (`float32`, `string`, `variable_length_bytes`, ...).
    #[getter]
    fn data_type(&self) -> String {
        match &self.elements {
            Elements::Fixed(f) => f.info.data_type.to_string(),
            Elements::VarLen { kind, .. } => match kind {
                VarLenKind::Utf8 => "string".into(),
                VarLenKind::Bytes => "variable_length_bytes".into(),
            },
        }
    }

    /// Whether `write` works here: everywhere for fixed-size elements; strings to local
    /// stores, not yet to object stores.
    #[getter]
    fn writable(&self) -> bool {
        match &self.elements {
            Elements::Fixed(_) => true,
            Elements::VarLen { .. } => matches!(self.inner, Inner::Sync(_)),
        }
    }

    /// The chunk shape (the shard shape of sharded arrays).
    #[getter]
    fn chunks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.chunk_shape())
    }

    /// Reads `ranges` (one `(start, stop)` per dimension) into new memory on `device`,
    /// removing the size-1 axes `drop` (integer indices): an `NDArray`, or a `VarLenArray`
    /// for strings. `decode` says where device reads decompress (`auto`, `cpu`, `gpu` with
    /// nvCOMP, or `both`; strings always decode on the CPU); `cache`, for this read,
    /// replaces the array's own cache (strings are read uncached).
    #[pyo3(signature = (ranges, drop, device = "cpu", decode = "auto", cache = None))]
    fn read(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        device: &str,
        decode: &str,
        cache: Option<PyRef<'_, PyChunkCache>>,
    ) -> PyResult<Py<PyAny>> {
        let f = match &self.elements {
            Elements::Fixed(f) => f,
            Elements::VarLen { .. } => {
                if !matches!(decode, "auto" | "cpu") {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "decode={decode:?}: strings decode on the CPU (\"auto\" or \"cpu\")"
                    )));
                }
                let opts = self.base_options();
                let v = array_varlen::read(py, &self.inner, &ranges, &drop, device, &opts)?;
                return VarLenArray { v }.into_py_any(py);
            }
        };
        let proto = prototype(device).map_err(py_err)?;
        let decode: zarrbuf::options::Decode = decode.parse().map_err(|e: String| {
            pyo3::exceptions::PyValueError::new_err(format!("decode={decode:?}: {e}"))
        })?;
        let opts = f
            .read_options(self.base_options(), cache.as_deref())
            .with_decode(decode);
        let subset = to_ranges(&ranges);
        let nd = run(py, || {
            let a = call!(
                &self.inner,
                read_opt / read_opt_async(&subset, &proto, &opts)
            )?;
            drop_axes(a, &drop)
        })?;
        NDArray { nd }.into_py_any(py)
    }

    /// Reads `ranges` into `out`, whose shape is the ranges' with the axes `drop` removed:
    /// any writable DLPack producer (e.g. a numpy view) for fixed-size elements, a NumPy
    /// `StringDType` array (strings) or object array (byte strings) of any strides for
    /// strings. `cache`, for this read, replaces the array's own cache, `prefix_decode` (a
    /// bool) its `prefix_decode` and `io_concurrency` (requests to an object store in
    /// flight) its own; strings take `io_concurrency` and the others for symmetry (the
    /// codec pipeline passes them to both), and are read uncached, decoding whole chunks.
    #[pyo3(signature = (ranges, drop, out, cache = None, prefix_decode = None, io_concurrency = None))]
    #[allow(clippy::too_many_arguments)]
    fn read_into(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        out: &Bound<'_, PyAny>,
        cache: Option<&Bound<'_, PyAny>>,
        prefix_decode: Option<bool>,
        io_concurrency: Option<usize>,
    ) -> PyResult<()> {
        let mut base = self.base_options();
        if io_concurrency.is_some() {
            base.io_concurrency = io_concurrency;
        }
        let f = match &self.elements {
            Elements::Fixed(f) => f,
            Elements::VarLen { kind, .. } => {
                let to = (*kind, out);
                return array_varlen::read_into(py, &self.inner, &ranges, &drop, to, &base);
            }
        };
        let cache = match cache.filter(|c| !c.is_none()) {
            Some(c) => Some(
                c.cast::<PyChunkCache>()
                    .map_err(|e| {
                        pyo3::exceptions::PyTypeError::new_err(format!("argument 'cache': {e}"))
                    })?
                    .borrow(),
            ),
            None => None,
        };
        let target = import_dlpack(out)?;
        let subset = to_ranges(&ranges);
        let opts = f
            .read_options(base, cache.as_deref())
            .with_decode_needed_prefix(prefix_decode.unwrap_or(f.prefix_decode));
        run(py, || {
            let mut target = insert_axes(target, &drop)?;
            call!(
                &self.inner,
                read_into_opt / read_into_opt_async(&subset, &mut target, &opts)
            )
        })
    }

    /// Whether small reads decode zstd chunks only as far as they need
    /// (`zarrbuf.open(..., prefix_decode=True)`); False for strings, which decode whole
    /// chunks.
    #[getter]
    fn prefix_decode(&self) -> bool {
        matches!(&self.elements, Elements::Fixed(f) if f.prefix_decode)
    }

    /// Requests to an object store this array's reads keep in flight (`zarrbuf.open(...,
    /// io_concurrency=N)`; the default, `ZARRBUF_IO_CONCURRENCY` or 128, when not given).
    #[getter]
    fn io_concurrency(&self) -> usize {
        zarrbuf::options::io_concurrency(self.io_concurrency)
    }

    /// The array's decoded-chunk cache (`zarrbuf.open(..., cache=...)`), or None (always
    /// for strings, which are read uncached).
    #[getter]
    fn cache(&self) -> Option<PyChunkCache> {
        match &self.elements {
            Elements::Fixed(f) => f.cache.clone().map(|inner| PyChunkCache { inner }),
            Elements::VarLen { .. } => None,
        }
    }

    /// Drops this array's chunks from `cache` (default: the array's own cache), for changes
    /// made to the store other than through zarrbuf. Strings are never cached: nothing to
    /// drop (the same call works for both, as zarr-python's pipeline makes it).
    #[pyo3(signature = (cache = None))]
    fn invalidate_cache(&self, cache: Option<PyRef<'_, PyChunkCache>>) {
        let Elements::Fixed(f) = &self.elements else {
            return;
        };
        let Some(cache) = cache.map(|c| c.inner.clone()).or_else(|| f.cache.clone()) else {
            return;
        };
        let id = match &self.inner {
            Inner::Sync(a) => zarrbuf::cache::ArrayId::of(a.as_ref()),
            Inner::Async(a) => zarrbuf::cache::ArrayId::of(a.as_ref()),
        };
        cache.invalidate_array(&id);
    }

    /// Writes `data`, shaped as the ranges with the axes `drop` removed, into `ranges`: any
    /// DLPack producer for fixed-size elements, a `VarLenArray` for strings.
    #[pyo3(signature = (ranges, drop, data))]
    fn write(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        if let Elements::VarLen { info, kind } = &self.elements {
            let to = array_varlen::Target {
                inner: &self.inner,
                info,
                kind: *kind,
                label: &self.label,
            };
            return array_varlen::write(py, &to, &ranges, &drop, data);
        }
        let source = import_dlpack(data)?;
        let subset = to_ranges(&ranges);
        run(py, || {
            let source = insert_axes(source, &drop)?;
            call!(&self.inner, write / write_async(&subset, &source))
        })
    }

    /// As `write`, for fixed-size types without a DLPack code: `data` holds the elements'
    /// bytes, with a trailing contiguous axis of the element size.
    #[pyo3(signature = (ranges, drop, data))]
    fn write_raw(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let dtype = self.fixed("write_raw")?.info.data_type;
        let bytes = import_dlpack(data)?;
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
    /// (see `read`), pulled lazily; at most `prefetch` are read at once; results (`NDArray`s,
    /// or `VarLenArray`s for strings) come in order (see `ReadStream`).
    #[pyo3(signature = (subsets, device = "cpu", prefetch = 4))]
    fn read_stream(
        &self,
        py: Python<'_>,
        subsets: &Bound<'_, PyAny>,
        device: &str,
        prefetch: usize,
    ) -> PyResult<ReadStream> {
        let proto = prototype(device).map_err(py_err)?;
        let pulled = PySubsets::new(subsets)?;
        let handover = pulled.handover();
        let opts = StreamOptions::default().with_prefetch(prefetch);
        let stream = run(py, || {
            Ok(match &self.elements {
                Elements::Fixed(f) => {
                    let opts = opts.with_read(f.read_options(self.base_options(), None));
                    Stream::Fixed(blocking_stream(&self.inner, pulled, &proto, &opts)?)
                }
                Elements::VarLen { .. } => {
                    let opts = opts.with_read(self.base_options());
                    Stream::VarLen(blocking_stream(&self.inner, pulled, &proto, &opts)?)
                }
            })
        })?;
        Ok(ReadStream::new(stream, handover))
    }

    fn __repr__(&self) -> String {
        format!(
            "<zarrbuf.Array {} shape={:?} dtype={} chunks={:?}>",
            self.label,
            self.dims(),
            self.data_type(),
            self.chunk_shape()
        )
    }
}
