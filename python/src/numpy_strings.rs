//! NumPy `StringDType` arrays filled from, and read into, Arrow-layout strings through
//! NumPy's C API (`NpyString_pack` / `NpyString_load`, NumPy 2.0 and later), one element at a
//! time without a Python object per string.
//!
//! The API table is the `_ARRAY_API` capsule of `numpy._core._multiarray_umath` (what
//! `import_array()` reads in C); slots 313–318 are NumPy 2.0's string functions (numpy's
//! `numpy_api.py`), present when `PyArray_GetNDArrayCFeatureVersion()` (slot 211) is at
//! least `NPY_2_0_API_VERSION`.

use crate::errors::ZarrbufError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::ffi::{c_char, c_int, c_uint, c_void};

/// `npy_static_string`: an unpacked, read-only view of one string.
#[repr(C)]
struct StaticString {
    size: usize,
    buf: *const c_char,
}

type Load = unsafe extern "C" fn(*mut c_void, *const c_void, *mut StaticString) -> c_int;
type Pack = unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_char, usize) -> c_int;
type Acquire = unsafe extern "C" fn(*const ffi::PyObject) -> *mut c_void;
type Release = unsafe extern "C" fn(*mut c_void);
type FeatureVersion = unsafe extern "C" fn() -> c_uint;

const NPY_2_0_API_VERSION: c_uint = 0x12;
/// The size of one `StringDType` element (`npy_packed_static_string`).
pub(crate) const PACKED_SIZE: usize = 16;

/// NumPy's string functions.
struct Api {
    load: Load,
    pack: Pack,
    acquire: Acquire,
    release: Release,
}

fn api(py: Python<'_>) -> PyResult<&'static Api> {
    static API: PyOnceLock<Api> = PyOnceLock::new();
    API.get_or_try_init(py, || {
        let module = py.import("numpy._core._multiarray_umath").map_err(|_| {
            ZarrbufError::new_err("strings as NumPy arrays need NumPy 2 (StringDType)")
        })?;
        let capsule = module.getattr("_ARRAY_API")?;
        // SAFETY: `capsule` is a live object; PyCapsule_GetPointer checks that it is a capsule
        // with no name (NumPy's) and returns null with an error set otherwise.
        let table = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), std::ptr::null()) };
        if table.is_null() {
            return Err(PyErr::fetch(py));
        }
        let table = table.cast::<*const c_void>();
        // SAFETY: NumPy's API table has at least 212 entries in every version (slot 211 is
        // PyArray_GetNDArrayCFeatureVersion since NumPy 1.7); slots 313–318 exist, with the
        // signatures above, when that version is at least NPY_2_0_API_VERSION (checked before
        // they are read). Function pointers are the table's entries.
        unsafe {
            let version = std::mem::transmute::<*const c_void, FeatureVersion>(*table.add(211));
            if version() < NPY_2_0_API_VERSION {
                return Err(ZarrbufError::new_err(
                    "strings as NumPy arrays need NumPy 2 (StringDType); this NumPy is older",
                ));
            }
            Ok(Api {
                load: std::mem::transmute::<*const c_void, Load>(*table.add(313)),
                pack: std::mem::transmute::<*const c_void, Pack>(*table.add(314)),
                acquire: std::mem::transmute::<*const c_void, Acquire>(*table.add(316)),
                release: std::mem::transmute::<*const c_void, Release>(*table.add(318)),
            })
        }
    })
}

/// Where a `StringDType` array's elements are: address, shape and byte strides (C order of
/// the shape), checked to be a writable (or readable) `StringDType` array.
struct Layout {
    data: usize,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

/// What zarrbuf does with a `StringDType` array's elements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Reads them (the data of a write).
    Read,
    /// Writes them (the output of a read): the array must be writable.
    Write,
}

fn layout(arr: &Bound<'_, PyAny>, usage: Use) -> PyResult<Layout> {
    let dtype = arr.getattr("dtype")?;
    if dtype.getattr("kind")?.extract::<String>()? != "T"
        || dtype.getattr("itemsize")?.extract::<usize>()? != PACKED_SIZE
    {
        return Err(ZarrbufError::new_err(format!(
            "expected a NumPy StringDType array, got dtype {}",
            dtype.str()?
        )));
    }
    if usage == Use::Write
        && !arr
            .getattr("flags")?
            .getattr("writeable")?
            .extract::<bool>()?
    {
        return Err(ZarrbufError::new_err(
            "the StringDType output array is read-only",
        ));
    }
    let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
    let strides: Vec<isize> = arr.getattr("strides")?.extract()?;
    let iface = arr.getattr("__array_interface__")?;
    let (data, _): (usize, bool) = iface.get_item("data")?.extract()?;
    Ok(Layout {
        data,
        shape,
        strides,
    })
}

