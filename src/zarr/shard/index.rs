//! Locating inner chunks of sharded arrays: the shard index, read by byte range and cached.
//!
//! zarrs' own `subchunk_byte_range` overflows on missing inner chunks (offset and size are
//! both u64::MAX), so the index is decoded here with zarrs' index codecs and interpreted by
//! zarrbuf.

use super::index_cache::{Layout, SharedIndexes};
use crate::errors::{Error, Result};
use std::borrow::Cow;
use std::collections::HashMap;
use std::num::NonZeroU64;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zarrs::array::codec::{ShardingCodecConfiguration, ShardingIndexLocation};
use zarrs::array::{
    Array, ArrayBytes, ArrayToBytesCodecTraits, BytesRepresentation, CodecChain,
    CodecMetadataOptions, CodecOptions, FillValue, data_type,
};
use zarrs::metadata::ConfigurationSerialize;
use zarrs::storage::byte_range::ByteRange;

/// A shard's decoded (offset, size) pairs, or `None` when the shard is not stored.
type CachedIndex = Option<Arc<Vec<u64>>>;

/// Where a shard's index lives and how to decode it.
pub(crate) struct ShardIndex {
    chain: CodecChain,
    location: ShardingIndexLocation,
    chunks_per_shard: Vec<u64>,
    index_shape: Vec<NonZeroU64>,
    encoded_size: u64,
    /// The most encoded bytes an inner chunk may claim: far above what any codec produces
    /// for the chunk's decoded size, so a damaged index cannot ask for an unbounded read.
    max_inner_bytes: u64,
    /// The encoded size every inner chunk has when the inner chain fixes it (no
    /// compression): an index entry of another size is damage to that inner chunk, which
    /// [`Self::inner_range`] refuses.
    exact_inner_bytes: Option<u64>,
    /// Check the index's own checksum (the read's `validate_checksums`, as zarrs does).
    validate_checksums: bool,
    cache: Mutex<HashMap<Vec<u64>, CachedIndex>>,
    /// The process's cache of this array's indexes in this store object, when the read
    /// shares them ([`Self::shared_with`]).
    shared: Option<SharedIndexes>,
    /// The shortest index request of this read (µs; `u64::MAX`: none yet).
    round_trip_us: AtomicU64,
}

/// The most bytes a shard index may take unless a read allows more: 2^24 inner chunks per
/// shard, far more than any layout that reads well needs (zarr writers default to a few
/// thousand), and within the 256 MiB of memory a command may take beyond its chunks.
/// The index's size follows from the metadata alone (16 bytes per inner chunk, and its
/// checksum), so metadata asking for more is damaged or hostile: a shard file of that size
/// (sparse, or a 4 GiB index in a 4 GiB file) would otherwise be read and decoded whole.
pub(crate) const MAX_INDEX_BYTES: u64 = 256 << 20;

/// Refuses a shard index of `encoded_size` bytes (shards of `chunks_per_shard` inner
/// chunks) larger than [`MAX_INDEX_BYTES`] (or `max_bytes`, when a read allows more), or
/// than half the memory this process may still take: it is read by range and decoded to as
/// many bytes again.
fn check_index_size<S: ?Sized>(
    array: &Array<S>,
    encoded_size: u64,
    chunks_per_shard: &[u64],
    max_bytes: Option<u64>,
) -> std::result::Result<(), String> {
    let limit = max_bytes.map_or(MAX_INDEX_BYTES, |m| m.max(MAX_INDEX_BYTES));
    let room = crate::memory_limit::available_bytes().unwrap_or(u64::MAX) / 2;
    let bound = limit.min(room);
    if encoded_size <= bound {
        return Ok(());
    }
    let first = array.chunk_key(&vec![0; chunks_per_shard.len()]);
    Err(format!(
        "its shards (the first at key {first}) hold {} inner chunks each, so each shard's \
         index takes {encoded_size} bytes, more than the {bound} bytes a shard index may \
         take ({}); the metadata is damaged, or the shards need fewer, larger inner chunks \
         (a read may allow a larger index with --memory or ReadOptions::with_max_bytes)",
        chunks_per_shard.iter().product::<u64>(),
        if bound == limit {
            "the limit on shard indexes"
        } else {
            "half the memory this process may still take"
        }
    ))
}

