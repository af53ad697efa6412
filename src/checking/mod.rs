//! Checking a stored array for damage: the library side of `zarrbuf check`.
//!
//! Every entry under the array's directory is classified (metadata, chunk, temporary file of
//! a killed write or of one in progress, a key that reads refuse — a directory, special file
//! or link out of the store —, or something else), every chunk inside the chunk grid is
//! decoded on all cores — the inner chunks of a shard one by one when the shard does not
//! decode, so that the damaged ones are named — and each problem becomes one [`Finding`]; a
//! chunk that cannot be read (an I/O error) is *unreadable*, not undecodable. With
//! [`CheckOptions::repair`] temporary files whose writer is gone and chunks that were read and
//! did not decode are removed; a shard with some damaged inner chunks is rewritten with those
//! inner chunks missing (they then read as the fill value) and the good ones kept. Nothing
//! unreadable, nothing outside the array's directory and no other file is ever removed.

mod finding;
mod repair;
mod shard_check;
mod shard_rewrite;
mod vlen_check;
mod walk;

use crate::errors::{Error, Result};
use crate::options::{Progress, ProgressFn};
pub use crate::store::atomic_store::is_temporary_name;
use crate::store::{
    DynArray, LOCK_NAME, Location, OpenOptions, label, lock_dir, node_path, writer_is_gone,
};
use crate::zarr::open_opt;
use finding::guarded;
pub use finding::{Finding, Problem, chunk_indices};
use rayon::prelude::*;
use shard_check::ShardCheck;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use vlen_check::VlenCheck;
use walk::{Entry, Kind, list_entries};
use zarrs::array::{ArrayBytes, ArrayShardedExt, CodecOptions};

/// Options for [`check_array`].
///
/// ```
/// let o = zarrbuf::options::CheckOptions::default().with_repair(true).with_concurrency(2);
/// assert!(o.repair);
/// ```
#[derive(Clone, Default)]
pub struct CheckOptions {
    /// Remove leftovers (of writers that are gone) and undecodable chunks, and rewrite
    /// shards without their damaged inner chunks (default false: only report); holds the
    /// array's write lock while it checks and repairs.
    pub repair: bool,
    /// Threads decoding chunks (default: all cores).
    pub concurrency: Option<usize>,
    /// Called as chunks are checked.
    pub progress: Option<ProgressFn>,
    /// How the store is opened: the version of an icechunk repository to check (default
    /// the tip of branch `main`).
    pub open: OpenOptions,
}

impl CheckOptions {
    /// Repairs what the check finds (see [`CheckOptions::repair`]).
    pub fn with_repair(mut self, repair: bool) -> Self {
        self.repair = repair;
        self
    }

    /// Sets the number of decoding threads (at least 1).
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = Some(n.max(1));
        self
    }

    /// Sets a progress callback.
    pub fn with_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Opens the store with `open` (an icechunk repository's version).
    ///
    /// ```
    /// let o = zarrbuf::options::CheckOptions::default().with_open(zarrbuf::options::OpenOptions::default().with_tag("v1"));
    /// assert!(o.open.version.is_some());
    /// ```
    pub fn with_open(mut self, open: OpenOptions) -> Self {
        self.open = open;
        self
    }
}

/// The result of [`check_array`].
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// `store` or `store:path`.
    pub array: String,
    /// Chunks (shards) decoded.
    pub chunks_checked: usize,
    /// Inner chunks in those shards (0 for unsharded arrays).
    pub inner_chunks_checked: usize,
    /// Bytes of the stored chunks.
    pub stored_bytes: u64,
    /// Every problem found, ordered by key.
    pub findings: Vec<Finding>,
    /// What the repair did, one sentence per key (empty without [`CheckOptions::repair`]).
    pub repaired: Vec<String>,
}

impl CheckReport {
    /// Whether nothing that counts as damage was found.
    pub fn is_clean(&self) -> bool {
        !self.findings.iter().any(|f| f.problem.is_damage())
    }
}

/// A chunk file found under the array, with its grid indices.
struct StoredChunk {
    key: String,
    indices: Vec<u64>,
    bytes: u64,
}

