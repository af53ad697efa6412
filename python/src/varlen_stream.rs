//! `VarLenReadStream`, the iterator `VarLenHandle.read_stream` returns: the twin of
//! `ReadStream` (python/src/array.rs) for arrays of strings or bytes, yielding `VarLenArray`s.

use crate::array::lock;
use crate::errors::ZarrbufError;
use crate::errors::py_err;
use crate::varlen::{VarLenArray, reshape};
use pyo3::prelude::*;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

/// The iterator `read_stream` of a string or bytes array returns: `next()` waits (GIL
/// released) for the next selection's `VarLenArray`, in order, while the reads ahead of it
/// go on. A failed selection raises `ZarrbufError` naming it, and `next()` may be called
/// again to go on; `close()` (or dropping it) cancels the reads in flight.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
pub(crate) struct VarLenReadStream {
    inner: Mutex<Option<zarrbuf::stream::VarLenReadStream>>,
    drops: Arc<Mutex<VecDeque<Vec<usize>>>>,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl VarLenReadStream {
    /// `stream`, whose subsets' axes to drop and iterator error are in `drops` and `error`.
    pub(crate) fn new(
        stream: zarrbuf::stream::VarLenReadStream,
        drops: Arc<Mutex<VecDeque<Vec<usize>>>>,
        error: Arc<Mutex<Option<PyErr>>>,
    ) -> Self {
        VarLenReadStream {
            inner: Mutex::new(Some(stream)),
            drops,
            error,
        }
    }
}

/// `v` without the (size-1) axes `drop`.
fn drop_axes(v: zarrbuf::VarLenBuffer, drop: &[usize]) -> zarrbuf::Result<zarrbuf::VarLenBuffer> {
    let kept = v
        .shape()
        .iter()
        .enumerate()
        .filter(|(k, _)| !drop.contains(k))
        .map(|(_, &n)| n)
        .collect();
    reshape(v, kept)
}

#[pymethods]
impl VarLenReadStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<VarLenArray>> {
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
                let v = result.and_then(|v| drop_axes(v, &drop)).map_err(py_err)?;
                Ok(Some(VarLenArray { v }))
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
