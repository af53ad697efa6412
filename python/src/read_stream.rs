//! `ReadStream`, the iterator `Array.read_stream` returns for both kinds of arrays: it
//! yields `NDArray`s (fixed-size elements) or `VarLenArray`s (strings, bytes), as zarrbuf's
//! one `BlockingReadStream<T>` yields `NDBuffer`s or `VarLenBuffer`s; and `PySubsets`, the
//! Python iterator of selections it pulls from.

use crate::errors::{ZarrbufError, py_err};
use crate::inner::Inner;
use crate::ndarray::NDArray;
use crate::runtime::runtime;
use crate::selection::{drop_axes, drop_varlen_axes, to_ranges};
use crate::varlen::VarLenArray;
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::PyIterator;
use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use zarrbuf::options::StreamOptions;
use zarrbuf::stream::BlockingReadStream;
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, BufferPrototype, NDBuffer, ReadOutput, VarLenBuffer,
};

/// The subsets of a read stream, pulled from a Python iterator of `(ranges, drop)` pairs
/// (taking the GIL for each pull); the axes to drop go to the consumer in order, and an
/// error of the Python iterator ends the subsets and is raised after the items before it.
pub(crate) struct PySubsets {
    iter: Py<PyIterator>,
    handover: Handover,
}

/// What [`PySubsets`] hands the [`ReadStream`] reading its subsets: the axes to drop from
/// each result, in order, and the Python iterator's error.
#[derive(Clone, Default)]
pub(crate) struct Handover {
    drops: Arc<Mutex<VecDeque<Vec<usize>>>>,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl PySubsets {
    /// The subsets `subsets` (a Python iterable of `(ranges, drop)` pairs) yields.
    pub(crate) fn new(subsets: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PySubsets {
            iter: subsets.try_iter()?.unbind(),
            handover: Handover::default(),
        })
    }

    /// For [`ReadStream::new`] (taken before the subsets go to zarrbuf's stream).
    pub(crate) fn handover(&self) -> Handover {
        self.handover.clone()
    }
}

impl Iterator for PySubsets {
    type Item = Vec<Range<u64>>;

    fn next(&mut self) -> Option<Self::Item> {
        Python::attach(|py| {
            let next = self.iter.bind(py).clone().next()?;
            let pair = next.and_then(|item| item.extract::<(Vec<(u64, u64)>, Vec<usize>)>());
            match pair {
                Ok((ranges, drop)) => {
                    lock(&self.handover.drops).push_back(drop);
                    Some(to_ranges(&ranges))
                }
                Err(e) => {
                    *lock(&self.handover.error) = Some(e);
                    None
                }
            }
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// zarrbuf's stream of either kind of result.
pub(crate) enum Stream {
    Fixed(BlockingReadStream<NDBuffer>),
    VarLen(BlockingReadStream<VarLenBuffer>),
}

/// The stream of `pulled`'s subsets of `inner`, read as `T`s on `proto`; an async array's
/// runs on [`runtime`], the consumer waiting for it.
pub(crate) fn blocking_stream<T: ReadOutput>(
    inner: &Inner,
    pulled: PySubsets,
    proto: &BufferPrototype,
    opts: &StreamOptions,
) -> zarrbuf::Result<BlockingReadStream<T>> {
    match inner {
        Inner::Sync(a) => Ok(ArrayReadExt::read_stream_as::<T, _>(
            a.as_ref(),
            pulled,
            proto,
            opts,
        )),
        Inner::Async(a) => {
            let _enter = runtime()?.enter();
            Ok(
                ArrayReadAsyncExt::read_stream_as::<T, _>(a.as_ref(), pulled, proto, opts)?
                    .blocking(),
            )
        }
    }
}

/// One item of a [`Stream`].
enum Item {
    Fixed(zarrbuf::Result<NDBuffer>),
    VarLen(zarrbuf::Result<VarLenBuffer>),
}

impl Stream {
    fn next(&mut self) -> Option<Item> {
        match self {
            Stream::Fixed(s) => s.next().map(Item::Fixed),
            Stream::VarLen(s) => s.next().map(Item::VarLen),
        }
    }

    fn in_flight(&self) -> usize {
        match self {
            Stream::Fixed(s) => s.in_flight(),
            Stream::VarLen(s) => s.in_flight(),
        }
    }
}

/// The iterator `Array.read_stream` returns: `next()` waits (GIL released) for the next
/// selection's result (an `NDArray`, or a `VarLenArray` for strings and bytes), in order,
/// while the reads ahead of it go on. A failed selection raises `ZarrbufError` naming it,
/// and `next()` may be called again to go on; `close()` (or dropping it) cancels the reads
/// in flight.
#[pyclass(frozen, module = "zarrbuf._zarrbuf")]
pub(crate) struct ReadStream {
    inner: Mutex<Option<Stream>>,
    handover: Handover,
}

impl ReadStream {
    /// `stream`, reading the subsets of the [`PySubsets`] that gave `handover`.
    pub(crate) fn new(stream: Stream, handover: Handover) -> Self {
        ReadStream {
            inner: Mutex::new(Some(stream)),
            handover,
        }
    }
}

#[pymethods]
impl ReadStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
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
        let Some(item) = item else {
            return match lock(&self.handover.error).take() {
                Some(e) => Err(e),
                None => Ok(None),
            };
        };
        let drop = lock(&self.handover.drops).pop_front().unwrap_or_default();
        let out = match item {
            Item::Fixed(result) => {
                let nd = result.and_then(|nd| drop_axes(nd, &drop)).map_err(py_err)?;
                NDArray { nd }.into_py_any(py)?
            }
            Item::VarLen(result) => {
                let v = result
                    .and_then(|v| drop_varlen_axes(v, &drop))
                    .map_err(py_err)?;
                VarLenArray { v }.into_py_any(py)?
            }
        };
        Ok(Some(out))
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
