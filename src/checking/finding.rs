//! What `check` finds: the [`Problem`] kinds and a [`Finding`] per stored key, how a decode
//! error becomes one ([`guarded`]), and which chunk a store key names ([`chunk_indices`]).
//! Both the check (`mod.rs`) and the repair (`repair.rs`) use them.

use zarrs::array::ArrayError;
use zarrs::storage::StorageError;

/// What is wrong with a stored key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Problem {
    /// The chunk (or inner chunk) does not decode.
    Undecodable,
    /// It decodes, but to the wrong number of bytes (a truncated uncompressed chunk).
    WrongSize,
    /// A checksum codec (crc32c, adler32, fletcher32…) says the bytes changed.
    Checksum,
    /// A chunk key whose indices lie outside the chunk grid (left by a larger array, or the
    /// metadata's shape was changed). Reads never touch it, so it is a note, and a repair
    /// leaves it: nothing but the metadata says it is not wanted.
    OutsideGrid,
    /// A temporary file of a write that was killed (its writer is gone).
    Leftover,
    /// A chunk or metadata key that cannot be read: an I/O error (permission denied, a
    /// failing disk), a directory, FIFO, socket or device where a file belongs, or a
    /// symbolic link out of the store. Never removed by a repair: nothing proves the data
    /// behind it damaged.
    Unreadable,
    /// Metadata that zarrbuf's reads refuse (a data type they cannot hold, chunk shapes that
    /// do not fit the array): nothing of the array reads, so its chunks are not checked.
    Metadata,
    /// A temporary file whose writer still runs (a write in progress; reported as a note
    /// and left alone).
    InFlight,
    /// A file that is neither metadata, a chunk nor a temporary file (a note: it does not
    /// make the check fail, and a repair leaves it).
    Unknown,
}

impl Problem {
    /// Whether this problem makes the check fail (everything but the notes
    /// [`Problem::Unknown`], [`Problem::InFlight`] and [`Problem::OutsideGrid`], which no
    /// read touches).
    pub fn is_damage(self) -> bool {
        !matches!(
            self,
            Problem::Unknown | Problem::InFlight | Problem::OutsideGrid
        )
    }

    /// Whether `check --repair` may act on it: chunks whose bytes were read and failed to
    /// decode, and temporary files whose writer is gone.
    pub fn is_repairable(self) -> bool {
        matches!(
            self,
            Problem::Undecodable | Problem::WrongSize | Problem::Checksum | Problem::Leftover
        )
    }

    /// A short name for the report (`undecodable`, `wrong-size`, …).
    pub fn name(self) -> &'static str {
        match self {
            Problem::Undecodable => "undecodable",
            Problem::WrongSize => "wrong-size",
            Problem::Checksum => "checksum",
            Problem::OutsideGrid => "outside-grid",
            Problem::Leftover => "leftover",
            Problem::Unreadable => "unreadable",
            Problem::InFlight => "in-flight",
            Problem::Metadata => "metadata",
            Problem::Unknown => "unknown",
        }
    }
}

/// One problem with one stored key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The store key (relative to the store root), e.g. `t/c/0/1`.
    pub key: String,
    /// The inner chunk's indices within the shard, when the problem is one inner chunk.
    pub inner: Option<Vec<u64>>,
    /// What is wrong.
    pub problem: Problem,
    /// The reason, in words.
    pub detail: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.key)?;
        if let Some(inner) = &self.inner {
            write!(f, " inner chunk {inner:?}")?;
        }
        write!(f, ": {}: {}", self.problem.name(), self.detail)
    }
}

