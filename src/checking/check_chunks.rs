//! Checking every chunk of the array on the decoding threads. Each chunk's encoded bytes come
//! either from the thread itself (local stores: a disk answers as fast as a thread asks) or
//! from the pipeline's fetch-ahead stage (object stores: `FetchAhead`, many requests in
//! flight ahead of the threads, within a byte budget). The threads take the chunks in order,
//! as the stage fetches them, so the stage stays ahead of every thread.
//!
//! A chunk whose stored size is known (a directory or a listing) and impossible is a finding
//! before anything is fetched; a chunk whose size is known only once fetched (a walk of the
//! chunk grid) is checked the same way on the bytes that came.

use super::check_options::CheckOptions;
use super::chunk_check::check_chunk;
use super::finding::{Finding, Problem, guarded, storage_problem};
use super::shard_check::{ShardBytes, ShardCheck};
use super::vlen_check::VlenCheck;
use crate::errors::{Error, Result};
use crate::options::Progress;
use crate::pipeline::{AheadLimits, FetchAhead, FetchStage};
use crate::stores::DynArray;
use crate::zarr::{Unit, UnitPlan, UnitSource};
use std::sync::atomic::{AtomicUsize, Ordering};
use zarrs::array::ArrayShardedExt;
use zarrs::storage::StoreKey;

/// A chunk (shard) key to check, with its grid indices and its stored size when the store
/// told it (`None` on a walk of the chunk grid, where the key may not be stored at all).
pub(super) struct StoredChunk {
    pub key: String,
    pub indices: Vec<u64>,
    pub bytes: Option<u64>,
}

/// How the chunks' encoded bytes are fetched.
pub(super) enum Fetching<'a> {
    /// By each decoding thread from the array's store (local stores, whose chunks' sizes are
    /// known); shards range by range.
    Inline,
    /// By the fetch-ahead stage, whole chunks and whole shards (object stores).
    Ahead(FetchStage<'a>, AheadLimits),
}

/// What checking the chunks found.
#[derive(Default)]
pub(super) struct Checked {
    pub findings: Vec<Finding>,
    /// Chunks stored (listed, or found on a walk of the grid).
    pub stored: usize,
    /// Their bytes.
    pub stored_bytes: u64,
}

/// What every decoding thread shares.
struct Context<'a> {
    array: &'a DynArray,
    shards: Option<ShardCheck>,
    vlen: Option<VlenCheck>,
}

/// Checks `chunks` on `opts.concurrency` threads, their bytes fetched as `fetching` says.
pub(super) fn check_chunks(
    array: &DynArray,
    chunks: Vec<StoredChunk>,
    opts: &CheckOptions,
    fetching: &Fetching<'_>,
) -> Result<Checked> {
    let threads = opts.concurrency.unwrap_or(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| {
            Error::InvalidArgument(format!("cannot start {threads} checking threads: {e}"))
        })?;
    let shards = if array.is_sharded() {
        Some(ShardCheck::new(array).map_err(|why| Error::zarr(array.path().as_str(), why, None))?)
    } else {
        None
    };
    let cx = Context {
        array,
        vlen: VlenCheck::of(array),
        shards,
    };
    let total = chunks.len();
    let done = AtomicUsize::new(0);
    let progress = |n: usize| {
        if let Some(cb) = &opts.progress {
            cb(Progress {
                chunks_done: n,
                chunks_total: total,
                bytes_done: 0,
            });
        }
    };
    progress(0);
    // Chunks whose stored size already says what is wrong are never fetched.
    let mut out = Checked::default();
    let mut to_check = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        if let Some(bytes) = chunk.bytes {
            out.stored += 1;
            out.stored_bytes += bytes;
            if let Some(found) = cx.before_fetch(&chunk, bytes, fetching) {
                out.findings.push(found);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1);
                continue;
            }
        }
        to_check.push(chunk);
    }
    let next = AtomicUsize::new(0);
    // Each thread takes the next chunk in order until none is left.
    let work = |fetch: &(dyn Fn(usize) -> Fetched + Sync)| {
        let mut mine = Checked::default();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(chunk) = to_check.get(i) else {
                return mine;
            };
            cx.check(chunk, fetch(i), &mut mine);
            progress(done.fetch_add(1, Ordering::Relaxed) + 1);
        }
    };
    let per_thread = match fetching {
        Fetching::Inline => pool.broadcast(|_| work(&|i| cx.fetch_inline(&to_check[i]))),
        Fetching::Ahead(stage, limits) => {
            let plan = UnitPlan {
                source: UnitSource::Chunk,
                chain: None,
                units: to_check
                    .iter()
                    .map(|c| unit_of(array, &c.indices))
                    .collect(),
            };
            FetchAhead::run(&plan, &plan.units, None, stage, limits.clone(), |ahead| {
                pool.broadcast(|_| {
                    work(&|i| match ahead.fetch(&plan.units[i]) {
                        Ok(Some(bytes)) => Fetched::Whole(Vec::from(bytes)),
                        Ok(None) => Fetched::Missing,
                        Err(Error::Store { message, .. }) => {
                            Fetched::Failed((Problem::Unreadable, message))
                        }
                        Err(e) => Fetched::Failed((Problem::Unreadable, e.to_string())),
                    })
                })
            })
        }
    };
    for mine in per_thread {
        out.findings.extend(mine.findings);
        out.stored += mine.stored;
        out.stored_bytes += mine.stored_bytes;
    }
    Ok(out)
}