/// Checks the array at `array_path` of the directory store or zip file `location` (a path
/// or `file://` URL): see the module docs for what is checked. A zip file is checked through
/// its listing (it holds no temporary files) and cannot be repaired.
///
/// # Errors
///
/// When the array does not open or its directory cannot be read, when a repair fails, and
/// for a repair of a zip file. Damage is not an error: it is in the report.
///
/// ```
/// let report = zarrbuf::check::check_array("fixtures/data/v3_shard_end.zarr", "", &Default::default())?;
/// assert!(report.is_clean() && report.chunks_checked > 0 && report.inner_chunks_checked > 0);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn check_array(location: &str, array_path: &str, opts: &CheckOptions) -> Result<CheckReport> {
    let parsed = Location::parse(location)?;
    let zip = crate::store::zip_path(&parsed)?.is_some();
    if zip && opts.repair {
        return Err(Error::Unsupported(format!(
            "check --repair rewrites the store; {}",
            crate::store::read_only_sentence(location)
        )));
    }
    // An icechunk repository is checked through its store's listing, like a zip file.
    let icechunk = crate::store::opens_as_icechunk(&parsed, &opts.open)?;
    if icechunk && opts.repair {
        return Err(Error::Unsupported(format!(
            "check --repair rewrites chunks in place, and the icechunk repository {location}              changes only by commits; copy the array into a branch instead (zarrbuf copy              {location} {location} --src-path ARRAY --dst-path ARRAY --overwrite --branch              NAME --message TEXT keeps the chunks that decode)"
        )));
    }
    let listed = zip || icechunk;
    let root = if listed {
        PathBuf::new()
    } else {
        local_root(&parsed)?
    };
    let array = open_opt(location, array_path, &opts.open)?;
    let node = node_path(array_path)?;
    let prefix = node.trim_start_matches('/').to_string();
    let mut report = CheckReport {
        array: label(location, array_path),
        ..Default::default()
    };
    // A repair writes: it holds the array's write lock from the check on, so that no
    // writer changes what was checked before it is repaired.
    let _lock = (opts.repair && !listed)
        .then(|| lock_dir(&root.join(&prefix)))
        .transpose()
        .map_err(|e| Error::store(location, e.to_string(), Some(Box::new(e))))?;
    let entries = if listed {
        list_keys(&array, location, &prefix)?
    } else {
        list_entries(&root, &root.join(&prefix))?
    };
    let dir_root = (!listed).then_some(root.as_path());
    let mut chunks = classify(&array, &prefix, dir_root, entries, &mut report.findings);
    let readable = match crate::zarr::describe(&array) {
        // Variable-length strings and bytes read through their own route.
        Err(_) if crate::zarr::vlen_kind(&array).is_some() => {
            crate::zarr::describe_varlen(&array).map(|_| ())
        }
        other => other.map(|_| ()),
    };
    if let Err(refused) = readable {
        // What `read` and `info` refuse is damage here too; the chunks of an array that
        // does not read are not decoded (zarrs may not even build its shard grid).
        let name = match array.metadata() {
            zarrs::array::ArrayMetadata::V3(_) => "zarr.json",
            zarrs::array::ArrayMetadata::V2(_) => ".zarray",
        };
        report.findings.push(Finding {
            key: if prefix.is_empty() {
                name.into()
            } else {
                format!("{prefix}/{name}")
            },
            inner: None,
            problem: Problem::Metadata,
            detail: format!("zarrbuf's reads refuse this array: {refused}"),
        });
        chunks.clear();
    } else {
        report.stored_bytes = chunks.iter().map(|c| c.bytes).sum();
        report.chunks_checked = chunks.len();
        report.inner_chunks_checked = inner_chunks_per_shard(&array) * chunks.len();
        let damaged = decode_all(&array, &chunks, opts)?;
        report.findings.extend(damaged);
    }
    report
        .findings
        .sort_by(|a, b| (&a.key, &a.inner).cmp(&(&b.key, &b.inner)));
    if opts.repair {
        report.repaired = repair::repair(&array, &root, &root.join(&prefix), &report.findings)?;
    }
    Ok(report)
}

/// The directory of a local store location.
fn local_root(location: &Location) -> Result<PathBuf> {
    let Some(root) = location.local_path() else {
        let scheme = location.scheme();
        return Err(Error::Unsupported(format!(
            "check walks directory stores (paths and file:// URLs), not {scheme}:// stores; \
             object stores write each key atomically, so they hold no torn chunks to find"
        )));
    };
    if !root.is_dir() {
        return Err(Error::store(
            location.as_str(),
            "no such directory; give the path of a zarr store",
            None,
        ));
    }
    Ok(root.to_path_buf())
}

