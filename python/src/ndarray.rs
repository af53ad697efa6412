//! `NDArray`, a zarrbuf NDBuffer seen from Python: the array interfaces and DLPack, both
//! ways.

use crate::errors::{py_err, run};
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::ffi::{CStr, c_void};
use std::panic::catch_unwind;
use zarrbuf::dlpack::{DLManagedTensor, DLManagedTensorVersioned, DlpackLegacy, DlpackVersioned};
use zarrbuf::dtype::ByteOrder;
use zarrbuf::{Memory, NDBuffer};

/// A zarrbuf array in host, pinned or device memory. Hands itself to numpy
/// (`numpy.asarray`, `numpy.from_dlpack`), torch, CuPy and JAX without a copy.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
pub(crate) struct NDArray {
    pub(crate) nd: NDBuffer,
}

/// numpy's type string for arrays handed out through the array interfaces.
pub(crate) fn typestr(nd: &NDBuffer) -> PyResult<String> {
    let descr = nd.dtype().npy_descr();
    let native = nd.byte_order() == ByteOrder::native();
    Ok(match (descr.as_bytes()[0], native) {
        (b'<', true) if cfg!(target_endian = "big") => format!(">{}", &descr[1..]),
        (b'<', false) if cfg!(target_endian = "little") => format!(">{}", &descr[1..]),
        _ => descr,
    })
}

pub(crate) fn interface<'py>(
    py: Python<'py>,
    nd: &NDBuffer,
    addr: usize,
) -> PyResult<Bound<'py, PyDict>> {
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

pub(crate) const VERSIONED: &CStr = c"dltensor_versioned";
pub(crate) const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
pub(crate) const LEGACY: &CStr = c"dltensor";
pub(crate) const USED_LEGACY: &CStr = c"used_dltensor";

/// Deletes the tensor of a capsule nobody consumed (the consumer renames it when it does).
///
/// # Safety
/// Called by Python with a live capsule made by `NDArray.__dlpack__`.
pub(crate) unsafe extern "C" fn versioned_capsule_destructor(capsule: *mut ffi::PyObject) {
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
pub(crate) unsafe extern "C" fn legacy_capsule_destructor(capsule: *mut ffi::PyObject) {
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
pub(crate) unsafe fn capsule<'py>(
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
pub(crate) fn import_capsule(cap: &Bound<'_, PyAny>) -> PyResult<NDBuffer> {
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
pub(crate) fn import_dlpack(obj: &Bound<'_, PyAny>) -> PyResult<NDBuffer> {
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
pub(crate) fn from_dlpack(obj: &Bound<'_, PyAny>) -> PyResult<NDArray> {
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
