//! The one error type of zarrbuf.

use crate::place::{Device, ParseDeviceError};

/// Everything that can go wrong in zarrbuf.
///
/// Messages say what was asked, what was found, and what to do about it.
///
/// ```
/// use zarrbuf::{Buffer, Error};
/// let b = Buffer::from_vec(vec![1u8, 2, 3]);
/// let err = b.try_slice(2..9).unwrap_err();
/// assert!(matches!(err, Error::OutOfBounds(_)));
/// println!("{err}");
/// ```
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The requested device (or CUDA itself) is not available on this machine.
    #[error("device unavailable: {0}")]
    DeviceUnavailable(String),
    /// A device ran out of memory for an allocation that would otherwise be valid.
    #[error(
        "out of memory on {device}: could not allocate {requested} bytes ({detail}); free memory or read a smaller subset"
    )]
    OutOfMemory {
        /// Where the allocation was attempted.
        device: Device,
        /// Bytes requested.
        requested: usize,
        /// What the allocator reported.
        detail: String,
    },
    /// A size that can never be allocated (overflow, larger than the address space).
    #[error("impossible allocation size: {0}")]
    InvalidSize(String),
    /// Host code asked for the bytes of memory it cannot touch (device memory).
    #[error(
        "{0}: the memory lives on a device and cannot be read from the host; copy it first with `to_host()` or `to_bytes()`"
    )]
    NotHostAccessible(String),
    /// An output (or a decode) larger than the memory it may take: a read's output over
    /// [`ReadOptions::max_bytes`](crate::ReadOptions::max_bytes) (by default the memory this
    /// process may still take), a copy's chunks over its block memory.
    #[error(
        "{what} takes {bytes} bytes ({}), more than the limit of {limit} bytes ({}, {limit_from}); {advice}",
        human_bytes(*bytes),
        human_bytes(*limit)
    )]
    TooLarge {
        /// What would take the memory ("the read of array /x, subset [0..10]").
        what: String,
        /// Bytes it takes.
        bytes: u64,
        /// The limit.
        limit: u64,
        /// Where the limit comes from ("the memory available to this process", "--memory").
        limit_from: String,
        /// What to do ("read a subset of it ...").
        advice: String,
    },
    /// An index, range or subset outside the buffer or array.
    #[error("out of bounds: {0}")]
    OutOfBounds(String),
    /// Shapes, strides or element counts that do not agree.
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// A data type that does not match what was asked for.
    #[error("data type mismatch: {0}")]
    DataType(String),
    /// An argument that is invalid on its own (bad axis list, bad device string, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Two operations on the same memory that would race (a host borrow is alive while writing).
    #[error("buffer busy: {0}")]
    Busy(String),
    /// A CUDA driver or NVRTC call failed.
    #[error("CUDA error in {call}: {message}")]
    Cuda {
        /// The failing call.
        call: &'static str,
        /// The driver's message.
        message: String,
        /// The driver's error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A kernel rejected its arguments.
    #[error("kernel error: {0}")]
    Kernel(#[from] zarrbuf_codecs::CodecError),
    /// zarrs reported an error for an array.
    #[error("zarr array {array}: {message}")]
    Zarr {
        /// The array (store and path) concerned.
        array: String,
        /// What zarrs said, with context.
        message: String,
        /// zarrs' (or the store's) own error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A store could not be opened or accessed.
    #[error("store {store}: {message}")]
    Store {
        /// The store location.
        store: String,
        /// What went wrong.
        message: String,
        /// The store's own error (object_store, I/O), when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The buffer was described lazily ([`crate::Buffer::lazy`]) and nothing has written it
    /// yet, so there are no bytes to read or hand out.
    #[error(
        "{0}: the buffer has no memory yet (it was made lazily and nothing has written it); write it first, or call `ensure_allocated()` to get zeros"
    )]
    NotAllocated(String),
    /// A zarr group was opened where an array was expected; `arrays` are the paths (from
    /// the store root) of the arrays under it, any of which opens.
    #[error("{group} is a zarr group, not an array; {}", group_hint(arrays))]
    IsGroup {
        /// `store` or `store:path`.
        group: String,
        /// The arrays under the group, as array paths from the store root.
        arrays: Vec<String>,
    },
    /// Something valid that zarrbuf does not do (yet).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Host I/O failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file concerned.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `zarrbuf check` found damage: chunks that do not decode, leftovers of killed writes.
    #[error(
        "{array} is damaged: {count} problem(s) found (listed in the report); in a directory store `zarrbuf check --repair` removes leftovers and undecodable chunks and keeps the good inner chunks of damaged shards (keys that cannot be read are never removed: fix their permissions, or move away what is not a file); in an object store upload the listed chunks again or delete them (a missing chunk reads as the fill value); or copy the array again"
    )]
    Damaged {
        /// `store` or `store:path`.
        array: String,
        /// How many keys are damaged.
        count: usize,
    },
    /// The operation was cancelled (its future was dropped or a callback asked to stop).
    #[error("cancelled: {0}")]
    Cancelled(String),
    /// One subset of a read stream failed; `source` says why. The stream goes on with the
    /// next subset.
    #[error("read stream item {index} (subset {subset}): {source}")]
    StreamItem {
        /// The item's position in the stream, from 0.
        index: usize,
        /// The subset, as ranges (`[0..64, 0..512]`).
        subset: String,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
}

/// The second half of [`Error::IsGroup`]'s message: the arrays to open instead.
fn group_hint(arrays: &[String]) -> String {
    const SHOWN: usize = 20;
    let Some(first) = arrays.first() else {
        return "it holds no arrays".into();
    };
    let mut names = arrays
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if arrays.len() > SHOWN {
        names.push_str(&format!(" and {} more", arrays.len() - SHOWN));
    }
    format!(
        "the arrays in it: {names}. Open one by its path (e.g. --path {first} on the command \
         line, or as the array path of zarrbuf.open); `zarrbuf info` on the group shows the \
         whole hierarchy"
    )
}

/// `bytes` in binary units with one decimal (`8.0 TiB`), for messages.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// An underlying error kept as the [`std::error::Error::source`] of zarrbuf's [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The message a panic carries (`panic!("…")` with or without arguments), if any: for the
/// guards that turn a panic into an error.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
}

/// `Result` with zarrbuf's [`Error`] as the default error type.
///
/// ```
/// fn half(n: usize) -> zarrbuf::Result<usize> { Ok(n / 2) }
/// assert_eq!(half(4).unwrap(), 2);
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<ParseDeviceError> for Error {
    fn from(e: ParseDeviceError) -> Self {
        Error::InvalidArgument(e.to_string())
    }
}

impl Error {
    /// Wraps a CUDA driver error with the name of the failing call (kept as the source).
    pub(crate) fn cuda(call: &'static str, err: cudarc::driver::DriverError) -> Self {
        Error::Cuda {
            call,
            message: format!("{err:?}"),
            source: Some(Box::new(err)),
        }
    }

    /// An error about zarr array `array`: `message` says what, `source` is the error behind it.
    pub(crate) fn zarr(
        array: impl Into<String>,
        message: impl Into<String>,
        source: Option<BoxError>,
    ) -> Self {
        Error::Zarr {
            array: array.into(),
            message: message.into(),
            source,
        }
    }

    /// An error about store `store`: `message` says what, `source` is the error behind it.
    pub(crate) fn store(
        store: impl Into<String>,
        message: impl Into<String>,
        source: Option<BoxError>,
    ) -> Self {
        Error::Store {
            store: store.into(),
            message: message.into(),
            source,
        }
    }
}
