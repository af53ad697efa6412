//! Checking a stored array for damage: the library side of `zarrbuf check`.
//!
//! Every entry under the array's directory is classified (metadata, chunk, temporary file of
//! a killed write or of one in progress, a key that reads refuse — a directory, special file
//! or link out of the store —, or something else), every chunk inside the chunk grid is
//! decoded on all cores — the inner chunks of a shard one by one when the shard does not
//! decode, so that the damaged ones are named — and each problem becomes one [`Finding`]; a
//! chunk that cannot be read (an I/O error, or a request that failed after the store's
//! retries) is *unreadable*, not undecodable.
//!
//! Object stores (`s3://`, `gs://`, `az://`, `http(s)://`) are checked through their listing
//! of the array's prefix, like a zip file; a store that does not list (a plain HTTP server)
//! is checked by walking the chunk grid, every cell's key fetched ([`KeySource`] says which
//! was done). Their chunks are fetched ahead of the decoders, many requests in flight
//! ([`CheckOptions::io_concurrency`]), shards whole. They cannot be repaired here. With
//! [`CheckOptions::repair`] temporary files whose writer is gone and chunks that were read and
//! did not decode are removed; a shard with some damaged inner chunks is rewritten with those
//! inner chunks missing (they then read as the fill value) and the good ones kept. Nothing
//! unreadable, nothing outside the array's directory and no other file is ever removed.

mod check_chunks;
mod check_options;
mod chunk_check;
mod finding;
mod remote_fetch;
mod remote_keys;
mod repair;
mod shard_check;
mod shard_rewrite;
mod vlen_check;
mod walk;

use crate::errors::{Error, Result};
pub use crate::stores::atomic_store::is_temporary_name;
use crate::stores::{
    DynArray, LOCK_NAME, Location, METADATA_NAMES, label, lock_dir, node_path, writer_is_gone,
};
use crate::zarr::open_opt;
use check_chunks::{Fetching, StoredChunk, check_chunks};
pub use check_options::CheckOptions;
pub use finding::{Finding, Problem, chunk_indices};
use remote_keys::{Keys, ObjectKeys};
use std::path::{Path, PathBuf};
use walk::{Entry, Kind, list_entries};
use zarrs::array::ArrayShardedExt;

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
    /// How the keys checked were found: a walk of the directory, the store's listing, or
    /// (a store that does not list) the chunk grid, which cannot see keys outside the grid
    /// or unknown files.
    pub keys: KeySource,
}

/// How [`check_array`] found the keys it checked.
///
/// ```
/// use zarrbuf::check::KeySource;
/// assert!(KeySource::Listing.sees_every_key() && !KeySource::ChunkGrid.sees_every_key());
/// assert_eq!(KeySource::ChunkGrid.name(), "chunk-grid");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeySource {
    /// Every entry under the array's directory was walked, with its kind (a directory
    /// store: a path or `file://` URL).
    #[default]
    Directory,
    /// The store's listing of the array's prefix (a zip file, an icechunk repository, an
    /// object store that lists: S3, GCS, Azure, a WebDAV server).
    Listing,
    /// The store does not list (a plain HTTP server): the key of every cell of the chunk
    /// grid was fetched, a missing one being a chunk not stored. Keys outside the grid and
    /// unknown files cannot be seen this way.
    ChunkGrid,
}

impl KeySource {
    /// A short name for the report: `directory`, `listing` or `chunk-grid`.
    pub fn name(self) -> &'static str {
        match self {
            KeySource::Directory => "directory",
            KeySource::Listing => "listing",
            KeySource::ChunkGrid => "chunk-grid",
        }
    }

    /// Whether every stored key of the array was seen (keys outside the chunk grid and
    /// unknown files included): not on a walk of the chunk grid.
    pub fn sees_every_key(self) -> bool {
        self != KeySource::ChunkGrid
    }
}

