//! The largest a stored chunk may be: no encoding of a chunk takes more bytes than its codec
//! chain's encoded size (exact, or a bound), so a larger stored chunk is damaged and is
//! refused before its bytes are fetched and decoded.
//!
//! A stored chunk's size is asked of the store only where the answer is cheap: a directory
//! store (file metadata) and a zip file (the central directory's declared size, which is what
//! zarrs_zip would inflate). An object store would need one more request per chunk, which
//! costs more than the check saves; there the bounded decoders stop a damaged chunk instead.
//! This also keeps a whole read of a huge (sparse) unsharded chunk file from reading it
//! whole before its size is checked. Reads leave shards to their index (`ShardIndex`): a
//! shard some writers updated in place holds dead bytes beyond any encoding of it.

use crate::errors::Result;
use crate::zarr::chunk_error;
use zarrs::array::{Array, ArrayShardedExt, ArrayToBytesCodecTraits, BytesRepresentation};
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

/// Why a chunk of `array` at `indices` stored as `stored` bytes cannot be a chunk of it: it is
/// larger than any encoding of it takes (than its exact encoded size, when the chain fixes
/// it), or, where the chain does not bound it, than half the memory this process may still
/// take. `None`: the size is possible.
pub(crate) fn stored_size_problem<S: ?Sized>(
    array: &Array<S>,
    indices: &[u64],
    stored: u64,
) -> Option<String> {
    let least = checksum_bytes(&array.codecs());
    if stored < least {
        return Some(format!(
            "stored as {stored} bytes, fewer than the {least} bytes of checksums every \
             encoding of it ends with: the chunk is damaged"
        ));
    }
    let shape = array.chunk_shape(indices).ok()?;
    let rep = array
        .codecs()
        .encoded_representation(&shape, array.data_type(), array.fill_value())
        .ok()?;
    match rep {
        BytesRepresentation::FixedSize(n) if stored != n => Some(format!(
            "stored as {stored} bytes, but its encoding takes exactly {n}: the chunk is damaged"
        )),
        BytesRepresentation::BoundedSize(n) if stored > n => Some(format!(
            "stored as {stored} bytes, more than any encoding of it takes ({n} at most): the \
             chunk is damaged"
        )),
        BytesRepresentation::UnboundedSize => {
            let room = crate::memory_limit::available_bytes()? / 2;
            (stored > room).then(|| {
                format!(
                    "stored as {stored} bytes, more than this process can read and decode \
                     ({room})"
                )
            })
        }
        _ => None,
    }
}

/// Refuses the chunk at `indices` of an unsharded array before it is fetched when its store
/// tells its size cheaply (see the module docs) and that size is not one of its encodings
/// ([`stored_size_problem`]).
pub(crate) fn check_stored_size<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    indices: &[u64],
) -> Result<()> {
    let storage = array.storage();
    if array.is_sharded() || !crate::stores::sizes_are_cheap(storage.as_ref()) {
        return Ok(());
    }
    let stored = storage
        .size_key(&array.chunk_key(indices))
        .map_err(|e| chunk_error(array, indices, e))?;
    refuse(array, indices, stored)
}

/// [`check_stored_size`] for an async store.
pub(crate) async fn check_stored_size_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    indices: &[u64],
) -> Result<()> {
    let storage = array.storage();
    if array.is_sharded() || !crate::stores::sizes_are_cheap(storage.as_ref()) {
        return Ok(());
    }
    let stored = storage
        .size_key(&array.chunk_key(indices))
        .await
        .map_err(|e| chunk_error(array, indices, e))?;
    refuse(array, indices, stored)
}

/// Why a chunk stored in its decoded layout (no bytes-to-bytes codecs) as `stored` bytes is
/// not one whose decoded size is `expected` bytes: the message a whole read of it gives.
pub(crate) fn not_exact_size(stored: u64, expected: u64) -> String {
    format!(
        "stored as {stored} bytes, but its encoding takes exactly {expected}: the chunk is \
         damaged"
    )
}

/// Whether the unsharded chunk at `indices` is stored (`false`: not stored), refusing it
/// unless it is exactly `expected` bytes: the check a read of a byte range of a chunk stored
/// in its decoded layout makes before it uses any byte of the range (see
/// `pipeline/fetch/unit_ranges.rs`). One size request: for stores that tell sizes cheaply only.
pub(crate) fn check_exact_size<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    indices: &[u64],
    expected: u64,
) -> Result<bool> {
    let stored = array
        .storage()
        .size_key(&array.chunk_key(indices))
        .map_err(|e| chunk_error(array, indices, e))?;
    exact(array, indices, stored, expected)
}

/// [`check_exact_size`] for an async store.
pub(crate) async fn check_exact_size_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    indices: &[u64],
    expected: u64,
) -> Result<bool> {
    let stored = array
        .storage()
        .size_key(&array.chunk_key(indices))
        .await
        .map_err(|e| chunk_error(array, indices, e))?;
    exact(array, indices, stored, expected)
}

fn exact<S: ?Sized>(
    array: &Array<S>,
    indices: &[u64],
    stored: Option<u64>,
    expected: u64,
) -> Result<bool> {
    match stored {
        None => Ok(false),
        Some(n) if n == expected => Ok(true),
        Some(n) => Err(chunk_error(array, indices, not_exact_size(n, expected))),
    }
}

/// The bytes every encoding under `chain` takes at least: 4 for each 32-bit checksum codec
/// in the run that ends the chain (a compressor after a checksum could shrink it). zarrs'
/// partial decoders of those codecs strip the 4 bytes unchecked, so a shorter chunk must not
/// reach them.
fn checksum_bytes(chain: &zarrs::array::CodecChain) -> u64 {
    const CHECKSUMS: [&str; 5] = [
        "crc32c",
        "crc32",
        "adler32",
        "fletcher32",
        "jenkins_lookup3",
    ];
    let trailing = chain
        .bytes_to_bytes_codecs()
        .iter()
        .rev()
        .take_while(|c| {
            c.name_v3().is_some_and(|n| {
                let base = n.rsplit('.').next().unwrap_or(&n);
                CHECKSUMS.contains(&base)
            })
        })
        .count();
    4 * trailing as u64
}

fn refuse<S: ?Sized>(array: &Array<S>, indices: &[u64], stored: Option<u64>) -> Result<()> {
    match stored.and_then(|n| stored_size_problem(array, indices, n)) {
        Some(why) => Err(chunk_error(array, indices, why)),
        None => Ok(()),
    }
}
