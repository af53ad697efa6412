//! `VarLenArray`: variable-length strings or bytes read by zarrbuf (a `VarLenBuffer`) seen
//! from Python — NumPy `StringDType` (strings) or an object array of `bytes`, Arrow through
//! `__arrow_c_array__` without a copy, and the offsets and values as DLPack buffers; and
//! the conversions of Python data (lists, NumPy arrays, Arrow arrays) into a `VarLenBuffer`
//! for writes.

use crate::errors::{ZarrbufError, py_err};
use crate::ndarray::{NDArray, import_dlpack};
use crate::{arrow, numpy_strings};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyList, PySlice, PyString, PyTuple};
use zarrbuf::host::HostBytes;
use zarrbuf::{Buffer, DataType, NDBuffer, Order, VarLenBuffer, VarLenKind};

/// Strings (`kind == "utf8"`) or byte strings (`kind == "bytes"`) of an n-d shape, in
/// Arrow's large layout (i64 offsets, one values buffer), in host, pinned or CUDA memory.
///
/// `numpy.asarray(r)` / `r.numpy()`: a NumPy `StringDType` array (strings) or an object
/// array of `bytes` (byte strings), one copy. `pyarrow.array(r)` (or polars): a flat
/// `large_string` / `large_binary` array over the same memory (host results only).
/// `r.offsets` and `r.values`: the two buffers as `NDArray`s (int64, uint8) for DLPack.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
pub(crate) struct VarLenArray {
    pub(crate) v: VarLenBuffer,
}

pub(crate) fn kind_name(kind: VarLenKind) -> &'static str {
    match kind {
        VarLenKind::Utf8 => "utf8",
        VarLenKind::Bytes => "bytes",
    }
}

pub(crate) fn parse_kind(kind: &str) -> PyResult<VarLenKind> {
    match kind {
        "utf8" => Ok(VarLenKind::Utf8),
        "bytes" => Ok(VarLenKind::Bytes),
        other => Err(PyValueError::new_err(format!(
            "kind must be \"utf8\" or \"bytes\", got {other:?}"
        ))),
    }
}

/// `v` with a new shape of the same element count (C order is unchanged).
pub(crate) fn reshape(v: VarLenBuffer, shape: Vec<u64>) -> zarrbuf::Result<VarLenBuffer> {
    if v.shape() == shape.as_slice() {
        return Ok(v);
    }
    let (_, kind, offsets, values) = v.into_parts();
    VarLenBuffer::from_parts(shape, kind, offsets, values)
}

/// Element `i` of host offsets and values (checked by `VarLenBuffer`'s invariants; an
/// offset outside them is an error, never a panic).
pub(crate) fn element<'a>(offsets: &[u8], values: &'a [u8], i: usize) -> PyResult<&'a [u8]> {
    let offset = |k: usize| {
        offsets
            .get(8 * k..8 * k + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(|b| i64::from_le_bytes(b) as usize)
    };
    offset(i)
        .zip(offset(i + 1))
        .and_then(|(a, b)| values.get(a..b))
        .ok_or_else(|| ZarrbufError::new_err(format!("string {i} lies outside the values")))
}

/// A flat NDArray over all of `b`.
fn flat(b: &Buffer, dtype: DataType) -> PyResult<NDArray> {
    let n = b.len() / dtype.size();
    let nd = NDBuffer::from_buffer(b.clone(), dtype, &[n], Order::C).map_err(py_err)?;
    Ok(NDArray { nd })
}

impl VarLenArray {
    /// The host offsets and values bytes; device results are refused.
    fn host_parts(&self, what: &str) -> PyResult<(HostBytes<'_>, HostBytes<'_>)> {
        if !self.v.memory().is_host_accessible() {
            return Err(ZarrbufError::new_err(format!(
                "{what} needs the strings on the host; they are in {} (call .to_host() \
                 first, or read with device=\"cpu\")",
                self.v.memory()
            )));
        }
        let offsets = self.v.offsets().as_host_bytes().map_err(py_err)?;
        Ok((offsets, self.v.values().as_host_bytes().map_err(py_err)?))
    }