impl CheckReport {
    /// Whether nothing that counts as damage was found.
    pub fn is_clean(&self) -> bool {
        !self.findings.iter().any(|f| f.problem.is_damage())
    }
}

/// Checks the array at `array_path` of the store at `location`: a directory store (a path
/// or `file://` URL), a zip file, an icechunk repository, or an object store (`s3://`,
/// `gs://`, `az://`, `http(s)://`); see the module docs for what is checked.
///
/// A directory is walked entry by entry; a zip file, an icechunk repository and an object
/// store that lists (S3, GCS, Azure) are checked through their listing (they hold no
/// temporary files); an object store that does not list (a plain HTTP server, which
/// object_store could list only through WebDAV) is checked by fetching the key of every
/// cell of the chunk grid, a missing key being a chunk that is not stored — keys outside the
/// grid and unknown files are then not seen. [`CheckReport::keys`] says which was done.
/// The chunks of an object store are fetched ahead of the decoding threads, up to
/// [`CheckOptions::io_concurrency`] requests in flight; one that cannot be fetched after the
/// store's retries is an [`Problem::Unreadable`] finding. Only directory stores can be
/// repaired.
///
/// # Errors
///
/// When the array does not open or its directory cannot be read, when an object store's
/// listing fails for another reason than that the store does not list, when a repair fails,
/// and for a repair of anything but a directory store. Damage is not an error: it is in the
/// report.
///
/// ```
/// let report = zarrbuf::check::check_array("fixtures/data/v3_shard_end.zarr", "", &Default::default())?;
/// assert!(report.is_clean() && report.chunks_checked > 0 && report.inner_chunks_checked > 0);
/// assert_eq!(report.keys, zarrbuf::check::KeySource::Directory);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn check_array(location: &str, array_path: &str, opts: &CheckOptions) -> Result<CheckReport> {
    let parsed = Location::parse(location)?;
    let zip = crate::stores::zip_path(&parsed)?.is_some();
    if zip && opts.repair {
        return Err(Error::Unsupported(format!(
            "check --repair rewrites the store; {}",
            crate::stores::read_only_sentence(location)
        )));
    }
    let remote = parsed.is_url();
    if remote && opts.repair {
        return Err(remote_repair_refused(location));
    }
    // An icechunk repository is checked through its store's listing, like a zip file.
    let icechunk = crate::stores::opens_as_icechunk(&parsed, &opts.open)?;
    if icechunk && opts.repair {
        return Err(Error::Unsupported(format!(
            "check --repair rewrites chunks in place, and the icechunk repository {location} \
             changes only by commits; write the damaged chunks again on a branch (zarr-python \
             on a writable session, or zarrbuf's IcechunkWriter) and commit them, or reset \
             the branch to a snapshot from before the damage"
        )));
    }
    let objects = if remote && !icechunk {
        Some(ObjectKeys::open(&parsed, &opts.open)?)
    } else {
        None
    };
    let listed = zip || icechunk || remote;
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
    let metadata_name = match array.metadata() {
        zarrs::array::ArrayMetadata::V3(_) => "zarr.json",
        zarrs::array::ArrayMetadata::V2(_) => ".zarray",
    };
    let (entries, keys) = match &objects {
        Some(objects) => match objects.list(&prefix, metadata_name)? {
            Keys::Listed(entries) => (entries, KeySource::Listing),
            Keys::Unlisted => (Vec::new(), KeySource::ChunkGrid),
        },
        None if listed => (list_keys(&array, location, &prefix)?, KeySource::Listing),
        None => (
            list_entries(&root, &root.join(&prefix))?,
            KeySource::Directory,
        ),
    };
    report.keys = keys;
    let temporaries = match keys {
        KeySource::Directory => Temporaries::Directory(&root),
        // Object stores write each key whole: a name like a temporary file's is no leftover.
        _ if objects.is_some() => Temporaries::None,
        _ => Temporaries::Leftover,
    };
    let mut chunks = if keys == KeySource::ChunkGrid {
        grid_chunks(&array)
    } else {
        classify(&array, &prefix, temporaries, entries, &mut report.findings)
    };
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
        report.findings.push(Finding {
            key: if prefix.is_empty() {
                metadata_name.into()
            } else {
                format!("{prefix}/{metadata_name}")
            },
            inner: None,
            problem: Problem::Metadata,
            detail: format!("zarrbuf's reads refuse this array: {refused}"),
        });
        chunks.clear();
    } else {
        let checked = if remote {
            remote_fetch::check_fetched_ahead(&array, chunks, opts, location, objects.as_ref())?
        } else {
            check_chunks(&array, chunks, opts, &Fetching::Inline)?
        };
        report.stored_bytes = checked.stored_bytes;
        report.chunks_checked = checked.stored;
        report.inner_chunks_checked = inner_chunks_per_shard(&array) * checked.stored;
        report.findings.extend(checked.findings);
    }
    report
        .findings
        .sort_by(|a, b| (&a.key, &a.inner).cmp(&(&b.key, &b.inner)));
    if opts.repair {
        report.repaired = repair::repair(&array, &root, &root.join(&prefix), &report.findings)?;
    }
    Ok(report)
}

