//! `ChunkCache`: zarrbuf's decoded-chunk cache seen from Python (`zarrbuf.ChunkCache`).

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A byte-limited cache of decoded chunks, shared by the arrays opened with it
/// (`zarrbuf.open(..., cache=c)`); copies share one cache.
#[pyclass(frozen, name = "ChunkCache", module = "zarrbuf._zarrbuf")]
#[derive(Clone)]
pub(crate) struct PyChunkCache {
    pub(crate) inner: zarrbuf::cache::ChunkCache,
}

#[pymethods]
impl PyChunkCache {
    /// A cache holding at most `capacity_bytes` of decoded chunks.
    #[new]
    fn new(capacity_bytes: u64) -> Self {
        PyChunkCache {
            inner: zarrbuf::cache::ChunkCache::new(capacity_bytes),
        }
    }

    /// The capacity in bytes.
    #[getter]
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }

    /// `{"hits", "misses", "inserted_bytes", "resident_bytes", "evictions", "entries"}`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("hits", s.hits)?;
        d.set_item("misses", s.misses)?;
        d.set_item("inserted_bytes", s.inserted_bytes)?;
        d.set_item("resident_bytes", s.resident_bytes)?;
        d.set_item("evictions", s.evictions)?;
        d.set_item("entries", s.entries)?;
        Ok(d)
    }

    /// Drops every cached chunk (the counts stay).
    fn clear(&self) {
        self.inner.clear();
    }

    fn __repr__(&self) -> String {
        let s = self.inner.stats();
        format!(
            "<zarrbuf.ChunkCache capacity={} resident={} entries={} hits={} misses={}>",
            self.inner.capacity(),
            s.resident_bytes,
            s.entries,
            s.hits,
            s.misses
        )
    }
}