    /// The NumPy array (`StringDType` or object of `bytes`), shaped as the result.
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (offsets, values) = self.host_parts("a NumPy array")?;
        let element = |i: usize| element(&offsets, &values, i);
        let np = py.import("numpy")?;
        let shape = PyTuple::new(py, self.v.shape())?;
        match self.v.kind() {
            VarLenKind::Utf8 => {
                let dtype = np.getattr("dtypes")?.getattr("StringDType")?.call0()?;
                let out = np.call_method1("empty", (shape, dtype))?;
                numpy_strings::fill(&out, self.v.len(), element)?;
                Ok(out)
            }
            VarLenKind::Bytes => {
                let items = (0..self.v.len())
                    .map(|i| Ok(PyBytes::new(py, element(i)?)))
                    .collect::<PyResult<Vec<_>>>()?;
                let out = np.call_method1("empty", (self.v.len(), "O"))?;
                out.set_item(PySlice::full(py), PyList::new(py, items)?)?;
                out.call_method1("reshape", (shape,))
            }
        }
    }
}

#[pymethods]
impl VarLenArray {
    /// The shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.v.shape())
    }

    /// The number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.v.len()
    }

    /// `"utf8"` (strings) or `"bytes"` (byte strings).
    #[getter]
    fn kind(&self) -> &'static str {
        kind_name(self.v.kind())
    }

    /// Where the buffers are: `"cpu"`, `"pinned:N"` or `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        match self.v.memory() {
            zarrbuf::Memory::Host => "cpu".into(),
            zarrbuf::Memory::Pinned(n) => format!("pinned:{n}"),
            zarrbuf::Memory::Cuda(n) => format!("cuda:{n}"),
        }
    }

    /// The bytes of the offsets and the values together (Arrow's size of the array).
    #[getter]
    fn nbytes(&self) -> usize {
        self.v.offsets().len() + self.v.values().len()
    }

    /// The offsets: `size + 1` int64s, element `i` is `values[offsets[i]:offsets[i+1]]`
    /// (C order of the shape). An `NDArray`: DLPack on every device.
    #[getter]
    fn offsets(&self) -> PyResult<NDArray> {
        flat(self.v.offsets(), DataType::Int64)
    }

    /// The values: every element's bytes (UTF-8 for strings), one after the other. An
    /// `NDArray` of uint8.
    #[getter]
    fn values(&self) -> PyResult<NDArray> {
        flat(self.v.values(), DataType::UInt8)
    }

    /// The length of the first axis (as NumPy's `len`).
    fn __len__(&self) -> PyResult<usize> {
        match self.v.shape().first() {
            Some(&n) => Ok(n as usize),
            None => Err(PyTypeError::new_err("len() of a 0-d array")),
        }
    }

    /// A NumPy array: `StringDType` for strings, an object array of `bytes` for byte
    /// strings (NumPy's `|S` would drop trailing NUL bytes). One copy.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_numpy(py)
    }

    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) {
            return Err(PyValueError::new_err(
                "a NumPy array of zarrbuf's strings is always a copy (the layouts differ); \
                 use pyarrow.array(result) for a view",
            ));
        }
        let out = self.to_numpy(py)?;
        match dtype {
            Some(d) if !d.is_none() => out.call_method1("astype", (d,)),
            _ => Ok(out),
        }
    }

    /// The Arrow PyCapsule interface: a flat `large_string` / `large_binary` array over the
    /// result's own buffers (host memory). `requested_schema` is ignored (the consumer
    /// casts, as the interface allows).
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        arrow::capsules(py, &self.v)
    }

    /// The Arrow schema (`large_string` or `large_binary`).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        arrow::schema_capsule(py, self.v.kind())
    }

    /// A copy in host memory (this result itself when it is there already).
    fn to_host(&self, py: Python<'_>) -> PyResult<VarLenArray> {
        let v = crate::errors::run(py, || self.v.to_host())?;
        Ok(VarLenArray { v })
    }

    /// The elements as (nested) Python lists of `str` or `bytes`.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_numpy(py)?.call_method0("tolist")
    }

    fn __repr__(&self) -> String {
        format!(
            "<zarrbuf.VarLenArray {} shape={:?} size={} values={} bytes device={}>",
            kind_name(self.v.kind()),
            self.v.shape(),
            self.v.len(),
            self.v.values().len(),
            self.device()
        )
    }
}

