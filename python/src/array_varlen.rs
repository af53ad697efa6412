//! What `Array` does differently for variable-length strings or bytes (v3 `string`,
//! `variable_length_bytes`, v2 `|O` with `vlen-utf8` / `vlen-bytes`): reads give
//! `VarLenBuffer`s (`read_as::<VarLenBuffer>`), `read_into` fills NumPy string or object
//! arrays, writes take `VarLenArray`s. `array.rs` dispatches here on `Elements::VarLen`
//! (streams are one generic call for both kinds: `read_stream.rs`).

use crate::errors::{ZarrbufError, py_err, run};
use crate::inner::Inner;
use crate::numpy_strings;
use crate::runtime::runtime;
use crate::selection::{kept_shape, to_ranges};
use crate::varlen::{VarLenArray, element, kind_name, reshape};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PySlice};
use zarrbuf::options::ReadOptions;
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, ArrayWriteVarLenExt, BufferPrototype, VarLenBuffer,
    VarLenInfo, VarLenKind,
};

/// The variable-length description of `inner`, or `None` for fixed-size elements. An empty
/// read checks the codec chain now (zarrbuf.open raises, and the codec pipeline hands the
/// array to zarr-python) rather than at each read.
pub(crate) fn describe(inner: &Inner) -> zarrbuf::Result<Option<VarLenInfo>> {
    let described = match inner {
        Inner::Sync(a) => zarrbuf::describe_varlen(a.as_ref()),
        Inner::Async(a) => zarrbuf::describe_varlen(a.as_ref()),
    };
    let Ok(info) = described else {
        return Ok(None);
    };
    if !info.shape.is_empty() {
        let none = vec![0..0; info.shape.len()];
        read_as(
            inner,
            &none,
            &BufferPrototype::cpu(),
            &ReadOptions::default(),
        )?;
    }
    Ok(Some(info))
}

/// `subset` of `inner` read on `proto` with `opts`.
fn read_as(
    inner: &Inner,
    subset: &[std::ops::Range<u64>],
    proto: &BufferPrototype,
    opts: &ReadOptions,
) -> zarrbuf::Result<VarLenBuffer> {
    match inner {
        Inner::Sync(a) => a.read_as_opt::<VarLenBuffer>(subset, proto, opts),
        Inner::Async(a) => {
            runtime()?.block_on(a.read_as_opt_async::<VarLenBuffer>(subset, proto, opts))
        }
    }
}

/// `ranges` of `inner` read on `device`, without the axes `drop`.
pub(crate) fn read(
    py: Python<'_>,
    inner: &Inner,
    ranges: &[(u64, u64)],
    drop: &[usize],
    device: &str,
    opts: &ReadOptions,
) -> PyResult<VarLenBuffer> {
    let proto = crate::inner::prototype(device).map_err(py_err)?;
    let subset = to_ranges(ranges);
    let shape = kept_shape(ranges, drop);
    run(py, || {
        reshape(read_as(inner, &subset, &proto, opts)?, shape)
    })
}

/// `ranges` of `inner` read into `out`: a NumPy `StringDType` array (strings) or object
/// array (byte strings) shaped as the ranges without the axes `drop`, any strides. Strings
/// are packed in place, without a temporary array.
pub(crate) fn read_into(
    py: Python<'_>,
    inner: &Inner,
    ranges: &[(u64, u64)],
    drop: &[usize],
    (kind, out): (VarLenKind, &Bound<'_, PyAny>),
    opts: &ReadOptions,
) -> PyResult<()> {
    let v = read(py, inner, ranges, drop, "cpu", opts)?;
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
    match kind {
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

/// The array `write` writes to: its zarrs array, what it holds and its name in messages.
pub(crate) struct Target<'a> {
    pub(crate) inner: &'a Inner,
    pub(crate) info: &'a VarLenInfo,
    pub(crate) kind: VarLenKind,
    pub(crate) label: &'a str,
}

/// Writes `data` (a `VarLenArray` shaped as the ranges without the axes `drop`) into
/// `ranges` of `to`; local stores only.
pub(crate) fn write(
    py: Python<'_>,
    to: &Target<'_>,
    ranges: &[(u64, u64)],
    drop: &[usize],
    data: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let data = data
        .cast::<VarLenArray>()
        .map_err(|e| pyo3::exceptions::PyTypeError::new_err(format!("argument 'data': {e}")))?;
    let data = &data.get().v;
    if data.kind() != to.kind {
        return Err(ZarrbufError::new_err(format!(
            "{}: {} elements cannot be written to an array of {}",
            to.label,
            kind_name(data.kind()),
            to.info.data_type
        )));
    }
    let kept = kept_shape(ranges, drop);
    if data.shape() != kept.as_slice() {
        return Err(ZarrbufError::new_err(format!(
            "{}: the data has shape {:?}, the selection {kept:?}",
            to.label,
            data.shape()
        )));
    }
    let subset = to_ranges(ranges);
    let full = subset.iter().map(|r| r.end - r.start).collect();
    match to.inner {
        Inner::Sync(a) => run(py, || {
            let data = reshape(data.clone(), full)?;
            a.write_varlen(&subset, &data)
        }),
        Inner::Async(_) => Err(ZarrbufError::new_err(format!(
            "{}: writing strings to object stores is not supported yet (write to a local \
             directory, then copy it with `zarrbuf copy`)",
            to.label
        ))),
    }
}