/// Calls `f` with the address of every element of `l`, in C order of its shape.
fn for_each_element(l: &Layout, mut f: impl FnMut(usize, usize) -> PyResult<()>) -> PyResult<()> {
    let n: usize = l.shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let mut index = vec![0usize; l.shape.len()];
    let mut addr = l.data as isize;
    for i in 0..n {
        f(i, addr as usize)?;
        // advance the C-order index, keeping addr in step
        for k in (0..index.len()).rev() {
            index[k] += 1;
            addr += l.strides[k];
            if index[k] < l.shape[k] {
                break;
            }
            addr -= l.strides[k] * l.shape[k] as isize;
            index[k] = 0;
        }
    }
    Ok(())
}

/// The allocator of a `StringDType` descriptor, released on drop.
struct Allocator<'a> {
    api: &'a Api,
    ptr: *mut c_void,
}

impl<'a> Allocator<'a> {
    fn acquire(api: &'a Api, dtype: &Bound<'_, PyAny>) -> Self {
        // SAFETY: `dtype` is a live StringDType descriptor (checked by `layout`), which is
        // the `PyArray_StringDTypeObject` NpyString_acquire_allocator takes; it stays alive
        // while this borrow of it does.
        let ptr = unsafe { (api.acquire)(dtype.as_ptr()) };
        Allocator { api, ptr }
    }
}

impl Drop for Allocator<'_> {
    fn drop(&mut self) {
        // SAFETY: acquired by `acquire` and released exactly once.
        unsafe { (self.api.release)(self.ptr) }
    }
}

/// Writes the strings `value(i)` (bytes, UTF-8) into the elements of `out` (a writable
/// `StringDType` array, any strides) in C order; `count` must equal its size.
pub(crate) fn fill<'v>(
    out: &Bound<'_, PyAny>,
    count: usize,
    value: impl Fn(usize) -> PyResult<&'v [u8]>,
) -> PyResult<()> {
    let py = out.py();
    let api = api(py)?;
    let l = layout(out, Use::Write)?;
    let n: usize = l.shape.iter().product();
    if n != count {
        return Err(ZarrbufError::new_err(format!(
            "the StringDType output has {n} elements, the strings are {count}"
        )));
    }
    let dtype = out.getattr("dtype")?;
    let alloc = Allocator::acquire(api, &dtype);
    for_each_element(&l, |i, addr| {
        let s = value(i)?;
        // SAFETY: `addr` is the address of element i of `out` (from its array interface,
        // shape and strides), a 16-byte packed string owned by `out`'s descriptor, whose
        // allocator is held; `s` is valid for `s.len()` bytes. NpyString_pack frees the
        // element's old heap string, if any, and copies `s`.
        let rc = unsafe { (api.pack)(alloc.ptr, addr as *mut c_void, s.as_ptr().cast(), s.len()) };
        if rc < 0 {
            return Err(ZarrbufError::new_err(format!(
                "NumPy could not store string {i} ({} bytes): out of memory",
                s.len()
            )));
        }
        Ok(())
    })
}

/// The strings of a `StringDType` array in C order, appended to `values` with their end
/// offsets pushed to `offsets`. A missing element (`StringDType(na_object=...)`) is an error.
pub(crate) fn load(
    arr: &Bound<'_, PyAny>,
    offsets: &mut Vec<i64>,
    values: &mut Vec<u8>,
) -> PyResult<()> {
    let py = arr.py();
    let api = api(py)?;
    let l = layout(arr, Use::Read)?;
    let dtype = arr.getattr("dtype")?;
    let alloc = Allocator::acquire(api, &dtype);
    for_each_element(&l, |i, addr| {
        let mut s = StaticString {
            size: 0,
            buf: std::ptr::null(),
        };
        // SAFETY: as in `fill`; NpyString_load only reads the element and writes `s`, which
        // then views memory owned by the allocator we hold.
        let rc = unsafe { (api.load)(alloc.ptr, addr as *const c_void, &mut s) };
        if rc < 0 {
            return Err(ZarrbufError::new_err(format!(
                "NumPy could not read string {i} of the StringDType array"
            )));
        }
        if rc == 1 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "element {i} is missing (the StringDType's na_object); zarr string arrays \
                 have no missing elements: fill them first"
            )));
        }
        if s.size > 0 {
            // SAFETY: NpyString_load returned 0, so `s.buf` views `s.size` bytes that stay
            // valid while the allocator is held.
            values.extend_from_slice(unsafe { std::slice::from_raw_parts(s.buf.cast(), s.size) });
        }
        offsets.push(values.len() as i64);
        Ok(())
    })
}