/// Strings or byte strings from Python, as `kind` and `shape` say: `source` is
/// `"objects"` (`a`: a flat list of `str` / `bytes`), `"numpy"` (`a`: a NumPy `StringDType`
/// array of that shape, any strides) or `"arrow"` (`a`, `b`: contiguous int64 offsets
/// starting at 0 and uint8 values, e.g. views of a pyarrow array's buffers; no copy).
#[pyfunction]
#[pyo3(signature = (kind, shape, source, a, b = None))]
pub(crate) fn varlen_from(
    py: Python<'_>,
    kind: &str,
    shape: Vec<u64>,
    source: &str,
    a: &Bound<'_, PyAny>,
    b: Option<&Bound<'_, PyAny>>,
) -> PyResult<VarLenArray> {
    let kind = parse_kind(kind)?;
    let v = match (source, b) {
        ("objects", None) => from_objects(kind, shape, a.cast::<PyList>()?)?,
        ("numpy", None) => {
            let mut offsets = vec![0i64];
            let mut values = Vec::new();
            numpy_strings::load(a, &mut offsets, &mut values)?;
            let offsets = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
            let v = VarLenBuffer::from_parts(
                shape,
                kind,
                Buffer::from_vec(offsets),
                Buffer::from_vec(values),
            );
            v.map_err(py_err)?
        }
        ("arrow", Some(b)) => {
            let offsets = contiguous(import_dlpack(a)?, "offsets")?;
            let values = contiguous(import_dlpack(b)?, "values")?;
            crate::errors::run(py, || {
                VarLenBuffer::from_parts(shape, kind, offsets, values)
            })?
        }
        _ => {
            return Err(PyValueError::new_err(format!(
                "varlen_from: unknown source {source:?} (objects, numpy, arrow)"
            )));
        }
    };
    Ok(VarLenArray { v })
}

/// The bytes of a C-contiguous NDBuffer.
fn contiguous(nd: NDBuffer, what: &str) -> PyResult<Buffer> {
    if !nd.is_c_contiguous() || nd.ndim() != 1 {
        return Err(PyValueError::new_err(format!(
            "the {what} must be a contiguous 1-d array, got shape {:?} strides {:?}",
            nd.shape(),
            nd.strides()
        )));
    }
    nd.buffer()
        .try_slice(nd.offset()..nd.offset() + nd.nbytes())
        .map_err(py_err)
}

/// A flat list of `str` (utf8) or `bytes` as a VarLenBuffer; anything else is an error
/// naming the element.
fn from_objects(
    kind: VarLenKind,
    shape: Vec<u64>,
    items: &Bound<'_, PyList>,
) -> PyResult<VarLenBuffer> {
    let mut offsets = Vec::with_capacity(8 * (items.len() + 1));
    offsets.extend_from_slice(&0i64.to_le_bytes());
    let mut values = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match kind {
            VarLenKind::Utf8 => {
                let s = item
                    .cast::<PyString>()
                    .map_err(|_| wrong_element(i, &item, "a string array takes str elements"))?;
                let s = s.to_cow().map_err(|e| {
                    PyValueError::new_err(format!("element {i} is not valid UTF-8: {e}"))
                })?;
                values.extend_from_slice(s.as_bytes());
            }
            VarLenKind::Bytes => {
                let b = item.cast::<PyBytes>().map_err(|_| {
                    wrong_element(
                        i,
                        &item,
                        "a variable_length_bytes array takes bytes elements",
                    )
                })?;
                values.extend_from_slice(b.as_bytes());
            }
        }
        offsets.extend_from_slice(&(values.len() as i64).to_le_bytes());
    }
    VarLenBuffer::from_parts(
        shape,
        kind,
        Buffer::from_vec(offsets),
        Buffer::from_vec(values),
    )
    .map_err(py_err)
}

fn wrong_element(i: usize, item: &Bound<'_, PyAny>, want: &str) -> PyErr {
    let ty = item
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!(
        "element {i} is {ty} ({}); {want}",
        short_repr(item)
    ))
}

fn short_repr(item: &Bound<'_, PyAny>) -> String {
    let r = item.repr().map(|r| r.to_string()).unwrap_or_default();
    if r.chars().count() > 40 {
        format!("{}…", r.chars().take(40).collect::<String>())
    } else {
        r
    }
}

/// Adds `VarLenArray` and `varlen_from` to the extension module (`lib.rs` adds the
/// `Array` and `ReadStream` classes that give them).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<VarLenArray>()?;
    m.add_function(wrap_pyfunction!(varlen_from, m)?)?;
    Ok(())
}
