//! Checking one shard by byte range: its index first (read as the metadata sizes it, checked
//! entry by entry), then each inner chunk it lists, read and decoded on its own. From a local
//! store a shard is never read whole, so a 16 GiB (sparse) shard file costs what its index
//! and inner chunks cost, and an index entry claiming 2^63 bytes is a finding, not an
//! allocation. From an object store the fetch stage hands over the whole shard (one request
//! instead of one per inner chunk) and the same ranges are cut out of it ([`ShardBytes`]).

use super::finding::{Finding, Problem, problem_of, storage_problem};
use super::vlen_check::VlenCheck;
use crate::stores::DynArray;
use crate::zarr::{ShardIndex, inner_chain};
use std::borrow::Cow;
use std::sync::Arc;
use zarrs::array::{
    ArrayError, ArrayShardedExt, ArrayToBytesCodecTraits, CodecChain, CodecOptions,
};
use zarrs::storage::StoreKey;
use zarrs::storage::byte_range::ByteRange;

/// A stored shard's decoded index ((offset, size) pairs) and the shard's size in bytes.
pub(super) type StoredIndex = (Vec<u64>, u64);

/// The stored shard being checked.
struct Shard<'a> {
    key: &'a str,
    bytes: u64,
}

/// Where a shard's byte ranges come from.
pub(super) enum ShardBytes {
    /// Read from the array's store range by range (local stores).
    Store,
    /// The whole shard, fetched already (object stores, by the fetch-ahead stage).
    Fetched(bytes::Bytes),
}

impl ShardBytes {
    /// The bytes of `range` of the shard `key`; `None` when the shard is not stored.
    fn get(
        &self,
        array: &DynArray,
        key: &StoreKey,
        range: ByteRange,
    ) -> Result<Option<bytes::Bytes>, (Problem, String)> {
        match self {
            ShardBytes::Store => array
                .storage()
                .get_partial(key, range)
                .map_err(|e| storage_problem(&e)),
            ShardBytes::Fetched(whole) => {
                // Worked out here rather than by `ByteRange::to_range`, which overflows on a
                // suffix longer than the shard.
                let size = whole.len() as u64;
                let wanted = match range {
                    ByteRange::FromStart(start, None) => Some(start..size),
                    ByteRange::FromStart(start, Some(n)) => start.checked_add(n).map(|e| start..e),
                    ByteRange::Suffix(n) => size.checked_sub(n).map(|s| s..size),
                };
                let cut = wanted
                    .filter(|r| r.start <= r.end && r.end <= size)
                    .and_then(|r| {
                        Some(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?)
                    });
                match cut {
                    Some(r) => Ok(Some(whole.slice(r))),
                    None => Err((
                        Problem::WrongSize,
                        format!("a range ({range:?}) lies past the end of the {size}-byte shard"),
                    )),
                }
            }
        }
    }
}

/// What every shard of an array shares: the index's layout and the inner chunks' chain.
pub(super) struct ShardCheck {
    index: ShardIndex,
    chain: Arc<CodecChain>,
    /// How a variable-length array's inner chunks decode (as reads decode them).
    vlen: Option<VlenCheck>,
}

impl ShardCheck {
    /// The shard layout of `array` (a sharded array), or why it cannot be checked.
    pub(super) fn new(array: &DynArray) -> Result<Self, String> {
        Ok(ShardCheck {
            index: ShardIndex::new(array).map_err(|e| e.to_string())?,
            chain: inner_chain(array)?,
            vlen: VlenCheck::of(array),
        })
    }

    /// The findings of one stored shard (`key`, `bytes` long, its ranges from `source`): the
    /// whole shard when its index is unreadable or damaged (or when every inner chunk is),
    /// else each damaged inner chunk.
    pub(super) fn check(
        &self,
        array: &DynArray,
        key: &str,
        bytes: u64,
        source: &ShardBytes,
    ) -> Vec<Finding> {
        let chunk = Shard { key, bytes };
        let whole = |problem, detail: String| {
            vec![Finding {
                key: chunk.key.to_string(),
                inner: None,
                problem,
                detail,
            }]
        };
        let key = match StoreKey::new(chunk.key) {
            Ok(k) => k,
            Err(e) => return whole(Problem::Undecodable, e.to_string()),
        };
        let size = self.index.encoded_size();
        if chunk.bytes < size {
            return whole(
                Problem::WrongSize,
                format!(
                    "the shard is {} bytes, shorter than its {size}-byte index",
                    chunk.bytes
                ),
            );
        }
        // Not through the index cache of reads: a check visits every shard once.
        let index = source
            .get(array, &key, self.index.index_range())
            .and_then(|encoded| match encoded {
                None => Ok(None),
                // An impossible entry in an index that decodes (its checksum holds) is a
                // finding for its inner chunk alone (`inner_range` refuses it below), so
                // that a repair keeps the others.
                Some(encoded) => self
                    .index
                    .decode(&encoded)
                    .map(Some)
                    .map_err(|why| (Problem::Undecodable, why)),
            });
        let index = match index {
            Ok(Some(index)) => index,
            Ok(None) => return Vec::new(),
            Err((problem, why)) => return whole(problem, why),
        };
        let per = self.index.chunks_per_shard().to_vec();
        let count: u64 = per.iter().product();
        let mut found = Vec::new();
        for flat in 0..count {
            let mut local = vec![0u64; per.len()];
            let mut rest = flat;
            for d in (0..per.len()).rev() {
                local[d] = rest % per[d];
                rest /= per[d];
            }
            let checked = self.read_inner(array, &key, &chunk, &index, &local, source);
            if let Err((problem, detail)) = checked {
                found.push(Finding {
                    key: chunk.key.to_string(),
                    inner: Some(local),
                    problem,
                    detail,
                });
            }
        }
        if count > 0 && found.len() as u64 == count {
            // Nothing in the shard decodes: the shard is the finding.
            let (problem, detail) = (found[0].problem, found[0].detail.clone());
            return whole(problem, detail);
        }
        found
    }