/// The refusal of a repair of an object store.
fn remote_repair_refused(location: &str) -> Error {
    Error::Unsupported(format!(
        "check --repair removes and rewrites chunks of a directory store, and {location} is \
         an object store; check it without --repair to find the damaged keys, then upload \
         those chunks again from the data they came from, or delete them (a missing chunk \
         reads as the fill value); or download the array into a directory (e.g. aws s3 \
         sync), run zarrbuf check --repair there and upload the result, deleting the keys \
         the repair removed"
    ))
}

/// The directory of a local store location.
fn local_root(location: &Location) -> Result<PathBuf> {
    let Some(root) = location.local_path() else {
        let scheme = location.scheme();
        return Err(Error::Unsupported(format!(
            "check reads directory stores, zip files, icechunk repositories and object-store \
             URLs, not {scheme}:// stores (a new memory store holds nothing to check)"
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

/// Every cell of the array's chunk grid as a chunk to check, its stored size unknown (a
/// store that does not list: each key is fetched, a missing one is not stored).
fn grid_chunks(array: &DynArray) -> Vec<StoredChunk> {
    let grid = array.chunk_grid_shape().to_vec();
    let mut out = Vec::new();
    if grid.contains(&0) {
        return out;
    }
    let mut indices = vec![0u64; grid.len()];
    loop {
        out.push(StoredChunk {
            key: array.chunk_key(&indices).as_str().to_string(),
            indices: indices.clone(),
            bytes: None,
        });
        // The next cell in C order; done when every dimension wrapped.
        let mut d = grid.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            indices[d] += 1;
            if indices[d] < grid[d] {
                break;
            }
            indices[d] = 0;
        }
    }
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
        crate::stores::check_key(key.as_str(), "the store's listing")?;
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

/// What a key named like a temporary file of zarrbuf's writes is.
#[derive(Clone, Copy)]
enum Temporaries<'a> {
    /// In the directory store rooted here: a write in progress or a leftover, as its writer
    /// is alive or gone.
    Directory(&'a Path),
    /// In a zip file or an icechunk repository (a copy of a directory): a leftover.
    Leftover,
    /// In an object store, which writes each key whole: an unknown key like any other.
    None,
}

/// Sorts the array's entries into chunks (returned) and findings (leftovers and writes in
/// flight, keys outside the grid, keys that reads refuse, unknown files).
fn classify(
    array: &DynArray,
    prefix: &str,
    temporaries: Temporaries<'_>,
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
        if is_temporary_name(name) && !matches!(temporaries, Temporaries::None) {
            match temporaries {
                Temporaries::Directory(root) if !writer_is_gone(name, &root.join(&key)) => finding(
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
                    bytes: Some(bytes),
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
