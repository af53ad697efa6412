//! `VarLenHandle`: an opened zarr array of variable-length strings or bytes (v3 `string`,
//! `variable_length_bytes`, v2 `|O` with `vlen-utf8` / `vlen-bytes`), the twin of `Array`
//! for those types: reads give `VarLenArray`s, writes take them. `open` returns one or the
//! other (see [`Opened`]).

use crate::array::{Array, Inner, PySubsets, to_ranges};
use crate::errors::{ZarrbufError, py_err, run};
use crate::numpy_strings;
use crate::runtime::runtime;
use crate::varlen::{VarLenArray, element, kind_name, reshape};
use crate::varlen_stream::VarLenReadStream;
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PySlice, PyTuple};
use std::sync::Arc;
use zarrbuf::options::StreamOptions;
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, ArrayReadVarLenAsyncExt, ArrayReadVarLenExt,
    ArrayWriteVarLenExt, VarLenBuffer, VarLenKind,
};

/// An opened array of variable-length elements.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
pub(crate) struct VarLenHandle {
    inner: Inner,
    info: zarrbuf::VarLenInfo,
    kind: VarLenKind,
    label: String,
}

/// What `open` opened: an array of fixed-size elements or one of variable-length elements.
pub(crate) enum Opened {
    Fixed(Array),
    VarLen(VarLenHandle),
}

impl Opened {
    /// `inner` described as whichever of the two it is.
    pub(crate) fn new(inner: Inner, label: String) -> zarrbuf::Result<Self> {
        let described = match &inner {
            Inner::Sync(a) => zarrbuf::describe_varlen(a.as_ref()),
            Inner::Async(a) => zarrbuf::describe_varlen(a.as_ref()),
        };
        match described {
            Ok(info) => {
                // An empty read checks the codec chain now (zarrbuf.open raises, and the
                // codec pipeline hands the array to zarr-python) rather than at each read.
                if !info.shape.is_empty() {
                    let none = vec![0..0; info.shape.len()];
                    let cpu = zarrbuf::BufferPrototype::cpu();
                    match &inner {
                        Inner::Sync(a) => a.read_as::<VarLenBuffer>(&none, &cpu)?,
                        Inner::Async(a) => {
                            runtime()?.block_on(a.read_as_async::<VarLenBuffer>(&none, &cpu))?
                        }
                    };
                }
                let kind = info.data_type;
                Ok(Opened::VarLen(VarLenHandle {
                    inner,
                    info,
                    kind,
                    label,
                }))
            }
            Err(_) => Ok(Opened::Fixed(Array::from_inner(inner, label)?)),
        }
    }

    /// Every read of a fixed-size array goes through `cache`. Variable-length arrays are
    /// not cached (their chunks' decoded sizes are not known before they are read).
    pub(crate) fn with_cache(self, cache: Option<zarrbuf::cache::ChunkCache>) -> Self {
        match self {
            Opened::Fixed(a) => Opened::Fixed(a.with_cache(cache)),
            v @ Opened::VarLen(_) => v,
        }
    }

    /// Reads of a fixed-size array keep up to `n` requests to an object store in flight.
    pub(crate) fn with_io_concurrency(self, n: Option<usize>) -> Self {
        match self {
            Opened::Fixed(a) => Opened::Fixed(a.with_io_concurrency(n)),
            v @ Opened::VarLen(_) => v,
        }
    }

    /// Small reads of a fixed-size array decode zstd chunks only as far as they need.
    /// Variable-length arrays decode their chunks whole (they read through another route).
    pub(crate) fn with_prefix_decode(self, on: bool) -> Self {
        match self {
            Opened::Fixed(a) => Opened::Fixed(a.with_prefix_decode(on)),
            v @ Opened::VarLen(_) => v,
        }
    }

    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self {
            Opened::Fixed(a) => a.into_py_any(py),
            Opened::VarLen(v) => v.into_py_any(py),
        }
    }
}

/// The shape of `ranges` without the axes `drop`.
fn kept_shape(ranges: &[(u64, u64)], drop: &[usize]) -> Vec<u64> {
    ranges
        .iter()
        .enumerate()
        .filter(|(k, _)| !drop.contains(k))
        .map(|(_, &(a, b))| b.saturating_sub(a))
        .collect()
}