impl ShardIndex {
    /// Reads the sharding configuration of an exclusively sharded array, for decoding its
    /// indexes with their checksums validated (as `check` and the shard encoder do); its
    /// shard index may take at most [`MAX_INDEX_BYTES`] (see [`check_index_size`]).
    pub(crate) fn new<S: ?Sized>(array: &Array<S>) -> Result<Self> {
        Self::with_limit(array, true, None)
    }

    /// [`Self::new`] for a read whose output may take `max_bytes` (`ReadOptions::max_bytes`,
    /// the CLI's `--memory`): the shard index may take that much too when it is more than
    /// [`MAX_INDEX_BYTES`].
    pub(crate) fn with_limit<S: ?Sized>(
        array: &Array<S>,
        validate_checksums: bool,
        max_bytes: Option<u64>,
    ) -> Result<Self> {
        let bad = |m: String| Error::zarr(array.path().as_str(), m, None);
        let cfg = array
            .codecs()
            .array_to_bytes_codec()
            .configuration_v3(&CodecMetadataOptions::default())
            .ok_or_else(|| bad("the sharding codec has no configuration".into()))?;
        let ShardingCodecConfiguration::V1(sc) =
            ShardingCodecConfiguration::try_from_configuration(cfg)
                .map_err(|e| bad(format!("sharding configuration: {e}")))?
        else {
            return Err(bad("unknown sharding configuration version".into()));
        };
        let shard_shape = array
            .chunk_shape(&vec![0; array.dimensionality()])
            .map_err(|e| bad(e.to_string()))?;
        if shard_shape.len() != sc.chunk_shape.len()
            || shard_shape
                .iter()
                .zip(sc.chunk_shape.iter())
                .any(|(s, c)| s.get() % c.get() != 0)
        {
            return Err(bad(format!(
                "invalid subchunk shape {:?}, it must evenly divide shard shape {:?}",
                sc.chunk_shape.iter().map(|c| c.get()).collect::<Vec<_>>(),
                shard_shape.iter().map(|s| s.get()).collect::<Vec<_>>()
            )));
        }
        let chunks_per_shard: Vec<u64> = shard_shape
            .iter()
            .zip(sc.chunk_shape.iter())
            .map(|(s, c)| s.get() / c.get())
            .collect();
        let elem = array.data_type().fixed_size().unwrap_or(1) as u64;
        let decoded = sc
            .chunk_shape
            .iter()
            .try_fold(elem, |acc, c| acc.checked_mul(c.get()))
            .unwrap_or(u64::MAX);
        let max_inner_bytes = decoded.saturating_mul(16).saturating_add(1 << 20);
        let mut index_shape: Vec<NonZeroU64> = chunks_per_shard
            .iter()
            .map(|&n| NonZeroU64::new(n).ok_or_else(|| bad("a shard holds no inner chunks".into())))
            .collect::<Result<_>>()?;
        index_shape.push(NonZeroU64::new(2).expect("2 > 0"));
        let chain = CodecChain::from_metadata(&sc.index_codecs)
            .map_err(|e| bad(format!("shard index codecs: {e}")))?;
        let encoded_size = match chain
            .encoded_representation(
                &index_shape,
                &data_type::uint64(),
                &FillValue::from(u64::MAX),
            )
            .map_err(|e| bad(format!("shard index size: {e}")))?
        {
            BytesRepresentation::FixedSize(n) => n,
            _ => {
                return Err(bad(
                    "the shard index codecs do not give a fixed-size index".into()
                ));
            }
        };
        check_index_size(array, encoded_size, &chunks_per_shard, max_bytes).map_err(bad)?;
        let exact_inner_bytes = CodecChain::from_metadata(&sc.codecs)
            .ok()
            .and_then(|inner| {
                inner
                    .encoded_representation(&sc.chunk_shape, array.data_type(), array.fill_value())
                    .ok()
            })
            .and_then(|rep| match rep {
                BytesRepresentation::FixedSize(n) => Some(n),
                _ => None,
            });
        Ok(ShardIndex {
            chain,
            exact_inner_bytes,
            location: sc.index_location,
            chunks_per_shard,
            index_shape,
            encoded_size,
            max_inner_bytes,
            validate_checksums,
            cache: Mutex::new(HashMap::new()),
            shared: None,
            round_trip_us: AtomicU64::new(u64::MAX),
        })
    }

