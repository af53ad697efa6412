//! How zarrbuf's errors and panics reach Python: `ZarrbufError`, and running zarrbuf work
//! with the GIL released.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};

// Named `zarrbuf.ZarrbufError` (where `zarrbuf/__init__.py` exports it), not after the
// extension module: pickle finds a class by `__module__` and `__qualname__`, and a worker
// process (a DataLoader's, a process pool's) can only send its error back when that name
// imports. Instances keep their args and `__dict__` through BaseException's `__reduce__`.
create_exception!(
    zarrbuf,
    ZarrbufError,
    PyException,
    "An error reported by zarrbuf (the message is zarrbuf's)."
);

/// zarrbuf's error, with the sources its message does not already spell out.
pub(crate) fn py_err(e: zarrbuf::Error) -> PyErr {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = s.source();
    }
    ZarrbufError::new_err(msg)
}

/// Runs zarrbuf work with the GIL released, turning errors and panics into `ZarrbufError`.
pub(crate) fn run<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> zarrbuf::Result<T> + Send,
) -> PyResult<T> {
    let out = py.detach(|| catch_unwind(AssertUnwindSafe(f)));
    match out {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(py_err(e)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(ZarrbufError::new_err(format!(
                "internal error in zarrbuf (please report): {what}"
            )))
        }
    }
}
