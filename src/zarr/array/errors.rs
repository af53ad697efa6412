//! Errors about an array or one of its chunks, naming the array (and the chunk's indices and
//! key) and keeping the cause as the source; and the guard that turns a panic inside zarrs
//! on damaged data into such an error.

use crate::errors::{BoxError, Error, Result};
use zarrs::array::Array;

/// An error about `array`, keeping `e` (zarrs' error, or a sentence) as its source.
pub(crate) fn zarr_error<S: ?Sized>(array: &Array<S>, e: impl Into<BoxError>) -> Error {
    let source: BoxError = e.into();
    Error::zarr(array.path().as_str(), source.to_string(), Some(source))
}

/// Runs `f` (a call into zarrs on data read from a store) and turns a panic inside it into
/// an error about `array`: zarrs 0.23 has arithmetic that overflows on some damaged shard
/// indexes (a panic in builds with overflow checks), and nothing may panic on user input.
pub(crate) fn guard_zarrs<S: ?Sized, T>(
    array: &Array<S>,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let what =
            crate::errors::panic_message(payload.as_ref()).unwrap_or_else(|| "a panic".into());
        Err(Error::zarr(
            array.path().as_str(),
            format!("zarrs failed on damaged data ({what}); the store is corrupt"),
            None,
        ))
    })
}

/// An error about one chunk of `array`, naming its indices and key; `e` is kept as the source.
pub(crate) fn chunk_error<S: ?Sized>(
    array: &Array<S>,
    indices: &[u64],
    e: impl Into<BoxError>,
) -> Error {
    let source: BoxError = e.into();
    Error::zarr(
        array.path().as_str(),
        format!(
            "chunk {indices:?} (key {}): {source}",
            array.chunk_key(indices)
        ),
        Some(source),
    )
}
