//! Where the staged write puts finished chunks ([`ChunkSink`]): a sync array here, an async
//! one in `api/write_async.rs`. The write driver and the store threads both write through it.

use crate::errors::Result;
use crate::zarr::chunk_error;
use zarrs::array::{Array, ArrayBytes, ArraySubset, CodecOptions};
use zarrs::storage::ReadableWritableStorageTraits;

/// Where the staged write puts finished chunks: a sync array, or an async one driven from
/// the blocking pipeline thread.
pub(crate) trait ChunkSink: Sync {
    /// Removes a chunk that holds only the fill value.
    fn erase(&self, indices: &[u64]) -> Result<()>;
    /// Stores fully encoded chunk bytes.
    ///
    /// # Safety
    /// `encoded` must be a valid encoding of the chunk under the array's codec chain.
    unsafe fn store_encoded(&self, indices: &[u64], encoded: bytes::Bytes) -> Result<()>;
    /// Merges `bytes` (native, C order) into `local` of the chunk (read-modify-write).
    fn store_subset(
        &self,
        indices: &[u64],
        local: &ArraySubset,
        bytes: &[u8],
        opts: &CodecOptions,
    ) -> Result<()>;
}

impl<S: ?Sized + ReadableWritableStorageTraits + 'static> ChunkSink for Array<S> {
    fn erase(&self, indices: &[u64]) -> Result<()> {
        self.erase_chunk(indices)
            .map_err(|e| chunk_error(self, indices, e))
    }

    unsafe fn store_encoded(&self, indices: &[u64], encoded: bytes::Bytes) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.store_encoded_chunk(indices, encoded) }
            .map_err(|e| chunk_error(self, indices, e))
    }

    fn store_subset(
        &self,
        indices: &[u64],
        local: &ArraySubset,
        bytes: &[u8],
        opts: &CodecOptions,
    ) -> Result<()> {
        self.store_chunk_subset_opt(indices, local, ArrayBytes::from(bytes), opts)
            .map_err(|e| chunk_error(self, indices, e))
    }
}
