//! The Arrow C data interface for variable-length results: `__arrow_c_array__` hands
//! pyarrow, polars and friends a `large_utf8` / `large_binary` array whose buffers are the
//! result's own offsets and values (no copy). The structs are Arrow's ABI
//! (<https://arrow.apache.org/docs/format/CDataInterface.html>), written out here; each
//! exported struct's `private_data` owns a clone of the buffers, so the memory lives until
//! the consumer calls `release`, however long after the Python result is gone.

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};
use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr;
use zarrbuf::{Buffer, VarLenBuffer, VarLenKind};

/// Arrow's `struct ArrowSchema`.
#[repr(C)]
pub(crate) struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

/// Arrow's `struct ArrowArray`.
#[repr(C)]
pub(crate) struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

// SAFETY: the structs own what their pointers point at (the strings and buffers in their
// private data, which are Send) or point at nothing; moving them between threads is what the
// C data interface allows ("the structure can be moved").
unsafe impl Send for ArrowSchema {}
// SAFETY: as for ArrowSchema.
unsafe impl Send for ArrowArray {}

/// What an exported schema owns: its format string.
struct SchemaPrivate {
    _format: CString,
}

/// What an exported array owns: the buffer pointer table and the buffers it points into.
struct ArrayPrivate {
    _pointers: Box<[*const c_void; 3]>,
    _offsets: Buffer,
    _values: Buffer,
}

/// Arrow's format string of a kind: `U` large utf8, `Z` large binary.
fn format(kind: VarLenKind) -> &'static CStr {
    match kind {
        VarLenKind::Utf8 => c"U",
        VarLenKind::Bytes => c"Z",
    }
}

/// Releases a schema made by [`schema`].
///
/// # Safety
/// `s` points at a live schema made by [`schema`] (or one moved from it) not yet released.
unsafe extern "C" fn release_schema(s: *mut ArrowSchema) {
    // SAFETY: per the function's contract `s` is valid; its private data is the Box that
    // `schema` leaked, taken back exactly once since release is cleared below.
    unsafe {
        if s.is_null() || (*s).release.is_none() {
            return;
        }
        drop(Box::from_raw((*s).private_data.cast::<SchemaPrivate>()));
        (*s).private_data = ptr::null_mut();
        (*s).release = None;
    }
}

/// Releases an array made by [`array`].
///
/// # Safety
/// `a` points at a live array made by [`array`] (or one moved from it) not yet released.
unsafe extern "C" fn release_array(a: *mut ArrowArray) {
    // SAFETY: per the function's contract `a` is valid; its private data is the Box that
    // `array` leaked, taken back exactly once since release is cleared below. Dropping it
    // drops the buffer clones, freeing the memory when the result is gone too.
    unsafe {
        if a.is_null() || (*a).release.is_none() {
            return;
        }
        drop(Box::from_raw((*a).private_data.cast::<ArrayPrivate>()));
        (*a).private_data = ptr::null_mut();
        (*a).release = None;
    }
}

/// The schema of a flat, non-nullable `large_utf8` / `large_binary` field named `name`.
fn schema(kind: VarLenKind) -> ArrowSchema {
    let private = Box::new(SchemaPrivate {
        _format: format(kind).to_owned(),
    });
    let format_ptr = private._format.as_ptr();
    ArrowSchema {
        format: format_ptr,
        name: c"".as_ptr(),
        metadata: ptr::null(),
        flags: 0, // not nullable: zarr strings have no missing elements
        n_children: 0,
        children: ptr::null_mut(),
        dictionary: ptr::null_mut(),
        release: Some(release_schema),
        private_data: Box::into_raw(private).cast(),
    }
}

/// The array: no validity bitmap, the offsets (n + 1 i64s) and the values, pointing into
/// `v`'s host buffers, which the private data keeps alive.
fn array(v: &VarLenBuffer) -> PyResult<ArrowArray> {
    let (offsets, values) = (v.offsets().clone(), v.values().clone());
    let host = |b: &Buffer, what: &str| {
        b.host_ptr().ok_or_else(|| {
            crate::errors::ZarrbufError::new_err(format!(
                "__arrow_c_array__ needs host memory; the {what} are in {} (read with \
                 device=\"cpu\", or take .offsets and .values through DLPack)",
                b.memory()
            ))
        })
    };
    // A zero-length buffer may have no allocation; Arrow wants a non-null pointer anyway.
    let dangling = ptr::NonNull::<i64>::dangling().as_ptr().cast::<c_void>();
    let offsets_ptr = host(&offsets, "offsets")?.cast::<c_void>();
    let values_ptr = if values.is_empty() {
        dangling
    } else {
        host(&values, "values")?.cast::<c_void>()
    };
    let mut pointers = Box::new([ptr::null::<c_void>(), offsets_ptr, values_ptr]);
    let buffers = pointers.as_mut_ptr();
    let length = i64::try_from(v.len()).map_err(|_| {
        crate::errors::ZarrbufError::new_err(format!("{} elements are too many for Arrow", v.len()))
    })?;
    let private = Box::new(ArrayPrivate {
        _pointers: pointers,
        _offsets: offsets,
        _values: values,
    });
    Ok(ArrowArray {
        length,
        null_count: 0,
        offset: 0,
        n_buffers: 3,
        n_children: 0,
        buffers,
        children: ptr::null_mut(),
        dictionary: ptr::null_mut(),
        release: Some(release_array),
        private_data: Box::into_raw(private).cast(),
    })
}

/// `(schema capsule, array capsule)` as the Arrow PyCapsule interface wants them. A capsule
/// nobody consumed releases its struct when it is deleted (a consumer moves the struct out
/// and clears its `release`).
pub(crate) fn capsules<'py>(py: Python<'py>, v: &VarLenBuffer) -> PyResult<Bound<'py, PyTuple>> {
    let array = array(v)?;
    let schema = schema(v.kind());
    let schema = PyCapsule::new_with_value_and_destructor(
        py,
        schema,
        c"arrow_schema",
        |mut s: ArrowSchema, _| {
            if let Some(release) = s.release {
                // SAFETY: `s` is the struct this capsule owned, moved out of it; a consumer
                // that took it cleared `release`, so this runs only for an unconsumed one.
                unsafe { release(&mut s) };
            }
        },
    )?;
    let array = PyCapsule::new_with_value_and_destructor(
        py,
        array,
        c"arrow_array",
        |mut a: ArrowArray, _| {
            if let Some(release) = a.release {
                // SAFETY: as for the schema capsule.
                unsafe { release(&mut a) };
            }
        },
    )?;
    PyTuple::new(py, [schema.into_any(), array.into_any()])
}

/// The Arrow schema alone (`__arrow_c_schema__`).
pub(crate) fn schema_capsule<'py>(
    py: Python<'py>,
    kind: VarLenKind,
) -> PyResult<Bound<'py, PyCapsule>> {
    PyCapsule::new_with_value_and_destructor(
        py,
        schema(kind),
        c"arrow_schema",
        |mut s: ArrowSchema, _| {
            if let Some(release) = s.release {
                // SAFETY: as in `capsules`.
                unsafe { release(&mut s) };
            }
        },
    )
}