/// The chunk indices whose key is `key` in `array` (a store key relative to the store root),
/// or `None` when `key` is not a chunk key of the array's chunk key encoding.
///
/// ```
/// let a = zarrbuf::open("fixtures/data/v3_shard_end.zarr", "")?;
/// assert_eq!(zarrbuf::check::chunk_indices(&a, "c/1/0"), Some(vec![1, 0]));
/// assert_eq!(zarrbuf::check::chunk_indices(&a, "c/1"), None);
/// assert_eq!(zarrbuf::check::chunk_indices(&a, "c/x/0"), None);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn chunk_indices<S: ?Sized>(array: &zarrs::array::Array<S>, key: &str) -> Option<Vec<u64>> {
    let prefix = array.path().as_str().trim_start_matches('/');
    let rel = if prefix.is_empty() {
        key
    } else {
        key.strip_prefix(prefix)?.strip_prefix('/')?
    };
    let ndim = array.dimensionality();
    let body = ["c/", "c.", ""].iter().filter_map(|p| rel.strip_prefix(p));
    for body in body.chain((rel == "c").then_some("")) {
        let parts: Vec<&str> = if body.is_empty() {
            Vec::new()
        } else {
            body.split(['/', '.']).collect()
        };
        if parts.len() != ndim {
            continue;
        }
        let Ok(indices) = parts
            .iter()
            .map(|p| p.parse::<u64>())
            .collect::<Result<Vec<u64>, _>>()
        else {
            continue;
        };
        if array.chunk_key(&indices).as_str() == key {
            return Some(indices);
        }
    }
    None
}

/// Runs a zarrs decode of stored (maybe damaged) bytes; a panic inside zarrs (it has
/// arithmetic that overflows on some damaged shard indexes) becomes an undecodable chunk.
pub(super) fn guarded<T>(
    f: impl FnOnce() -> std::result::Result<T, ArrayError>,
) -> std::result::Result<T, (Problem, String)> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err((problem_of(&e), e.to_string())),
        Err(_) => Err((Problem::Undecodable, "zarrs failed on damaged data".into())),
    }
}

/// The problem a store error reading a chunk's (or a shard index's) bytes shows: unreadable
/// for an I/O error (never removed by a repair), undecodable otherwise.
pub(super) fn storage_problem(e: &StorageError) -> (Problem, String) {
    let problem = if unreadable(e) {
        Problem::Unreadable
    } else if failed_crc(e) {
        Problem::Checksum
    } else {
        Problem::Undecodable
    };
    (problem, e.to_string())
}

/// Whether a store error means the bytes could not be read at all (an I/O error other than
/// a file ending early, which is damage of the bytes read).
fn unreadable(e: &StorageError) -> bool {
    matches!(e, StorageError::IOError(io) if io.kind() != std::io::ErrorKind::UnexpectedEof)
}

/// Whether a store error is a zip entry failing its CRC-32 check (`store/zip_entry_read.rs`).
fn failed_crc(e: &StorageError) -> bool {
    matches!(e, StorageError::Other(m) if m.contains("fails its CRC-32 check"))
}

/// The problem a decode error shows.
pub(super) fn problem_of(e: &ArrayError) -> Problem {
    use zarrs::array::CodecError as C;
    match e {
        ArrayError::StorageError(s) | ArrayError::CodecError(C::StorageError(s))
            if unreadable(s) =>
        {
            Problem::Unreadable
        }
        ArrayError::StorageError(s) | ArrayError::CodecError(C::StorageError(s))
            if failed_crc(s) =>
        {
            Problem::Checksum
        }
        ArrayError::CodecError(C::UnexpectedChunkDecodedSize(_)) => Problem::WrongSize,
        // The bounded decoders' words for a chunk of the wrong decoded size.
        ArrayError::CodecError(C::Other(m))
            if m.contains("decodes to") || m.contains("decoded bytes, ") =>
        {
            Problem::WrongSize
        }
        ArrayError::CodecError(C::InvalidChecksum) => Problem::Checksum,
        ArrayError::CodecError(C::Other(m)) if m.to_ascii_lowercase().contains("checksum") => {
            Problem::Checksum
        }
        _ => Problem::Undecodable,
    }
}