    /// This index, sharing decoded indexes with every read of `array`'s shards through the
    /// same store object (`zarr/shard/index_cache.rs`): an index decoded and checked once is
    /// not fetched again.
    pub(crate) fn shared_with<S: ?Sized + Send + Sync + 'static>(
        mut self,
        array: &Array<S>,
    ) -> Self {
        let layout = Layout {
            chunks_per_shard: self.chunks_per_shard.clone(),
            encoded_size: self.encoded_size,
            at_start: self.at_start(),
            max_inner_bytes: self.max_inner_bytes,
            validate_checksums: self.validate_checksums,
        };
        self.shared = Some(SharedIndexes::new(
            &array.storage(),
            array.path().as_str(),
            layout,
        ));
        self
    }

    /// Notes that fetching an index took `took`: the shortest such request is about one round
    /// trip to the store (an index is a few KiB), kept with the shared indexes so that the
    /// next read of the same store object knows it before it fetches anything.
    pub(crate) fn note_round_trip(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX - 1);
        self.round_trip_us.fetch_min(us, Ordering::Relaxed);
        if let Some(shared) = &self.shared {
            shared.note_round_trip(took);
        }
    }

    /// About one round trip to the store: the shortest index request of this read, or of an
    /// earlier read sharing the indexes; `None` before any.
    pub(crate) fn round_trip(&self) -> Option<Duration> {
        match self.round_trip_us.load(Ordering::Relaxed) {
            u64::MAX => self.shared.as_ref()?.round_trip(),
            us => Some(Duration::from_micros(us)),
        }
    }

    /// The byte range of the index inside a shard object.
    pub(crate) fn index_range(&self) -> ByteRange {
        match self.location {
            ShardingIndexLocation::Start => ByteRange::FromStart(0, Some(self.encoded_size)),
            ShardingIndexLocation::End => ByteRange::Suffix(self.encoded_size),
        }
    }

    /// The shard holding inner chunk `inner` (array-wide inner grid) and its index within it.
    pub(crate) fn split(&self, inner: &[u64]) -> (Vec<u64>, Vec<u64>) {
        inner
            .iter()
            .zip(&self.chunks_per_shard)
            .map(|(&i, &n)| (i / n, i % n))
            .unzip()
    }

    /// Decodes an encoded index into (offset, size) pairs.
    pub(crate) fn decode(&self, encoded: &[u8]) -> std::result::Result<Vec<u64>, String> {
        let decoded = self
            .chain
            .decode(
                Cow::Borrowed(encoded),
                &self.index_shape,
                &data_type::uint64(),
                &FillValue::from(u64::MAX),
                &CodecOptions::default().with_validate_checksums(self.validate_checksums),
            )
            .map_err(|e| format!("cannot decode the shard index: {e}"))?
            .into_fixed()
            .map_err(|e| e.to_string())?;
        Ok(decoded
            .chunks_exact(8)
            .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
            .collect())
    }

    /// Encodes (offset, size) pairs (one per inner chunk, C order; `u64::MAX` twice for a
    /// missing one) with the index codecs, for a shard zarrbuf assembles itself.
    pub(crate) fn encode(&self, pairs: &[u64]) -> std::result::Result<Vec<u8>, String> {
        let bytes: Vec<u8> = pairs.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let encoded = self
            .chain
            .encode(
                ArrayBytes::from(bytes),
                &self.index_shape,
                &data_type::uint64(),
                &FillValue::from(u64::MAX),
                &CodecOptions::default(),
            )
            .map_err(|e| format!("cannot encode the shard index: {e}"))?;
        if encoded.len() as u64 != self.encoded_size {
            return Err(format!(
                "the shard index encoded to {} bytes, not the {} its codecs promise",
                encoded.len(),
                self.encoded_size
            ));
        }
        Ok(encoded.into_owned())
    }

    /// Whether the index comes before the inner chunks in a shard object.
    pub(crate) fn at_start(&self) -> bool {
        matches!(self.location, ShardingIndexLocation::Start)
    }

    /// The encoded index's size in bytes.
    pub(crate) fn encoded_size(&self) -> u64 {
        self.encoded_size
    }

    /// Inner chunks per shard along each dimension.
    pub(crate) fn chunks_per_shard(&self) -> &[u64] {
        &self.chunks_per_shard
    }

    /// Checks every entry of a decoded index the way [`Self::inner_range`] would, so a
    /// damaged index is refused before anything (zarrs included) reads through it.
    pub(crate) fn check(&self, index: &[u64]) -> std::result::Result<(), String> {
        for pair in index.chunks_exact(2) {
            let (offset, size) = (pair[0], pair[1]);
            if offset == u64::MAX && size == u64::MAX {
                continue;
            }
            if size == 0 || size > self.max_inner_bytes || offset.checked_add(size).is_none() {
                return Err(format!(
                    "the shard index claims {size} bytes at {offset} for an inner chunk (at \
                     most {} are possible): the index is damaged",
                    self.max_inner_bytes
                ));
            }
        }
        Ok(())
    }

    /// Refuses an entry of `size` bytes when the inner chain fixes another encoded size.
    fn check_exact(&self, size: u64) -> std::result::Result<(), String> {
        match self.exact_inner_bytes {
            Some(exact) if size != exact => Err(format!(
                "the shard index gives an inner chunk {size} bytes, but its encoding takes \
                 exactly {exact}: the index or the shard is damaged"
            )),
            _ => Ok(()),
        }
    }

    /// The cached index of a shard, fetching it with `fetch(range)` on first use.
    pub(crate) fn index_of(
        &self,
        shard: &[u64],
        fetch: impl FnOnce(ByteRange) -> std::result::Result<Option<bytes::Bytes>, String>,
    ) -> std::result::Result<CachedIndex, String> {
        if let Some(hit) = self.cached(shard) {
            return Ok(hit);
        }
        let fetched = fetch(self.index_range())?;
        self.remember(shard, fetched.as_deref())
    }

    /// The index of `shard` if it was read before (by this read, or by an earlier one that
    /// shares its indexes).
    pub(crate) fn cached(&self, shard: &[u64]) -> Option<CachedIndex> {
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(shard).cloned()) {
            return Some(hit);
        }
        let index = self.shared.as_ref()?.get(shard)?;
        if let Ok(mut c) = self.cache.lock() {
            c.insert(shard.to_vec(), Some(index.clone()));
        }
        Some(Some(index))
    }

    /// Decodes and caches the encoded index of `shard` (`None`: the shard is not stored).
    pub(crate) fn remember(
        &self,
        shard: &[u64],
        encoded: Option<&[u8]>,
    ) -> std::result::Result<CachedIndex, String> {
        let index = match encoded {
            None => None,
            Some(bytes) => {
                let index = self.decode(bytes)?;
                // The whole index, once: both read paths refuse the same damaged shards.
                self.check(&index)?;
                let index = Arc::new(index);
                if let Some(shared) = &self.shared {
                    shared.put(shard, index.clone());
                }
                Some(index)
            }
        };
        if let Ok(mut c) = self.cache.lock() {
            c.insert(shard.to_vec(), index.clone());
        }
        Ok(index)
    }

    /// The byte range of inner chunk `within` in a shard with `index`; None when not stored.
    pub(crate) fn inner_range(
        &self,
        index: &[u64],
        within: &[u64],
    ) -> std::result::Result<Option<Range<u64>>, String> {
        let mut flat = 0u64;
        for (&i, &n) in within.iter().zip(&self.chunks_per_shard) {
            flat = flat * n + i;
        }
        let at = flat as usize * 2;
        let (offset, size) = match (index.get(at), index.get(at + 1)) {
            (Some(&o), Some(&s)) => (o, s),
            _ => return Err(format!("inner chunk {within:?} is outside the shard index")),
        };
        if offset == u64::MAX && size == u64::MAX {
            return Ok(None);
        }
        if size == 0 {
            return Err(format!(
                "the shard index gives inner chunk {within:?} 0 bytes: the index is damaged"
            ));
        }
        if size > self.max_inner_bytes {
            return Err(format!(
                "the shard index claims {size} bytes for inner chunk {within:?}, more than any \
                 encoding of it takes ({} at most): the index is damaged",
                self.max_inner_bytes
            ));
        }
        self.check_exact(size)?;
        let end = offset
            .checked_add(size)
            .ok_or_else(|| format!("the shard index gives an impossible range {offset}+{size}"))?;
        Ok(Some(offset..end))
    }
}