impl VarLenHandle {
    fn read_buffer(
        &self,
        py: Python<'_>,
        ranges: &[(u64, u64)],
        drop: &[usize],
        device: &str,
    ) -> PyResult<zarrbuf::VarLenBuffer> {
        let proto = crate::array::prototype(device).map_err(py_err)?;
        let subset = to_ranges(ranges);
        let shape = kept_shape(ranges, drop);
        run(py, || {
            let v = match &self.inner {
                Inner::Sync(a) => a.read_as::<VarLenBuffer>(&subset, &proto)?,
                Inner::Async(a) => {
                    runtime()?.block_on(a.read_as_async::<VarLenBuffer>(&subset, &proto))?
                }
            };
            reshape(v, shape)
        })
    }
}

#[pymethods]
impl VarLenHandle {
    /// The shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.info.shape)
    }

    /// NumPy's type code of what reads give: `"T"` (`StringDType`) for strings, `"O"`
    /// (objects: `bytes`) for byte strings.
    #[getter]
    fn dtype(&self) -> &'static str {
        match self.kind {
            VarLenKind::Utf8 => "T",
            VarLenKind::Bytes => "O",
        }
    }

    /// `"utf8"` or `"bytes"`.
    #[getter]
    fn kind(&self) -> &'static str {
        kind_name(self.kind)
    }

    /// The zarr data type (`string` or `variable_length_bytes`).
    #[getter]
    fn data_type(&self) -> &'static str {
        match self.kind {
            VarLenKind::Utf8 => "string",
            VarLenKind::Bytes => "variable_length_bytes",
        }
    }

    /// Whether `write` works here: local stores yes, object stores not yet.
    #[getter]
    fn writable(&self) -> bool {
        matches!(self.inner, Inner::Sync(_))
    }

    /// Variable-length arrays are read without a chunk cache (`None`), so there is nothing
    /// to drop: `invalidate_cache` takes the same arguments as `Array.invalidate_cache` and
    /// does nothing, for code (zarr-python's pipeline) that handles both kinds alike.
    #[getter]
    fn cache(&self) -> Option<crate::cache::PyChunkCache> {
        None
    }

    #[pyo3(signature = (cache = None))]
    fn invalidate_cache(&self, cache: Option<PyRef<'_, crate::cache::PyChunkCache>>) {
        let _ = cache;
    }

    /// The chunk shape (the shard shape of sharded arrays).
    #[getter]
    fn chunks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.info.chunks)
    }

    /// Reads `ranges` (one `(start, stop)` per dimension) into a new `VarLenArray` on
    /// `device`, removing the size-1 axes `drop`. `decode` is accepted for symmetry with
    /// `Array.read`; strings always decode on the CPU.
    #[pyo3(signature = (ranges, drop, device = "cpu", decode = "auto"))]
    fn read(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        device: &str,
        decode: &str,
    ) -> PyResult<VarLenArray> {
        if !matches!(decode, "auto" | "cpu") {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "decode={decode:?}: strings decode on the CPU (\"auto\" or \"cpu\")"
            )));
        }
        Ok(VarLenArray {
            v: self.read_buffer(py, &ranges, &drop, device)?,
        })
    }

    /// Reads `ranges` into `out`: a NumPy `StringDType` array (strings) or object array
    /// (byte strings) shaped as the ranges without the axes `drop`, any strides (a view of
    /// a larger array is fine). Strings are packed in place, without a temporary array.
    /// `cache`, `prefix_decode` and `io_concurrency` are accepted for symmetry with
    /// `Array.read_into` (the codec pipeline passes them to both); variable-length arrays
    /// are not cached, their chunks are decoded whole, and their fetches are not run ahead.
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
        let _ = (cache, prefix_decode, io_concurrency);
        let v = self.read_buffer(py, &ranges, &drop, "cpu")?;
        let out_shape: Vec<u64> = out.getattr("shape")?.extract()?;
        if out_shape != v.shape() {
            return Err(ZarrbufError::new_err(format!(
                "read_into: the output has shape {out_shape:?}, the selection {:?}",
                v.shape()
            )));
        }
        let offsets = v.offsets().as_host_bytes().map_err(py_err)?;
        let values = v.values().as_host_bytes().map_err(py_err)?;
        let element = |i: usize| element(&offsets, &values, i);
        match self.kind {
            VarLenKind::Utf8 => numpy_strings::fill(out, v.len(), element),
            VarLenKind::Bytes => {
                let items = (0..v.len())
                    .map(|i| Ok(PyBytes::new(py, element(i)?)))
                    .collect::<PyResult<Vec<_>>>()?;
                let np = py.import("numpy")?;
                let flat = np.call_method1("empty", (v.len(), "O"))?;
                flat.set_item(PySlice::full(py), PyList::new(py, items)?)?;
                let shaped = flat.call_method1("reshape", (out.getattr("shape")?,))?;
                out.set_item(py.Ellipsis(), shaped)
            }
        }
    }

    /// Writes `data` (a `VarLenArray` shaped as the ranges without the axes `drop`) into
    /// `ranges`.
    #[pyo3(signature = (ranges, drop, data))]
    fn write(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        drop: Vec<usize>,
        data: &Bound<'_, VarLenArray>,
    ) -> PyResult<()> {
        let data = &data.get().v;
        if data.kind() != self.kind {
            return Err(ZarrbufError::new_err(format!(
                "{}: {} elements cannot be written to an array of {}",
                self.label,
                kind_name(data.kind()),
                self.info.data_type
            )));
        }
        let kept = kept_shape(&ranges, &drop);
        if data.shape() != kept.as_slice() {
            return Err(ZarrbufError::new_err(format!(
                "{}: the data has shape {:?}, the selection {kept:?}",
                self.label,
                data.shape()
            )));
        }
        let full = to_ranges(&ranges).iter().map(|r| r.end - r.start).collect();
        let subset = to_ranges(&ranges);
        match &self.inner {
            Inner::Sync(a) => run(py, || {
                let data = reshape(data.clone(), full)?;
                a.write_varlen(&subset, &data)
            }),
            Inner::Async(_) => Err(ZarrbufError::new_err(format!(
                "{}: writing strings to object stores is not supported yet (write to a local \
                 directory, then copy it with `zarrbuf copy`)",
                self.label
            ))),
        }
    }

    /// A prefetching stream of reads, as `Array.read_stream`: `subsets` is an iterator of
    /// `(ranges, drop)` pairs, pulled lazily; at most `prefetch` are read at once; the
    /// `VarLenArray` results come in order (see `VarLenReadStream`).
    #[pyo3(signature = (subsets, device = "cpu", prefetch = 4))]
    fn read_stream(
        &self,
        py: Python<'_>,
        subsets: &Bound<'_, PyAny>,
        device: &str,
        prefetch: usize,
    ) -> PyResult<VarLenReadStream> {
        let proto = crate::array::prototype(device).map_err(py_err)?;
        let pulled = PySubsets {
            iter: subsets.try_iter()?.unbind(),
            drops: Arc::default(),
            error: Arc::default(),
        };
        let (drops, error) = (pulled.drops.clone(), pulled.error.clone());
        let opts = StreamOptions::default().with_prefetch(prefetch);
        let stream = run(py, || match &self.inner {
            Inner::Sync(a) => Ok(ArrayReadVarLenExt::read_varlen_stream(
                a.as_ref(),
                pulled,
                &proto,
                &opts,
            )),
            Inner::Async(a) => {
                let _enter = runtime()?.enter();
                ArrayReadVarLenAsyncExt::read_varlen_stream(a.as_ref(), pulled, &proto, &opts)
            }
        })?;
        Ok(VarLenReadStream::new(stream, drops, error))
    }

    fn __repr__(&self) -> String {
        format!(
            "<zarrbuf.Array {} shape={:?} dtype={} chunks={:?}>",
            self.label,
            self.info.shape,
            self.data_type(),
            self.info.chunks
        )
    }
}