/// One chunk's bytes as a thread gets them.
enum Fetched {
    /// The whole stored value.
    Whole(Vec<u8>),
    /// Not stored (reads as the fill value).
    Missing,
    /// Left to the shard check, which reads the ranges it needs from the store.
    ByRange,
    /// Could not be read.
    Failed((Problem, String)),
}

impl Context<'_> {
    /// The finding for a chunk stored as `bytes` bytes that is not fetched at all: an
    /// unsharded chunk larger than any encoding of it (the rule reads share,
    /// `zarr::stored_size_problem`), or a shard an object store would have to hand over
    /// whole that does not fit in memory.
    fn before_fetch(
        &self,
        chunk: &StoredChunk,
        bytes: u64,
        fetching: &Fetching<'_>,
    ) -> Option<Finding> {
        let (problem, detail) = if self.shards.is_none() {
            let why = crate::zarr::stored_size_problem(self.array, &chunk.indices, bytes)?;
            (Problem::WrongSize, why)
        } else if matches!(fetching, Fetching::Ahead(..)) {
            let room = crate::memory_limit::available_bytes()? / 2;
            if bytes <= room {
                return None;
            }
            (
                Problem::Unreadable,
                format!(
                    "a shard of {bytes} bytes, more than this process can fetch whole ({room}); \
                     check a local copy of the array, whose shards are read range by range"
                ),
            )
        } else {
            return None;
        };
        Some(Finding {
            key: chunk.key.clone(),
            inner: None,
            problem,
            detail,
        })
    }

    /// A chunk's bytes read by this thread: a whole unsharded chunk, or nothing for a shard
    /// (read range by range by its check).
    fn fetch_inline(&self, chunk: &StoredChunk) -> Fetched {
        if self.shards.is_some() {
            return Fetched::ByRange;
        }
        match guarded(|| Ok(self.array.retrieve_encoded_chunk(&chunk.indices)?)) {
            Ok(Some(bytes)) => Fetched::Whole(bytes),
            Ok(None) => Fetched::Missing,
            Err(why) => Fetched::Failed(why),
        }
    }

    /// Checks one chunk given its bytes; adds what it finds to `out`.
    fn check(&self, chunk: &StoredChunk, fetched: Fetched, out: &mut Checked) {
        let finding = |(problem, detail): (Problem, String)| Finding {
            key: chunk.key.clone(),
            inner: None,
            problem,
            detail,
        };
        let found = match fetched {
            Fetched::Missing => Vec::new(),
            Fetched::Failed(why) => vec![finding(why)],
            Fetched::ByRange => match self.stored_size(chunk) {
                Ok(Some(bytes)) => self.shards.as_ref().map_or_else(Vec::new, |s| {
                    s.check(self.array, &chunk.key, bytes, &ShardBytes::Store)
                }),
                Ok(None) => Vec::new(),
                Err(why) => vec![finding(why)],
            },
            Fetched::Whole(bytes) => {
                let len = bytes.len() as u64;
                if chunk.bytes.is_none() {
                    // Found on a walk of the grid: its size is known only now.
                    out.stored += 1;
                    out.stored_bytes += len;
                }
                match &self.shards {
                    Some(shards) => shards.check(
                        self.array,
                        &chunk.key,
                        len,
                        &ShardBytes::Fetched(bytes.into()),
                    ),
                    None => match crate::zarr::stored_size_problem(self.array, &chunk.indices, len)
                    {
                        Some(why) if chunk.bytes.is_none() => {
                            vec![finding((Problem::WrongSize, why))]
                        }
                        _ => check_chunk(
                            self.array,
                            &chunk.key,
                            &chunk.indices,
                            bytes,
                            self.vlen.as_ref(),
                        ),
                    },
                }
            }
        };
        out.findings.extend(found);
    }

    /// A shard's stored size: as listed, or asked of the store.
    fn stored_size(&self, chunk: &StoredChunk) -> Result<Option<u64>, (Problem, String)> {
        if let Some(bytes) = chunk.bytes {
            return Ok(Some(bytes));
        }
        let key =
            StoreKey::new(chunk.key.as_str()).map_err(|e| (Problem::Undecodable, e.to_string()))?;
        self.array
            .storage()
            .size_key(&key)
            .map_err(|e| storage_problem(&e))
    }
}

/// The unit of the fetch-ahead stage for the whole chunk at `indices` (only its indices
/// matter to the stage; the rest says which part of the array it covers).
fn unit_of(array: &DynArray, indices: &[u64]) -> Unit {
    let origin = array.chunk_origin(indices).unwrap_or_default();
    let shape = array.chunk_shape(indices).unwrap_or_default();
    let region = origin
        .iter()
        .zip(&shape)
        .map(|(&o, s)| o..o.saturating_add(s.get()))
        .collect();
    Unit {
        indices: indices.to_vec(),
        origin,
        shape,
        region,
    }
}