    /// The stored shard `key`'s index (decoded, not checked: see [`Self::read_inner`]) and
    /// size, for a rewrite; `None` when the shard is not stored.
    pub(super) fn index_of(
        &self,
        array: &DynArray,
        key: &str,
    ) -> Result<Option<StoredIndex>, (Problem, String)> {
        let key = StoreKey::new(key).map_err(|e| (Problem::Undecodable, e.to_string()))?;
        let storage = array.storage();
        let Some(bytes) = storage.size_key(&key).map_err(|e| storage_problem(&e))? else {
            return Ok(None);
        };
        if bytes < self.index.encoded_size() {
            return Err((
                Problem::WrongSize,
                "the shard is shorter than its index".into(),
            ));
        }
        let Some(encoded) = storage
            .get_partial(&key, self.index.index_range())
            .map_err(|e| storage_problem(&e))?
        else {
            return Ok(None);
        };
        let index = self
            .index
            .decode(&encoded)
            .map_err(|why| (Problem::Undecodable, why))?;
        Ok(Some((index, bytes)))
    }

    /// The encoded bytes of inner chunk `local` of the shard `key` (`bytes` long, with
    /// `index`), read by its range and checked to decode; `None` when it is not stored.
    pub(super) fn inner_bytes(
        &self,
        array: &DynArray,
        key: &str,
        bytes: u64,
        index: &[u64],
        local: &[u64],
    ) -> Result<Option<bytes::Bytes>, (Problem, String)> {
        let store_key = StoreKey::new(key).map_err(|e| (Problem::Undecodable, e.to_string()))?;
        let chunk = Shard { key, bytes };
        self.read_inner(array, &store_key, &chunk, index, local, &ShardBytes::Store)
    }

    /// The shard index layout (its codecs, size and place), for a rewrite.
    pub(super) fn index(&self) -> &ShardIndex {
        &self.index
    }

    /// Reads inner chunk `local` by its range from `source` (the index entry checked on its
    /// own, by `inner_range`) and decodes it; its encoded bytes when it decodes, `None` when
    /// it is not stored.
    fn read_inner(
        &self,
        array: &DynArray,
        key: &StoreKey,
        chunk: &Shard<'_>,
        index: &[u64],
        local: &[u64],
        source: &ShardBytes,
    ) -> Result<Option<bytes::Bytes>, (Problem, String)> {
        let undecodable = |why: String| (Problem::Undecodable, why);
        let Some(range) = self.index.inner_range(index, local).map_err(undecodable)? else {
            return Ok(None);
        };
        if range.end > chunk.bytes {
            return Err((
                Problem::WrongSize,
                format!(
                    "the shard index places it at bytes {}..{}, past the end of the {}-byte shard",
                    range.start, range.end, chunk.bytes
                ),
            ));
        }
        let bytes = source
            .get(
                array,
                key,
                ByteRange::FromStart(range.start, Some(range.end - range.start)),
            )?
            .ok_or_else(|| undecodable("the shard disappeared while it was checked".into()))?;
        let shape = array
            .subchunk_shape()
            .ok_or_else(|| undecodable("the array is not sharded".into()))?;
        if let Some(vlen) = &self.vlen {
            return vlen
                .check(array, bytes.to_vec(), &shape)
                .map(|()| Some(bytes));
        }
        let options = CodecOptions::default().with_concurrent_target(1);
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.chain.decode(
                Cow::Owned(bytes.to_vec()),
                &shape,
                array.data_type(),
                array.fill_value(),
                &options,
            )
        }));
        match decoded {
            Ok(Ok(decoded)) => match crate::zarr::invalid_utf8(array, &decoded) {
                Some(why) => Err((Problem::Undecodable, why)),
                None => Ok(Some(bytes)),
            },
            Ok(Err(e)) => {
                let e = ArrayError::CodecError(e);
                Err((problem_of(&e), e.to_string()))
            }
            Err(_) => Err(undecodable("zarrs failed on damaged data".into())),
        }
    }
}