/// Every key under `prefix` of the array's store (a zip file), as paths relative to it, and
/// their sizes.
fn list_keys(array: &DynArray, location: &str, prefix: &str) -> Result<Vec<Entry>> {
    let store = array.storage();
    let failed = |e: zarrs::storage::StorageError| {
        Error::store(
            location,
            format!("cannot list the store: {e}"),
            Some(Box::new(e)),
        )
    };
    let dir = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    let store_prefix = zarrs::storage::StorePrefix::new(dir.as_str())
        .map_err(|e| Error::store(location, e.to_string(), Some(Box::new(e))))?;
    let mut out = Vec::new();
    for key in store.list_prefix(&store_prefix).map_err(failed)? {
        crate::store::check_key(key.as_str(), "the store's listing")?;
        let size = store.size_key(&key).map_err(failed)?.unwrap_or(0);
        let rel = key
            .as_str()
            .strip_prefix(dir.as_str())
            .unwrap_or(key.as_str());
        out.push(Entry {
            rel: rel.to_string(),
            kind: Kind::File(size),
        });
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// The metadata file names a zarr node may hold.
const METADATA_NAMES: [&str; 5] = ["zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"];

/// Sorts the array's entries into chunks (returned) and findings (leftovers and writes in
/// flight, keys outside the grid, keys that reads refuse, unknown files). `root` is the
/// directory store's root (`None` for a listed store).
fn classify(
    array: &DynArray,
    prefix: &str,
    root: Option<&Path>,
    entries: Vec<Entry>,
    findings: &mut Vec<Finding>,
) -> Vec<StoredChunk> {
    let grid = array.chunk_grid_shape().to_vec();
    let mut chunks = Vec::new();
    for Entry { rel, kind } in entries {
        let key = if prefix.is_empty() {
            rel.clone()
        } else {
            format!("{prefix}/{rel}")
        };
        let name = rel.rsplit('/').next().unwrap_or_default();
        let mut finding = |problem, detail: String| {
            findings.push(Finding {
                key: key.clone(),
                inner: None,
                problem,
                detail,
            });
        };
        let indices = chunk_indices(array, &key);
        let is_key = indices.is_some() || METADATA_NAMES.contains(&rel.as_str());
        // A directory that may hold chunk keys (`c`, `c/0`, `0` …).
        let holds_keys = rel
            .split('/')
            .enumerate()
            .all(|(i, p)| (i == 0 && p == "c") || p.bytes().all(|b| b.is_ascii_digit()));
        let bytes = match kind {
            Kind::File(bytes) => bytes,
            Kind::Dir if is_key => {
                finding(Problem::Unreadable, "a directory where a file of the array belongs; reads of this key fail (move the directory away)".into());
                continue;
            }
            Kind::Special(what) if is_key => {
                finding(
                    Problem::Unreadable,
                    format!(
                        "{what} where a file of the array belongs; reads of this key fail (remove it)"
                    ),
                );
                continue;
            }
            Kind::Outside { target, dir } if is_key || (dir && holds_keys) => {
                finding(
                    Problem::Unreadable,
                    format!(
                        "a symbolic link out of the store (to {}); reads refuse every key through it (copy the data in instead)",
                        target.display()
                    ),
                );
                continue;
            }
            Kind::Unexamined(why) => {
                finding(
                    Problem::Unreadable,
                    format!("cannot be examined ({why}); nothing in or behind it was checked"),
                );
                continue;
            }
            Kind::Dir => continue,
            Kind::Special(what) => {
                finding(
                    Problem::Unknown,
                    format!("{what}, not a file of this array"),
                );
                continue;
            }
            Kind::Outside { target, .. } => {
                finding(
                    Problem::Unknown,
                    format!(
                        "a symbolic link out of the store (to {}), not a file of this array",
                        target.display()
                    ),
                );
                continue;
            }
        };
        if METADATA_NAMES.contains(&rel.as_str()) || name == LOCK_NAME {
            continue;
        }
        if is_temporary_name(name) {
            match root {
                Some(root) if !writer_is_gone(name, &root.join(&key)) => finding(
                    Problem::InFlight,
                    format!("temporary file of a write in progress ({bytes} bytes); left alone"),
                ),
                _ => finding(
                    Problem::Leftover,
                    format!("temporary file of a write that was killed ({bytes} bytes)"),
                ),
            }
        } else if let Some(indices) = indices {
            if indices.iter().zip(&grid).any(|(i, n)| i >= n) {
                finding(
                    Problem::OutsideGrid,
                    format!("chunk {indices:?} lies outside the chunk grid {grid:?}"),
                );
            } else {
                chunks.push(StoredChunk {
                    key,
                    indices,
                    bytes,
                });
            }
        } else {
            finding(
                Problem::Unknown,
                "not a chunk, metadata or temporary file of this array".into(),
            );
        }
    }
    chunks
}

/// Inner chunks in one shard (0 for unsharded arrays).
fn inner_chunks_per_shard(array: &DynArray) -> usize {
    let zero = vec![0u64; array.dimensionality()];
    match (array.subchunk_shape(), array.chunk_shape(&zero)) {
        (Some(inner), Ok(shard)) => shard
            .iter()
            .zip(inner.iter())
            .map(|(s, i)| (s.get() / i.get()) as usize)
            .product(),
        _ => 0,
    }
}

/// Decodes every chunk on `opts.concurrency` threads; returns the findings.
fn decode_all(
    array: &DynArray,
    chunks: &[StoredChunk],
    opts: &CheckOptions,
) -> Result<Vec<Finding>> {
    let threads = opts.concurrency.unwrap_or(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| {
            Error::InvalidArgument(format!("cannot start {threads} checking threads: {e}"))
        })?;
    let done = AtomicUsize::new(0);
    let report = |n: usize| {
        if let Some(cb) = &opts.progress {
            cb(Progress {
                chunks_done: n,
                chunks_total: chunks.len(),
                bytes_done: 0,
            });
        }
    };
    report(0);
    let shards = if array.is_sharded() {
        Some(ShardCheck::new(array).map_err(|why| Error::zarr(array.path().as_str(), why, None))?)
    } else {
        None
    };
    let vlen = VlenCheck::of(array);
    let found: Vec<Vec<Finding>> = pool.install(|| {
        chunks
            .par_iter()
            .map(|chunk| {
                let findings = match &shards {
                    Some(shards) => shards.check(array, &chunk.key, chunk.bytes),
                    None => check_chunk(array, chunk, vlen.as_ref()),
                };
                report(done.fetch_add(1, Ordering::Relaxed) + 1);
                findings
            })
            .collect()
    });
    Ok(found.into_iter().flatten().collect())
}

/// Decodes one (unsharded) chunk, unless it is stored larger than any encoding of it; a
/// variable-length chunk as a read decodes it (`vlen`).
fn check_chunk(array: &DynArray, chunk: &StoredChunk, vlen: Option<&VlenCheck>) -> Vec<Finding> {
    let finding = |(problem, detail)| {
        vec![Finding {
            key: chunk.key.clone(),
            inner: None,
            problem,
            detail,
        }]
    };
    if let Some(why) = oversized(array, chunk) {
        return finding((Problem::WrongSize, why));
    }
    if let Some(vlen) = vlen {
        let checked = guarded(|| Ok(array.retrieve_encoded_chunk(&chunk.indices)?)).and_then(
            |encoded| match (encoded, array.chunk_shape(&chunk.indices)) {
                (None, _) => Ok(()),
                (Some(encoded), Ok(shape)) => vlen.check(array, encoded, &shape),
                (Some(_), Err(e)) => Err((Problem::Undecodable, e.to_string())),
            },
        );
        return checked.err().map(finding).unwrap_or_default();
    }
    let options = CodecOptions::default().with_concurrent_target(1);
    if crate::zarr::has_unbounded_codec(&array.codecs()) {
        // zarrs would decode this chunk unbounded: check its header against its size first.
        let checked = guarded(|| Ok(array.retrieve_encoded_chunk(&chunk.indices)?)).and_then(|e| {
            let shape = array
                .chunk_shape(&chunk.indices)
                .map_err(|e| (Problem::Undecodable, e.to_string()))?;
            let (dt, fv) = (array.data_type(), array.fill_value());
            crate::zarr::precheck_chunk(
                &array.codecs(),
                &shape,
                dt,
                fv,
                e.as_deref().unwrap_or(&[]),
            )
            .map_err(|why| (Problem::WrongSize, why))
        });
        if let Err(e) = checked {
            return finding(e);
        }
    }
    match guarded(|| array.retrieve_chunk_opt::<ArrayBytes<'static>>(&chunk.indices, &options)) {
        Ok(decoded) => match crate::zarr::invalid_utf8(array, &decoded) {
            Some(why) => finding((Problem::Undecodable, why)),
            None => Vec::new(),
        },
        Err(e) => finding(e),
    }
}

/// Why a stored chunk is not read at all: it is larger than its chain's encoded size (or
/// bound), or than the memory this process may still take (the rule reads share,
/// `zarr::stored_size_problem`).
fn oversized(array: &DynArray, chunk: &StoredChunk) -> Option<String> {
    crate::zarr::stored_size_problem(array, &chunk.indices, chunk.bytes)
}
